//! What the tests share: UPDATE messages written record by record, and a
//! zone's records read from zone-file text as Pharos loads it.

pub use pharos_update::write::{Rr, rr};
use pharos_update::write::{update_message, update_message_with};
use pharos_wire::name::from_dotted;
use pharos_wire::types;
use pharos_zone::journal::Record;
use pharos_zone::parse_zone_text;
use pharos_zone::versions::file_records;

pub const CLASS_IN: u16 = types::CLASS_IN;
pub const ANY: u16 = types::CLASS_ANY;
pub const NONE: u16 = types::CLASS_NONE;

/// The origin of the zone most tests change.
pub const ORIGIN: &str = "example.test";

/// The zone most tests change.
pub const ZONE: &str = include_str!("../../../../tests/zones/update.test.zone");

/// The records of a zone loaded from `text` at `origin`, its SOA among
/// them, sorted.
pub fn zone_records(origin: &str, text: &str) -> Vec<Record> {
    let zone = parse_zone_text(origin, text, "test").expect("the test zone loads");
    let soa = zone.soa();
    let mut records = file_records(&zone).to_vec();
    records.push(Record { owner: zone.origin.clone(), rtype: types::SOA, rdata: soa.rdatas[0].clone(), ttl: soa.ttl });
    records.sort_unstable();
    records
}

pub fn name(text: &str) -> Vec<u8> {
    from_dotted(text).expect("a test name")
}

/// An A record added (class IN).
pub fn add_a(owner: &str, ttl: u32, address: [u8; 4]) -> Rr {
    rr(owner, types::A, CLASS_IN, ttl, &address)
}

/// SOA data of the test zone's form with `serial`.
pub fn soa(serial: u32) -> Vec<u8> {
    let mut data = [name("ns.example.test"), name("hostmaster.example.test")].concat();
    for value in [serial, 3600, 600, 86400, 300] {
        data.extend(value.to_be_bytes());
    }
    data
}

/// An UPDATE message for `zone` with these prerequisites and changes.
pub fn message(zone: &str, prerequisites: &[Rr], updates: &[Rr]) -> Vec<u8> {
    update_message(0x2136, zone, prerequisites, updates)
}

/// [`message`] with `additional` records' octets (`additional_count` of them).
pub fn message_with(zone: &str, prerequisites: &[Rr], updates: &[Rr], additional: &[u8], additional_count: u16) -> Vec<u8> {
    update_message_with(0x2136, zone, prerequisites, updates, additional, additional_count)
}
