//! `pharos forward`, the client side of persistent DNS connections, between
//! real clients (dig, kdig, test sockets) and real upstreams: Pharos over
//! TLS and over QUIC, and small in-test TLS servers that drop, hold or
//! ignore queries. The forwarder's counters come from its log, asked for
//! with SIGUSR1. Loopback only; every wait has a deadline.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use domain::base::Message;
use domain::base::iana::{Rcode, Rtype};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::common;
use common::*;
use pharos_wire::framing::framed;

/// The generated certificate of a Pharos, in its configuration's directory.
const GENERATED_CERTIFICATE: &str = "pharos-tls-certificate.pem";
const WWW: &str = "www.example.test";
const WWW_ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

/// A Pharos serving DNS over TLS and over QUIC on one port number.
struct Upstream {
    pharos: Pharos,
    port: u16,
}

impl Upstream {
    fn start(config_extra: &str, zone: &str) -> Upstream {
        let port = free_port();
        let tls = format!("[tls]\nlisten = [\"127.0.0.1:{port}\"]\nquic_listen = [\"127.0.0.1:{port}\"]\n{config_extra}");
        Upstream { pharos: start_with(&tls, zone), port }
    }

    /// `tls://...` or `quic://...`, as `--upstream` takes it.
    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    fn certificate(&self) -> PathBuf {
        self.pharos.config.with_file_name(GENERATED_CERTIFICATE)
    }
}

/// A running `pharos forward` on a free loopback port, killed when dropped.
struct Forwarder {
    child: Child,
    address: SocketAddr,
    log_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Forwarder {
    /// Starts the forwarder with `args` (and `--listen`), and waits until it
    /// says it is forwarding.
    fn start(args: &[&str]) -> Forwarder {
        Forwarder::start_with_env(args, &[])
    }

    fn start_with_env(args: &[&str], env: &[(&str, &Path)]) -> Forwarder {
        let dir = tempfile::tempdir().unwrap();
        let log_file = dir.path().join("forward.log");
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let child = Command::new(env!("CARGO_BIN_EXE_pharos"))
            .args(["forward", "--listen", &address.to_string()])
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info,pharos_forward=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_file).unwrap())
            .spawn()
            .unwrap();
        let mut forwarder = Forwarder { child, address, log_file, _dir: dir };
        wait_until("the forwarder is up", || {
            assert!(forwarder.child.try_wait().unwrap().is_none(), "the forwarder stopped: {}", forwarder.log());
            forwarder.log().contains("forwarding DNS")
        });
        forwarder
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// Asks over UDP, with ID `id`, and returns the answer.
    fn ask(&self, id: u16, name: &str) -> Message<Vec<u8>> {
        Asked::new(self.address).ask(&query_bytes(id, name, Rtype::A))
    }

    /// The forwarder's counters, from the line it logs on SIGUSR1.
    fn stats(&self) -> HashMap<String, u64> {
        const LINE: &str = "pharos_forward::stats: stats ";
        let logged = self.log().matches(LINE).count();
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGUSR1) }, 0);
        wait_until("the forwarder logs its counters", || self.log().matches(LINE).count() > logged);
        let log = self.log();
        let line = log.lines().rfind(|line| line.contains(LINE)).unwrap();
        let counters = line.split_whitespace().filter_map(|field| field.split_once('='));
        counters.map(|(name, value)| (name.to_owned(), value.parse().unwrap())).collect()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The flags that point a forwarder at `upstream` over `scheme`, trusting
/// its certificate (made for "localhost").
fn upstream_flags(upstream: &Upstream, scheme: &str) -> Vec<String> {
    let certificate = upstream.certificate().display().to_string();
    vec!["--upstream".into(), upstream.url(scheme), "--ca".into(), certificate, "--server-name".into(), "localhost".into()]
}

fn start_forwarder(upstream: &Upstream, scheme: &str, extra: &[&str]) -> Forwarder {
    start_with_flags(upstream_flags(upstream, scheme), extra)
}

fn start_with_flags(flags: Vec<String>, extra: &[&str]) -> Forwarder {
    Forwarder::start(&[flags.iter().map(String::as_str).collect::<Vec<_>>(), extra.to_vec()].concat())
}

/// Sends each query from a socket of its own, every one before any answer
/// is read, so that all are outstanding at once; returns the sockets.
fn send_all_at_once(forwarder: &Forwarder, queries: impl Iterator<Item = (u16, String)>) -> Vec<UdpSocket> {
    let send = |(id, name): (u16, String)| {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        socket.send_to(&query_bytes(id, &name, Rtype::A), forwarder.address).unwrap();
        socket
    };
    queries.map(send).collect()
}

