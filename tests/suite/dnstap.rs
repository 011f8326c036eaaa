//! The dnstap query log read back by real consumers: `fstrm_capture`
//! (Debian fstrm-bin) takes the Frame Streams from the server over a Unix
//! socket or TCP, and `dnstap-read` (Debian bind9-dnsutils) decodes what
//! it wrote. Every query of a run, over UDP (dig), TCP, TLS, HTTPS and
//! QUIC (kdig), is there with its RCODE; 1-in-N sampling logs exactly one
//! query in N; a reader that goes away stops no answer, the drops show in
//! /metrics, and the writer finds the next reader. Behind dnsdist, a query
//! is logged from the client its PROXY header names. Loopback only; every
//! wait has a deadline.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use domain::base::iana::Rtype;
use serde_json::Value;

use crate::{common, proxy};
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "dnstap-token-0123";

/// A Debian program a test needs: its name, or a loud skip (a failure
/// under CI=true).
fn program(name: &'static str, package: &str) -> Option<&'static str> {
    if Command::new("which").arg(name).stdout(Stdio::null()).status().is_ok_and(|status| status.success()) {
        return Some(name);
    }
    let message = format!("`{name}` is not installed (Debian package `{package}`)");
    assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
    eprintln!("\n*** SKIP: {message}. Install it with `apt-get install {package}`. ***\n");
    None
}

fn tools_present() -> bool {
    [("fstrm_capture", "fstrm-bin"), ("dnstap-read", "bind9-dnsutils"), ("dig", "bind9-dnsutils"), ("kdig", "knot-dnsutils")]
        .into_iter()
        .all(|(name, package)| program(name, package).is_some())
}

/// `fstrm_capture` listening on a Unix socket, writing to a file.
struct Capture {
    child: Child,
    output: PathBuf,
    log: PathBuf,
}

impl Capture {
    fn start(socket: &Path, output: PathBuf) -> Capture {
        let _ = std::fs::remove_file(socket);
        let capture = Capture::spawn(&["-u".as_ref(), socket.as_os_str()], output);
        wait_until("fstrm_capture listens", || socket.exists());
        capture
    }

    fn start_tcp(address: SocketAddr, output: PathBuf) -> Capture {
        let port = address.port().to_string();
        let capture = Capture::spawn(&["-a".as_ref(), address.ip().to_string().as_ref(), "-p".as_ref(), port.as_ref()], output);
        // A connection that says nothing: the reader drops it.
        wait_until("fstrm_capture listens", || std::net::TcpStream::connect(address).is_ok());
        capture
    }

    fn spawn(listen: &[&std::ffi::OsStr], output: PathBuf) -> Capture {
        let log = output.with_extension("log");
        let child = Command::new("fstrm_capture")
            // Debug level 3 reports each connection accepted.
            .args(["-d", "-d", "-d", "-t", "protobuf:dnstap.Dnstap"])
            .args(listen)
            .arg("-w")
            .arg(&output)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Capture { child, output, log }
    }

    /// Connections the reader accepted so far.
    fn accepted(&self) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().matches("accepted new connection").count()
    }

    /// Stops the reader cleanly (it closes its file) and decodes the file
    /// with `dnstap-read -y`: one YAML document per message.
    fn finish(mut self) -> Vec<String> {
        terminate(&mut self.child);
        let output = Command::new("dnstap-read").arg("-y").arg(&self.output).output().unwrap();
        assert!(output.status.success(), "dnstap-read: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().split("---\n").filter(|document| !document.trim().is_empty()).map(String::from).collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGTERM, then waits: the process ends as an operator would end it.
fn terminate(child: &mut Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    child.wait().unwrap();
}

/// The messages of `kind` (AUTH_QUERY, AUTH_RESPONSE) about `name`.
fn messages<'a>(documents: &'a [String], kind: &str, name: &str) -> Vec<&'a String> {
    let question = format!("'{name}. IN ");
    documents.iter().filter(|document| document.contains(&format!("  type: {kind}\n")) && document.contains(&question)).collect()
}

fn dnstap_section(socket: &Path, extra: &str) -> String {
    format!("[dnstap]\nsocket = \"{}\"\nidentity = \"ns-test\"\n{extra}", socket.display())
}

fn dig(server: SocketAddr, args: &[&str]) -> String {
    let output = Command::new("dig")
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), "+tries=1", "+time=5"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "dig {args:?}: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8(output.stdout).unwrap()
}

