//! Health checks through the real server, against real local servers as
//! replicas: Python's http.server (killed and restarted), OpenSSL's
//! s_server for HTTPS, Pharos itself for the DNS probe, and a small HTTP
//! server in this file whose answers the test sets (to make a replica
//! flap, or count the probes it gets).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use domain::base::iana::Rtype;
use domain::rdata::A;
use serde_json::Value;

use crate::common;
use common::*;

const TOKEN: &str = "health-token";

/// `python3 -m http.server` on `address`, serving a directory whose
/// `/health` says "ok"; killed when dropped.
struct PythonServer {
    child: Child,
    address: SocketAddr,
    _root: tempfile::TempDir,
}

impl PythonServer {
    fn start(address: SocketAddr) -> PythonServer {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("health"), "ok\n").unwrap();
        let child = Command::new("python3")
            .args(["-m", "http.server", &address.port().to_string(), "--bind", &address.ip().to_string()])
            .current_dir(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        wait_until("http.server listens", || std::net::TcpStream::connect(address).is_ok());
        PythonServer { child, address, _root: root }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP server whose status the test sets: 200, 503, or each in turn
/// (a flapping replica). It counts the requests it answers.
struct TestServer {
    address: SocketAddr,
    flapping: Arc<AtomicBool>,
    requests: Arc<AtomicU32>,
}

impl TestServer {
    fn start(ip: Ipv4Addr, port: u16) -> TestServer {
        let listener = TcpListener::bind((ip, port)).unwrap();
        let address = listener.local_addr().unwrap();
        let flapping = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU32::new(0));
        let (flap, count) = (flapping.clone(), requests.clone());
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut request = [0u8; 2048];
                let _ = stream.read(&mut request);
                let served = count.fetch_add(1, Ordering::SeqCst);
                let status = if flap.load(Ordering::SeqCst) && served % 2 == 1 { "503 Unavailable" } else { "200 OK" };
                let _ = stream.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n").as_bytes());
            }
        });
        TestServer { address, flapping, requests }
    }

    fn requests(&self) -> u32 {
        self.requests.load(Ordering::SeqCst)
    }
}

fn port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Pharos with the control API and `services` (TOML) appended.
fn start_with_services(services: &str) -> (Pharos, String) {
    start_with_api(TOKEN, services)
}

/// The addresses answered for `name` (sorted) and their TTL.
fn addresses(pharos: &Pharos, name: &str) -> (Vec<IpAddr>, u32) {
    let response = udp_query(pharos.address, name, Rtype::A).expect("an answer");
    let records: Vec<_> = response.answer().unwrap().limit_to::<A>().map(Result::unwrap).collect();
    let mut found: Vec<IpAddr> = records.iter().map(|record| IpAddr::V4(record.data().addr())).collect();
    found.sort();
    (found, records.first().map_or(0, |record| record.ttl().as_secs()))
}

fn ips(texts: &[&str]) -> Vec<IpAddr> {
    texts.iter().map(|text| text.parse().unwrap()).collect()
}

