//! Zones kept in the store against the real server: made empty or
//! imported through `pharos ctl`, changed by the records API, answered at
//! once, durable across a kill, hosting services, and every bad change
//! refused naming what is wrong while the zone keeps serving.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Output};
use std::time::Duration;

use domain::base::iana::{Opcode, Rcode, Rtype};
use domain::base::{Message, ParsedName};
use domain::rdata::Soa;
use serde_json::json;

use crate::common;
use common::*;

const TOKEN: &str = "test-token-0123";

fn start() -> (Pharos, String) {
    start_with_api(TOKEN, "[store]\npath = \"state.sqlite\"\n")
}

fn ctl(api: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", api, "--token", TOKEN]).args(args).output().unwrap()
}

/// `ctl`'s standard output, after checking that it succeeded.
fn ctl_ok(api: &str, args: &[&str]) -> String {
    let output = ctl(api, args);
    assert!(output.status.success(), "ctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The addresses answered for `name` A, with the rcode.
fn answer(pharos: &Pharos, name: &str) -> (Rcode, Vec<String>) {
    let response = udp_query(pharos.address, name, Rtype::A).expect("an answer");
    let addresses =
        response.answer().unwrap().limit_to::<domain::rdata::A>().map(|record| record.unwrap().data().addr().to_string()).collect();
    (response.header().rcode(), addresses)
}

#[test]
fn a_zone_made_through_ctl_is_answered_at_once_and_survives_a_kill() {
    let (pharos, api) = start();
    ctl_ok(&api, &["zone", "create", "other.test", "--ns", "ns1.other.test", "--ns", "ns2.example.net."]);
    ctl_ok(&api, &["zone", "set", "other.test", "www", "A", "192.0.2.7", "192.0.2.8", "--ttl", "60"]);
    ctl_ok(&api, &["zone", "set", "other.test", "ns1", "A", "192.0.2.53"]);
    assert_eq!(answer(&pharos, "www.other.test"), (Rcode::NOERROR, vec!["192.0.2.7".into(), "192.0.2.8".into()]));
    let listed = ctl_ok(&api, &["zone", "list"]);
    assert!(listed.lines().any(|line| line.split_whitespace().collect::<Vec<_>>() == ["other.test.", "store", "3", "no"]), "{listed}");
    assert!(listed.lines().any(|line| line.starts_with("example.test.") && line.contains(" file ")), "{listed}");
    let text = ctl_ok(&api, &["zone", "show", "other.test"]);
    assert!(text.starts_with("other.test. 3600 IN SOA ns1.other.test. hostmaster.other.test. 3 "), "{text}");
    assert!(text.contains("www.other.test. 60 IN A 192.0.2.7\n"), "{text}");
    let pharos = pharos.kill_and_restart();
    assert_eq!(answer(&pharos, "www.other.test"), (Rcode::NOERROR, vec!["192.0.2.7".into(), "192.0.2.8".into()]), "durable");
    ctl_ok(&api, &["zone", "unset", "other.test", "www", "A"]);
    assert_eq!(answer(&pharos, "www.other.test").0, Rcode::NXDOMAIN);
    let rrsets = ctl_ok(&api, &["zone", "rrsets", "other.test"]);
    assert!(rrsets.contains("ns1.other.test. 3600 IN A 192.0.2.53"), "{rrsets}");
    ctl_ok(&api, &["zone", "delete", "other.test"]);
    assert_eq!(answer(&pharos, "www.other.test").0, Rcode::REFUSED, "not served any more");
}

#[test]
fn a_zone_imported_from_a_file_hosts_a_service_whose_name_the_records_api_may_not_take() {
    let (pharos, api) = start();
    let file = pharos._dir.path().join("imported.zone");
    std::fs::write(&file, "$TTL 300\n@ SOA ns hostmaster 2026120700 7200 3600 1209600 60\n@ NS ns\nns A 192.0.2.53\nmail A 192.0.2.25\n")
        .unwrap();
    ctl_ok(&api, &["zone", "create", "imported.test", "--file", file.to_str().unwrap()]);
    assert_eq!(answer(&pharos, "mail.imported.test"), (Rcode::NOERROR, vec!["192.0.2.25".into()]));
    let service = json!({"name": "app.imported.test", "policy": "round-robin", "ttl": 30,
        "replica": [{"id": "a", "address": "192.0.2.100"}]});
    let (status, reply) = request("PUT", &format!("{api}/v1/services/app.imported.test"), Some(TOKEN), Some(service));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(answer(&pharos, "app.imported.test"), (Rcode::NOERROR, vec!["192.0.2.100".into()]));
    let taken = ctl(&api, &["zone", "set", "imported.test", "app", "A", "192.0.2.9"]);
    let error = String::from_utf8_lossy(&taken.stderr);
    assert!(!taken.status.success() && error.contains("app.imported.test"), "{error}");
    let held = ctl(&api, &["zone", "delete", "imported.test"]);
    assert!(!held.status.success(), "a zone with a service in it stays: {}", String::from_utf8_lossy(&held.stdout));
    assert_eq!(answer(&pharos, "app.imported.test"), (Rcode::NOERROR, vec!["192.0.2.100".into()]));
}

#[test]
fn bad_zones_and_bad_changes_are_refused_naming_what_is_wrong_and_change_nothing() {
    let (pharos, api) = start();
    let zones = format!("{api}/v1/zones");
    let refused = |body: serde_json::Value| request("POST", &zones, Some(TOKEN), Some(body));
    let (status, reply) = refused(json!({"name": "bad.test", "text": "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nwww A 300.1.2.3\n"}));
    assert_eq!(status, 422, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("line:4: expected IPv4 address"), "the line is named: {reply}");
    let (status, reply) = refused(json!({"name": "bad.test", "text": "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n$INCLUDE /etc/passwd\n"}));
    assert!(status == 422 && reply["error"].as_str().unwrap().contains("$INCLUDE is refused"), "{reply}");
    let (status, reply) = refused(json!({"name": "example.test", "nameservers": ["ns.example.test"]}));
    assert!(status == 422 && reply["error"].as_str().unwrap().contains("zone file"), "a file serves it: {reply}");
    assert_eq!(refused(json!({"name": "empty.test"})).0, 422, "no name servers");
    ctl_ok(&api, &["zone", "create", "good.test", "--ns", "ns.good.test"]);
    let before = ctl_ok(&api, &["zone", "show", "good.test"]);
    let rrsets = format!("{api}/v1/zones/good.test/rrsets");
    let change = |body: serde_json::Value| request("PATCH", &rrsets, Some(TOKEN), Some(body));
    for (body, expected) in [
        (
            json!([{"name": "a.good.test.", "type": "A", "ttl": 60, "records": ["192.0.2.1"]},
                {"name": "a.good.test.", "type": "CNAME", "ttl": 60, "records": ["b.good.test."]}]),
            "CNAME",
        ),
        (json!([{"name": "good.test.", "type": "SOA", "ttl": 60, "records": []}]), "SOA cannot be deleted"),
        (json!([{"name": "x.other.test.", "type": "A", "ttl": 60, "records": ["192.0.2.1"]}]), "not inside zone"),
        (json!([{"name": "good.test.", "type": "NS", "ttl": 60, "records": []}]), "NS"),
    ] {
        let (status, reply) = change(body);
        assert_eq!(status, 422, "{reply}");
        assert!(reply["error"].as_str().unwrap().contains(expected), "{expected}: {reply}");
    }
    assert_eq!(ctl_ok(&api, &["zone", "show", "good.test"]), before, "nothing changed");
    assert_eq!(answer(&pharos, "ns.good.test").0, Rcode::NXDOMAIN, "the zone still serves");
}

/// The serial of the NOTIFY `secondary` receives next (within 10 s).
fn notified_serial(secondary: &UdpSocket) -> u32 {
    let mut buffer = vec![0; 1024];
    let (len, _) = secondary.recv_from(&mut buffer).expect("a NOTIFY within 10 s");
    buffer.truncate(len);
    let message = Message::from_octets(buffer).unwrap();
    assert_eq!(message.header().opcode(), Opcode::NOTIFY);
    let soa = message.answer().unwrap().limit_to::<Soa<ParsedName<_>>>().next().unwrap().unwrap();
    assert_eq!(soa.owner().to_string(), "other.test");
    soa.data().serial().into_int()
}

fn kdig(kdig: &std::path::Path, server: SocketAddr, args: &[&str]) -> String {
    let output = Command::new(kdig).arg(format!("@{}", server.ip())).args(["-p", &server.port().to_string()]).args(args).output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_store_zone_is_transferred_by_ixfr_and_notified_as_store_zones_says() {
    let Some(kdig_path) = require("kdig", "knot-dnsutils") else { return };
    let secondary = UdpSocket::bind("127.0.0.1:0").unwrap();
    secondary.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let settings = format!(
        "[store]\npath = \"state.sqlite\"\n[store_zones]\nallow_transfer = [\"127.0.0.1/32\"]\nnotify = [\"{}\"]\n",
        secondary.local_addr().unwrap()
    );
    let (pharos, api) = start_with_api(TOKEN, &settings);
    ctl_ok(&api, &["zone", "create", "other.test", "--ns", "ns1.other.test"]);
    assert_eq!(notified_serial(&secondary), 1, "a new zone is announced");
    ctl_ok(&api, &["zone", "set", "other.test", "www", "A", "192.0.2.7"]);
    assert_eq!(notified_serial(&secondary), 2);
    ctl_ok(&api, &["zone", "set", "other.test", "www", "A", "192.0.2.8"]);
    assert_eq!(notified_serial(&secondary), 3);
    let whole = kdig(&kdig_path, pharos.address, &["other.test", "AXFR", "+noall", "+answer"]);
    assert!(whole.contains("www.other.test.") && whole.contains("192.0.2.8") && !whole.contains("192.0.2.7"), "{whole}");
    let difference = kdig(&kdig_path, pharos.address, &["other.test", "IXFR=1", "+noall", "+answer"]);
    let lines: Vec<&str> = difference.lines().filter(|line| !line.trim().is_empty() && !line.starts_with(';')).collect();
    // Condensed from serial 1 to 3: SOA 3; SOA 1, nothing gone; SOA 3, the A added; SOA 3.
    assert_eq!(lines.len(), 5, "{difference}");
    assert!(lines[1].contains(" 1 3600 ") && lines[3].ends_with("192.0.2.8") && !difference.contains("192.0.2.7"), "{difference}");
    let refused = kdig(&kdig_path, pharos.address, &["-b", "127.0.0.2", "other.test", "AXFR"]);
    assert!(refused.contains("REFUSED") || !refused.contains("192.0.2.8"), "127.0.0.2 is not listed: {refused}");
}
