//! UPDATE messages written record by record (RFC 2136 section 2), for
//! clients of Pharos's own: the tests that compare it with Knot DNS and
//! the load generators that measure it. Each record is given with the
//! class that says what it means (section 2.4 and 2.5), so a message
//! any client would refuse to write can be written too.

use pharos_wire::name::from_dotted;
use pharos_wire::{MessageWriter, types};

use crate::message::OPCODE_UPDATE;

/// One record of a prerequisite or update section, as sent.
#[derive(Debug, Clone)]
pub struct Rr {
    /// Dotted, absolute or not.
    pub owner: String,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    pub rdata: Vec<u8>,
}

pub fn rr(owner: &str, rtype: u16, class: u16, ttl: u32, rdata: &[u8]) -> Rr {
    Rr { owner: owner.into(), rtype, class, ttl, rdata: rdata.to_vec() }
}

/// An UPDATE of `zone` (class IN) with these prerequisites and changes.
/// Panics on a name that is not one: the caller writes its own.
pub fn update_message(id: u16, zone: &str, prerequisites: &[Rr], changes: &[Rr]) -> Vec<u8> {
    update_message_with(id, zone, prerequisites, changes, &[], 0)
}

/// [`update_message`] with `additional` records' octets after the
/// changes (`additional_count` of them).
pub fn update_message_with(id: u16, zone: &str, prerequisites: &[Rr], changes: &[Rr], additional: &[u8], additional_count: u16) -> Vec<u8> {
    let name = |text: &str| from_dotted(text).unwrap_or_else(|error| panic!("{text:?} is not a name: {error:?}"));
    let mut message = Vec::new();
    let mut writer = MessageWriter::new(&mut message);
    writer.set_id(id);
    writer.set_flags(u16::from(OPCODE_UPDATE) << 11);
    writer.set_counts([1, prerequisites.len() as u16, changes.len() as u16, additional_count]);
    writer.name(&name(zone));
    writer.u16(types::SOA);
    writer.u16(types::CLASS_IN);
    for record in prerequisites.iter().chain(changes) {
        writer.name(&name(&record.owner));
        writer.u16(record.rtype);
        writer.u16(record.class);
        writer.u32(record.ttl);
        writer.u16(record.rdata.len() as u16);
        writer.raw(&record.rdata);
    }
    writer.raw(additional);
    message
}
