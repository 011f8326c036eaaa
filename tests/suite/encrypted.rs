//! The encrypted transports of the real `pharos` binary, with real clients:
//! DNS over TLS with kdig and a rustls client; over HTTPS with kdig and
//! curl; over QUIC with hickory's client (another implementation) and, for
//! what no real client sends (protocol errors), a quinn-based test client.
//! Also: stalled and half-sent clients, a flood over the connection cap,
//! TLS session resumption, and the certificate's life. Loopback only; every
//! wait has a deadline.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use domain::base::Message;
use domain::base::iana::{Rcode, Rtype};
use domain::base::opt::UnknownOptData;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, RootCertStore, StreamOwned, SupportedProtocolVersion};

use crate::common;
use common::*;
use pharos_wire::framing::framed;

pub(crate) const TLS_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
const TLS_12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
/// EDNS options as a query carries them: code, length, data.
const KEEPALIVE: &[u8] = &[0, 11, 0, 0];
const PADDING: &[u8] = &[0, 12, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0];
/// The generated certificate, in the state directory (here the config's).
const GENERATED_CERTIFICATE: &str = "pharos-tls-certificate.pem";

/// A server with all three encrypted transports, and where they listen.
struct Encrypted {
    pharos: Pharos,
    dot: SocketAddr,
    doh: SocketAddr,
    doq: SocketAddr,
}

/// Starts pharos with DNS over TLS and QUIC on one port number (TCP and
/// UDP) and HTTPS on another, plus `config_extra`.
fn start_encrypted(config_extra: &str) -> Encrypted {
    let dot = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let doh = loop {
        let port = free_port();
        if port != dot.port() {
            break SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        }
    };
    let tls = format!("[tls]\nlisten = [\"{dot}\"]\nhttps_listen = [\"{doh}\"]\nquic_listen = [\"{dot}\"]\n");
    Encrypted { pharos: start(&format!("{tls}{config_extra}")), dot, doh, doq: dot }
}

fn generated_certificate(pharos: &Pharos) -> PathBuf {
    pharos.config.with_file_name(GENERATED_CERTIFICATE)
}

/// A client configuration that trusts the server's generated certificate
/// and nothing else, and resumes sessions (rustls keeps them in memory).
pub(crate) fn tls_client(pharos: &Pharos, versions: &[&'static SupportedProtocolVersion], alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(generated_certificate(pharos)).unwrap() {
        roots.add(certificate.unwrap()).unwrap();
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Arc::new(config)
}

pub(crate) type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A TLS connection to `server` with its handshake done.
fn tls_connect(server: SocketAddr, config: &Arc<ClientConfig>) -> TlsStream {
    tls_handshake(TcpStream::connect(server).unwrap(), server, config)
}

/// The TLS handshake with `server` over `tcp`, done.
pub(crate) fn tls_handshake(tcp: TcpStream, server: SocketAddr, config: &Arc<ClientConfig>) -> TlsStream {
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let connection = ClientConnection::new(config.clone(), ServerName::from(server.ip())).unwrap();
    let mut stream = StreamOwned::new(connection, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).unwrap();
    }
    stream
}

/// Sends one framed query and reads one framed answer.
pub(crate) fn ask(stream: &mut (impl Read + Write), query: &[u8]) -> Message<Vec<u8>> {
    stream.write_all(&framed(query)).unwrap();
    stream.flush().unwrap();
    read_frame(stream).unwrap()
}

/// A query for an A record with an OPT record carrying `options`.
fn query_with_options(id: u16, name: &str, options: &[u8]) -> Vec<u8> {
    query_of_type_with_options(id, name, Rtype::A, options)
}

/// A query for `rtype` with an OPT record carrying `options`.
fn query_of_type_with_options(id: u16, name: &str, rtype: Rtype, options: &[u8]) -> Vec<u8> {
    let mut query = query_bytes(id, name, rtype);
    query[11] = 1;
    query.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
    query.extend((options.len() as u16).to_be_bytes());
    query.extend(options);
    query
}

