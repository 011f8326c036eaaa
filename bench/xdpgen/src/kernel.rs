//! The BPF side of xdpgen (bpf/xdpgen.bpf.c): loading its program,
//! filling the query map, attaching it to the client's end (where it counts
//! responses, and where attached it makes test runs cheap: see the C
//! file), setting the pace the program sends at, spinning it with
//! live-frames test runs, and reading what it sent and counted.

use std::ffi::{CStr, CString};
use std::fmt;

use anyhow::{Context, Result, anyhow, bail};
use aya::maps::{Array, PerCpuArray};
use aya::programs::{ProgramError, TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};

/// The frame each live-frames run starts from; keep in step with FRAME
/// in the C program (longer than any query frame).
pub const FRAME: usize = 384;
/// Queries the map holds: the DNS ID names the query, so at most 2^16.
pub const MAX_QUERIES: usize = 65536;
/// Frames per live-frames batch (flushed to the peer after each): a
/// driver's NAPI budget.
const BATCH: u32 = 64;
/// Frames one test run offers the program, most dropped while it waits
/// for the next query's time: a few milliseconds of spinning, so that
/// runs are few (each holds an XDP memory-model ID for a second or more).
const FRAMES_PER_RUN: u32 = 1 << 16;
/// The cursor's times are in 1/1024 ns (FIXED_POINT in the C program).
const FIXED_POINT: u32 = 10;
const RCODES: usize = 16;

#[cfg(xdpgen_program)]
static OBJECT: Option<&[u8]> = Some(aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdpgen.bpf.o")));
#[cfg(not(xdpgen_program))]
static OBJECT: Option<&[u8]> = None;

/// One query as the C program's `struct query`: the whole frame.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QueryFrame {
    pub len: u32,
    pub question_len: u32,
    pub frame: [u8; FRAME],
}

// SAFETY: repr(C), integers and octets only, no padding (4 + 4 + 384).
unsafe impl aya::Pod for QueryFrame {}

#[repr(C)]
#[derive(Clone, Copy)]
struct Cursor {
    next: u32,
    count: u32,
    due: u64,
    interval: u64,
    remaining: u64,
    sent: u64,
    skipped: u64,
}

// SAFETY: repr(C), two u32 then u64s at 8: no implicit padding.
unsafe impl aya::Pod for Cursor {}

/// How far the program is through the queries it was asked to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub remaining: u64,
    pub sent: u64,
    /// Fell due while the CPU was taken away for longer than a burst the
    /// peer's ring holds: not sent.
    pub skipped: u64,
}

/// What the response counter saw (the C program's `struct counters`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Responses {
    pub rcodes: [u64; RCODES],
    pub truncated: u64,
    pub unexpected: u64,
}

// SAFETY: repr(C), u64 only, no padding.
unsafe impl aya::Pod for Responses {}

impl Responses {
    /// Responses to queries we asked (any rcode).
    pub fn answered(&self) -> u64 {
        self.rcodes.iter().sum()
    }
}

/// The program loaded and attached to the client's end (until this is
/// dropped).
pub struct Generator {
    object: Ebpf,
    context: Vec<u8>,
    blank: Vec<u8>,
}

impl Generator {
    /// Loads the program for responses from `server_port`, fills the
    /// query map with `queries` and attaches it to `interface` (native XDP:
    /// on a veth that also makes the end's NAPI wake for the server's
    /// XDP_TX frames). Its test runs take their frames as if received on
    /// this namespace's loopback, and send them out of `interface`.
    pub fn load(interface: &str, server_port: u16, queries: &[QueryFrame]) -> Result<Generator> {
        let object = OBJECT.ok_or_else(|| anyhow!("this xdpgen was built without its BPF programs (clang or libbpf-dev was missing)"))?;
        if queries.is_empty() || queries.len() > MAX_QUERIES {
            bail!("{} queries: xdpgen sends 1 to {MAX_QUERIES} (the DNS ID names the query)", queries.len());
        }
        let client_ifindex = if_index(interface)?;
        let generator_ifindex = if_index("lo")?;
        let mut object = EbpfLoader::new()
            .override_global("server_port", &server_port, true)
            .override_global("client_ifindex", &client_ifindex, true)
            .override_global("generator_ifindex", &generator_ifindex, true)
            .load(object)
            .context("loading xdpgen's BPF object (root needed)")?;
        let mut map: Array<_, QueryFrame> = Array::try_from(object.map_mut("queries").context("no queries map")?)?;
        for (k, query) in queries.iter().enumerate() {
            map.set(k as u32, query, 0)?;
        }
        let mut cursor: Array<_, Cursor> = Array::try_from(object.map_mut("cursor").context("no cursor map")?)?;
        let idle = Cursor { next: 0, count: queries.len() as u32, due: 0, interval: 0, remaining: 0, sent: 0, skipped: 0 };
        cursor.set(0, idle, 0)?;
        let program = xdp(&mut object)?;
        program.load().context("the verifier refused xdpgen's program")?;
        program.attach(interface, XdpMode::Driver).with_context(|| format!("attaching xdpgen's program to {interface} (native XDP)"))?;
        // The frame a run starts from: the program overwrites what it sends.
        let mut generator = Generator { object, context: context(generator_ifindex), blank: vec![0; FRAME] };
        // One frame first, which the idle program drops: a kernel that
        // refuses live-frames runs says so before anything is sent.
        generator.run_live(1)?;
        Ok(generator)
    }

