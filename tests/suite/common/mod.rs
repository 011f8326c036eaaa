//! The test kit the suite shares: run the real `pharos` binary on a
//! free loopback port with a config (its regions and services written with
//! [`declarations::Declarations`]), wait until it answers, query it, stop it on drop.
//! Temporary directories come from `tempfile`; the conformance harness
//! ([`support`], Pharos beside Knot DNS and NSD) takes its ports from
//! [`free_port`] too. A real PostgreSQL to keep state in comes from
//! [`postgres::Postgres`], network namespaces from [`netns`].
#![allow(dead_code)] // each test binary uses its own subset

pub mod declarations;
pub mod netns;
pub mod postgres;
pub mod support;

use std::io::{Error, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use domain::base::iana::Rtype;
use domain::base::opt::ClientSubnet;
use domain::base::{Message, MessageBuilder, Name};
use domain::rdata::A;
use pharos_wire::framing::{LENGTH_LEN, split_frame};
use serde_json::Value;

pub const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nv TXT \"1\"\n";

/// A running `pharos serve`, killed when dropped.
pub struct Pharos {
    pub child: Child,
    pub address: SocketAddr,
    pub zone_file: PathBuf,
    pub log_file: PathBuf,
    pub config: PathBuf,
    pub _dir: tempfile::TempDir,
}

impl Pharos {
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// Kills the server with SIGKILL (no chance to flush anything) and
    /// starts it again on the same configuration and files.
    pub fn kill_and_restart(mut self) -> Pharos {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.child = spawn(&self.config, &self.log_file);
        wait_until("the restarted server answers", || udp_query(self.address, "www.example.test", Rtype::A).is_some());
        self
    }
}

impl Drop for Pharos {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(config: &std::path::Path, log_file: &std::path::Path) -> Child {
    spawn_with(config, log_file, |_| {})
}

/// Spawns `pharos serve` on `config`, logging to `log_file`, with what
/// `customize` adds to the command.
pub fn spawn_with(config: &std::path::Path, log_file: &std::path::Path, customize: impl FnOnce(&mut Command)) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pharos"));
    command
        .args(["serve", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log_file).unwrap());
    customize(&mut command);
    command.spawn().unwrap()
}

/// Whether the tests run as root (namespaces, XDP, port 53, switching users).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A port free for UDP and TCP on 127.0.0.1 and ::1 right now, and not
/// handed out before by this process.
pub fn free_port() -> u16 {
    // Ports handed out by this process: one is free until its server binds
    // it, so two asked in a row (a server's DNS, API and HTTPS ports) could
    // otherwise be the same.
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        let mut handed_out = HANDED_OUT.lock().unwrap();
        if !handed_out.contains(&port)
            && UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && UdpSocket::bind(("::1", port)).is_ok()
            && TcpListener::bind(("::1", port)).is_ok()
        {
            handed_out.push(port);
            return port;
        }
    }
}

pub fn start(config_extra: &str) -> Pharos {
    start_with(config_extra, ZONE)
}

/// Starts pharos with `config_extra` TOML (before the zone table) and the zone text.
pub fn start_with(config_extra: &str, zone: &str) -> Pharos {
    start_at(format!("127.0.0.1:{}", free_port()).parse().unwrap(), config_extra, zone)
}

/// A server with the control API on a free port, asking for `token`, and
/// `config_extra`; the API's base URL. Answers are seeded (`random_seed`).
pub fn start_with_api(token: &str, config_extra: &str) -> (Pharos, String) {
    start_with_api_at(format!("127.0.0.1:{}", free_port()).parse().unwrap(), token, config_extra)
}

/// [`start_with_api`] answering DNS on `address`.
pub fn start_with_api_at(address: SocketAddr, token: &str, config_extra: &str) -> (Pharos, String) {
    let api = format!("127.0.0.1:{}", free_port());
    let extra = format!("random_seed = 1\n[control]\nlisten = \"{api}\"\ntoken = \"{token}\"\n{config_extra}");
    (start_at(address, &extra, ZONE), format!("http://{api}"))
}

