//! The namespaces, links and processes of the experiment, and the delays
//! of one connection on its links (bench/netdelay's NFQUEUE emulation: each
//! link's receiving end holds each packet for the link's one-way delay).
//!
//! ```text
//!  resolver 10.78.0.2 ── 10.78.9.1 ─ 10.78.9.2 Pharos DNS (auth)
//!     │ L/2 both ways
//!  client 10.78.0.1
//!         10.78.1.2 ── A/2 both ways ── 10.78.1.1 dispatcher 1 (SAs on lo; routes the anycast address to replica 1)
//!         │                                   ├─ 10.78.11.1 ── VXLAN ── 10.78.11.2 replica 1 (SAs on vx0, anycast address on lo)
//!         │                                   └─ 10.78.3.1 ── O one way ── 10.78.3.2 dispatcher 2 ── VXLAN ── 10.78.12.2 replica 2
//!         10.78.2i.1 ── P/2 both ways ── 10.78.2i.2 replica i's own address
//! ```
//!
//! L: the DNS query's RTT; A: the RTT to the anycast data center (1); O:
//! data center 1 to 2, one way; P: the RTT to the optimal data center's
//! replica. Inside a data center, no delay (the paper ignores it).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use netdelay::delayer::{self, Shaping};
use netdelay::netns;
use netdelay::nfqueue::Queue;

use crate::model::Draw;

pub const RESOLVER: &str = "10.78.0.2";
pub const AUTH: &str = "10.78.9.2";
pub const ANYCAST: &str = "10.98.0.1";
pub const PORT: u16 = 443;
pub const PREFIX: &str = "10.99.0.0/24";
/// The service whose policy picks data center 1's replica, and the one
/// whose policy picks data center 2's: a draw where anycast is optimal
/// connects to the first, one where it is not to the second.
pub const NEAR: (&str, &str) = ("near.example.test", "10.99.0.5");
pub const FAR: (&str, &str) = ("far.example.test", "10.99.0.6");
const VNI: u32 = 42;
const TUNNEL_PORT: u16 = 4790;
/// The dispatchers' shared tunnel key (hex): a fixed one, for a bench in namespaces of its own.
const TUNNEL_KEY: &str = "9c2e4a6b8d0f1a3c5e7b9d1f2a4c6e8a0b2d4f6a8c1e3a5b7d9f0c2e4a6b8d0f";
const ROLES: [&str; 7] = ["c", "res", "auth", "d1", "d2", "r1", "r2"];

/// A link end that delays what it receives: namespace role, interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delayed {
    /// Client <-> resolver: half the DNS RTT.
    Dns,
    /// Client <-> data center 1: half the anycast RTT.
    Anycast,
    /// Data center 1 -> 2: the overlay's one way.
    Overlay,
    /// Client <-> a replica's own address: half the optimal RTT.
    Optimal,
}

/// (role, interface, queue number in that namespace, delay).
const QUEUES: [(&str, &str, u16, Delayed); 9] = [
    ("c", "cres", 0, Delayed::Dns),
    ("res", "resc", 0, Delayed::Dns),
    ("c", "cd", 1, Delayed::Anycast),
    ("d1", "dc", 0, Delayed::Anycast),
    ("d2", "xd", 0, Delayed::Overlay),
    ("c", "c1", 2, Delayed::Optimal),
    ("c", "c2", 3, Delayed::Optimal),
    ("r1", "rc", 0, Delayed::Optimal),
    ("r2", "rc", 0, Delayed::Optimal),
];

pub struct Topology {
    prefix: String,
    processes: Vec<Child>,
    pub certificates: Vec<PathBuf>,
}

fn ip(args: &str) -> io::Result<()> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let output = Command::new("ip").args(&words).stdin(Stdio::null()).output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("ip {args}: {}", String::from_utf8_lossy(&output.stderr).trim())))
    }
}

