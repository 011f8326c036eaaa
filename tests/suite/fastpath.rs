//! The kernel fast path inside `pharos serve`: when it cannot run (no such
//! interface, a mode the interface refuses, no root), the server says why,
//! once, in its log, in `GET /v1/fastpath` and `pharos ctl fastpath`, and
//! answers from user space; its per-source rate limit holds in user space
//! too. With root, end to end in network namespaces (tests/suite/common/netns.rs):
//! dig and kdig get the kernel's answers over a veth pair, and the kernel's
//! answers are byte for byte those user space gives on the same server's
//! loopback, for the conformance queries and while routing state changes,
//! and the kernel drops a source over its rate limit when told to; a
//! datagram that starts with a PROXY protocol header is never answered in
//! the kernel.

use crate::common;
use crate::common::support;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::netns::{self, Link, Served};
use common::{query_bytes, request, start_with_api, udp_query};
use domain::base::Message;
use domain::base::iana::Rtype;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::wire::Transport;

const TOKEN: &str = "fastpath-test-token";
/// The warning the server logs when it serves without the fast path.
const OFF: &str = "kernel fast path off, serving from user space only";

#[test]
fn a_fast_path_that_cannot_attach_is_reported_and_the_server_answers() {
    for (fastpath, interface) in [
        ("interfaces = [\"nosuch0\"]", "nosuch0"),
        // The loopback device has no native XDP: only generic mode.
        ("interfaces = [\"lo\"]\nmode = \"native\"", "lo"),
    ] {
        let (pharos, api) = start_with_api(TOKEN, &format!("[fastpath]\n{fastpath}"));
        let answer = udp_query(pharos.address, "www.example.test", Rtype::A).expect("answered from user space");
        assert_eq!(answer.header_counts().ancount(), 1, "{fastpath}");
        let log = pharos.log();
        assert_eq!(log.matches(OFF).count(), 1, "{fastpath}: one warning, saying why:\n{log}");
        // Without root the program does not load at all, and the warning says so.
        let why = if common::is_root() { interface } else { "not running as root" };
        let warning = log.lines().find(|line| line.contains(OFF)).unwrap();
        assert!(warning.contains(why), "{fastpath}: the warning should name {why:?}: {warning}");

        let (status, shown) = request("GET", &format!("{api}/v1/fastpath"), Some(TOKEN), None);
        assert_eq!((status, shown["state"].as_str()), (200, Some("failed")), "{shown}");
        assert!(shown["reason"].as_str().unwrap().contains(why), "{shown}");
        assert_eq!(shown["interfaces"][0]["name"], interface);
        assert_eq!(shown["interfaces"][0]["attached"], false);
        let table = ctl(&api, &["fastpath"]);
        assert!(table.contains("kernel fast path: failed") && table.contains(why), "{table}");
        assert!(table.lines().any(|line| line.starts_with(interface) && line.contains(" no ")), "{table}");
    }
}

#[test]
fn without_interfaces_the_fast_path_is_off() {
    let (pharos, api) = start_with_api(TOKEN, "");
    assert!(!pharos.log().contains("kernel fast path"), "nothing to say when not asked for:\n{}", pharos.log());
    let (_, shown) = request("GET", &format!("{api}/v1/fastpath"), Some(TOKEN), None);
    assert_eq!((shown["state"].as_str(), shown["interfaces"].as_array().map(Vec::len)), (Some("off"), Some(0)), "{shown}");
    assert!(shown["user_space_rate_limited"].is_null(), "no limit configured: {shown}");
    let json: serde_json::Value = serde_json::from_str(&ctl(&api, &["--json", "fastpath"])).unwrap();
    assert_eq!(json, shown);
}