/// [`start_with`] on a given address.
pub fn start_at(address: SocketAddr, config_extra: &str, zone: &str) -> Pharos {
    start_at_with(address, config_extra, zone, |_| {})
}

/// [`start_at`] with what `customize` adds to the command, such as limits.
pub fn start_at_with(address: SocketAddr, config_extra: &str, zone: &str, customize: impl FnOnce(&mut Command)) -> Pharos {
    let mut pharos = spawn_at_with(address, config_extra, zone, customize);
    wait_until("the server answers", || {
        // A server that stopped (a port taken meanwhile, a bad config) will
        // never answer: say why at once, with its log.
        if let Some(status) = pharos.child.try_wait().unwrap() {
            panic!("pharos serve exited ({status}) before answering:\n{}", pharos.log());
        }
        udp_query(pharos.address, "www.example.test", Rtype::A).is_some()
    });
    pharos
}

/// [`start_at_with`] without waiting for the server to answer.
pub fn spawn_at_with(address: SocketAddr, config_extra: &str, zone: &str, customize: impl FnOnce(&mut Command)) -> Pharos {
    let dir = tempfile::tempdir().unwrap();
    let zone_file = dir.path().join("example.test.zone");
    std::fs::write(&zone_file, zone).unwrap();
    let config = dir.path().join("pharos.toml");
    let text = format!(
        "[server]\nlisten = [\"{address}\"]\nthreads = 1\n{config_extra}\n[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n"
    );
    std::fs::write(&config, text).unwrap();
    let log_file = dir.path().join("pharos.log");
    let child = spawn_with(&config, &log_file, customize);
    Pharos { child, address, zone_file, log_file, config, _dir: dir }
}

/// The path of `program` (in PATH or an sbin directory), or None after
/// saying SKIP; under CI a missing program fails the test.
pub fn require(program: &str, package: &str) -> Option<PathBuf> {
    let dirs = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .collect::<Vec<PathBuf>>();
    if let Some(path) = dirs.into_iter().map(|dir| dir.join(program)).find(|path| path.is_file()) {
        return Some(path);
    }
    let message = format!("`{program}` is not installed (Debian package `{package}`)");
    assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
    eprintln!("\n*** SKIP: {message}. Install it with `apt-get install {package}`. ***\n");
    None
}

/// Polls `ready` until it holds. The deadline only bounds a failure: it is
/// long because loading real data (a full BGP table) in a debug build takes
/// tens of seconds when the machine is busy, and a pass returns at once.
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn query_bytes(id: u16, name: &str, rtype: Rtype) -> Vec<u8> {
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(id);
    let mut question = builder.question();
    question.push((Name::<Vec<u8>>::vec_from_str(name).unwrap(), rtype)).unwrap();
    question.finish()
}

pub fn udp_query(server: SocketAddr, name: &str, rtype: Rtype) -> Option<Message<Vec<u8>>> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    socket.send_to(&query_bytes(7, name, rtype), server).ok()?;
    let mut buf = vec![0; 4096];
    let len = socket.recv(&mut buf).ok()?;
    buf.truncate(len);
    Message::from_octets(buf).ok()
}

/// Reads one length-framed message: DNS over TCP, or over TLS.
pub fn read_frame(stream: &mut impl Read) -> std::io::Result<Message<Vec<u8>>> {
    let mut frame = Vec::new();
    while let Err(needed) = split_frame(&frame) {
        let filled = frame.len();
        frame.resize(filled + needed, 0);
        stream.read_exact(&mut frame[filled..])?;
    }
    frame.drain(..LENGTH_LEN);
    Ok(Message::from_octets(frame).unwrap())
}

