//! All zones served, and the answers built for them at load time: for a
//! signed zone, twice (DO=0 answers exactly as unsigned, DO=1 answers with
//! their RRSIGs and denials), after signing it (see [`crate::signed`]).

use pharos_dnssec::NSEC;
use pharos_wire::{name, types};
use rustc_hash::FxHashMap;

use crate::encode::Body;
use crate::lookup::{Answer, resolve};
use crate::signed::sign_zone;
use crate::zone::Zone;

/// Answers stored for one existing name: one per query type whose answer
/// differs from the rest, and one for every other type.
#[derive(Debug)]
struct NameAnswers {
    by_type: Box<[(u16, Body)]>,
    other_types: Body,
}

impl NameAnswers {
    fn for_type(&self, qtype: u16) -> &Body {
        self.by_type.iter().find(|(rtype, _)| *rtype == qtype).map_or(&self.other_types, |(_, body)| body)
    }
}

/// The answers built for one existing name: one map entry holds both, so
/// that a query hashes its name once whatever its DO bit.
#[derive(Debug)]
struct BuiltName {
    unsigned: NameAnswers,
    /// The answers to DO=1 queries, for the names of signed zones.
    signed: Option<NameAnswers>,
}

/// The zones a server answers for, frozen.
#[derive(Debug, Default)]
pub struct ZoneSet {
    zones: Vec<Zone>,
    by_origin: FxHashMap<Box<[u8]>, usize>,
    built: FxHashMap<Box<[u8]>, BuiltName>,
}

/// How a question is answered.
#[derive(Debug)]
pub enum Lookup<'s> {
    /// The name exists: its answer was encoded when the zone was loaded.
    Built(&'s Body),
    /// The name does not exist as such: resolved now.
    Resolved(Answer<'s>),
    /// No zone here contains the name.
    NotAuthoritative,
    /// The name is in a secondary zone whose copy expired.
    Expired,
}

/// Two zones of a set have the same origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("zone {} is configured twice", name::Display(origin))]
pub struct TwiceConfigured {
    /// The origin, as a wire name.
    pub origin: Box<[u8]>,
}

impl ZoneSet {
    /// Freezes `zones`, signing those with a signer and building every
    /// stored answer. Two zones with the same origin are an error.
    pub fn new(zones: Vec<Zone>) -> Result<ZoneSet, TwiceConfigured> {
        let mut set = ZoneSet::default();
        for mut zone in zones {
            if let Some(signer) = zone.signer.clone() {
                sign_zone(&mut zone, &signer);
            }
            let index = set.zones.len();
            if set.by_origin.insert(zone.origin.clone(), index).is_some() {
                return Err(TwiceConfigured { origin: zone.origin });
            }
            set.zones.push(zone);
        }
        // An expired zone's names fall through to `lookup`'s SERVFAIL.
        for index in 0..set.zones.len() {
            if !set.zones[index].expired {
                set.build_answers(index);
            }
        }
        Ok(set)
    }

    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// The names whose answers were built at load, each with the query
    /// types answered apart from the name's answer to any other type. The
    /// names of signed zones are left out: their answers depend on the DO
    /// bit, which the kernel fast path does not tell apart.
    pub fn built_names(&self) -> impl Iterator<Item = (&[u8], impl Iterator<Item = u16> + '_)> {
        self.built
            .iter()
            .filter(|(_, built)| built.signed.is_none())
            .map(|(owner, built)| (&owner[..], built.unsigned.by_type.iter().map(|(qtype, _)| *qtype)))
    }

    /// The zone with the longest origin at or above `qname` (lowercase).
    pub fn zone_for(&self, qname: &[u8]) -> Option<&Zone> {
        name::label_offsets(qname).find_map(|start| self.by_origin.get(&qname[start..])).map(|&index| &self.zones[index])
    }

    /// Answers a question; `qname` is the lowercase wire name, `dnssec`
    /// the query's DO bit.
    pub fn lookup(&self, qname: &[u8], qtype: u16, dnssec: bool) -> Lookup<'_> {
        if qtype == types::DS
            && let Some(parent) = self.parent_side_of_apex(qname)
        {
            return Lookup::Resolved(resolve(parent, qname, qtype, dnssec));
        }
        if let Some(built) = self.built.get(qname) {
            let answers = built.signed.as_ref().filter(|_| dnssec).unwrap_or(&built.unsigned);
            return Lookup::Built(answers.for_type(qtype));
        }
        match self.zone_for(qname) {
            Some(zone) if zone.expired => Lookup::Expired,
            Some(zone) => Lookup::Resolved(resolve(zone, qname, qtype, dnssec)),
            None => Lookup::NotAuthoritative,
        }
    }

    /// The zone above `qname` when `qname` is the apex of a zone that is
    /// itself delegated from a zone served here: DS lives on the parent
    /// side of a cut (RFC 4035 section 3.1.4.1).
    fn parent_side_of_apex(&self, qname: &[u8]) -> Option<&Zone> {
        if !self.by_origin.contains_key(qname) {
            return None;
        }
        self.zone_for(name::parent(qname)?)
    }

    /// Encodes the answers of every name of zone `index` that this zone,
    /// and not a more specific one, is authoritative for.
    fn build_answers(&mut self, index: usize) {
        let built = self.answers_of(index);
        self.built.extend(built);
    }

    /// The answers of zone `index`'s names: unsigned, and signed too if the zone is.
    fn answers_of(&self, index: usize) -> Vec<(Box<[u8]>, BuiltName)> {
        let zone = &self.zones[index];
        let mut asked_types = zone.types_present();
        asked_types.extend([types::DS, types::ANY, types::CNAME, NSEC, types::RRSIG]);
        asked_types.sort_unstable();
        asked_types.dedup();
        let absent_type = (1..=u16::MAX).rev().find(|rtype| !asked_types.contains(rtype)).expect("some type is absent");
        let mut built = Vec::with_capacity(zone.nodes.len());
        for owner in zone.nodes.keys() {
            if !std::ptr::eq(self.zone_for(owner).expect("a zone holds its own names"), zone) {
                continue;
            }
            let answers = |dnssec: bool| {
                let other_types = Body::build(&resolve(zone, owner, absent_type, dnssec), owner);
                let by_type = asked_types
                    .iter()
                    .map(|&qtype| (qtype, Body::build(&resolve(zone, owner, qtype, dnssec), owner)))
                    .filter(|(_, body)| *body != other_types)
                    .collect();
                NameAnswers { by_type, other_types }
            };
            let signed = zone.signer.is_some().then(|| answers(true));
            built.push((owner.clone(), BuiltName { unsigned: answers(false), signed }));
        }
        built
    }
}
