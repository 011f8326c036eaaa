//! dnsload: a DNS load generator that outruns the servers under test.
//!
//! UDP uses several connected sockets driven by sendmmsg / recvmmsg from one
//! thread (or `--threads`); TCP pipelines queries over several connections
//! with RFC 7766 framing. Every query can carry a different EDNS Client
//! Subnet. See `dnsload --help`.

mod frame;
mod inflight;
mod run;
mod stats;

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use dnsload::query;

use run::{Job, Outcome, Shared};
use stats::{RCODE_NAMES, Stats};

#[derive(Parser, Debug)]
#[command(name = "dnsload", version, about = "High-rate DNS load generator (UDP sendmmsg/recvmmsg or pipelined TCP, per-query ECS)")]
struct Args {
    /// Server address, `IP:PORT` (or a bare IP for port 53).
    #[arg(long, value_parser = parse_server)]
    server: SocketAddr,
    /// Query file in dnsperf format: `name TYPE` per line.
    #[arg(long)]
    queries: PathBuf,
    /// Stop sending after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop sending after this many queries.
    #[arg(long)]
    max_queries: Option<u64>,
    /// Open loop: send this many queries per second (paced); default is a
    /// closed loop that keeps `--outstanding` queries in flight.
    #[arg(long)]
    rate: Option<f64>,
    /// Use TCP (RFC 7766 framing, pipelined) instead of UDP.
    #[arg(long)]
    tcp: bool,
    /// UDP sockets.
    #[arg(long, default_value_t = 4)]
    sockets: usize,
    /// Source address of the UDP sockets (repeatable: socket i binds to
    /// the i-th mod N), so a server that routes by client address sees
    /// several clients; default: whatever the kernel picks.
    #[arg(long = "source")]
    sources: Vec<IpAddr>,
    /// TCP connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Max queries in flight per socket / connection (closed loop default
    /// 200; with --rate default 65536, the ID space).
    #[arg(long)]
    outstanding: Option<usize>,
    /// Worker threads; sockets / connections are spread over them.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// File of subnets (`203.0.113.0/24`, `2001:db8::/48`); query i carries
    /// subnet i mod N as an EDNS Client Subnet option.
    #[arg(long)]
    ecs_file: Option<PathBuf>,
    /// Set the DNSSEC OK bit (DO=1) in every query.
    #[arg(long)]
    dnssec: bool,
    /// A query unanswered after this long counts as lost.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    json: bool,
}

