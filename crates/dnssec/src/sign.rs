//! RRSIG records over RRsets, and NSEC records for compact denial.
//!
//! Signing follows RFC 4034 section 3.1.8.1: the signed data is the RRSIG
//! record data without its signature, then every record of the RRset in
//! canonical form (owner lowercase, names inside the record data of the
//! types RFC 4034 section 6.2 lists lowercase, as `domain` composes them)
//! and canonical order (by record data), duplicates once.
//!
//! Signatures made per query (routed answers, wildcards, denials) are
//! cached, so that every order of the same addresses, asked again and
//! again, is signed once: bounded caches shared by every thread, dropped
//! with their signer when the zone is signed again. Wildcards and denials
//! are keyed by the signed data and the window; routed answers, the hot
//! path, by the owner, TTL and sorted addresses, which a query has at hand.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use domain::base::cmp::CanonicalOrd;
use domain::base::iana::Rtype;
use domain::base::name::ParsedName;
use domain::base::rdata::{ComposeRecordData, ParseRecordData};
use domain::dep::octseq::Parser;
use domain::rdata::ZoneRecordData;
use domain::rdata::dnssec::RtypeBitmap;
use pharos_wire::name::{self, MAX_NAME_LEN};
use pharos_wire::types;
use quick_cache::Equivalent;
use quick_cache::sync::Cache;
use ring::rand::SystemRandom;

use crate::keys::{KeyState, ZoneKeys};

/// The NSEC record type (RFC 4034 section 4).
pub const NSEC: u16 = 47;
/// The NXNAME meta type of compact denial (RFC 9824 section 2): in an
/// NSEC's type bitmap, it says that the owner name does not exist.
pub const NXNAME: u16 = 128;

/// How many RRsets' signatures the per-query cache keeps: some tens of
/// MB at most, and more than the distinct answers of a zone's services.
const CACHED_RRSETS: usize = 65_536;

/// The RRSIGs' data over one RRset.
pub type Rrsigs = Arc<[Box<[u8]>]>;

/// How far before now signatures start, so that a validator whose clock
/// is behind ours still accepts them.
const INCEPTION_SKEW: u64 = 3600;

/// When signatures are valid, in seconds since the epoch (RFC 4034
/// section 3.1.5 writes them modulo 2^32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    pub inception: u32,
    pub expiration: u32,
}

impl Window {
    /// Valid from an hour before `now` (Unix seconds) until `validity`
    /// seconds after it.
    pub fn from_now(now: u64, validity: u32) -> Window {
        Window { inception: now.saturating_sub(INCEPTION_SKEW) as u32, expiration: (now + u64::from(validity)) as u32 }
    }
}

/// What an address RRset is made of, as the per-query cache keys it:
/// cheap to build from a routing decision (no record data, no parse), and
/// hashed alike whether owned (in the cache) or borrowed (a query's).
#[derive(Debug, PartialEq, Eq, Hash)]
struct AddressSet {
    owner: Box<[u8]>,
    ttl: u32,
    /// Sorted: the same set in any order is the same key.
    addresses: Box<[IpAddr]>,
}

/// An [`AddressSet`] borrowed from a query, to look the cache up with.
#[derive(Hash)]
struct AddressSetRef<'a> {
    owner: &'a [u8],
    ttl: u32,
    addresses: &'a [IpAddr],
}

impl Equivalent<AddressSet> for AddressSetRef<'_> {
    fn equivalent(&self, key: &AddressSet) -> bool {
        self.owner == &*key.owner && self.ttl == key.ttl && self.addresses == &*key.addresses
    }
}

/// The signer of one zone at one time: its keys in the states they are
/// in then, and the window of the signatures made.
pub struct Signer {
    /// Lowercase wire form: the signer's name in every RRSIG.
    zone: Box<[u8]>,
    /// The keys of the DNSKEY RRset: published, active or retired.
    keys: ZoneKeys,
    /// Whether each of `keys` is active, and so signs.
    signing: Vec<bool>,
    /// When a key next changes state: this signer is stale from then on.
    next_step: Option<u64>,
    window: Window,
    random: SystemRandom,
    /// Keyed by the window and the RRset's canonical records, which hold
    /// its owner, type, TTL and content.
    cache: Cache<(Window, Box<[u8]>), Rrsigs>,
    /// The routed answers' address RRsets (A or AAAA by the addresses' family).
    addresses: Cache<AddressSet, Rrsigs>,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("zone", &name::Display(&self.zone).to_string())
            .field("keys", &self.keys)
            .field("window", &self.window)
            .finish()
    }
}