fn receive(socket: &UdpSocket) -> Message<Vec<u8>> {
    let mut buffer = vec![0; 4096];
    let length = socket.recv(&mut buffer).expect("an answer");
    buffer.truncate(length);
    Message::from_octets(buffer).unwrap()
}

/// Runs a client program that must be installed (scripts/test.sh installs
/// it) and returns what it printed.
fn run_client(program: &str, package: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program} ({error}): install the Debian package {package}"));
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

fn address_of(answer: &Message<Vec<u8>>) -> IpAddr {
    first_address_and_ttl(answer).0
}

#[test]
fn dig_and_kdig_are_answered_over_udp_and_tcp_through_tls_and_quic() {
    let upstream = Upstream::start("", ZONE);
    for scheme in ["tls", "quic"] {
        let forwarder = start_forwarder(&upstream, scheme, &[]);
        let port = forwarder.address.port().to_string();
        let clients = [
            ("dig", "bind9-dnsutils", "+notcp", "+tries=1"),
            ("dig", "bind9-dnsutils", "+tcp", "+tries=1"),
            ("kdig", "knot-dnsutils", "+notcp", "+retry=0"),
            ("kdig", "knot-dnsutils", "+tcp", "+retry=0"),
        ];
        for (program, package, transport, no_retry) in clients {
            let output = run_client(program, package, &["@127.0.0.1", "-p", &port, transport, no_retry, "+timeout=5", WWW, "A"]);
            assert!(output.contains("NOERROR") && output.contains("192.0.2.2"), "{scheme}, {program} {transport}: {output}");
        }
        let stats = forwarder.stats();
        assert_eq!((stats["answered"], stats["servfail"]), (4, 0), "{scheme}: {stats:?}");
    }
}

#[test]
fn answers_too_long_for_udp_are_truncated_and_the_client_retries_over_tcp() {
    let texts: String = (0..30).map(|index| format!("big TXT \"{index:02}-{}\"\n", "x".repeat(100))).collect();
    let upstream = Upstream::start("", &format!("{ZONE}{texts}"));
    let forwarder = start_forwarder(&upstream, "tls", &[]);
    let port = forwarder.address.port().to_string();
    let dig = |extra: &str| {
        run_client("dig", "bind9-dnsutils", &["@127.0.0.1", "-p", &port, extra, "+tries=1", "+time=5", "big.example.test", "TXT"])
    };
    for limit in ["+noedns", "+bufsize=1232"] {
        let output = dig(limit);
        assert!(output.contains("Truncated, retrying in TCP mode"), "{limit}: {output}");
        assert!(output.contains("ANSWER: 30,"), "{limit}: the whole answer over TCP: {output}");
    }
    let output = dig("+bufsize=4096");
    assert!(!output.contains("Truncated") && output.contains("ANSWER: 30,"), "fits in 4096 octets: {output}");
    assert_eq!(forwarder.stats()["truncated"], 2);
}

/// A zone with `count` names n0, n1, ... each with an address of its own.
fn numbered_zone(count: u8) -> String {
    ZONE.to_owned() + &(0..count).map(|index| format!("n{index} A 10.0.0.{index}\n")).collect::<String>()
}

fn numbered_address(index: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, index))
}

