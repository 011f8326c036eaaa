//! TSIG (RFC 8945) on every message: a signed request's signature is
//! checked, whatever it asks (a query over any transport, a zone
//! transfer), and its responses signed, the first over the request's MAC
//! and the TSIG variables, each later one of a transfer over the one
//! before's MAC and the timers (section 5.3.1; Knot DNS and NSD accept
//! every message signed); the NOTIFYs Pharos sends are signed as
//! requests. HMAC-SHA1, -SHA224, -SHA256, -SHA384 and -SHA512 (section
//! 6), from RustCrypto's `hmac`, `sha1` and `sha2`.
//!
//! A request whose key is unknown gets NOTAUTH with TSIG error BADKEY, a
//! wrong MAC BADSIG, a MAC cut shorter than section 5.2.2.1 allows
//! BADTRUNC (all unsigned, section 5.3.2), and a time signed more than its
//! fudge away from the server's clock BADTIME, signed, with the server's
//! time in Other Data (section 5.2.3). A TSIG record that cannot be read,
//! or whose MAC is longer than its hash, makes the request FORMERR.

use hmac::{Hmac, KeyInit, Mac};
use pharos_wire::edns::ExtendedError;
use pharos_wire::{HEADER_LEN, name, types};
use sha1::Sha1;
use sha2::{Sha224, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

/// The fudge Pharos signs with, as Knot DNS and NSD do (section 10).
const FUDGE: u16 = 300;

/// RFC 8945 section 3: the TSIG errors.
const BADSIG: u16 = 16;
const BADKEY: u16 = 17;
const BADTIME: u16 = 18;
const BADTRUNC: u16 = 22;

/// The HMACs a key may use (RFC 8945 section 6: SHA-1 and SHA-256
/// mandatory, the others recommended or optional).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    HmacSha1,
    HmacSha224,
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl Algorithm {
    /// Every algorithm offered, in the order a configuration error lists them.
    pub const ALL: [Algorithm; 5] =
        [Algorithm::HmacSha1, Algorithm::HmacSha224, Algorithm::HmacSha256, Algorithm::HmacSha384, Algorithm::HmacSha512];

    /// The algorithm named `text` as configurations write it
    /// ("hmac-sha256", any case).
    pub fn from_name(text: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|algorithm| algorithm.name().eq_ignore_ascii_case(text))
    }

    /// The name configurations give it.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::HmacSha1 => "hmac-sha1",
            Algorithm::HmacSha224 => "hmac-sha224",
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::HmacSha384 => "hmac-sha384",
            Algorithm::HmacSha512 => "hmac-sha512",
        }
    }

    /// The algorithm's name in wire form, as the TSIG record carries it.
    fn wire_name(self) -> &'static [u8] {
        match self {
            Algorithm::HmacSha1 => b"\x09hmac-sha1\x00",
            Algorithm::HmacSha224 => b"\x0bhmac-sha224\x00",
            Algorithm::HmacSha256 => b"\x0bhmac-sha256\x00",
            Algorithm::HmacSha384 => b"\x0bhmac-sha384\x00",
            Algorithm::HmacSha512 => b"\x0bhmac-sha512\x00",
        }
    }

    /// The length of the whole MAC.
    fn mac_len(self) -> usize {
        match self {
            Algorithm::HmacSha1 => 20,
            Algorithm::HmacSha224 => 28,
            Algorithm::HmacSha256 => 32,
            Algorithm::HmacSha384 => 48,
            Algorithm::HmacSha512 => 64,
        }
    }

    /// The shortest MAC accepted, cut (section 5.2.2.1): the larger of 10
    /// octets and half the whole MAC.
    fn shortest_mac(self) -> usize {
        self.mac_len().div_ceil(2).max(10)
    }
}

/// A shared secret, named, for one algorithm.
#[derive(Clone)]
pub struct TsigKey {
    /// Lowercase wire form.
    pub name: Box<[u8]>,
    algorithm: Algorithm,
    secret: Box<[u8]>,
}