/// A query for `name` with an OPT record and, if given, a client subnet.
pub fn ecs_query(id: u16, name: &str, rtype: Rtype, subnet: Option<(IpAddr, u8)>) -> Vec<u8> {
    let mut packet = query_bytes(id, name, rtype);
    packet[11] = 1;
    let mut options = Vec::new();
    if let Some((address, prefix)) = subnet {
        let (family, octets): (u16, Vec<u8>) = match address {
            IpAddr::V4(v4) => (1, v4.octets().to_vec()),
            IpAddr::V6(v6) => (2, v6.octets().to_vec()),
        };
        let kept = (prefix as usize).div_ceil(8);
        options.extend([0, 8]);
        options.extend(((4 + kept) as u16).to_be_bytes());
        options.extend(family.to_be_bytes());
        options.extend([prefix, 0]);
        options.extend(&octets[..kept]);
    }
    packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
    packet.extend((options.len() as u16).to_be_bytes());
    packet.extend(options);
    packet
}

pub struct Asked {
    socket: UdpSocket,
    server: SocketAddr,
}

impl Asked {
    pub fn new(server: SocketAddr) -> Asked {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Asked { socket, server }
    }

    pub fn ask(&self, packet: &[u8]) -> Message<Vec<u8>> {
        self.socket.send_to(packet, self.server).unwrap();
        let mut buf = vec![0; 4096];
        let len = self.socket.recv(&mut buf).expect("an answer");
        buf.truncate(len);
        Message::from_octets(buf).unwrap()
    }
}

pub fn first_address_and_ttl(response: &Message<Vec<u8>>) -> (IpAddr, u32) {
    let record = response.answer().unwrap().limit_to::<A>().next().expect("an A record").unwrap();
    (IpAddr::V4(record.data().addr()), record.ttl().as_secs())
}

pub fn echoed_subnet(response: &Message<Vec<u8>>) -> Option<ClientSubnet> {
    response.opt()?.opt().first::<ClientSubnet>()
}

/// An HTTP request to the control API; the status and the JSON reply (or
/// the text, if it is not JSON).
pub fn request(method: &str, url: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut builder = ureq::http::Request::builder().method(method).uri(url);
    if let Some(token) = token {
        builder = builder.header("Authorization", format!("Bearer {token}"));
    }
    let response = match body {
        Some(body) => agent.run(builder.header("Content-Type", "application/json").body(body.to_string()).unwrap()),
        None => agent.run(builder.body(()).unwrap()),
    }
    .unwrap();
    let status = response.status().as_u16();
    let text = response.into_body().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// True when the server closes the connection (end-of-stream or reset);
/// false when it stays open until the read timeout.
pub fn closed_by_server(stream: &mut impl Read) -> bool {
    let mut byte = [0; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Err(error) => !matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        Ok(_) => false,
    }
}

/// Has the command's process start with this RLIMIT_NOFILE.
pub fn limit_descriptors(command: &mut Command, soft: u64, hard: u64) -> &mut Command {
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: setrlimit is async-signal-safe, so it may run between fork and exec.
    unsafe {
        command.pre_exec(move || if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 { Ok(()) } else { Err(Error::last_os_error()) })
    }
}

/// The (soft, hard) RLIMIT_NOFILE of process `pid`.
pub fn descriptor_limit(pid: u32) -> (u64, u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: prlimit reads no new limit (null) and writes the old one through a valid pointer.
    assert_eq!(unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit) }, 0);
    (limit.rlim_cur, limit.rlim_max)
}

/// Sets the soft RLIMIT_NOFILE of running process `pid`.
pub fn set_soft_descriptor_limit(pid: u32, soft: u64) {
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: descriptor_limit(pid).1 };
    // SAFETY: prlimit reads the new limit through a valid pointer and writes no old one (null).
    assert_eq!(unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) }, 0);
}

/// The soft RLIMIT_NOFILE under which process `pid` can open exactly
/// `spare` more descriptors: a new one takes the lowest free number, and
/// fails when that is not below the limit.
pub fn limit_leaving(pid: u32, spare: usize) -> u64 {
    let open: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    (0..).filter(|number| !open.contains(number)).nth(spare).unwrap()
}

/// The CPU time process `pid` has used, user and system, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which ends the last ")": utime and stime are the 14th and 15th of all.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}
