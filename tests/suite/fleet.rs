//! A fleet: three `pharos serve` nodes on loopback keeping their state in
//! one real PostgreSQL (tests/suite/common/postgres.rs). A change made through
//! any node is answered by all; changes through alternating nodes, and
//! read-modify-writes through two nodes at once, leave every node with the
//! same state and lose none; a node whose listening connection is cut
//! still follows; while the database is away, nodes answer, refuse writes
//! saying why, and catch up once it is back; a node started meanwhile
//! serves the state it cached. Health is shared by quorum: a replica one
//! node's probes fail stays up everywhere; one most nodes' probes fail goes
//! down everywhere, and comes back likewise; a node cut off from the
//! database serves its own probes' view. Latency measurements posted to
//! one node steer every node's answers. A token revoked through one node
//! is refused by every node within a second. DNS UPDATEs
//! through alternating nodes lose none, and every node transfers the same
//! zone; with the database gone, UPDATE is SERVFAIL and queries answered.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use domain::base::iana::{Rcode, Rtype};
use domain::rdata::A;
use serde_json::{Value, json};

use pharos_update::write::{rr, update_message};
use pharos_wire::types::CLASS_IN;

use crate::common;
use common::postgres::Postgres;
use common::*;

const TOKEN: &str = "fleet-token";
const SERVICE: &str = "svc.example.test";
/// How long a change may take to reach every node: a notification takes
/// milliseconds; the bound only keeps a failure from hanging.
const PROPAGATION: Duration = Duration::from_secs(10);

/// A node of the fleet and its API's base URL.
struct Node {
    pharos: Pharos,
    api: String,
}

impl Node {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        request(method, &format!("{}{path}", self.api), Some(TOKEN), body)
    }

    /// The address the node answers first for the service, if any.
    fn answer(&self) -> Option<IpAddr> {
        let response = udp_query(self.pharos.address, SERVICE, Rtype::A)?;
        let record = response.answer().ok()?.limit_to::<A>().next()?.ok()?;
        Some(IpAddr::V4(record.data().addr()))
    }

    /// The address the node answers first for the service to a client
    /// in `subnet` (by ECS).
    fn answer_to(&self, subnet: (Ipv4Addr, u8)) -> Option<IpAddr> {
        let response = Asked::new(self.pharos.address).ask(&ecs_query(1, SERVICE, Rtype::A, Some((subnet.0.into(), subnet.1))));
        let record = response.answer().ok()?.limit_to::<A>().next()?.ok()?;
        Some(IpAddr::V4(record.data().addr()))
    }

    fn export(&self) -> String {
        let (status, export) = self.call("GET", "/v1/export", None);
        assert_eq!(status, 200, "{export}");
        export.as_str().unwrap().to_owned()
    }

    fn store(&self) -> Value {
        self.call("GET", "/v1/store", None).1
    }

    /// The value of the metric `family` scraped from the node.
    fn metric(&self, family: &str) -> f64 {
        let (status, text) = self.call("GET", "/metrics", None);
        assert_eq!(status, 200, "{text}");
        let text = text.as_str().expect("the text format").to_owned();
        text.lines()
            .find_map(|line| line.strip_prefix(family)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {family}: {text}"))
    }
}

/// One PostgreSQL and three nodes keeping their state in it.
fn fleet() -> (Postgres, Vec<Node>) {
    fleet_with(|_| String::new())
}

/// [`fleet`] with what `extra` gives each node (by its number) appended
/// to its config.
fn fleet_with(extra: impl Fn(usize) -> String) -> (Postgres, Vec<Node>) {
    let database = Postgres::start();
    let url = database.create_database("pharos");
    let nodes = (0..3)
        .map(|number| {
            let (pharos, api) = start_with_api(TOKEN, &format!("[store]\nurl = \"{url}\"\n{}", extra(number)));
            Node { pharos, api }
        })
        .collect();
    (database, nodes)
}

fn service_at(address: Ipv4Addr) -> Value {
    json!({ "name": SERVICE, "policy": "static", "replica": [{ "id": "a", "address": address.to_string() }] })
}

