//! `GET /metrics` of the real server: the token on the control listener and
//! none on the metrics listener; exact deltas of the query counters for a
//! known set of queries over every transport, and for 100 pipelined on one
//! TCP connection; none of them with counting off; `promtool check
//! metrics` on a real scrape, counting on and off; and a real Prometheus
//! scraping the server. Loopback only; every wait has a deadline.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use domain::base::iana::Rtype;
use pharos_wire::framing::framed;
use serde_json::Value;

use crate::common;
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "metrics-token-0123";

/// A server with the control API, a metrics listener, DNS over TLS, HTTPS
/// and QUIC, and one routed service; the API's and the metrics
/// listener's base URLs and the encrypted transports' port.
struct Metered {
    pharos: Pharos,
    api: String,
    metrics: String,
    encrypted_port: u16,
    https_port: u16,
}

fn start_metered() -> Metered {
    start_metered_with("")
}

/// [`start_metered`] with `config_extra` first in the file.
fn start_metered_with(config_extra: &str) -> Metered {
    start_metered_with_metrics(config_extra, "")
}

/// [`start_metered_with`], with `metrics_extra` in `[metrics]`.
fn start_metered_with_metrics(config_extra: &str, metrics_extra: &str) -> Metered {
    let (metrics, encrypted_port, https_port) = (free_port(), free_port(), free_port());
    let declarations = Declarations::europe_service().toml();
    let tls = format!(
        "[tls]\nlisten = [\"127.0.0.1:{encrypted_port}\"]\nhttps_listen = [\"127.0.0.1:{https_port}\"]\nquic_listen = [\"127.0.0.1:{encrypted_port}\"]\n"
    );
    let extra = format!("{config_extra}{tls}[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n{metrics_extra}{declarations}");
    let (pharos, api) = start_with_api(TOKEN, &extra);
    Metered { pharos, api, metrics: format!("http://127.0.0.1:{metrics}"), encrypted_port, https_port }
}

/// The text of `GET url/metrics`, which must answer 200.
fn scrape_text(base: &str, token: Option<&str>) -> String {
    let (status, body) = request("GET", &format!("{base}/metrics"), token, None);
    assert_eq!(status, 200, "{body}");
    match body {
        Value::String(text) => text,
        other => panic!("not the text format: {other}"),
    }
}

/// Every sample of a scrape, by name and labels as written.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line}"));
            (series.to_string(), value.parse().unwrap_or_else(|_| panic!("not a number: {line}")))
        })
        .collect()
}

/// The series of `family` whose value changed from `before` to `after`,
/// with the change.
fn deltas(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, family: &str) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter(|(series, _)| series.starts_with(family))
        .map(|(series, value)| (series.clone(), value - before.get(series).copied().unwrap_or(0.0)))
        .filter(|(_, delta)| *delta != 0.0)
        .collect()
}

/// A query for `name` whose EDNS Client Subnet places the client in
/// 198.51.100.0/24 (the region "europe").
fn query_from_europe(id: u16, name: &str) -> Vec<u8> {
    ecs_query(id, name, Rtype::A, Some((IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24)))
}

/// A scrape once the deltas of `family` since `before` are `expected`: a
/// thread counts a batch after it has sent its answers, so a client can
/// read an answer before it is counted.
fn counted(server: &Metered, before: &BTreeMap<String, f64>, family: &str, expected: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let mut after = BTreeMap::new();
    wait_until(&format!("{family} moves by {expected:?}"), || {
        after = samples(&scrape_text(&server.metrics, None));
        deltas(before, &after, family) == *expected
    });
    after
}

/// The realized split once `answers` answers to `service` are in it (see
/// [`counted`]).
fn split_with(server: &Metered, service: &str, answers: u64) -> serde_json::Value {
    let mut reported = serde_json::Value::Null;
    wait_until(&format!("{answers} answers to {service} are in the split"), || {
        let (status, split) = request("GET", &format!("{}/v1/split", server.api), Some(TOKEN), None);
        assert_eq!(status, 200, "{split}");
        reported = split;
        let of_service = reported["splits"].as_array().unwrap().iter().filter(|split| split["service"] == service);
        of_service.map(|split| split["answers"].as_u64().unwrap_or(0)).sum::<u64>() == answers
    });
    reported
}