/// A zone's keys cannot sign it: none active for the DNSKEY RRset, or
/// none for the rest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("zone {} needs an active CSK, or an active KSK and ZSK: run `pharos key generate` (or see `pharos key show`)", name::Display(zone))]
pub struct NoActiveKeys {
    /// The zone's origin, as a wire name.
    pub zone: Box<[u8]>,
}

impl Signer {
    /// A signer for the zone `origin` (lowercase wire form) with its keys
    /// in the states they are in at `now` (Unix seconds). A zone needs an
    /// active key for the DNSKEY RRset and one for the rest.
    pub fn new(origin: &[u8], keys: ZoneKeys, window: Window, now: u64) -> Result<Signer, NoActiveKeys> {
        let next_step = keys.next_step(now);
        let keys = ZoneKeys { keys: keys.keys.into_iter().filter(|key| key.times.state(now) != KeyState::Removed).collect() };
        let signing: Vec<bool> = keys.keys.iter().map(|key| key.times.state(now) == KeyState::Active).collect();
        let covers = |rtype| keys.keys.iter().zip(&signing).any(|(key, &active)| active && key.signs(rtype));
        if !covers(crate::keys::DNSKEY) || !covers(types::SOA) {
            return Err(NoActiveKeys { zone: origin.into() });
        }
        Ok(Signer {
            zone: origin.into(),
            keys,
            signing,
            next_step,
            window,
            random: SystemRandom::new(),
            cache: Cache::new(CACHED_RRSETS),
            addresses: Cache::new(CACHED_RRSETS),
        })
    }

    /// When a key changes state next (Unix seconds): the zone must be
    /// signed again then, by a new signer.
    pub fn next_step(&self) -> Option<u64> {
        self.next_step
    }

    /// The record data of the zone's DNSKEY RRset, published at the apex.
    pub fn dnskey_rdatas(&self) -> Vec<Box<[u8]>> {
        self.keys.keys.iter().map(|key| key.dnskey_rdata().into()).collect()
    }

    /// The RRSIG record data over the RRset `rdatas` of type `rtype` owned
    /// by `owner` (lowercase wire form) with `ttl`: one per key that signs
    /// the type.
    pub fn sign(&self, owner: &[u8], rtype: u16, ttl: u32, rdatas: &[Box<[u8]>]) -> Vec<Box<[u8]>> {
        self.sign_records(rtype, ttl, &canonical_records(owner, rtype, ttl, rdatas))
    }

    /// Like [`Signer::sign`], for a query: from the cache when the same
    /// RRset (in any order) was signed before in this window.
    pub fn sign_cached(&self, owner: &[u8], rtype: u16, ttl: u32, rdatas: &[Box<[u8]>]) -> Rrsigs {
        let key = (self.window, canonical_records(owner, rtype, ttl, rdatas).into_boxed_slice());
        if let Some(rrsigs) = self.cache.get(&key) {
            return rrsigs;
        }
        let rrsigs: Rrsigs = self.sign_records(rtype, ttl, &key.1).into();
        self.cache.insert(key, rrsigs.clone());
        rrsigs
    }

    /// Like [`Signer::sign_cached`], for the address RRset of a routed
    /// answer: `addresses`, all of one family, owned by `owner` (lowercase
    /// wire form), are sorted in place and the set looked up as it is, so
    /// that a hit costs a sort and a hash; the records are made only to
    /// sign a set seen for the first time.
    pub fn sign_addresses(&self, owner: &[u8], ttl: u32, addresses: &mut [IpAddr]) -> Rrsigs {
        addresses.sort_unstable();
        if let Some(rrsigs) = self.addresses.get(&AddressSetRef { owner, ttl, addresses }) {
            return rrsigs;
        }
        let rtype = if addresses.first().is_some_and(IpAddr::is_ipv6) { types::AAAA } else { types::A };
        let rdatas: Vec<Box<[u8]>> = addresses.iter().map(address_rdata).collect();
        let rrsigs: Rrsigs = self.sign(owner, rtype, ttl, &rdatas).into();
        self.addresses.insert(AddressSet { owner: owner.into(), ttl, addresses: addresses.into() }, rrsigs.clone());
        rrsigs
    }

    /// How many RRsets the per-query caches hold signatures for.
    pub fn cached(&self) -> usize {
        self.cache.len() + self.addresses.len()
    }