/// Whether the state `node` caches locally (its state cache and the
/// journal after it, beside its config) mentions `text`.
fn cache_holds(node: &common::Pharos, text: &str) -> bool {
    let directory = node.config.parent().expect("the config is in the node's directory");
    ["pharos-state-cache.json", "pharos-state-cache.journal"]
        .iter()
        .any(|file| std::fs::read_to_string(directory.join(file)).is_ok_and(|cached| cached.contains(text)))
}

/// Polls `converged` until it holds, failing after [`PROPAGATION`].
fn within_propagation(what: &str, mut converged: impl FnMut() -> bool) {
    let deadline = Instant::now() + PROPAGATION;
    while !converged() {
        assert!(Instant::now() < deadline, "not within {PROPAGATION:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Puts the service at `address` through `through` and waits until every
/// node answers it.
fn put_and_see_everywhere(nodes: &[Node], through: usize, address: Ipv4Addr) {
    let (status, reply) = nodes[through].call("PUT", &format!("/v1/services/{SERVICE}"), Some(service_at(address)));
    assert_eq!(status, 200, "{reply}");
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} answers {address}"), || node.answer() == Some(IpAddr::V4(address)));
    }
}

#[test]
fn a_change_through_any_node_is_answered_by_all_and_alternating_changes_leave_one_state() {
    let (database, nodes) = fleet();
    for (through, last_octet) in [(0, 10), (1, 11), (2, 12)] {
        put_and_see_everywhere(&nodes, through, Ipv4Addr::new(192, 0, 2, last_octet));
    }
    // Read-modify-writes (a replica's weight, in the service as each node
    // has it), one after another through alternating nodes.
    const CHANGES: u32 = 1000;
    for weight in 1..=CHANGES {
        let node = &nodes[weight as usize % nodes.len()];
        let (status, reply) = node.call("PATCH", &format!("/v1/services/{SERVICE}/replicas/a"), Some(json!({ "weight": weight })));
        assert_eq!(status, 200, "change {weight}: {reply}");
    }
    let logged = database.sql("pharos", "SELECT max(sequence) FROM changes").trim().parse::<u64>().unwrap();
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} applied every change"), || node.store()["last_sequence"] == logged);
    }
    let export = nodes[0].export();
    assert!(export.contains(&format!("weight = {CHANGES}")), "{export}");
    for node in &nodes[1..] {
        assert_eq!(node.export(), export);
    }
    for node in &nodes {
        let store = node.store();
        assert_eq!((&store["engine"], &store["state"]), (&json!("postgresql"), &json!("following")), "{store}");
    }
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["ctl", "--api", &nodes[2].api, "--token", TOKEN, "status"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    assert_eq!(printed, format!("store: postgresql, following\n  last change applied: sequence {logged}\n"));
}

#[test]
fn neither_the_writing_node_nor_the_others_read_back_the_changes_notified() {
    let (_database, nodes) = fleet();
    put_and_see_everywhere(&nodes, 0, Ipv4Addr::new(192, 0, 2, 10));
    let reads = |node: &Node| node.metric("pharos_store_catch_up_reads_total");
    let (before, started) = ((reads(&nodes[0]), reads(&nodes[1])), Instant::now());
    const CHANGES: u32 = 100;
    for weight in 1..=CHANGES {
        let (status, reply) = nodes[0].call("PATCH", &format!("/v1/services/{SERVICE}/replicas/a"), Some(json!({ "weight": weight })));
        assert_eq!(status, 200, "change {weight}: {reply}");
    }
    let (own_reads, seconds) = (reads(&nodes[0]) - before.0, started.elapsed().as_secs_f64());
    // Its follower looks once after each quiet second; the notifications
    // of its own changes read nothing.
    assert!(own_reads <= seconds.ceil() + 1.0, "{own_reads} reads of the log in {seconds:.1} s while making {CHANGES} changes");
    let logged = nodes[0].store()["last_sequence"].clone();
    within_propagation("node 1 applied every change", || nodes[1].store()["last_sequence"] == logged);
    // The others take each change from its notification.
    let (other_reads, seconds) = (reads(&nodes[1]) - before.1, started.elapsed().as_secs_f64());
    assert!(other_reads <= seconds.ceil() + 1.0, "node 1 read the log {other_reads} times in {seconds:.1} s to follow {CHANGES} changes");
}