fn kdig(server: SocketAddr, args: &[&str]) -> String {
    let output = Command::new("kdig")
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), "+retry=0", "+timeout=5"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "kdig {args:?}: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn every_query_over_every_transport_is_logged_with_its_rcode() {
    if !tools_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let capture = Capture::start(&socket, dir.path().join("run.dnstap"));
    let declarations = Declarations::europe_service().toml();
    let (encrypted, https) = (free_port(), free_port());
    assert_ne!(encrypted, https);
    let tls = format!(
        "[tls]\nlisten = [\"127.0.0.1:{encrypted}\"]\nhttps_listen = [\"127.0.0.1:{https}\"]\nquic_listen = [\"127.0.0.1:{encrypted}\"]\n"
    );
    let mut pharos = start(&format!("{}{tls}{declarations}", dnstap_section(&socket, "")));
    let server = pharos.address;
    let encrypted_server = SocketAddr::from(([127, 0, 0, 1], encrypted));
    assert!(dig(server, &["ns.example.test", "A"]).contains("status: NOERROR"));
    assert!(dig(server, &["missing.example.test", "A"]).contains("status: NXDOMAIN"));
    assert!(kdig(server, &["+tcp", "tcp.example.test", "TXT"]).contains("status: NXDOMAIN"));
    assert!(kdig(server, &["+tcp", "+subnet=198.51.100.0/24", "svc.example.test", "A"]).contains("192.0.2.10"));
    assert!(kdig(encrypted_server, &["+tls", "tls.example.test", "A"]).contains("status: NXDOMAIN"));
    let https_server = SocketAddr::from(([127, 0, 0, 1], https));
    assert!(kdig(https_server, &["+https", "https.example.test", "A"]).contains("status: NXDOMAIN"));
    assert!(kdig(encrypted_server, &["+quic", "quic.example.test", "A"]).contains("status: NXDOMAIN"));
    terminate(&mut pharos.child);
    let documents = capture.finish();

    for (name, protocol, status) in [
        ("ns.example.test", "UDP", "NOERROR"),
        ("missing.example.test", "UDP", "NXDOMAIN"),
        ("tcp.example.test", "TCP", "NXDOMAIN"),
        ("svc.example.test", "TCP", "NOERROR"),
        ("tls.example.test", "DOT", "NXDOMAIN"),
        ("https.example.test", "DOH", "NXDOMAIN"),
        ("quic.example.test", "DOQ", "NXDOMAIN"),
    ] {
        let queries = messages(&documents, "AUTH_QUERY", name);
        let responses = messages(&documents, "AUTH_RESPONSE", name);
        assert_eq!((queries.len(), responses.len()), (1, 1), "{name}: one query and its response\n{documents:#?}");
        let response = responses[0];
        // BIND 9.18's dnstap-read names no protocol but UDP and TCP.
        if ["UDP", "TCP"].contains(&protocol) {
            assert!(response.contains(&format!("socket_protocol: {protocol}")), "{name}: not over {protocol}\n{response}");
        }
        for expected in [
            format!("status: {status}"),
            "identity: ns-test".to_string(),
            "socket_family: INET".to_string(),
            format!(
                "response_port: {}",
                [("DOT", encrypted), ("DOH", https), ("DOQ", encrypted)]
                    .into_iter()
                    .find(|(name, _)| *name == protocol)
                    .map_or(server.port(), |(_, port)| port)
            ),
        ] {
            assert!(response.contains(&expected), "{name}: no `{expected}` in\n{response}");
        }
    }
    let routed = messages(&documents, "AUTH_RESPONSE", "svc.example.test")[0];
    assert!(routed.contains("192.0.2.10"), "{routed}");
}