impl Topology {
    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.prefix)
    }

    /// Builds the namespaces and starts Pharos's DNS server, the
    /// dispatchers and the replicas (from `pharos`, the binary), with
    /// their configuration in `dir`.
    pub fn build(pharos: &Path, dir: &Path) -> io::Result<Topology> {
        delete_stale();
        let mut topology = Topology { prefix: format!("fig10-{}", std::process::id()), processes: Vec::new(), certificates: Vec::new() };
        for role in ROLES {
            let ns = topology.ns(role);
            ip(&format!("netns add {ns}"))?;
            ip(&format!("-n {ns} link set lo up"))?;
            topology.exec(role, "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 net.ipv4.ip_forward=1")?;
        }
        topology.links()?;
        for (role, interface, queue, _) in QUEUES {
            let rule = format!("iptables -t raw -A PREROUTING -i {interface} -j NFQUEUE --queue-num {queue}");
            topology.exec(role, &rule)?;
        }
        topology.start(pharos, dir)?;
        Ok(topology)
    }

    fn links(&self) -> io::Result<()> {
        self.veth("c", "cres", "10.78.0.1/24", "res", "resc", "10.78.0.2/24")?;
        self.veth("res", "resa", "10.78.9.1/24", "auth", "ares", "10.78.9.2/24")?;
        self.veth("c", "cd", "10.78.1.2/24", "d1", "dc", "10.78.1.1/24")?;
        self.veth("d1", "dx", "10.78.3.1/24", "d2", "xd", "10.78.3.2/24")?;
        let (c, d1, r1) = (self.ns("c"), self.ns("d1"), self.ns("r1"));
        for (_, address) in [NEAR, FAR] {
            ip(&format!("-n {d1} addr add {address}/32 dev lo"))?;
        }
        ip(&format!("-n {c} route add {PREFIX} via 10.78.1.1"))?;
        ip(&format!("-n {c} route add {ANYCAST}/32 via 10.78.1.1"))?;
        for i in [1, 2] {
            let replica = format!("r{i}");
            self.veth(["d1", "d2"][i - 1], &format!("d{i}"), &format!("10.78.1{i}.1/24"), &replica, "rd", &format!("10.78.1{i}.2/24"))?;
            self.veth("c", &format!("c{i}"), &format!("10.78.2{i}.1/24"), &replica, "rc", &format!("10.78.2{i}.2/24"))?;
            let ns = self.ns(&replica);
            ip(&format!("-n {ns} link add vx0 type vxlan id {VNI} dstport 4789 local 10.78.1{i}.2 dev rd"))?;
            ip(&format!("-n {ns} link set vx0 address 02:00:00:00:00:0{i} up"))?;
            for (_, address) in [NEAR, FAR] {
                ip(&format!("-n {ns} addr add {address}/32 dev vx0"))?;
            }
            ip(&format!("-n {ns} route add 10.78.1.0/24 via 10.78.2{i}.1"))?;
        }
        // Anycast alone: replica 1 holds the anycast address and answers
        // from it back through data center 1, over the anycast path.
        ip(&format!("-n {r1} addr add {ANYCAST}/32 dev lo"))?;
        ip(&format!("-n {d1} route add {ANYCAST}/32 via 10.78.11.2"))?;
        ip(&format!("-n {r1} rule add from {ANYCAST} lookup 100"))?;
        ip(&format!("-n {r1} route add default via 10.78.11.1 table 100"))
    }

    fn veth(&self, a: &str, a_name: &str, a_address: &str, b: &str, b_name: &str, b_address: &str) -> io::Result<()> {
        let (a, b) = (self.ns(a), self.ns(b));
        ip(&format!("link add {a_name} netns {a} type veth peer name {b_name} netns {b}"))?;
        for (ns, name, address) in [(&a, a_name, a_address), (&b, b_name, b_address)] {
            ip(&format!("-n {ns} addr add {address} dev {name}"))?;
            ip(&format!("-n {ns} link set {name} up"))?;
        }
        Ok(())
    }

    fn exec(&self, role: &str, command: &str) -> io::Result<()> {
        ip(&format!("netns exec {} {command}", self.ns(role)))
    }

    fn start(&mut self, pharos: &Path, dir: &Path) -> io::Result<()> {
        let zone = dir.join("example.test.zone");
        std::fs::write(
            &zone,
            format!(
                "$ORIGIN example.test.\n$TTL 60\n@ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\nns A {AUTH}\n{} A 10.78.21.2\n{} A 10.78.22.2\n",
                NEAR.0.trim_end_matches(".example.test"),
                FAR.0.trim_end_matches(".example.test")
            ),
        )?;
        let zone_flag = format!("example.test.={}", zone.display());
        self.spawn("auth", pharos, &["serve", "--listen", &format!("{AUTH}:53"), "--zone", &zone_flag, "--threads", "1"], false)?;
        for i in [1, 2] {
            let certificate = dir.join(format!("r{i}.der"));
            let args = [
                "replica",
                "--listen",
                &format!("10.78.2{i}.2:{PORT}"),
                "--service-address",
                [NEAR, FAR][i - 1].1,
                "--replica-id",
                &i.to_string(),
                "--ttl",
                "60",
                "--name",
                [NEAR, FAR][i - 1].0,
                "--cert-out",
                certificate.to_str().expect("a UTF-8 temporary path"),
            ];
            self.spawn(&format!("r{i}"), pharos, &args, true)?;
            self.certificates.push(certificate);
        }
        for datacenter in [1, 2] {
            let config = dir.join(format!("dispatcher{datacenter}.toml"));
            std::fs::write(&config, dispatcher_config(datacenter))?;
            self.spawn(&format!("d{datacenter}"), pharos, &["dispatcher", "--config", config.to_str().expect("a UTF-8 path")], true)?;
        }
        Ok(())
    }

    /// Starts `pharos ARGS` in `role`'s namespace; with `ready_line`, waits
    /// for its first line (its port: it is listening).
    fn spawn(&mut self, role: &str, pharos: &Path, args: &[&str], ready_line: bool) -> io::Result<()> {
        let mut child = netns::Link::exec(&self.ns(role))
            .arg(pharos)
            .args(args)
            .stdout(if ready_line { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::null())
            .spawn()?;
        if ready_line {
            let stdout = child.stdout.take().expect("piped");
            let (send, receive) = mpsc::channel();
            // After the first line the output is drained, so that the
            // process never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut lines = io::BufRead::lines(io::BufReader::new(stdout));
                let _ = send.send(lines.next());
                lines.for_each(drop);
            });
            self.processes.push(child);
            match receive.recv_timeout(Duration::from_secs(10)) {
                Ok(Some(Ok(_))) => {}
                _ => return Err(io::Error::other(format!("pharos {} in {role} did not start within 10 s", args[0]))),
            }
        } else {
            self.processes.push(child);
        }
        Ok(())
    }

    /// Runs `work` with each link delaying as `draw` says.
    pub fn with_delays<T>(&self, draw: &Draw, work: impl FnOnce() -> T) -> io::Result<T> {
        let stop = Arc::new(AtomicBool::new(false));
        let (bound_send, bound) = mpsc::channel();
        let delayers: Vec<JoinHandle<io::Result<()>>> = QUEUES
            .iter()
            .map(|&(role, _, queue, kind)| {
                let (ns, stop, bound_send) = (self.ns(role), stop.clone(), bound_send.clone());
                let delay = Duration::from_secs_f64(one_way_ms(draw, kind) / 1000.0);
                std::thread::spawn(move || {
                    let opened = netns::enter(&ns).and_then(|()| Queue::open(queue, 128, 8192));
                    let mut queue = match opened {
                        Ok(queue) => queue,
                        Err(error) => {
                            let _ = bound_send.send(false);
                            return Err(error);
                        }
                    };
                    let _ = bound_send.send(true);
                    let shaping = Shaping { delay, loss: 0.0, seed: 0, target: None };
                    delayer::run(&mut queue, &shaping, &AtomicBool::new(false), &stop, &Mutex::new(Vec::new())).map(drop)
                })
            })
            .collect();
        let all_bound = (0..QUEUES.len()).all(|_| bound.recv_timeout(Duration::from_secs(5)) == Ok(true));
        let result = all_bound.then(work);
        stop.store(true, Ordering::Relaxed);
        for delayer in delayers {
            delayer.join().map_err(|_| io::Error::other("a delayer panicked"))??;
        }
        result.ok_or_else(|| io::Error::other("an NFQUEUE queue did not open within 5 s"))
    }
}

