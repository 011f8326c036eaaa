//! One case of the persistent-connections experiment (Jonglez et al., IFIP
//! Networking 2019): a client namespace and a server namespace joined by a
//! veth pair whose two directions are each delayed by half the RTT and lose
//! packets at random (see [`super::delayer`]); Pharos serving a zone in the
//! server namespace over UDP, TLS and QUIC; in the client namespace, stubs
//! that send queries on a schedule, over UDP straight to the server, and
//! over UDP to `pharos forward`s (one per lane and encrypted client, each keeping
//! one persistent TLS or QUIC connection to the server).
//!
//! Lanes are independent copies of the same client, run at once to gather
//! more queries in the same time: each has its own forwarders and
//! connections, and the link has no rate limit, so lanes do not interact.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::delayer::{self, Counters, Dropped, Shaping, Target};
use super::netns::{self, Link, SERVER_ADDRESS};
use super::nfqueue::Queue;
use super::stub::{self, Outcome, Planned, Retry};

/// How the stubs reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// Straight to the server over UDP.
    Udp,
    /// Through `pharos forward` over one persistent TLS connection.
    Tls,
    /// Through `pharos forward` over one QUIC connection.
    Quic,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "UDP",
            Transport::Tls => "TLS",
            Transport::Quic => "QUIC",
        }
    }

    /// The IP protocol its packets on the link use.
    fn protocol(self) -> u8 {
        if self == Transport::Tls { 6 } else { 17 }
    }
}

/// One kind of client: a stub asking straight over UDP, or through a
/// forwarder over a transport, with extra `pharos forward` flags (after
/// `--connections 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub name: String,
    pub transport: Transport,
    pub flags: Vec<String>,
}

impl Client {
    /// The transport with the forwarder's defaults.
    pub fn plain(transport: Transport) -> Client {
        Client { name: transport.name().to_owned(), transport, flags: Vec::new() }
    }

    pub fn with_flags(name: &str, transport: Transport, flags: &[&str]) -> Client {
        Client { name: name.to_owned(), transport, flags: flags.iter().map(|flag| flag.to_string()).collect() }
    }
}

/// Which direction loses the packet in a burst experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The packet carrying the burst's first query (client to server).
    Query,
    /// The packet carrying the burst's first answer (server to client).
    Answer,
}

/// What the stubs send.
#[derive(Debug, Clone)]
pub enum Workload {
    /// `queries` per lane, the gaps between them uniform in [min, max], lost
    /// at random as the link's loss rate says.
    Uniform { queries: usize, min: Duration, max: Duration },
    /// Bursts of `size` queries `spacing` apart, every `period`; no random
    /// loss, but the first query's (or answer's) packet of one burst in
    /// `every` is dropped: the head-of-line experiment.
    Bursts { bursts: u32, size: u32, spacing: Duration, period: Duration, lost: Lost, every: u32 },
}

#[derive(Debug, Clone)]
pub struct Experiment {
    /// The `pharos` binary.
    pub pharos: PathBuf,
    pub rtt: Duration,
    /// Loss probability of each direction (a round trip loses about twice).
    pub loss: f64,
    pub seed: u64,
    pub lanes: u32,
    pub clients: Vec<Client>,
    pub workload: Workload,
    /// The stubs' retransmission timeout and tries.
    pub retry: Retry,
    /// Pings (10 ms apart) sent through the shaped link before the stubs
    /// start, to check the emulation: 0 for none.
    pub pings: u32,
    /// Where logs and files go (made, and removed unless `keep`).
    pub work_dir: PathBuf,
    pub keep: bool,
}

/// One stub's queries.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Its place in [`Experiment::clients`].
    pub client: usize,
    pub transport: Transport,
    pub lane: u32,
    pub outcomes: Vec<Outcome>,
}

/// What `ping` measured through the shaped link.
#[derive(Debug, Clone, Default)]
pub struct Ping {
    pub sent: u32,
    pub received: u32,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
}

