//! Zone transfer out (AXFR, RFC 5936), over a stream: the whole zone,
//! SOA first and last, in as few messages as fit 64 KiB each, names
//! compressed. IXFR (RFC 1995) is answered from the zone's journal
//! (`pharos_zone::journal`): to a client whose serial is a version the
//! journal kept, the one condensed difference from it to the zone as
//! served (the SOA, the client's SOA, what went, the SOA, what came, the
//! SOA); to a client already as new as the zone, the SOA alone (section
//! 2); to any other (its serial left the journal, or the node restarted
//! since), the whole zone as for AXFR, as section 4 allows. A signed
//! zone's IXFR is always answered whole: the journal holds the records,
//! not their signatures or the NSEC chain over them.
//!
//! Who may transfer a zone is the zone's `allow_transfer` list of
//! prefixes and, if it names any, its TSIG keys ([`TransferAcl`]);
//! nobody, unless listed. A signed request is checked and its responses
//! signed (`tsig`). A refused transfer says why in an Extended DNS Error.
//!
//! A service's name has no records in its zone: a policy answers it. A
//! secondary cannot route, so it is given every enabled replica's address
//! (the full replica set, at the service's TTL): the one answer that is
//! right for every client, if not the best. Health is not looked at: a
//! replica's state changes no serial, and the secondary would keep
//! whichever subset it fetched.
//!
//! A zone that Pharos signs is transferred signed: every RRset with its
//! RRSIGs (a service's replica set signed as it is sent), and, in place of
//! the compact denial only a signer can give, the chain of NSEC records
//! over the zone's names (`pharos_zone::signed::nsec_chain_of`), signed.

use std::collections::HashMap;
use std::net::IpAddr;

use pharos_dnssec::NSEC;
use pharos_route::Service;
use pharos_route::prefix::PrefixMap;
use pharos_wire::edns::ExtendedError;
use pharos_wire::query::Question;
use pharos_wire::{MAX_STREAM_MESSAGE, MessageWriter, Query, flags, name, rcode, types};
use pharos_zone::journal::{self, Difference};
use pharos_zone::signed::nsec_chain_of;
use pharos_zone::{Rrset, Zone};

use crate::signed;
use crate::{Answered, Client, OptSource, Outcome, ResponseOptions, Snapshot, Tsig, finish, opt_room, write_refusal};

/// Who may transfer one zone: a client from a listed prefix, with a
/// request signed by one of the listed keys if any are listed.
#[derive(Debug, Clone)]
pub struct TransferAcl {
    /// The zone's origin, lowercase wire form.
    pub zone: Box<[u8]>,
    /// The client prefixes allowed to transfer it.
    pub allowed: PrefixMap<()>,
    /// The TSIG keys (names, lowercase wire form) one of which must sign
    /// the request; empty: none needed.
    pub keys: Vec<Box<[u8]>>,
}

/// Who may transfer a zone, before it is known which: a zone's
/// configuration, or every zone kept in the store (which come and go
/// without the configuration naming them).
#[derive(Debug, Clone)]
pub struct TransferRule {
    pub allowed: PrefixMap<()>,
    pub keys: Vec<Box<[u8]>>,
}

impl TransferRule {
    /// The transfer list of the zone at `origin`.
    pub fn for_zone(&self, origin: &[u8]) -> TransferAcl {
        TransferAcl { zone: origin.into(), allowed: self.allowed.clone(), keys: self.keys.clone() }
    }
}

/// RFC 8914 section 4.19, with the reason Knot DNS gives.
const NOT_ALLOWED: ExtendedError = ExtendedError { info_code: 18, extra_text: "transfer not allowed" };

/// True for the questions answered by [`respond_transfer`]: the transfer
/// types, in a class served (another is refused as any query of it is).
pub fn is_transfer(question: &Question) -> bool {
    matches!(question.qtype, types::AXFR | types::IXFR) && matches!(question.qclass, types::CLASS_IN | types::CLASS_ANY)
}

/// What a transfer sent: the serials, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// The whole zone (AXFR, or IXFR from a serial not in the journal).
    Whole { serial: u32 },
    /// The difference from the client's version to the zone's (IXFR).
    Difference { from: u32, to: u32 },
    /// The SOA alone: the client's serial is the zone's or newer (IXFR).
    Current { serial: u32 },
}

impl std::fmt::Display for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sent::Whole { serial } => write!(f, "whole zone at serial {serial}"),
            Sent::Difference { from, to } => write!(f, "difference from serial {from} to {to}"),
            Sent::Current { serial } => write!(f, "serial {serial}, client current"),
        }
    }
}

/// What [`respond_transfer`] answered.
#[derive(Debug)]
pub struct Transferred<'s> {
    /// What the first message said, with `len` the octets of them all.
    pub answered: Answered<'s>,
    /// `None` when the transfer was refused.
    pub sent: Option<Sent>,
}