fn health_of(api: &str, service: &str, replica: &str) -> Value {
    let (_, report) = request("GET", &format!("{api}/v1/health"), Some(TOKEN), None);
    report
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["service"] == service && entry["replica"] == replica)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_dead_replica_leaves_after_the_fall_threshold_and_returns_after_the_rise() {
    let port = port();
    let a = PythonServer::start(SocketAddr::new("127.0.0.2".parse().unwrap(), port));
    let _b = PythonServer::start(SocketAddr::new("127.0.0.3".parse().unwrap(), port));
    let services = format!(
        r#"[[service]]
name = "web.example.test"
health = {{ kind = "http", port = {port}, path = "/health", body = "ok", interval_ms = 200, timeout_ms = 150, rise = 2, fall = 2 }}
[[service.replica]]
id = "a"
address = "127.0.0.2"
[[service.replica]]
id = "b"
address = "127.0.0.3"
"#
    );
    let (pharos, api) = start_with_services(&services);
    assert_eq!(addresses(&pharos, "web.example.test").0, ips(&["127.0.0.2", "127.0.0.3"]));
    let a_address = a.address;
    drop(a);
    wait_until("a leaves the answers", || addresses(&pharos, "web.example.test").0 == ips(&["127.0.0.3"]));
    let a_health = health_of(&api, "web.example.test", "a");
    assert!(a_health["up"] == false && a_health["last"].as_str().unwrap().contains("probe failed (HTTP GET 127.0.0.2"), "{a_health}");
    let (_, explained) = request("GET", &format!("{api}/v1/explain?name=web.example.test&client=192.0.2.1"), Some(TOKEN), None);
    assert!(explained["steps"].to_string().contains("not serving: a (probe failed"), "{explained}");
    assert!(pharos.log().contains("replica down"), "state changes are logged: {}", pharos.log());
    let _a = PythonServer::start(a_address);
    wait_until("a comes back", || addresses(&pharos, "web.example.test").0 == ips(&["127.0.0.2", "127.0.0.3"]));
    let (_, scraped) = request("GET", &format!("{api}/metrics"), Some(TOKEN), None);
    let scraped = scraped.as_str().expect("the text format");
    for series in [
        "pharos_replica_up{service=\"web.example.test\",replica=\"a\"} 1",
        "pharos_replica_up{service=\"web.example.test\",replica=\"b\"} 1",
        "pharos_health_transitions_total{service=\"web.example.test\",replica=\"a\"} 2",
    ] {
        assert!(scraped.lines().any(|line| line == series), "no `{series}` in the metrics (down and up again):\n{scraped}");
    }
    assert!(!scraped.contains("pharos_health_transitions_total{service=\"web.example.test\",replica=\"b\"}"), "b never moved");
}

#[test]
fn a_flapping_replica_does_not_flap_the_answers() {
    let port = port();
    let flappy = TestServer::start(Ipv4Addr::new(127, 0, 0, 4), port);
    flappy.flapping.store(true, Ordering::SeqCst);
    let _steady = TestServer::start(Ipv4Addr::new(127, 0, 0, 5), port);
    let services = format!(
        r#"[[service]]
name = "flap.example.test"
health = {{ kind = "http", port = {port}, interval_ms = 100, timeout_ms = 90, rise = 2, fall = 2 }}
[[service.replica]]
id = "flappy"
address = "127.0.0.4"
[[service.replica]]
id = "steady"
address = "192.0.2.5"
probe_address = "127.0.0.5"
"#
    );
    let (pharos, _api) = start_with_services(&services);
    // Every other probe fails: never two in a row, so nothing flips.
    let start = flappy.requests();
    wait_until("twenty probes were answered", || {
        assert_eq!(addresses(&pharos, "flap.example.test").0, ips(&["127.0.0.4", "192.0.2.5"]), "the answers flapped");
        flappy.requests() >= start + 20
    });
}

#[test]
fn when_all_are_down_a_service_fails_open_or_answers_nodata() {
    let port = port();
    let services = format!(
        r#"[[service]]
name = "open.example.test"
health = {{ kind = "tcp", port = {port}, interval_ms = 100, timeout_ms = 90, rise = 1, fall = 1 }}
[[service.replica]]
id = "a"
address = "127.0.0.6"
[[service]]
name = "closed.example.test"
when_all_down = "nodata"
health = {{ kind = "tcp", port = {port}, interval_ms = 100, timeout_ms = 90, rise = 1, fall = 1 }}
[[service.replica]]
id = "a"
address = "127.0.0.6"
"#
    );
    let (pharos, api) = start_with_services(&services);
    wait_until("the probes ran", || health_of(&api, "closed.example.test", "a")["up"] == false);
    assert_eq!(addresses(&pharos, "open.example.test").0, ips(&["127.0.0.6"]), "fail open: all enabled replicas");
    let response = udp_query(pharos.address, "closed.example.test", Rtype::A).unwrap();
    assert_eq!((response.header().rcode().to_int(), response.header_counts().ancount()), (0, 0), "NODATA");
    assert_eq!(response.header_counts().nscount(), 1, "with the SOA for negative caching");
}