#[test]
fn latency_measurements_posted_to_one_node_steer_every_node_s_answers() {
    let (_database, nodes) = fleet();
    for (id, latitude, longitude) in [("iad", 38.94, -77.46), ("fra", 50.03, 8.57)] {
        let datacenter = json!({ "id": id, "latitude": latitude, "longitude": longitude });
        let (status, reply) = nodes[0].call("PUT", &format!("/v1/datacenters/{id}"), Some(datacenter));
        assert_eq!(status, 200, "{reply}");
    }
    let service = json!({ "name": SERVICE, "policy": "lowest-latency", "fallback": "static", "replica": [
        { "id": "iad", "address": "192.0.2.30", "datacenter": "iad" },
        { "id": "fra", "address": "192.0.2.10", "datacenter": "fra" },
    ] });
    let (status, reply) = nodes[1].call("PUT", &format!("/v1/services/{SERVICE}"), Some(service));
    assert_eq!(status, 200, "{reply}");
    let client = (Ipv4Addr::new(10, 1, 2, 0), 24);
    let (iad, fra) = (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 30)), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)));
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} answers iad, declared first"), || node.answer_to(client) == Some(iad));
    }
    // Posted to node 0 only, each round's RTTs make the other data center
    // the nearer; every node follows.
    for (near, far, expected) in [("fra", "iad", fra), ("iad", "fra", iad)] {
        let measured = json!([
            { "subnet": "10.1.0.0/16", "datacenter": near, "rtt_ms": 5.0 },
            { "subnet": "10.1.0.0/16", "datacenter": far, "rtt_ms": 90.0 },
        ]);
        assert_eq!(nodes[0].call("POST", "/v1/measurements", Some(measured)), (200, json!({ "accepted": 2 })));
        for (number, node) in nodes.iter().enumerate() {
            within_propagation(&format!("node {number} answers {near}, now the nearer"), || node.answer_to(client) == Some(expected));
        }
    }
    for node in &nodes {
        let (_, data) = node.call("GET", "/v1/data", None);
        assert_eq!(data["latency"]["measurements"], 2, "{data}");
    }
}

#[test]
fn read_modify_writes_through_two_nodes_at_once_lose_nothing() {
    let (_database, nodes) = fleet();
    // A new region takes the next free id in the state as its node has it.
    // A node that other nodes keep getting ahead of answers 409 after a few
    // tries; its client tries again, as the reply says.
    const REGIONS: usize = 25;
    const CLIENT_TRIES: usize = 100;
    std::thread::scope(|scope| {
        for ((node, prefix), octet) in nodes[..2].iter().zip(["a", "b"]).zip([10, 11]) {
            scope.spawn(move || {
                for number in 0..REGIONS {
                    let region = json!({ "name": format!("{prefix}{number}"), "prefixes": [format!("{octet}.{number}.0.0/16")] });
                    let created = (0..CLIENT_TRIES).any(|_| {
                        let (status, reply) = node.call("POST", "/v1/regions", Some(region.clone()));
                        assert!(status == 201 || status == 409, "{prefix}{number}: {status} {reply}");
                        status == 201
                    });
                    assert!(created, "{prefix}{number}: 409 {CLIENT_TRIES} times");
                }
            });
        }
    });
    let regions_of = |node: &Node| {
        let mut ids: Vec<(u64, String)> = node
            .call("GET", "/v1/regions", None)
            .1
            .as_array()
            .unwrap()
            .iter()
            .map(|region| (region["id"].as_u64().unwrap(), region["name"].as_str().unwrap().to_owned()))
            .collect();
        ids.sort();
        ids
    };
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} has as many regions as were created"), || regions_of(node).len() == 2 * REGIONS);
    }
    let everywhere = regions_of(&nodes[0]);
    let ids: Vec<u64> = everywhere.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=2 * REGIONS as u64).collect::<Vec<_>>(), "every region, each with an id of its own: {everywhere:?}");
    for node in &nodes[1..] {
        assert_eq!(regions_of(node), everywhere);
    }
}

