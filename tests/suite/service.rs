//! Pharos under a service manager: what it says through a real
//! `NOTIFY_SOCKET` (a Unix datagram socket the test listens on, as systemd
//! does) and when, and running as an unprivileged user once its ports are
//! bound.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use domain::base::iana::Rtype;

use crate::common::{self, Pharos, ZONE, free_port, query_bytes, udp_query};

/// The service manager's end: the socket a server is told to write to.
struct Manager {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Manager {
    fn new(directory: &Path) -> Manager {
        let path = directory.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        Manager { socket, path }
    }

    /// The next message, within `deadline`; None if none came.
    fn next(&self, deadline: Duration) -> Option<String> {
        self.socket.set_read_timeout(Some(deadline)).unwrap();
        let mut buffer = [0u8; 4096];
        let length = self.socket.recv(&mut buffer).ok()?;
        Some(String::from_utf8_lossy(&buffer[..length]).into_owned())
    }

    /// Messages until one holds `line`, within 20 s; all of them.
    fn until(&self, line: &str) -> Vec<String> {
        let end = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let Some(message) = self.next(left) else { break };
            let done = message.lines().any(|said| said == line);
            seen.push(message);
            if done {
                return seen;
            }
        }
        panic!("no {line:?} from the server within 20 s; it said {seen:?}");
    }
}

/// A server told to notify `manager`, with `environment` besides and
/// `config_extra` in its configuration, on a fresh port; not waited for.
fn serve_notifying(manager: &Manager, environment: &[(&str, &str)], config_extra: &str) -> Pharos {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    common::spawn_at_with(address, config_extra, ZONE, |command| {
        command.env("NOTIFY_SOCKET", &manager.path).envs(environment.iter().copied());
    })
}

/// The answer to one query over TCP, asked once (no retry).
fn tcp_answers(address: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(2)) else { return false };
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let query = query_bytes(7, "www.example.test", Rtype::A);
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend(query);
    stream.write_all(&framed).is_ok() && common::read_frame(&mut stream).is_ok()
}

fn signal(pharos: &Pharos, signal: &str) {
    let status = Command::new("kill").arg(format!("-{signal}")).arg(pharos.child.id().to_string()).status().unwrap();
    assert!(status.success());
}

#[test]
fn ready_comes_once_every_listener_answers_and_a_reload_says_what_it_did() {
    let directory = tempfile::tempdir().unwrap();
    let manager = Manager::new(directory.path());
    let pharos = serve_notifying(&manager, &[], "");
    let said = manager.until("READY=1");
    // Asked once each, right after READY: no retry, no wait.
    assert!(udp_query(pharos.address, "www.example.test", Rtype::A).is_some(), "UDP did not answer at READY");
    assert!(tcp_answers(pharos.address), "TCP did not answer at READY");
    assert!(said.last().unwrap().contains("STATUS=serving 1 zones"), "{said:?}");

    signal(&pharos, "HUP");
    let said = manager.until("READY=1");
    assert!(said[0].lines().any(|line| line == "RELOADING=1") && said[0].contains("MONOTONIC_USEC="), "{said:?}");
    assert!(said.last().unwrap().contains("STATUS=reloaded: serving 1 zones"), "{said:?}");

    // A zone file that no longer reads: the reload is refused, said so, and
    // the old zone answers on.
    std::fs::write(&pharos.zone_file, "this is not a zone\n").unwrap();
    signal(&pharos, "HUP");
    let said = manager.until("READY=1");
    let status = said.last().unwrap();
    assert!(
        status.contains("STATUS=reload refused, the old configuration still serving") && status.contains("example.test.zone"),
        "{said:?}"
    );
    assert!(udp_query(pharos.address, "www.example.test", Rtype::A).is_some(), "the old zone stopped answering");

    signal(&pharos, "TERM");
    let said = manager.until("STOPPING=1");
    assert!(said.last().unwrap().contains("STATUS=stopping"), "{said:?}");
}