/// Sends `packet` and returns the answer.
fn udp_exchange(server: SocketAddr, packet: &[u8]) -> domain::base::Message<Vec<u8>> {
    udp_exchange_from((Ipv4Addr::LOCALHOST, 0), server, packet)
}

/// Sends `packet` from `source` (a loopback address and a port, 0 for
/// any) and returns the answer.
fn udp_exchange_from(source: (Ipv4Addr, u16), server: SocketAddr, packet: &[u8]) -> domain::base::Message<Vec<u8>> {
    let socket = UdpSocket::bind(source).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    socket.send_to(packet, server).unwrap();
    let mut buffer = [0; 2048];
    let len = socket.recv(&mut buffer).expect("an answer");
    domain::base::Message::from_octets(buffer[..len].to_vec()).unwrap()
}

/// Asks kdig `queries` (name, type pairs) over `transport` (+tls, +https,
/// +quic); `None` (a loud skip) if kdig is not installed.
fn kdig(port: u16, transport: &str, queries: &[&str]) -> Option<String> {
    let installed = Command::new("kdig").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !installed {
        skip("`kdig` is not installed (Debian package `knot-dnsutils`)");
        return None;
    }
    let port = port.to_string();
    let output =
        Command::new("kdig").args(["@127.0.0.1", "-p", &port, transport, "+timeout=5", "+retry=0"]).args(queries).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kdig {transport} failed: {text}");
    Some(text)
}

fn skip(message: &str) {
    assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
    eprintln!("\n*** SKIP: {message}. ***\n");
}

#[test]
fn the_control_listener_asks_for_the_token_and_the_metrics_listener_does_not() {
    let server = start_metered();
    assert_eq!(request("GET", &format!("{}/metrics", server.api), None, None).0, 401);
    let with_token = scrape_text(&server.api, Some(TOKEN));
    let without = scrape_text(&server.metrics, None);
    for text in [&with_token, &without] {
        assert!(text.contains("# TYPE pharos_dns_queries_total counter"), "{text}");
        assert!(text.contains("# TYPE pharos_dns_answer_seconds histogram"), "{text}");
    }
    let (status, _) = request("GET", &format!("{}/v1/regions", server.metrics), None, None);
    assert_eq!(status, 404, "the metrics listener serves /metrics and nothing else");
}

