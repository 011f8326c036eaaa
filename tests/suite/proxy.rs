//! The PROXY protocol on the DNS listeners, behind a real dnsdist (Debian's
//! package) that relays UDP and TCP with `useProxyProtocol`: two clients on
//! two loopback addresses, in two regions, get their own regions' answers
//! through it. Over TLS and HTTPS the test sends the header itself (dnsdist
//! speaks plain DNS to its backends), then does the handshake with rustls.
//! A header from a source not allowed to send one, and none from the
//! proxy, are refused and counted. Loopback only; every wait has a deadline.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use domain::base::Message;
use domain::base::iana::Rtype;
use pharos_wire::framing::framed;
use socket2::{Domain, Socket, Type};

use crate::common::declarations::Declarations;
use crate::common::*;
use crate::encrypted::{TLS_13, ask, tls_client, tls_handshake};

/// The proxy's address, the one source allowed to send headers.
const PROXY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
/// Two clients, each alone in a region, and the replica each region is sent
/// to: east to 192.0.2.10, west to 192.0.2.20.
pub(crate) const EAST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
pub(crate) const WEST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const TOKEN: &str = "proxy-token";
pub(crate) const SERVICE: &str = "svc.example.test";

/// Pharos taking PROXY headers from [`PROXY`], with DNS over TLS and
/// HTTPS, and the control API for its metrics.
pub(crate) struct Proxied {
    pub(crate) pharos: Pharos,
    api: String,
    dot: SocketAddr,
    doh: SocketAddr,
}

fn start_behind_proxy() -> Proxied {
    start_behind_proxy_with("")
}

/// [`start_behind_proxy`] with `config_extra` (TOML tables) besides.
pub(crate) fn start_behind_proxy_with(config_extra: &str) -> Proxied {
    let [dns, api, dot, doh] = [(); 4].map(|()| SocketAddr::from((Ipv4Addr::LOCALHOST, free_port())));
    let routing = Declarations::new()
        .region(1, "east", &["127.0.0.2/32"])
        .region(2, "west", &["127.0.0.3/32"])
        .service(SERVICE)
        .policy("region-probabilities")
        .replica("e", "192.0.2.10")
        .replica("w", "192.0.2.20")
        .probabilities("east", &[("e", 1.0, 60)])
        .probabilities("west", &[("w", 1.0, 60)])
        .toml();
    let extra = format!(
        "random_seed = 1\nproxy_protocol_from = [\"{PROXY}/32\"]\n[control]\nlisten = \"{api}\"\ntoken = \"{TOKEN}\"\n\
         [tls]\nlisten = [\"{dot}\"]\nhttps_listen = [\"{doh}\"]\n{routing}{config_extra}"
    );
    Proxied { pharos: start_at(dns, &extra, ZONE), api: format!("http://{api}"), dot, doh }
}

impl Proxied {
    /// The number of refusals of `reason` over `transport` the metrics count.
    fn refused(&self, transport: &str, reason: &str) -> u64 {
        let (status, scraped) = request("GET", &format!("{}/metrics", self.api), Some(TOKEN), None);
        assert_eq!(status, 200);
        let series = format!("pharos_proxy_refused_total{{transport=\"{transport}\",reason=\"{reason}\"}} ");
        let scraped = scraped.as_str().expect("the text format");
        let line = scraped.lines().find_map(|line| line.strip_prefix(&series)).unwrap_or_else(|| panic!("no {series}in\n{scraped}"));
        line.parse().unwrap()
    }
}

