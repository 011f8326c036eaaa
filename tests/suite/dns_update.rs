//! DNS UPDATE (RFC 2136) against the real server with the clients
//! operators use: `knsupdate` (knot-dnsutils) and `nsupdate`
//! (bind9-dnsutils), signed with TSIG, over UDP and TCP, into a zone the
//! store keeps: each update answered once committed and served, every
//! refusal (a wrong key, a rule that does not cover the change, a file
//! zone, a service's name, a prerequisite that fails) changing nothing,
//! and the zone's changes surviving a kill. (Each kind of prerequisite
//! and update, against Knot DNS, is crates/update's tests/suite/knot.rs.)

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use domain::base::iana::{Rcode, Rtype};
use serde_json::json;

use crate::common;
use common::*;

const TOKEN: &str = "test-token-0123";
const DDNS_SECRET: &str = "c2VjcmV0IG9mIHRoZSBkZG5zIGtleSwgMzIgb2N0ZXRzIQ==";
const ACME_SECRET: &str = "dGhlIGFjbWUga2V5J3Mgc2VjcmV0LCBhbHNvIDMyIG9jdGV0cw==";

/// A server keeping dyn.test in its store, where key `ddns` may change
/// anything and key `acme` only ACME challenges.
fn start() -> (Pharos, String) {
    let config = format!(
        "[store]\npath = \"state.sqlite\"\n\
         [[tsig_key]]\nname = \"ddns\"\nsecret = \"{DDNS_SECRET}\"\n\
         [[tsig_key]]\nname = \"acme\"\nsecret = \"{ACME_SECRET}\"\n\
         [[store_zones.update]]\nkey = \"ddns\"\nat_or_below = \"dyn.test.\"\n\
         [[store_zones.update]]\nkey = \"acme\"\nat_or_below = \"dyn.test.\"\nacme_only = true\n"
    );
    let (pharos, api) = start_with_api(TOKEN, &config);
    let zone = json!({"name": "dyn.test", "nameservers": ["ns1.dyn.test"]});
    let (status, reply) = request("POST", &format!("{api}/v1/zones"), Some(TOKEN), Some(zone));
    assert_eq!(status, 201, "{reply}");
    (pharos, api)
}

/// Runs `client` (knsupdate or nsupdate) with `args`, the script's
/// commands after `server` and `zone dyn.test.`, ending with `send`: its output.
fn run(client: &Path, args: &[&str], server: SocketAddr, commands: &str) -> String {
    run_in(client, args, server, "dyn.test.", commands)
}