#[test]
fn a_known_set_of_queries_moves_the_counters_by_exactly_as_much() {
    let server = start_metered();
    let address = server.pharos.address;
    let before = samples(&scrape_text(&server.metrics, None));
    // UDP: 3 NOERROR and 2 NXDOMAIN for A, 1 REFUSED for TXT outside the
    // zones, and 4 routed answers to a client in europe.
    for (name, rtype) in [("www", Rtype::A); 3].into_iter().chain([("nope", Rtype::A); 2]) {
        udp_query(address, &format!("{name}.example.test"), rtype).expect("an answer");
    }
    udp_query(address, "www.elsewhere.test", Rtype::TXT).expect("an answer");
    for id in 0..4 {
        udp_exchange(address, &query_from_europe(id, "svc.example.test"));
    }
    // TCP: 2 NOERROR for AAAA (no data) and 1 NXDOMAIN for MX, pipelined.
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let queries = [("www", Rtype::AAAA), ("www", Rtype::AAAA), ("nope", Rtype::MX)];
    for (id, (name, rtype)) in (0..).zip(queries) {
        stream.write_all(&framed(&query_bytes(id, &format!("{name}.example.test"), rtype))).unwrap();
    }
    for _ in queries {
        read_frame(&mut stream).unwrap();
    }
    drop(stream);
    // TLS, HTTPS and QUIC: 1 NOERROR and 1 NXDOMAIN for A each.
    let mut encrypted = Vec::new();
    for (transport, port, label) in
        [("+tls", server.encrypted_port, "tls"), ("+https", server.https_port, "https"), ("+quic", server.encrypted_port, "quic")]
    {
        let Some(output) = kdig(port, transport, &["www.example.test", "A", "nope.example.test", "A"]) else { continue };
        assert_eq!((output.matches("status: NOERROR").count(), output.matches("status: NXDOMAIN").count()), (1, 1), "{output}");
        encrypted.push(label);
    }
    let mut expected_queries = BTreeMap::from([("udp", 10.0), ("tcp", 3.0)]);
    let mut expected_responses = BTreeMap::from([
        (("udp", "NOERROR", "A"), 7.0),
        (("udp", "NXDOMAIN", "A"), 2.0),
        (("udp", "REFUSED", "TXT"), 1.0),
        (("tcp", "NOERROR", "AAAA"), 2.0),
        (("tcp", "NXDOMAIN", "MX"), 1.0),
    ]);
    for &label in &encrypted {
        expected_queries.insert(label, 2.0);
        expected_responses.insert((label, "NOERROR", "A"), 1.0);
        expected_responses.insert((label, "NXDOMAIN", "A"), 1.0);
    }
    let queries: BTreeMap<String, f64> = expected_queries
        .iter()
        .map(|(transport, count)| (format!("pharos_dns_queries_total{{transport=\"{transport}\"}}"), *count))
        .collect();
    let after = counted(&server, &before, "pharos_dns_queries_total", &queries);
    let responses: BTreeMap<String, f64> = expected_responses
        .iter()
        .map(|((transport, rcode, qtype), count)| {
            (format!("pharos_dns_responses_total{{transport=\"{transport}\",rcode=\"{rcode}\",qtype=\"{qtype}\"}}"), *count)
        })
        .collect();
    assert_eq!(deltas(&before, &after, "pharos_dns_responses_total"), responses);
    let answered: BTreeMap<String, f64> = expected_queries
        .iter()
        .map(|(transport, count)| (format!("pharos_dns_answer_seconds_count{{transport=\"{transport}\"}}"), *count))
        .collect();
    assert_eq!(deltas(&before, &after, "pharos_dns_answer_seconds_count"), answered, "one latency sample per response");
    let decision = "pharos_routing_decisions_total{service=\"svc.example.test\",region=\"europe\",replica=\"fra\"}";
    assert_eq!(deltas(&before, &after, "pharos_routing_decisions_total"), BTreeMap::from([(decision.to_string(), 4.0)]));
}

/// One query of a pipelined mix: its name, type and whether it comes from
/// europe (routed to fra when it asks for the service), and the RCODE its
/// answer must carry.
struct Pipelined {
    name: &'static str,
    rtype: Rtype,
    from_europe: bool,
    rcode: &'static str,
}

/// 100 queries in a fixed order: NOERROR, NXDOMAIN and routed answers in
/// turn, and one REFUSED among them.
fn pipelined_mix() -> Vec<Pipelined> {
    let refused = Pipelined { name: "www.elsewhere.test", rtype: Rtype::TXT, from_europe: false, rcode: "REFUSED" };
    let mut mix: Vec<Pipelined> = (0..99)
        .map(|index| match index % 3 {
            0 => Pipelined { name: "www.example.test", rtype: Rtype::A, from_europe: false, rcode: "NOERROR" },
            1 => Pipelined { name: "nope.example.test", rtype: Rtype::MX, from_europe: false, rcode: "NXDOMAIN" },
            _ => Pipelined { name: "svc.example.test", rtype: Rtype::A, from_europe: true, rcode: "NOERROR" },
        })
        .collect();
    mix.insert(50, refused);
    mix
}

