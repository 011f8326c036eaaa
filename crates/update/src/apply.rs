//! Applying an UPDATE to a zone's records (RFC 2136 section 3): the zone
//! checked, every prerequisite evaluated (3.2), every change checked
//! (3.4.1) and then applied in order (3.4.2), all or nothing: the records
//! given are never changed; a new list is made, or the update refused.
//!
//! Where RFC 2136 leaves room, Knot DNS's behaviour is followed (the
//! differential test, `tests/suite/knot.rs`, compares the two):
//!
//! - a record added below a DNAME is ignored, as one added beside a
//!   CNAME is (the RFC speaks of the CNAME only);
//! - a DNAME replaces the name's DNAME, and is ignored at a name that has
//!   a CNAME or names below it (RFC 6672 section 5.2);
//! - the apex NS RRset is kept whole by a deletion of class ANY, of the
//!   RRset or of the name, and its last record by one of class NONE;
//!   names other than the apex have no such protection.
//!
//! A message malformed anywhere is FORMERR before anything else is
//! looked at ([`crate::parse`] reads it whole): RFC 2136 (and Knot) would
//! first answer a failing prerequisite, or a name outside the zone, that
//! comes before the malformed record. Only a client that sends malformed
//! messages can tell.
//!
//! Where Knot DNS departs from the RFC, the RFC is followed: a record
//! added again with another TTL gives its RRset that TTL (section 3.4.2.2
//! replaces the record; Knot ignores it), and a message whose zone
//! section has more than one entry is FORMERR (Knot does not answer).

use std::collections::{BTreeMap, BTreeSet};

use pharos_wire::name::{self, is_at_or_below};
use pharos_wire::{rcode, types};
use pharos_zone::journal::{Record, newer, soa_serial, with_serial};

use crate::message::{Change, Malformed, Prerequisite, Update, canonical_rdata};

/// Extended DNS Error INFO-CODEs (RFC 8914) an UPDATE's refusals carry.
const EDE_OTHER: u16 = 0;
const EDE_PROHIBITED: u16 = 18;
const EDE_NOT_AUTHORITATIVE: u16 = 20;

/// The zone after an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Every record of the zone, sorted.
    pub records: Vec<Record>,
    /// Whether the update changed anything; if it did, the SOA serial has
    /// moved forward (by the update's own SOA, or by one).
    pub changed: bool,
}

/// Why an update is answered with an error, and nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    pub rcode: u16,
    /// An Extended DNS Error's INFO-CODE (RFC 8914) for clients that read
    /// EDNS; its EXTRA-TEXT is `reason`.
    pub extended_error: Option<u16>,
    pub reason: String,
}

impl Refusal {
    /// A refusal with `rcode` and no Extended DNS Error.
    pub fn new(rcode: u16, reason: impl Into<String>) -> Refusal {
        Refusal { rcode, extended_error: None, reason: reason.into() }
    }

    /// REFUSED by policy (Extended DNS Error 18, Prohibited).
    pub fn refused(reason: impl Into<String>) -> Refusal {
        Refusal { rcode: rcode::REFUSED, extended_error: Some(EDE_PROHIBITED), reason: reason.into() }
    }

    /// NOTAUTH: the server does not serve `zone` as a primary (RFC 2136
    /// section 3.1.2; Extended DNS Error 20, Not Authoritative).
    pub fn not_authoritative(zone: &[u8]) -> Refusal {
        Refusal {
            rcode: rcode::NOTAUTH,
            extended_error: Some(EDE_NOT_AUTHORITATIVE),
            reason: format!("not authoritative for the zone {}", name::Display(zone)),
        }
    }

    /// FORMERR for a message [`crate::parse`] could not read.
    pub fn malformed(malformed: &Malformed) -> Refusal {
        Refusal { rcode: rcode::FORMERR, extended_error: Some(EDE_OTHER), reason: malformed.to_string() }
    }

    /// The Extended DNS Error to answer with, as [`crate::response`] takes it.
    pub fn extended(&self) -> Option<(u16, &str)> {
        self.extended_error.map(|code| (code, self.reason.as_str()))
    }
}

/// Applies `update` to the zone at `origin` (lowercase wire form) whose
/// records are `records` (its SOA among them). `guard` is asked about
/// every change's owner and type (ANY for a deletion of a whole name)
/// before anything is applied; its refusal is the update's.
///
/// An update policy ([`crate::Policy`]) is meant to be checked before
/// this is called, as Knot DNS checks its ACL: a client that may not
/// change the zone learns nothing of it from the prerequisites' answers.
pub fn apply(
    origin: &[u8],
    records: &[Record],
    update: &Update,
    mut guard: impl FnMut(&[u8], u16) -> Result<(), Refusal>,
) -> Result<Applied, Refusal> {
    if *update.zone != *origin {
        return Err(Refusal::not_authoritative(&update.zone));
    }
    if update.zone_class != types::CLASS_IN {
        return Err(Refusal {
            reason: format!("zones of class {} are not served", update.zone_class),
            ..Refusal::not_authoritative(origin)
        });
    }
    let before = Names::from_records(records);
    let old_serial = before.serial(origin).ok_or_else(|| Refusal::new(rcode::SERVFAIL, "the zone has no SOA record at its apex"))?;
    check_prerequisites(origin, &before, &update.prerequisites)?;
    for change in &update.changes {
        inside(origin, change.owner(), "update")?;
    }
    for change in &update.changes {
        guard(change.owner(), change.rtype())?;
    }
    let mut after = before.clone();
    for change in &update.changes {
        after.change(origin, change);
    }
    let changed = after != before;
    if changed && after.serial(origin) == Some(old_serial) {
        after.set_serial(origin, old_serial.wrapping_add(1));
    }
    Ok(Applied { records: after.records(), changed })
}

