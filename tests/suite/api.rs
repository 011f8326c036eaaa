//! The control API and `pharos ctl` against the real server: bearer-token
//! authentication, the documented routes, changes live in DNS at once,
//! invalid changes refused whole, and durability across `kill -9`.

use std::net::{IpAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use domain::base::Message;
use domain::base::iana::Rtype;
use domain::rdata::A;
use serde_json::{Value, json};

use crate::common;
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "test-token-0123";

/// A server with the API, a durable store and one region-probability service.
fn start_with_service() -> (Pharos, String) {
    start_with_service_in("[store]\npath = \"state.sqlite\"")
}

/// [`start_with_service`] keeping its state in the `store` TOML section.
fn start_with_service_in(store: &str) -> (Pharos, String) {
    let declarations = Declarations::europe_service().toml();
    start_with_api(TOKEN, &format!("{store}\n{declarations}"))
}

fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    request(method, url, Some(TOKEN), body)
}

/// The first address answered for svc.example.test to a client in `subnet`/24.
fn first_for(pharos: &Pharos, subnet: &str) -> IpAddr {
    let mut packet = query_bytes(1, "svc.example.test", Rtype::A);
    packet[11] = 1;
    let address: IpAddr = subnet.parse().unwrap();
    let IpAddr::V4(v4) = address else { panic!() };
    packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 11, 0, 8, 0, 7, 0, 1, 24, 0]);
    packet.extend(&v4.octets()[..3]);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(&packet, pharos.address).unwrap();
    let mut buf = vec![0; 2048];
    let len = socket.recv(&mut buf).unwrap();
    let response = Message::from_octets(buf[..len].to_vec()).unwrap();
    IpAddr::V4(response.answer().unwrap().limit_to::<A>().next().unwrap().unwrap().data().addr())
}

#[test]
fn the_api_needs_the_token_and_serves_every_documented_route() {
    let (_pharos, api) = start_with_service();
    assert_eq!(request("GET", &format!("{api}/v1/regions"), None, None).0, 401);
    assert_eq!(request("GET", &format!("{api}/v1/regions"), Some("wrong"), None).0, 401);
    let (status, document) = request("GET", &format!("{api}/openapi.json"), None, None);
    assert_eq!(status, 200);
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.len() >= 9);
    for (path, operations) in paths {
        for method in operations.as_object().unwrap().keys().filter(|key| *key != "parameters") {
            let concrete = path.replace("{name}", "svc.example.test").replace("{id}", "fra");
            let status = request(&method.to_uppercase(), &format!("{api}{concrete}"), None, None).0;
            let expected = if path == "/openapi.json" { 200 } else { 401 };
            assert_eq!(status, expected, "{method} {path} is documented but answers {status}");
        }
    }
}

/// The scheduling policy of each of `pid`'s threads, by thread name.
fn thread_policies(pid: u32) -> Vec<(String, i32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .map(|task| {
            let task = task.unwrap();
            let name = std::fs::read_to_string(task.path().join("comm")).unwrap().trim().to_owned();
            let tid: libc::pid_t = task.file_name().to_str().unwrap().parse().unwrap();
            // SAFETY: reads the policy of a thread by id; no memory is passed.
            (name, unsafe { libc::sched_getscheduler(tid) })
        })
        .collect()
}

#[test]
fn the_control_plane_yields_the_core_to_the_query_threads() {
    let (pharos, api) = start_with_service();
    assert_eq!(call("GET", &format!("{api}/v1/services/svc.example.test"), None).0, 200);
    let policies = thread_policies(pharos.child.id());
    let policy_of = |name: &str| policies.iter().find(|(thread, _)| thread == name).map(|(_, policy)| *policy);
    assert_eq!(policy_of("api"), Some(libc::SCHED_BATCH), "{policies:?}");
    assert_eq!(policy_of("control"), Some(libc::SCHED_BATCH), "{policies:?}");
    assert_eq!(policy_of("udp-0"), Some(libc::SCHED_OTHER), "the query threads keep waking at once: {policies:?}");
}