    /// Signs `records`, an RRset of type `rtype` and `ttl` in canonical form and order.
    fn sign_records(&self, rtype: u16, ttl: u32, records: &[u8]) -> Vec<Box<[u8]>> {
        let owner_len = name::uncompressed_len(records, 0).expect("canonical records start with their owner");
        let owner = &records[..owner_len];
        self.keys
            .keys
            .iter()
            .zip(&self.signing)
            .filter(|(key, active)| **active && key.signs(rtype))
            .map(|(key, _)| {
                let mut rrsig = Vec::with_capacity(18 + self.zone.len() + 64);
                rrsig.extend_from_slice(&rtype.to_be_bytes());
                rrsig.push(key.algorithm.number());
                rrsig.push(signed_labels(owner));
                rrsig.extend_from_slice(&ttl.to_be_bytes());
                rrsig.extend_from_slice(&self.window.expiration.to_be_bytes());
                rrsig.extend_from_slice(&self.window.inception.to_be_bytes());
                rrsig.extend_from_slice(&key.key_tag().to_be_bytes());
                rrsig.extend_from_slice(&self.zone);
                let signature = key.sign(&[&rrsig[..], records].concat(), &self.random);
                rrsig.extend_from_slice(&signature);
                rrsig.into_boxed_slice()
            })
            .collect()
    }
}

/// An address's record data: 4 octets for A, 16 for AAAA.
fn address_rdata(address: &IpAddr) -> Box<[u8]> {
    match address {
        IpAddr::V4(v4) => Box::new(v4.octets()),
        IpAddr::V6(v6) => Box::new(v6.octets()),
    }
}

/// The Labels field: the owner's labels, the root and a leading wildcard
/// label not counted (RFC 4034 section 3.1.3).
fn signed_labels(owner: &[u8]) -> u8 {
    let labels = name::label_count(owner);
    let wildcard = owner.starts_with(b"\x01*");
    (labels - usize::from(wildcard)) as u8
}

/// Every record of the RRset in canonical form and order, concatenated.
fn canonical_records(owner: &[u8], rtype: u16, ttl: u32, rdatas: &[Box<[u8]>]) -> Vec<u8> {
    let mut canonical: Vec<Vec<u8>> = rdatas.iter().map(|rdata| canonical_rdata(rtype, rdata)).collect();
    canonical.sort();
    canonical.dedup();
    let owner = owner.to_ascii_lowercase();
    let mut records = Vec::new();
    for rdata in canonical {
        records.extend_from_slice(&owner);
        records.extend_from_slice(&rtype.to_be_bytes());
        records.extend_from_slice(&types::CLASS_IN.to_be_bytes());
        records.extend_from_slice(&ttl.to_be_bytes());
        records.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        records.extend_from_slice(&rdata);
    }
    records
}

/// Record data in canonical form: `domain` parses it (the zone loader
/// wrote it, so it parses) and composes it with the names RFC 4034 section
/// 6.2 (as RFC 6840 section 5.1 amends it) lowercases in lowercase. Data
/// it cannot parse is kept as it is.
fn canonical_rdata(rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut parser = Parser::from_ref(rdata);
    let parsed = ZoneRecordData::<&[u8], ParsedName<&[u8]>>::parse_rdata(Rtype::from_int(rtype), &mut parser);
    let mut canonical = Vec::with_capacity(rdata.len());
    match parsed {
        Ok(Some(data)) if parser.remaining() == 0 && data.compose_canonical_rdata(&mut canonical).is_ok() => canonical,
        _ => rdata.to_vec(),
    }
}

/// The record data of an NSEC owned by `owner` (lowercase wire form) that
/// lists `present` types, for compact denial (RFC 9824 section 3): the next
/// name is the owner's immediate successor `\000.owner`, so the record
/// covers no other name. Where that successor would be longer than a name
/// may be, the next name is the owner itself: the record then says only
/// what the owner holds.
pub fn nsec_rdata(owner: &[u8], present: impl IntoIterator<Item = u16>) -> Box<[u8]> {
    let mut next = Vec::with_capacity(owner.len() + 2);
    if owner.len() + 2 <= MAX_NAME_LEN {
        next.extend_from_slice(&[1, 0]);
    }
    next.extend_from_slice(owner);
    nsec_rdata_naming(&next, present)
}