#[test]
fn a_node_whose_listening_connection_is_cut_still_follows() {
    let (database, nodes) = fleet();
    put_and_see_everywhere(&nodes, 0, Ipv4Addr::new(192, 0, 2, 10));
    let listener = format!("application_name = 'pharos-follower-{}'", nodes[2].pharos.child.id());
    let cut = database.sql("pharos", &format!("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE {listener}"));
    assert_eq!(cut, "1\n", "node 2 had one listening connection");
    put_and_see_everywhere(&nodes, 0, Ipv4Addr::new(192, 0, 2, 11));
    within_propagation("node 2 listens again", || nodes[2].store()["state"] == "following");
    put_and_see_everywhere(&nodes, 1, Ipv4Addr::new(192, 0, 2, 12));
    assert!(nodes[2].pharos.log().contains("not following the store's changes, reconnecting"), "{}", nodes[2].pharos.log());
}

/// Asks every node for the service over and over (at most `MAX_ROUNDS`
/// rounds) until `stop` is set; returns the questions asked and those
/// left unanswered.
fn query_throughout(nodes: &[Node], stop: &std::sync::atomic::AtomicBool) -> (usize, usize) {
    const MAX_ROUNDS: usize = 1_000_000;
    let (mut asked, mut unanswered) = (0, 0);
    for _ in 0..MAX_ROUNDS {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        for node in nodes {
            asked += 1;
            unanswered += usize::from(node.answer().is_none());
        }
    }
    (asked, unanswered)
}

#[test]
fn while_the_database_is_away_nodes_answer_and_refuse_writes_saying_why_then_catch_up() {
    let (database, nodes) = fleet();
    put_and_see_everywhere(&nodes, 0, Ipv4Addr::new(192, 0, 2, 10));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (asked, unanswered) = std::thread::scope(|scope| {
        let querying = scope.spawn(|| query_throughout(&nodes, &stop));
        database.stop();
        for (number, node) in nodes.iter().enumerate() {
            within_propagation(&format!("node {number} says it lost the store"), || node.store()["state"] == "reconnecting");
            let (status, reply) = node.call("PUT", &format!("/v1/services/{SERVICE}"), Some(service_at(Ipv4Addr::new(192, 0, 2, 99))));
            assert_eq!(status, 503, "{reply}");
            assert!(reply["error"].as_str().unwrap().starts_with("the store is unavailable: PostgreSQL"), "{reply}");
            assert_eq!(node.answer(), Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10))), "the last snapshot serves");
        }
        database.start_server();
        // At once: the other nodes may still be waiting to reconnect, and
        // catch up when they do.
        put_and_see_everywhere(&nodes, 1, Ipv4Addr::new(192, 0, 2, 11));
        for (number, node) in nodes.iter().enumerate() {
            within_propagation(&format!("node {number} follows again"), || node.store()["state"] == "following");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        querying.join().unwrap()
    });
    assert!(asked > 0 && unanswered == 0, "{unanswered} of {asked} questions unanswered");
    put_and_see_everywhere(&nodes, 2, Ipv4Addr::new(192, 0, 2, 12));
}

#[test]
fn a_node_started_while_the_database_is_down_serves_its_cached_state_says_so_and_catches_up() {
    let (database, mut nodes) = fleet();
    put_and_see_everywhere(&nodes, 0, Ipv4Addr::new(192, 0, 2, 10));
    let Node { mut pharos, api } = nodes.pop().unwrap();
    // A node caches its state after it serves it: killed at once, it may
    // not have.
    within_propagation("the node caches what it serves", || cache_holds(&pharos, "192.0.2.10"));
    pharos.child.kill().unwrap();
    pharos.child.wait().unwrap();
    // A change the stopped node has not seen.
    put_and_see_everywhere(&nodes, 0, Ipv4Addr::new(192, 0, 2, 11));
    database.stop();
    nodes.push(Node { pharos: pharos.kill_and_restart(), api });
    let restarted = &nodes[2];
    assert_eq!(restarted.answer(), Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10))), "the state it cached");
    let store = restarted.store();
    assert!(store["serving_cache"].as_str().unwrap_or_default().contains("could not be reached at start"), "{store}");
    assert!(restarted.pharos.log().contains("serving the state cached in"), "{}", restarted.pharos.log());
    let (status, reply) = restarted.call("PUT", &format!("/v1/services/{SERVICE}"), Some(service_at(Ipv4Addr::new(192, 0, 2, 99))));
    assert_eq!(status, 503, "{reply}");
    database.start_server();
    within_propagation("the restarted node catches up", || restarted.answer() == Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 11))));
    within_propagation("the restarted node no longer says it serves its cache", || restarted.store()["serving_cache"].is_null());
    put_and_see_everywhere(&nodes, 2, Ipv4Addr::new(192, 0, 2, 12));
}