#[test]
fn concurrent_clients_with_the_same_id_get_their_own_answers_on_one_connection() {
    const CLIENTS: u8 = 40;
    const SAME_ID: u16 = 0x4242;
    let upstream = Upstream::start("", &numbered_zone(CLIENTS));
    for scheme in ["tls", "quic"] {
        let forwarder = start_forwarder(&upstream, scheme, &["--connections", "1"]);
        let sockets = send_all_at_once(&forwarder, (0..CLIENTS).map(|index| (SAME_ID, format!("n{index}.example.test"))));
        for (index, socket) in (0..CLIENTS).zip(&sockets) {
            let answer = receive(socket);
            assert_eq!((answer.header().id(), address_of(&answer)), (SAME_ID, numbered_address(index)), "{scheme}, client {index}");
        }
        // And a TCP client that pipelines its queries, all under one ID.
        let mut stream = TcpStream::connect(forwarder.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let queries: Vec<u8> =
            (0..CLIENTS).flat_map(|index| framed(&query_bytes(7, &format!("n{index}.example.test"), Rtype::A))).collect();
        stream.write_all(&queries).unwrap();
        let mut answered: Vec<(String, IpAddr)> = (0..CLIENTS)
            .map(|_| {
                let answer = read_frame(&mut stream).unwrap();
                assert_eq!(answer.header().id(), 7);
                (answer.first_question().unwrap().qname().to_string(), address_of(&answer))
            })
            .collect();
        answered.sort();
        let mut expected: Vec<(String, IpAddr)> =
            (0..CLIENTS).map(|index| (format!("n{index}.example.test"), numbered_address(index))).collect();
        expected.sort();
        assert_eq!(answered, expected, "{scheme}");
        let stats = forwarder.stats();
        assert_eq!(
            (stats["connections"], stats["answered"]),
            (1, 2 * u64::from(CLIENTS)),
            "{scheme}: one connection carried all: {stats:?}"
        );
        eprintln!("{scheme}: at most {} queries outstanding on the connection", stats["peak_in_flight"]);
    }
}

/// What an in-test upstream does with the queries it reads.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Answers the first query it reads, drops the second, answers the
    /// third, and so on, over all its connections.
    AnswerEveryOther,
    /// Answers nothing until it has read this many queries on a connection,
    /// then answers them all.
    HoldUntil(usize),
    AnswerNone,
}

/// A query as an in-test upstream read it.
#[derive(Debug, Clone)]
struct Arrival {
    name: String,
    at: Instant,
    connection: usize,
}

/// A DNS over TLS server in this process, answering each query it chooses
/// to answer with the query itself, marked as a response.
struct TestUpstream {
    address: SocketAddr,
    certificate: PathBuf,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    _dir: tempfile::TempDir,
}

impl TestUpstream {
    fn start(behaviour: Behaviour) -> TestUpstream {
        let dir = tempfile::tempdir().unwrap();
        let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let certificate = dir.path().join("certificate.pem");
        std::fs::write(&certificate, cert.pem()).unwrap();
        let key = PrivateKeyDer::Pkcs8(signing_key.serialize_der().into());
        let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(cert.der().to_vec())], key)
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let shared = (Arc::new(config), arrivals.clone());
        std::thread::spawn(move || {
            for (connection, stream) in listener.incoming().enumerate() {
                let (config, arrivals) = (shared.0.clone(), shared.1.clone());
                let stream = StreamOwned::new(ServerConnection::new(config).unwrap(), stream.unwrap());
                std::thread::spawn(move || serve_test_connection(stream, connection, behaviour, &arrivals));
            }
        });
        TestUpstream { address, certificate, arrivals, _dir: dir }
    }

    fn flags(&self) -> Vec<String> {
        let certificate = self.certificate.display().to_string();
        vec!["--upstream".into(), format!("tls://{}#localhost", self.address), "--ca".into(), certificate]
    }

    fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.arrivals().iter().map(|arrival| arrival.connection + 1).max().unwrap_or(0)
    }
}

/// Reads queries until the forwarder closes the connection, answering as
/// `behaviour` says.
fn serve_test_connection(
    mut stream: StreamOwned<ServerConnection, TcpStream>,
    connection: usize,
    behaviour: Behaviour,
    arrivals: &Mutex<Vec<Arrival>>,
) {
    let mut held = Vec::new();
    while let Ok(query) = read_frame(&mut stream) {
        let name = query.first_question().unwrap().qname().to_string();
        let arrived = {
            let mut arrivals = arrivals.lock().unwrap();
            arrivals.push(Arrival { name, at: Instant::now(), connection });
            arrivals.len()
        };
        let mut answer = query.into_octets();
        answer[2] |= 0x80;
        let answers = match behaviour {
            Behaviour::AnswerEveryOther if arrived % 2 == 1 => vec![answer],
            Behaviour::HoldUntil(count) => {
                held.push(answer);
                if held.len() == count { std::mem::take(&mut held) } else { Vec::new() }
            }
            _ => Vec::new(),
        };
        let frames: Vec<u8> = answers.iter().flat_map(|answer| framed(answer)).collect();
        if !frames.is_empty() && stream.write_all(&frames).and_then(|()| stream.flush()).is_err() {
            return;
        }
    }
}

