//! Signing a zone at load (RFC 4035 section 2): the DNSKEY RRset at the
//! apex, RRSIGs over every authoritative RRset, and at every name an NSEC
//! for compact denial (RFC 9824) that answers lacking a type carry.
//!
//! Denial of existence is compact rather than a chain of NSEC records over
//! the zone: a name that exists proves which types it lacks with an NSEC at
//! itself, built here; a name that does not exist gets, per query, an NSEC
//! at itself whose bitmap holds NXNAME (see [`crate::lookup`]). No record
//! names a neighbour, so the zone cannot be walked, and a name a routing
//! policy adds or removes changes no other name's proof. A secondary has
//! no signer: a zone transfer carries the chain of NSEC records over the
//! zone's names instead ([`nsec_chain_of`]), made when it is asked for. A routed name's
//! NSEC lists the address types its replicas have, so that no resolver
//! infers from it (RFC 8198) that the name has no addresses.

use pharos_dnssec::keys::DNSKEY;
use pharos_dnssec::{NSEC, Signer, nsec_chain, nsec_rdata};
use pharos_wire::types;

use crate::zone::{Node, Rrset, Zone};

/// Signs `zone` with `signer`, replacing any DNSKEY RRset its file held.
pub(crate) fn sign_zone(zone: &mut Zone, signer: &Signer) {
    let key_ttl = zone.soa().ttl;
    let apex = zone.nodes.get_mut(&zone.origin).expect("a loaded zone has an apex");
    apex.rrsets.retain(|rrset| rrset.rtype != DNSKEY);
    apex.rrsets.push(Rrset { rtype: DNSKEY, ttl: key_ttl, rdatas: signer.dnskey_rdatas(), rrsigs: Vec::new() });
    apex.rrsets.sort_by_key(|rrset| rrset.rtype);
    let negative_ttl = zone.negative_ttl;
    for (name, is_cut, present) in authoritative_names(zone, &|_, node| node.routed_types.clone()) {
        let node = zone.nodes.get_mut(&name).expect("listed from the zone");
        // At a cut only the DS is the parent's; NS and glue are the child's.
        let signed = |rtype: u16| !is_cut || rtype == types::DS;
        for rrset in node.rrsets.iter_mut().filter(|rrset| signed(rrset.rtype)) {
            rrset.rrsigs = signer.sign(&name, rrset.rtype, rrset.ttl, &rrset.rdatas);
        }
        let rdatas = vec![nsec_rdata(&name, present)];
        let rrsigs = signer.sign(&name, NSEC, negative_ttl, &rdatas);
        node.nsec = Some(Rrset { rtype: NSEC, ttl: negative_ttl, rdatas, rrsigs });
    }
}

/// The zone's names that hold authoritative data (not below a cut or a
/// DNAME), each with whether it is a cut and the types an NSEC at it
/// lists: at a cut NS and DS only; at a service's name the types
/// `routed` gives; RRSIG and NSEC.
fn authoritative_names(zone: &Zone, routed: &dyn Fn(&[u8], &Node) -> Vec<u16>) -> Vec<(Box<[u8]>, bool, Vec<u16>)> {
    let authoritative = zone.nodes.iter().filter(|(name, _)| !zone.is_occluded(name));
    authoritative
        .map(|(name, node)| {
            let is_cut = zone.is_cut(name, node);
            let listed = |rtype: &u16| !is_cut || *rtype == types::NS || *rtype == types::DS;
            let stored = node.rrsets.iter().map(|rrset| rrset.rtype).filter(listed);
            let present = stored.chain(routed(name, node)).chain([types::RRSIG, NSEC]).collect();
            (name.clone(), is_cut, present)
        })
        .collect()
}