/// An HTTP server standing in for a replica as one node's probes reach it:
/// it answers 200, or 503 while the test says it fails.
struct ProbedPath {
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ProbedPath {
    fn start(at: std::net::SocketAddr) -> ProbedPath {
        use std::io::{Read, Write};
        // Far more probes than a test sends: the thread ends with the test.
        const MAX_PROBES: usize = 100_000;
        let listener = std::net::TcpListener::bind(at).unwrap();
        let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let fails = failing.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().take(MAX_PROBES).flatten() {
                let _ = stream.read(&mut [0u8; 2048]);
                let status = if fails.load(std::sync::atomic::Ordering::SeqCst) { "503 Unavailable" } else { "200 OK" };
                let _ = stream.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
            }
        });
        ProbedPath { failing }
    }

    fn fail(&self, failing: bool) {
        self.failing.store(failing, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Node {
    /// Every address the node answers for the service, sorted.
    fn answers(&self) -> Vec<IpAddr> {
        let Some(response) = udp_query(self.pharos.address, SERVICE, Rtype::A) else { return Vec::new() };
        let records = response.answer().unwrap().limit_to::<A>().map(|record| IpAddr::V4(record.unwrap().data().addr()));
        let mut addresses: Vec<IpAddr> = records.collect();
        addresses.sort();
        addresses
    }

    /// The node's health report on `replica` of the service.
    fn health(&self, replica: &str) -> Value {
        let (status, report) = self.call("GET", "/v1/health", None);
        assert_eq!(status, 200, "{report}");
        report.as_array().unwrap().iter().find(|entry| entry["replica"] == replica).cloned().unwrap_or(Value::Null)
    }
}

/// A fleet whose node i probes replica a of the service at 127.0.0.(10 +
/// i), its own path to it (the paths returned); replica b, at 127.0.0.13
/// for every node, always passes.
fn probed_fleet() -> (Vec<ProbedPath>, Postgres, Vec<Node>) {
    let port = free_port();
    let paths: Vec<ProbedPath> = (10..14).map(|last| ProbedPath::start((Ipv4Addr::new(127, 0, 0, last), port).into())).collect();
    let (database, nodes) = fleet_with(|number| health_section(number, ""));
    let probe = json!({ "kind": "http", "port": port, "path": "/health", "interval_ms": 200, "rise": 1, "fall": 1 });
    let service = json!({ "name": SERVICE, "policy": "static", "health": probe, "replica": [
        { "id": "a", "address": "192.0.2.10" },
        { "id": "b", "address": "192.0.2.20", "probe_address": "127.0.0.13" },
    ] });
    let (status, reply) = nodes[0].call("PUT", &format!("/v1/services/{SERVICE}"), Some(service));
    assert_eq!(status, 200, "{reply}");
    (paths, database, nodes)
}

/// Node `number`'s `[health]` section in [`probed_fleet`], with `extra`.
fn health_section(number: usize, extra: &str) -> String {
    format!(
        "[health]\nnode = \"n{number}\"\nreport_interval_ms = 200\nstale_after_ms = 1000\n\
         probe_address = {{ \"{SERVICE}/a\" = \"127.0.0.{}\" }}\n{extra}",
        10 + number
    )
}

/// Waits until every node hears that exactly `down_nodes` see replica a
/// of [`probed_fleet`] down and weighs a up or down as `served_up` says,
/// then until each answers a (with b) or not accordingly.
fn everywhere(nodes: &[Node], down_nodes: &[&str], served_up: bool) {
    let (a, b) = (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 20)));
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} hears that {down_nodes:?} see a down, and serves a as up: {served_up}"), || {
            let health = node.health("a");
            let fleet = &health["fleet"];
            fleet["nodes_down"] == json!(down_nodes)
                && fleet["nodes_up"].as_array().map(Vec::len) == Some(3 - down_nodes.len())
                && health["up"] == served_up
        });
        let expected = if served_up { vec![a, b] } else { vec![b] };
        within_propagation(&format!("node {number} answers {expected:?}"), || node.answers() == expected);
    }
}

