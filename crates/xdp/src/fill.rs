//! What the kernel can answer from a snapshot: every question whose reply
//! the zones built at load time, and which the program answers exactly as
//! `pharos_answer::respond` does.

use pharos_answer::Snapshot;
use pharos_wire::{rcode, types};
use pharos_zone::Lookup;

use crate::maps::{Answer, AnswerKey};

/// Asked of every name besides the types its answers single out: the
/// name's answer to any other type (NODATA, or a CNAME) serves them too.
const COMMON_TYPES: [u16; 7] = [types::A, types::AAAA, types::NS, types::SOA, types::MX, types::TXT, types::CNAME];

/// Every question of class IN the kernel can answer, with its reply.
/// Left out, so they pass up: names a routing policy answers, zone
/// transfers, and replies that carry an extended RCODE or error (DNAME
/// substitutions too long) or are empty or larger than the map holds.
pub fn fill(snapshot: &Snapshot) -> Vec<(AnswerKey, Answer)> {
    let mut entries = Vec::new();
    for (name, singled_out) in snapshot.zones.built_names() {
        if snapshot.routes.service(name).is_some() {
            continue;
        }
        let mut qtypes: Vec<u16> = singled_out.chain(COMMON_TYPES).filter(|&qtype| qtype != types::AXFR && qtype != types::IXFR).collect();
        qtypes.sort_unstable();
        qtypes.dedup();
        entries.extend(qtypes.into_iter().filter_map(|qtype| entry(snapshot, name, qtype)));
    }
    entries
}

fn entry(snapshot: &Snapshot, name: &[u8], qtype: u16) -> Option<(AnswerKey, Answer)> {
    // Through the lookup the user-space path makes, so whatever it
    // resolves at query time (DS at a served child's apex) stays there.
    let Lookup::Built(body) = snapshot.zones.lookup(name, qtype) else {
        return None;
    };
    if body.rcode > 0xF || body.rcode == rcode::YXDOMAIN {
        return None;
    }
    let counts = body.cuts.last().map_or([0; 3], |cut| cut.counts);
    Some((AnswerKey::new(name, qtype, types::CLASS_IN)?, Answer::new(body.flags | body.rcode, counts, &body.bytes)?))
}
