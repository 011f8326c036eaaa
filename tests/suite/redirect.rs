//! HTTP redirection by the real `pharos` binary, asked by curl and, for
//! what curl does not send (a request without a Host, a PROXY header
//! naming another client), by raw bytes over TCP: the replica the routing
//! core picks for the client, the URL kept, the client found through
//! trusted proxies (X-Forwarded-For, PROXY protocol versions 1 and 2),
//! HTTPS with the generated certificate, and every refusal. Loopback only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::common;
use common::declarations::Declarations;
use common::*;

/// Regions by CIDR and services: `svc` sends Europe to fra, Asia to sin and
/// everyone else to iad; the others have one replica per family at most.
fn services() -> String {
    Declarations::new()
        .region(1, "europe", &["198.51.100.0/24", "2001:db8:e::/48"])
        .region(2, "asia", &["203.0.113.0/24"])
        .service("svc.example.test")
        .policy("region-probabilities")
        .replica("fra", FRA)
        .replica("sin", SIN)
        .replica("iad", IAD)
        .probabilities("europe", &[("fra", 1.0, 60)])
        .probabilities("asia", &[("sin", 1.0, 30)])
        .probabilities("default", &[("iad", 1.0, 120)])
        .service("v6only.example.test")
        .replica("a", "2001:db8::1")
        .service("dual.example.test")
        .replica("v4", "192.0.2.40")
        .replica("v6", "2001:db8::40")
        .service("named.example.test")
        .replica("fra", "192.0.2.50")
        .line("redirect_host = \"fra.cdn.example\"")
        .toml()
}

const FRA: &str = "192.0.2.10";
const SIN: &str = "192.0.2.20";
const IAD: &str = "192.0.2.30";

/// A server redirecting over HTTP (and HTTPS, if asked) that trusts
/// `trusted` proxies.
struct Redirecting {
    pharos: Pharos,
    http: SocketAddr,
    https: SocketAddr,
}

fn start_redirecting(trusted: &str, proxy_protocol: bool) -> Redirecting {
    let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let https = loop {
        let port = free_port();
        if port != http.port() {
            break SocketAddr::from(([127, 0, 0, 1], port));
        }
    };
    let settings = format!(
        "random_seed = 1\n[http]\nlisten = [\"{http}\"]\nhttps_listen = [\"{https}\"]\ntrusted_proxies = [{trusted}]\n\
         proxy_protocol = {proxy_protocol}\n{}",
        services()
    );
    Redirecting { pharos: start(&settings), http, https }
}

/// Runs curl with `arguments` and returns what it wrote for `-w format`
/// (curl's account of the exchanges), the body thrown away.
fn curl(format: &str, arguments: &[&str]) -> String {
    let output = Command::new("curl").args(["-s", "-o", "/dev/null", "--max-time", "10", "-w", format]).args(arguments).output();
    String::from_utf8(output.expect("curl runs").stdout).unwrap().trim_end().to_string()
}

/// The status and redirect URL of `GET path` for `host` on `server`,
/// asked with `arguments` besides.
fn redirect(server: SocketAddr, host: &str, path: &str, arguments: &[&str]) -> String {
    let url = format!("http://{server}{path}");
    let host = format!("Host: {host}");
    curl("%{http_code} %{redirect_url}", &[&["-H", host.as_str(), url.as_str()], arguments].concat())
}

/// Sends `bytes` on a new connection and reads until the server closes.
fn raw(server: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(bytes).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

/// The status and Location of a raw response.
fn status_and_location(response: &str) -> (u16, Option<String>) {
    let status = response.split(' ').nth(1).and_then(|status| status.parse().ok()).unwrap_or(0);
    let location = response
        .lines()
        .find_map(|line| line.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("location")).map(|(_, value)| value.trim()))
        .map(String::from);
    (status, location)
}

/// A request for `svc.example.test/x` that closes the connection after it.
const REQUEST: &[u8] = b"GET /x HTTP/1.1\r\nHost: svc.example.test\r\nConnection: close\r\n\r\n";

/// A version 2 PROXY header for a TCP connection from `client` (IPv4).
fn proxy_v2(client: [u8; 4]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0C".to_vec();
    header.extend(client);
    header.extend([127, 0, 0, 1, 0xDC, 0x04, 0, 80]);
    header
}