/// Answers a transfer query that came over a stream (TCP or TLS) with the
/// connection's `options` (the time for TSIG, the cookie for a COOKIE
/// option), handing each response message to `send` in order.
pub fn respond_transfer<'s>(
    query: &Query<'_>,
    client: &Client,
    options: &ResponseOptions,
    snapshot: &'s Snapshot,
    mut send: impl FnMut(&[u8]),
) -> Transferred<'s> {
    let refused = |answered| Transferred { answered, sent: None };
    let now = options.now;
    let opt = OptSource { settings: &snapshot.settings, options };
    let mut message = Vec::new();
    let question = query.question.expect("a parsed query has its question");
    let mut signing = match signed::checked(query, &snapshot.settings.tsig_keys, now, opt, &mut message) {
        Ok(signing) => signing,
        Err(answered) => {
            send(&message);
            return refused(answered);
        }
    };
    let key_name = signing.as_ref().map(|signing| signing.key_name().to_vec());
    let tsig_room = signing.as_ref().map_or(0, |signing| signing.record_len());
    let tsig = signing.as_ref().map(|_| Tsig::Verified);
    let mut sign_and_send = |message: &mut Vec<u8>| {
        if let Some(signing) = signing.as_mut() {
            signing.sign(message, 0, now);
        }
        send(message);
        message.len()
    };
    let zone = match transferable(query, client, snapshot, key_name.as_deref()) {
        Ok(zone) => zone,
        Err((rcode, extended)) => {
            let answered = write_refusal(query, rcode, Some(extended), opt, &mut message);
            return refused(Answered { len: sign_and_send(&mut message), tsig, ..answered });
        }
    };
    let serial = journal::soa_serial(&zone.soa().rdatas[0]).expect("a loaded SOA has a serial");
    let theirs = (question.qtype == types::IXFR).then(|| client_serial(query)).flatten();
    // A signed zone's journal lacks its signatures and NSEC chain: whole.
    let journaled = theirs.filter(|&theirs| journal::newer(serial, theirs) && zone.signer.is_none());
    let difference = journaled.and_then(|theirs| Some((theirs, zone.journal.since(theirs)?)));
    let (records, sent) = match (theirs, &difference) {
        (_, Some((from, difference))) => (difference_records(zone, difference), Sent::Difference { from: *from, to: serial }),
        // RFC 1995 section 2: a client as new as the zone gets its SOA alone.
        (Some(theirs), None) if !journal::newer(serial, theirs) => (vec![soa_record(zone)], Sent::Current { serial }),
        _ => (zone_records(zone, snapshot), Sent::Whole { serial }),
    };
    let room = MAX_STREAM_MESSAGE - opt_room(query.edns, opt) - tsig_room;
    let mut total = 0;
    write_messages(query, &records, room, opt, &mut message, |message| total += sign_and_send(message));
    let answered = Answered {
        rcode: rcode::NOERROR,
        smallest_ttl: None,
        len: total,
        qtype: Some(question.qtype),
        routed: None,
        opt_at: None,
        nonexistent: false,
        tsig,
    };
    Transferred { answered, sent: Some(sent) }
}

/// The zone `query` asks to transfer, if `client` may have it with the
/// request signed by the key named `key`; else the RCODE and reason of
/// the refusal.
fn transferable<'s>(
    query: &Query<'_>,
    client: &Client,
    snapshot: &'s Snapshot,
    key: Option<&[u8]>,
) -> Result<&'s Zone, (u16, ExtendedError)> {
    let zone = zone_named(query, snapshot).ok_or(NOT_A_ZONE)?;
    if !allowed(&snapshot.settings.transfer_acls, &zone.origin, client.address, key) {
        return Err((rcode::REFUSED, NOT_ALLOWED));
    }
    // A secondary zone's expired copy is not given on, as it is not served.
    if zone.expired {
        return Err((rcode::SERVFAIL, crate::ZONE_EXPIRED));
    }
    Ok(zone)
}

/// The answer to a transfer of a name that is no zone's apex, over any
/// transport: NOTAUTH, as Knot DNS and NSD say.
pub(crate) const NOT_A_ZONE: (u16, ExtendedError) = (rcode::NOTAUTH, ExtendedError::NOT_AUTHORITATIVE);

/// The served zone whose apex the question names: only an apex names a
/// zone to transfer.
pub(crate) fn zone_named<'s>(query: &Query<'_>, snapshot: &'s Snapshot) -> Option<&'s Zone> {
    let question = query.question.expect("a parsed query has its question");
    let mut origin = [0u8; name::MAX_NAME_LEN];
    let origin = &mut origin[..question.name_len];
    name::lowercase_into(query.qname(), origin);
    snapshot.zones.zone_for(origin).filter(|zone| *zone.origin == *origin)
}

