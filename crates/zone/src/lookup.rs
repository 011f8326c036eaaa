//! Authoritative lookup: RFC 1034 section 4.3.2 with the later rules for
//! negative answers (RFC 2308), wildcards (RFC 4592), DNAME (RFC 6672),
//! ANY (RFC 8482) and the RCODE of a chain (RFC 6604).
//!
//! The result is an [`Answer`]: which RRsets go in which section, owned by
//! which name, with which RRSIGs. Turning it into bytes is
//! [`crate::encode`]'s job.
//!
//! Asked with DNSSEC (DO=1) in a signed zone, the answer carries the
//! RRSIGs RFC 4035 section 3.1 asks for, in the answer and authority
//! sections (not over glue or other additional data: RFC 4035 makes those
//! optional, and they would crowd out what is required). Denial is compact
//! (RFC 9824, see [`crate::signed`]): NODATA carries the NSEC stored at the
//! name, a name that does not exist gets NOERROR with an NSEC made and
//! signed now whose bitmap holds NXNAME, and a wildcard's records are
//! signed now as if the name asked for existed, so that no proof of the
//! name's absence is needed beside them.

use std::borrow::Cow;

use pharos_wire::name::{self, MAX_NAME_LEN};
use pharos_wire::{rcode, types};

use crate::zone::{Node, Rrset, Zone};
use pharos_dnssec::{NSEC, NXNAME, Signer, nsec_rdata};

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
    /// One record made for this answer: a CNAME synthesized from a DNAME
    /// (RFC 6672 section 3.1), or the NSEC denying a name.
    Made(Box<[u8]>),
    /// None of its own: the answer to an explicit RRSIG query, whose
    /// records are the entry's RRSIGs alone.
    Signatures,
}

/// The RRSIG records' data over one RRset in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rrsigs<'z> {
    /// Made when the zone was signed (none when the answer is unsigned).
    Stored(&'z [Box<[u8]>]),
    /// Made for this answer (or taken from the signer's cache): over a
    /// wildcard's records or a denial.
    Made(pharos_dnssec::sign::Rrsigs),
}

impl Rrsigs<'_> {
    pub fn as_slice(&self) -> &[Box<[u8]>] {
        match self {
            Rrsigs::Stored(rrsigs) => rrsigs,
            Rrsigs::Made(rrsigs) => rrsigs,
        }
    }
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
    pub rrsigs: Rrsigs<'z>,
}

/// Sections in message order.
pub const ANSWER: usize = 0;
pub const AUTHORITY: usize = 1;
pub const ADDITIONAL: usize = 2;

/// What an authoritative server says to one question.
#[derive(Debug, Clone)]
pub struct Answer<'z> {
    pub rcode: u16,
    /// The name (the last of a chain) does not exist, and the RCODE is
    /// NOERROR all the same: a compact denial (RFC 9824 section 3).
    pub compact_nxdomain: bool,
    pub authoritative: bool,
    pub sections: [Vec<Entry<'z>>; 3],
    /// The signer, when the answer is signed: asked with DO=1, from a
    /// signed zone.
    signer: Option<&'z Signer>,
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
    fn new(signer: Option<&'z Signer>) -> Self {
        Answer { rcode: rcode::NOERROR, compact_nxdomain: false, authoritative: true, sections: Default::default(), signer }
    }

    /// Adds a stored RRset, with its stored RRSIGs if the answer is signed
    /// (in the additional section too, RFC 4035 section 3.1.1: they go
    /// with the RRset when it is cut to fit; glue has none).
    fn push(&mut self, section: usize, owner: Owner<'z>, rrset: &'z Rrset, ttl: u32, required: bool) {
        let rrsigs = if self.signer.is_some() { &rrset.rrsigs[..] } else { &[] };
        let entry = Entry { owner, rtype: rrset.rtype, ttl, records: Records::Stored(rrset), required, rrsigs: Rrsigs::Stored(rrsigs) };
        self.sections[section].push(entry);
    }

    /// Adds a stored RRset of a wildcard's node to the answer section,
    /// owned by the name it stands in for, `expanded` (lowercase), and
    /// signed now under that name.
    fn push_expanded(&mut self, owner: Owner<'z>, expanded: &[u8], rrset: &'z Rrset) {
        self.push(ANSWER, owner, rrset, rrset.ttl, true);
        if let Some(signer) = self.signer {
            let entry = self.sections[ANSWER].last_mut().expect("just pushed");
            entry.rrsigs = Rrsigs::Made(signer.sign_cached(expanded, rrset.rtype, rrset.ttl, &rrset.rdatas));
        }
    }

    /// Adds to the authority section an NSEC made for `name` (lowercase)
    /// listing `present`, signed now.
    fn push_made_nsec(&mut self, zone: &Zone, owner: Owner<'z>, name: &[u8], present: &[u16]) {
        let Some(signer) = self.signer else { return };
        let rdata = nsec_rdata(name, present.iter().copied());
        let rrsigs = Rrsigs::Made(signer.sign_cached(name, NSEC, zone.negative_ttl, std::slice::from_ref(&rdata)));
        let entry = Entry { owner, rtype: NSEC, ttl: zone.negative_ttl, records: Records::Made(rdata), required: true, rrsigs };
        self.sections[AUTHORITY].push(entry);
    }

    fn has_additional(&self, owner: &[u8]) -> bool {
        self.sections[ADDITIONAL].iter().any(|entry| entry.owner == Owner::Stored(owner))
    }
}