#[test]
fn user_space_drops_a_source_over_its_limit_and_answers_the_others() {
    const BURST: u16 = 5;
    // One token a second: the burst is all a source gets while the test runs.
    let (pharos, api) = start_with_api(TOKEN, &format!("[fastpath.rate_limit]\nper_second = 1\nburst = {BURST}"));
    let flooder = UdpSocket::bind("127.0.0.2:0").unwrap();
    for id in 0..=BURST {
        flooder.send_to(&query_bytes(id, "www.example.test", Rtype::A), pharos.address).unwrap();
    }
    let answered = answers(&flooder);
    assert_eq!(answered.len(), usize::from(BURST), "the burst is answered, the one after it is not: {answered:?}");
    let other = UdpSocket::bind("127.0.0.3:0").unwrap();
    other.send_to(&query_bytes(99, "www.example.test", Rtype::A), pharos.address).unwrap();
    assert_eq!(answers(&other), vec![99], "another source has a bucket of its own");
    let (_, shown) = request("GET", &format!("{api}/v1/fastpath"), Some(TOKEN), None);
    assert_eq!(shown["user_space_rate_limited"], 1, "{shown}");
    assert!(ctl(&api, &["fastpath"]).contains("user space dropped 1 UDP queries"));
}

/// The IDs of the responses `socket` receives until it has heard nothing
/// for a while.
fn answers(socket: &UdpSocket) -> Vec<u16> {
    responses(socket).iter().map(|response| u16::from_be_bytes([response[0], response[1]])).collect()
}

/// The responses `socket` receives until it has heard nothing for a while.
fn responses(socket: &UdpSocket) -> Vec<Vec<u8>> {
    socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut buffer = [0; 512];
    let mut received = Vec::new();
    while let Ok(length) = socket.recv(&mut buffer) {
        assert!(length >= 12, "a DNS response");
        received.push(buffer[..length].to_vec());
    }
    received
}