#[test]
fn a_hundred_pipelined_queries_on_one_connection_are_counted_exactly() {
    let server = start_metered();
    let mix = pipelined_mix();
    let before = samples(&scrape_text(&server.metrics, None));
    let mut stream = TcpStream::connect(server.pharos.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // All in one write: the server reads them in as few reads as it can.
    let mut burst = Vec::new();
    for (id, query) in (0..).zip(&mix) {
        let subnet = query.from_europe.then_some((IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24));
        burst.extend(framed(&ecs_query(id, query.name, query.rtype, subnet)));
    }
    stream.write_all(&burst).unwrap();
    for (id, query) in (0..).zip(&mix) {
        let answer = read_frame(&mut stream).unwrap();
        assert_eq!((answer.header().id(), answer.header().rcode().to_string()), (id, query.rcode.to_string()), "{}", query.name);
    }
    drop(stream);
    // www and the routed service both answer NOERROR for A.
    let responses: BTreeMap<String, f64> = [("NOERROR", "A", 66.0), ("NXDOMAIN", "MX", 33.0), ("REFUSED", "TXT", 1.0)]
        .into_iter()
        .map(|(rcode, qtype, count)| {
            (format!("pharos_dns_responses_total{{transport=\"tcp\",rcode=\"{rcode}\",qtype=\"{qtype}\"}}"), count)
        })
        .collect();
    let queries = BTreeMap::from([("pharos_dns_queries_total{transport=\"tcp\"}".to_string(), 100.0)]);
    let after = counted(&server, &before, "pharos_dns_queries_total", &queries);
    assert_eq!(deltas(&before, &after, "pharos_dns_responses_total"), responses);
    let timed = BTreeMap::from([("pharos_dns_answer_seconds_count{transport=\"tcp\"}".to_string(), 100.0)]);
    assert_eq!(deltas(&before, &after, "pharos_dns_answer_seconds_count"), timed, "one latency sample per response");
    let decision = "pharos_routing_decisions_total{service=\"svc.example.test\",region=\"europe\",replica=\"fra\"}";
    assert_eq!(deltas(&before, &after, "pharos_routing_decisions_total"), BTreeMap::from([(decision.to_string(), 33.0)]));
}

/// A server started in this process: its DNS address and metrics
/// listener's base URL, its config and zone in `_dir`.
struct InProcess {
    server: pharos_server::Server,
    dns: SocketAddr,
    metrics: String,
    _dir: tempfile::TempDir,
}

/// Starts a server on `runtime`, in this process, and waits until it answers.
fn start_in_process(runtime: &tokio::runtime::Runtime) -> InProcess {
    let dir = tempfile::tempdir().unwrap();
    let (dns, metrics) = (SocketAddr::from(([127, 0, 0, 1], free_port())), free_port());
    std::fs::write(dir.path().join("example.test.zone"), ZONE).unwrap();
    let text = format!(
        "[server]\nlisten = [\"{dns}\"]\nthreads = 1\n[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n"
    );
    let config = dir.path().join("pharos.toml");
    std::fs::write(&config, text).unwrap();
    let server = runtime.block_on(pharos_server::Server::start(pharos_server::Config::from_file(&config).unwrap())).unwrap();
    wait_until("the server answers", || udp_query(dns, "www.example.test", Rtype::A).is_some());
    InProcess { server, dns, metrics: format!("http://127.0.0.1:{metrics}"), _dir: dir }
}

/// Asks `server` for www.example.test `count` times over one TCP connection.
fn ask_over_tcp(server: SocketAddr, count: u16) {
    let mut stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for id in 0..count {
        stream.write_all(&framed(&query_bytes(id, "www.example.test", Rtype::A))).unwrap();
        assert_eq!(read_frame(&mut stream).unwrap().header().id(), id);
    }
}

/// Two servers in one process, on one tokio runtime (so that their TCP
/// queries are counted on the same threads), count apart: each scrape
/// moves by its own server's queries only.
#[test]
fn two_servers_in_one_process_count_only_their_own_queries() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (asked, other) = (start_in_process(&runtime), start_in_process(&runtime));
    let before = [&asked, &other].map(|server| samples(&scrape_text(&server.metrics, None)));
    for _ in 0..5 {
        udp_query(asked.dns, "www.example.test", Rtype::A).expect("an answer");
    }
    ask_over_tcp(asked.dns, 3);
    ask_over_tcp(other.dns, 2);
    let expected = [[("udp", 5.0), ("tcp", 3.0)].as_slice(), [("tcp", 2.0)].as_slice()].map(|counts| {
        counts.iter().map(|(transport, count)| (format!("pharos_dns_queries_total{{transport=\"{transport}\"}}"), *count)).collect()
    });
    let mut moved: [BTreeMap<String, f64>; 2] = Default::default();
    // A thread counts a batch after it has sent its answers (see `counted`).
    wait_until(&format!("the queries move by {expected:?}"), || {
        for ((server, before), moved) in [&asked, &other].into_iter().zip(&before).zip(&mut moved) {
            *moved = deltas(before, &samples(&scrape_text(&server.metrics, None)), "pharos_dns_queries_total");
        }
        moved == expected
    });
    for server in [asked, other] {
        server.server.stop();
    }
}

