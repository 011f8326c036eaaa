//! The BPF side of xdpgen (bpf/xdpgen.bpf.c): loading its program,
//! filling the query map, attaching it to the client's end (where it counts
//! responses, and where attached it makes test runs cheap: see the C
//! file), sending a chunk of queries with a live-frames test run of it,
//! and reading what it counted.

use std::ffi::CString;

use anyhow::{Context, Result, anyhow, bail};
use aya::maps::{Array, PerCpuArray};
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};

/// The frame each live-frames run starts from; keep in step with FRAME
/// in the C program (longer than any query frame).
pub const FRAME: usize = 384;
/// Queries the map holds: the DNS ID names the query, so at most 2^16.
pub const MAX_QUERIES: usize = 65536;
/// The most frames one test run sends: the kernel's limit on a
/// live-frames batch (TEST_XDP_MAX_BATCH in net/bpf/test_run.c), and the
/// veth ring's size (VETH_RING_SIZE), which a longer burst would overrun.
pub const MAX_CHUNK: u32 = 256;
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
    client_mac: [u8; 6],
    pad: [u8; 2],
}

// SAFETY: repr(C), two u32 and eight octets, no implicit padding.
unsafe impl aya::Pod for Cursor {}

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
    /// query map with `queries` and attaches it to `interface`, whose MAC
    /// is `client_mac` (native XDP: on a veth that also makes the end's
    /// NAPI wake for the server's XDP_TX frames).
    pub fn load(interface: &str, client_mac: [u8; 6], server_port: u16, queries: &[QueryFrame]) -> Result<Generator> {
        let object = OBJECT.ok_or_else(|| anyhow!("this xdpgen was built without its BPF programs (clang or libbpf-dev was missing)"))?;
        if queries.is_empty() || queries.len() > MAX_QUERIES {
            bail!("{} queries: xdpgen sends 1 to {MAX_QUERIES} (the DNS ID names the query)", queries.len());
        }
        let ifindex = if_index(interface)?;
        let mut object = EbpfLoader::new()
            .override_global("server_port", &server_port, true)
            .load(object)
            .context("loading xdpgen's BPF object (root needed)")?;
        let mut map: Array<_, QueryFrame> = Array::try_from(object.map_mut("queries").context("no queries map")?)?;
        for (k, query) in queries.iter().enumerate() {
            map.set(k as u32, query, 0)?;
        }
        let mut cursor: Array<_, Cursor> = Array::try_from(object.map_mut("cursor").context("no cursor map")?)?;
        cursor.set(0, Cursor { next: 0, count: queries.len() as u32, client_mac, pad: [0; 2] }, 0)?;
        let program = xdp(&mut object)?;
        program.load().context("the verifier refused xdpgen's program")?;
        program.attach(interface, XdpMode::Driver).with_context(|| format!("attaching xdpgen's program to {interface} (native XDP)"))?;
        // The frame a run starts from is the end's own: the program fills it.
        let mut blank = vec![0; FRAME];
        blank[6..12].copy_from_slice(&client_mac);
        Ok(Generator { object, context: context(ifindex), blank })
    }

    /// Sends the next `frames` queries of the mix out of the interface:
    /// one BPF_PROG_TEST_RUN of the program in live-frames mode.
    pub fn send(&mut self, frames: u32) -> Result<()> {
        let options = TestRunOptions {
            // The frame every page of the run's page pool starts with
            // (once: a recycled page keeps what the last run wrote); the
            // program overwrites it and sets its length.
            data_in: Some(&self.blank),
            // ingress_ifindex: the interface XDP_TX sends out of (the run's
            // frames look received there); data_end must equal the data's
            // length. Live frames take no data_out or ctx_out.
            ctx_in: Some(&self.context),
            // The number of frames, each run once.
            repeat: frames,
            // BPF_F_TEST_XDP_LIVE_FRAMES: XDP_TX really transmits (through
            // the redirect path: veth's ndo_xdp_xmit into the peer's ring,
            // flushed after each batch), and pages are recycled. The batch
            // (frames per flush, at most 256) is the whole chunk, so the
            // chunk reaches the peer in one flush, like a driver's poll.
            attrs: TestRunAttrs::new().xdp_live_frames(frames),
            ..TestRunOptions::default()
        };
        xdp(&mut self.object)?.test_run(options).context(
            "BPF_PROG_TEST_RUN (live frames) of xdpgen's program (ENOSPC: the kernel's XDP memory-model IDs are used up, \
             by the page pools of earlier runs whose frames have not all come back)",
        )?;
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
