//! Authoritative lookup: RFC 1034 section 4.3.2 with the later rules for
//! negative answers (RFC 2308), wildcards (RFC 4592), DNAME (RFC 6672),
//! ANY (RFC 8482) and the RCODE of a chain (RFC 6604).
//!
//! The result is an [`Answer`]: which RRsets go in which section, owned by
//! which name. Turning it into bytes is [`crate::encode`]'s job.

use std::borrow::Cow;

use pharos_wire::name::{self, MAX_NAME_LEN};
use pharos_wire::{rcode, types};

use crate::zone::{Node, Rrset, Zone};

/// A CNAME chain longer than this is cut short (and so is a loop).
const MAX_CHAIN: usize = 16;

/// The owner name of an RRset in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner<'z> {
    /// The name in the question, written back as the client spelled it.
    Question,
    /// A name stored in the zone (lowercase wire form).
    Stored(&'z [u8]),
    /// A name made for this answer: the target of a synthesized CNAME.
    Made(Box<[u8]>),
}

/// The records of one RRset in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Records<'z> {
    Stored(&'z Rrset),
    /// A CNAME synthesized from a DNAME (RFC 6672 section 3.1): its target.
    SynthesizedCname(Box<[u8]>),
}

/// One RRset placed in a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'z> {
    pub owner: Owner<'z>,
    pub rtype: u16,
    pub ttl: u32,
    pub records: Records<'z>,
    /// Whether leaving it out for lack of room must set TC. Everything in
    /// the answer and authority sections is required; in the additional
    /// section only glue below the delegation (RFC 9471).
    pub required: bool,
}

/// Sections in message order.
pub const ANSWER: usize = 0;
pub const AUTHORITY: usize = 1;
pub const ADDITIONAL: usize = 2;

/// What an authoritative server says to one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<'z> {
    pub rcode: u16,
    pub authoritative: bool,
    pub sections: [Vec<Entry<'z>>; 3],
}

/// Where a name led inside the zone.
enum Found<'z> {
    /// The name exists (possibly as an empty non-terminal).
    Exact(&'z [u8], &'z Node),
    /// The name does not exist but a wildcard at its closest encloser does.
    Wildcard(&'z Node),
    /// The name is at or below a zone cut: `(cut name, cut node)`.
    Delegation(&'z [u8], &'z Node),
    /// The name is below a DNAME: `(DNAME owner, its node)`.
    Redirected(&'z [u8], &'z Node),
    NoSuchName,
}

/// What to do after one name of a chain has been answered.
enum Next {
    Done,
    Follow(Vec<u8>),
}

impl<'z> Answer<'z> {
    fn new() -> Self {
        Answer { rcode: rcode::NOERROR, authoritative: true, sections: Default::default() }
    }

    fn push(&mut self, section: usize, owner: Owner<'z>, rrset: &'z Rrset, ttl: u32, required: bool) {
        self.sections[section].push(Entry { owner, rtype: rrset.rtype, ttl, records: Records::Stored(rrset), required });
    }

    fn has_additional(&self, owner: &[u8]) -> bool {
        self.sections[ADDITIONAL].iter().any(|entry| entry.owner == Owner::Stored(owner))
    }
}

/// Answers `qtype` for `qname` (lowercase wire form, at or below the zone's
/// origin) from `zone`.
pub fn resolve<'z>(zone: &'z Zone, qname: &[u8], qtype: u16) -> Answer<'z> {
    let mut answer = Answer::new();
    let mut current: Cow<'_, [u8]> = Cow::Borrowed(qname);
    let mut owner = Owner::Question;
    let mut visited: Vec<Vec<u8>> = Vec::new();
    loop {
        let next = match find(zone, &current, qtype) {
            Found::Exact(stored, node) => answer_node(&mut answer, zone, owner_or_stored(owner, stored), node, qtype),
            Found::Wildcard(node) => answer_node(&mut answer, zone, owner, node, qtype),
            Found::Delegation(cut, node) => {
                refer(&mut answer, zone, cut, node);
                Next::Done
            }
            Found::Redirected(dname_owner, node) => redirect(&mut answer, owner, &current, dname_owner, node),
            Found::NoSuchName => {
                answer.rcode = rcode::NXDOMAIN;
                add_negative_soa(&mut answer, zone);
                Next::Done
            }
        };
        let Next::Follow(target) = next else { return answer };
        visited.push(current.into_owned());
        if !name::is_at_or_below(&target, &zone.origin) || visited.contains(&target) || visited.len() >= MAX_CHAIN {
            return answer;
        }
        owner = Owner::Made(target.clone().into());
        current = Cow::Owned(target);
    }
}