/// Everything one case measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub streams: Vec<Stream>,
    /// Packets dropped on the way to the server, and to the client.
    pub dropped_to_server: Vec<Dropped>,
    pub dropped_to_client: Vec<Dropped>,
    pub to_server: Counters,
    pub to_client: Counters,
    /// TCP counters' increase during the stubs' run, in each namespace.
    pub tcp_client: BTreeMap<String, u64>,
    pub tcp_server: BTreeMap<String, u64>,
    pub tcp_settings: Vec<(String, String)>,
    pub ping: Option<Ping>,
    /// Each forwarder's counters at the end: (client, lane, counters).
    pub forwarders: Vec<(usize, u32, BTreeMap<String, u64>)>,
    /// How long the stubs ran.
    pub measured: Duration,
}

/// Runs a thread in `namespace`.
fn spawn_in<T: Send + 'static>(namespace: &str, work: impl FnOnce() -> T + Send + 'static) -> JoinHandle<std::io::Result<T>> {
    let namespace = namespace.to_owned();
    std::thread::spawn(move || {
        netns::enter(&namespace)?;
        Ok(work())
    })
}

fn joined<T>(handle: JoinHandle<std::io::Result<T>>) -> anyhow_lite::Result<T> {
    match handle.join() {
        Ok(result) => Ok(result?),
        Err(_) => Err("a thread panicked".into()),
    }
}

/// A small error type, so that this file needs std and libc only.
pub mod anyhow_lite {
    pub type Result<T> = std::result::Result<T, Error>;
    #[derive(Debug)]
    pub struct Error(pub String);
    impl std::fmt::Display for Error {
        fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str(&self.0)
        }
    }
    impl std::error::Error for Error {}
    impl From<std::io::Error> for Error {
        fn from(error: std::io::Error) -> Error {
            Error(error.to_string())
        }
    }
    impl From<&str> for Error {
        fn from(text: &str) -> Error {
            Error(text.to_owned())
        }
    }
    impl From<String> for Error {
        fn from(text: String) -> Error {
            Error(text)
        }
    }
}
use anyhow_lite::{Error, Result};

/// The delayers of both directions; stopped (every held packet accepted)
/// and joined when dropped.
struct Delayers {
    stop: Arc<AtomicBool>,
    armed: Arc<AtomicBool>,
    handles: Vec<JoinHandle<std::io::Result<std::io::Result<Counters>>>>,
    logs: [Arc<Mutex<Vec<Dropped>>>; 2],
}

impl Delayers {
    /// Starts one delayer in each namespace (0: the server's, shaping what
    /// goes to it; 1: the client's) and waits until both have bound their
    /// queue.
    fn start(link: &Link, shapings: [Shaping; 2]) -> Result<Delayers> {
        let stop = Arc::new(AtomicBool::new(false));
        let armed = Arc::new(AtomicBool::new(false));
        let logs = [Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new()))];
        let mut delayers = Delayers { stop: stop.clone(), armed: armed.clone(), handles: Vec::new(), logs: logs.clone() };
        let (ready_sender, ready) = std::sync::mpsc::channel();
        for ((namespace, shaping), log) in [&link.server, &link.client].into_iter().zip(shapings).zip(logs) {
            let (stop, armed, ready_sender) = (stop.clone(), armed.clone(), ready_sender.clone());
            delayers.handles.push(spawn_in(namespace, move || {
                real_time();
                let mut queue = match Queue::open(0, 128, 8192) {
                    Ok(queue) => queue,
                    Err(error) => {
                        let _ = ready_sender.send(Err(error.to_string()));
                        return Err(error);
                    }
                };
                let _ = ready_sender.send(Ok(()));
                delayer::run(&mut queue, &shaping, &armed, &stop, &log)
            }));
        }
        for _ in 0..2 {
            match ready.recv_timeout(Duration::from_secs(10)) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(format!("cannot bind NFQUEUE queue 0: {error}").into()),
                Err(_) => return Err("a delayer did not start".into()),
            }
        }
        Ok(delayers)
    }

    fn finish(mut self) -> Result<[Counters; 2]> {
        self.stop.store(true, Ordering::Relaxed);
        let mut counters = Vec::new();
        for handle in self.handles.drain(..) {
            counters.push(joined(handle)??);
        }
        Ok(counters.try_into().unwrap())
    }
}

impl Drop for Delayers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Gives the calling thread a real-time priority, if it may have one, so
/// that packets leave on time on a busy machine.
fn real_time() {
    let parameters = libc::sched_param { sched_priority: 10 };
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const parameters) };
}

