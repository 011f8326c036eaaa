//! Two control planes sharing one PostgreSQL store (tests/suite/common/postgres.rs),
//! as two nodes of a fleet, the second never told of the first's changes: an edit that names what only
//! the first has declared is not refused by the second, which reads the
//! store's log before calling it invalid; one that names nothing declared
//! anywhere still is, and says why. Batches that notifications carried
//! are applied without a read while none is missing.

use crate::common;

use common::postgres::Postgres;
use pharos_model::Change;
use pharos_model::spec::{DataCenterSpec, ReplicaSpec, ServiceSpec};
use pharos_server::{Config, ControlShell};
use pharos_store::Batch;

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n";
const NOW: u64 = 1_800_000_000_000;

/// Two nodes over one new database (and the files and database they need
/// kept).
fn two_nodes() -> (tempfile::TempDir, Postgres, ControlShell, ControlShell) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("example.test.zone"), ZONE).unwrap();
    let database = Postgres::start();
    let url = database.create_database("pharos");
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[store]\nurl = \"{url}\"\n[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n"
    );
    std::fs::write(dir.path().join("pharos.toml"), config).unwrap();
    let (first, second) = (node(dir.path()), node(dir.path()));
    (dir, database, first, second)
}

/// A control plane over the config in `dir`, not following the store.
fn node(dir: &std::path::Path) -> ControlShell {
    ControlShell::open(Config::from_file(&dir.join("pharos.toml")).unwrap(), None, NOW).unwrap()
}

/// A service whose one replica is in data center `datacenter`.
fn service_in(datacenter: &str) -> Change {
    let mut replica = ReplicaSpec::new("a", "192.0.2.10".parse().unwrap());
    replica.datacenter = Some(datacenter.into());
    Change::PutService(ServiceSpec::new("www.example.test", "static", vec![replica]))
}

#[test]
fn an_edit_naming_what_another_node_just_declared_is_taken_after_reading_the_log() {
    let (_dir, _database, mut first, mut second) = two_nodes();
    let fra = DataCenterSpec { id: "fra".into(), latitude: 50.03, longitude: 8.57, asn: None };
    first.apply(&[Change::PutDataCenter(fra)], NOW).unwrap();
    second.apply(&[service_in("fra")], NOW).expect("fra is in the store's log");
    assert_eq!(second.state().services.len(), 1);
    let refused = second.apply(&[service_in("sin")], NOW).unwrap_err().to_string();
    assert!(refused.contains("no data center \"sin\" is declared"), "{refused}");
}

#[test]
fn batches_their_notifications_carried_are_applied_without_a_read_and_a_gap_is_read() {
    let (_dir, database, mut first, mut second) = two_nodes();
    let batches: Vec<(u64, Batch)> =
        (1..=4).map(|ttl| (ttl, Batch { changes: vec![service_with_ttl(ttl as u32)], authors: Vec::new() })).collect();
    for (_, batch) in &batches {
        first.apply(&batch.changes, NOW).unwrap();
    }
    assert_eq!(first.applied(), 4);
    database.stop();
    second.catch_up_notified(2, batches[..2].to_vec(), NOW).expect("nothing to read: both batches were carried");
    assert_eq!((second.applied(), second.state().services[0].ttl), (2, 2));
    let refused = second.catch_up_notified(4, batches[3..].to_vec(), NOW).expect_err("batch 3 is missing: read from the database");
    assert!(refused.to_string().contains("PostgreSQL"), "{refused}");
    assert_eq!(second.applied(), 2, "nothing applied past the gap");
    database.start_server();
    second.catch_up_notified(4, batches[3..].to_vec(), NOW).unwrap();
    assert_eq!((second.applied(), second.state()), (4, first.state()));
}

/// www.example.test answered with time to live `ttl`.
fn service_with_ttl(ttl: u32) -> Change {
    let service = ServiceSpec::new("www.example.test", "static", vec![ReplicaSpec::new("a", "192.0.2.10".parse().unwrap())]);
    Change::PutService(ServiceSpec { ttl, ..service })
}