/// NOTZONE unless `owner` is the zone's name or below it (section 3.2.5,
/// 3.4.1.3).
fn inside(origin: &[u8], owner: &[u8], section: &str) -> Result<(), Refusal> {
    if is_at_or_below(owner, origin) {
        return Ok(());
    }
    Err(Refusal::new(rcode::NOTZONE, format!("{section} name {} is outside the zone {}", name::Display(owner), name::Display(origin))))
}

/// Section 3.2: each prerequisite in order; the records of the
/// value-dependent ones gathered by name and type, and each such RRset
/// compared with the zone's at the end (3.2.3, 3.2.5).
fn check_prerequisites(origin: &[u8], zone: &Names, prerequisites: &[Prerequisite]) -> Result<(), Refusal> {
    let mut expected: BTreeMap<(&[u8], u16), BTreeSet<&[u8]>> = BTreeMap::new();
    for prerequisite in prerequisites {
        let owner = prerequisite.owner();
        inside(origin, owner, "prerequisite")?;
        let shown = name::Display(owner);
        match prerequisite {
            Prerequisite::RrsetExists { rtype, .. } if zone.rrset(owner, *rtype).is_none() => {
                return Err(Refusal::new(rcode::NXRRSET, format!("prerequisite: {shown} has no {} RRset", type_name(*rtype))));
            }
            Prerequisite::RrsetAbsent { rtype, .. } if zone.rrset(owner, *rtype).is_some() => {
                return Err(Refusal::new(rcode::YXRRSET, format!("prerequisite: {shown} has a {} RRset", type_name(*rtype))));
            }
            Prerequisite::NameInUse { .. } if !zone.in_use(owner) => {
                return Err(Refusal::new(rcode::NXDOMAIN, format!("prerequisite: {shown} owns no records")));
            }
            Prerequisite::NameNotInUse { .. } if zone.in_use(owner) => {
                return Err(Refusal::new(rcode::YXDOMAIN, format!("prerequisite: {shown} owns records")));
            }
            Prerequisite::RecordPresent { rtype, rdata, .. } => {
                expected.entry((owner, *rtype)).or_default().insert(rdata);
            }
            _ => {}
        }
    }
    for ((owner, rtype), rdatas) in expected {
        let present: BTreeSet<&[u8]> =
            zone.rrset(owner, rtype).map(|rrset| rrset.rdatas.keys().map(|rdata| &**rdata).collect()).unwrap_or_default();
        if present != rdatas {
            let reason = format!("prerequisite: the {} RRset of {} is not the one given", type_name(rtype), name::Display(owner));
            return Err(Refusal::new(rcode::NXRRSET, reason));
        }
    }
    Ok(())
}

fn type_name(rtype: u16) -> domain::base::iana::Rtype {
    domain::base::iana::Rtype::from_int(rtype)
}

/// The records of one name and type: one TTL (RFC 2181 section 5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rrset {
    ttl: u32,
    /// Each record's data by its canonical form, which an update's data
    /// is in and which records are compared by: a zone file may have
    /// written the names in it in any case.
    rdatas: BTreeMap<Box<[u8]>, Box<[u8]>>,
}

/// A zone's records by name and type, as an update changes them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Names(BTreeMap<Box<[u8]>, BTreeMap<u16, Rrset>>);

impl Names {
    /// The records gathered; an RRset whose records disagree on their
    /// TTL takes the last one's (no loaded zone has such records).
    fn from_records(records: &[Record]) -> Names {
        let mut names = Names::default();
        for record in records {
            let rrset = names
                .0
                .entry(record.owner.clone())
                .or_default()
                .entry(record.rtype)
                .or_insert(Rrset { ttl: record.ttl, rdatas: BTreeMap::new() });
            rrset.ttl = record.ttl;
            rrset.rdatas.entry(canonical_rdata(record.rtype, &record.rdata)).or_insert_with(|| record.rdata.clone());
        }
        names
    }

    fn records(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .0
            .iter()
            .flat_map(|(owner, rrsets)| rrsets.iter().map(move |(rtype, rrset)| (owner, rtype, rrset)))
            .flat_map(|(owner, &rtype, rrset)| {
                rrset.rdatas.values().map(move |rdata| Record { owner: owner.clone(), rtype, rdata: rdata.clone(), ttl: rrset.ttl })
            })
            .collect();
        records.sort_unstable();
        records
    }

    fn rrset(&self, owner: &[u8], rtype: u16) -> Option<&Rrset> {
        self.0.get(owner)?.get(&rtype)
    }