#[test]
fn a_query_relayed_by_dnsdist_is_logged_from_the_client_its_header_names() {
    if !tools_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let capture = Capture::start(&socket, dir.path().join("proxied.dnstap"));
    let mut server = proxy::start_behind_proxy_with(&dnstap_section(&socket, ""));
    let Some(dnsdist) = proxy::dnsdist(server.pharos.address) else { return };
    assert!(proxy::udp_from(proxy::WEST, dnsdist.address, &proxy::service_query(1)).is_some());
    let mut stream = proxy::tcp_from(proxy::EAST, dnsdist.address);
    crate::encrypted::ask(&mut stream, &proxy::service_query(2));
    terminate(&mut server.pharos.child);
    let documents = capture.finish();
    let queries = messages(&documents, "AUTH_QUERY", proxy::SERVICE);
    assert_eq!(queries.len(), 2, "{documents:#?}");
    for (query, protocol, client) in [(queries[0], "UDP", proxy::WEST), (queries[1], "TCP", proxy::EAST)] {
        for expected in [format!("socket_protocol: {protocol}"), format!("query_address: \"{client}\"\n")] {
            assert!(query.contains(&expected), "no `{expected}` in\n{query}");
        }
    }
}

#[test]
fn one_query_in_n_is_logged_to_a_tcp_reader() {
    if !tools_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let reader = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let capture = Capture::start_tcp(reader, dir.path().join("sampled.dnstap"));
    let mut pharos = start(&format!("[dnstap]\ntcp = \"{reader}\"\nsample = 7\n"));
    // The UDP worker counts every query, the start-up probes too: of any 7
    // in a row it logs exactly one.
    for _ in 0..7 * 9 {
        assert!(udp_query(pharos.address, "sampled.example.test", Rtype::A).is_some());
    }
    terminate(&mut pharos.child);
    let documents = capture.finish();
    assert_eq!(messages(&documents, "AUTH_QUERY", "sampled.example.test").len(), 9);
    assert_eq!(messages(&documents, "AUTH_RESPONSE", "sampled.example.test").len(), 9);
}

/// `pharos_dnstap_dropped_total` in a scrape of the control listener.
fn dropped(api: &str) -> u64 {
    let (status, body) = request("GET", &format!("{api}/metrics"), Some(TOKEN), None);
    assert_eq!(status, 200);
    let Value::String(text) = body else { panic!("not the text format: {body}") };
    let line = text.lines().find(|line| line.starts_with("pharos_dnstap_dropped_total ")).expect("the dropped counter is scraped");
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

#[test]
fn a_reader_that_goes_away_stops_no_answer_and_the_next_one_is_found() {
    if !tools_present() {
        return;
    }
    const QUEUE: u64 = 4096;
    const WHILE_GONE: u64 = 6000;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let first = Capture::start(&socket, dir.path().join("first.dnstap"));
    let (mut pharos, api) = start_with_api(TOKEN, &dnstap_section(&socket, ""));
    wait_until("the writer connects", || first.accepted() == 1);
    drop(first);
    for _ in 0..WHILE_GONE {
        assert!(udp_query(pharos.address, "unheard.example.test", Rtype::A).is_some(), "answered with no reader");
    }
    // The writer holds the queue's worth, and takes one exchange out per
    // back-off while it waits for a reader.
    let dropped_while_gone = dropped(&api);
    assert!(dropped_while_gone >= WHILE_GONE - QUEUE - 20, "{dropped_while_gone} dropped");

    let second = Capture::start(&socket, dir.path().join("second.dnstap"));
    wait_until("the writer reconnects", || second.accepted() == 1);
    for _ in 0..5 {
        assert!(udp_query(pharos.address, "heard.example.test", Rtype::A).is_some());
    }
    terminate(&mut pharos.child);
    let documents = second.finish();
    assert_eq!(messages(&documents, "AUTH_RESPONSE", "heard.example.test").len(), 5);
}
