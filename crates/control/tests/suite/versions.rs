//! A zone's serial and routed changes: a zone some client may transfer
//! gets a new serial when a service's replica set in it changes (its
//! secondaries must see it), and is frozen again; a zone nobody may
//! transfer keeps its serial and its frozen answers, so a change costs
//! what it changes rather than re-encoding every answer of the zone.

use std::sync::Arc;

use pharos_answer::{Settings, Snapshot, TransferAcl};
use pharos_control::build::DataSources;
use pharos_control::snapshot::SnapshotBuilder;
use pharos_model::spec::{Declared, ReplicaSpec, ServiceSpec};
use pharos_model::zone::ZoneSpec;
use pharos_route::prefix::prefix_set;
use pharos_zone::parse_zone_text;

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 7 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n";
const ORIGIN: &[u8] = b"\x07example\x04test\x00";

/// Builds and keeps the snapshot of www.example.test answered by `address`.
fn publish(builder: &mut SnapshotBuilder, address: &str) -> Snapshot {
    let services = [Arc::new(ServiceSpec::new("www.example.test", "round-robin", vec![ReplicaSpec::new("a", address.parse().unwrap())]))];
    let declared = Declared { services: &services, ..Declared::default() };
    let built = builder.build(&declared, &DataSources::default()).expect("the declarations build");
    builder.keep(built)
}

/// The serial example.test serves in `snapshot`.
fn serial(snapshot: &Snapshot) -> u32 {
    let soa = &snapshot.zones.zone_for(ORIGIN).unwrap().soa().rdatas[0];
    // After the two names (uncompressed in zone data): ns.example.test, hostmaster.example.test.
    let serial_at = soa.len() - 20;
    u32::from_be_bytes(soa[serial_at..serial_at + 4].try_into().unwrap())
}

/// Two replica changes through a builder with `settings`: the serials
/// served, and whether the zones were frozen again for each change.
fn serials_through_changes(settings: Settings) -> (Vec<u32>, Vec<bool>) {
    let zone = parse_zone_text("example.test", ZONE, "test").unwrap();
    let mut builder = SnapshotBuilder::new(vec![zone], settings);
    let mut snapshots = vec![publish(&mut builder, "192.0.2.10")];
    for address in ["192.0.2.11", "192.0.2.12"] {
        snapshots.push(publish(&mut builder, address));
    }
    let refrozen = snapshots.windows(2).map(|pair| !Arc::ptr_eq(&pair[0].zones, &pair[1].zones)).collect();
    (snapshots.iter().map(serial).collect(), refrozen)
}

#[test]
fn a_transferred_zone_moves_its_serial_with_its_replica_sets() {
    let allowed = prefix_set("allow_transfer", &["192.0.2.53/32".to_string()]).unwrap();
    let settings = Settings { transfer_acls: vec![TransferAcl { zone: ORIGIN.into(), allowed, keys: Vec::new() }], ..Settings::default() };
    assert_eq!(serials_through_changes(settings), (vec![7, 8, 9], vec![true, true]));
}

#[test]
fn a_zone_nobody_transfers_keeps_its_serial_and_its_frozen_answers() {
    assert_eq!(serials_through_changes(Settings::default()), (vec![7, 7, 7], vec![false, false]));
}

/// Builds and keeps a snapshot serving `zones` from the store and a
/// service inside the first, or the error that refused it.
fn publish_stored(builder: &mut SnapshotBuilder, zones: &[Arc<ZoneSpec>]) -> Result<Snapshot, pharos_model::ControlError> {
    let services =
        [Arc::new(ServiceSpec::new("www.other.test", "round-robin", vec![ReplicaSpec::new("a", "192.0.2.10".parse().unwrap())]))];
    let declared = Declared { services: &services, zones, ..Declared::default() };
    let built = builder.build(&declared, &DataSources::default())?;
    Ok(builder.keep(built))
}

fn stored(name: &str, serial: u32, address: &str) -> Arc<ZoneSpec> {
    let text = format!("@ 300 SOA ns hostmaster {serial} 7200 3600 1209600 60\n@ 300 NS ns\nns 300 A {address}\n");
    Arc::new(ZoneSpec { name: name.into(), text })
}

#[test]
fn a_store_zone_is_served_beside_the_files_and_each_text_is_a_version() {
    const OTHER: &[u8] = b"\x05other\x04test\x00";
    let file_zone = parse_zone_text("example.test", ZONE, "test").unwrap();
    let mut builder = SnapshotBuilder::new(vec![file_zone], Settings::default());
    let first = publish_stored(&mut builder, &[stored("other.test.", 40, "192.0.2.1")]).unwrap();
    assert!(first.zones.zone_for(OTHER).is_some() && first.zones.zone_for(ORIGIN).is_some());
    assert!(first.routes.services.iter().any(|(name, _)| &name[..] == b"\x03www\x05other\x04test\x00"), "a service lives in it");
    let same = publish_stored(&mut builder, &[stored("other.test.", 40, "192.0.2.1")]).unwrap();
    assert!(Arc::ptr_eq(&first.zones, &same.zones), "an unchanged text is neither parsed nor frozen again");
    let changed = publish_stored(&mut builder, &[stored("other.test.", 41, "192.0.2.2")]).unwrap();
    let soa = &changed.zones.zone_for(OTHER).unwrap().soa().rdatas[0];
    assert_eq!(u32::from_be_bytes(soa[soa.len() - 20..soa.len() - 16].try_into().unwrap()), 41);
    let gone = publish_stored(&mut builder, &[]).unwrap_err();
    assert!(gone.to_string().contains("www.other.test"), "its service has no zone left: {gone}");
}

#[test]
fn a_store_zone_that_does_not_read_or_that_a_file_serves_is_refused_by_name() {
    let file_zone = parse_zone_text("example.test", ZONE, "test").unwrap();
    let mut builder = SnapshotBuilder::new(vec![file_zone], Settings::default());
    let broken = Arc::new(ZoneSpec { name: "other.test.".into(), text: "@ 300 A 192.0.2.1\n".into() });
    let error = publish_stored(&mut builder, &[broken]).unwrap_err().to_string();
    assert!(error.contains("zone[other.test.]") && error.contains("SOA"), "{error}");
    let twice = publish_stored(&mut builder, &[stored("other.test.", 1, "192.0.2.1"), stored("example.test.", 1, "192.0.2.1")]);
    let error = twice.unwrap_err().to_string();
    assert!(error.contains("zone[example.test.]") && error.contains("zone file"), "{error}");
}
