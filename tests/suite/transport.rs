//! The real `pharos` binary over real sockets: TCP behaviour under
//! pipelining, slow and stalled clients, caps and idle timeouts; reload on
//! SIGHUP; clear errors at start. Loopback only; every wait has a deadline.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use domain::base::Message;
use domain::base::iana::{Rcode, Rtype};

use crate::common;
use common::*;
use pharos_wire::framing::framed;

fn connect(server: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

#[test]
fn tcp_answers_pipelined_queries_sent_in_one_write() {
    let pharos = start("");
    let mut stream = connect(pharos.address);
    let queries: Vec<u8> = (0..100u16).flat_map(|id| framed(&query_bytes(id, "www.example.test", Rtype::A))).collect();
    stream.write_all(&queries).unwrap();
    let mut ids: Vec<u16> = (0..100).map(|_| read_frame(&mut stream).unwrap().header().id()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
}

#[test]
fn tcp_reassembles_a_query_sent_in_pieces() {
    let pharos = start("");
    let mut stream = connect(pharos.address);
    let query = framed(&query_bytes(42, "www.example.test", Rtype::A));
    for piece in [&query[..1], &query[1..5], &query[5..]] {
        stream.write_all(piece).unwrap();
        stream.flush().unwrap();
        std::thread::sleep(Duration::from_millis(30));
    }
    let response = read_frame(&mut stream).unwrap();
    assert_eq!((response.header().id(), response.header_counts().ancount()), (42, 1));
}

#[test]
fn a_stalled_or_unread_client_does_not_delay_others() {
    let pharos = start("");
    let mut half = connect(pharos.address);
    half.write_all(&framed(&query_bytes(1, "www.example.test", Rtype::A))[..7]).unwrap();
    // A client that sends many queries and never reads the answers.
    let mut deaf = connect(pharos.address);
    deaf.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let flood: Vec<u8> = (0..2000u16).flat_map(|id| framed(&query_bytes(id, "www.example.test", Rtype::A))).collect();
    let _ = deaf.write_all(&flood);
    let started = Instant::now();
    let mut other = connect(pharos.address);
    other.write_all(&framed(&query_bytes(9, "www.example.test", Rtype::A))).unwrap();
    assert_eq!(read_frame(&mut other).unwrap().header().id(), 9);
    assert!(udp_query(pharos.address, "www.example.test", Rtype::A).is_some());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let pharos = start("[tcp]\nidle_timeout_ms = 300\n");
    let mut stream = connect(pharos.address);
    stream.write_all(&framed(&query_bytes(1, "www.example.test", Rtype::A))).unwrap();
    read_frame(&mut stream).unwrap();
    let started = Instant::now();
    assert!(closed_by_server(&mut stream));
    assert!(started.elapsed() < Duration::from_secs(4), "closed after {:?}", started.elapsed());
}

#[test]
fn the_per_client_cap_sheds_the_longest_idle_connection() {
    let pharos = start("[tcp]\nmax_connections_per_client = 2\n");
    let mut oldest = connect(pharos.address);
    oldest.write_all(&framed(&query_bytes(1, "www.example.test", Rtype::A))).unwrap();
    read_frame(&mut oldest).unwrap();
    let mut busy = connect(pharos.address);
    busy.write_all(&framed(&query_bytes(2, "www.example.test", Rtype::A))).unwrap();
    read_frame(&mut busy).unwrap();
    let mut newest = connect(pharos.address);
    newest.write_all(&framed(&query_bytes(3, "www.example.test", Rtype::A))).unwrap();
    assert_eq!(read_frame(&mut newest).unwrap().header().id(), 3);
    assert!(closed_by_server(&mut oldest), "the oldest idle connection was shed");
    busy.write_all(&framed(&query_bytes(4, "www.example.test", Rtype::A))).unwrap();
    assert_eq!(read_frame(&mut busy).unwrap().header().id(), 4);
}

#[test]
fn the_soft_descriptor_limit_is_raised_and_the_connection_cap_fitted_under_it() {
    let address = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let pharos = start_at_with(address, "", ZONE, |command| {
        limit_descriptors(command, 100, 400);
    });
    assert_eq!(descriptor_limit(pharos.child.id()), (400, 400));
    let log = pharos.log();
    assert!(log.contains("raised the soft RLIMIT_NOFILE to the hard limit from=100 to=400"), "{log}");
    // 400 less 128 kept and 2 listeners (UDP and TCP, one thread).
    assert!(
        log.contains("tcp.max_connections = 10000 does not fit in RLIMIT_NOFILE 400") && log.contains("at most 270 connections"),
        "{log}"
    );

    let mut too_few = Command::new(env!("CARGO_BIN_EXE_pharos"));
    too_few.args(["serve", "--threads", "1", "--listen", &format!("127.0.0.1:{}", free_port()), "--zone"]);
    too_few.arg(format!("example.test={}", pharos.zone_file.display()));
    let output = limit_descriptors(&mut too_few, 100, 100).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("RLIMIT_NOFILE is 100, too low for any connection"), "{stderr}");
}

/// The server's log lines about failed accepts, and the count of failures
/// each reports.
fn accept_failures_logged(pharos: &Pharos) -> Vec<u64> {
    let log = pharos.log();
    let lines = log.lines().filter(|line| line.contains("cannot accept connections"));
    lines.map(|line| line.split_once("failed=").unwrap().1.split(' ').next().unwrap().parse().unwrap()).collect()
}

#[test]
fn out_of_descriptors_with_none_to_shed_the_accept_loop_backs_off_and_logs_once_a_second() {
    let pharos = start("");
    let pid = pharos.child.id();
    set_soft_descriptor_limit(pid, limit_leaving(pid, 0));
    let waiting: Vec<TcpStream> = (0..5).map(|_| connect(pharos.address)).collect();
    let cpu_before = cpu_seconds(pid);
    // Three lines: the first failure, then one a second, so two seconds of failing.
    wait_until("three lines about failed accepts", || accept_failures_logged(&pharos).len() >= 3);
    let cpu = cpu_seconds(pid) - cpu_before;
    let failures = accept_failures_logged(&pharos);
    assert!(cpu < 0.5, "{cpu} s of CPU in about two seconds of failed accepts: spinning");
    // A pause of up to 100 ms between tries: 10 a second, and the first few sooner.
    assert!(failures.iter().all(|&failed| failed <= 25), "failures per line: {failures:?}");
    assert!(udp_query(pharos.address, "www.example.test", Rtype::A).is_some(), "UDP goes on meanwhile");

    set_soft_descriptor_limit(pid, descriptor_limit(pid).1);
    for (id, mut stream) in (0..).zip(waiting.into_iter().chain([connect(pharos.address)])) {
        stream.write_all(&framed(&query_bytes(id, "www.example.test", Rtype::A))).unwrap();
        assert_eq!(read_frame(&mut stream).unwrap().header().id(), id, "connections made while out of descriptors are served after");
    }
    // That line waits its turn, a second after the last: each accept asks.
    wait_until("the log says accepting works again", || {
        drop(connect(pharos.address));
        pharos.log().contains("accepting connections again")
    });
}

fn hangup(pharos: &Pharos) {
    // SAFETY: kill(2) with a valid pid and signal number.
    assert_eq!(unsafe { libc::kill(pharos.child.id() as i32, libc::SIGHUP) }, 0);
}

fn txt_of_v(server: SocketAddr) -> Option<String> {
    let response = udp_query(server, "v.example.test", Rtype::TXT)?;
    let answer = response.answer().ok()?.limit_to::<domain::rdata::Txt<_>>().next()?.ok()?;
    Some(answer.data().to_string())
}

#[test]
fn sighup_swaps_in_new_zones_and_keeps_the_old_ones_on_error() {
    let pharos = start("");
    std::fs::write(&pharos.zone_file, ZONE.replace("v TXT \"1\"", "v TXT \"2\"")).unwrap();
    hangup(&pharos);
    wait_until("the new zone is served", || txt_of_v(pharos.address).as_deref() == Some("\"2\""));
    std::fs::write(&pharos.zone_file, format!("{ZONE}broken A 999.1.1.1\n")).unwrap();
    hangup(&pharos);
    wait_until("the reload fails", || pharos.log().contains("reload failed"));
    assert!(pharos.log().contains("example.test.zone:7"), "the log names the bad line: {}", pharos.log());
    assert_eq!(txt_of_v(pharos.address).as_deref(), Some("\"2\""));
    let broken = udp_query(pharos.address, "broken.example.test", Rtype::A).unwrap();
    assert_eq!(broken.header().rcode(), Rcode::NXDOMAIN);
}

#[test]
fn queries_during_reloads_are_all_answered() {
    let pharos = start("");
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = vec![0; 4096];
    for round in 0..20u16 {
        std::fs::write(&pharos.zone_file, ZONE.replace("v TXT \"1\"", &format!("v TXT \"{round}\""))).unwrap();
        hangup(&pharos);
        for id in 0..50u16 {
            socket.send_to(&query_bytes(id, "www.example.test", Rtype::A), pharos.address).unwrap();
            let len = socket.recv(&mut buf).expect("every query is answered during reloads");
            let response = Message::from_octets(buf[..len].to_vec()).unwrap();
            assert_eq!((response.header().id(), response.header().rcode(), response.header_counts().ancount()), (id, Rcode::NOERROR, 1));
        }
    }
}

fn serve_and_fail(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).arg("serve").args(args).output().unwrap();
    assert!(!output.status.success(), "pharos serve {args:?} should fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_start_up_input_fails_with_a_clear_message() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    assert!(serve_and_fail(&["--listen", &listen]).contains("no zones"));
    assert!(serve_and_fail(&["--listen", &listen, "--zone", "example.test"]).contains("ORIGIN=FILE"));
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("bad.zone");
    std::fs::write(&zone, "$TTL 300\n@ SOA ns hm 1 2 3 4 5\n NS ns\nns A 192.0.2.1\nwww MX mail\n").unwrap();
    let zone_flag = format!("example.test={}", zone.display());
    let message = serve_and_fail(&["--listen", &listen, "--zone", &zone_flag]);
    assert!(message.contains(&format!("{}:5", zone.display())), "{message}");
    let missing = format!("example.test={}", Path::new("/nonexistent/zone").display());
    assert!(serve_and_fail(&["--listen", &listen, "--zone", &missing]).contains("cannot read zone file"));
}

#[test]
fn serves_ipv4_and_ipv6_from_flags_alone() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("example.test.zone");
    std::fs::write(&zone, ZONE).unwrap();
    let port = free_port();
    let (v4, v6): (SocketAddr, SocketAddr) = (format!("127.0.0.1:{port}").parse().unwrap(), format!("[::1]:{port}").parse().unwrap());
    let child = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["serve", "--listen", &v4.to_string(), "--listen", &v6.to_string(), "--threads", "1", "--zone"])
        .arg(format!("example.test={}", zone.display()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _pharos = Pharos { child, address: v4, zone_file: zone, log_file: PathBuf::new(), config: PathBuf::new(), _dir: dir };
    wait_until("IPv4 answers", || udp_query(v4, "www.example.test", Rtype::A).is_some());
    let socket = UdpSocket::bind("[::1]:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(&query_bytes(5, "www.example.test", Rtype::A), v6).unwrap();
    let mut buf = [0; 512];
    let len = socket.recv(&mut buf).expect("IPv6 over UDP answers");
    assert_eq!(Message::from_octets(buf[..len].to_vec()).unwrap().header_counts().ancount(), 1);
    let mut stream = TcpStream::connect(v6).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    stream.write_all(&framed(&query_bytes(6, "www.example.test", Rtype::A))).unwrap();
    assert_eq!(read_frame(&mut stream).unwrap().header().id(), 6, "IPv6 over TCP answers");
}