/// The first name of a chain keeps the client's spelling; later ones use
/// the stored name.
fn owner_or_stored<'z>(owner: Owner<'z>, stored: &'z [u8]) -> Owner<'z> {
    match owner {
        Owner::Question => Owner::Question,
        _ => Owner::Stored(stored),
    }
}

/// Walks down from the apex towards `name`, one label at a time, stopping
/// at the first zone cut or DNAME on the way (RFC 1034 4.3.2 step 3).
fn find<'z>(zone: &'z Zone, name: &[u8], qtype: u16) -> Found<'z> {
    let mut starts = [0usize; 128];
    let mut depth = 0;
    for start in name::label_offsets(name) {
        if name.len() - start < zone.origin.len() {
            break;
        }
        starts[depth] = start;
        depth += 1;
    }
    let mut encloser: &[u8] = &zone.origin;
    for &start in starts[..depth].iter().rev() {
        let suffix = &name[start..];
        let Some((stored, node)) = zone.nodes.get_key_value(suffix) else {
            return wildcard_at(zone, encloser);
        };
        let is_target = start == 0;
        // DS belongs to the parent side of a cut (RFC 4035 section 3.1.4.1).
        if zone.is_cut(stored, node) && !(is_target && qtype == types::DS) {
            return Found::Delegation(stored, node);
        }
        if is_target {
            return Found::Exact(stored, node);
        }
        if node.has(types::DNAME) {
            return Found::Redirected(stored, node);
        }
        encloser = stored;
    }
    Found::NoSuchName
}

/// RFC 4592 section 3.3.1: the source of synthesis is `*.<closest encloser>`.
fn wildcard_at<'z>(zone: &'z Zone, encloser: &[u8]) -> Found<'z> {
    let mut wildcard = [0u8; MAX_NAME_LEN + 2];
    wildcard[..2].copy_from_slice(b"\x01*");
    let len = 2 + encloser.len();
    if len > MAX_NAME_LEN {
        return Found::NoSuchName;
    }
    wildcard[2..len].copy_from_slice(encloser);
    match zone.nodes.get(&wildcard[..len]) {
        Some(node) => Found::Wildcard(node),
        None => Found::NoSuchName,
    }
}

/// Answers from a node that matched the name (or a wildcard standing in for it).
fn answer_node<'z>(answer: &mut Answer<'z>, zone: &'z Zone, owner: Owner<'z>, node: &'z Node, qtype: u16) -> Next {
    // ANY matches the CNAME itself, so there is nothing to chase.
    if qtype != types::CNAME
        && qtype != types::ANY
        && let Some(cname) = node.get(types::CNAME)
    {
        answer.push(ANSWER, owner, cname, cname.ttl, true);
        return Next::Follow(lowercase(&cname.rdatas[0]));
    }
    if qtype == types::ANY {
        return answer_any(answer, zone, owner, node);
    }
    match node.get(qtype) {
        Some(rrset) => {
            answer.push(ANSWER, owner, rrset, rrset.ttl, true);
            add_target_addresses(answer, zone, rrset);
        }
        None => add_negative_soa(answer, zone),
    }
    Next::Done
}

