//! What the kernel can answer from a snapshot: every question whose reply
//! the zones built at load time, and which the program answers exactly as
//! `pharos_answer::respond` does; and, for one question, why it passes up
//! when it does.

use std::fmt;

use pharos_answer::Snapshot;
use pharos_wire::{rcode, types};
use pharos_zone::Lookup;

use crate::maps::{Answer, AnswerKey, MAX_BODY};

/// Asked of every name besides the types its answers single out: the
/// name's answer to any other type (NODATA, or a CNAME) serves them too.
const COMMON_TYPES: [u16; 7] = [types::A, types::AAAA, types::NS, types::SOA, types::MX, types::TXT, types::CNAME];

/// Why a static question is not answered from a pre-built reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotBuilt {
    ZoneTransfer,
    /// The name has no built answers, or is in no served zone.
    NotAName,
    /// A type the kernel holds no entry for at this name.
    OtherType,
    ExtendedRcode,
    Empty,
    TooLarge,
}

impl fmt::Display for NotBuilt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotBuilt::ZoneTransfer => "zone transfers are refused in user space",
            NotBuilt::NotAName => "the name has no answer built at load (no such name, a wildcard or no served zone): resolved per query",
            NotBuilt::OtherType => "the kernel holds this name's answers for A, AAAA, NS, SOA, MX, TXT, CNAME and the types it owns only",
            NotBuilt::ExtendedRcode => "the reply carries an extended RCODE or an extended error",
            NotBuilt::Empty => "the reply has no records after the question",
            NotBuilt::TooLarge => "reply larger than the kernel's 1024-octet limit",
        })
    }
}

/// Every question of class IN the kernel can answer, with its reply, in
/// generation 0. Left out, so they pass up: names a routing policy
/// answers, and the questions [`NotBuilt`] lists.
pub fn fill(snapshot: &Snapshot) -> Vec<(AnswerKey, Answer)> {
    let mut entries = Vec::new();
    for (name, singled_out) in snapshot.zones.built_names() {
        if snapshot.routes.service(name).is_some() {
            continue;
        }
        let mut qtypes: Vec<u16> = singled_out.chain(COMMON_TYPES).filter(|&qtype| !is_zone_transfer(qtype)).collect();
        qtypes.sort_unstable();
        qtypes.dedup();
        entries.extend(qtypes.into_iter().filter_map(|qtype| entry(snapshot, name, qtype).ok()));
    }
    entries
}

/// Whether [`fill`] installs `qtype` at `name` (lowercase wire form, not
/// a service), and why not. Scans the names: for explanations only.
pub fn static_entry(snapshot: &Snapshot, name: &[u8], qtype: u16) -> Result<(AnswerKey, Answer), NotBuilt> {
    if is_zone_transfer(qtype) {
        return Err(NotBuilt::ZoneTransfer);
    }
    let (_, mut singled_out) = snapshot.zones.built_names().find(|(owner, _)| *owner == name).ok_or(NotBuilt::NotAName)?;
    if !COMMON_TYPES.contains(&qtype) && !singled_out.any(|owned| owned == qtype) {
        return Err(NotBuilt::OtherType);
    }
    entry(snapshot, name, qtype)
}

fn is_zone_transfer(qtype: u16) -> bool {
    qtype == types::AXFR || qtype == types::IXFR
}

fn entry(snapshot: &Snapshot, name: &[u8], qtype: u16) -> Result<(AnswerKey, Answer), NotBuilt> {
    // Through the lookup the user-space path makes, so whatever it
    // resolves at query time (DS at a served child's apex) stays there.
    let Lookup::Built(body) = snapshot.zones.lookup(name, qtype, false) else {
        return Err(NotBuilt::NotAName);
    };
    if body.rcode > 0xF || body.rcode == rcode::YXDOMAIN {
        return Err(NotBuilt::ExtendedRcode);
    }
    match body.bytes.len() {
        0 => return Err(NotBuilt::Empty),
        len if len > MAX_BODY => return Err(NotBuilt::TooLarge),
        _ => {}
    }
    let counts = body.cuts.last().map_or([0; 3], |cut| cut.counts);
    let key = AnswerKey::new(name, qtype, types::CLASS_IN).ok_or(NotBuilt::NotAName)?;
    Ok((key, Answer::new(body.flags | body.rcode, counts, &body.bytes).ok_or(NotBuilt::TooLarge)?))
}