/// Answers `qtype` for `qname` (lowercase wire form, at or below the zone's
/// origin) from `zone`; signed when `dnssec` (the query's DO bit) and the
/// zone is signed.
pub fn resolve<'z>(zone: &'z Zone, qname: &[u8], qtype: u16, dnssec: bool) -> Answer<'z> {
    let mut answer = Answer::new(zone.signer.as_deref().filter(|_| dnssec));
    let mut current: Cow<'_, [u8]> = Cow::Borrowed(qname);
    let mut owner = Owner::Question;
    let mut visited: Vec<Vec<u8>> = Vec::new();
    loop {
        let next = match find(zone, &current, qtype) {
            Found::Exact(stored, node) => answer_node(&mut answer, zone, owner_or_stored(owner, stored), node, qtype, None),
            Found::Wildcard(node) => answer_node(&mut answer, zone, owner, node, qtype, Some(&current)),
            Found::Delegation(cut, node) => {
                refer(&mut answer, zone, cut, node);
                Next::Done
            }
            Found::Redirected(dname_owner, node) => redirect(&mut answer, owner, &current, dname_owner, node, qtype),
            Found::NoSuchName => {
                add_negative_soa(&mut answer, zone);
                if answer.signer.is_some() {
                    // Compact denial: NOERROR, and NXNAME says the name is absent.
                    answer.push_made_nsec(zone, owner, &current, &[types::RRSIG, NSEC, NXNAME]);
                    answer.compact_nxdomain = true;
                } else {
                    answer.rcode = rcode::NXDOMAIN;
                }
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

/// The signed NODATA for a routed name (`qname`, lowercase) whose policy
/// chose no record of type `absent` (every replica down, answered
/// NODATA): the NSEC stored at the name lists the types its answers carry
/// (addresses, or CNAME for redirectors), which would deny this very
/// denial, so this one, made now (and cached by the signer), leaves
/// `absent` out.
pub fn routed_nodata<'z>(zone: &'z Zone, qname: &[u8], absent: u16) -> Answer<'z> {
    let mut answer = Answer::new(zone.signer.as_deref());
    add_negative_soa(&mut answer, zone);
    let node = zone.node(qname);
    let stored = node.into_iter().flat_map(|node| node.rrsets.iter().map(|rrset| rrset.rtype));
    let routed = node.into_iter().flat_map(|node| node.routed_types.iter().copied());
    let present: Vec<u16> = stored.chain(routed).filter(|&rtype| rtype != absent).chain([types::RRSIG, NSEC]).collect();
    answer.push_made_nsec(zone, Owner::Question, qname, &present);
    answer
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

/// Answers from a node that matched the name, or from a wildcard's node
/// standing in for the name `expanded` (lowercase).
fn answer_node<'z>(answer: &mut Answer<'z>, zone: &'z Zone, owner: Owner<'z>, node: &'z Node, qtype: u16, expanded: Option<&[u8]>) -> Next {
    if qtype == types::RRSIG && answer.signer.is_some() {
        answer_signatures(answer, zone, owner, node, expanded);
        return Next::Done;
    }
    // ANY matches the CNAME itself, so there is nothing to chase; RFC 8482
    // section 4.2 answers it with one RRset of the name, not all of them,
    // so the query cannot pull large answers: Pharos picks the lowest type.
    let found = match qtype {
        types::ANY => node.rrsets.first(),
        types::CNAME => node.get(types::CNAME),
        NSEC if answer.signer.is_some() => node.nsec.as_ref(),
        _ => node.get(types::CNAME).or_else(|| node.get(qtype)),
    };
    let Some(rrset) = found else {
        add_negative_soa(answer, zone);
        add_nodata_proof(answer, zone, owner, node, expanded);
        return Next::Done;
    };
    match expanded {
        Some(expanded) => answer.push_expanded(owner, expanded, rrset),
        None => answer.push(ANSWER, owner, rrset, rrset.ttl, true),
    }
    if rrset.rtype == types::CNAME && qtype != types::CNAME && qtype != types::ANY {
        return Next::Follow(lowercase(&rrset.rdatas[0]));
    }
    // The one RRset an ANY query gets has its additional data too, as
    // Knot DNS and NSD give it with theirs.
    add_target_addresses(answer, zone, rrset);
    Next::Done
}

/// An explicit RRSIG query, signed: the RRSIGs over one RRset of the name,
/// the lowest type's (or its NSEC's), as Knot DNS answers it and as RFC 8482 answers ANY,
/// so that the query cannot pull every signature at once; never a CNAME
/// followed (a CNAME's owner has RRSIGs of its own, RFC 4035 section 2.5).
/// NODATA would contradict the name's NSEC, whose bitmap lists RRSIG.
fn answer_signatures<'z>(answer: &mut Answer<'z>, zone: &'z Zone, owner: Owner<'z>, node: &'z Node, expanded: Option<&[u8]>) {
    // An empty non-terminal has its NSEC's alone.
    let signed = node.rrsets.first().or(node.nsec.as_ref().filter(|_| expanded.is_none()));
    let (Some(signer), Some(rrset)) = (answer.signer, signed) else {
        add_negative_soa(answer, zone);
        add_nodata_proof(answer, zone, owner, node, expanded);
        return;
    };
    let rrsigs = match expanded {
        Some(expanded) => Rrsigs::Made(signer.sign_cached(expanded, rrset.rtype, rrset.ttl, &rrset.rdatas)),
        None => Rrsigs::Stored(&rrset.rrsigs),
    };
    let entry = Entry { owner, rtype: types::RRSIG, ttl: rrset.ttl, records: Records::Signatures, required: true, rrsigs };
    answer.sections[ANSWER].push(entry);
}