/// Child processes, killed when dropped.
#[derive(Default)]
struct Children(Vec<(String, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A directory removed when dropped unless kept.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n* A 192.0.2.7\n";
const CERTIFICATE: &str = "pharos-tls-certificate.pem";
const FORWARD_FIRST_PORT: u16 = 5400;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !ready()? {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting until {what}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Asks `server` from `namespace` once, with quick retries, and says whether it answered.
fn probe(namespace: &str, server: SocketAddr) -> Result<bool> {
    let handle = spawn_in(namespace, move || {
        let plan = [Planned { at: Duration::ZERO, burst: None }];
        stub::run(server, &plan, Retry { timeout: Duration::from_millis(200), tries: 3 }, "probe", 1)
    });
    Ok(joined(handle)??[0].answered())
}

fn ping(link: &Link, count: u32) -> Result<Ping> {
    let output = Link::exec(&link.client)
        .args(["ping", "-U", "-n", "-q", "-i", "0.01", "-W", "2", "-c", &count.to_string(), &SERVER_ADDRESS.to_string()])
        .stdin(Stdio::null())
        .output()
        .map_err(|error| Error(format!("cannot run ping (Debian package iputils-ping): {error}")))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut result = Ping::default();
    for line in text.lines() {
        if let Some((sent, rest)) = line.split_once(" packets transmitted, ") {
            result.sent = sent.trim().parse().unwrap_or(0);
            result.received = rest.split_whitespace().next().and_then(|received| received.parse().ok()).unwrap_or(0);
        }
        if let Some((_, values)) = line.split_once(" = ") {
            let values: Vec<f64> = values.split(['/', ' ']).filter_map(|value| value.parse().ok()).collect();
            if values.len() >= 3 {
                (result.min_ms, result.avg_ms, result.max_ms) = (values[0], values[1], values[2]);
            }
        }
    }
    if result.sent == 0 {
        return Err(format!("cannot read ping's output: {text}{}", String::from_utf8_lossy(&output.stderr)).into());
    }
    Ok(result)
}

/// A forwarder's counters, from the line it logs on SIGUSR1.
fn forwarder_counters(child: &Child, log: &Path) -> BTreeMap<String, u64> {
    const LINE: &str = "pharos_forward::stats: stats ";
    let before = read(log).matches(LINE).count();
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGUSR1) };
    let _ = wait_for("the forwarder logs its counters", Duration::from_secs(5), || Ok(read(log).matches(LINE).count() > before));
    let text = read(log);
    let Some(line) = text.lines().rfind(|line| line.contains(LINE)) else { return BTreeMap::new() };
    let fields = line.split_whitespace().filter_map(|field| field.split_once('='));
    fields.filter_map(|(name, value)| Some((name.to_owned(), value.parse().ok()?))).collect()
}

fn difference(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after.iter().map(|(name, value)| (name.clone(), value.saturating_sub(before.get(name).copied().unwrap_or(0)))).collect()
}

impl Experiment {
    /// The schedule of one stub. Lanes share their gaps (drawn from the
    /// seed and the lane); in burst workloads every stub starts at its own
    /// offset within the period, so that a dropped packet's time tells
    /// whose burst it hit.
    fn plan(&self, lane: u32, client: usize) -> Vec<Planned> {
        match self.workload {
            Workload::Uniform { queries, min, max } => stub::uniform(queries, min, max, self.seed ^ (u64::from(lane) << 32)),
            Workload::Bursts { bursts, size, spacing, period, .. } => {
                let streams = self.lanes * self.clients.len() as u32;
                let offset = period * (lane * self.clients.len() as u32 + client as u32) / streams;
                let mut plan = stub::bursts(bursts, size, spacing, period);
                plan.iter_mut().for_each(|planned| planned.at += offset);
                plan
            }
        }
    }

    /// Runs the case: makes the namespaces, runs everything, cleans up
    /// (also on error or panic), and returns what was measured.
    pub fn run(&self) -> Result<Report> {
        let _ = std::fs::remove_dir_all(&self.work_dir);
        std::fs::create_dir_all(&self.work_dir)?;
        let work = WorkDir { path: self.work_dir.clone(), keep: self.keep };
        // Declared in this order so that they are dropped in the reverse:
        // processes killed, delayers stopped, namespaces deleted.
        let link = Link::create()?;
        let one_way = self.rtt / 2;
        let target = |lost: Lost| match self.workload {
            Workload::Bursts { lost: which, every, period, .. } if which == lost => {
                Some(Target { idle: period / 2, every, min_udp_payload: 64 })
            }
            _ => None,
        };
        let loss = if matches!(self.workload, Workload::Bursts { .. }) { 0.0 } else { self.loss };
        let shapings = [
            Shaping { delay: one_way, loss, seed: self.seed.wrapping_mul(2).wrapping_add(1), target: target(Lost::Query) },
            Shaping { delay: one_way, loss, seed: self.seed.wrapping_mul(2).wrapping_add(2), target: target(Lost::Answer) },
        ];
        let delayers = Delayers::start(&link, shapings)?;
        let mut children = Children::default();

        // The server, lossless while it starts and the connections are made.
        let dir = &work.path;
        std::fs::write(dir.join("tail.test.zone"), ZONE)?;
        let config = format!(
            "[server]\nlisten = [\"{SERVER_ADDRESS}:53\"]\nthreads = 1\n\n[tls]\nlisten = [\"{SERVER_ADDRESS}:853\"]\nquic_listen = [\"{SERVER_ADDRESS}:853\"]\n\n[[zone]]\norigin = \"tail.test\"\nfile = \"tail.test.zone\"\n"
        );
        std::fs::write(dir.join("pharos.toml"), config)?;
        let server_log = dir.join("server.log");
        let server = Link::exec(&link.server)
            .arg(&self.pharos)
            .args(["serve", "--config"])
            .arg(dir.join("pharos.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&server_log)?)
            .spawn()
            .map_err(|error| Error(format!("cannot start {}: {error}", self.pharos.display())))?;
        children.0.push(("server".into(), server));
        let udp_server = SocketAddr::new(IpAddr::V4(SERVER_ADDRESS), 53);
        wait_for("the server answers", Duration::from_secs(20), || {
            if let Some(status) = children.0[0].1.try_wait()? {
                return Err(format!("the server stopped ({status}): {}", read(&server_log)).into());
            }
            Ok(dir.join(CERTIFICATE).exists() && probe(&link.client, udp_server)?)
        })?;

        // One forwarder per lane and encrypted client.
        let mut targets: Vec<(usize, u32, SocketAddr)> = Vec::new();
        let mut forwarders: Vec<(usize, u32, usize, PathBuf)> = Vec::new();
        for lane in 0..self.lanes {
            for (index, client) in self.clients.iter().enumerate() {
                if client.transport == Transport::Udp {
                    targets.push((index, lane, udp_server));
                    continue;
                }
                let port = FORWARD_FIRST_PORT + forwarders.len() as u16;
                let listen = SocketAddr::from(([127, 0, 0, 1], port));
                let scheme = if client.transport == Transport::Tls { "tls" } else { "quic" };
                let log = dir.join(format!("forward-{index}-{scheme}-{lane}.log"));
                let child = Link::exec(&link.client)
                    .arg(&self.pharos)
                    .args(["forward", "--listen", &listen.to_string()])
                    .args(["--upstream", &format!("{scheme}://{SERVER_ADDRESS}:853"), "--connections", "1", "--ca"])
                    .arg(dir.join(CERTIFICATE))
                    .args(&client.flags)
                    .env("RUST_LOG", "info")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(&log)?)
                    .spawn()?;
                children.0.push((format!("forward {} {lane}", client.name), child));
                forwarders.push((index, lane, children.0.len() - 1, log));
                targets.push((index, lane, listen));
            }
        }
        for (_, _, child, log) in &forwarders {
            wait_for("the forwarder is up", Duration::from_secs(20), || {
                if let Some(status) = children.0[*child].1.try_wait()? {
                    return Err(format!("a forwarder stopped ({status}): {}", read(log)).into());
                }
                Ok(read(log).contains("forwarding DNS"))
            })?;
        }
        // Warm-up, still lossless: every connection made, every RTT measured.
        let warm_ups: Vec<_> = targets
            .iter()
            .map(|&(client, lane, target)| {
                spawn_in(&link.client, move || {
                    let plan = stub::uniform(5, Duration::from_millis(20), Duration::from_millis(40), 0);
                    let name = format!("warm-{client}-{lane}");
                    stub::run(target, &plan, Retry { timeout: Duration::from_secs(2), tries: 5 }, &name, 1)
                })
            })
            .collect();
        for (handle, &(client, lane, _)) in warm_ups.into_iter().zip(&targets) {
            let outcomes = joined(handle)??;
            if !outcomes.iter().all(Outcome::answered) {
                let name = &self.clients[client].name;
                return Err(format!("{name} lane {lane}: the warm-up queries were not all answered: {outcomes:?}").into());
            }
        }

        // Loss on; check the link with ping, then run the stubs.
        delayers.armed.store(true, Ordering::Relaxed);
        let mut report = Report::default();
        if self.pings > 0 {
            report.ping = Some(ping(&link, self.pings)?);
        }
        let counters = |namespace: &str| joined(spawn_in(namespace, netns::tcp_counters));
        let (client_before, server_before) = (counters(&link.client)?, counters(&link.server)?);
        report.tcp_settings = joined(spawn_in(&link.client, netns::tcp_settings))?;
        let started = Instant::now();
        let stubs: Vec<_> = targets
            .iter()
            .map(|&(client, lane, target)| {
                let plan = self.plan(lane, client);
                let retry = self.retry;
                spawn_in(&link.client, move || stub::run(target, &plan, retry, &format!("c{client}-{lane}"), 1))
            })
            .collect();
        for (handle, &(client, lane, _)) in stubs.into_iter().zip(&targets) {
            report.streams.push(Stream { client, transport: self.clients[client].transport, lane, outcomes: joined(handle)?? });
        }
        report.measured = started.elapsed();
        delayers.armed.store(false, Ordering::Relaxed);
        report.tcp_client = difference(&counters(&link.client)?, &client_before);
        report.tcp_server = difference(&counters(&link.server)?, &server_before);
        for (client, lane, child, log) in &forwarders {
            report.forwarders.push((*client, *lane, forwarder_counters(&children.0[*child].1, log)));
        }
        for (name, child) in &mut children.0 {
            if let Some(status) = child.try_wait()? {
                return Err(format!("{name} stopped during the run ({status}); logs in {}", dir.display()).into());
            }
        }
        drop(children);
        report.dropped_to_server = std::mem::take(&mut *delayers.logs[0].lock().unwrap());
        report.dropped_to_client = std::mem::take(&mut *delayers.logs[1].lock().unwrap());
        [report.to_server, report.to_client] = delayers.finish()?;
        drop(link);
        Ok(report)
    }
}

/// The `q`-quantile (0..=1) of latencies where a failure (`None`) counts as
/// longer than any answer; `None` if the quantile falls on a failure.
pub fn quantile(latencies: &[Option<Duration>], q: f64) -> Option<Duration> {
    if latencies.is_empty() {
        return None;
    }
    let mut sorted: Vec<Option<Duration>> = latencies.to_vec();
    sorted.sort_by_key(|latency| latency.unwrap_or(Duration::MAX));
    // Nearest rank: the smallest value with at least q of the values at or below it.
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The latencies of a stub's queries as the application sees them: an
/// answer that is not NOERROR (a forwarder's SERVFAIL) is a failure.
pub fn latencies<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Vec<Option<Duration>> {
    outcomes.into_iter().map(|outcome| if outcome.answered() { outcome.latency } else { None }).collect()
}

/// One client's queries in one case.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub queries: usize,
    /// Sent more than once by the stub.
    pub resent: usize,
    /// No answer after every try.
    pub unanswered: usize,
    /// Answered with an RCODE other than NOERROR (SERVFAIL from a forwarder).
    pub errors: usize,
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    pub p999: Option<Duration>,
    pub max: Option<Duration>,
}

pub fn summary(report: &Report, client: usize) -> Summary {
    let outcomes: Vec<&Outcome> =
        report.streams.iter().filter(|stream| stream.client == client).flat_map(|stream| &stream.outcomes).collect();
    let latencies = latencies(outcomes.iter().copied());
    Summary {
        queries: outcomes.len(),
        resent: outcomes.iter().filter(|outcome| outcome.sent > 1).count(),
        unanswered: outcomes.iter().filter(|outcome| outcome.latency.is_none()).count(),
        errors: outcomes.iter().filter(|outcome| outcome.latency.is_some() && outcome.rcode != Some(0)).count(),
        p50: quantile(&latencies, 0.5),
        p99: quantile(&latencies, 0.99),
        p999: quantile(&latencies, 0.999),
        max: quantile(&latencies, 1.0),
    }
}

/// The head-of-line view of a burst run, for one client.
#[derive(Debug, Clone, Default)]
pub struct HeadOfLine {
    /// Bursts with a targeted drop matched to them, and without.
    pub hit: usize,
    pub control: usize,
    /// Hit bursts where the packet dropped was not the first query's.
    pub lost_elsewhere: usize,
    /// Latency of the query whose packet was lost.
    pub lost: Vec<Option<Duration>>,
    /// Latency of the other queries of hit bursts: not lost themselves.
    pub behind: Vec<Option<Duration>>,
    /// Latency of every query of the bursts without a drop.
    pub control_latencies: Vec<Option<Duration>>,
    /// Per place in the burst (hit bursts): the latencies.
    pub by_place: BTreeMap<u32, Vec<Option<Duration>>>,
}

/// The first sending of each burst's queries: (stream, burst) -> outcomes.
fn bursts_of(report: &Report) -> BTreeMap<(usize, u32), Vec<&Outcome>> {
    let mut bursts: BTreeMap<(usize, u32), Vec<&Outcome>> = BTreeMap::new();
    for (index, stream) in report.streams.iter().enumerate() {
        for outcome in &stream.outcomes {
            if let Some((burst, _)) = outcome.planned.burst {
                bursts.entry((index, burst)).or_default().push(outcome);
            }
        }
    }
    bursts
}

/// Matches each targeted drop to the query whose packet it was: among the
/// queries of every stream over the same IP protocol, the one sent at the
/// drop's time (a lost query) or one one-way delay before it (a lost
/// answer), if one was within 20 ms. Then sorts the queries of `client`.
pub fn head_of_line(experiment: &Experiment, report: &Report, client: usize) -> HeadOfLine {
    let Workload::Bursts { lost, .. } = experiment.workload else { return HeadOfLine::default() };
    let (drops, expected) = match lost {
        Lost::Query => (&report.dropped_to_server, Duration::ZERO),
        Lost::Answer => (&report.dropped_to_client, experiment.rtt / 2),
    };
    let bursts = bursts_of(report);
    // (stream, burst) -> the place of the query whose packet was dropped.
    let mut hits: HashMap<(usize, u32), u32> = HashMap::new();
    for drop in drops.iter().filter(|drop| drop.targeted) {
        let distance = |outcome: &Outcome| {
            let due = outcome.sent_at + expected;
            if due > drop.at { due - drop.at } else { drop.at - due }
        };
        let nearest = bursts
            .iter()
            .filter(|((stream, _), _)| report.streams[*stream].transport.protocol() == drop.flow.protocol)
            .flat_map(|(key, queries)| queries.iter().map(move |outcome| (key, outcome)))
            .min_by_key(|(_, outcome)| distance(outcome));
        if let Some((key, outcome)) = nearest
            && distance(outcome) < Duration::from_millis(20)
        {
            hits.insert(*key, outcome.planned.burst.unwrap().1);
        }
    }
    let mut result = HeadOfLine::default();
    for (key, queries) in bursts.iter().filter(|((stream, _), _)| report.streams[*stream].client == client) {
        let Some(&lost_place) = hits.get(key) else {
            result.control += 1;
            result.control_latencies.extend(latencies(queries.iter().copied()));
            continue;
        };
        result.hit += 1;
        result.lost_elsewhere += usize::from(lost_place != 0);
        for outcome in queries {
            let latency = if outcome.answered() { outcome.latency } else { None };
            let place = outcome.planned.burst.unwrap().1;
            if place == lost_place {
                result.lost.push(latency);
            } else {
                result.behind.push(latency);
            }
            result.by_place.entry(place).or_default().push(latency);
        }
    }
    result
}