/// A running dnsdist, killed when dropped.
pub(crate) struct Dnsdist {
    child: Child,
    pub(crate) address: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Dnsdist {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// dnsdist in front of `backend`, sending it PROXY version 2 headers over
/// UDP and TCP from [`PROXY`]; `None` (after saying SKIP) without dnsdist.
pub(crate) fn dnsdist(backend: SocketAddr) -> Option<Dnsdist> {
    let program = require("dnsdist", "dnsdist")?;
    let dir = tempfile::tempdir().unwrap();
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    // Up without health checks: the test asks only once it answers.
    let config = format!(
        "setSecurityPollSuffix(\"\")\nsetLocal(\"{address}\")\nsetACL({{\"127.0.0.0/8\"}})\n\
         newServer{{address=\"{backend}\", source=\"{PROXY}\", useProxyProtocol=true}}\ngetServer(0):setUp()\n"
    );
    let path = dir.path().join("dnsdist.conf");
    std::fs::write(&path, config).unwrap();
    let log = std::fs::File::create(dir.path().join("dnsdist.log")).unwrap();
    let child = Command::new(program)
        .args(["--supervised", "--disable-syslog", "-C"])
        .arg(&path)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut dnsdist = Dnsdist { child, address, _dir: dir };
    wait_until("dnsdist relays a query", || {
        if let Some(status) = dnsdist.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(dnsdist._dir.path().join("dnsdist.log")).unwrap_or_default();
            panic!("dnsdist exited ({status}):\n{log}");
        }
        udp_from(EAST, address, &query_bytes(1, "www.example.test", Rtype::A)).is_some()
    });
    Some(dnsdist)
}

/// `query` sent over UDP from `source` to `server`: the answer, if one
/// comes within a second.
pub(crate) fn udp_from(source: Ipv4Addr, server: SocketAddr, query: &[u8]) -> Option<Message<Vec<u8>>> {
    let socket = UdpSocket::bind((source, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    socket.send_to(query, server).unwrap();
    let mut buffer = vec![0; 4096];
    let length = socket.recv(&mut buffer).ok()?;
    buffer.truncate(length);
    Some(Message::from_octets(buffer).unwrap())
}

/// A TCP connection from `source` to `server`.
pub(crate) fn tcp_from(source: Ipv4Addr, server: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((source, 0)).into()).unwrap();
    socket.connect_timeout(&server.into(), Duration::from_secs(5)).unwrap();
    let stream = TcpStream::from(socket);
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream
}

/// A PROXY version 2 header: `client` speaking to `server` over TCP.
pub(crate) fn header_v2(client: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let (SocketAddr::V4(client), SocketAddr::V4(server)) = (client, server) else { panic!("IPv4 only") };
    let mut header = pharos_wire::proxy::V2_SIGNATURE.to_vec();
    header.extend([0x21, 0x11, 0, 12]);
    header.extend(client.ip().octets());
    header.extend(server.ip().octets());
    header.extend(client.port().to_be_bytes());
    header.extend(server.port().to_be_bytes());
    header
}

/// The replica the answer for the service sends its asker to.
fn replica(answer: &Message<Vec<u8>>) -> IpAddr {
    first_address_and_ttl(answer).0
}

pub(crate) fn service_query(id: u16) -> Vec<u8> {
    query_bytes(id, SERVICE, Rtype::A)
}

const TO_EAST: &str = "192.0.2.10";
const TO_WEST: &str = "192.0.2.20";

#[test]
fn clients_behind_dnsdist_are_routed_by_their_own_addresses_over_udp_and_tcp() {
    let server = start_behind_proxy();
    let Some(dnsdist) = dnsdist(server.pharos.address) else { return };
    for (client, expected) in [(EAST, TO_EAST), (WEST, TO_WEST)] {
        let over_udp = udp_from(client, dnsdist.address, &service_query(2)).expect("an answer through dnsdist over UDP");
        assert_eq!(replica(&over_udp), expected.parse::<IpAddr>().unwrap(), "{client} over UDP");
        let mut stream = tcp_from(client, dnsdist.address);
        let over_tcp = ask(&mut stream, &service_query(3));
        assert_eq!(replica(&over_tcp), expected.parse::<IpAddr>().unwrap(), "{client} over TCP");
    }
    // A client's EDNS Client Subnet still wins over its address (every
    // sender's is believed without client_subnet_trusted_from).
    let for_east = ecs_query(5, SERVICE, Rtype::A, Some((IpAddr::V4(EAST), 32)));
    let answer = udp_from(WEST, dnsdist.address, &for_east).expect("an answer through dnsdist");
    assert_eq!(replica(&answer), TO_EAST.parse::<IpAddr>().unwrap(), "the subnet's region, not the client's");
    // Asked directly, the same clients are routed alike: the proxy changed
    // nothing but the path.
    assert_eq!(replica(&udp_from(WEST, server.pharos.address, &service_query(4)).unwrap()), TO_WEST.parse::<IpAddr>().unwrap());
    for transport in ["udp", "tcp"] {
        for reason in ["unexpected", "missing", "malformed"] {
            assert_eq!(server.refused(transport, reason), 0, "{transport} {reason}: {}", server.pharos.log());
        }
    }
}

#[test]
fn a_header_from_a_stranger_and_none_from_the_proxy_are_refused_and_counted() {
    let server = start_behind_proxy();
    let address = server.pharos.address;
    // A client naming another as itself, to be answered as that one.
    let forged = [header_v2(SocketAddr::from((EAST, 5300)), address), service_query(5)].concat();
    assert!(udp_from(WEST, address, &forged).is_none(), "a header from a source not allowed is refused");
    assert_eq!(server.refused("udp", "unexpected"), 1);
    assert!(udp_from(PROXY, address, &service_query(6)).is_none(), "the proxy without a header is refused");
    assert_eq!(server.refused("udp", "missing"), 1);
    let mut cut = forged.clone();
    cut.truncate(20);
    assert!(udp_from(PROXY, address, &cut).is_none());
    assert_eq!(server.refused("udp", "malformed"), 1);

    let mut stranger = tcp_from(WEST, address);
    stranger.write_all(&[b"PROXY TCP4 127.0.0.2 127.0.0.1 5300 53\r\n".as_slice(), &framed(&service_query(7))].concat()).unwrap();
    assert!(closed_by_server(&mut stranger), "a stranger's connection with a header is closed unanswered");
    let mut bare = tcp_from(PROXY, address);
    bare.write_all(&framed(&service_query(8))).unwrap();
    assert!(closed_by_server(&mut bare), "the proxy's connection without a header is closed unanswered");
    wait_until("the connections' refusals are counted", || {
        server.refused("tcp", "unexpected") == 1 && server.refused("tcp", "missing") == 1
    });
    // The one way in stays open: the proxy's header, then the query.
    let mut proxied = tcp_from(PROXY, address);
    proxied.write_all(&header_v2(SocketAddr::from((EAST, 5300)), address)).unwrap();
    assert_eq!(replica(&ask(&mut proxied, &service_query(9))), TO_EAST.parse::<IpAddr>().unwrap());
    assert!(server.pharos.log().contains("PROXY protocol: refused"), "{}", server.pharos.log());
}

#[test]
fn over_tls_and_https_the_header_comes_before_the_handshake() {
    let server = start_behind_proxy();
    let config = tls_client(&server.pharos, TLS_13, &[b"dot"]);
    for (client, expected) in [(EAST, TO_EAST), (WEST, TO_WEST)] {
        // Version 1 over TLS, version 2 over HTTPS: proxies send either.
        let mut tcp = tcp_from(PROXY, server.dot);
        tcp.write_all(format!("PROXY TCP4 {client} 127.0.0.1 5300 853\r\n").as_bytes()).unwrap();
        let mut tls = tls_handshake(tcp, server.dot, &config);
        assert_eq!(replica(&ask(&mut tls, &service_query(10))), expected.parse::<IpAddr>().unwrap(), "{client} over TLS");
        let answer = over_https(&server, client);
        assert_eq!(replica(&answer), expected.parse::<IpAddr>().unwrap(), "{client} over HTTPS");
    }
    let mut stranger = tcp_from(WEST, server.doh);
    stranger.write_all(&header_v2(SocketAddr::from((EAST, 5300)), server.doh)).unwrap();
    assert!(closed_by_server(&mut stranger), "a stranger's header is refused before any handshake");
    wait_until("the refusal is counted", || server.refused("https", "unexpected") == 1);
    assert_eq!(server.refused("tls", "unexpected") + server.refused("tls", "missing") + server.refused("https", "missing"), 0);
}

/// The service's answer over HTTPS (HTTP/1.1, a GET) for `client`, whose
/// connection the proxy opens with a version 2 header.
fn over_https(server: &Proxied, client: Ipv4Addr) -> Message<Vec<u8>> {
    let config = tls_client(&server.pharos, TLS_13, &[b"http/1.1"]);
    let mut tcp = tcp_from(PROXY, server.doh);
    tcp.write_all(&header_v2(SocketAddr::from((client, 5300)), server.doh)).unwrap();
    let mut tls = tls_handshake(tcp, server.doh, &config);
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(service_query(0));
    write!(tls, "GET /dns-query?dns={encoded} HTTP/1.1\r\nHost: pharos\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = Vec::new();
    // The server closes after the answer; rustls reports a close without
    // close_notify as an error, after the bytes have been read.
    let _ = tls.read_to_end(&mut response);
    let body_at = response.windows(4).position(|window| window == b"\r\n\r\n").expect("an HTTP response") + 4;
    assert!(response.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&response));
    Message::from_octets(response[body_at..].to_vec()).unwrap()
}

/// How many of `count` queries for www.example.test, sent at once over
/// UDP from `source` to `server`, are answered within two seconds.
fn answered_of_a_burst(source: Ipv4Addr, server: SocketAddr, count: u16) -> usize {
    let socket = UdpSocket::bind((source, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    for id in 0..count {
        socket.send_to(&query_bytes(id, "www.example.test", Rtype::A), server).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let (mut answered, mut buffer) = (0, vec![0; 4096]);
    while answered < usize::from(count) && std::time::Instant::now() < deadline {
        answered += usize::from(socket.recv(&mut buffer).is_ok());
    }
    answered
}

#[test]
fn response_rate_limits_behind_dnsdist_count_each_client_not_the_proxy() {
    // Two clients in two /24s (the limit's unit): one floods, the other
    // asks a little. Were the proxy the client, both would share its bucket.
    let (flooder, bystander) = (Ipv4Addr::new(127, 0, 1, 9), Ipv4Addr::new(127, 0, 2, 9));
    let server = start_behind_proxy_with("[rrl]\nrate = 5\nslip = 0\n");
    let Some(dnsdist) = dnsdist(server.pharos.address) else { return };
    let flood = answered_of_a_burst(flooder, dnsdist.address, 60);
    assert!(flood < 30, "the flooder is limited: {flood} of 60 answered");
    let asked = answered_of_a_burst(bystander, dnsdist.address, 4);
    assert_eq!(asked, 4, "the other client has its own bucket, whole");
}
