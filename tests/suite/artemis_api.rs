//! Artemis in the operator's view, against the real server: the Address
//! Manager's allocation of the `[artemis]` services in `GET /v1/artemis`
//! and `pharos ctl artemis`, and `explain` for a service address: which
//! service, and which replica and data center the dispatcher would pick;
//! a reload applies a changed `[artemis]` section, or refuses a bad one.

use std::process::Command;

use serde_json::Value;

use crate::common;
use common::*;

const TOKEN: &str = "test-token-artemis";
const PREFIX: &str = "10.99.0.0/24";

/// `pharos sid`: the address a name hashes to under [`PREFIX`].
fn hashed(name: &str) -> String {
    hashed_under(PREFIX, name)
}

fn hashed_under(prefix: &str, name: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["sid", "--prefix", prefix, name]).output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A server whose conflict list gives svc.example.test the address
/// www.example.test hashes to, so the two collide; svc's replicas are in
/// two data centers, weighted 0:1.
fn start_with_artemis(taken: &str) -> (Pharos, String) {
    let extra = format!(
        r#"[artemis]
prefix = "{PREFIX}"
conflicts = "svc.example.test {taken}"
services = ["svc.example.test", "www.example.test", "Other.Example.Test."]
[[datacenter]]
id = "fra"
latitude = 50.1
longitude = 8.7
[[datacenter]]
id = "sin"
latitude = 1.35
longitude = 103.8
[[service]]
name = "svc.example.test"
policy = "weighted"
[[service.replica]]
id = "fra"
address = "192.0.2.10"
datacenter = "fra"
weight = 0
[[service.replica]]
id = "sin"
address = "192.0.2.20"
datacenter = "sin"
weight = 1
"#
    );
    start_with_api(TOKEN, &extra)
}

fn ctl(api: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", api, "--token", TOKEN]).args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_api_and_ctl_show_the_allocation_and_its_collisions() {
    let taken = hashed("www.example.test");
    let (_pharos, api) = start_with_artemis(&taken);
    let (status, view) = request("GET", &format!("{api}/v1/artemis"), Some(TOKEN), None);
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["prefix"], PREFIX);
    let services: Vec<(&str, &str, bool)> = view["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|service| (service["name"].as_str().unwrap(), service["address"].as_str().unwrap(), service["from_conflict_list"] == true))
        .collect();
    let other = hashed("other.example.test");
    assert_eq!(services, [("other.example.test", other.as_str(), false), ("svc.example.test", taken.as_str(), true)]);
    let problems: Vec<&str> = view["problems"].as_array().unwrap().iter().map(|problem| problem.as_str().unwrap()).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let collision = format!(
        "svc.example.test and www.example.test map to {taken}; svc.example.test keeps it; add to the conflict list: \"www.example.test "
    );
    assert!(problems[0].starts_with(&collision), "{problems:?}");

    let printed = ctl(&api, &["artemis"]);
    assert!(printed.starts_with(&format!("service prefix {PREFIX}\n")), "{printed}");
    assert!(printed.lines().any(|line| line.split_whitespace().eq(["svc.example.test", taken.as_str(), "conflict", "list"])), "{printed}");
    assert!(printed.lines().any(|line| line.split_whitespace().eq(["other.example.test", other.as_str(), "hash"])), "{printed}");
    assert!(printed.contains(&format!("problem: {collision}")), "{printed}");
}

#[test]
fn explain_names_the_service_of_an_address_and_the_dispatcher_s_pick() {
    let taken = hashed("www.example.test");
    let (_pharos, api) = start_with_artemis(&taken);
    let (status, explained) = request("GET", &format!("{api}/v1/explain?address={taken}&client=198.51.100.7"), Some(TOKEN), None);
    assert_eq!(status, 200, "{explained}");
    let pick = &explained["artemis"];
    assert_eq!((pick["service"].as_str(), pick["service_address"].as_str()), (Some("svc.example.test"), Some(taken.as_str())));
    assert_eq!(
        (pick["replica"].as_str(), pick["replica_address"].as_str(), pick["datacenter"].as_str()),
        (Some("sin"), Some("192.0.2.20"), Some("sin")),
        "the weighted draw through the routing core: {explained}"
    );
    assert!(!explained["steps"].as_array().unwrap().is_empty(), "the routing core's own steps: {explained}");
    let (status, by_name) = request("GET", &format!("{api}/v1/explain?name=svc.example.test&client=198.51.100.7"), Some(TOKEN), None);
    assert_eq!((status, by_name.get("artemis")), (200, None), "a name alone asks nothing of Artemis");
    assert_eq!(by_name["steps"], explained["steps"], "the same door, the same draw");

    let printed = ctl(&api, &["explain", &taken, "198.51.100.7"]);
    assert!(printed.contains(&format!("{taken} is the Artemis service address of svc.example.test\n")), "{printed}");
    assert!(printed.contains("the dispatcher sends the handshake to replica sin (192.0.2.20) in data center sin\n"), "{printed}");
}

