//! DNSSEC keys of a zone: generation (through `ring`, never our own
//! primitives), their DNSKEY and DS records, and the text form they are kept
//! in (one store setting per zone).
//!
//! A zone has either one combined signing key (CSK, flags 257, signs every
//! RRset) or a key-signing key (flags 257, signs the DNSKEY RRset) and a
//! zone-signing key (flags 256, signs the rest): RFC 4034 section 2.1.1 and
//! RFC 6781 section 3.1.
//!
//! Each key carries the times it enters each state ([`KeyTimes`], RFC 7583
//! section 3.1): published (in the DNSKEY RRset), active (signing), retired
//! (published, no longer signing) and removed; what a key does at a time
//! is a function of that time, so the server and `pharos key show` agree
//! without either writing the store as time passes.

use std::fmt;

use domain::base::iana::SecurityAlgorithm;
use domain::base::{Name, ToName};
use domain::rdata::Dnskey;
use domain::utils::{base16, base64};
use ring::rand::SecureRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};

/// The DNSKEY record type (RFC 4034 section 2).
pub const DNSKEY: u16 = 48;

/// The signature algorithms Pharos signs with (RFC 8624 section 3.1: both MUST be validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// ECDSA P-256 with SHA-256 (RFC 6605), number 13.
    EcdsaP256Sha256,
    /// Ed25519 (RFC 8080), number 15.
    Ed25519,
}

impl Algorithm {
    /// The number in DNSKEY, RRSIG and DS records.
    pub fn number(self) -> u8 {
        match self {
            Algorithm::EcdsaP256Sha256 => 13,
            Algorithm::Ed25519 => 15,
        }
    }

    /// The name `pharos key generate --algorithm` takes (the IANA mnemonic, lowercase).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::EcdsaP256Sha256 => "ecdsap256sha256",
            Algorithm::Ed25519 => "ed25519",
        }
    }

    /// Reads a name as [`Algorithm::name`] writes it, in any case.
    pub fn from_name(name: &str) -> Result<Algorithm, KeyError> {
        [Algorithm::EcdsaP256Sha256, Algorithm::Ed25519]
            .into_iter()
            .find(|algorithm| algorithm.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| KeyError::UnknownAlgorithm(name.to_string()))
    }
}

/// What a key signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Combined signing key: every RRset, the DNSKEY RRset included.
    Csk,
    /// Key-signing key: the DNSKEY RRset only; the DS at the parent points at it.
    Ksk,
    /// Zone-signing key: every RRset but the DNSKEY RRset.
    Zsk,
}

impl Role {
    /// The name the store and `pharos key show` use.
    pub fn name(self) -> &'static str {
        match self {
            Role::Csk => "csk",
            Role::Ksk => "ksk",
            Role::Zsk => "zsk",
        }
    }

    fn from_name(name: &str) -> Option<Role> {
        [Role::Csk, Role::Ksk, Role::Zsk].into_iter().find(|role| role.name() == name)
    }

    /// DNSKEY flags: the Zone Key bit always, the Secure Entry Point bit
    /// on the key a DS points at.
    pub fn flags(self) -> u16 {
        match self {
            Role::Csk | Role::Ksk => 257,
            Role::Zsk => 256,
        }
    }

    /// Whether the parent's DS points at this key.
    pub fn signs_keys(self) -> bool {
        self != Role::Zsk
    }
}

/// Why a key could not be made or read back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("unknown DNSSEC algorithm {0:?}: expected ecdsap256sha256 or ed25519")]
    UnknownAlgorithm(String),
    #[error("the system random source failed while generating a key")]
    Random,
    #[error("stored key line {line}: {problem}")]
    Corrupt { line: usize, problem: String },
}

/// A private key, parsed once so that signing does not parse it again.
enum Pair {
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

/// Where a key is in its life (RFC 7583 section 3.1), at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// In the DNSKEY RRset, signing nothing yet: validators learn it.
    Published,
    /// In the DNSKEY RRset and signing what its role signs.
    Active,
    /// Still in the DNSKEY RRset for the signatures it made, signing no more.
    Retired,
    /// Gone from the zone.
    Removed,
}

impl KeyState {
    pub fn name(self) -> &'static str {
        match self {
            KeyState::Published => "published",
            KeyState::Active => "active",
            KeyState::Retired => "retired",
            KeyState::Removed => "removed",
        }
    }
}