impl TsigKey {
    /// A key named `name` (lowercase wire form).
    pub fn new(name: Box<[u8]>, algorithm: Algorithm, secret: Box<[u8]>) -> TsigKey {
        TsigKey { name, algorithm, secret }
    }

    /// The whole MAC of `parts`, one after the other.
    fn mac(&self, parts: &[&[u8]]) -> Vec<u8> {
        match self.algorithm {
            Algorithm::HmacSha1 => hmac::<Hmac<Sha1>>(&self.secret, parts),
            Algorithm::HmacSha224 => hmac::<Hmac<Sha224>>(&self.secret, parts),
            Algorithm::HmacSha256 => hmac::<Hmac<Sha256>>(&self.secret, parts),
            Algorithm::HmacSha384 => hmac::<Hmac<Sha384>>(&self.secret, parts),
            Algorithm::HmacSha512 => hmac::<Hmac<Sha512>>(&self.secret, parts),
        }
    }
}

fn hmac<M: Mac + KeyInit>(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = <M as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

impl std::fmt::Debug for TsigKey {
    /// The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TsigKey({}, {})", name::Display(&self.name), self.algorithm.name())
    }
}

/// The fields of a request's TSIG record that a response uses.
#[derive(Debug, Clone, Copy)]
struct Signature<'p> {
    key_name: &'p [u8],
    algorithm: &'p [u8],
    time_signed: u64,
    fudge: u16,
    mac: &'p [u8],
    original_id: u16,
    /// Other Len and Other Data, as the MAC covers them.
    other_with_len: &'p [u8],
}

/// What a request's TSIG record says about it.
#[derive(Debug)]
pub(crate) enum Checked<'k> {
    Unsigned,
    /// Signed with this key, rightly and in time: the responses are signed
    /// with it.
    Signed(Signing<'k>),
    /// The request is refused with NOTAUTH and this TSIG error.
    Refused(Refusal<'k>),
    /// The TSIG record cannot be read, or its MAC is longer than its
    /// algorithm's (section 5.2.2.1): the request is malformed (FORMERR).
    Malformed,
}

/// Signs a sequence of responses to one request.
#[derive(Debug)]
pub(crate) struct Signing<'k> {
    key: &'k TsigKey,
    /// The MAC the next response's covers first: the request's, then each
    /// response's in turn.
    prior_mac: Vec<u8>,
    /// The length the responses' MACs are cut to: the request's
    /// (section 5.2.2.1 covers a reply with the request's MAC as sent).
    mac_len: usize,
    original_id: u16,
    /// The next message is the first of the sequence.
    first: bool,
}

/// A TSIG error for a request, to be answered with NOTAUTH.
#[derive(Debug)]
pub(crate) struct Refusal<'k> {
    pub error: u16,
    key_name: Box<[u8]>,
    algorithm: Box<[u8]>,
    time_signed: u64,
    fudge: u16,
    original_id: u16,
    /// For BADTIME: the key and the request's MAC the signed refusal covers.
    signed_by: Option<(&'k TsigKey, Vec<u8>)>,
}

/// No Other Data, behind its length.
const NO_OTHER: &[u8] = &[0, 0];