#[test]
fn an_api_address_in_use_stops_the_start_with_an_error_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("example.test.zone"), ZONE).unwrap();
    let config = dir.path().join("pharos.toml");
    let dns = format!("127.0.0.1:{}", free_port());
    let text = format!(
        "[server]\nlisten = [\"{dns}\"]\n[control]\nlisten = \"{api}\"\ntoken = \"{TOKEN}\"\n[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n"
    );
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut exited = None;
    wait_until("pharos exits", || {
        exited = child.try_wait().unwrap();
        exited.is_some()
    });
    assert!(!exited.unwrap().success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains(&format!("cannot listen for the control API on {api}")), "{stderr}");
}

#[test]
fn an_accepted_update_is_in_the_next_answer() {
    let (pharos, api) = start_with_service();
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.10".parse::<IpAddr>().unwrap());
    let table = json!({ "europe": { "sin": { "probability": 1.0, "ttl": 30 } } });
    assert_eq!(call("PUT", &format!("{api}/v1/services/svc.example.test/probabilities"), Some(table)).0, 200);
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.20".parse::<IpAddr>().unwrap());
    let (status, reply) = call("POST", &format!("{api}/v1/regions"), Some(json!({ "name": "asia", "prefixes": ["203.0.113.0/24"] })));
    assert_eq!((status, reply["id"].as_u64()), (201, Some(2)), "{reply}");
    assert_eq!(call("PATCH", &format!("{api}/v1/services/svc.example.test/replicas/sin"), Some(json!({ "down": true }))).0, 200);
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.10".parse::<IpAddr>().unwrap(), "a replica marked down is not answered");
}

#[test]
fn an_invalid_update_is_refused_whole_and_changes_nothing() {
    let (pharos, api) = start_with_service();
    let before = call("GET", &format!("{api}/v1/services/svc.example.test"), None).1;
    let bad_tables = [
        (json!({ "europe": { "nowhere": { "probability": 1.0 } } }), "service[svc.example.test].probabilities[europe][nowhere]"),
        (json!({ "europe": { "fra": { "probability": -0.5 } } }), "service[svc.example.test].probabilities[europe][fra].probability"),
        (json!({ "europe": { "fra": { "probability": 0.0 } } }), "service[svc.example.test].probabilities[europe]"),
        (json!({ "mars": { "fra": { "probability": 1.0 } } }), "service[svc.example.test].probabilities[mars]"),
    ];
    for (table, field) in bad_tables {
        let (status, reply) = call("PUT", &format!("{api}/v1/services/svc.example.test/probabilities"), Some(table));
        assert_eq!((status, reply["field"].as_str()), (422, Some(field)), "{reply}");
    }
    let (status, reply) =
        call("PUT", &format!("{api}/v1/regions/bad"), Some(json!({ "id": 9, "name": "bad", "prefixes": ["10.0.0.1/8"] })));
    assert_eq!((status, reply["field"].as_str()), (422, Some("region[bad].prefixes[0]")));
    assert_eq!(call("DELETE", &format!("{api}/v1/regions/europe"), None).0, 422, "the table still uses it");
    assert_eq!(call("DELETE", &format!("{api}/v1/regions/nowhere"), None).0, 404);
    assert_eq!(call("POST", &format!("{api}/v1/regions"), Some(json!({ "name": "europe" }))).0, 409);
    assert_eq!(call("PUT", &format!("{api}/v1/services/svc.example.test"), Some(json!({ "name": "other" }))).0, 400);
    assert_eq!(call("GET", &format!("{api}/v1/services/svc.example.test"), None).1, before);
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.10".parse::<IpAddr>().unwrap());
}

#[test]
fn acknowledged_updates_survive_kill_9() {
    acknowledged_updates_survive_kill_9_in("[store]\npath = \"state.sqlite\"");
}