#[test]
fn bad_explain_questions_are_refused_clearly() {
    let taken = hashed("www.example.test");
    let (_pharos, api) = start_with_artemis(&taken);
    let ask = |query: &str| -> (u16, Value) { request("GET", &format!("{api}/v1/explain?{query}"), Some(TOKEN), None) };
    let unallocated = hashed("nothing.example.test");
    let (status, error) = ask(&format!("address={unallocated}&client=198.51.100.7"));
    assert_eq!(status, 404, "{error}");
    assert!(error["error"].as_str().unwrap().contains(&format!("Artemis service address {unallocated}")), "{error}");
    let (status, error) = ask(&format!("address={taken}&client=198.51.100.7&qtype=AAAA"));
    assert_eq!((status, error["field"].as_str()), (400, Some("qtype")), "{error}");
    let (status, error) = ask(&format!("name=svc.example.test&address={taken}&client=198.51.100.7"));
    assert_eq!((status, error["field"].as_str()), (400, Some("name")), "{error}");
    let (status, error) = ask("client=198.51.100.7");
    assert_eq!((status, error["field"].as_str()), (400, Some("name")), "{error}");

    let (_plain, plain_api) = start_with_api(TOKEN, "");
    let (status, error) = request("GET", &format!("{plain_api}/v1/artemis"), Some(TOKEN), None);
    assert_eq!(status, 404, "{error}");
    let (status, error) = request("GET", &format!("{plain_api}/v1/explain?address={taken}&client=198.51.100.7"), Some(TOKEN), None);
    assert_eq!((status, error["field"].as_str()), (400, Some("address")), "{error}");
}

#[test]
fn a_reload_applies_a_changed_artemis_section_and_refuses_a_bad_one_whole() {
    let taken = hashed("www.example.test");
    let (pharos, api) = start_with_artemis(&taken);
    let view = || request("GET", &format!("{api}/v1/artemis"), Some(TOKEN), None).1;
    let explain = |address: &str| request("GET", &format!("{api}/v1/explain?address={address}&client=198.51.100.7"), Some(TOKEN), None);
    let reload = || request("POST", &format!("{api}/v1/reload"), Some(TOKEN), None);
    let original = std::fs::read_to_string(&pharos.config).unwrap();

    // Another prefix, no conflict list, one more service.
    let changed = original
        .replace(&format!("prefix = \"{PREFIX}\""), "prefix = \"10.98.0.0/16\"")
        .replace(&format!("conflicts = \"svc.example.test {taken}\"\n"), "")
        .replace("services = [\"svc.example.test\",", "services = [\"new.example.test\", \"svc.example.test\",");
    std::fs::write(&pharos.config, &changed).unwrap();
    assert_eq!(reload().0, 200);
    let applied = view();
    assert_eq!(applied["prefix"], "10.98.0.0/16", "{applied}");
    assert_eq!(applied["problems"], serde_json::json!([]), "{applied}");
    let listed: Vec<(&str, &str)> = applied["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|service| (service["name"].as_str().unwrap(), service["address"].as_str().unwrap()))
        .collect();
    let svc = hashed_under("10.98.0.0/16", "svc.example.test");
    assert!(listed.contains(&("new.example.test", hashed_under("10.98.0.0/16", "new.example.test").as_str())), "{listed:?}");
    assert!(listed.contains(&("svc.example.test", svc.as_str())), "{listed:?}");
    let (status, explained) = explain(&svc);
    assert_eq!((status, explained["artemis"]["service"].as_str()), (200, Some("svc.example.test")), "the dispatcher's view: {explained}");
    assert_eq!(explain(&taken).0, 404, "the conflict-list address is gone");

    // A prefix with host bits: refused, named, and nothing changes.
    std::fs::write(&pharos.config, changed.replace("10.98.0.0/16", "10.98.0.1/16")).unwrap();
    let (status, error) = reload();
    assert_eq!(status, 422, "{error}");
    assert!(error["error"].as_str().unwrap().contains("[artemis] prefix"), "{error}");
    assert_eq!(view(), applied, "the refused section changed nothing");
    assert_eq!(explain(&svc).0, 200);
}