/// Checks the TSIG record of `packet` (at `tsig_at`, from
/// `pharos_wire::Query`) against `keys` at `now` (Unix seconds).
pub(crate) fn check<'k>(packet: &[u8], tsig_at: Option<u16>, keys: &'k [TsigKey], now: u64) -> Checked<'k> {
    let Some(tsig_at) = tsig_at.map(usize::from) else { return Checked::Unsigned };
    let Some(signature) = read_signature(packet, tsig_at) else { return Checked::Malformed };
    let refusal = |error, signed_by| {
        Checked::Refused(Refusal {
            error,
            key_name: signature.key_name.to_ascii_lowercase().into(),
            algorithm: signature.algorithm.into(),
            time_signed: signature.time_signed,
            fudge: signature.fudge,
            original_id: signature.original_id,
            signed_by,
        })
    };
    let named = |key: &&TsigKey| {
        key.name.eq_ignore_ascii_case(signature.key_name) && key.algorithm.wire_name().eq_ignore_ascii_case(signature.algorithm)
    };
    let Some(key) = keys.iter().find(named) else { return refusal(BADKEY, None) };
    let mac_len = signature.mac.len();
    if mac_len > key.algorithm.mac_len() {
        return Checked::Malformed;
    }
    // Section 5.2.2.1 forbids a MAC cut shorter; 5.2.4 names the error,
    // as BIND and the `domain` crate answer it (Knot DNS, which takes no
    // cut MAC at all, says BADSIG).
    if mac_len < key.algorithm.shortest_mac() {
        return refusal(BADTRUNC, None);
    }
    let unsigned = unsigned_request(packet, tsig_at, signature.original_id);
    let variables = variables(key, signature.time_signed, signature.fudge, 0, signature.other_with_len);
    let expected = key.mac(&[&unsigned, &variables]);
    if !bool::from(expected[..mac_len].ct_eq(signature.mac)) {
        return refusal(BADSIG, None);
    }
    if now.abs_diff(signature.time_signed) > u64::from(signature.fudge) {
        return refusal(BADTIME, Some((key, signature.mac.to_vec())));
    }
    Checked::Signed(Signing { key, prior_mac: signature.mac.to_vec(), mac_len, original_id: signature.original_id, first: true })
}

/// Reads the TSIG record at `at`: owner and algorithm uncompressed, as
/// section 4.2 has them.
fn read_signature(packet: &[u8], at: usize) -> Option<Signature<'_>> {
    let owner_len = name::uncompressed_len(packet, at).ok()?;
    let rdata_at = at + owner_len + 10;
    let rdata_len = usize::from(u16::from_be_bytes(packet.get(rdata_at - 2..rdata_at)?.try_into().ok()?));
    let rdata = packet.get(rdata_at..rdata_at + rdata_len)?;
    let algorithm_len = name::uncompressed_len(rdata, 0).ok()?;
    let fixed = rdata.get(algorithm_len..algorithm_len + 10)?;
    let mac_len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
    let after_mac = algorithm_len + 10 + mac_len;
    let original_id = rdata.get(after_mac..after_mac + 2)?;
    let other_with_len = rdata.get(after_mac + 4..)?;
    // Other Len says how much follows, and nothing else does.
    let other_len = usize::from(u16::from_be_bytes(other_with_len.get(..2)?.try_into().ok()?));
    if other_with_len.len() != 2 + other_len {
        return None;
    }
    Some(Signature {
        key_name: &packet[at..at + owner_len],
        algorithm: &rdata[..algorithm_len],
        time_signed: u64::from_be_bytes([0, 0, fixed[0], fixed[1], fixed[2], fixed[3], fixed[4], fixed[5]]),
        fudge: u16::from_be_bytes([fixed[6], fixed[7]]),
        mac: &rdata[algorithm_len + 10..after_mac],
        original_id: u16::from_be_bytes([original_id[0], original_id[1]]),
        other_with_len,
    })
}

/// The request as it was before it was signed (section 4.3.3): without
/// its TSIG record, one fewer additional record, its original ID.
fn unsigned_request(packet: &[u8], tsig_at: usize, original_id: u16) -> Vec<u8> {
    let mut unsigned = packet[..tsig_at].to_vec();
    unsigned[..2].copy_from_slice(&original_id.to_be_bytes());
    let additional = u16::from_be_bytes([unsigned[10], unsigned[11]]);
    unsigned[10..12].copy_from_slice(&additional.saturating_sub(1).to_be_bytes());
    unsigned
}