#[test]
fn connections_are_counted_open_and_shed() {
    let server = start_metered_with("[tcp]\nmax_connections_per_client = 1\n");
    let sample = |name: &str| samples(&scrape_text(&server.metrics, None)).get(name).copied();
    let shed_before = sample("pharos_connections_shed_total").unwrap();
    let connect = || {
        let mut stream = TcpStream::connect(server.pharos.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Answered: admitted to the registry.
        stream.write_all(&framed(&query_bytes(1, "www.example.test", Rtype::A))).unwrap();
        read_frame(&mut stream).unwrap();
        stream
    };
    let mut first = connect();
    assert_eq!(sample("pharos_connections_open"), Some(1.0));
    let second = connect();
    assert!(closed_by_server(&mut first), "the client's cap of one shed its older connection");
    assert_eq!(sample("pharos_connections_open"), Some(1.0));
    assert_eq!(sample("pharos_connections_shed_total"), Some(shed_before + 1.0));
    drop(second);
    wait_until("the closed connection leaves the count", || sample("pharos_connections_open") == Some(0.0));
}

#[test]
fn a_committed_edit_is_counted_with_its_batch_and_time() {
    let server = start_metered();
    let before = samples(&scrape_text(&server.metrics, None));
    let frankfurt = serde_json::json!({ "id": "fra", "latitude": 50.11, "longitude": 8.68, "asn": 64500 });
    assert_eq!(request("PUT", &format!("{}/v1/datacenters/fra", server.api), Some(TOKEN), Some(frankfurt)).0, 200);
    let after = samples(&scrape_text(&server.metrics, None));
    let moved = |series: &str| after[series] - before.get(series).copied().unwrap_or(0.0);
    assert_eq!(moved("pharos_control_commits_total"), 1.0);
    assert_eq!(moved("pharos_control_commit_batch_edits_count"), 1.0);
    assert_eq!(moved("pharos_control_commit_batch_edits_bucket{le=\"1.0\"}"), 1.0, "a batch of one edit");
    assert_eq!(moved("pharos_control_commit_seconds_count"), 1.0);
    assert!(moved("pharos_snapshot_publish_seconds_count") >= 1.0, "the commit published a snapshot");
}

#[test]
fn the_realized_split_is_what_was_answered_beside_what_is_configured() {
    let declarations = Declarations::new()
        .region(1, "europe", &["198.51.100.0/24"])
        .service("split.example.test")
        .policy("region-probabilities")
        .replica("fra", "192.0.2.10")
        .replica("sin", "192.0.2.20")
        .probabilities("europe", &[("fra", 0.75, 60), ("sin", 0.25, 60)])
        .probabilities("default", &[("sin", 1.0, 60)])
        .toml();
    let server = start_metered_with(&declarations);
    let fra: IpAddr = "192.0.2.10".parse().unwrap();
    // 200 clients in europe, drawn 3 to 1, and 50 unclassified ones (no
    // subnet, from 127.0.0.1), all sent to sin.
    let mut europe_to_fra = 0;
    for id in 0..200 {
        let answer = udp_exchange(server.pharos.address, &query_from_europe(id, "split.example.test"));
        europe_to_fra += u64::from(first_address_and_ttl(&answer).0 == fra);
    }
    for id in 0..50 {
        let answer = udp_exchange(server.pharos.address, &query_bytes(id, "split.example.test", Rtype::A));
        assert_ne!(first_address_and_ttl(&answer).0, fra);
    }
    let reported = split_with(&server, "split.example.test", 250);
    let split_of = |region: &str| {
        let splits = reported["splits"].as_array().unwrap();
        splits.iter().find(|split| split["service"] == "split.example.test" && split["region"] == region).cloned().unwrap()
    };
    let realized = europe_to_fra as f64 / 200.0;
    let europe = split_of("europe");
    assert_eq!(europe["answers"], 200);
    let shares: Vec<(String, u64, f64, f64)> = europe["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|share| {
            let (replica, answers) = (share["replica"].as_str().unwrap().to_string(), share["answers"].as_u64().unwrap());
            (replica, answers, share["realized"].as_f64().unwrap(), share["configured"].as_f64().unwrap())
        })
        .collect();
    let expected = [
        ("fra".to_string(), europe_to_fra, realized, 0.75),
        ("sin".to_string(), 200 - europe_to_fra, (200 - europe_to_fra) as f64 / 200.0, 0.25),
    ];
    assert_eq!(shares, expected);
    let distance = europe["total_variation"].as_f64().unwrap();
    assert!((distance - (realized - 0.75).abs()).abs() < 1e-9, "{distance} for {realized} of fra");
    let unclassified = split_of("unclassified");
    assert_eq!((unclassified["answers"].as_u64(), unclassified["total_variation"].as_f64()), (Some(50), Some(0.0)));
    let scraped = samples(&scrape_text(&server.metrics, None));
    let series = "pharos_split_realized_share{service=\"split.example.test\",region=\"europe\",replica=\"fra\"}";
    assert_eq!(scraped[series], realized);
    let series = "pharos_split_configured_share{service=\"split.example.test\",region=\"europe\",replica=\"sin\"}";
    assert_eq!(scraped[series], 0.25);
}