/// True when `client` may transfer the zone at `origin` with a request
/// signed by `key`.
fn allowed(acls: &[TransferAcl], origin: &[u8], client: IpAddr, key: Option<&[u8]>) -> bool {
    let key_fits = |acl: &TransferAcl| acl.keys.is_empty() || key.is_some_and(|key| acl.keys.iter().any(|listed| **listed == *key));
    acls.iter().any(|acl| *acl.zone == *origin && acl.allowed.lookup(client).value.is_some() && key_fits(acl))
}

/// One record to transfer; its data uncompressed.
struct Record<'z> {
    owner: &'z [u8],
    rtype: u16,
    ttl: u32,
    rdata: std::borrow::Cow<'z, [u8]>,
}

/// The serial of the SOA record an IXFR query carries, where the answer
/// section (empty in a query) ends.
fn client_serial(query: &Query<'_>) -> Option<u32> {
    let packet = query.packet;
    let record_at = query.question?.end();
    let rdata_at = name::skip(packet, record_at).ok()? + 10;
    let rtype = u16::from_be_bytes(packet.get(rdata_at - 10..rdata_at - 8)?.try_into().ok()?);
    (rtype == types::SOA).then(|| soa_serial(packet, rdata_at)).flatten()
}

/// The serial of SOA data at `at` in `bytes`: past the two names, which
/// in a message may be compressed.
fn soa_serial(bytes: &[u8], at: usize) -> Option<u32> {
    let serial_at = name::skip(bytes, name::skip(bytes, at).ok()?).ok()?;
    Some(u32::from_be_bytes(bytes.get(serial_at..serial_at + 4)?.try_into().ok()?))
}

fn soa_record(zone: &Zone) -> Record<'_> {
    soa_record_of(zone, &zone.soa().rdatas[0])
}

/// A SOA record of `zone` with the data `soa`, at the zone's SOA TTL.
fn soa_record_of<'z>(zone: &'z Zone, soa: &'z [u8]) -> Record<'z> {
    Record { owner: &zone.origin, rtype: types::SOA, ttl: zone.soa().ttl, rdata: soa.into() }
}

/// An incremental transfer of `difference` (RFC 1995 section 4): the
/// zone's SOA, then the SOA before, the records removed, the SOA after
/// and the records added, then the zone's SOA again.
fn difference_records<'z>(zone: &'z Zone, difference: &'z Difference) -> Vec<Record<'z>> {
    let record =
        |record: &'z journal::Record| Record { owner: &record.owner, rtype: record.rtype, ttl: record.ttl, rdata: (&*record.rdata).into() };
    let mut records = vec![soa_record(zone), soa_record_of(zone, &difference.from_soa)];
    records.extend(difference.removed.iter().map(record));
    records.push(soa_record_of(zone, &difference.to_soa));
    records.extend(difference.added.iter().map(record));
    records.push(soa_record(zone));
    records
}

/// Every record of `zone`: the SOA, then each name's RRsets (names in
/// wire order, apex first), then the SOA again (RFC 5936 section 2.2).
fn zone_records<'z>(zone: &'z Zone, snapshot: &Snapshot) -> Vec<Record<'z>> {
    let mut owners: Vec<&[u8]> = zone.nodes.keys().map(|owner| &owner[..]).collect();
    owners.sort_unstable_by_key(|owner| (*owner != &*zone.origin, *owner));
    let mut records = vec![soa_record(zone)];
    // Each service's address types as sent, for its name's NSEC.
    let mut sent_types: HashMap<&[u8], Vec<u16>> = HashMap::new();
    for owner in owners {
        let node = &zone.nodes[owner];
        for rrset in &node.rrsets {
            if rrset.rtype != types::SOA {
                records.extend(rrset.rdatas.iter().map(|rdata| Record {
                    owner,
                    rtype: rrset.rtype,
                    ttl: rrset.ttl,
                    rdata: (&**rdata).into(),
                }));
            }
            records.extend(rrsigs(owner, rrset.ttl, &rrset.rrsigs));
        }
        if !node.routed_types.is_empty() {
            let replicas = replica_records(owner, snapshot);
            let mut types: Vec<u16> = replicas.iter().map(|record| record.rtype).collect();
            types.sort_unstable();
            types.dedup();
            sent_types.insert(owner, types);
            records.extend(replica_rrsigs(zone, owner, &replicas));
            records.extend(replicas);
        }
    }
    records.extend(nsec_chain(zone, &sent_types));
    records.push(soa_record(zone));
    records
}

/// The RRSIG records over an RRset of `owner` at `ttl`.
fn rrsigs<'z>(owner: &'z [u8], ttl: u32, rrsigs: &'z [Box<[u8]>]) -> impl Iterator<Item = Record<'z>> {
    rrsigs.iter().map(move |rrsig| Record { owner, rtype: types::RRSIG, ttl, rdata: (&**rrsig).into() })
}