/// The record data of an NSEC naming `next` (wire form) as the next
/// owner and listing `present` types.
fn nsec_rdata_naming(next: &[u8], present: impl IntoIterator<Item = u16>) -> Box<[u8]> {
    let mut rdata = Vec::with_capacity(next.len() + 34);
    rdata.extend_from_slice(&next.to_ascii_lowercase());
    let mut bitmap = RtypeBitmap::<Vec<u8>>::builder();
    for rtype in present {
        bitmap.add(Rtype::from_int(rtype)).expect("a Vec grows");
    }
    rdata.extend_from_slice(bitmap.finalize().as_slice());
    rdata.into_boxed_slice()
}

/// An owner name (wire form) and the types present at it.
pub type OwnerTypes = (Box<[u8]>, Vec<u16>);

/// An owner name (wire form) and its NSEC's record data.
pub type ChainLink = (Box<[u8]>, Box<[u8]>);

/// The NSEC chain over a zone's `owners` (RFC 4034 section 4.1; wire
/// form, each with the types present at it, the zone's apex among them):
/// sorted in canonical order (section 6.1), each owner's NSEC names the
/// owner after it, the last the first (the apex). For a secondary, which
/// has no signer to deny names with one by one.
pub fn nsec_chain(mut owners: Vec<OwnerTypes>) -> Vec<ChainLink> {
    owners.sort_by(|(a, _), (b, _)| canonical_name(a).canonical_cmp(&canonical_name(b)));
    let nexts: Vec<Box<[u8]>> = owners.iter().cycle().skip(1).take(owners.len()).map(|(next, _)| next.clone()).collect();
    owners.into_iter().zip(nexts).map(|((owner, present), next)| (owner, nsec_rdata_naming(&next, present))).collect()
}