/// A server with the resolver view on (by default), answering `service`
/// half to fra (192.0.2.10), half to sin, for every client.
fn start_with_resolver_view(service: &str) -> Metered {
    let declarations = Declarations::new()
        .service(service)
        .policy("region-probabilities")
        .replica("fra", "192.0.2.10")
        .replica("sin", "192.0.2.20")
        .probabilities("default", &[("fra", 0.5, 60), ("sin", 0.5, 60)])
        .toml();
    start_metered_with_metrics(&declarations, "")
}

/// One resolver asking 200 times beside 20 asking once each: the
/// realized split follows the busy one's many draws, the cached split
/// weighs it as one resolver of 21. Both are recomputed here from the
/// answers each resolver got.
#[test]
fn a_busy_resolver_shows_in_the_caching_skew() {
    let server = start_with_resolver_view("skew.example.test");
    let fra: IpAddr = "192.0.2.10".parse().unwrap();
    let to_fra = |source: Ipv4Addr, id: u16| {
        let answer = udp_exchange_from((source, 0), server.pharos.address, &query_bytes(id, "skew.example.test", Rtype::A));
        first_address_and_ttl(&answer).0 == fra
    };
    let busy_to_fra = (0..200).filter(|&id| to_fra(Ipv4Addr::new(127, 0, 9, 1), id)).count() as f64;
    let light_to_fra = (1..=20).filter(|&host| to_fra(Ipv4Addr::new(127, 0, 10, host), 0)).count() as f64;
    let reported = split_with(&server, "skew.example.test", 220);
    let split = reported["splits"].as_array().unwrap().iter().find(|split| split["service"] == "skew.example.test").unwrap().clone();
    let view = &split["resolvers"];
    assert_eq!(view["resolvers"], 21, "{split}");
    assert!((view["top_resolver_share"].as_f64().unwrap() - 200.0 / 220.0).abs() < 1e-9, "{split}");
    let fra_share = |field: &str| {
        split["replicas"].as_array().unwrap().iter().find(|share| share["replica"] == "fra").unwrap()[field].as_f64().unwrap()
    };
    let realized = (busy_to_fra + light_to_fra) / 220.0;
    // Every answer has the same TTL: each resolver's cache time splits as its answers do.
    let cached = (busy_to_fra / 200.0 + light_to_fra) / 21.0;
    assert!((fra_share("realized") - realized).abs() < 1e-9, "{split}");
    assert!((fra_share("cached") - cached).abs() < 1e-9, "{split}: {cached} expected");
    // Two replicas: the distance is the difference on either.
    assert!((view["caching_skew"].as_f64().unwrap() - (realized - cached).abs()).abs() < 1e-9, "{split}");
    assert_eq!(reported["untallied_answers"], 0);
    assert_eq!((&reported["over_cap_answers"], &reported["window_resolvers"]), (&0.into(), &21.into()), "{reported}");
    let scraped = samples(&scrape_text(&server.metrics, None));
    let series = "pharos_split_resolvers{service=\"skew.example.test\",region=\"unclassified\"}";
    assert_eq!(scraped[series], 21.0, "the window keeps the tallies a reading drained");
    assert_eq!(scraped["pharos_split_window_resolvers"], 21.0);
    assert_eq!(scraped["pharos_split_untallied_answers_total{reason=\"window_full\"}"], 0.0);
}