fn one_way_ms(draw: &Draw, kind: Delayed) -> f64 {
    match kind {
        Delayed::Dns => draw.dns_rtt / 2.0,
        Delayed::Anycast => draw.anycast_rtt / 2.0,
        Delayed::Overlay => draw.overlay,
        Delayed::Optimal => draw.optimal_rtt / 2.0,
    }
}

/// Data center `datacenter`'s dispatcher: NEAR's replica is replica 1 in
/// data center 1, FAR's replica 2 in data center 2.
fn dispatcher_config(datacenter: usize) -> String {
    let peer = 3 - datacenter;
    let mut text = format!(
        "port = {PORT}\nprefix = \"{PREFIX}\"\nconflicts = \"{} {}\\n{} {}\"\nvni = {VNI}\ndatacenter = \"dc{datacenter}\"\n\
         tunnel_port = {TUNNEL_PORT}\ntunnel_key = \"{TUNNEL_KEY}\"\n[[peer]]\ndatacenter = \"dc{peer}\"\naddress = \"10.78.3.{peer}\"\n",
        NEAR.0, NEAR.1, FAR.0, FAR.1
    );
    for (i, (name, _)) in [(1, NEAR), (2, FAR)] {
        text += &format!(
            "[[service]]\nname = \"{name}\"\n[[service.replica]]\nid = {i}\ndatacenter = \"dc{i}\"\naddress = \"10.78.2{i}.2\"\n\
             vtep = \"10.78.1{i}.2\"\nmac = \"02:00:00:00:00:0{i}\"\nweight = 1\n"
        );
    }
    text
}

/// Deletes the namespaces of runs killed before they could (their process
/// is gone).
fn delete_stale() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("fig10-").and_then(|rest| rest.split('-').next()).and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            eprintln!("figure10: deleting the stale namespace {name}");
            let _ = ip(&format!("netns del {name}"));
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for child in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        for role in ROLES {
            let _ = ip(&format!("netns del {}", self.ns(role)));
        }
    }
}