    /// Asks the program to send `count` queries, one every 1/`rate`
    /// seconds from now.
    pub fn pace(&mut self, rate: f64, count: u64) -> Result<()> {
        let mut cursor: Array<_, Cursor> = Array::try_from(self.object.map_mut("cursor").context("no cursor map")?)?;
        let mut paced = cursor.get(&0, 0)?;
        paced.interval = (1e9 / rate * f64::from(1u32 << FIXED_POINT)) as u64;
        paced.due = monotonic_ns() << FIXED_POINT;
        (paced.remaining, paced.sent, paced.skipped) = (count, 0, 0);
        cursor.set(0, paced, 0)?;
        Ok(())
    }

    /// How far the program is through what [`Generator::pace`] asked.
    pub fn progress(&self) -> Result<Progress> {
        let cursor: Array<_, Cursor> = Array::try_from(self.object.map("cursor").context("no cursor map")?)?;
        let Cursor { remaining, sent, skipped, .. } = cursor.get(&0, 0)?;
        Ok(Progress { remaining, sent, skipped })
    }

    /// Runs the program for a few milliseconds on frames that seem to
    /// arrive on the namespace's loopback: it sends the queries that fall
    /// due meanwhile and drops the other frames.
    pub fn spin(&mut self) -> Result<()> {
        self.run_live(FRAMES_PER_RUN)
    }

    /// One BPF_PROG_TEST_RUN of the program in live-frames mode, on
    /// `frames` frames that seem to arrive on the namespace's loopback.
    fn run_live(&mut self, frames: u32) -> Result<()> {
        let options = TestRunOptions {
            // The frame every page of the run's page pool starts with
            // (once: a recycled page keeps what the last run wrote); the
            // program overwrites it and sets its length.
            data_in: Some(&self.blank),
            // ingress_ifindex: loopback's, which tells the program these
            // frames are its own to fill (see the C file); data_end must
            // equal the data's length. Live frames take no data_out or ctx_out.
            ctx_in: Some(&self.context),
            repeat: frames,
            // BPF_F_TEST_XDP_LIVE_FRAMES: the program's redirect really
            // transmits (veth's ndo_xdp_xmit into the peer's ring, flushed
            // after each batch), and pages are recycled.
            attrs: TestRunAttrs::new().xdp_live_frames(BATCH),
            ..TestRunOptions::default()
        };
        xdp(&mut self.object)?.test_run(options).map_err(explain_live_run_error)?;
        Ok(())
    }

    /// The responses counted so far, summed over CPUs.
    pub fn responses(&self) -> Result<Responses> {
        let counters: PerCpuArray<_, Responses> = PerCpuArray::try_from(self.object.map("counters").context("no counters map")?)?;
        let mut sum = Responses::default();
        for cpu in counters.get(&0, 0)?.iter() {
            for (total, n) in sum.rcodes.iter_mut().zip(cpu.rcodes) {
                *total += n;
            }
            sum.truncated += cpu.truncated;
            sum.unexpected += cpu.unexpected;
        }
        Ok(sum)
    }
}