#[test]
fn redirects_to_the_replica_the_routing_core_picks_for_the_client() {
    let server = start_redirecting("\"127.0.0.1/32\", \"10.0.0.0/8\"", false);
    let http = server.http;
    let from = |client: &str| format!("X-Forwarded-For: {client}");
    // Path and query kept, the region from the forwarded client.
    assert_eq!(redirect(http, "svc.example.test", "/a/b?c=d&e=%20f", &[]), format!("302 http://{IAD}/a/b?c=d&e=%20f"));
    assert_eq!(redirect(http, "svc.example.test", "/", &["-H", &from("198.51.100.7")]), format!("302 http://{FRA}/"));
    assert_eq!(redirect(http, "svc.example.test", "/", &["-H", &from("203.0.113.9")]), format!("302 http://{SIN}/"));
    // The port of the Host is kept; the name's case and final dot do not matter.
    assert_eq!(redirect(http, "SVC.Example.Test.:8080", "/p", &[]), format!("302 http://{IAD}:8080/p"));
    // Cached by the client only, for the decision's TTL.
    let host = "Host: svc.example.test";
    let url = format!("http://{http}/");
    assert_eq!(curl("%header{cache-control}", &["-H", host, "-H", &from("198.51.100.7"), &url]), "private, max-age=60");
    // HEAD is redirected like GET; other methods keep theirs: 307.
    assert_eq!(redirect(http, "svc.example.test", "/h", &["-I"]), format!("302 http://{IAD}/h"));
    assert_eq!(redirect(http, "svc.example.test", "/form", &["-d", "x=1"]), format!("307 http://{IAD}/form"));
    // Keep-alive: both requests on one connection.
    assert_eq!(curl("%{http_code} %{num_connects}\n", &["-o", "/dev/null", "-H", host, &url, &url]), "302 1\n302 0");
    // The family of the client first, else the other; the URL names IPv6 in brackets.
    assert_eq!(redirect(http, "dual.example.test", "/", &[]), "302 http://192.0.2.40/");
    assert_eq!(redirect(http, "dual.example.test", "/", &["-H", &from("2001:db8:e::7")]), "302 http://[2001:db8::40]/");
    assert_eq!(redirect(http, "v6only.example.test", "/v?6", &[]), "302 http://[2001:db8::1]/v?6");
    assert_eq!(redirect(http, "svc.example.test", "/", &["-H", &from("2001:db8:e::7")]), format!("302 http://{FRA}/"));
    // A replica's own host name.
    assert_eq!(redirect(http, "named.example.test:81", "/n", &[]), "302 http://fra.cdn.example:81/n");
    // An absolute URL's host wins over the Host header (RFC 9112 section 3.2.2).
    let absolute = raw(http, b"GET http://svc.example.test/abs HTTP/1.1\r\nHost: nope.example.test\r\nConnection: close\r\n\r\n");
    assert_eq!(status_and_location(&absolute), (302, Some(format!("http://{IAD}/abs"))));
}

#[test]
fn forwarded_clients_are_believed_from_trusted_proxies_only() {
    let server = start_redirecting("\"127.0.0.1/32\", \"10.0.0.0/8\"", false);
    let through = |chain: &[&str]| {
        let headers: Vec<String> = chain.iter().map(|entry| format!("X-Forwarded-For: {entry}")).collect();
        let arguments: Vec<&str> = headers.iter().flat_map(|header| ["-H", header.as_str()]).collect();
        redirect(server.http, "svc.example.test", "/", &arguments)
    };
    // The right-most address that is not a trusted proxy.
    assert_eq!(through(&["203.0.113.9, 198.51.100.7"]), format!("302 http://{FRA}/"));
    assert_eq!(through(&["198.51.100.7, 10.1.2.3"]), format!("302 http://{FRA}/"));
    assert_eq!(through(&["198.51.100.7", "10.1.2.3"]), format!("302 http://{FRA}/"), "one entry per header line");
    assert_eq!(through(&["[2001:db8:e::7]:4711,10.1.2.3:80"]), format!("302 http://{FRA}/"), "entries with ports");
    // All trusted: the farthest named; an entry that is not an address
    // stops the search at the proxy that wrote it.
    assert_eq!(through(&["10.9.9.9, 10.1.2.3"]), format!("302 http://{IAD}/"));
    assert_eq!(through(&["198.51.100.7, unknown, 10.1.2.3"]), format!("302 http://{IAD}/"));

    let untrusting = start_redirecting("\"10.0.0.0/8\"", false);
    let forged = ["-H", "X-Forwarded-For: 198.51.100.7"];
    assert_eq!(redirect(untrusting.http, "svc.example.test", "/", &forged), format!("302 http://{IAD}/"));
}