/// When a key enters each state, in Unix seconds; `None` for a step not
/// scheduled (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyTimes {
    pub published: u64,
    pub active: Option<u64>,
    pub retired: Option<u64>,
    pub removed: Option<u64>,
}

impl KeyTimes {
    /// A key published and signing from `now` on.
    pub fn active_from(now: u64) -> KeyTimes {
        KeyTimes { published: now, active: Some(now), retired: None, removed: None }
    }

    /// The state at `now`: the latest step reached.
    pub fn state(&self, now: u64) -> KeyState {
        let reached = |time: Option<u64>| time.is_some_and(|time| time <= now);
        if reached(self.removed) {
            KeyState::Removed
        } else if reached(self.retired) {
            KeyState::Retired
        } else if reached(self.active) {
            KeyState::Active
        } else {
            KeyState::Published
        }
    }

    /// The first step after `now`, if one is scheduled.
    pub fn next_step(&self, now: u64) -> Option<u64> {
        [self.active, self.retired, self.removed].into_iter().flatten().filter(|&time| time > now).min()
    }

    /// The steps as kept in the store: `published=T active=T ...`.
    fn to_fields(self) -> String {
        let steps = [("active", self.active), ("retired", self.retired), ("removed", self.removed)];
        let scheduled = steps.iter().filter_map(|(name, time)| Some(format!(" {name}={}", (*time)?)));
        format!("published={}{}", self.published, scheduled.collect::<String>())
    }

    /// Reads the fields [`KeyTimes::to_fields`] writes; none at all is a
    /// key kept before keys had times: published and active since ever.
    fn from_fields(fields: &[&str]) -> Result<KeyTimes, String> {
        if fields.is_empty() {
            return Ok(KeyTimes::active_from(0));
        }
        let mut times = KeyTimes::default();
        let mut published = None;
        for field in fields {
            let (name, value) = field.split_once('=').ok_or_else(|| format!("expected STEP=TIME, found {field:?}"))?;
            let value: u64 = value.parse().map_err(|_| format!("{name}: {value:?} is not a time in seconds"))?;
            match name {
                "published" => published = Some(value),
                "active" => times.active = Some(value),
                "retired" => times.retired = Some(value),
                "removed" => times.removed = Some(value),
                _ => return Err(format!("unknown key step {name:?}")),
            }
        }
        times.published = published.ok_or("a key without its published time")?;
        Ok(times)
    }
}

/// One private key with its algorithm, role and schedule.
pub struct ZoneKey {
    pub algorithm: Algorithm,
    pub role: Role,
    pub times: KeyTimes,
    /// The private key as PKCS#8 (what `ring` generates and reads).
    pkcs8: Vec<u8>,
    pair: Pair,
    public_key: Vec<u8>,
}