/// The kernel refused a live-frames test run with EPERM, to root: xdpgen
/// cannot send on this kernel. Upstream Linux has no such refusal
/// (net/bpf/test_run.c checks the flags, the batch size, the context and
/// the frame's size, and answers EINVAL or E2BIG); this one comes after
/// the flags are checked and before the batch size is, whatever the run
/// asks, in any network namespace (measured on the Firecracker guest
/// kernel 6.18.44-fc-v1300), so it is the kernel's build that forbids
/// live frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFramesRefused {
    /// The kernel's release (uname -r).
    pub kernel: String,
}

impl fmt::Display for LiveFramesRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this kernel ({}) refuses BPF_PROG_TEST_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES) with EPERM, \
             to root and whatever the run asks (upstream Linux has no such check: this kernel's build forbids live frames), \
             so xdpgen cannot send here; use a kernel that allows them, or a socket client (bench/fastpath --generator dnsload)",
            self.kernel
        )
    }
}

impl std::error::Error for LiveFramesRefused {}

/// What a failed live-frames test run means, by its errno.
fn explain_live_run_error(error: ProgramError) -> anyhow::Error {
    let errno = match &error {
        ProgramError::SyscallError(call) => call.io_error.raw_os_error(),
        _ => None,
    };
    match errno {
        Some(libc::EPERM) => LiveFramesRefused { kernel: kernel_release() }.into(),
        Some(libc::ENOSPC) => anyhow!(error).context(
            "BPF_PROG_TEST_RUN (live frames) of xdpgen's program: ENOSPC, the kernel's XDP memory-model IDs are used up \
             by the page pools of earlier runs whose frames have not all come back",
        ),
        _ => anyhow!(error).context("BPF_PROG_TEST_RUN (live frames) of xdpgen's program"),
    }
}

/// The running kernel's release, as `uname -r` prints it.
fn kernel_release() -> String {
    // SAFETY: uname fills the struct it is given; its fields are
    // NUL-terminated strings.
    unsafe {
        let mut names = std::mem::zeroed::<libc::utsname>();
        if libc::uname(&mut names) != 0 {
            return "release unknown".to_string();
        }
        CStr::from_ptr(names.release.as_ptr()).to_string_lossy().into_owned()
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock bpf_ktime_get_ns reads.
fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime fills the timespec it is given.
    let now = unsafe {
        let mut now = std::mem::zeroed::<libc::timespec>();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
        now
    };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn xdp(object: &mut Ebpf) -> Result<&mut Xdp> {
    let program = object.program_mut("xdpgen").ok_or_else(|| anyhow!("no program xdpgen in the object"))?;
    Ok(program.try_into()?)
}

fn if_index(interface: &str) -> Result<u32> {
    let name = CString::new(interface).context("interface name")?;
    // SAFETY: a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        bail!("no interface {interface} here: {}", std::io::Error::last_os_error());
    }
    Ok(index)
}

/// The test run's context, struct xdp_md of <linux/bpf.h> as bytes: data
/// 0, data_end the whole blank frame, no metadata, received on queue 0 of
/// `ifindex`, no egress interface.
fn context(ifindex: u32) -> Vec<u8> {
    [0, FRAME as u32, 0, ifindex, 0, 0].iter().flat_map(|field: &u32| field.to_ne_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aya::sys::SyscallError;

    fn failed_run(errno: i32) -> anyhow::Error {
        let io_error = std::io::Error::from_raw_os_error(errno);
        explain_live_run_error(ProgramError::SyscallError(SyscallError { call: "bpf_prog_test_run", io_error }))
    }

    #[test]
    fn a_refused_live_frames_run_names_the_kernel_and_what_to_do() {
        let error = failed_run(libc::EPERM);
        let refused = error.downcast_ref::<LiveFramesRefused>().expect("EPERM is the kernel refusing live frames");
        assert_eq!(refused.kernel, kernel_release());
        let text = error.to_string();
        for needed in ["BPF_F_TEST_XDP_LIVE_FRAMES", "EPERM", &kernel_release(), "--generator dnsload"] {
            assert!(text.contains(needed), "{needed:?} missing from: {text}");
        }
    }

    #[test]
    fn other_failed_runs_keep_their_own_cause() {
        let used_up = failed_run(libc::ENOSPC);
        assert!(used_up.downcast_ref::<LiveFramesRefused>().is_none());
        assert!(format!("{used_up:#}").contains("memory-model IDs are used up"));
        let invalid = format!("{:#}", failed_run(libc::EINVAL));
        assert!(invalid.contains("BPF_PROG_TEST_RUN (live frames)") && !invalid.contains("memory-model"), "{invalid}");
    }
}
