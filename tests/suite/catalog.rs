//! Pharos as a catalog zone producer (RFC 9432) against the real thing:
//! knotd, configured only with Pharos's catalog (`catalog-role:
//! interpret`), transfers it and then every zone it lists, and answers
//! them; a zone made through the API is answered by knotd after the
//! catalog's NOTIFY, and one deleted stops being served. kdig's AXFR of
//! the catalog holds what the RFC asks, and each member's id stays the
//! same across a restart of Pharos.
//!
//! Without knotd or kdig the test prints SKIP and passes, unless CI is
//! set, where it fails.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::transfer::{Running, run};
use common::{Pharos, free_port, request, require, spawn_at_with, udp_query, wait_until};
use domain::base::iana::{Rcode, Rtype};
use serde_json::json;

const TOKEN: &str = "test-token-0123";
const CATALOG: &str = "catalog.pharos.test.";

/// knotd, a consumer of Pharos's catalog, and where it answers.
struct Knot {
    running: Running,
    address: SocketAddr,
}

impl Knot {
    /// Whether knotd answers `name`'s `rtype` with data; fails at once,
    /// with its log, if it exited.
    fn answers(&mut self, name: &str, rtype: Rtype) -> bool {
        if let Ok(Some(status)) = self.running.child.try_wait() {
            panic!("knotd exited ({status}):\n{}", self.running.log());
        }
        udp_query(self.address, name, rtype)
            .is_some_and(|response| response.header().rcode() == Rcode::NOERROR && response.header_counts().ancount() > 0)
    }
}

/// knotd on `port`, a consumer of Pharos's catalog at `pharos`: its
/// members are fetched from Pharos too, NOTIFYs from loopback taken.
fn start_knot(knotd: &Path, port: u16, pharos: SocketAddr) -> Knot {
    let dir = tempfile::Builder::new().prefix("catalog-knot-").tempdir().unwrap();
    let d = dir.path().display();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  background-workers: 1\n\
         database:\n  storage: \"{d}/db\"\n\
         log:\n  - target: stderr\n    any: info\n\
         remote:\n  - id: pharos\n    address: {}@{}\n\
         acl:\n  - id: notify_from_pharos\n    address: 127.0.0.0/8\n    action: notify\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n\
         \x20 - id: member\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n    master: pharos\n    acl: notify_from_pharos\n\
         zone:\n  - domain: {CATALOG}\n    master: pharos\n    acl: notify_from_pharos\n    catalog-role: interpret\n    catalog-template: member\n",
        pharos.ip(),
        pharos.port(),
    );
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    // knotd keeps what it learnt of the catalog there, and does not make it.
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let mut command = Command::new(knotd);
    command.arg("-c").arg(dir.path().join("knot.conf"));
    Knot { running: run(command, dir), address: SocketAddr::from(([127, 0, 0, 1], port)) }
}

/// Pharos on `address` with the API, a store, example.test from a file,
/// and the catalog listing every zone; all transferred to loopback and
/// NOTIFYs sent to `knot`.
fn start_pharos(address: SocketAddr, knot: SocketAddr) -> (Pharos, String) {
    let api = format!("127.0.0.1:{}", free_port());
    let transfers = format!("allow_transfer = [\"127.0.0.0/8\"]\nnotify = [\"{knot}\"]\n");
    let extra = format!(
        "[control]\nlisten = \"{api}\"\ntoken = \"{TOKEN}\"\n[store]\npath = \"state.sqlite\"\n\
         [store_zones]\n{transfers}[catalog]\nzone = \"{CATALOG}\"\n{transfers}"
    );
    let pharos = spawn_at_with(address, &extra, common::ZONE, |_| {});
    // The file zone is transferred too: its table, written last, gets the
    // same lines, and the server started on the file without them is
    // started again on it.
    let config = std::fs::read_to_string(&pharos.config).unwrap() + &transfers;
    std::fs::write(&pharos.config, config).unwrap();
    (pharos.kill_and_restart(), format!("http://{api}"))
}