/// The TSIG variables a first message's MAC covers (section 4.3.3):
/// key name, class, TTL, algorithm, time signed, fudge, error and Other
/// (given with its length).
fn variables(key: &TsigKey, time_signed: u64, fudge: u16, error: u16, other_with_len: &[u8]) -> Vec<u8> {
    let mut digested = key.name.to_vec();
    digested.extend(types::CLASS_ANY.to_be_bytes());
    digested.extend(0u32.to_be_bytes());
    digested.extend(key.algorithm.wire_name());
    digested.extend(&time_signed.to_be_bytes()[2..]);
    digested.extend(fudge.to_be_bytes());
    digested.extend(error.to_be_bytes());
    digested.extend(other_with_len);
    digested
}

/// Signs a request Pharos sends (a NOTIFY) with `key` at `now`: the MAC
/// covers the message and the TSIG variables (section 4.3.1).
pub(crate) fn sign_request(key: &TsigKey, message: &mut Vec<u8>, now: u64) {
    let digest = key.mac(&[message, &variables(key, now, FUDGE, 0, NO_OTHER)]);
    let id = u16::from_be_bytes([message[0], message[1]]);
    let record = Record { key_name: &key.name, algorithm: key.algorithm.wire_name(), time_signed: now, fudge: FUDGE, mac: &digest };
    record.append_to(message, 0, id, 0, NO_OTHER);
}

/// The MAC of a sequence's first message (section 4.3.3): over the
/// request's MAC, the message and the TSIG variables.
fn first_mac(key: &TsigKey, request_mac: &[u8], message: &[u8], variables_of: &[u8]) -> Vec<u8> {
    key.mac(&[&(request_mac.len() as u16).to_be_bytes(), request_mac, message, variables_of])
}

impl Signing<'_> {
    /// The name of the key the request was signed with.
    pub(crate) fn key_name(&self) -> &[u8] {
        &self.key.name
    }

    /// The octets the TSIG record [`Signing::sign`] appends takes.
    pub(crate) fn record_len(&self) -> usize {
        self.key.name.len() + 10 + self.key.algorithm.wire_name().len() + 16 + self.mac_len
    }

    /// Signs the message that starts at `start` in `out` and runs to its
    /// end, at `now`: appends its TSIG record and counts it.
    pub(crate) fn sign(&mut self, out: &mut Vec<u8>, start: usize, now: u64) {
        let message = &out[start..];
        let mut digest = if self.first {
            first_mac(self.key, &self.prior_mac, message, &variables(self.key, now, FUDGE, 0, NO_OTHER))
        } else {
            // Section 5.3.1: later messages cover the prior MAC, the message and the timers.
            let timers = [&now.to_be_bytes()[2..], &FUDGE.to_be_bytes()].concat();
            self.key.mac(&[&(self.prior_mac.len() as u16).to_be_bytes(), &self.prior_mac, message, &timers])
        };
        digest.truncate(self.mac_len);
        let algorithm = self.key.algorithm.wire_name();
        let record = Record { key_name: &self.key.name, algorithm, time_signed: now, fudge: FUDGE, mac: &digest };
        record.append_to(out, start, self.original_id, 0, NO_OTHER);
        self.prior_mac = digest;
        self.first = false;
    }
}