    /// Section 2.4.4: the name owns at least one record (an empty
    /// non-terminal does not).
    fn in_use(&self, owner: &[u8]) -> bool {
        self.0.get(owner).is_some_and(|rrsets| !rrsets.is_empty())
    }

    fn serial(&self, origin: &[u8]) -> Option<u32> {
        soa_serial(self.rrset(origin, types::SOA)?.rdatas.values().next()?)
    }

    fn set_serial(&mut self, origin: &[u8], serial: u32) {
        let soa = self.0.get_mut(origin).and_then(|rrsets| rrsets.get_mut(&types::SOA)).expect("the zone's SOA was read");
        let (_, data) = soa.rdatas.pop_first().expect("an SOA RRset has its record");
        let data = with_serial(&data, serial);
        soa.rdatas.insert(canonical_rdata(types::SOA, &data), data);
    }

    /// A DNAME at a name above `owner` inside the zone: `owner` is
    /// occluded by it (RFC 6672 section 2.4).
    fn dname_above(&self, origin: &[u8], owner: &[u8]) -> bool {
        std::iter::successors(name::parent(owner), |&above| name::parent(above))
            .take_while(|above| is_at_or_below(above, origin))
            .any(|above| self.rrset(above, types::DNAME).is_some())
    }

    /// Some name strictly below `owner` owns records.
    fn has_names_below(&self, owner: &[u8]) -> bool {
        self.0.iter().any(|(other, rrsets)| **other != *owner && !rrsets.is_empty() && is_at_or_below(other, owner))
    }

    /// Applies one change (section 3.4.2), ignoring it where the RFC says so.
    fn change(&mut self, origin: &[u8], change: &Change) {
        let at_apex = *change.owner() == *origin;
        match change {
            Change::Add(record) => self.add(origin, record),
            // 3.4.2.3: neither the apex SOA nor the apex NS RRset by class ANY.
            Change::DeleteRrset { rtype: types::SOA, .. } => {}
            Change::DeleteRrset { rtype: types::NS, .. } if at_apex => {}
            Change::DeleteRrset { owner, rtype } => self.remove_rrset(owner, *rtype),
            Change::DeleteName { owner } if at_apex => {
                let rrsets = self.0.get_mut(&**owner).expect("the apex has its SOA");
                rrsets.retain(|&rtype, _| rtype == types::SOA || rtype == types::NS);
            }
            Change::DeleteName { owner } => {
                self.0.remove(&**owner);
            }
            // 3.4.2.4: never the SOA, nor the apex's last NS record.
            Change::DeleteRecord { rtype: types::SOA, .. } => {}
            Change::DeleteRecord { owner, rtype: types::NS, .. }
                if at_apex && self.rrset(owner, types::NS).is_some_and(|ns| ns.rdatas.len() == 1) => {}
            Change::DeleteRecord { owner, rtype, rdata } => {
                if let Some(rrset) = self.0.get_mut(&**owner).and_then(|rrsets| rrsets.get_mut(rtype)) {
                    rrset.rdatas.remove(rdata);
                    if rrset.rdatas.is_empty() {
                        self.remove_rrset(owner, *rtype);
                    }
                }
            }
        }
    }

    fn remove_rrset(&mut self, owner: &[u8], rtype: u16) {
        if let Some(rrsets) = self.0.get_mut(owner) {
            rrsets.remove(&rtype);
            if rrsets.is_empty() {
                self.0.remove(owner);
            }
        }
    }

    /// Section 3.4.2.2, with Knot DNS's DNAME rules.
    fn add(&mut self, origin: &[u8], record: &Record) {
        let owner = &record.owner;
        let has = |rtype| self.rrset(owner, rtype).is_some();
        let ignored = match record.rtype {
            // An SOA elsewhere than the apex, or one not newer than the zone's.
            types::SOA => {
                **owner != *origin || self.serial(origin).is_some_and(|serial| !newer(soa_serial(&record.rdata).unwrap_or(serial), serial))
            }
            // A CNAME replaces a CNAME, and goes nowhere else data is.
            types::CNAME => !has(types::CNAME) && (self.in_use(owner) || self.dname_above(origin, owner)),
            types::DNAME => has(types::CNAME) || self.has_names_below(owner),
            _ => has(types::CNAME) || self.dname_above(origin, owner),
        };
        if ignored {
            return;
        }
        let rrsets = self.0.entry(owner.clone()).or_default();
        let singleton = matches!(record.rtype, types::SOA | types::CNAME | types::DNAME);
        if singleton && rrsets.get(&record.rtype).is_some_and(|rrset| !rrset.rdatas.contains_key(&record.rdata)) {
            // One record only: another one replaces it.
            rrsets.remove(&record.rtype);
        }
        let rrset = rrsets.entry(record.rtype).or_insert(Rrset { ttl: record.ttl, rdatas: BTreeMap::new() });
        // The RRset takes the TTL of its newest record (RFC 2181 section 5.2: one TTL).
        rrset.ttl = record.ttl;
        rrset.rdatas.entry(record.rdata.clone()).or_insert_with(|| record.rdata.clone());
    }
}
