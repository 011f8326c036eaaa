//! xdpgen: a DNS load generator for a veth pair that sends its queries as
//! XDP frames, the way a NIC's driver hands received frames to XDP, so the
//! server's end gets them as xdp_frames (no skb built by a socket, no copy
//! before XDP) and one core can offer far more than a socket client.
//!
//! [`frames`] builds every query of a mix file (dnsload's format and
//! encoding: EDNS on every query) as an Ethernet frame, ID = its index;
//! [`kernel`] loads bpf/xdpgen.bpf.c and attaches it to the client's end:
//! run by BPF_PROG_TEST_RUN in live-frames mode on frames that seem to
//! arrive on the namespace's loopback, it writes query k into a frame and
//! redirects it out of the client's end; on the responses
//! the end receives, it counts them by rcode (and TC, and answers to
//! questions not asked) and drops them. This file sets the program's pace
//! (open loop, `--rate` for `--duration` or `--count`: the program spaces
//! the queries by the kernel clock), spins it until they are sent, waits
//! for the last answers and prints dnsload's JSON summary line.
//!
//! [`run`] is the whole generator (src/main.rs only prints its summary),
//! so a test can run it in-process, from a thread inside the client's
//! namespace. Before it sends, it runs its program on one frame, so a
//! kernel that refuses live-frames test runs stops it at once, with the
//! reason ([`kernel::LiveFramesRefused`]; the command's exit status
//! [`EXIT_LIVE_FRAMES_REFUSED`]); `--count 0` checks just that.
//!
//! ```text
//! ip netns exec CLIENT xdpgen --iface END --server-mac MAC --server 198.51.100.1 \
//!     --source 100.64.0.2 --mix queries.txt --rate 500000 --duration 3
//! ```

pub mod frames;
pub mod kernel;

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use dnsload::query::parse_query_file;

use kernel::{Generator, Responses};

/// The command's exit status when the kernel refuses the live-frames test
/// runs xdpgen sends with ([`kernel::LiveFramesRefused`]).
pub const EXIT_LIVE_FRAMES_REFUSED: i32 = 3;

/// How long past `--duration` the program may take to send what fell due
/// (the CPU may be taken from it at the end).
const SENDING_GRACE: Duration = Duration::from_millis(100);
const RCODE_NAMES: [&str; 6] = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"];

/// The command line.
#[derive(Parser, Debug)]
#[command(name = "xdpgen", about = "DNS queries as XDP frames out of a veth end (BPF_PROG_TEST_RUN live frames), responses counted in XDP")]
pub struct Args {
    /// The client's end of the veth pair (in this network namespace).
    #[arg(long)]
    pub iface: String,
    /// The server's address.
    #[arg(long)]
    pub server: Ipv4Addr,
    /// The MAC address of the server's end (frames go straight to it, no ARP).
    #[arg(long, value_parser = parse_mac)]
    pub server_mac: [u8; 6],
    /// The server's UDP port.
    #[arg(long, default_value_t = 53)]
    pub port: u16,
    /// Source address (repeatable): query k comes from source k mod their number.
    #[arg(long = "source", required = true)]
    pub sources: Vec<Ipv4Addr>,
    /// Query file, one `name TYPE` per line (dnsload's format), at most 65536 lines.
    #[arg(long)]
    pub mix: PathBuf,
    /// Queries per second, open loop.
    #[arg(long)]
    pub rate: f64,
    /// Seconds of sending.
    #[arg(long)]
    pub duration: f64,
    /// Stop after this many queries, if sooner than --duration (0: load,
    /// attach and check that the kernel runs the program, send nothing).
    #[arg(long)]
    pub count: Option<u64>,
    /// Milliseconds to wait for answers after the last query.
    #[arg(long, default_value_t = 200)]
    pub timeout_ms: u64,
}

fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    let octets: Vec<u8> =
        text.split(':').map(|o| u8::from_str_radix(o, 16)).collect::<Result<_, _>>().map_err(|e| format!("{text}: {e}"))?;
    octets.try_into().map_err(|_| format!("{text}: a MAC address has 6 octets"))
}