#[test]
fn proxy_protocol_headers_name_the_client() {
    let server = start_redirecting("\"127.0.0.1/32\"", true);
    let http = server.http;
    // curl's version 1 header names curl itself (127.0.0.1, trusted), so
    // X-Forwarded-For decides next.
    assert_eq!(redirect(http, "svc.example.test", "/", &["--haproxy-protocol"]), format!("302 http://{IAD}/"));
    let forwarded = ["--haproxy-protocol", "-H", "X-Forwarded-For: 203.0.113.9"];
    assert_eq!(redirect(http, "svc.example.test", "/", &forwarded), format!("302 http://{SIN}/"));
    let version_1 = [&b"PROXY TCP4 198.51.100.7 127.0.0.1 56324 80\r\n"[..], REQUEST].concat();
    assert_eq!(status_and_location(&raw(http, &version_1)), (302, Some(format!("http://{FRA}/x"))));
    let version_2 = [&proxy_v2([203, 0, 113, 9])[..], REQUEST].concat();
    assert_eq!(status_and_location(&raw(http, &version_2)), (302, Some(format!("http://{SIN}/x"))));
    // A listener for PROXY headers takes nothing else.
    assert_eq!(status_and_location(&raw(http, REQUEST)), (0, None));
    assert_eq!(redirect(http, "svc.example.test", "/", &[]), "000");

    // From a peer that is not trusted, the header is read but not believed.
    let untrusting = start_redirecting("\"10.0.0.0/8\"", true);
    assert_eq!(status_and_location(&raw(untrusting.http, &version_1)), (302, Some(format!("http://{IAD}/x"))));
    assert_eq!(status_and_location(&raw(untrusting.http, &version_2)), (302, Some(format!("http://{IAD}/x"))));
}

#[test]
fn https_redirects_with_the_generated_certificate() {
    let server = start_redirecting("", false);
    let certificate = server.pharos.config.with_file_name("pharos-tls-certificate.pem");
    let certificate = certificate.to_str().unwrap();
    let url = format!("https://{}/s?q", server.https);
    for version in ["--http2", "--http1.1"] {
        let format = "%{http_code} %{redirect_url} %header{cache-control}";
        let asked =
            curl(format, &[version, "--cacert", certificate, "-H", "Host: svc.example.test", "-H", "X-Forwarded-For: 198.51.100.7", &url]);
        assert_eq!(asked, format!("302 https://{IAD}/s?q private, max-age=120"), "{version}");
    }
}

#[test]
fn what_is_not_a_service_or_not_a_request_is_refused() {
    let server = start_redirecting("", false);
    let http = server.http;
    let body = |host: &str| {
        let output = Command::new("curl").args(["-s", "-H", &format!("Host: {host}"), &format!("http://{http}/")]).output().unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    assert_eq!(redirect(http, "nope.example.test", "/", &[]), "404");
    assert_eq!(body("nope.example.test"), "nope.example.test is not a service of this server\n");
    assert_eq!(redirect(http, "www.example.test", "/", &[]), "404", "zone data, not a service");
    assert_eq!(redirect(http, &http.to_string(), "/", &[]), "404");
    assert_eq!(redirect(http, "svc.example.test/x", "/", &[]), "400");
    let refused = |request: &[u8]| status_and_location(&raw(http, request)).0;
    assert_eq!(refused(b"\x16\x03\x01\x00\x05hello\r\n\r\n"), 400, "not HTTP");
    assert_eq!(refused(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"), 400, "no Host");
    assert_eq!(refused(b"GET / HTTP/1.0\r\n\r\n"), 400, "no Host");
    assert_eq!(refused(b"GET / HTTP/1.1\r\nHost: svc.example.test\r\nHost: svc.example.test\r\nConnection: close\r\n\r\n"), 400);
    assert_eq!(refused(b"OPTIONS * HTTP/1.1\r\nHost: svc.example.test\r\nConnection: close\r\n\r\n"), 400);
    let missing_host = raw(http, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(missing_host.ends_with("the request names no host: it needs a Host header\n"), "{missing_host}");
}