/// RFC 8482 section 4.2: answer ANY with one RRset of the name, not all of
/// them, so the query cannot be used to pull large answers. Pharos picks
/// the RRset with the lowest type number.
fn answer_any<'z>(answer: &mut Answer<'z>, zone: &'z Zone, owner: Owner<'z>, node: &'z Node) -> Next {
    match node.rrsets.first() {
        Some(rrset) => answer.push(ANSWER, owner, rrset, rrset.ttl, true),
        None => add_negative_soa(answer, zone),
    }
    Next::Done
}

/// A referral: not authoritative, the cut's NS in authority, addresses of
/// the name servers in additional (RFC 1034 4.3.2 step 3b).
fn refer<'z>(answer: &mut Answer<'z>, zone: &'z Zone, cut: &'z [u8], node: &'z Node) {
    let ns = node.get(types::NS).expect("a cut has NS");
    if answer.sections[ANSWER].is_empty() {
        answer.authoritative = false;
    }
    answer.push(AUTHORITY, Owner::Stored(cut), ns, ns.ttl, true);
    for rdata in &ns.rdatas {
        let target = lowercase(rdata);
        let below_cut = name::is_at_or_below(&target, cut);
        add_addresses(answer, zone, &target, below_cut);
    }
}

/// DNAME substitution (RFC 6672 section 3.1): the DNAME, then a CNAME from
/// the current name to the substituted one, then follow it.
fn redirect<'z>(answer: &mut Answer<'z>, owner: Owner<'z>, current: &[u8], dname_owner: &'z [u8], node: &'z Node) -> Next {
    let dname = node.get(types::DNAME).expect("a redirecting node has a DNAME");
    answer.push(ANSWER, Owner::Stored(dname_owner), dname, dname.ttl, true);
    let prefix = &current[..current.len() - dname_owner.len()];
    let target = lowercase(&dname.rdatas[0]);
    if prefix.len() + target.len() > MAX_NAME_LEN {
        // RFC 6672 section 2.2: the substitution makes a name too long.
        answer.rcode = rcode::YXDOMAIN;
        return Next::Done;
    }
    let substituted = [prefix, &target].concat();
    let synthesized = Entry {
        owner,
        rtype: types::CNAME,
        ttl: dname.ttl,
        records: Records::SynthesizedCname(substituted.clone().into()),
        required: true,
    };
    answer.sections[ANSWER].push(synthesized);
    Next::Follow(substituted)
}

/// The zone's SOA in the authority section, with the negative-caching TTL
/// (RFC 2308 section 3).
fn add_negative_soa<'z>(answer: &mut Answer<'z>, zone: &'z Zone) {
    answer.push(AUTHORITY, Owner::Stored(&zone.origin), zone.soa(), zone.negative_ttl, true);
}

/// Additional-section processing for the targets named in NS, MX and SRV
/// record data (RFC 1035 section 3.3, RFC 2782).
fn add_target_addresses<'z>(answer: &mut Answer<'z>, zone: &'z Zone, rrset: &Rrset) {
    let target_at = match rrset.rtype {
        types::NS => 0,
        types::MX => 2,
        types::SRV => 6,
        _ => return,
    };
    for rdata in &rrset.rdatas {
        if let Some(target) = rdata.get(target_at..) {
            let target = lowercase(target);
            if !zone.is_occluded(&target) {
                add_addresses(answer, zone, &target, false);
            }
        }
    }
}

fn add_addresses<'z>(answer: &mut Answer<'z>, zone: &'z Zone, target: &[u8], required: bool) {
    let Some((stored, node)) = zone.nodes.get_key_value(target) else { return };
    if answer.has_additional(stored) {
        return;
    }
    for rtype in [types::A, types::AAAA] {
        if let Some(rrset) = node.get(rtype) {
            answer.push(ADDITIONAL, Owner::Stored(stored), rrset, rrset.ttl, required);
        }
    }
}

fn lowercase(wire_name: &[u8]) -> Vec<u8> {
    wire_name.to_ascii_lowercase()
}