#[test]
fn one_connection_carries_many_queries_at_once() {
    const QUERIES: u8 = 20;
    let upstream = TestUpstream::start(Behaviour::HoldUntil(QUERIES.into()));
    // A timeout longer than the test: nothing is retransmitted.
    let forwarder = start_with_flags(upstream.flags(), &["--connections", "1", "--min-rto-ms", "20000", "--max-rto-ms", "20000"]);
    let sockets = send_all_at_once(&forwarder, (0..QUERIES).map(|index| (u16::from(index), format!("q{index}.example.test"))));
    for (index, socket) in (0..QUERIES).zip(&sockets) {
        assert_eq!(receive(socket).header().id(), u16::from(index), "answered once all the queries were on the connection");
    }
    assert_eq!((upstream.connections(), upstream.arrivals().len()), (1, QUERIES.into()), "every query on one connection, unanswered");
    assert_eq!(forwarder.stats()["peak_in_flight"], u64::from(QUERIES));
}

#[test]
fn a_dropped_query_is_hedged_after_the_rto_on_the_other_connection() {
    const MIN_RTO: Duration = Duration::from_millis(100);
    let upstream = TestUpstream::start(Behaviour::AnswerEveryOther);
    let forwarder = start_with_flags(upstream.flags(), &["--connections", "2", "--min-rto-ms", "100"]);
    // The first query is answered and measures the path.
    assert_eq!(forwarder.ask(1, "first.example.test").header().rcode(), Rcode::NOERROR);
    let names: Vec<String> = (0..5).map(|index| format!("dropped{index}.example.test")).collect();
    for (id, name) in (2..).zip(&names) {
        assert_eq!(forwarder.ask(id, name).header().id(), id, "answered after one hedge");
    }
    let arrivals = upstream.arrivals();
    for name in &names {
        let [dropped, resent] = arrivals.iter().filter(|arrival| arrival.name == *name).cloned().collect::<Vec<_>>().try_into().unwrap();
        let waited = resent.at - dropped.at;
        eprintln!("{name}: resent after {waited:?}");
        // Timed where the upstream reads, which a busy machine may delay by
        // some milliseconds for one query and not the other.
        assert!(waited >= MIN_RTO / 2 && waited < Duration::from_secs(1), "{name}: resent after {waited:?}, not about the RTO");
        assert_ne!(dropped.connection, resent.connection, "{name}: resent on the pool's other connection");
    }
    let stats = forwarder.stats();
    assert_eq!((stats["retransmissions"], stats["timeouts"], stats["connections"]), (5, 5, 2), "{stats:?}");
}

#[test]
fn servfail_at_the_deadline_and_no_query_twice_on_one_connection() {
    let upstream = TestUpstream::start(Behaviour::AnswerNone);
    let forwarder = start_with_flags(upstream.flags(), &["--tries", "3", "--min-rto-ms", "100", "--deadline-ms", "1000"]);
    let started = Instant::now();
    let answer = forwarder.ask(9, WWW);
    let waited = started.elapsed();
    eprintln!("SERVFAIL after {waited:?}");
    assert_eq!((answer.header().id(), answer.header().rcode()), (9, Rcode::SERVFAIL));
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(2), "SERVFAIL after {waited:?}");
    // A third try was allowed, but both connections of the pool had the
    // query, and a copy behind the first on either would not help.
    assert_eq!(upstream.arrivals().len(), 2, "one query per connection");
    let stats = forwarder.stats();
    assert_eq!((stats["timeouts"], stats["servfail"]), (2, 1), "{stats:?}");
    let port = forwarder.address.port().to_string();
    let output = run_client("dig", "bind9-dnsutils", &["@127.0.0.1", "-p", &port, "+tries=1", "+time=5", WWW, "A"]);
    assert!(output.contains("SERVFAIL") && output.contains("EDE: 22 (No Reachable Authority)"), "{output}");
}

/// Polls the forwarder until it answers `name` with `address`.
fn wait_for_answer(forwarder: &Forwarder, name: &str, address: IpAddr) {
    wait_until(&format!("the forwarder answers {name} with {address}"), || {
        udp_query(forwarder.address, name, Rtype::A)
            .is_some_and(|answer| answer.header().rcode() == Rcode::NOERROR && address_of(&answer) == address)
    });
}

#[test]
fn the_forwarder_reconnects_when_the_upstream_restarts() {
    for scheme in ["tls", "quic"] {
        let upstream = Upstream::start("", ZONE);
        let forwarder = start_forwarder(&upstream, scheme, &["--connections", "1", "--min-rto-ms", "50"]);
        assert_eq!(address_of(&forwarder.ask(1, WWW)), WWW_ADDRESS);
        let _restarted = upstream.pharos.kill_and_restart();
        wait_for_answer(&forwarder, WWW, WWW_ADDRESS);
        assert_eq!(forwarder.stats()["connections"], 2, "{scheme}: {}", forwarder.log());
    }
}