/// Sends the mix as `args` say, waits for the last answers and returns
/// what was sent and answered.
pub fn run(args: &Args) -> Result<Report> {
    if !(args.rate >= 1.0 && args.rate.is_finite() && args.duration > 0.0 && args.duration.is_finite()) {
        bail!("--rate must be >= 1 and --duration > 0");
    }
    let text = std::fs::read_to_string(&args.mix).with_context(|| format!("reading {}", args.mix.display()))?;
    let queries = parse_query_file(&text).with_context(|| format!("{}", args.mix.display()))?;
    let client_mac = interface_mac(&args.iface)?;
    let path =
        frames::Path { client_mac, server_mac: args.server_mac, sources: args.sources.clone(), server: args.server, port: args.port };
    let mut generator = Generator::load(&args.iface, args.port, &frames::build(&queries, &path)?)?;
    let refused_before = xmit_errors(&args.iface)?;
    let cpu_before = cpu_seconds();
    let sending = send_paced(&mut generator, args)?;
    let responses = await_answers(&generator, sending.sent, Duration::from_millis(args.timeout_ms))?;
    Ok(Report {
        server: format!("{}:{}", args.server, args.port),
        sending,
        responses,
        refused: xmit_errors(&args.iface)? - refused_before,
        cpu_s: cpu_seconds() - cpu_before,
    })
}

/// What was sent.
pub struct Sending {
    pub sent: u64,
    /// Queries that fell due while the generator's CPU was taken away for
    /// longer than a burst the veth's ring holds, or were not sent by the
    /// deadline.
    pub skipped: u64,
    /// Seconds of sending.
    pub elapsed: f64,
}

/// Sends at `--rate` for `--duration` (or `--count` queries): the
/// program paces them; this spins it until they are sent.
fn send_paced(generator: &mut Generator, args: &Args) -> Result<Sending> {
    let total = args.count.unwrap_or(u64::MAX).min((args.rate * args.duration) as u64);
    let deadline = Duration::from_secs_f64(args.duration) + SENDING_GRACE;
    let start = Instant::now();
    generator.pace(args.rate, total)?;
    while generator.progress()?.remaining > 0 && start.elapsed() < deadline {
        generator.spin()?;
    }
    let progress = generator.progress()?;
    Ok(Sending { sent: progress.sent, skipped: progress.skipped + progress.remaining, elapsed: start.elapsed().as_secs_f64() })
}

/// Polls the counters until every query sent is answered, or no answer
/// came for `timeout`.
fn await_answers(generator: &Generator, sent: u64, timeout: Duration) -> Result<Responses> {
    let mut last = generator.responses()?;
    let mut changed = Instant::now();
    while last.answered() + last.unexpected < sent && changed.elapsed() < timeout {
        thread::sleep(Duration::from_millis(1));
        let now = generator.responses()?;
        if now != last {
            changed = Instant::now();
            last = now;
        }
    }
    Ok(last)
}