/// The options of a response's OPT record as (code, data).
fn edns_options(message: &Message<Vec<u8>>) -> Vec<(u16, Vec<u8>)> {
    let opt = message.opt().expect("an OPT record");
    let options = opt.opt().iter::<UnknownOptData<_>>().map(|option| option.unwrap());
    options.map(|option| (option.code().to_int(), option.as_slice().to_vec())).collect()
}

/// A client program, or None after a loud SKIP when it is not installed.
/// Under CI (the environment variable CI set) a missing one is a failure.
fn client(program: &'static str, package: &str) -> Option<&'static str> {
    if Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok() {
        return Some(program);
    }
    let message = format!("`{program}` is not installed (Debian package `{package}`)");
    assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
    eprintln!("\n*** SKIP: {message}. Install it with `apt-get install {package}`. ***\n");
    None
}

/// Runs a client to completion and returns what it printed.
fn output_of(command: &mut Command) -> String {
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed: {text}");
    text
}

#[test]
fn dns_over_tls_answers_kdig_on_one_kept_open_connection() {
    let Some(kdig) = client("kdig", "knot-dnsutils") else { return };
    let server = start_encrypted("");
    let port = server.dot.port().to_string();
    let queries = ["www.example.test", "A", "v.example.test", "TXT", "example.test", "SOA"];
    let output = output_of(
        Command::new(kdig).args(["@127.0.0.1", "-p", &port, "+tls", "+keepopen", "+padding", "+timeout=5", "+retry=0"]).args(queries),
    );
    assert_eq!(output.matches("status: NOERROR").count(), 3, "{output}");
    assert_eq!(output.matches("Received 468 B").count(), 3, "padded queries get padded answers: {output}");
}

#[test]
fn dns_over_tls_pipelines_queries_and_tells_the_keepalive() {
    let server = start_encrypted("[tcp]\nidle_timeout_ms = 7000\n");
    let mut stream = tls_connect(server.dot, &tls_client(&server.pharos, TLS_13, &[]));
    let queries: Vec<u8> = (0..100u16).flat_map(|id| framed(&query_with_options(id, "www.example.test", KEEPALIVE))).collect();
    stream.write_all(&queries).unwrap();
    let mut ids = Vec::new();
    for _ in 0..100 {
        let response = read_frame(&mut stream).unwrap();
        assert_eq!(edns_options(&response), [(11, vec![0, 70])], "the idle timeout in units of 100 ms");
        ids.push(response.header().id());
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
}

#[test]
fn plain_tcp_tells_the_keepalive_but_never_pads() {
    let server = start_encrypted("");
    let mut stream = TcpStream::connect(server.pharos.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let response = ask(&mut stream, &query_with_options(1, "www.example.test", &[KEEPALIVE, PADDING].concat()));
    assert_eq!(edns_options(&response), [(11, vec![0, 100])]);
}

#[test]
fn dns_over_https_answers_kdig_by_post_and_get() {
    let Some(kdig) = client("kdig", "knot-dnsutils") else { return };
    let server = start_encrypted("");
    let port = server.doh.port().to_string();
    let kdig_with = |method: &str| {
        let args = ["@127.0.0.1", "-p", &port, method, "+timeout=5", "+retry=0", "www.example.test", "A", "v.example.test", "TXT"];
        output_of(Command::new(kdig).args(args))
    };
    let posted = kdig_with("+https");
    assert_eq!(posted.matches("(HTTP/2-POST)").count(), 2, "{posted}");
    assert_eq!(posted.matches("status: NOERROR").count(), 2, "{posted}");
    let got = kdig_with("+https-get");
    assert_eq!(got.matches("(HTTP/2-GET)").count(), 2, "{got}");
    assert_eq!(got.matches("status: NOERROR").count(), 2, "{got}");
}

/// What curl saw: "STATUS HTTP-VERSION CONTENT-TYPE CACHE-CONTROL", and the body.
fn curl(curl: &str, server: &Encrypted, target: &str, args: &[&str], body: &[u8]) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let body_file = dir.path().join("body");
    let mut child = Command::new(curl)
        .args(["--silent", "--show-error", "--max-time", "5", "--cacert"])
        .arg(generated_certificate(&server.pharos))
        .arg("--output")
        .arg(&body_file)
        .args(["--write-out", "%{http_code} %{http_version} %{content_type} %header{cache-control}"])
        .args(args)
        .arg(format!("https://127.0.0.1:{}{target}", server.doh.port()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8_lossy(&output.stdout).into_owned(), std::fs::read(&body_file).unwrap_or_default())
}

#[test]
fn dns_over_https_answers_curl_over_http2_and_http1() {
    let Some(curl_program) = client("curl", "curl") else { return };
    let server = start_encrypted("");
    let query = query_bytes(0, "www.example.test", Rtype::A);
    let post = ["--http2", "--header", "content-type: application/dns-message", "--data-binary", "@-"];
    let (seen, body) = curl(curl_program, &server, "/dns-query", &post, &query);
    assert_eq!(seen, "200 2 application/dns-message max-age=300");
    assert_eq!(Message::from_octets(body).unwrap().header_counts().ancount(), 1);
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&query);
    let (seen, body) = curl(curl_program, &server, &format!("/dns-query?dns={encoded}"), &["--http1.1"], &[]);
    assert_eq!(seen, "200 1.1 application/dns-message max-age=300");
    assert_eq!(Message::from_octets(body).unwrap().header_counts().ancount(), 1);
    let rejected = [
        ("/dns-query", &["--http2", "--data-binary", "@-"][..], "415", "application/dns-message"),
        ("/dns-query?dns=not*base64", &["--http2"][..], "400", "base64url"),
        ("/dns-query", &["--http2", "--request", "PUT"][..], "405", "GET or POST"),
        ("/elsewhere", &["--http1.1"][..], "404", "/dns-query"),
    ];
    for (target, args, status, explanation) in rejected {
        let (seen, body) = curl(curl_program, &server, target, args, &query);
        assert!(seen.starts_with(status), "{target} {args:?}: {seen}");
        assert!(String::from_utf8_lossy(&body).contains(explanation), "{target} {args:?}: {}", String::from_utf8_lossy(&body));
    }
}

/// Runs `future` on a fresh runtime, failing the test if it takes too long.
fn block_on<F: Future>(future: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async { tokio::time::timeout(Duration::from_secs(20), future).await.expect("timed out") })
}

#[test]
fn dns_over_quic_answers_hickory_a_client_of_another_implementation() {
    use hickory_net::proto::op::{DnsRequest, DnsRequestOptions, Query};
    use hickory_net::proto::rr::{Name, RecordType};
    use hickory_net::quic::QuicClientStream;
    use hickory_net::xfer::{DnsRequestSender, FirstAnswer};

    let server = start_encrypted("");
    let crypto = Arc::unwrap_or_clone(tls_client(&server.pharos, TLS_13, &[]));
    block_on(async {
        let mut client = QuicClientStream::builder().crypto_config(crypto).build(server.doq, Arc::from("127.0.0.1")).await.unwrap();
        for name in ["www.example.test.", "ns.example.test."] {
            let query = Query::query(Name::from_ascii(name).unwrap(), RecordType::A);
            let request = DnsRequest::from_query(query, DnsRequestOptions::default());
            let response = client.send_message(request).first_answer().await.unwrap();
            assert_eq!((response.metadata.id, response.answers.len()), (0, 1), "{name}");
        }
    });
}

/// A DNS over QUIC connection from a test client built on quinn: no real
/// client sends the broken streams some tests need. The endpoint is kept
/// with the connection, which needs it.
async fn doq_connect(server: &Encrypted) -> (quinn::Connection, quinn::Endpoint) {
    let endpoint = doq_endpoint(server);
    let connection = endpoint.connect(server.doq, "127.0.0.1").unwrap().await.unwrap();
    (connection, endpoint)
}

/// A quinn client endpoint for `server`'s DNS over QUIC, which resumes its
/// sessions with it (rustls keeps them in memory).
fn doq_endpoint(server: &Encrypted) -> quinn::Endpoint {
    let tls = tls_client(&server.pharos, TLS_13, &[b"doq"]);
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut endpoint = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    endpoint
}

/// Sends `stream` as the whole of a new stream and reads what comes back.
async fn doq_exchange(connection: &quinn::Connection, stream: &[u8]) -> Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync>> {
    let (mut send, mut receive) = connection.open_bi().await?;
    send.write_all(stream).await?;
    send.finish()?;
    Ok(receive.read_to_end(2 + 65535).await?)
}

#[test]
fn dns_over_quic_answers_concurrent_streams_with_id_zero_and_padding() {
    let server = start_encrypted("");
    block_on(async {
        let (connection, _endpoint) = doq_connect(&server).await;
        let mut streams = tokio::task::JoinSet::new();
        for name in ["www.example.test", "ns.example.test"].into_iter().cycle().take(20) {
            let (connection, query) = (connection.clone(), framed(&query_with_options(0, name, PADDING)));
            streams.spawn(async move { doq_exchange(&connection, &query).await.unwrap() });
        }
        while let Some(answered) = streams.join_next().await {
            let stream = answered.unwrap();
            assert_eq!(u16::from_be_bytes([stream[0], stream[1]]) as usize, stream.len() - 2, "one framed message");
            let response = Message::from_octets(stream[2..].to_vec()).unwrap();
            assert_eq!((response.header().id(), response.header_counts().ancount()), (0, 1));
            assert_eq!(response.as_slice().len() % 468, 0, "padded to whole blocks");
        }
    });
}

#[test]
fn dns_over_quic_protocol_errors_close_the_connection() {
    let server = start_encrypted("");
    let good = framed(&query_bytes(0, "www.example.test", Rtype::A));
    let violations = [
        ("a message ID other than 0", framed(&query_bytes(7, "www.example.test", Rtype::A))),
        ("the keepalive option", framed(&query_with_options(0, "www.example.test", KEEPALIVE))),
        ("a stream that ends inside its message", good[..10].to_vec()),
        ("two messages on a stream", [&good[..], &good].concat()),
    ];
    block_on(async {
        for (violation, stream) in violations {
            let (connection, _endpoint) = doq_connect(&server).await;
            assert!(doq_exchange(&connection, &good).await.is_ok(), "a good query first");
            assert!(doq_exchange(&connection, &stream).await.is_err(), "{violation}: answered");
            match connection.closed().await {
                quinn::ConnectionError::ApplicationClosed(close) => {
                    assert_eq!(close.error_code, quinn::VarInt::from_u32(2), "{violation}: DOQ_PROTOCOL_ERROR");
                }
                other => panic!("{violation}: {other}"),
            }
        }
    });
}

#[test]
fn stalled_and_half_sent_clients_hold_only_their_own_task() {
    let server = start_encrypted("[tcp]\nidle_timeout_ms = 500\n");
    let dot = tls_client(&server.pharos, TLS_13, &[]);
    let mut no_handshake = TcpStream::connect(server.dot).unwrap();
    no_handshake.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut silent = tls_connect(server.dot, &dot);
    let mut half = tls_connect(server.dot, &dot);
    half.write_all(&framed(&query_bytes(1, "www.example.test", Rtype::A))[..7]).unwrap();
    half.flush().unwrap();
    let mut silent_https = tls_connect(server.doh, &tls_client(&server.pharos, TLS_13, &[b"h2"]));
    let started = Instant::now();
    let mut other = tls_connect(server.dot, &dot);
    assert_eq!(ask(&mut other, &query_bytes(9, "www.example.test", Rtype::A)).header().id(), 9);
    assert!(started.elapsed() < Duration::from_secs(2), "answered after {:?}", started.elapsed());
    assert!(closed_by_server(&mut no_handshake), "a client that never began its handshake is closed when idle");
    assert!(closed_by_server(&mut silent), "a client silent after its handshake is closed when idle");
    assert!(closed_by_server(&mut half), "a client that sent half a message is closed when idle");
    assert!(closed_by_server(&mut silent_https), "an HTTPS client that asks nothing is closed when idle");
}

#[test]
fn a_flood_over_the_cap_sheds_the_idle_not_a_busy_client() {
    const CAP: usize = 8;
    let server = start_encrypted(&format!("[tcp]\nmax_connections = {CAP}\nmax_connections_per_client = {CAP}\n"));
    let config = tls_client(&server.pharos, TLS_13, &[]);
    let mut busy = tls_connect(server.dot, &config);
    let mut flood = Vec::new();
    for id in 0..3 * CAP as u16 {
        assert_eq!(ask(&mut busy, &query_bytes(id, "www.example.test", Rtype::A)).header().id(), id, "the busy client is answered");
        // Its handshake done, the connection has been admitted.
        flood.push(tls_connect(server.dot, &config));
    }
    assert_eq!(ask(&mut busy, &query_bytes(0, "www.example.test", Rtype::A)).header().id(), 0);
    let closed: Vec<bool> = flood
        .iter_mut()
        .map(|idle| {
            idle.sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            closed_by_server(idle)
        })
        .collect();
    let kept = CAP - 1;
    let expected: Vec<bool> = (0..flood.len()).map(|index| index < flood.len() - kept).collect();
    assert_eq!(closed, expected, "the oldest idle connections are shed, the {kept} newest kept");
}

#[test]
fn out_of_descriptors_the_idlest_connections_make_room_and_a_busy_one_is_served() {
    // Shedding takes idle connections oldest first, and a flood can need
    // FLOOD + 1 - SPARE of them (the last for the fresh client after it),
    // so every one shed is one of the IDLE, and the last of those stays.
    const IDLE: usize = 60;
    const FLOOD: usize = 40;
    const SPARE: usize = 8;
    let server = start_encrypted("[tcp]\nidle_timeout_ms = 60000\n");
    let pid = server.pharos.child.id();
    let config = tls_client(&server.pharos, TLS_13, &[]);
    let connect = || {
        let stream = TcpStream::connect(server.dot).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        stream
    };
    let mut idle: Vec<TcpStream> = (0..IDLE).map(|_| connect()).collect();
    // Accepted after all those before it, the busy client is the newest.
    let mut busy = tls_connect(server.dot, &config);
    assert_eq!(ask(&mut busy, &query_bytes(1, "www.example.test", Rtype::A)).header().id(), 1);

    set_soft_descriptor_limit(pid, limit_leaving(pid, SPARE));
    let cpu_before = cpu_seconds(pid);
    let _flood: Vec<TcpStream> = (0..FLOOD).map(|_| connect()).collect();
    assert_eq!(ask(&mut busy, &query_bytes(2, "www.example.test", Rtype::A)).header().id(), 2, "answered during the flood");
    // Accepted after the whole flood: its answer means the flood is in.
    let mut fresh = tls_connect(server.dot, &config);
    assert_eq!(ask(&mut fresh, &query_bytes(3, "www.example.test", Rtype::A)).header().id(), 3, "a new client after the flood");
    assert_eq!(ask(&mut busy, &query_bytes(4, "www.example.test", Rtype::A)).header().id(), 4);
    let cpu = cpu_seconds(pid) - cpu_before;
    assert!(cpu < 2.0, "{cpu} s of CPU to take in {FLOOD} connections: spinning");

    assert!(closed_by_server(&mut idle[0]), "the idlest connection made room");
    let last = idle.last_mut().unwrap();
    last.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    assert!(!closed_by_server(last), "no more were shed than needed");
    let log = server.pharos.log();
    let lines = log.lines().filter(|line| line.contains("cannot accept connections")).count();
    assert!((1..=2).contains(&lines), "{lines} lines about failed accepts: {log}");
}

#[test]
fn tls_sessions_resume_from_tickets() {
    let server = start_encrypted("");
    for (versions, doh) in [(TLS_13, false), (TLS_12, false), (TLS_13, true)] {
        let (address, alpn): (_, &[&[u8]]) = if doh { (server.doh, &[b"http/1.1"]) } else { (server.dot, &[]) };
        let config = tls_client(&server.pharos, versions, alpn);
        let kinds: Vec<HandshakeKind> = (0..2)
            .map(|_| {
                let mut stream = tls_connect(address, &config);
                // TLS 1.3 tickets come after the handshake: read something.
                if doh {
                    stream.write_all(b"GET /dns-query HTTP/1.1\r\nHost: pharos\r\n\r\n").unwrap();
                    stream.read_exact(&mut [0; 12]).unwrap();
                } else {
                    ask(&mut stream, &query_bytes(1, "www.example.test", Rtype::A));
                }
                stream.conn.handshake_kind().unwrap()
            })
            .collect();
        assert_eq!(kinds, [HandshakeKind::Full, HandshakeKind::Resumed], "{versions:?}, HTTPS: {doh}");
    }
}

#[test]
fn handshakes_are_counted_full_or_resumed_per_transport() {
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let server = start_encrypted(&format!("[metrics]\nlisten = \"{metrics}\"\n"));
    let config = tls_client(&server.pharos, TLS_13, &[]);
    for id in 0..2 {
        // TLS 1.3 tickets come after the handshake: read an answer first.
        ask(&mut tls_connect(server.dot, &config), &query_bytes(id, "www.example.test", Rtype::A));
    }
    block_on(async {
        let endpoint = doq_endpoint(&server);
        for _ in 0..2 {
            let connection = endpoint.connect(server.doq, "127.0.0.1").unwrap().await.unwrap();
            doq_exchange(&connection, &framed(&query_bytes(0, "www.example.test", Rtype::A))).await.unwrap();
            connection.close(quinn::VarInt::from_u32(0), b"");
        }
        endpoint.wait_idle().await;
    });
    let (status, scrape) = request("GET", &format!("http://{metrics}/metrics"), None, None);
    assert_eq!(status, 200, "{scrape}");
    let scrape = scrape.as_str().expect("the text format").to_string();
    for transport in ["tls", "quic"] {
        for kind in ["full", "resumed"] {
            let sample = format!("pharos_tls_handshakes_total{{transport=\"{transport}\",kind=\"{kind}\"}} 1\n");
            assert!(scrape.contains(&sample), "{sample} in:\n{scrape}");
        }
    }
    let untouched = "pharos_tls_handshakes_total{transport=\"https\",kind=\"full\"} 0\n";
    assert!(scrape.contains(untouched), "{scrape}");
}

#[test]
fn the_generated_certificate_is_made_once_and_kept() {
    let Encrypted { pharos, dot, .. } = start_encrypted("");
    let path = generated_certificate(&pharos);
    assert!(pharos.log().contains(&path.display().to_string()), "the log says where it is: {}", pharos.log());
    let made = std::fs::read(&path).unwrap();
    let pharos = pharos.kill_and_restart();
    assert_eq!(std::fs::read(&path).unwrap(), made);
    assert!(pharos.log().contains("made at an earlier start"), "{}", pharos.log());
    // The client trusts that certificate only.
    let mut stream = tls_connect(dot, &tls_client(&pharos, TLS_13, &[]));
    assert_eq!(ask(&mut stream, &query_bytes(3, "www.example.test", Rtype::A)).header().id(), 3);
}

/// Starts pharos on `tls` settings that must fail, and returns its complaint.
fn start_fails(dir: &Path, tls: &str) -> String {
    let config = dir.join("pharos.toml");
    let [listen, tls_listen] = [(); 2].map(|()| SocketAddr::from((Ipv4Addr::LOCALHOST, free_port())));
    let text = format!(
        "[server]\nlisten = [\"{listen}\"]\n[tls]\nlisten = [\"{tls_listen}\"]\n{tls}\n[[zone]]\norigin = \"example.test\"\nfile = \"zone\"\n"
    );
    std::fs::write(&config, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["serve", "--config"]).arg(&config).output().unwrap();
    assert!(!output.status.success(), "pharos started with {tls}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_certificate_settings_stop_the_start_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("zone"), ZONE).unwrap();
    std::fs::write(dir.path().join("garbage.pem"), "not a certificate\n").unwrap();
    let cases = [
        ("certificate = \"missing.pem\"\nkey = \"garbage.pem\"", "missing.pem"),
        ("certificate = \"garbage.pem\"\nkey = \"garbage.pem\"", "holds no certificate"),
        ("certificate = \"garbage.pem\"", "tls.certificate and tls.key go together"),
    ];
    for (tls, expected) in cases {
        let complaint = start_fails(dir.path(), tls);
        assert!(complaint.contains(expected), "{tls}: {complaint}");
    }
    let garbage = dir.path().join("garbage.pem").display().to_string();
    assert!(start_fails(dir.path(), "certificate = \"garbage.pem\"\nkey = \"garbage.pem\"").contains(&garbage));
}

/// Zone transfers are answered over TCP and TLS, to listed clients only:
/// unlisted there, AXFR and IXFR are refused with EDE 18, Prohibited;
/// elsewhere the response says they take TCP or TLS (EDE 21), but AXFR
/// over UDP gets a bare NOTIMP, as from Knot DNS.
#[test]
fn zone_transfers_are_refused_with_a_reason_on_every_transport() {
    let Some(curl_program) = client("curl", "curl") else { return };
    let server = start_encrypted("");
    for rtype in [Rtype::AXFR, Rtype::IXFR] {
        let query = query_of_type_with_options(0, "example.test", rtype, &[]);
        let udp = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        udp.send_to(&query, server.pharos.address).unwrap();
        let mut datagram = [0; 512];
        let length = udp.recv(&mut datagram).unwrap();
        let mut tcp = TcpStream::connect(server.pharos.address).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut tls = tls_connect(server.dot, &tls_client(&server.pharos, TLS_13, &[]));
        let post = ["--http2", "--header", "content-type: application/dns-message", "--data-binary", "@-"];
        let (_, over_https) = curl(curl_program, &server, "/dns-query", &post, &query);
        let over_quic = block_on(async {
            let (connection, _endpoint) = doq_connect(&server).await;
            doq_exchange(&connection, &framed(&query)).await.unwrap()
        });
        let responses = [
            ("UDP", Message::from_octets(datagram[..length].to_vec()).unwrap()),
            ("TCP", ask(&mut tcp, &query)),
            ("TLS", ask(&mut tls, &query)),
            ("HTTPS", Message::from_octets(over_https).unwrap()),
            ("QUIC", Message::from_octets(over_quic[2..].to_vec()).unwrap()),
        ];
        let needs_tcp = [&21u16.to_be_bytes()[..], b"zone transfers are answered over TCP and TLS"].concat();
        let not_allowed = [&18u16.to_be_bytes()[..], b"transfer not allowed"].concat();
        for (transport, response) in responses {
            let said = (response.header().rcode(), edns_options(&response));
            let expected = match transport {
                "UDP" if rtype == Rtype::AXFR => (Rcode::NOTIMP, vec![]),
                "TCP" | "TLS" => (Rcode::REFUSED, vec![(15, not_allowed.clone())]),
                _ => (Rcode::REFUSED, vec![(15, needs_tcp.clone())]),
            };
            assert_eq!(said, expected, "{rtype} over {transport}");
        }
    }
}