#[test]
fn replicas_count_up_until_probed_unless_the_service_says_otherwise() {
    let port = port();
    let services = format!(
        r#"[[service]]
name = "warm.example.test"
health = {{ kind = "tcp", port = {port}, interval_ms = 5000, timeout_ms = 1000, fall = 3 }}
[[service.replica]]
id = "a"
address = "127.0.0.7"
[[service.replica]]
id = "b"
address = "127.0.0.8"
[[service]]
name = "cold.example.test"
when_all_down = "nodata"
health = {{ kind = "tcp", port = {port}, interval_ms = 5000, timeout_ms = 1000, start_down = true }}
[[service.replica]]
id = "a"
address = "127.0.0.7"
"#
    );
    let (pharos, _api) = start_with_services(&services);
    // Nothing listens on the port, but 3 failures 5 s apart take 10 s or more.
    assert_eq!(addresses(&pharos, "warm.example.test").0, ips(&["127.0.0.7", "127.0.0.8"]), "no cold-start outage");
    assert_eq!(addresses(&pharos, "cold.example.test").0, ips(&[]), "start_down: not answered before its probes pass");
}

#[test]
fn dns_and_https_probes_and_a_shrinking_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let (certificate, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let openssl = |args: &[&str]| Command::new("openssl").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
    let made = openssl(
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=replica"]
            .iter()
            .copied()
            .chain(["-keyout", key.to_str().unwrap(), "-out", certificate.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert!(made.success());
    let https_port = port();
    let mut s_server = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept", &format!("127.0.0.9:{https_port}"), "-cert"])
        .arg(&certificate)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("s_server listens", || std::net::TcpStream::connect(("127.0.0.9", https_port)).is_ok());
    // The DNS probe asks this very Pharos, on its own port.
    let dns_port = free_port();
    let services = format!(
        r#"[[service]]
name = "tls.example.test"
ttl = 300
shrink_ttl = true
health = {{ kind = "https", port = {https_port}, interval_ms = 1000, timeout_ms = 900, rise = 1, fall = 3 }}
[[service.replica]]
id = "a"
address = "127.0.0.9"
[[service]]
name = "dns.example.test"
health = {{ kind = "dns", port = {dns_port}, name = "www.example.test", interval_ms = 200, timeout_ms = 150, rise = 1, fall = 1 }}
[[service.replica]]
id = "self"
address = "192.0.2.99"
probe_address = "127.0.0.1"
[[service.replica]]
id = "nobody"
address = "192.0.2.98"
probe_address = "127.0.0.10"
"#
    );
    let (pharos, api) = start_with_api_at(SocketAddr::from(([127, 0, 0, 1], dns_port)), TOKEN, &services);
    wait_until("the HTTPS probe passed", || {
        health_of(&api, "tls.example.test", "a")["last"].as_str().is_some_and(|last| last.contains("passed"))
    });
    assert_eq!(addresses(&pharos, "tls.example.test"), (ips(&["127.0.0.9"]), 3), "3 failures 1 s apart could take it down: TTL 3");
    wait_until("the DNS probe of nobody failed", || addresses(&pharos, "dns.example.test").0 == ips(&["192.0.2.99"]));
    let _ = s_server.kill();
    let _ = s_server.wait();
    wait_until("the TTL shrinks as failures mount", || addresses(&pharos, "tls.example.test").1 < 3);
}

#[test]
fn probes_stop_the_moment_their_service_is_deleted() {
    let kept = TestServer::start(Ipv4Addr::new(127, 0, 0, 11), 0);
    let deleted = TestServer::start(Ipv4Addr::new(127, 0, 0, 12), 0);
    let service = |name: &str, server: &TestServer| {
        format!(
            "[[service]]\nname = \"{name}\"\nhealth = {{ kind = \"http\", port = {}, interval_ms = 100, timeout_ms = 90 }}\n[[service.replica]]\nid = \"a\"\naddress = \"{}\"\n",
            server.address.port(),
            server.address.ip()
        )
    };
    let (_pharos, api) = start_with_services(&(service("kept.example.test", &kept) + &service("gone.example.test", &deleted)));
    wait_until("both are probed", || kept.requests() > 0 && deleted.requests() > 0);
    assert_eq!(request("DELETE", &format!("{api}/v1/services/gone.example.test"), Some(TOKEN), None).0, 204);
    let (after_delete, kept_then) = (deleted.requests(), kept.requests());
    wait_until("ten more probes of the kept service", || kept.requests() >= kept_then + 10);
    assert!(deleted.requests() <= after_delete + 1, "at most the probe in flight: {} then {}", after_delete, deleted.requests());
    assert_eq!(health_of(&api, "gone.example.test", "a"), Value::Null);
}

#[test]
fn a_probe_this_host_cannot_run_leaves_the_replica_as_it_was() {
    let replica = TestServer::start(Ipv4Addr::new(127, 0, 0, 13), 0);
    let services = format!(
        "[[service]]\nname = \"web.example.test\"\nwhen_all_down = \"nodata\"\n\
         health = {{ kind = \"http\", port = {}, interval_ms = 100, timeout_ms = 90, rise = 1, fall = 1 }}\n\
         [[service.replica]]\nid = \"a\"\naddress = \"127.0.0.13\"\n",
        replica.address.port()
    );
    let (pharos, api) = start_with_services(&services);
    wait_until("the replica is probed up", || health_of(&api, "web.example.test", "a")["up"] == true);
    let pid = pharos.child.id();
    let (soft, _) = descriptor_limit(pid);
    // Below every descriptor it holds: each new socket fails (EMFILE),
    // even where a probe's last socket has just been closed.
    set_soft_descriptor_limit(pid, 3);
    wait_until("the prober says it cannot probe", || pharos.log().contains("cannot probe from this host"));
    // With fall = 1, one probe counted as failed would take the only
    // replica out, and the answer would be NODATA.
    let probed = replica.requests();
    let watch_until = std::time::Instant::now() + std::time::Duration::from_millis(1000);
    while std::time::Instant::now() < watch_until {
        assert_eq!(addresses(&pharos, "web.example.test").0, ips(&["127.0.0.13"]), "the replica left while no probe could run");
    }
    assert_eq!(replica.requests(), probed, "no probe reached the replica meanwhile");
    set_soft_descriptor_limit(pid, soft);
    wait_until("probes run again", || replica.requests() > probed);
    assert_eq!(health_of(&api, "web.example.test", "a")["up"], true);
}

/// A service probed over TCP every 500 ms, with `extra` health settings.
fn short_interval_service(port: u16, extra: &str) -> String {
    format!(
        "[[service]]\nname = \"quick.example.test\"\nhealth = {{ kind = \"tcp\", port = {port}, interval_ms = 500{extra} }}\n\
         [[service.replica]]\nid = \"a\"\naddress = \"127.0.0.1\"\n"
    )
}

#[test]
fn a_short_interval_needs_no_timeout_and_a_longer_timeout_is_named() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    // The default timeout follows the interval: the server starts and serves.
    let pharos = start(&short_interval_service(port, ""));
    let response = udp_query(pharos.address, "quick.example.test", Rtype::A).expect("an answer");
    assert_eq!(first_address_and_ttl(&response).0, IpAddr::V4(Ipv4Addr::LOCALHOST));

    // A timeout longer than the interval stops the start, naming the field.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pharos.toml");
    std::fs::write(dir.path().join("zone"), ZONE).unwrap();
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let zone = "[[zone]]\norigin = \"example.test\"\nfile = \"zone\"\n";
    let text = format!("[server]\nlisten = [\"{listen}\"]\n{zone}{}", short_interval_service(port, ", timeout_ms = 800"));
    std::fs::write(&config, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["serve", "--config"]).arg(&config).output().unwrap();
    let complaint = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "pharos started with a timeout longer than its interval");
    assert!(complaint.contains("health.timeout_ms") && complaint.contains("800 ms is longer than interval_ms (500 ms)"), "{complaint}");
}