/// The interface's MAC address, asked of the kernel (SIOCGIFHWADDR) in
/// this thread's network namespace (sysfs shows the mounting process's).
fn interface_mac(interface: &str) -> Result<[u8; 6]> {
    // SAFETY: an ifreq is plain data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    if interface.len() >= request.ifr_name.len() {
        bail!("interface name {interface} is too long");
    }
    for (slot, octet) in request.ifr_name.iter_mut().zip(interface.bytes()) {
        *slot = octet as libc::c_char;
    }
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").context("a socket to ask for the MAC address")?;
    // SAFETY: SIOCGIFHWADDR reads the name and writes the address into `request`.
    if unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&socket), libc::SIOCGIFHWADDR, &mut request) } != 0 {
        bail!("the MAC address of {interface}: {}", std::io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFHWADDR filled the hardware address member.
    let address = unsafe { request.ifr_ifru.ifru_hwaddr.sa_data };
    Ok(std::array::from_fn(|i| address[i] as u8))
}

/// Frames the interface's ndo_xdp_xmit could not put in its peer's ring
/// so far (veth counts them per queue as xdp_xmit_errors in `ethtool -S`).
fn xmit_errors(interface: &str) -> Result<u64> {
    let out = Command::new("ethtool").args(["-S", interface]).output().context("running ethtool -S (Debian package ethtool)")?;
    if !out.status.success() {
        bail!("ethtool -S {interface}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.trim().split_once(':'))
        .filter(|(key, _)| key.ends_with("xdp_xmit_errors"))
        .filter_map(|(_, value)| value.trim().parse::<u64>().ok())
        .sum())
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// A run's outcome.
pub struct Report {
    /// The server's address and port.
    pub server: String,
    pub sending: Sending,
    pub responses: Responses,
    /// Frames the veth's ndo_xdp_xmit refused (the peer's ring was full).
    pub refused: u64,
    /// This process's CPU over the run.
    pub cpu_s: f64,
}

impl Report {
    /// dnsload's summary line, same keys (latency is not measured: null),
    /// plus `refused` (frames the veth's ring had no room for).
    pub fn json(&self) -> String {
        let (s, r) = (&self.sending, &self.responses);
        let answered = r.answered();
        let mut o = String::new();
        let _ = write!(
            o,
            "{{\"server\":\"{}\",\"transport\":\"xdp\",\"mode\":\"open\",\"elapsed_s\":{:.6},\
             \"sent\":{},\"answered\":{},\"lost\":{},\"unexpected\":{},\"truncated\":{},\"refused\":{},\
             \"qps\":{:.1},\"send_qps\":{:.1},\"mean_us\":null,\"p50_us\":null,\"p99_us\":null,\"p999_us\":null,\"max_us\":null,\
             \"cpu_s\":{:.3},\"cpu_util\":{:.3},\"rate_skipped\":{},\"rcodes\":{{",
            self.server,
            s.elapsed,
            s.sent,
            answered,
            s.sent.saturating_sub(answered),
            r.unexpected,
            r.truncated,
            self.refused,
            answered as f64 / s.elapsed,
            s.sent as f64 / s.elapsed,
            self.cpu_s,
            self.cpu_s / s.elapsed,
            s.skipped,
        );
        let named = r.rcodes.iter().enumerate().filter(|(_, n)| **n > 0).map(|(code, n)| match RCODE_NAMES.get(code) {
            Some(name) => format!("\"{name}\":{n}"),
            None => format!("\"RCODE{code}\":{n}"),
        });
        o.push_str(&named.collect::<Vec<_>>().join(","));
        o.push_str("}}");
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let base = ["xdpgen", "--iface", "lo", "--server", "192.0.2.1", "--server-mac", "02:00:00:00:00:01", "--source", "192.0.2.2"];
        Args::parse_from(base.iter().chain(extra))
    }

    #[test]
    fn a_rate_or_duration_that_cannot_be_run_is_refused_before_anything_is_loaded() {
        for bad in [["--rate", "0", "--duration", "1"], ["--rate", "100", "--duration", "0"], ["--rate", "inf", "--duration", "1"]] {
            let args = args(&[&["--mix", "/nonexistent"][..], &bad[..]].concat());
            assert!(run(&args).err().unwrap().to_string().contains("--rate must be >= 1"), "{bad:?}");
        }
    }

    #[test]
    fn a_missing_mix_file_is_named() {
        let args = args(&["--mix", "/nonexistent/mix.txt", "--rate", "100", "--duration", "1"]);
        assert!(format!("{:#}", run(&args).err().unwrap()).contains("reading /nonexistent/mix.txt"));
    }

    #[test]
    fn mac_addresses_parse_and_bad_ones_say_why() {
        assert_eq!(parse_mac("ea:40:02:06:56:5f"), Ok([0xea, 0x40, 2, 6, 0x56, 0x5f]));
        assert!(parse_mac("ea:40:02:06:56").unwrap_err().contains("6 octets"));
        assert!(parse_mac("ea:40:02:06:56:zz").is_err());
    }
}