#[test]
fn watchdog_heartbeats_stop_while_the_control_plane_is_stuck_and_come_back() {
    let postgres = crate::common::postgres::Postgres::start();
    let url = postgres.create_database("watchdog");
    let directory = tempfile::tempdir().unwrap();
    let manager = Manager::new(directory.path());
    // A watchdog of one second (heartbeats every half), and a fleet node
    // that reports its health to the database five times a second, from
    // the control thread.
    let fleet = format!("[store]\nurl = \"{url}\"\n[health]\nreport_interval_ms = 200\nstale_after_ms = 1000\n");
    let pharos = serve_notifying(&manager, &[("WATCHDOG_USEC", "1000000")], &fleet);
    manager.until("READY=1");
    manager.until("WATCHDOG=1");

    // Another session locks the health tables, as a stuck database would:
    // the control thread's next report waits on it.
    let mut session = postgres.session("watchdog");
    let mut input = session.stdin.take().unwrap();
    writeln!(input, "BEGIN; LOCK TABLE health_nodes, health_verdicts, verdict_stamp IN ACCESS EXCLUSIVE MODE; SELECT 'locked';").unwrap();
    let mut said = std::io::BufReader::new(session.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut said, &mut line).unwrap();
    assert_eq!(line.trim(), "locked");
    let stuck = manager.until("STATUS=stuck: the control plane has not answered for half a watchdog period");
    // Stuck: no heartbeat for three whole periods.
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        if let Some(message) = manager.next(left) {
            assert!(!message.contains("WATCHDOG=1"), "a heartbeat while stuck: {message:?} after {stuck:?}");
        }
    }
    // UDP answers meanwhile: only the control plane is stuck.
    assert!(udp_query(pharos.address, "www.example.test", Rtype::A).is_some());

    // The lock goes; the report goes through and the heartbeats resume.
    writeln!(input, "COMMIT;").unwrap();
    drop(input);
    manager.until("WATCHDOG=1");
    assert!(session.wait().unwrap().success());
}

#[test]
fn sigterm_answers_every_pipelined_tcp_query_in_flight_then_exits() {
    const QUERIES: u16 = 50_000;
    let directory = tempfile::tempdir().unwrap();
    let manager = Manager::new(directory.path());
    let mut pharos = serve_notifying(&manager, &[], "");
    manager.until("READY=1");
    // A client that reads nothing until the stop, through a small window:
    // the server's answers back up, so most queries are still unread in
    // its socket when SIGTERM comes.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&pharos.address.into()).unwrap();
    let mut stream = TcpStream::from(socket);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut pipelined = Vec::new();
    for id in 0..QUERIES {
        let query = query_bytes(id, "www.example.test", Rtype::A);
        pipelined.extend((query.len() as u16).to_be_bytes());
        pipelined.extend(query);
    }
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || writer.write_all(&pipelined));
    signal(&pharos, "TERM");
    let mut answered = 0;
    while common::read_frame(&mut stream).is_ok() {
        answered += 1;
    }
    sending.join().unwrap().expect("every query was sent");
    assert_eq!(answered, QUERIES, "queries in flight went unanswered at the stop");
    manager.until("STOPPING=1");
    let status = pharos.child.wait().unwrap();
    assert!(status.success(), "{status}: {}", pharos.log());
}

/// As root: the server binds port 53, then runs as `nobody` with no
/// capability left, still answers there, and has handed its store over.
#[test]
fn started_as_root_it_runs_as_the_configured_user_and_answers_on_port_53() {
    if !common::is_root() {
        eprintln!("!! SKIP started_as_root_it_runs_as_the_configured_user: not root");
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        return;
    }
    // A loopback address of this test's own, so port 53 is free.
    let address: SocketAddr = "127.0.53.29:53".parse().unwrap();
    let pharos = common::start_at(address, "user = \"nobody\"\ngroup = \"nogroup\"\n[store]\npath = \"pharos.sqlite\"", ZONE);
    let status = std::fs::read_to_string(format!("/proc/{}/status", pharos.child.id())).unwrap();
    let field = |name: &str| status.lines().find(|line| line.starts_with(name)).unwrap().split_whitespace().skip(1).collect::<Vec<_>>();
    assert_eq!(field("Uid:"), ["65534"; 4], "{status}");
    assert_eq!(field("Gid:"), ["65534"; 4], "{status}");
    assert_eq!(field("CapEff:"), ["0000000000000000"], "{status}");
    assert_eq!(field("Groups:"), ["65534"], "{status}");
    assert!(udp_query(address, "www.example.test", Rtype::A).is_some());
    assert!(tcp_answers(address));
    assert!(pharos.log().contains("running as an unprivileged user"), "{}", pharos.log());
    // The store it made as root is the user's: the next start, `pharos key`
    // and `pharos check` run as that user can open it.
    let store = pharos.config.with_file_name("pharos.sqlite");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&store).unwrap());
    assert_eq!(owner, 65534, "{} is not the user's", store.display());
}

#[test]
fn a_user_it_cannot_become_is_a_clear_error_at_start() {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut pharos = common::spawn_at_with(address, "user = \"no-such-user-here\"", ZONE, |_| {});
    assert!(!pharos.child.wait().unwrap().success());
    assert!(pharos.log().contains("server.user = \"no-such-user-here\": no such user"), "{}", pharos.log());
}