/// In a signed answer, the NSEC saying which types the name has: the one
/// stored at the name, or for a wildcard one made for the name it stands
/// in for.
fn add_nodata_proof<'z>(answer: &mut Answer<'z>, zone: &'z Zone, owner: Owner<'z>, node: &'z Node, expanded: Option<&[u8]>) {
    if answer.signer.is_none() {
        return;
    }
    match (expanded, &node.nsec) {
        (Some(expanded), _) => {
            let present: Vec<u16> = node.rrsets.iter().map(|rrset| rrset.rtype).chain([types::RRSIG, NSEC]).collect();
            answer.push_made_nsec(zone, owner, expanded, &present);
        }
        (None, Some(nsec)) => answer.push(AUTHORITY, owner, nsec, nsec.ttl, true),
        (None, None) => {}
    }
}

/// A referral: not authoritative, the cut's NS in authority, addresses of
/// the name servers in additional (RFC 1034 4.3.2 step 3b).
fn refer<'z>(answer: &mut Answer<'z>, zone: &'z Zone, cut: &'z [u8], node: &'z Node) {
    let ns = node.get(types::NS).expect("a cut has NS");
    if answer.sections[ANSWER].is_empty() {
        answer.authoritative = false;
    }
    answer.push(AUTHORITY, Owner::Stored(cut), ns, ns.ttl, true);
    // Signed, the DS of the child, or the NSEC proving it has none
    // (RFC 4035 section 3.1.4).
    if answer.signer.is_some()
        && let Some(proof) = node.get(types::DS).or(node.nsec.as_ref())
    {
        answer.push(AUTHORITY, Owner::Stored(cut), proof, proof.ttl, true);
    }
    for rdata in &ns.rdatas {
        let target = lowercase(rdata);
        let below_cut = name::is_at_or_below(&target, cut);
        add_addresses(answer, zone, &target, below_cut);
    }
}

/// DNAME substitution (RFC 6672 section 3.1): the DNAME, then a CNAME from
/// the current name to the substituted one, then follow it, unless the
/// question asked for that CNAME.
fn redirect<'z>(answer: &mut Answer<'z>, owner: Owner<'z>, current: &[u8], dname_owner: &'z [u8], node: &'z Node, qtype: u16) -> Next {
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
        records: Records::Made(substituted.clone().into()),
        required: true,
        // Unsigned: a validator synthesizes it from the signed DNAME (RFC 6672 section 5.3.1).
        rrsigs: Rrsigs::Stored(&[]),
    };
    answer.sections[ANSWER].push(synthesized);
    // The synthesized CNAME answers a CNAME query, as a stored one does
    // (RFC 1034 section 4.3.2 step 3a follows a CNAME only when QTYPE is
    // not CNAME); Knot DNS and NSD stop there too.
    if qtype == types::CNAME {
        return Next::Done;
    }
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