/// Twice as many resolvers as a thread has slots, each asking once: some
/// are not tallied (counted in `untallied_answers`), every answer is
/// either tallied or counted so, and the cached split of those tallied
/// is the realized split of all, as it must be when each resolver got
/// one answer.
#[test]
fn more_resolvers_than_slots_are_sampled_and_the_rest_counted_untallied() {
    let server = start_with_resolver_view("wide.example.test");
    // One UDP worker (threads = 1) tallies into 8,192 slots.
    let resolvers: u16 = 2 * 8192;
    // One source port for every resolver's address: thousands of ephemeral
    // ports taken in turn would take ports other tests' servers were given.
    let port = free_port();
    for number in 0..resolvers {
        let source = Ipv4Addr::new(127, 20, (number / 254) as u8, (number % 254 + 1) as u8);
        udp_exchange_from((source, port), server.pharos.address, &query_bytes(number, "wide.example.test", Rtype::A));
    }
    let reported = split_with(&server, "wide.example.test", u64::from(resolvers));
    let split = reported["splits"].as_array().unwrap().iter().find(|split| split["service"] == "wide.example.test").unwrap().clone();
    let tallied = split["resolvers"]["resolvers"].as_u64().unwrap();
    let untallied = reported["untallied_answers"].as_u64().unwrap();
    assert!(untallied > 0 && tallied <= 8192, "{tallied} tallied, {untallied} not");
    assert_eq!(tallied + untallied, u64::from(resolvers), "one answer each: tallied or counted untallied");
    assert_eq!(split["answers"], u64::from(resolvers), "the realized split counts every answer");
    let fra = split["replicas"].as_array().unwrap().iter().find(|share| share["replica"] == "fra").unwrap();
    let (realized, cached) = (fra["realized"].as_f64().unwrap(), fra["cached"].as_f64().unwrap());
    assert!((realized - cached).abs() < 0.03, "a sample of {tallied} estimates the split of all: {split}");
}

#[test]
fn without_the_resolver_view_nothing_is_tallied() {
    let server = start_metered_with_metrics("", "resolver_view = false\n");
    let (status, reported) = request("GET", &format!("{}/v1/split", server.api), Some(TOKEN), None);
    assert_eq!(status, 200, "{reported}");
    assert_eq!(reported["untallied_answers"], serde_json::Value::Null);
    assert_eq!(reported["window_resolvers"], serde_json::Value::Null);
}

