//! A query for a service (docs/architecture.md, "One routing core"): the
//! routing core picks the addresses; asked with DO=1 in a signed zone, the
//! answer carries the RRSIGs over the addresses as a set, made once per
//! set (in any order) by the zone's signer and then cached, keyed by the
//! sorted addresses themselves: a hit makes no record data. A service
//! whose replicas are second-tier redirectors answers instead a CNAME to
//! the chosen one's name, whatever the type asked.

use std::net::IpAddr;

use pharos_dnssec::Signer;
use pharos_route::{Asker, Family, RegionId, Routed, Service, route};
use pharos_wire::{Edns, MessageWriter, types};
use pharos_zone::Fitted;
use rand::Rng;
use smallvec::SmallVec;

use crate::{Client, Settings, Snapshot};

/// The asker as the routing core sees it: the EDNS Client Subnet when the
/// query has one from a trusted sender, else the packet's source.
pub fn asker(client: &Client, edns: Option<Edns>, settings: &Settings) -> Asker {
    let trusted = settings.trusted_subnet_senders.as_ref().is_none_or(|senders| senders.lookup(client.address).value.is_some());
    match edns.and_then(|edns| edns.client_subnet).filter(|_| trusted) {
        Some(subnet) => Asker { address: subnet.ip(), known_bits: subnet.source_prefix, from_client_subnet: true },
        None => Asker::from_source(client.address),
    }
}

/// What [`write_addresses`] wrote besides the records.
pub struct Written {
    /// The ECS scope the answer depends on.
    pub scope: u8,
    /// The records' TTL.
    pub ttl: u32,
    /// The region the client was placed in.
    pub region: RegionId,
    /// The replica answered first.
    pub first_replica: usize,
}

/// Writes the address records the service's policy chose for this client,
/// signed by `signing`'s signer under its name (lowercase) if given.
/// Returns how much fit and what the decision was; `None`, writing nothing,
/// when the policy chose no replica (the name then answers like any name
/// without addresses: NODATA).
#[allow(clippy::too_many_arguments)] // the query's parts, each needed once
pub fn write_addresses(
    writer: &mut MessageWriter<'_>,
    service: &Service,
    family: Family,
    asker: &Asker,
    snapshot: &Snapshot,
    rng: &mut impl Rng,
    room: usize,
    signing: Option<(&Signer, &[u8])>,
) -> Option<(Fitted, Written)> {
    let Routed { location, decision } = route(&snapshot.routes, service, family, asker, rng, None);
    let body_start = writer.len();
    let mut fitted = write_decision(writer, service, &decision.replicas, decision.ttl, room)?;
    if let Some((signer, owner)) = signing
        && !fitted.truncated
    {
        let rrsigs = match cname_of(service, &decision.replicas) {
            Some(target) => signer.sign_cached(owner, types::CNAME, decision.ttl, &[Box::from(target)]),
            None => {
                let mut addresses: SmallVec<[IpAddr; 8]> = decision.replicas.iter().map(|&index| service.replicas[index].address).collect();
                signer.sign_addresses(owner, decision.ttl, &mut addresses)
            }
        };
        fitted = write_rrsigs(writer, body_start, &rrsigs, decision.ttl, room, fitted);
    }
    let first_replica = decision.replicas[0];
    Some((fitted, Written { scope: decision.scope, ttl: decision.ttl, region: location.region, first_replica }))
}

/// Writes the address records of `replicas` (indexes into the service's),
/// owned by the question, with `ttl`: all of them if they fit in `room`,
/// else none and truncation. `None`, writing nothing, when there is no
/// replica. The one encoder of routed answers: the query path uses it for
/// the decision it draws, the kernel fast path for each decision it may
/// draw, so both send the same octets.
pub fn write_decision(writer: &mut MessageWriter<'_>, service: &Service, replicas: &[usize], ttl: u32, room: usize) -> Option<Fitted> {
    if replicas.is_empty() {
        return None;
    }
    let body_start = writer.len();
    let question = pharos_wire::HEADER_LEN as u16;
    if let Some(target) = cname_of(service, replicas) {
        writer.record_at(question, types::CNAME, types::CLASS_IN, ttl, target);
        return Some(fit(writer, body_start, 1, room));
    }
    for &index in replicas {
        match service.replicas[index].address {
            IpAddr::V4(v4) => writer.address_record_at(question, ttl, &v4.octets()),
            IpAddr::V6(v6) => writer.address_record_at(question, ttl, &v6.octets()),
        }
    }
    Some(fit(writer, body_start, replicas.len() as u16, room))
}

/// The `records` written since `body_start` form one RRset: all of it
/// fits in `room`, or none and TC.
fn fit(writer: &mut MessageWriter<'_>, body_start: usize, records: u16, room: usize) -> Fitted {
    let length = writer.len() - body_start;
    if length > room {
        writer.truncate(body_start);
        return Fitted { len: 0, counts: [0; 3], truncated: true };
    }
    Fitted { len: length, counts: [records, 0, 0], truncated: false }
}

/// The name a service of second-tier redirectors sends the client to: the
/// first chosen one's (a CNAME is one record).
fn cname_of<'a>(service: &'a Service, replicas: &[usize]) -> Option<&'a [u8]> {
    service.replicas[*replicas.first()?].cname.as_deref()
}

/// Appends `rrsigs` to the addresses written since `body_start`, owned by
/// the question, and says how much fits: the RRset and its RRSIGs whole,
/// or neither and truncation.
fn write_rrsigs(writer: &mut MessageWriter<'_>, body_start: usize, rrsigs: &[Box<[u8]>], ttl: u32, room: usize, fitted: Fitted) -> Fitted {
    for rrsig in rrsigs {
        writer.record_at(pharos_wire::HEADER_LEN as u16, types::RRSIG, types::CLASS_IN, ttl, rrsig);
    }
    fit(writer, body_start, fitted.counts[0] + rrsigs.len() as u16, room)
}

/// The type of the RRset a routed answer of `service` carries for
/// `family`: CNAME for second-tier redirectors, else the family's addresses.
pub fn routed_type(service: &Service, family: Family) -> u16 {
    if service.redirectors_family().is_some() { types::CNAME } else { family_type(family) }
}

/// The record type of a family's addresses.
fn family_type(family: Family) -> u16 {
    match family {
        Family::V4 => types::A,
        Family::V6 => types::AAAA,
    }
}

/// Which family of addresses a question of `qtype` routes `service` on,
/// if any: a service answered by CNAME answers every type.
pub fn family_of(service: &Service, qtype: u16) -> Option<Family> {
    if let Some(family) = service.redirectors_family() {
        return Some(family);
    }
    match qtype {
        types::A | types::ANY => Some(Family::V4),
        types::AAAA => Some(Family::V6),
        _ => None,
    }
}