/// What `pharos ctl ARGS` prints; it must succeed.
fn ctl(api: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", api, "--token", TOKEN]).args(args).output().unwrap();
    assert!(output.status.success(), "pharos ctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The static names of the end-to-end zone, and a service routed by weight.
const NETNS_ZONE: &str =
    "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nwww AAAA 2001:db8::2\n";
const SERVICE: &str = "[[service]]\nname = \"app.example.test\"\npolicy = \"weighted\"\nttl = 60\n\
    [[service.replica]]\nid = \"a\"\naddress = \"192.0.2.41\"\n[[service.replica]]\nid = \"b\"\naddress = \"192.0.2.42\"\nweight = 3\n\
    [[service.replica]]\nid = \"c\"\naddress = \"2001:db8::41\"\n[[service.replica]]\nid = \"d\"\naddress = \"2001:db8::42\"\n";

/// What `program ARGS` prints inside `namespace`; it must succeed.
fn run_in(namespace: &str, program: &str, args: &[String]) -> String {
    let output = Link::command(namespace, program).args(args).output().unwrap();
    assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Kernel answers on the server's veth end so far.
fn kernel_hits(served: &Served) -> u64 {
    let (status, shown) = served.api("GET", "/v1/fastpath", None);
    assert_eq!((status, shown["state"].as_str()), (200, Some("on")), "{shown}\n{}", served.log());
    let traffic = &shown["interfaces"][0]["traffic"];
    traffic["answered_static"].as_u64().unwrap_or(0) + traffic["answered_routed"].as_u64().unwrap_or(0)
}

#[test]
fn dig_and_kdig_get_the_kernels_answers_over_a_veth_pair() {
    if !netns::may_run() {
        return;
    }
    let served = Served::start(NETNS_ZONE, SERVICE);
    let before = kernel_hits(&served);
    let v4 = netns::SERVER_V4.to_string();
    let v6 = netns::SERVER_V6.to_string();
    // Each query through the kernel (over the veth pair) and through user
    // space (the server namespace's loopback): the same answers.
    let static_queries: [(&str, &str, &[&str]); 5] = [
        ("dig", "A", &["+nocookie"]),
        ("dig", "A", &["+noedns"]),
        ("dig", "AAAA", &["+nocookie", "+dnssec"]),
        ("kdig", "A", &[]),
        ("kdig", "AAAA", &["+edns", "+dnssec"]),
    ];
    for (index, (client, qtype, flags)) in static_queries.iter().enumerate() {
        let server = if index % 2 == 0 { &v4 } else { &v6 };
        let args = |at: &str| -> Vec<String> {
            [format!("@{at}"), "www.example.test".into(), qtype.to_string(), "+norec".into(), "+short".into()]
                .into_iter()
                .chain(flags.iter().map(|flag| flag.to_string()))
                .collect()
        };
        let kernel = run_in(&served.link.client, client, &args(server));
        let user_space = run_in(&served.link.server, client, &args("127.0.0.1"));
        assert_eq!(kernel, user_space, "{client} {qtype} {flags:?}");
        assert!(kernel.contains(if *qtype == "A" { "192.0.2.2" } else { "2001:db8::2" }), "{client} {qtype} {flags:?}: {kernel}");
    }
    // 0x20: the kernel echoes the question's case, in the answer's owner too.
    // (kdig sends names lowercased; dig sends them as given.)
    let mixed =
        run_in(&served.link.client, "dig", &[format!("@{v4}"), "WwW.ExAmPlE.TeSt".into(), "A".into(), "+norec".into(), "+nocookie".into()]);
    assert!(mixed.lines().any(|line| line.starts_with("WwW.ExAmPlE.TeSt.") && line.contains("192.0.2.2")), "{mixed}");
    let hits = kernel_hits(&served) - before;
    assert!(hits >= 6, "the kernel answered {hits} of the 6 static queries: the fast path did not answer");

    // The routed service: answers of its own family, whichever path gives them.
    for (qtype, replicas) in [("A", ["192.0.2.41", "192.0.2.42"]), ("AAAA", ["2001:db8::41", "2001:db8::42"])] {
        let args = [format!("@{v4}"), "app.example.test".into(), qtype.into(), "+norec".into(), "+short".into()];
        let answer = run_in(&served.link.client, "dig", &args);
        assert!(!answer.is_empty() && answer.lines().all(|address| replicas.contains(&address)), "{qtype}: {answer:?}");
    }
    let (_, explained) = served.api("GET", "/v1/explain?name=app.example.test&client=10.203.0.2", None);
    let line = explained["fast_path"].as_str().unwrap();
    assert!(line.starts_with("kernel fast path: ") && !line.ends_with(": off"), "{explained}");
}

#[test]
fn run_as_an_unprivileged_user_the_kernel_path_still_follows_policy_changes() {
    if !netns::may_run() {
        return;
    }
    let served = Served::start_as(NETNS_ZONE, SERVICE, true, "user = \"nobody\"\ngroup = \"nogroup\"");
    let status = std::fs::read_to_string(format!("/proc/{}/status", served.child.id())).unwrap();
    let uid = status.lines().find(|line| line.starts_with("Uid:")).unwrap();
    assert_eq!(uid.split_whitespace().skip(1).collect::<Vec<_>>(), ["65534"; 4], "{status}");
    // b (weight 3) goes down: the kernel's answers, written through the map
    // descriptors the server kept from when it was root, give only a.
    let (status, _) = served.api("PATCH", "/v1/services/app.example.test/replicas/b", Some(serde_json::json!({ "down": true })));
    assert_eq!(status, 200, "{}", served.log());
    let before = served.api("GET", "/v1/fastpath", None).1["interfaces"][0]["traffic"]["answered_routed"].as_u64().unwrap_or(0);
    let args =
        [format!("@{}", netns::SERVER_V4), "app.example.test".into(), "A".into(), "+norec".into(), "+nocookie".into(), "+short".into()];
    for _ in 0..20 {
        let answer = run_in(&served.link.client, "dig", &args);
        assert_eq!(answer.trim(), "192.0.2.41", "a down replica still answered in the kernel");
    }
    let after = served.api("GET", "/v1/fastpath", None).1["interfaces"][0]["traffic"]["answered_routed"].as_u64().unwrap_or(0);
    assert_eq!(after - before, 20, "not answered in the kernel: {}", served.api("GET", "/v1/fastpath", None).1);
}

#[test]
fn a_datagram_with_a_proxy_header_passes_up_to_user_space() {
    if !netns::may_run() {
        return;
    }
    let served = Served::start(NETNS_ZONE, "");
    let before = kernel_hits(&served);
    // A query the kernel answers, behind a header: read as DNS, the
    // signature is an IQUERY with 13 questions, which user space answers
    // NOTIMP when it takes headers from nobody.
    let client = SocketAddr::from((netns::CLIENT_V4, 5300));
    let header = crate::proxy::header_v2(client, Link::over_veth(false));
    let datagram = [header, query_bytes(1, "www.example.test", Rtype::A)].concat();
    let again = datagram.clone();
    let over_veth = Link::inside(&served.link.client, move || netns::exchange(Link::over_veth(false), &datagram));
    let from_user_space = Link::inside(&served.link.server, move || netns::exchange(Link::over_loopback(), &again));
    assert_eq!(kernel_hits(&served), before, "the kernel answered a datagram with a PROXY header");
    let reply = over_veth.expect("user space's answer");
    assert_eq!(Some(&reply), from_user_space.as_ref(), "the answer over the veth pair is user space's");
    assert_eq!((reply[2] & 0x78, reply[3] & 0x0F), (0x08, 4), "an IQUERY answered NOTIMP: {reply:?}");
}

#[test]
fn the_kernels_counters_per_interface_are_in_the_metrics() {
    if !netns::may_run() {
        return;
    }
    let served = Served::start(NETNS_ZONE, SERVICE);
    for _ in 0..3 {
        // Without a cookie option: a query the kernel answers itself.
        let args = [format!("@{}", netns::SERVER_V4), "www.example.test".into(), "A".into(), "+norec".into(), "+nocookie".into()];
        run_in(&served.link.client, "dig", &args);
    }
    let (_, shown) = served.api("GET", "/v1/fastpath", None);
    let (_, scraped) = served.api("GET", "/metrics", None);
    let scraped = scraped.as_str().expect("the text format");
    let interface = &shown["interfaces"][0];
    let name = interface["name"].as_str().unwrap();
    for (outcome, shown) in [
        ("answered_static", &interface["traffic"]["answered_static"]),
        ("answered_routed", &interface["traffic"]["answered_routed"]),
        ("miss_no_entry", &interface["traffic"]["misses"]["no_entry"]),
    ] {
        let series = format!("pharos_fastpath_packets_total{{interface=\"{name}\",outcome=\"{outcome}\"}} {}", shown.as_u64().unwrap());
        assert!(scraped.lines().any(|line| line == series), "no `{series}` in:\n{scraped}");
    }
    assert!(interface["traffic"]["answered_static"].as_u64().unwrap() >= 3, "{shown}");
    let entries = format!("pharos_fastpath_entries {}", shown["entries"].as_u64().unwrap());
    assert!(scraped.lines().any(|line| line == entries), "no `{entries}` in:\n{scraped}");
}

#[test]
fn the_kernel_answers_the_conformance_queries_as_user_space_does() {
    if !netns::may_run() {
        return;
    }
    let zones = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zones");
    let served = Served::start_in(
        tempfile::tempdir().unwrap(),
        &[
            ("example.com", zones.join("example.com.zone")),
            ("sub.example.com", zones.join("sub.example.com.zone")),
            ("example.org", zones.join("example.org.zone")),
        ],
        "",
    );
    let cases: Vec<Vec<u8>> = support::cases::conformance_cases()
        .into_iter()
        .filter(|case| case.transports.contains(&Transport::Udp))
        .map(|case| case.packet)
        .collect();
    let before = kernel_hits(&served);
    let (kernel_v4, kernel_v6) = {
        let packets = cases.clone();
        Link::inside(&served.link.client, move || {
            let over = |v6| packets.iter().map(|packet| netns::exchange(Link::over_veth(v6), packet)).collect::<Vec<_>>();
            (over(false), over(true))
        })
    };
    let packets = cases.clone();
    let user_space: Vec<Option<Vec<u8>>> =
        Link::inside(&served.link.server, move || packets.iter().map(|packet| netns::exchange(Link::over_loopback(), packet)).collect());
    let mut differences = Vec::new();
    for (index, packet) in cases.iter().enumerate() {
        for (family, kernel) in [("IPv4", &kernel_v4[index]), ("IPv6", &kernel_v6[index])] {
            if *kernel != user_space[index] {
                differences.push(format!(
                    "query {packet:02x?} over {family}:\n  kernel:     {kernel:02x?}\n  user space: {:02x?}",
                    user_space[index]
                ));
            }
        }
    }
    let hits = kernel_hits(&served) - before;
    assert!(differences.is_empty(), "{} of {} answers differ:\n{}", differences.len(), 2 * cases.len(), differences.join("\n"));
    assert!(hits >= 40, "the kernel answered only {hits} of the {} queries: the comparison proved little", 2 * cases.len());
}

/// The property test's zone: `n0`..`n5` present or not, with addresses
/// drawn by `rng` (`svc` is a service, or nothing).
fn random_zone(rng: &mut SmallRng, serial: u32) -> String {
    let mut zone = format!("$TTL 300\n@ SOA ns hostmaster {serial} 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n");
    for name in 0..6 {
        if rng.random_bool(0.7) {
            zone.push_str(&format!("n{name} A 198.51.100.{}\n", rng.random_range(1..255)));
        }
    }
    zone
}

/// A failover service with distinct priorities and `b` never down, so that
/// its answer is one order, not a draw (user space breaks ties at random).
fn random_service(rng: &mut SmallRng) -> serde_json::Value {
    let a_first = rng.random_bool(0.5);
    let replicas = [
        serde_json::json!({ "id": "a", "address": "203.0.113.1", "priority": if a_first { 1 } else { 2 }, "down": rng.random_bool(0.3) }),
        serde_json::json!({ "id": "b", "address": "203.0.113.2", "priority": if a_first { 2 } else { 1 } }),
    ];
    serde_json::json!({ "name": "svc.example.test", "policy": "failover", "ttl": rng.random_range(30..90), "replica": replicas })
}

#[test]
fn every_kernel_answer_is_user_spaces_while_routing_state_changes() {
    if !netns::may_run() {
        return;
    }
    const CHANGES: usize = 40;
    const MAX_QUERIES: u32 = 20_000;
    const MAX_TIME: Duration = Duration::from_secs(30);
    let mut rng = SmallRng::seed_from_u64(14);
    let served = Served::start(&random_zone(&mut rng, 1), "");
    let before = kernel_hits(&served);
    let over_veth = Link::inside(&served.link.client, || netns::socket_to(Link::over_veth(false)));
    let over_loopback = Link::inside(&served.link.server, || netns::socket_to(Link::over_loopback()));
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicU32::new(0));
    let client = {
        let (stop, asked) = (stop.clone(), asked.clone());
        std::thread::spawn(move || query_while_changing(&over_veth, &over_loopback, &stop, &asked, MAX_QUERIES, MAX_TIME))
    };
    for serial in 2..2 + CHANGES as u32 {
        // Queries between every two changes, and across each.
        let asked_so_far = asked.load(Ordering::Relaxed);
        common::wait_until("the client queries", || asked.load(Ordering::Relaxed) >= asked_so_far + 20 || client.is_finished());
        if client.is_finished() {
            break; // at its bounds: what it saw is checked below
        }
        match rng.random_range(0..4) {
            0 => {
                std::fs::write(&served.zone_file, random_zone(&mut rng, serial)).unwrap();
                assert_eq!(served.api("POST", "/v1/reload", None).0, 200);
            }
            1 => {
                let (status, reply) = served.api("PUT", "/v1/services/svc.example.test", Some(random_service(&mut rng)));
                assert_eq!(status, 200, "{reply}");
            }
            2 => assert!([204, 404].contains(&served.api("DELETE", "/v1/services/svc.example.test", None).0)),
            _ => {
                // A health transition, as a failed or recovered probe makes.
                let patch = serde_json::json!({ "down": rng.random_bool(0.5) });
                assert!([200, 404].contains(&served.api("PATCH", "/v1/services/svc.example.test/replicas/a", Some(patch)).0));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (queries, mismatches) = client.join().unwrap();
    assert!(mismatches.is_empty(), "{} of {queries} kernel answers were no snapshot's:\n{}", mismatches.len(), mismatches.join("\n"));
    let (_, shown) = served.api("GET", "/v1/fastpath", None);
    assert!(shown["syncs"].as_u64().unwrap() > CHANGES as u64 / 2, "the changes reached the kernel: {shown}");
    let hits = kernel_hits(&served) - before;
    eprintln!("{queries} queries across {CHANGES} changes, {hits} answered by the kernel");
    assert!(queries >= 200 && hits >= u64::from(queries) / 4, "{queries} queries, {hits} answered by the kernel: too few to show anything");
}

/// Queries names at random over the veth pair until `stop` (or the bounds),
/// each answer checked against user space's right before and right after:
/// it must be one of them. While a snapshot is being published the kernel
/// may already serve it and user space not yet (the kernel is written
/// first): then user space is asked again until it changes, for a moment.
/// Returns the number of queries and the answers that were no snapshot's.
fn query_while_changing(
    over_veth: &UdpSocket,
    over_loopback: &UdpSocket,
    stop: &AtomicBool,
    asked: &AtomicU32,
    max_queries: u32,
    max_time: Duration,
) -> (u32, Vec<String>) {
    let mut rng = SmallRng::seed_from_u64(20);
    let started = Instant::now();
    let mut mismatches = Vec::new();
    let mut queries = 0;
    while !stop.load(Ordering::Relaxed) && queries < max_queries && started.elapsed() < max_time {
        queries += 1;
        asked.store(queries, Ordering::Relaxed);
        let name = match rng.random_range(0..8) {
            6 => "svc.example.test".to_string(),
            7 => "ns.example.test".to_string(),
            name => format!("n{name}.example.test"),
        };
        let query = query_bytes(queries as u16, &name, Rtype::A);
        let before = netns::ask(over_loopback, &query);
        let kernel = netns::ask(over_veth, &query);
        let mut after = netns::ask(over_loopback, &query);
        let flip = Instant::now() + Duration::from_millis(200);
        while kernel != after && after == before && Instant::now() < flip {
            after = netns::ask(over_loopback, &query);
        }
        if kernel.is_none() || (kernel != before && kernel != after) {
            mismatches.push(format!("{name}: kernel {kernel:02x?}\n  before {before:02x?}\n  after  {after:02x?}"));
        }
    }
    (queries, mismatches)
}

/// The kernel draws a weighted service's order with its own random source;
/// user space with its seeded one: the same distribution.
#[test]
fn routed_answers_over_the_veth_pair_are_drawn_as_user_space_draws_them() {
    if !netns::may_run() {
        return;
    }
    const SAMPLES: u16 = 2000;
    // Chi-square with one degree of freedom above which a difference is
    // significant at 0.1 %.
    const CRITICAL: f64 = 10.828;
    let served = Served::start(NETNS_ZONE, SERVICE);
    let first_is_b = |replies: Vec<Option<Vec<u8>>>| -> u64 {
        let firsts =
            replies.into_iter().map(|reply| common::first_address_and_ttl(&Message::from_octets(reply.expect("an answer")).unwrap()).0);
        let firsts: Vec<IpAddr> = firsts.collect();
        assert!(firsts.iter().all(|first| ["192.0.2.41", "192.0.2.42"].contains(&first.to_string().as_str())), "{firsts:?}");
        firsts.iter().filter(|first| first.to_string() == "192.0.2.42").count() as u64
    };
    let ask_all =
        |at: SocketAddr| move || (0..SAMPLES).map(|id| netns::exchange(at, &query_bytes(id, "app.example.test", Rtype::A))).collect();
    let routed_hits = |served: &Served| served.api("GET", "/v1/fastpath", None).1["interfaces"][0]["traffic"]["answered_routed"].as_u64();
    let before = routed_hits(&served).unwrap_or(0);
    let kernel = first_is_b(Link::inside(&served.link.client, ask_all(Link::over_veth(false))));
    let drawn_in_the_kernel = routed_hits(&served).unwrap_or(0) - before;
    assert_eq!(drawn_in_the_kernel, u64::from(SAMPLES), "every answer over the veth pair drawn by the kernel");
    let user_space = first_is_b(Link::inside(&served.link.server, ask_all(Link::over_loopback())));
    // A 2x2 table: path by whether b (weight 3 of 4) came first.
    let n = f64::from(SAMPLES);
    let table = [[kernel as f64, n - kernel as f64], [user_space as f64, n - user_space as f64]];
    let column = [table[0][0] + table[1][0], table[0][1] + table[1][1]];
    let chi_square: f64 = (0..2)
        .flat_map(|row| (0..2).map(move |col| (row, col)))
        .map(|(row, col)| (table[row][col] - n * column[col] / (2.0 * n)).powi(2) / (n * column[col] / (2.0 * n)))
        .sum();
    assert!(
        chi_square < CRITICAL,
        "b first {kernel} of {SAMPLES} over the veth pair, {user_space} over loopback: chi-square {chi_square:.2}"
    );
    // And both draw b first about 3 times in 4, as its weight says.
    for count in [kernel, user_space] {
        assert!((1350..=1650).contains(&count), "b first {count} of {SAMPLES} times");
    }
}

#[test]
fn the_kernel_drops_a_source_over_its_limit_when_told_to() {
    if !netns::may_run() {
        return;
    }
    const QUERIES: u16 = 30;
    const BURST: u64 = 20;
    // One token a second: a source gets its burst (less what the start-up
    // probe took) while the test runs.
    let served = Served::start(NETNS_ZONE, &format!("[fastpath.rate_limit]\nper_second = 1\nburst = {BURST}\nover_limit = \"drop\""));
    let dropped = |served: &Served| {
        let (_, shown) = served.api("GET", "/v1/fastpath", None);
        shown["interfaces"][0]["traffic"]["rate_limited_dropped"].as_u64().unwrap_or(0)
    };
    let dropped_before = dropped(&served);
    // All sent at once, then the replies gathered: waiting out each
    // dropped query would let the bucket refill.
    let socket = Link::inside(&served.link.client, || netns::socket_to(Link::over_veth(false)));
    for id in 0..QUERIES {
        socket.send(&query_bytes(id, "www.example.test", Rtype::A)).unwrap();
    }
    let answered = answers(&socket).len() as u64;
    let dropped = dropped(&served) - dropped_before;
    assert!((BURST - 5..=BURST).contains(&answered), "{answered} of {QUERIES} answered with a burst of {BURST}");
    assert_eq!(answered + dropped, u64::from(QUERIES), "every query not answered was dropped by the kernel's limit");
}

#[test]
fn the_kernel_limits_alike_responses_to_a_network_as_rrl_does() {
    if !netns::may_run() {
        return;
    }
    const QUERIES: u16 = 40;
    const RATE: usize = 5;
    let served = Served::start(NETNS_ZONE, &format!("[rrl]\nrate = {RATE}\nslip = 2"));
    let limited = |served: &Served| {
        let (_, shown) = served.api("GET", "/v1/fastpath", None);
        let traffic = &shown["interfaces"][0]["traffic"];
        (traffic["rrl_slipped"].as_u64().unwrap_or(0), traffic["rrl_dropped"].as_u64().unwrap_or(0))
    };
    let (slipped_before, dropped_before) = limited(&served);
    let hits_before = kernel_hits(&served);
    // All at once, then the replies gathered, within the bucket's 200 ms
    // refill (a slow machine may earn a token or two back).
    let socket = Link::inside(&served.link.client, || netns::socket_to(Link::over_veth(false)));
    for id in 0..QUERIES {
        socket.send(&query_bytes(id, "www.example.test", Rtype::A)).unwrap();
    }
    let received = responses(&socket);
    let truncated = received.iter().filter(|response| response[2] & 0x02 != 0).count();
    let whole = received.len() - truncated;
    let (slipped, dropped) = limited(&served);
    let (slipped, dropped) = (slipped - slipped_before, dropped - dropped_before);
    assert!((1..=RATE + 2).contains(&whole), "{whole} whole answers at {RATE}/s");
    assert_eq!(truncated as u64, slipped, "every slipped response is a truncated one");
    assert_eq!(kernel_hits(&served) - hits_before, whole as u64, "the kernel sent the whole answers");
    assert_eq!(whole as u64 + slipped + dropped, u64::from(QUERIES), "every query answered, slipped or dropped in the kernel");
    assert!(slipped.abs_diff(dropped) <= 1, "slip 2: every other limited response slips ({slipped} vs {dropped})");
    let api = format!("http://{}", netns::API);
    let shown =
        run_in(&served.link.server, env!("CARGO_BIN_EXE_pharos"), &strings(&["ctl", "--api", &api, "--token", &served.token, "fastpath"]));
    assert!(shown.contains(&format!("{slipped} sent truncated, {dropped} dropped")), "{shown}");
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string()).collect()
}