/// `wire` (an uncompressed name from the zone) as a name to compare in
/// canonical order.
fn canonical_name(wire: &[u8]) -> &domain::base::Name<[u8]> {
    domain::base::Name::from_slice(wire).expect("zone owners are valid names")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Algorithm, Role, ZoneKey};
    use ring::signature::{ECDSA_P256_SHA256_FIXED, ED25519, UnparsedPublicKey, VerificationAlgorithm};

    const ZONE: &[u8] = b"\x07example\x04test\x00";

    fn signer(algorithm: Algorithm, roles: &[Role]) -> Signer {
        let random = SystemRandom::new();
        let keys = ZoneKeys { keys: roles.iter().map(|role| ZoneKey::generate(algorithm, *role, &random).unwrap()).collect() };
        Signer::new(ZONE, keys, Window::from_now(1_800_000_000, 86_400), 1_800_000_000).unwrap()
    }

    /// Checks each RRSIG with ring against the DNSKEY whose tag it names.
    fn verify(signer: &Signer, owner: &[u8], rtype: u16, ttl: u32, rdatas: &[Box<[u8]>], rrsigs: &[Box<[u8]>]) {
        let records = canonical_records(owner, rtype, ttl, rdatas);
        for rrsig in rrsigs {
            let signed_part = 18 + ZONE.len();
            let tag = u16::from_be_bytes([rrsig[16], rrsig[17]]);
            let key = signer.keys.keys.iter().find(|key| key.key_tag() == tag).expect("the tag names a key");
            let algorithm: &dyn VerificationAlgorithm = match key.algorithm {
                Algorithm::EcdsaP256Sha256 => &ECDSA_P256_SHA256_FIXED,
                Algorithm::Ed25519 => &ED25519,
            };
            let public_key = &key.dnskey_rdata()[4..];
            let public_key =
                if key.algorithm == Algorithm::EcdsaP256Sha256 { [&[4u8][..], public_key].concat() } else { public_key.to_vec() };
            let data = [&rrsig[..signed_part], &records].concat();
            UnparsedPublicKey::new(algorithm, public_key).verify(&data, &rrsig[signed_part..]).expect("the signature verifies");
        }
    }

    #[test]
    fn signatures_verify_and_ignore_record_order_and_case() {
        for algorithm in [Algorithm::EcdsaP256Sha256, Algorithm::Ed25519] {
            let signer = signer(algorithm, &[Role::Csk]);
            let owner = b"\x03www\x07example\x04test\x00";
            let rdatas: Vec<Box<[u8]>> = vec![Box::new([192, 0, 2, 2]), Box::new([192, 0, 2, 1])];
            let rrsigs = signer.sign(owner, types::A, 300, &rdatas);
            assert_eq!(rrsigs.len(), 1);
            let reversed: Vec<Box<[u8]>> = rdatas.iter().rev().cloned().collect();
            verify(&signer, b"\x03WWW\x07example\x04test\x00", types::A, 300, &reversed, &rrsigs);
            assert_eq!(rrsigs[0][3], 3, "three labels");
        }
    }

    #[test]
    fn names_inside_record_data_are_signed_lowercase() {
        let signer = signer(Algorithm::Ed25519, &[Role::Csk]);
        let upper: Vec<Box<[u8]>> = vec![b"\x00\x0a\x04MAIL\x07Example\x04TEST\x00"[..].into()];
        let lower: Vec<Box<[u8]>> = vec![b"\x00\x0a\x04mail\x07example\x04test\x00"[..].into()];
        let rrsigs = signer.sign(ZONE, types::MX, 60, &upper);
        verify(&signer, ZONE, types::MX, 60, &lower, &rrsigs);
    }

    #[test]
    fn the_ksk_signs_the_keys_and_the_zsk_the_rest() {
        let signer = signer(Algorithm::EcdsaP256Sha256, &[Role::Ksk, Role::Zsk]);
        let tag_of = |role| signer.keys.keys.iter().find(|key| key.role == role).unwrap().key_tag().to_be_bytes();
        let dnskeys = signer.dnskey_rdatas();
        let on_keys = signer.sign(ZONE, crate::keys::DNSKEY, 3600, &dnskeys);
        let on_soa = signer.sign(
            ZONE,
            types::SOA,
            3600,
            &[b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01"[..].into()],
        );
        assert_eq!((on_keys.len(), on_soa.len()), (1, 1));
        assert_eq!(on_keys[0][16..18], tag_of(Role::Ksk));
        assert_eq!(on_soa[0][16..18], tag_of(Role::Zsk));
        verify(&signer, ZONE, crate::keys::DNSKEY, 3600, &dnskeys, &on_keys);
    }

    #[test]
    fn published_and_retired_keys_are_in_the_dnskey_rrset_but_sign_nothing() {
        use crate::keys::KeyTimes;
        let random = SystemRandom::new();
        let now = 1_800_000_000;
        let zsk = |times| ZoneKey::generate(Algorithm::Ed25519, Role::Zsk, &random).unwrap().with_times(times);
        let retired = KeyTimes { published: 0, active: Some(0), retired: Some(now - 1), removed: Some(now + 50) };
        let removed = KeyTimes { published: 0, active: Some(0), retired: Some(1), removed: Some(now) };
        let published = KeyTimes { published: now, active: Some(now + 100), retired: None, removed: None };
        let keys = vec![
            ZoneKey::generate(Algorithm::Ed25519, Role::Ksk, &random).unwrap(),
            zsk(retired),
            zsk(removed),
            zsk(published),
            zsk(KeyTimes::active_from(0)),
        ];
        let tags: Vec<u16> = keys.iter().map(ZoneKey::key_tag).collect();
        let signer = Signer::new(ZONE, ZoneKeys { keys }, Window::from_now(now, 86_400), now).unwrap();
        assert_eq!(signer.dnskey_rdatas().len(), 4, "the removed key is gone");
        let rrsigs = signer.sign(ZONE, types::A, 60, &[Box::new([192, 0, 2, 1])]);
        assert_eq!(rrsigs.len(), 1);
        assert_eq!(rrsigs[0][16..18], tags[4].to_be_bytes(), "only the active ZSK signs");
        assert_eq!(signer.next_step(), Some(now + 50));
    }

    #[test]
    fn a_zone_without_a_key_for_every_rrset_is_refused() {
        let random = SystemRandom::new();
        let only_ksk = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::Ed25519, Role::Ksk, &random).unwrap()] };
        let error = Signer::new(ZONE, only_ksk, Window::from_now(0, 1), 0).unwrap_err();
        assert!(error.to_string().contains("needs an active CSK, or an active KSK and ZSK"), "{error}");
    }

    #[test]
    fn the_cache_signs_each_rrset_once_whatever_its_order() {
        let signer = signer(Algorithm::EcdsaP256Sha256, &[Role::Csk]);
        let owner = b"\x03app\x07example\x04test\x00";
        let forward: Vec<Box<[u8]>> = vec![Box::new([192, 0, 2, 1]), Box::new([192, 0, 2, 2])];
        let backward: Vec<Box<[u8]>> = forward.iter().rev().cloned().collect();
        let first = signer.sign_cached(owner, types::A, 60, &forward);
        // ECDSA signatures are randomized: the same bytes again come from the cache.
        assert_eq!(signer.sign_cached(b"\x03APP\x07example\x04test\x00", types::A, 60, &backward), first);
        assert_eq!(signer.cached(), 1);
        verify(&signer, owner, types::A, 60, &backward, &first);
        assert_ne!(signer.sign_cached(owner, types::A, 30, &forward), first, "another TTL is another RRset");
        assert_ne!(signer.sign_cached(owner, types::A, 60, &forward[..1]), first, "other content");
        assert_eq!(signer.cached(), 3);
    }

    #[test]
    fn routed_address_sets_are_signed_once_whatever_their_order() {
        let signer = signer(Algorithm::EcdsaP256Sha256, &[Role::Csk]);
        let owner = b"\x03app\x07example\x04test\x00";
        let v4: [IpAddr; 3] = ["192.0.2.2", "192.0.2.10", "192.0.2.1"].map(|address| address.parse().unwrap());
        let first = signer.sign_addresses(owner, 60, &mut v4.clone());
        let mut reversed = v4;
        reversed.reverse();
        // ECDSA signatures are randomized: the same bytes again come from the cache.
        assert_eq!(signer.sign_addresses(owner, 60, &mut reversed), first);
        assert_eq!(signer.cached(), 1);
        let rdatas: Vec<Box<[u8]>> = v4.iter().map(address_rdata).collect();
        verify(&signer, owner, types::A, 60, &rdatas, &first);
        assert_ne!(signer.sign_addresses(owner, 30, &mut v4.clone()), first, "another TTL is another RRset");
        assert_ne!(signer.sign_addresses(owner, 60, &mut v4[..2].to_vec()), first, "other content");
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let aaaa = signer.sign_addresses(owner, 60, &mut [v6]);
        assert_eq!(aaaa[0][..2], types::AAAA.to_be_bytes(), "IPv6 addresses make an AAAA RRset");
        verify(&signer, owner, types::AAAA, 60, &[address_rdata(&v6)], &aaaa);
        assert_eq!(signer.cached(), 4);
    }

    #[test]
    fn wildcard_owners_do_not_count_their_star() {
        assert_eq!(signed_labels(b"\x01*\x07example\x04test\x00"), 2);
        assert_eq!(signed_labels(b"\x00"), 0);
    }

    #[test]
    fn compact_denial_nsec_names_the_immediate_successor() {
        let rdata = nsec_rdata(b"\x03NOPE\x07example\x04test\x00", [NSEC, types::RRSIG, NXNAME]);
        let next = b"\x01\x00\x03nope\x07example\x04test\x00";
        assert_eq!(&rdata[..next.len()], next);
        // Window 0: RRSIG (46) and NSEC (47) in octet 5; NXNAME (128) is in octet 16.
        assert_eq!(&rdata[next.len()..], &[0, 17, 0, 0, 0, 0, 0, 0b0000_0011, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]);
        let long_owner = [&[63u8][..], &[b'a'; 63], &[63], &[b'b'; 63], &[63], &[b'c'; 63], &[61], &[b'd'; 61], &[0]].concat();
        assert_eq!(long_owner.len(), 255);
        assert!(nsec_rdata(&long_owner, [NSEC]).starts_with(&long_owner));
    }

    #[test]
    fn the_chain_runs_in_canonical_order_and_closes_at_the_apex() {
        // RFC 4034 section 6.1's example, lowercase as zone owners are.
        let ordered = [
            "example",
            "a.example",
            "yljkjljk.a.example",
            "z.a.example",
            "zabc.a.example",
            "z.example",
            "\\001.z.example",
            "*.z.example",
            "\\200.z.example",
        ];
        let wire = |text: &str| -> Box<[u8]> {
            let name: domain::base::Name<Vec<u8>> = text.parse().unwrap();
            name.into_octets().into_boxed_slice()
        };
        let mut shuffled: Vec<OwnerTypes> = ordered.iter().map(|text| (wire(text), vec![types::A, NSEC])).collect();
        shuffled.reverse();
        shuffled.swap(2, 5);
        let chain = nsec_chain(shuffled);
        let owners: Vec<Box<[u8]>> = chain.iter().map(|(owner, _)| owner.clone()).collect();
        assert_eq!(owners, ordered.iter().map(|text| wire(text)).collect::<Vec<_>>());
        for (index, (_, rdata)) in chain.iter().enumerate() {
            let next = &owners[(index + 1) % owners.len()];
            assert!(rdata.starts_with(next), "record {index} names the next owner");
            assert_eq!(rdata[next.len()..], nsec_rdata_naming(b"\0", [types::A, NSEC])[1..], "its types");
        }
    }
}