#[test]
fn a_replica_is_down_fleet_wide_only_when_most_nodes_probes_fail_it() {
    let (paths, database, nodes) = probed_fleet();
    let (a, b) = (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 20)));
    everywhere(&nodes, &[], true);
    paths[0].fail(true);
    everywhere(&nodes, &["n0"], true);
    let (status, explained) = nodes[0].call("GET", &format!("/v1/explain?name={SERVICE}&client=198.51.100.1"), None);
    assert_eq!(status, 200, "{explained}");
    let why = explained["health"][0]["fleet"]["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("up: 2 of 3 live nodes see it up; no majority sees it down (n0: probe failed"), "{explained}");
    paths[1].fail(true);
    everywhere(&nodes, &["n0", "n1"], false);
    let (_, explained) = nodes[2].call("GET", &format!("/v1/explain?name={SERVICE}&client=198.51.100.1"), None);
    let why = explained["health"][0]["fleet"]["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("down: 2 of 3 live nodes see it down, a majority (n0: probe failed"), "{explained}");
    assert!(explained["steps"].to_string().contains("down: 2 of 3"), "the routing steps say why a is left out: {explained}");
    paths[1].fail(false);
    everywhere(&nodes, &["n0"], true);
    paths[0].fail(false);
    everywhere(&nodes, &[], true);
    // Cut off from the database for longer than the staleness window, each
    // node serves its own probes' view: n0's own probes fail a again.
    paths[0].fail(true);
    everywhere(&nodes, &["n0"], true);
    database.stop();
    within_propagation("node 0, alone, serves its own view", || nodes[0].answers() == [b]);
    let alone = nodes[0].health("a");
    assert!(alone["fleet"].is_null() && alone["last"].as_str().unwrap().starts_with("probe failed"), "{alone}");
    for node in &nodes[1..] {
        assert_eq!(node.answers(), [a, b], "their own probes pass");
    }
    paths[0].fail(false);
    within_propagation("node 0, alone, serves its own probes' turn", || nodes[0].answers() == [a, b]);
}

#[test]
fn a_reload_takes_a_new_quorum_and_refuses_renaming_the_node() {
    let (paths, _database, nodes) = probed_fleet();
    everywhere(&nodes, &[], true);
    paths[0].fail(true);
    everywhere(&nodes, &["n0"], true);
    // One node of three (33 %) is more than a 30 % quorum.
    for (number, node) in nodes.iter().enumerate() {
        rewrite_health(node, &health_section(number, "quorum = 0.3"));
        let (status, reply) = node.call("POST", "/v1/reload", None);
        assert_eq!(status, 200, "node {number}: {reply}");
    }
    everywhere(&nodes, &["n0"], false);
    let (_, explained) = nodes[1].call("GET", &format!("/v1/explain?name={SERVICE}&client=198.51.100.1"), None);
    let why = explained["health"][0]["fleet"]["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("down: 1 of 3 live nodes see it down, a quorum (over 30 %)"), "{explained}");
    // A node renamed by a reload is refused, and keeps serving as it did.
    rewrite_health(&nodes[2], &health_section(2, "quorum = 0.3").replace("\"n2\"", "\"n2-renamed\""));
    let (status, reply) = nodes[2].call("POST", "/v1/reload", None);
    assert_eq!(status, 422, "{reply}");
    assert!(reply["field"] == "health.node" && reply["error"].as_str().unwrap_or_default().contains("takes a restart"), "{reply}");
    paths[0].fail(false);
    everywhere(&nodes, &[], true);
}

/// Replaces the `[health]` section of `node`'s config file with `section`
/// (it is the file's last section but the zone's).
fn rewrite_health(node: &Node, section: &str) {
    let text = std::fs::read_to_string(&node.pharos.config).unwrap();
    let (before, rest) = text.split_once("[health]").expect("a [health] section");
    let zone = rest.find("[[zone]]").expect("the zone after it");
    std::fs::write(&node.pharos.config, format!("{before}{section}\n{}", &rest[zone..])).unwrap();
}

#[test]
fn a_token_revoked_through_one_node_is_refused_by_every_node_within_a_second() {
    let (_database, nodes) = fleet();
    let (status, made) = nodes[0].call("POST", "/v1/tokens", Some(json!({ "name": "ci", "scope": "read" })));
    assert_eq!(status, 201, "{made}");
    let secret = made["token"].as_str().unwrap().to_owned();
    // Seen through the admin token: a node asked with the new token before
    // it has read it would count a failed authentication.
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} lists the token"), || node.call("GET", "/v1/tokens", None).1[0]["name"] == "ci");
        assert_eq!(request("GET", &format!("{}/v1/regions", node.api), Some(&secret), None).0, 200);
    }
    let (status, reply) = nodes[1].call("DELETE", "/v1/tokens/ci", None);
    assert_eq!(status, 204, "{reply}");
    let revoked = Instant::now();
    let mut refused = [false; 3];
    while refused.contains(&false) {
        assert!(revoked.elapsed() < Duration::from_secs(1), "refused by nodes {refused:?} only, a second after the revocation");
        for (node, refused) in nodes.iter().zip(&mut refused).filter(|(_, refused)| !**refused) {
            let (status, reply) = request("GET", &format!("{}/v1/regions", node.api), Some(&secret), None);
            *refused = status == 401 && reply["error"] == "this token has been revoked";
        }
    }
    let events = nodes[2].call("GET", "/v1/events", None).1;
    assert!(events.to_string().contains("token ci revoked"), "every node logs the change: {events}");
}

/// An unsigned UPDATE of dyn.test adding `owner` A `address`.
fn update_adding(id: u16, owner: &str, address: Ipv4Addr) -> Vec<u8> {
    let added = rr(owner, Rtype::A.to_int(), CLASS_IN, 60, &address.octets());
    update_message(id, "dyn.test.", &[], &[added])
}

/// Sends `update` to `node` over UDP: the reply's RCODE and its extended
/// error text, if any (`None`: no reply within 10 s).
fn send_update(node: &Node, update: &[u8]) -> Option<(Rcode, String)> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    socket.send_to(update, node.pharos.address).unwrap();
    let mut buffer = vec![0; 4096];
    let len = socket.recv(&mut buffer).ok()?;
    buffer.truncate(len);
    let reply = domain::base::Message::from_octets(buffer).unwrap();
    Some((reply.header().rcode(), String::from_utf8_lossy(reply.as_slice()).into_owned()))
}

/// The zone dyn.test as `node` transfers it (AXFR by kdig), sorted.
fn transferred_zone(kdig: &std::path::Path, node: &Node) -> Vec<String> {
    let server = node.pharos.address;
    let output = std::process::Command::new(kdig)
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), "dyn.test", "AXFR", "+noall", "+answer"])
        .output()
        .unwrap();
    let mut lines: Vec<String> =
        String::from_utf8_lossy(&output.stdout).lines().filter(|line| !line.is_empty()).map(str::to_owned).collect();
    lines.sort();
    lines
}

