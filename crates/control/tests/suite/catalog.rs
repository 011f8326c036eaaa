//! The catalog zone through the snapshot builder: it lists the files'
//! and the store's zones as each build has them, so a store zone made or
//! deleted changes it in the same snapshot; its serial moves by one for
//! each change of the members and for nothing else; a store zone with
//! its name is refused.

use std::sync::Arc;

use pharos_answer::{Settings, Snapshot};
use pharos_control::build::DataSources;
use pharos_control::catalog::{Catalog, member_id};
use pharos_control::snapshot::SnapshotBuilder;
use pharos_model::spec::Declared;
use pharos_model::zone::{CatalogMembers, ZoneSpec};
use pharos_wire::{name, types};
use pharos_zone::journal::soa_serial;
use pharos_zone::parse_zone_text;

const FILE_ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 7 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n";
const CATALOG: &str = "catalog.pharos.test.";
/// 2023-11-14T22:13:20Z, in Unix milliseconds: the catalog's first serial.
const CONFIGURED_AT: u64 = 1_700_000_000_000;

fn builder(members: CatalogMembers) -> SnapshotBuilder {
    let file_zone = parse_zone_text("example.test", FILE_ZONE, "test").unwrap();
    let catalog = Catalog::new(CATALOG, members, CONFIGURED_AT).unwrap();
    SnapshotBuilder::new(vec![file_zone], Settings::default()).with_catalog(Some(catalog))
}

fn stored(name: &str, address: &str) -> Arc<ZoneSpec> {
    let text = format!("@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ 300 NS ns\nns 300 A {address}\n");
    Arc::new(ZoneSpec { name: name.into(), text })
}

fn publish(builder: &mut SnapshotBuilder, zones: &[Arc<ZoneSpec>]) -> Result<Snapshot, pharos_model::ControlError> {
    let built = builder.build(&Declared { zones, ..Declared::default() }, &DataSources::default())?;
    Ok(builder.keep(built))
}

/// The catalog's serial and members (PTR targets by owner) in `snapshot`.
fn catalog(snapshot: &Snapshot) -> (u32, Vec<(String, String)>) {
    let origin = name::from_dotted(CATALOG).unwrap();
    let zone = snapshot.zones.zone_for(&origin).filter(|zone| *zone.origin == *origin).expect("the catalog is served");
    let mut members = Vec::new();
    for (owner, node) in &zone.nodes {
        for rrset in node.rrsets.iter().filter(|rrset| rrset.rtype == types::PTR) {
            let target = rrset.rdatas.iter().map(|rdata| name::Display(rdata).to_string()).collect::<Vec<_>>().join(" ");
            members.push((name::Display(owner).to_string(), target));
        }
    }
    members.sort();
    (soa_serial(&zone.soa().rdatas[0]).unwrap(), members)
}

fn listed(name_text: &str) -> (String, String) {
    let id = member_id(&name::from_dotted(name_text).unwrap());
    (format!("{id}.zones.{CATALOG}"), name_text.to_owned())
}

#[test]
fn the_serial_moves_with_the_members_only() {
    let mut builder = builder(CatalogMembers::All);
    let (first, members) = catalog(&publish(&mut builder, &[]).unwrap());
    assert_eq!((first, members), (1_700_000_000, vec![listed("example.test.")]));
    let one = [stored("one.test.", "192.0.2.1")];
    let (serial, members) = catalog(&publish(&mut builder, &one).unwrap());
    let mut expected = vec![listed("example.test."), listed("one.test.")];
    expected.sort();
    assert_eq!((serial, members), (first + 1, expected.clone()), "a zone made is listed in the same snapshot");
    let changed = [stored("one.test.", "192.0.2.2")];
    assert_eq!(catalog(&publish(&mut builder, &changed).unwrap()), (first + 1, expected), "a member's records are not the catalog's");
    let (serial, members) = catalog(&publish(&mut builder, &[]).unwrap());
    assert_eq!((serial, members), (first + 2, vec![listed("example.test.")]), "a zone deleted leaves it");
}

#[test]
fn a_catalog_of_the_store_lists_only_its_zones() {
    let mut builder = builder(CatalogMembers::Store);
    assert_eq!(catalog(&publish(&mut builder, &[]).unwrap()).1, vec![]);
    assert_eq!(catalog(&publish(&mut builder, &[stored("one.test.", "192.0.2.1")]).unwrap()).1, vec![listed("one.test.")]);
}

#[test]
fn a_store_zone_named_as_the_catalog_is_refused_naming_both() {
    let mut builder = builder(CatalogMembers::All);
    let refused = publish(&mut builder, &[stored(CATALOG, "192.0.2.1")]).unwrap_err().to_string();
    assert!(refused.contains("zone (kept in the store) catalog.pharos.test.") && refused.contains("[catalog] zone"), "{refused}");
}