fn parse_server(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)).map_err(|_| format!("`{s}` is not IP:PORT"))
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("dnsload: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let args = Args::parse();
    let text = std::fs::read_to_string(&args.queries).with_context(|| format!("reading query file {}", args.queries.display()))?;
    let mut queries = query::parse_query_file(&text).with_context(|| format!("{}", args.queries.display()))?;
    if args.dnssec {
        queries.iter_mut().for_each(query::Query::set_dnssec_ok);
    }
    let ecs = match &args.ecs_file {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading ECS file {}", p.display()))?;
            query::parse_ecs_file(&text).with_context(|| format!("{}", p.display()))?
        }
        None => Vec::new(),
    };
    if !args.duration.is_finite() || args.duration <= 0.0 {
        bail!("--duration must be positive");
    }
    if let Some(r) = args.rate
        && (!r.is_finite() || r <= 0.0)
    {
        bail!("--rate must be positive");
    }
    let outstanding = args.outstanding.unwrap_or(if args.rate.is_some() { 65536 } else { 200 });
    if outstanding == 0 || outstanding > 65536 {
        bail!("--outstanding must be between 1 and 65536 (the DNS ID space)");
    }
    let endpoints = if args.tcp { args.connections } else { args.sockets };
    if endpoints == 0 {
        bail!("need at least one socket / connection");
    }
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let threads = args.threads.min(endpoints);
    if args.tcp && !args.sources.is_empty() {
        bail!("--source applies to UDP sockets only");
    }
    if let Some(bad) = args.sources.iter().find(|source| source.is_ipv4() != args.server.is_ipv4()) {
        bail!("--source {bad} is not of the server's address family");
    }

    // Open all sockets / connections up front so that errors surface here.
    let mut udp: Vec<Vec<std::net::UdpSocket>> = (0..threads).map(|_| Vec::new()).collect();
    let mut tcp: Vec<Vec<std::net::TcpStream>> = (0..threads).map(|_| Vec::new()).collect();
    for i in 0..endpoints {
        if args.tcp {
            let s = run::tcp_connect(args.server).with_context(|| format!("connecting to {} over TCP", args.server))?;
            tcp[i % threads].push(s);
        } else {
            let source = (!args.sources.is_empty()).then(|| args.sources[i % args.sources.len()]);
            let s =
                run::udp_socket(args.server, source).with_context(|| format!("opening UDP socket to {} from {source:?}", args.server))?;
            udp[i % threads].push(s);
        }
    }

    let shared = Shared {
        queries: &queries,
        ecs: &ecs,
        epoch: Instant::now(),
        duration_ns: (args.duration * 1e9) as u64,
        timeout_ns: args.timeout_ms * 1_000_000,
        outstanding,
    };
    let total = args.max_queries.unwrap_or(u64::MAX);
    let jobs: Vec<Job> = (0..threads)
        .map(|t| {
            let mine = (t..endpoints).step_by(threads).count();
            Job {
                budget: if total == u64::MAX { u64::MAX } else { total / threads as u64 + u64::from((t as u64) < total % threads as u64) },
                rate: args.rate.map(|r| r * mine as f64 / endpoints as f64),
                seq_first: t as u64,
                seq_step: threads as u64,
            }
        })
        .collect();

    let cpu_start = cpu_seconds();
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .zip(udp.into_iter().zip(tcp))
            .map(|(job, (u, t))| {
                let shared = &shared;
                let server = args.server;
                let tcp_mode = args.tcp;
                scope.spawn(move || if tcp_mode { run::run_tcp(shared, job, server, t) } else { run::run_udp(shared, job, u) })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker thread panicked")).collect()
    });

    let wall = shared.epoch.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let mut stats = Stats::new();
    let mut stop_ns = 0;
    let mut rate_skipped = 0;
    for o in &outcomes {
        rate_skipped += o.rate_skipped;
        stats.merge(&o.stats);
        stop_ns = stop_ns.max(o.stop_ns);
    }
    // Elapsed: until sending stopped or the last answer came, whichever is
    // later (waiting for lost queries does not count).
    let elapsed = stop_ns.max(stats.last_answer_ns).max(1) as f64 / 1e9;
    let report = Report { args: &args, stats: &stats, elapsed, outstanding, threads, cpu, wall, rate_skipped };
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.human());
    }
    Ok(())
}

struct Report<'a> {
    args: &'a Args,
    stats: &'a Stats,
    elapsed: f64,
    outstanding: usize,
    threads: usize,
    /// CPU seconds (user + system) this process used while running.
    cpu: f64,
    /// Wall-clock seconds of the run, waiting for stragglers included.
    wall: f64,
    /// Open loop: scheduled sends skipped because the sender fell behind.
    rate_skipped: u64,
}