impl ZoneKey {
    /// Generates a new key from `random` (ring's `SystemRandom` in the
    /// server), active since ever until its `times` say otherwise.
    pub fn generate(algorithm: Algorithm, role: Role, random: &dyn SecureRandom) -> Result<ZoneKey, KeyError> {
        let pkcs8 = match algorithm {
            Algorithm::EcdsaP256Sha256 => EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, random),
            Algorithm::Ed25519 => Ed25519KeyPair::generate_pkcs8(random),
        }
        .map_err(|_| KeyError::Random)?;
        ZoneKey::from_pkcs8(algorithm, role, pkcs8.as_ref().to_vec(), random).map_err(|problem| KeyError::Corrupt { line: 0, problem })
    }

    fn from_pkcs8(algorithm: Algorithm, role: Role, pkcs8: Vec<u8>, random: &dyn SecureRandom) -> Result<ZoneKey, String> {
        let (pair, public_key) = match algorithm {
            Algorithm::EcdsaP256Sha256 => {
                let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, random)
                    .map_err(|error| format!("not an ECDSA P-256 key: {error}"))?;
                // ring gives the uncompressed point 0x04 || x || y; DNSKEY holds x || y (RFC 6605 section 4).
                let public_key = pair.public_key().as_ref()[1..].to_vec();
                (Pair::Ecdsa(pair), public_key)
            }
            Algorithm::Ed25519 => {
                let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8).map_err(|error| format!("not an Ed25519 key: {error}"))?;
                let public_key = pair.public_key().as_ref().to_vec();
                (Pair::Ed25519(pair), public_key)
            }
        };
        Ok(ZoneKey { algorithm, role, times: KeyTimes::active_from(0), pkcs8, pair, public_key })
    }

    /// This key on the schedule `times`.
    pub fn with_times(self, times: KeyTimes) -> ZoneKey {
        ZoneKey { times, ..self }
    }

    /// Whether this key signs RRsets of type `rtype`.
    pub fn signs(&self, rtype: u16) -> bool {
        match self.role {
            Role::Csk => true,
            Role::Ksk => rtype == DNSKEY,
            Role::Zsk => rtype != DNSKEY,
        }
    }

    /// The signature over `data`, in the form RRSIG records carry: r || s
    /// for ECDSA (RFC 6605 section 4), R || S for Ed25519 (RFC 8080 section 4).
    pub fn sign(&self, data: &[u8], random: &dyn SecureRandom) -> Vec<u8> {
        match &self.pair {
            Pair::Ecdsa(pair) => pair.sign(random, data).expect("ECDSA signing fails only when the random source does").as_ref().to_vec(),
            Pair::Ed25519(pair) => pair.sign(data).as_ref().to_vec(),
        }
    }

    /// The DNSKEY record data: flags, protocol 3, algorithm, public key.
    pub fn dnskey_rdata(&self) -> Vec<u8> {
        let mut rdata = Vec::with_capacity(4 + self.public_key.len());
        rdata.extend_from_slice(&self.role.flags().to_be_bytes());
        rdata.push(3);
        rdata.push(self.algorithm.number());
        rdata.extend_from_slice(&self.public_key);
        rdata
    }

    /// The key tag (RFC 4034 appendix B), as `domain` computes it.
    pub fn key_tag(&self) -> u16 {
        Dnskey::new(self.role.flags(), 3, SecurityAlgorithm::from_int(self.algorithm.number()), &self.public_key[..])
            .expect("a P-256 or Ed25519 key fits in a record")
            .key_tag()
    }

    /// The DNSKEY record of `zone` in presentation format.
    pub fn dnskey_record(&self, zone: &Name<Vec<u8>>, ttl: u32) -> String {
        format!(
            "{} {ttl} IN DNSKEY {} 3 {} {}",
            zone.fmt_with_dot(),
            self.role.flags(),
            self.algorithm.number(),
            base64::encode_string(&self.public_key)
        )
    }

    /// The DS record (SHA-256, digest type 2) the parent of `zone` publishes
    /// for this key: the digest of the owner name in canonical (lowercase
    /// wire) form followed by the DNSKEY record data (RFC 4034 section 5.1.4).
    pub fn ds_record(&self, zone: &Name<Vec<u8>>, ttl: u32) -> String {
        let mut digested = zone.to_canonical_name::<Vec<u8>>().into_octets();
        digested.extend_from_slice(&self.dnskey_rdata());
        let digest = ring::digest::digest(&ring::digest::SHA256, &digested);
        format!(
            "{} {ttl} IN DS {} {} 2 {}",
            zone.fmt_with_dot(),
            self.key_tag(),
            self.algorithm.number(),
            base16::encode_string(digest.as_ref())
        )
    }
}

impl fmt::Debug for ZoneKey {
    /// Never prints the private key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZoneKey").field("algorithm", &self.algorithm).field("role", &self.role).field("key_tag", &self.key_tag()).finish()
    }
}

/// The keys of one zone, in the order they were added.
#[derive(Debug, Default)]
pub struct ZoneKeys {
    pub keys: Vec<ZoneKey>,
}

impl ZoneKeys {
    /// The name of the store setting that keeps the keys of `zone`.
    pub fn setting_name(zone: &Name<Vec<u8>>) -> String {
        format!("dnssec.keys.{}", zone.to_canonical_name::<Vec<u8>>().fmt_with_dot())
    }

    /// [`ZoneKeys::setting_name`] for a zone named in lowercase wire form.
    pub fn setting_name_of_wire(origin: &[u8]) -> Result<String, KeyError> {
        let zone = Name::from_octets(origin.to_vec())
            .map_err(|error| KeyError::Corrupt { line: 0, problem: format!("bad zone name: {error}") })?;
        Ok(ZoneKeys::setting_name(&zone))
    }

    /// The text kept in the store: one line per key, `ROLE ALGORITHM
    /// PKCS8-BASE64 published=T [active=T] [retired=T] [removed=T]`.
    pub fn to_setting(&self) -> String {
        self.keys
            .iter()
            .map(|key| {
                format!("{} {} {} {}\n", key.role.name(), key.algorithm.name(), base64::encode_string(&key.pkcs8), key.times.to_fields())
            })
            .collect()
    }