/// The NSEC chain of a signed `zone` over its authoritative names, each
/// NSEC signed (owner and RRset), a service's name listing the types
/// `transferred` says its records have: what a secondary serves in place
/// of compact denial, which only a signer can give. `None` for an
/// unsigned zone.
pub fn nsec_chain_of(zone: &Zone, transferred: impl Fn(&[u8]) -> Vec<u16>) -> Option<Vec<(Box<[u8]>, Rrset)>> {
    let signer = zone.signer.as_ref()?;
    let routed = |name: &[u8], node: &Node| if node.routed_types.is_empty() { Vec::new() } else { transferred(name) };
    // A name whose NSEC would list only itself and its RRSIG holds no
    // data (an empty non-terminal, a service with no replica): no NSEC
    // (RFC 4035 section 2.3).
    let names = authoritative_names(zone, &routed).into_iter().filter(|(_, _, present)| present.len() > 2);
    let owners = names.map(|(name, _, present)| (name, present)).collect();
    let chain = nsec_chain(owners).into_iter().map(|(owner, rdata)| {
        let rdatas = vec![rdata];
        let rrsigs = signer.sign(&owner, NSEC, zone.negative_ttl, &rdatas);
        (owner, Rrset { rtype: NSEC, ttl: zone.negative_ttl, rdatas, rrsigs })
    });
    Some(chain.collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pharos_dnssec::keys::{Algorithm, Role};
    use pharos_dnssec::{NXNAME, Window, ZoneKey, ZoneKeys};
    use pharos_wire::rcode;

    use super::*;
    use crate::lookup::{ADDITIONAL, ANSWER, AUTHORITY, Answer, Records, resolve};
    use crate::parse_zone_text;

    const TEXT: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n\
                        a.b A 192.0.2.2\nlab NS ns.lab\nns.lab A 192.0.2.99\nsigned NS ns.lab\nsigned DS 1 13 2 00\n";

    fn signed_zone() -> Zone {
        signed_zone_of(TEXT)
    }

    fn signed_zone_of(text: &str) -> Zone {
        let mut zone = parse_zone_text("example.test", text, "test").unwrap();
        let random = ring::rand::SystemRandom::new();
        let keys = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::Ed25519, Role::Csk, &random).unwrap()] };
        let signer = Signer::new(&zone.origin, keys, Window::from_now(1_800_000_000, 86_400), 1_800_000_000).unwrap();
        zone.signer = Some(Arc::new(signer));
        let signer = zone.signer.clone().unwrap();
        sign_zone(&mut zone, &signer);
        zone
    }

    fn name(dotted: &str) -> Vec<u8> {
        pharos_wire::name::from_dotted(dotted).unwrap()
    }

    /// Type and RRSIG count of each entry of a section.
    fn section(answer: &Answer<'_>, index: usize) -> Vec<(u16, usize)> {
        answer.sections[index].iter().map(|entry| (entry.rtype, entry.rrsigs.as_slice().len())).collect()
    }

    /// The type bitmap's window 0 of an NSEC made by `nsec_rdata` for `owner`.
    fn bitmap_lists(rdata: &[u8], owner: &[u8], rtype: u16) -> bool {
        lists_past(rdata, owner.len() + 2, rtype)
    }

    /// The type bitmap's window 0 of an NSEC whose next name takes
    /// `next_len` octets.
    fn lists_past(rdata: &[u8], next_len: usize, rtype: u16) -> bool {
        let bitmap = &rdata[next_len..];
        let (octet, bit) = (usize::from(rtype) / 8, rtype % 8);
        bitmap[0] == 0 && usize::from(bitmap[1]) > octet && bitmap[2 + octet] & (0x80 >> bit) != 0
    }

    #[test]
    fn authoritative_data_is_signed_and_the_rest_is_not() {
        let zone = signed_zone();
        let apex = zone.apex();
        assert!(apex.get(DNSKEY).is_some_and(|keys| keys.rdatas.len() == 1 && keys.rrsigs.len() == 1));
        assert!(apex.get(types::NS).is_some_and(|ns| ns.rrsigs.len() == 1), "the apex NS is the zone's own");
        let lab = zone.node(&name("lab.example.test")).unwrap();
        assert!(lab.get(types::NS).unwrap().rrsigs.is_empty(), "a delegation's NS is the child's");
        assert!(zone.node(&name("ns.lab.example.test")).unwrap().get(types::A).unwrap().rrsigs.is_empty(), "glue");
        assert!(zone.node(&name("ns.lab.example.test")).unwrap().nsec.is_none(), "no proof below a cut");
        let signed = zone.node(&name("signed.example.test")).unwrap();
        assert_eq!(signed.get(types::DS).unwrap().rrsigs.len(), 1);
        let ent = name("b.example.test");
        let proof = &zone.node(&ent).unwrap().nsec.as_ref().unwrap().rdatas[0];
        assert!(bitmap_lists(proof, &ent, NSEC) && bitmap_lists(proof, &ent, types::RRSIG) && !bitmap_lists(proof, &ent, types::A));
    }

    #[test]
    fn signed_answers_carry_rrsigs_proofs_and_compact_denial() {
        let zone = signed_zone();
        let positive = resolve(&zone, &name("ns.example.test"), types::A, true);
        assert_eq!(section(&positive, ANSWER), [(types::A, 1)]);
        let nodata = resolve(&zone, &name("ns.example.test"), types::TXT, true);
        assert_eq!(section(&nodata, AUTHORITY), [(types::SOA, 1), (NSEC, 1)]);
        let missing = name("nope.example.test");
        let absent = resolve(&zone, &missing, types::A, true);
        assert_eq!(absent.rcode, rcode::NOERROR, "compact denial answers NOERROR");
        assert_eq!(section(&absent, AUTHORITY), [(types::SOA, 1), (NSEC, 1)]);
        let Records::Made(rdata) = &absent.sections[AUTHORITY][1].records else { panic!("a made NSEC") };
        assert!(bitmap_lists(rdata, &missing, NSEC) && !bitmap_lists(rdata, &missing, types::A));
        assert_eq!(rdata[rdata.len() - 1], 0x80, "NXNAME ({NXNAME}) ends the bitmap");
        let unsigned_child = resolve(&zone, &name("host.lab.example.test"), types::A, true);
        assert_eq!(section(&unsigned_child, AUTHORITY), [(types::NS, 0), (NSEC, 1)]);
        assert_eq!(section(&unsigned_child, ADDITIONAL), [(types::A, 0)]);
        let signed_child = resolve(&zone, &name("host.signed.example.test"), types::A, true);
        assert_eq!(section(&signed_child, AUTHORITY), [(types::NS, 0), (types::DS, 1)]);
    }

    #[test]
    fn one_built_entry_per_name_answers_both_do_bits() {
        let unsigned = parse_zone_text("other.test", "@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ 300 NS ns\n", "test").unwrap();
        let set = crate::ZoneSet::new(vec![signed_zone(), unsigned]).unwrap();
        let built = |qname: &str, dnssec| match set.lookup(&name(qname), types::NS, dnssec) {
            crate::Lookup::Built(body) => body as *const crate::Body,
            other => panic!("{qname}: {other:?}"),
        };
        assert_eq!(built("other.test", true), built("other.test", false), "an unsigned zone has one answer for both");
        assert_ne!(built("example.test", true), built("example.test", false), "a signed zone has two");
        let fast_path: Vec<&[u8]> = set.built_names().map(|(owner, _)| owner).collect();
        assert_eq!(fast_path, [&name("other.test")[..]], "only unsigned names go to the kernel fast path");
    }

    #[test]
    fn a_routed_nodata_denies_the_type_its_stored_proof_lists() {
        let mut zone = signed_zone();
        let routed = name("app.example.test");
        zone.reserve_name(&routed, &[types::A, types::AAAA]).unwrap();
        let signer = zone.signer.clone().unwrap();
        sign_zone(&mut zone, &signer);
        let stored = &zone.node(&routed).unwrap().nsec.as_ref().unwrap().rdatas[0];
        assert!(bitmap_lists(stored, &routed, types::A), "replicas have IPv4 addresses");
        let nodata = crate::lookup::routed_nodata(&zone, &routed, types::A);
        assert_eq!(
            (nodata.rcode, section(&nodata, ANSWER), section(&nodata, AUTHORITY)),
            (rcode::NOERROR, vec![], vec![(types::SOA, 1), (NSEC, 1)])
        );
        let Records::Made(rdata) = &nodata.sections[AUTHORITY][1].records else { panic!("a made NSEC") };
        assert!(!bitmap_lists(rdata, &routed, types::A) && bitmap_lists(rdata, &routed, types::AAAA) && bitmap_lists(rdata, &routed, NSEC));
    }

    #[test]
    fn do_zero_answers_of_a_signed_zone_carry_nothing_of_dnssec() {
        let zone = signed_zone();
        let absent = resolve(&zone, &name("nope.example.test"), types::A, false);
        assert_eq!((absent.rcode, section(&absent, AUTHORITY)), (rcode::NXDOMAIN, vec![(types::SOA, 0)]));
        let referral = resolve(&zone, &name("host.lab.example.test"), types::A, false);
        assert_eq!(section(&referral, AUTHORITY), [(types::NS, 0)]);
    }

    #[test]
    fn the_transfer_chain_links_every_authoritative_name_in_canonical_order() {
        let mut zone = signed_zone();
        zone.reserve_name(&name("app.example.test"), &[types::A]).unwrap();
        let chain = nsec_chain_of(&zone, |_| vec![types::A]).expect("a signed zone has a chain");
        let owners: Vec<Vec<u8>> = chain.iter().map(|(owner, _)| owner.to_vec()).collect();
        // ns.lab is glue below the cut at lab: no NSEC; b is empty: none.
        let expected =
            ["example.test", "app.example.test", "a.b.example.test", "lab.example.test", "ns.example.test", "signed.example.test"];
        assert_eq!(owners, expected.map(name));
        for (index, (owner, nsec)) in chain.iter().enumerate() {
            let next = name(expected[(index + 1) % expected.len()]);
            assert!(nsec.rdatas[0].starts_with(&next), "{index}: names the next owner");
            assert_eq!(nsec.rrsigs.len(), 1, "{index}: signed");
            let listed = |rtype| lists_past(&nsec.rdatas[0], next.len(), rtype);
            assert!(listed(NSEC) && listed(types::RRSIG), "{index}: lists its own types");
            assert_eq!(listed(types::DS), **owner == *name("signed.example.test"), "{index}: DS only at the signed delegation");
        }
        assert!(lists_past(&chain[1].1.rdatas[0], name("a.b.example.test").len(), types::A), "the routed name's address type");
        let no_replicas = nsec_chain_of(&zone, |_| Vec::new()).unwrap();
        assert!(
            no_replicas.iter().all(|(owner, _)| **owner != *name("app.example.test")),
            "a service with nothing to transfer has no NSEC"
        );
        assert!(nsec_chain_of(&parse_zone_text("example.test", TEXT, "test").unwrap(), |_| Vec::new()).is_none(), "unsigned: no chain");
    }

    /// RFC 4035 and RFC 9824 as a query can test them: an explicit RRSIG
    /// query, DS asked at a cut, wildcards, and NXNAME in no bitmap but a
    /// nonexistent name's.
    #[test]
    fn explicit_rrsig_and_ds_queries_wildcards_and_bitmaps_follow_rfc_4035_and_9824() {
        let zone = signed_zone_of(&format!("{TEXT}alias CNAME ns\n*.wild A 192.0.2.7\n"));
        let answered = |qname: &str, qtype: u16, dnssec: bool| {
            let answer = resolve(&zone, &name(qname), qtype, dnssec);
            (answer.rcode, answer.authoritative, section(&answer, ANSWER), section(&answer, AUTHORITY))
        };
        let signatures = (rcode::NOERROR, true, vec![(types::RRSIG, 1)], vec![]);
        // Explicit RRSIG: one RRset's signatures, not a NODATA that the
        // name's NSEC (listing RRSIG) would contradict; at a CNAME, its own.
        assert_eq!(answered("ns.example.test", types::RRSIG, true), signatures);
        assert_eq!(answered("alias.example.test", types::RRSIG, true), signatures, "the CNAME not followed");
        assert_eq!(answered("b.example.test", types::RRSIG, true), signatures, "an empty non-terminal's NSEC's");
        assert_eq!(answered("x.wild.example.test", types::RRSIG, true), signatures, "a wildcard's, made for the name");
        // DO=0: no DNSSEC records unless asked for, and asked, the unsigned zone's answer.
        assert_eq!(answered("ns.example.test", types::RRSIG, false), (rcode::NOERROR, true, vec![], vec![(types::SOA, 0)]));
        assert_eq!(answered("ns.example.test", types::A, false).2, [(types::A, 0)]);
        // DS lives on the parent side of a cut (RFC 4035 section 3.1.4.1):
        // answered with authority, signed; its absence proven by the cut's NSEC.
        assert_eq!(answered("signed.example.test", types::DS, true), (rcode::NOERROR, true, vec![(types::DS, 1)], vec![]));
        let no_ds = resolve(&zone, &name("lab.example.test"), types::DS, true);
        assert_eq!((no_ds.authoritative, section(&no_ds, AUTHORITY)), (true, vec![(types::SOA, 1), (NSEC, 1)]));
        let Records::Stored(cut_nsec) = &no_ds.sections[AUTHORITY][1].records else { panic!("the cut's NSEC") };
        let cut = name("lab.example.test");
        assert!(bitmap_lists(&cut_nsec.rdatas[0], &cut, types::NS) && !bitmap_lists(&cut_nsec.rdatas[0], &cut, types::DS));
        // A wildcard's answer is signed as if the name existed (RRSIG labels
        // of the name asked for, RFC 4035 section 5.3.2), with no proof beside it.
        let wild = resolve(&zone, &name("x.wild.example.test"), types::A, true);
        assert_eq!((section(&wild, ANSWER), section(&wild, AUTHORITY)), (vec![(types::A, 1)], vec![]));
        assert_eq!(wild.sections[ANSWER][0].rrsigs.as_slice()[0][3], 4, "x.wild.example.test has 4 labels");
        // RFC 9824 section 3: NXNAME marks a nonexistent name only, never
        // an empty non-terminal, a NODATA or a wildcard's NODATA.
        for (qname, qtype) in [("b.example.test", types::A), ("ns.example.test", types::TXT), ("x.wild.example.test", types::TXT)] {
            let nodata = resolve(&zone, &name(qname), qtype, true);
            assert_eq!(section(&nodata, AUTHORITY), [(types::SOA, 1), (NSEC, 1)], "{qname}");
            let rdata = match &nodata.sections[AUTHORITY][1].records {
                Records::Stored(nsec) => nsec.rdatas[0].clone(),
                Records::Made(rdata) => rdata.clone(),
                Records::Signatures => panic!("{qname}: an NSEC"),
            };
            assert!(!bitmap_lists(&rdata, &name(qname), NXNAME) && !bitmap_lists(&rdata, &name(qname), qtype), "{qname}");
        }
    }
}