/// [`run`] for `zone`.
fn run_in(client: &Path, args: &[&str], server: SocketAddr, zone: &str, commands: &str) -> String {
    let mut child = Command::new(client).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let script = format!("server {} {}\nzone {zone}\n{commands}\nsend\nquit\n", server.ip(), server.port());
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The addresses answered for `name` A, with the RCODE.
fn addresses(pharos: &Pharos, name: &str) -> (Rcode, Vec<String>) {
    let response = udp_query(pharos.address, name, Rtype::A).expect("an answer");
    let found = response.answer().unwrap().limit_to::<domain::rdata::A>().map(|record| record.unwrap().data().addr().to_string());
    (response.header().rcode(), found.collect())
}

fn zone_text(api: &str) -> String {
    let output =
        Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", api, "--token", TOKEN, "zone", "show", "dyn.test"]).output();
    String::from_utf8_lossy(&output.unwrap().stdout).into_owned()
}

#[test]
fn knsupdate_and_nsupdate_change_a_store_zone_with_tsig_and_the_change_survives_a_kill() {
    let (Some(knsupdate), Some(nsupdate)) = (require("knsupdate", "knot-dnsutils"), require("nsupdate", "bind9-dnsutils")) else { return };
    let (pharos, api) = start();
    let ddns = ["-y", &format!("hmac-sha256:ddns:{DDNS_SECRET}")];
    let said = run(&knsupdate, &ddns, pharos.address, "update add host.dyn.test. 60 A 192.0.2.44");
    assert!(!said.contains("ERROR") && !said.contains("failed"), "{said}");
    assert_eq!(addresses(&pharos, "host.dyn.test"), (Rcode::NOERROR, vec!["192.0.2.44".to_string()]), "served once answered");
    // A prerequisite that fails changes nothing: the name exists.
    let said = run(&knsupdate, &ddns, pharos.address, "prereq nxdomain host.dyn.test.\nupdate add host.dyn.test. 60 A 192.0.2.45");
    assert!(said.contains("YXDOMAIN"), "{said}");
    // nsupdate over TCP (-v), replacing the RRset.
    let replace = "update delete host.dyn.test. A\nupdate add host.dyn.test. 60 A 192.0.2.46";
    let said = run(&nsupdate, &["-v", "-y", &format!("hmac-sha256:ddns:{DDNS_SECRET}")], pharos.address, replace);
    assert!(!said.contains("failed") && !said.to_lowercase().contains("error"), "{said}");
    assert_eq!(addresses(&pharos, "host.dyn.test"), (Rcode::NOERROR, vec!["192.0.2.46".to_string()]));
    let text = zone_text(&api);
    assert!(text.starts_with("dyn.test. 3600 IN SOA ns1.dyn.test. hostmaster.dyn.test. 3 "), "two changes, two serials: {text}");
    let events = request("GET", &format!("{api}/v1/events"), Some(TOKEN), None).1.to_string();
    assert!(events.contains("zone dyn.test. put by UPDATE signed with key ddns from 127.0.0.1"), "the log says who: {events}");
    let pharos = pharos.kill_and_restart();
    assert_eq!(addresses(&pharos, "host.dyn.test"), (Rcode::NOERROR, vec!["192.0.2.46".to_string()]), "durable");
}

#[test]
fn every_refusal_says_why_and_changes_nothing() {
    let Some(knsupdate) = require("knsupdate", "knot-dnsutils") else { return };
    let (pharos, api) = start();
    let service = json!({"name": "app.dyn.test", "policy": "round-robin", "ttl": 30, "replica": [{"id": "a", "address": "192.0.2.100"}]});
    let (status, reply) = request("PUT", &format!("{api}/v1/services/app.dyn.test"), Some(TOKEN), Some(service));
    assert_eq!(status, 200, "{reply}");
    let before = zone_text(&api);
    let ddns = format!("hmac-sha256:ddns:{DDNS_SECRET}");
    let acme = format!("hmac-sha256:acme:{ACME_SECRET}");
    let wrong = format!("hmac-sha256:ddns:{ACME_SECRET}");
    for (key, commands, expected) in [
        (&wrong, "update add host.dyn.test. 60 A 192.0.2.9", "BADSIG"),
        (&acme, "update add host.dyn.test. 60 A 192.0.2.9", "REFUSED"),
        (&acme, "update add _acme-challenge.host.dyn.test. 60 A 192.0.2.9", "REFUSED"),
        (&ddns, "update add app.dyn.test. 60 A 192.0.2.9", "REFUSED"),
        (&ddns, "update delete dyn.test. SOA", "NOERROR"),
        (&ddns, "update add host.dyn.test. 60 NSEC host2.dyn.test. A", "REFUSED"),
        (&ddns, "prereq yxrrset host.dyn.test. A\nupdate add host.dyn.test. 60 A 192.0.2.9", "NXRRSET"),
    ] {
        let said = run(&knsupdate, &["-y", key], pharos.address, commands);
        let succeeded = !said.contains("ERROR") && !said.contains("failed");
        match expected {
            "NOERROR" => assert!(succeeded, "{commands}: {said}"),
            refusal => assert!(said.contains(refusal), "{commands} should be {refusal}: {said}"),
        }
        assert_eq!(zone_text(&api), before, "{commands} changed nothing");
    }
    let unsigned = run(&knsupdate, &[], pharos.address, "update add host.dyn.test. 60 A 192.0.2.9");
    assert!(unsigned.contains("REFUSED"), "no rule is for unsigned updates: {unsigned}");
    let challenge = "update add _acme-challenge.host.dyn.test. 60 TXT \"token\"";
    let said = run(&knsupdate, &["-y", &acme], pharos.address, challenge);
    assert!(!said.contains("ERROR"), "the acme key sets its challenge: {said}");
    assert!(zone_text(&api).contains("_acme-challenge.host.dyn.test. 60 IN TXT \"token\""), "{}", zone_text(&api));
    let said = run_in(&knsupdate, &["-y", &ddns], pharos.address, "example.test.", "update add new.example.test. 60 A 192.0.2.9");
    assert!(said.contains("REFUSED"), "a file zone is not changed by UPDATE: {said}");
    assert_eq!(addresses(&pharos, "new.example.test").0, Rcode::NXDOMAIN);
}