#[test]
fn a_connection_the_upstream_closes_is_made_again_resuming_the_session() {
    let upstream = Upstream::start("[tcp]\nidle_timeout_ms = 300\n", ZONE);
    for scheme in ["tls", "quic"] {
        let forwarder = start_forwarder(&upstream, scheme, &["--connections", "1"]);
        assert_eq!(address_of(&forwarder.ask(1, WWW)), WWW_ADDRESS);
        wait_until("the idle connection is closed", || forwarder.log().contains("connection closed"));
        assert_eq!(address_of(&forwarder.ask(2, WWW)), WWW_ADDRESS);
        let stats = forwarder.stats();
        assert_eq!((stats["full_handshakes"], stats["resumed_handshakes"]), (1, 1), "{scheme}: {}", forwarder.log());
    }
}

#[test]
fn the_next_upstream_answers_while_the_first_is_down_and_the_first_when_it_is_back() {
    const SECOND_ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99));
    let mut first = Upstream::start("", ZONE);
    let second = Upstream::start("", &ZONE.replace("192.0.2.2", "192.0.2.99"));
    let dir = tempfile::tempdir().unwrap();
    let both_certificates = dir.path().join("both.pem");
    let pem = [std::fs::read(first.certificate()).unwrap(), std::fs::read(second.certificate()).unwrap()].concat();
    std::fs::write(&both_certificates, pem).unwrap();
    let (first_url, second_url) = (first.url("tls"), second.url("quic"));
    let ca = both_certificates.display().to_string();
    let forwarder = Forwarder::start(&["--upstream", &first_url, "--upstream", &second_url, "--ca", &ca, "--server-name", "localhost"]);
    assert_eq!(address_of(&forwarder.ask(1, WWW)), WWW_ADDRESS, "the first upstream while it is up");
    first.pharos.child.kill().unwrap();
    first.pharos.child.wait().unwrap();
    assert_eq!(address_of(&forwarder.ask(2, WWW)), SECOND_ADDRESS, "the second, at once, while the first is down");
    assert!(forwarder.stats()["connect_failures"] >= 1);
    first.pharos = first.pharos.kill_and_restart();
    wait_for_answer(&forwarder, WWW, WWW_ADDRESS);
}

#[test]
fn certificates_that_do_not_verify_are_never_used() {
    let upstream = Upstream::start("", ZONE);
    let certificate = upstream.certificate().display().to_string();
    let wrong_name = Forwarder::start(&["--upstream", &upstream.url("tls"), "--ca", &certificate, "--server-name", "wrong.example"]);
    assert_eq!(wrong_name.ask(1, WWW).header().rcode(), Rcode::SERVFAIL);
    assert!(wrong_name.log().contains("certificate not valid for name \"wrong.example\""), "{}", wrong_name.log());
    // Without --ca the system's CAs are trusted, here another certificate.
    let other = TestUpstream::start(Behaviour::AnswerNone);
    let system = Forwarder::start_with_env(&["--upstream", &upstream.url("quic")], &[("SSL_CERT_FILE", &other.certificate)]);
    assert_eq!(system.ask(2, WWW).header().rcode(), Rcode::SERVFAIL);
    assert!(system.log().contains("invalid peer certificate"), "{}", system.log());
}

#[test]
fn bad_settings_stop_the_start_with_what_to_fix() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["--upstream", "tls://dns.example"], "cannot look names up"),
        (&["--upstream", "udp://127.0.0.1"], "unknown scheme \"udp\""),
        (&["--listen", "127.0.0.1:5353"], "no upstream"),
        (&["--upstream", "tls://127.0.0.1", "--ca", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
        (&["--upstream", "tls://127.0.0.1", "--ca", file!()], "holds no certificate"),
    ];
    for (args, expected) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_pharos")).arg("forward").args(args).output().unwrap();
        let complaint = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && complaint.contains(expected), "{args:?}: {complaint}");
    }
    let upstream = TestUpstream::start(Behaviour::AnswerNone);
    let certificate = upstream.certificate.display().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["forward", "--upstream", "tls://127.0.0.1", "--ca", &certificate, "--listen", &taken])
        .output()
        .unwrap();
    let complaint = String::from_utf8_lossy(&output.stderr);
    assert!(complaint.contains(&format!("cannot listen for DNS on UDP {taken}")), "{complaint}");
}