#[test]
fn promtool_accepts_a_real_scrape() {
    let server = start_metered();
    udp_exchange(server.pharos.address, &query_from_europe(1, "svc.example.test"));
    let text = scrape_text(&server.metrics, None);
    assert_eq!(samples(&text)["pharos_dns_counting"], 1.0);
    promtool_check(&text);
}

/// `promtool check metrics` must find nothing to say about `text`; a
/// loud skip if promtool is not installed.
fn promtool_check(text: &str) {
    if Command::new("promtool").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return skip("`promtool` is not installed (Debian package `prometheus`)");
    }
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let output = promtool.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && said.trim().is_empty(), "promtool: {said}\non:\n{text}");
}

/// With `[metrics] counting = false`, queries over UDP and pipelined TCP
/// (routed ones too) leave no trace in a scrape: the query families are
/// absent, the switch says 0, the rest is still there, and promtool
/// accepts the text.
#[test]
fn with_counting_off_a_scrape_has_no_query_families_and_is_still_valid() {
    let server = start_metered_with_metrics("", "counting = false\n");
    let address = server.pharos.address;
    for id in 0..4 {
        udp_exchange(address, &query_from_europe(id, "svc.example.test"));
    }
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for id in 0..3 {
        stream.write_all(&framed(&query_from_europe(id, "svc.example.test"))).unwrap();
    }
    for _ in 0..3 {
        read_frame(&mut stream).unwrap();
    }
    let text = scrape_text(&server.metrics, None);
    drop(stream);
    let scraped = samples(&text);
    assert_eq!(scraped["pharos_dns_counting"], 0.0, "{text}");
    assert_eq!(scraped["pharos_connections_open"], 1.0, "what is not counted per query is still there: {text}");
    for family in ["pharos_dns_queries", "pharos_dns_responses", "pharos_dns_answer", "pharos_routing_decisions", "pharos_split_"] {
        assert!(!text.contains(family), "{family} is counted on the query path: {text}");
    }
    let (status, reported) = request("GET", &format!("{}/v1/split", server.api), Some(TOKEN), None);
    assert_eq!(status, 200, "{reported}");
    assert_eq!(reported["splits"], serde_json::json!([]), "no decisions counted, no split");
    promtool_check(&text);
}

/// A Prometheus server, killed when dropped.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Prometheus on loopback, scraping `target` every second.
fn start_prometheus(target: &str) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    let scrape = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pharos\n    static_configs:\n      - targets: ['{target}']\n"
    );
    std::fs::write(&config, scrape).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={listen}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Prometheus { child, url: format!("http://{listen}"), _dir: dir }
}

/// The value Prometheus holds now for `query`, if it has one.
fn prometheus_value(prometheus: &Prometheus, query: &str) -> Option<f64> {
    let encoded: String = query.bytes().map(|byte| format!("%{byte:02X}")).collect();
    let url = format!("{}/api/v1/query?query={encoded}", prometheus.url);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let body: Value = serde_json::from_str(&agent.get(&url).call().ok()?.into_body().read_to_string().ok()?).ok()?;
    body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_real_prometheus_scrapes_the_metrics_listener() {
    if Command::new("prometheus").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return skip("`prometheus` is not installed (Debian package `prometheus`)");
    }
    let server = start_metered();
    // Readiness is probed over UDP: TCP's count is this test's alone.
    let mut stream = TcpStream::connect(server.pharos.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for id in 0..5 {
        stream.write_all(&framed(&query_bytes(id, "www.example.test", Rtype::A))).unwrap();
        read_frame(&mut stream).unwrap();
    }
    let prometheus = start_prometheus(server.metrics.trim_start_matches("http://"));
    let query = "pharos_dns_queries_total{transport=\"tcp\"}";
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = None;
    while seen != Some(5.0) {
        assert!(Instant::now() < deadline, "Prometheus did not report {query} = 5 in time (last: {seen:?})");
        std::thread::sleep(Duration::from_millis(250));
        seen = prometheus_value(&prometheus, query);
    }
}