#[test]
fn acknowledged_updates_survive_kill_9_on_postgresql() {
    let database = postgres::Postgres::start();
    let url = database.create_database("pharos");
    acknowledged_updates_survive_kill_9_in(&format!("[store]\nurl = \"{url}\""));
    // Committed in PostgreSQL itself, not only in the node.
    let stored = database.sql("pharos", "SELECT spec::json->'replica'->1->>'weight' FROM services");
    assert_eq!(stored, "25\n");
}

#[test]
fn a_postgresql_store_that_cannot_be_reached_stops_the_start_saying_why() {
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("example.test.zone"), ZONE).unwrap();
    let config = dir.path().join("pharos.toml");
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:{}\"]\n[store]\nurl = \"postgres://pharos:secret@127.0.0.1:{closed_port}/pharos\"\n[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n",
        free_port()
    );
    std::fs::write(&config, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["serve", "--config"]).arg(&config).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot open the PostgreSQL store (store.url)") && stderr.contains("PostgreSQL cannot be reached"), "{stderr}");
    assert!(!stderr.contains("secret"), "the password is not repeated: {stderr}");
}

fn acknowledged_updates_survive_kill_9_in(store: &str) {
    let (pharos, api) = start_with_service_in(store);
    for weight in 1..=25u32 {
        let patch = json!({ "weight": weight });
        assert_eq!(call("PATCH", &format!("{api}/v1/services/svc.example.test/replicas/sin"), Some(patch)).0, 200);
    }
    assert_eq!(call("POST", &format!("{api}/v1/regions"), Some(json!({ "name": "asia", "prefixes": ["203.0.113.0/24"] }))).0, 201);
    let pharos = pharos.kill_and_restart();
    let service = call("GET", &format!("{api}/v1/services/svc.example.test"), None).1;
    assert_eq!(service["replica"][1]["weight"], 25);
    let regions = call("GET", &format!("{api}/v1/regions"), None).1;
    assert_eq!(regions.as_array().unwrap().len(), 2, "{regions}");
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.10".parse::<IpAddr>().unwrap());
}

#[test]
fn explain_and_ctl_show_the_decision_path() {
    let (_pharos, api) = start_with_service();
    let (status, explained) = call("GET", &format!("{api}/v1/explain?name=svc.example.test&client=198.51.100.0/24"), None);
    assert_eq!(status, 200, "{explained}");
    assert_eq!((explained["region"].as_u64(), explained["scope"].as_u64(), explained["ttl"].as_u64()), (Some(1), Some(24), Some(60)));
    let steps: Vec<&str> = explained["steps"].as_array().unwrap().iter().map(|step| step.as_str().unwrap()).collect();
    assert!(steps.iter().any(|step| step.contains("matched prefix 198.51.100.0/24")), "{steps:?}");
    assert_eq!(explained["fast_path"], "kernel fast path: off", "no interfaces configured");
    let ctl = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", &api, "--token", TOKEN]).args(args).output().unwrap()
    };
    let regions = ctl(&["regions"]);
    assert!(regions.status.success() && String::from_utf8_lossy(&regions.stdout).contains("europe"));
    let explain = ctl(&["explain", "svc.example.test", "198.51.100.7"]);
    assert!(
        String::from_utf8_lossy(&explain.stdout).contains("answer: [fra, sin], TTL 60")
            && String::from_utf8_lossy(&explain.stdout).contains("kernel fast path: off"),
        "{}",
        String::from_utf8_lossy(&explain.stdout)
    );
    let export = ctl(&["export"]);
    assert!(String::from_utf8_lossy(&export.stdout).contains("[[service]]"));
    let refused = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", &api, "--token", "wrong", "regions"]).output().unwrap();
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("401"));
}