    /// The first step of any key after `now`: when the signer must change.
    pub fn next_step(&self, now: u64) -> Option<u64> {
        self.keys.iter().filter_map(|key| key.times.next_step(now)).min()
    }

    /// Reads the text [`ZoneKeys::to_setting`] writes.
    pub fn from_setting(text: &str, random: &dyn SecureRandom) -> Result<ZoneKeys, KeyError> {
        let keys = text
            .lines()
            .enumerate()
            .map(|(index, line)| {
                let corrupt = |problem: String| KeyError::Corrupt { line: index + 1, problem };
                let fields: Vec<&str> = line.split_whitespace().collect();
                let [role, algorithm, pkcs8, ref times @ ..] = fields[..] else {
                    return Err(corrupt(format!("expected ROLE ALGORITHM KEY [STEP=TIME...], found {} fields", fields.len())));
                };
                let times = KeyTimes::from_fields(times).map_err(corrupt)?;
                let role = Role::from_name(role).ok_or_else(|| corrupt(format!("unknown role {role:?}")))?;
                let algorithm = Algorithm::from_name(algorithm).map_err(|error| corrupt(error.to_string()))?;
                let pkcs8 = base64::decode::<Vec<u8>>(pkcs8).map_err(|error| corrupt(format!("bad base64: {error}")))?;
                let key = ZoneKey::from_pkcs8(algorithm, role, pkcs8, random).map_err(corrupt)?;
                Ok(key.with_times(times))
            })
            .collect::<Result<_, _>>()?;
        Ok(ZoneKeys { keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use std::str::FromStr;

    fn zone() -> Name<Vec<u8>> {
        Name::from_str("Example.TEST.").unwrap()
    }

    #[test]
    fn keys_survive_the_store_text() {
        let random = SystemRandom::new();
        let keys = ZoneKeys {
            keys: vec![
                ZoneKey::generate(Algorithm::EcdsaP256Sha256, Role::Ksk, &random).unwrap(),
                ZoneKey::generate(Algorithm::Ed25519, Role::Zsk, &random).unwrap(),
            ],
        };
        let read = ZoneKeys::from_setting(&keys.to_setting(), &random).unwrap();
        assert_eq!(read.keys.len(), 2);
        assert_eq!(read.keys[0].times, KeyTimes::active_from(0));
        for (before, after) in keys.keys.iter().zip(&read.keys) {
            assert_eq!((before.role, before.algorithm), (after.role, after.algorithm));
            assert_eq!(before.dnskey_rdata(), after.dnskey_rdata());
        }
        assert_eq!(keys.keys[0].dnskey_rdata().len(), 4 + 64);
        assert_eq!(keys.keys[1].dnskey_rdata().len(), 4 + 32);
        assert_eq!(ZoneKeys::setting_name(&zone()), "dnssec.keys.example.test.");
        assert_eq!(ZoneKeys::setting_name_of_wire(b"\x07example\x04test\x00").unwrap(), "dnssec.keys.example.test.");
    }

    #[test]
    fn corrupt_store_text_is_a_clear_error() {
        let random = SystemRandom::new();
        let cases = [
            ("csk ed25519", "expected ROLE ALGORITHM KEY [STEP=TIME...], found 2 fields"),
            ("csk ed25519 AAAA active", "expected STEP=TIME, found \"active\""),
            ("csk ed25519 AAAA active=soon", "active: \"soon\" is not a time in seconds"),
            ("csk ed25519 AAAA born=1", "unknown key step \"born\""),
            ("csk ed25519 AAAA active=1", "a key without its published time"),
            ("boss ed25519 AAAA", "unknown role \"boss\""),
            ("csk rsasha1 AAAA", "unknown DNSSEC algorithm \"rsasha1\""),
            ("csk ed25519 !!!", "bad base64"),
            ("csk ed25519 AAAA", "not an Ed25519 key"),
        ];
        for (text, expected) in cases {
            let error = ZoneKeys::from_setting(text, &random).unwrap_err().to_string();
            assert!(error.starts_with("stored key line 1:") && error.contains(expected), "{text:?}: {error}");
        }
        assert_eq!(Algorithm::from_name("ED25519"), Ok(Algorithm::Ed25519));
    }
}