#[test]
fn updates_through_alternating_nodes_lose_none_and_every_node_transfers_the_same_zone() {
    let Some(kdig) = require("kdig", "knot-dnsutils") else { return };
    let settings = "[store_zones]\nallow_transfer = [\"127.0.0.1/32\"]\n\
                    [[store_zones.update]]\nfrom = [\"127.0.0.0/8\"]\nat_or_below = \"dyn.test.\"\n";
    let (database, nodes) = fleet_with(|_| settings.to_string());
    let (status, reply) = nodes[0].call("POST", "/v1/zones", Some(json!({"name": "dyn.test", "nameservers": ["ns1.dyn.test"]})));
    assert_eq!(status, 201, "{reply}");
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} serves dyn.test"), || {
            udp_query(node.pharos.address, "dyn.test", Rtype::SOA).is_some_and(|answer| answer.header().rcode() == Rcode::NOERROR)
        });
    }
    // Through the nodes in turn, each update once the one before is
    // answered.
    const UPDATES: u16 = 300;
    for number in 0..UPDATES {
        let address = Ipv4Addr::new(10, 0, (number / 250) as u8, (number % 250) as u8);
        let update = update_adding(number, &format!("host{number}.dyn.test."), address);
        let replied = send_update(&nodes[usize::from(number) % nodes.len()], &update);
        assert_eq!(replied.as_ref().map(|(rcode, _)| *rcode), Some(Rcode::NOERROR), "update {number}: {replied:?}");
    }
    // Then three clients at once, each through its own node: the nodes
    // overtake each other in the store, and each update is made again
    // from the newer state until it goes through.
    const AT_ONCE: u16 = 20;
    std::thread::scope(|scope| {
        for (client, node) in nodes.iter().enumerate() {
            scope.spawn(move || {
                for number in 0..AT_ONCE {
                    let id = UPDATES + client as u16 * AT_ONCE + number;
                    let update = update_adding(id, &format!("host{id}.dyn.test."), Ipv4Addr::new(10, 1, client as u8, number as u8));
                    let replied = send_update(node, &update);
                    assert_eq!(replied.as_ref().map(|(rcode, _)| *rcode), Some(Rcode::NOERROR), "update {id}: {replied:?}");
                }
            });
        }
    });
    let expected = usize::from(UPDATES + 3 * AT_ONCE);
    let count = |node: &Node| transferred_zone(&kdig, node).iter().filter(|line| line.contains("\tA\t")).count();
    within_propagation("node 0 has every update", || count(&nodes[0]) == expected);
    let last = transferred_zone(&kdig, &nodes[0]);
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} transfers the same zone"), || transferred_zone(&kdig, node) == last);
    }
    // The database gone: UPDATE is refused saying why, queries answered.
    database.stop();
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} says it lost the store"), || node.store()["state"] == "reconnecting");
        let (rcode, said) = send_update(node, &update_adding(1, "late.dyn.test.", Ipv4Addr::new(10, 9, 9, 9))).expect("a reply");
        assert_eq!(rcode, Rcode::SERVFAIL, "{said}");
        let answered = udp_query(node.pharos.address, "host7.dyn.test", Rtype::A).expect("queries answered");
        assert_eq!(answered.header().rcode(), Rcode::NOERROR);
    }
    database.start_server();
    within_propagation("an update goes through again", || {
        send_update(&nodes[1], &update_adding(2, "late.dyn.test.", Ipv4Addr::new(10, 9, 9, 9)))
            .is_some_and(|(rcode, _)| rcode == Rcode::NOERROR)
    });
    let after = transferred_zone(&kdig, &nodes[1]);
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} converges"), || transferred_zone(&kdig, node) == after);
    }
}

#[test]
fn every_node_s_event_log_names_the_token_of_a_change_made_through_another() {
    let (_database, nodes) = fleet();
    let (status, made) = nodes[0].call("POST", "/v1/tokens", Some(json!({ "name": "ops", "scope": "admin" })));
    assert_eq!(status, 201, "{made}");
    let ops = made["token"].as_str().unwrap().to_owned();
    within_propagation("node 1 knows the token", || nodes[1].call("GET", "/v1/tokens", None).1.to_string().contains(r#""name":"ops""#));
    let datacenter = json!({ "id": "ams", "latitude": 52.4, "longitude": 4.9 });
    let (status, reply) = request("PUT", &format!("{}/v1/datacenters/ams", nodes[1].api), Some(&ops), Some(datacenter));
    assert_eq!(status, 200, "{reply}");
    for (number, node) in nodes.iter().enumerate() {
        within_propagation(&format!("node {number} names the token of each change"), || {
            let events = node.call("GET", "/v1/events", None).1.to_string();
            events.contains("token ops made by token admin") && events.contains("datacenter ams put by token ops")
        });
    }
}