#[test]
fn an_edited_file_wins_at_reload_for_what_it_declares() {
    let (pharos, api) = start_with_service();
    let table = json!({ "europe": { "sin": { "probability": 1.0, "ttl": 30 } } });
    assert_eq!(call("PUT", &format!("{api}/v1/services/svc.example.test/probabilities"), Some(table)).0, 200);
    assert_eq!(call("POST", &format!("{api}/v1/reload"), None).0, 200);
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.20".parse::<IpAddr>().unwrap(), "an unchanged file keeps the API's change");
    let text = std::fs::read_to_string(&pharos.config).unwrap().replace("ttl = 60", "ttl = 90");
    std::fs::write(&pharos.config, text).unwrap();
    assert_eq!(call("POST", &format!("{api}/v1/reload"), None).0, 200);
    assert_eq!(first_for(&pharos, "198.51.100.0"), "192.0.2.10".parse::<IpAddr>().unwrap(), "the edited declaration wins");
    let explained = call("GET", &format!("{api}/v1/explain?name=svc.example.test&client=198.51.100.1"), None).1;
    assert_eq!(explained["ttl"], 90);
}

#[test]
fn data_centers_are_managed_and_checked() {
    let (_pharos, api) = start_with_service();
    let frankfurt = json!({ "id": "fra", "latitude": 50.11, "longitude": 8.68, "asn": 64500 });
    assert_eq!(call("PUT", &format!("{api}/v1/datacenters/fra"), Some(frankfurt.clone())).0, 200);
    assert_eq!(call("GET", &format!("{api}/v1/datacenters/fra"), None).1, frankfurt);
    let (status, reply) =
        call("PUT", &format!("{api}/v1/datacenters/bad"), Some(json!({ "id": "bad", "latitude": 95.0, "longitude": 0.0 })));
    assert_eq!((status, reply["field"].as_str()), (422, Some("datacenter[bad].latitude")));
    let mut service = call("GET", &format!("{api}/v1/services/svc.example.test"), None).1;
    service["replica"][0]["datacenter"] = json!("ams");
    let (status, reply) = call("PUT", &format!("{api}/v1/services/svc.example.test"), Some(service.clone()));
    assert_eq!((status, reply["field"].as_str()), (422, Some("service[svc.example.test].replica[fra].datacenter")));
    service["replica"][0]["datacenter"] = json!("fra");
    assert_eq!(call("PUT", &format!("{api}/v1/services/svc.example.test"), Some(service)).0, 200);
    assert_eq!(call("DELETE", &format!("{api}/v1/datacenters/fra"), None).0, 422, "a replica still runs there");
}

/// `pharos ctl export` is a config fragment: with no data centers, appended
/// after the tables of another config file, it starts a server that gives
/// the same answers.
#[test]
fn an_export_appended_to_a_config_serves_the_same_answers() {
    let (pharos, api) = start_with_api(TOKEN, "");
    assert_eq!(call("POST", &format!("{api}/v1/regions"), Some(json!({ "name": "europe", "prefixes": ["198.51.100.0/24"] }))).0, 201);
    let service = json!({
        "name": "svc.example.test",
        "policy": "region-probabilities",
        "replica": [{ "id": "fra", "address": "192.0.2.10" }, { "id": "sin", "address": "192.0.2.20" }],
        "probabilities": { "europe": { "fra": { "probability": 1.0, "ttl": 60 } }, "default": { "sin": { "probability": 1.0 } } },
    });
    let (status, reply) = call("PUT", &format!("{api}/v1/services/svc.example.test"), Some(service));
    assert!(status == 200 || status == 201, "{status} {reply}");
    let export = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", &api, "--token", TOKEN, "export"]).output().unwrap();
    let export = String::from_utf8(export.stdout).unwrap();
    // After the [server] table (and before [[zone]]) of the copy's config.
    let copy = start(&format!("[latency]\nmax_age_seconds = 60\n{export}"));
    for subnet in ["198.51.100.0", "203.0.113.0"] {
        assert_eq!(first_for(&copy, subnet), first_for(&pharos, subnet), "{subnet}/24\n{export}");
    }
}