/// What `kdig` prints for `args` against `server`, comments and blank
/// lines left out.
fn kdig(kdig: &Path, server: SocketAddr, args: &[&str]) -> Vec<String> {
    let output = Command::new(kdig).arg(format!("@{}", server.ip())).args(["-p", &server.port().to_string()]).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with(';'))
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The catalog's records by kdig's AXFR (owner, type, data), its SOA
/// first and last as RFC 5936 has it, checked against RFC 9432: TTLs,
/// `NS invalid.`, version "2", each member a PTR below `zones` whose id
/// is one label. Returns the members' (owner, target), sorted.
fn catalog_members(kdig_path: &Path, pharos: SocketAddr) -> Vec<(String, String)> {
    let lines = kdig(kdig_path, pharos, &[CATALOG, "AXFR"]);
    let records: Vec<Vec<&str>> = lines.iter().map(|line| line.split(' ').collect()).collect();
    assert!(records.len() >= 5, "{lines:#?}");
    let (first, last) = (&records[0], &records[records.len() - 1]);
    assert_eq!(first, last, "the AXFR begins and ends with the SOA");
    assert_eq!(first[..6], [CATALOG, "0", "IN", "SOA", "invalid.", "invalid."], "{lines:#?}");
    let inner = &records[1..records.len() - 1];
    assert!(inner.iter().any(|record| *record == [CATALOG, "0", "IN", "NS", "invalid."]), "{lines:#?}");
    let version = format!("version.{CATALOG}");
    assert!(inner.iter().any(|record| *record == [version.as_str(), "0", "IN", "TXT", "\"2\""]), "{lines:#?}");
    let suffix = format!(".zones.{CATALOG}");
    let mut members: Vec<(String, String)> = Vec::new();
    for record in inner.iter().filter(|record| record[3] == "PTR") {
        let id = record[0].strip_suffix(&suffix).unwrap_or_else(|| panic!("a member outside zones: {record:?}"));
        assert!(!id.is_empty() && !id.contains('.'), "an id is one label: {record:?}");
        members.push((record[0].to_owned(), record[4].to_owned()));
    }
    assert_eq!(inner.len(), 2 + members.len(), "only the SOA, NS, version and members: {lines:#?}");
    members.sort();
    let mut targets: Vec<&str> = members.iter().map(|(_, target)| target.as_str()).collect();
    targets.dedup();
    assert_eq!(targets.len(), members.len(), "each zone once: {members:?}");
    members
}

fn targets(members: &[(String, String)]) -> Vec<&str> {
    let mut targets: Vec<&str> = members.iter().map(|(_, target)| target.as_str()).collect();
    targets.sort();
    targets
}

#[test]
fn knot_consumes_the_catalog_and_follows_zones_made_and_deleted_through_the_api() {
    let (Some(knotd), Some(kdig_path)) = (require("knotd", "knot"), require("kdig", "knot-dnsutils")) else { return };
    let (pharos_address, knot_port) = (SocketAddr::from(([127, 0, 0, 1], free_port())), free_port());
    let knot_address = SocketAddr::from(([127, 0, 0, 1], knot_port));
    let (pharos, api) = start_pharos(pharos_address, knot_address);
    let (status, reply) =
        request("POST", &format!("{api}/v1/zones"), Some(TOKEN), Some(json!({"name": "first.test", "nameservers": ["ns.first.test"]})));
    assert_eq!(status, 201, "{reply}");
    let mut knot = start_knot(&knotd, knot_port, pharos_address);
    wait_until("knotd serves the catalog's members", || {
        knot.answers("www.example.test", Rtype::A) && knot.answers("first.test", Rtype::SOA)
    });
    let members = catalog_members(&kdig_path, pharos_address);
    assert_eq!(targets(&members), ["example.test.", "first.test."]);

    let rrsets = json!([{"name": "www.made.test.", "type": "A", "ttl": 60, "records": ["192.0.2.77"]}]);
    let (status, reply) =
        request("POST", &format!("{api}/v1/zones"), Some(TOKEN), Some(json!({"name": "made.test", "nameservers": ["ns.made.test"]})));
    assert_eq!(status, 201, "{reply}");
    let (status, reply) = request("PATCH", &format!("{api}/v1/zones/made.test/rrsets"), Some(TOKEN), Some(rrsets));
    assert!(status < 300, "{reply}");
    wait_until("knotd answers the zone made, after the catalog's NOTIFY", || knot.answers("www.made.test", Rtype::A));
    assert_eq!(targets(&catalog_members(&kdig_path, pharos_address)), ["example.test.", "first.test.", "made.test."]);

    let (status, reply) = request("DELETE", &format!("{api}/v1/zones/made.test"), Some(TOKEN), None);
    assert_eq!(status, 204, "{reply}");
    wait_until("knotd no longer serves the zone deleted", || {
        let response = udp_query(knot.address, "www.made.test", Rtype::A).expect("knotd answers");
        response.header().rcode() == Rcode::REFUSED
    });
    assert!(knot.answers("first.test", Rtype::SOA), "the other members stay:\n{}", knot.running.log());

    let pharos = pharos.kill_and_restart();
    assert_eq!(catalog_members(&kdig_path, pharos.address), members, "each member keeps its id across a restart");
}