impl Refusal<'_> {
    /// Appends the refusal's TSIG record to the message (a NOTAUTH
    /// response) that starts at `start` in `out`: for BADTIME signed, with
    /// the server's time `now` in Other Data; otherwise with an empty MAC.
    pub(crate) fn append_to(&self, out: &mut Vec<u8>, start: usize, now: u64) {
        let other = if self.error == BADTIME { [&6u16.to_be_bytes()[..], &now.to_be_bytes()[2..]].concat() } else { NO_OTHER.to_vec() };
        let mac = match &self.signed_by {
            Some((key, request_mac)) => {
                let mut mac = first_mac(key, request_mac, &out[start..], &variables(key, self.time_signed, self.fudge, self.error, &other));
                mac.truncate(request_mac.len());
                mac
            }
            None => Vec::new(),
        };
        let record =
            Record { key_name: &self.key_name, algorithm: &self.algorithm, time_signed: self.time_signed, fudge: self.fudge, mac: &mac };
        record.append_to(out, start, self.original_id, self.error, &other);
    }

    /// The refusal, as the query path tells its transport.
    pub(crate) fn outcome(&self) -> crate::Tsig {
        match self.error {
            BADKEY => crate::Tsig::BadKey,
            BADSIG => crate::Tsig::BadSig,
            BADTRUNC => crate::Tsig::BadTrunc,
            _ => crate::Tsig::BadTime,
        }
    }

    /// Why the request was refused, for clients that read Extended DNS
    /// Errors (RFC 8914 section 4.19, the request refused by policy).
    pub(crate) fn extended_error(&self) -> ExtendedError {
        let why = match self.error {
            BADKEY => "TSIG key unknown (BADKEY)",
            BADSIG => "TSIG signature wrong (BADSIG)",
            BADTRUNC => "TSIG signature cut too short (BADTRUNC)",
            _ => "TSIG time outside the fudge (BADTIME)",
        };
        ExtendedError { info_code: 18, extra_text: why }
    }
}

/// Why a request whose TSIG record cannot be read is FORMERR.
pub(crate) const MALFORMED: ExtendedError = ExtendedError::other("TSIG record malformed");

/// A TSIG record to write.
struct Record<'a> {
    key_name: &'a [u8],
    algorithm: &'a [u8],
    time_signed: u64,
    fudge: u16,
    mac: &'a [u8],
}

impl Record<'_> {
    /// Appends the record, uncompressed, to the message that starts at
    /// `start` in `out`, and counts it in that message's ARCOUNT.
    fn append_to(&self, out: &mut Vec<u8>, start: usize, original_id: u16, error: u16, other_with_len: &[u8]) {
        out.extend(self.key_name);
        out.extend(types::TSIG.to_be_bytes());
        out.extend(types::CLASS_ANY.to_be_bytes());
        out.extend(0u32.to_be_bytes());
        let rdata_len = self.algorithm.len() + 10 + self.mac.len() + 4 + other_with_len.len();
        out.extend((rdata_len as u16).to_be_bytes());
        out.extend(self.algorithm);
        out.extend(&self.time_signed.to_be_bytes()[2..]);
        out.extend(self.fudge.to_be_bytes());
        out.extend((self.mac.len() as u16).to_be_bytes());
        out.extend(self.mac);
        out.extend(original_id.to_be_bytes());
        out.extend(error.to_be_bytes());
        out.extend(other_with_len);
        let count_at = start + HEADER_LEN - 2;
        let additional = u16::from_be_bytes([out[count_at], out[count_at + 1]]) + 1;
        out[count_at..count_at + 2].copy_from_slice(&additional.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_kept_for_a_signature_is_what_signing_adds() {
        for algorithm in Algorithm::ALL {
            let key = TsigKey::new(b"\x03key\x07example\x00".as_slice().into(), algorithm, b"secret".as_slice().into());
            for mac_len in [algorithm.shortest_mac(), algorithm.mac_len()] {
                let mut signing = Signing { key: &key, prior_mac: vec![0; mac_len], mac_len, original_id: 7, first: true };
                let mut out = b"framing".to_vec();
                out.extend([0; HEADER_LEN]);
                let unsigned_len = out.len();
                signing.sign(&mut out, 7, 1_800_000_000);
                assert_eq!(out.len() - unsigned_len, signing.record_len(), "{algorithm:?}, a MAC of {mac_len}");
                assert_eq!(out[7 + HEADER_LEN - 1], 1, "counted in the message's own ARCOUNT");
            }
        }
    }

    #[test]
    fn the_shortest_mac_accepted_is_the_larger_of_10_octets_and_half() {
        let shortest = Algorithm::ALL.map(Algorithm::shortest_mac);
        assert_eq!(shortest, [10, 14, 16, 24, 32]);
    }
}