/// User + system CPU time of this process so far, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl Report<'_> {
    fn us(&self, ns: u64) -> f64 {
        ns as f64 / 1000.0
    }

    /// (mean, p50, p99, p99.9, max) in microseconds.
    fn latency(&self) -> [f64; 5] {
        let h = &self.stats.hist;
        if h.is_empty() {
            return [0.0; 5];
        }
        [
            h.mean() / 1000.0,
            self.us(h.value_at_quantile(0.5)),
            self.us(h.value_at_quantile(0.99)),
            self.us(h.value_at_quantile(0.999)),
            self.us(h.max()),
        ]
    }

    fn mode(&self) -> String {
        let a = self.args;
        let transport = if a.tcp { format!("tcp, {} connections", a.connections) } else { format!("udp, {} sockets", a.sockets) };
        let lp = match a.rate {
            Some(r) => format!("open loop {r} q/s"),
            None => format!("closed loop, {} outstanding each", self.outstanding),
        };
        let dnssec = if a.dnssec { ", DO=1" } else { "" };
        format!("{transport}, {} thread(s), {lp}{dnssec}", self.threads)
    }

    fn json(&self) -> String {
        let s = self.stats;
        let [mean, p50, p99, p999, max] = self.latency();
        let mut o = String::new();
        let _ = write!(
            o,
            "{{\"server\":\"{}\",\"transport\":\"{}\",\"mode\":\"{}\",\"elapsed_s\":{:.6},\
             \"sent\":{},\"answered\":{},\"lost\":{},\"unexpected\":{},\"truncated\":{},\
             \"send_errors\":{},\"recv_errors\":{},\"conn_failures\":{},\
             \"qps\":{:.1},\"send_qps\":{:.1},\
             \"mean_us\":{:.1},\"p50_us\":{:.1},\"p99_us\":{:.1},\"p999_us\":{:.1},\"max_us\":{:.1},\"cpu_s\":{:.3},\"cpu_util\":{:.3},\"rate_skipped\":{},\"rcodes\":{{",
            self.args.server,
            if self.args.tcp { "tcp" } else { "udp" },
            if self.args.rate.is_some() { "open" } else { "closed" },
            self.elapsed,
            s.sent,
            s.answered,
            s.lost,
            s.unexpected,
            s.truncated,
            s.send_errors,
            s.recv_errors,
            s.conn_failures,
            s.answered as f64 / self.elapsed,
            s.sent as f64 / self.elapsed,
            mean,
            p50,
            p99,
            p999,
            max,
            self.cpu,
            self.cpu / self.wall.max(1e-9),
            self.rate_skipped,
        );
        for (i, (name, n)) in RCODE_NAMES.iter().zip(s.rcodes).enumerate() {
            let _ = write!(o, "{}\"{name}\":{n}", if i > 0 { "," } else { "" });
        }
        o.push_str("}}");
        o
    }

    fn human(&self) -> String {
        let s = self.stats;
        let [mean, p50, p99, p999, max] = self.latency();
        let mut o = String::new();
        let _ = writeln!(o, "dnsload -> {} ({})", self.args.server, self.mode());
        let _ = writeln!(o, "  elapsed      {:.3} s", self.elapsed);
        let _ = writeln!(o, "  sent         {} ({:.0} q/s)", s.sent, s.sent as f64 / self.elapsed);
        let _ = writeln!(o, "  answered     {} ({:.0} q/s)", s.answered, s.answered as f64 / self.elapsed);
        let pct = |n: u64| if s.sent > 0 { 100.0 * n as f64 / s.sent as f64 } else { 0.0 };
        let _ = writeln!(o, "  lost         {} ({:.3}%)", s.lost, pct(s.lost));
        let _ = writeln!(o, "  unexpected   {}", s.unexpected);
        if self.rate_skipped > 0 {
            let _ = writeln!(o, "  rate skipped {} (sender fell behind the --rate schedule)", self.rate_skipped);
        }
        let _ = writeln!(o, "  truncated    {}", s.truncated);
        if s.send_errors + s.recv_errors + s.conn_failures > 0 {
            let _ = writeln!(o, "  errors       send {} recv {} connection {}", s.send_errors, s.recv_errors, s.conn_failures);
        }
        let mut rc = String::new();
        for (name, n) in RCODE_NAMES.iter().zip(s.rcodes) {
            let _ = write!(rc, " {name} {n}");
        }
        let _ = writeln!(o, "  rcodes      {rc}");
        let _ = writeln!(o, "  latency us   mean {mean:.1}  p50 {p50:.1}  p99 {p99:.1}  p99.9 {p999:.1}  max {max:.1}");
        let _ = writeln!(
            o,
            "  client cpu   {:.2} s ({:.0}% of one core over {:.2} s wall)",
            self.cpu,
            100.0 * self.cpu / self.wall.max(1e-9),
            self.wall
        );
        o
    }
}