/// The RRSIG records over each address RRset of a service's `replicas`,
/// if `zone` is signed.
fn replica_rrsigs<'z>(zone: &Zone, owner: &'z [u8], replicas: &[Record<'z>]) -> Vec<Record<'z>> {
    let Some(signer) = &zone.signer else { return Vec::new() };
    let mut signed = Vec::new();
    for rtype in [types::A, types::AAAA] {
        let rrset: Vec<&Record<'z>> = replicas.iter().filter(|record| record.rtype == rtype).collect();
        let Some(ttl) = rrset.first().map(|record| record.ttl) else { continue };
        let rdatas: Vec<Box<[u8]>> = rrset.iter().map(|record| Box::from(&*record.rdata)).collect();
        let made = signer.sign(owner, rtype, ttl, &rdatas);
        signed.extend(made.into_iter().map(|rrsig| Record { owner, rtype: types::RRSIG, ttl, rdata: rrsig.into_vec().into() }));
    }
    signed
}

/// A signed zone's NSEC chain with its RRSIGs (none for an unsigned zone),
/// a service's name listing the address types of the replicas it sends.
fn nsec_chain<'z>(zone: &'z Zone, sent_types: &HashMap<&[u8], Vec<u16>>) -> Vec<Record<'z>> {
    let transferred = |owner: &[u8]| sent_types.get(owner).cloned().unwrap_or_default();
    let Some(chain) = nsec_chain_of(zone, transferred) else { return Vec::new() };
    let mut records = Vec::new();
    for (owner, nsec) in chain {
        // The zone's own copy of the owner, which outlives this chain.
        let (owner, _) = zone.nodes.get_key_value(&owner).expect("the chain's owners are the zone's");
        let Rrset { ttl, rdatas, rrsigs: signatures, .. } = nsec;
        records.extend(rdatas.into_iter().map(|rdata| Record { owner, rtype: NSEC, ttl, rdata: rdata.into_vec().into() }));
        records.extend(signatures.into_iter().map(|rrsig| Record { owner, rtype: types::RRSIG, ttl, rdata: rrsig.into_vec().into() }));
    }
    records
}

/// The enabled replicas of the service at `owner`, as A and AAAA records.
fn replica_records<'z>(owner: &'z [u8], snapshot: &Snapshot) -> Vec<Record<'z>> {
    let Some(service) = snapshot.routes.service(owner) else { return Vec::new() };
    routed_records(owner, service)
        .map(|record| Record { owner, rtype: record.rtype, ttl: record.ttl, rdata: record.rdata.into_vec().into() })
        .collect()
}

/// What a secondary is given for `service`, named `owner`: an A or AAAA
/// record for each enabled replica, at the service's TTL (capped as its
/// answers are). A zone's versions ([`pharos_zone::journal`]) count these.
pub fn routed_records<'s>(owner: &'s [u8], service: &'s Service) -> impl Iterator<Item = journal::Record> + 's {
    let ttl = service.ttl_cap.map_or(service.ttl, |cap| service.ttl.min(cap));
    service.replicas.iter().filter(|replica| replica.enabled).map(move |replica| {
        let (rtype, rdata): (u16, Box<[u8]>) = match replica.address {
            IpAddr::V4(v4) => (types::A, v4.octets().into()),
            IpAddr::V6(v6) => (types::AAAA, v6.octets().into()),
        };
        journal::Record { owner: owner.into(), rtype, rdata, ttl }
    })
}

/// Writes `records` into messages of at most `room` octets (the OPT
/// record aside), the question in the first only (RFC 5936 section
/// 2.2.1 allows either), and hands each to `send`.
fn write_messages(
    query: &Query<'_>,
    records: &[Record<'_>],
    room: usize,
    opt: OptSource<'_>,
    message: &mut Vec<u8>,
    mut send: impl FnMut(&mut Vec<u8>),
) {
    let mut remaining = records;
    let mut first = true;
    while !remaining.is_empty() {
        message.clear();
        let mut writer = MessageWriter::new(message);
        if first {
            writer.question(query.question_bytes());
        }
        let mut written = 0;
        for record in remaining {
            let before = writer.len();
            writer.record(record.owner, record.rtype, types::CLASS_IN, record.ttl, &record.rdata);
            // The first record of a message stays whatever its size: no
            // other message would hold it either.
            if writer.len() > room && written > 0 {
                writer.truncate(before);
                break;
            }
            written += 1;
        }
        let counts = [u16::from(first), written as u16, 0, 0];
        finish(&mut writer, query, &Outcome { flags: flags::AA, rcode: rcode::NOERROR, counts, scope: 0, extended: None }, opt);
        send(message);
        remaining = &remaining[written..];
        first = false;
    }
}
