//! TSIG (RFC 8945) for zone transfers: the request's signature checked,
//! every response message signed (and the NOTIFYs Pharos sends signed as
//! requests), the first over the request's MAC and
//! the TSIG variables, each later one over the one before's MAC and the
//! timers (section 5.3.1; Knot DNS and NSD accept every message signed).
//! HMAC-SHA256 only, from RustCrypto's `hmac` and `sha2`.
//!
//! A request whose key is unknown gets NOTAUTH with TSIG error BADKEY, a
//! wrong MAC BADSIG (both unsigned, section 5.2), and a time signed more
//! than its fudge away from the server's clock BADTIME, signed, with the
//! server's time in Other Data (section 5.2.3).

use hmac::{Hmac, KeyInit, Mac};
use pharos_wire::{HEADER_LEN, name, types};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The algorithm's name, in wire form (RFC 8945 section 6).
pub const HMAC_SHA256: &[u8] = b"\x0bhmac-sha256\x00";
/// The fudge Pharos signs with, as Knot DNS and NSD do (section 10).
const FUDGE: u16 = 300;
/// The length of an HMAC-SHA256 MAC.
const MAC_LEN: usize = 32;

/// RFC 8945 section 3: the TSIG errors.
pub const BADSIG: u16 = 16;
pub const BADKEY: u16 = 17;
pub const BADTIME: u16 = 18;

/// A shared secret, named.
#[derive(Clone)]
pub struct TsigKey {
    /// Lowercase wire form.
    pub name: Box<[u8]>,
    secret: Box<[u8]>,
}

impl TsigKey {
    /// An HMAC-SHA256 key named `name` (lowercase wire form).
    pub fn new(name: Box<[u8]>, secret: Box<[u8]>) -> TsigKey {
        TsigKey { name, secret }
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.secret).expect("HMAC takes a key of any length")
    }
}

impl std::fmt::Debug for TsigKey {
    /// The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TsigKey({})", name::Display(&self.name))
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
}

/// Signs a sequence of responses to one request.
#[derive(Debug)]
pub(crate) struct Signing<'k> {
    key: &'k TsigKey,
    /// The MAC the next response's covers first: the request's, then each
    /// response's in turn.
    prior_mac: Vec<u8>,
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
/// `pharos_wire::Query`) against `keys` at `now` (Unix seconds). `None`
/// when the record cannot be read: the request is malformed (FORMERR).
pub(crate) fn check<'k>(packet: &[u8], tsig_at: Option<u16>, keys: &'k [TsigKey], now: u64) -> Option<Checked<'k>> {
    let Some(tsig_at) = tsig_at.map(usize::from) else { return Some(Checked::Unsigned) };
    let signature = read_signature(packet, tsig_at)?;
    let refusal = |error, signed_by| Refusal {
        error,
        key_name: signature.key_name.to_ascii_lowercase().into(),
        algorithm: signature.algorithm.into(),
        time_signed: signature.time_signed,
        fudge: signature.fudge,
        original_id: signature.original_id,
        signed_by,
    };
    let key = keys.iter().find(|key| key.name.eq_ignore_ascii_case(signature.key_name));
    let Some(key) = key.filter(|_| signature.algorithm.eq_ignore_ascii_case(HMAC_SHA256)) else {
        return Some(Checked::Refused(refusal(BADKEY, None)));
    };
    let mut mac = key.mac();
    mac.update(&unsigned_request(packet, tsig_at, signature.original_id));
    mac.update(&variables(key, signature.time_signed, signature.fudge, 0, signature.other_with_len));
    // Truncated MACs (section 5.2.2.1) are not offered: the whole MAC or BADSIG.
    if signature.mac.len() != MAC_LEN || mac.verify_slice(signature.mac).is_err() {
        return Some(Checked::Refused(refusal(BADSIG, None)));
    }
    if now.abs_diff(signature.time_signed) > u64::from(signature.fudge) {
        return Some(Checked::Refused(refusal(BADTIME, Some((key, signature.mac.to_vec())))));
    }
    Some(Checked::Signed(Signing { key, prior_mac: signature.mac.to_vec(), original_id: signature.original_id, first: true }))
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
    Some(Signature {
        key_name: &packet[at..at + owner_len],
        algorithm: &rdata[..algorithm_len],
        time_signed: u64::from_be_bytes([0, 0, fixed[0], fixed[1], fixed[2], fixed[3], fixed[4], fixed[5]]),
        fudge: u16::from_be_bytes([fixed[6], fixed[7]]),
        mac: &rdata[algorithm_len + 10..after_mac],
        original_id: u16::from_be_bytes([original_id[0], original_id[1]]),
        // Past the original ID and the error.
        other_with_len: rdata.get(after_mac + 4..)?,
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
    digested.extend(HMAC_SHA256);
    digested.extend(&time_signed.to_be_bytes()[2..]);
    digested.extend(fudge.to_be_bytes());
    digested.extend(error.to_be_bytes());
    digested.extend(other_with_len);
    digested
}

/// Signs a request Pharos sends (a NOTIFY) with `key` at `now`: the MAC
/// covers the message and the TSIG variables (section 4.3.1).
pub(crate) fn sign_request(key: &TsigKey, message: &mut Vec<u8>, now: u64) {
    let mut mac = key.mac();
    mac.update(message);
    mac.update(&variables(key, now, FUDGE, 0, NO_OTHER));
    let digest = mac.finalize().into_bytes();
    let id = u16::from_be_bytes([message[0], message[1]]);
    let record = Record { key_name: &key.name, algorithm: HMAC_SHA256, time_signed: now, fudge: FUDGE, mac: &digest };
    record.append_to(message, id, 0, NO_OTHER);
}

/// Octets a TSIG record named `key_name` adds to a response, at most.
pub(crate) fn record_len(key_name: &[u8]) -> usize {
    key_name.len() + 10 + HMAC_SHA256.len() + 16 + MAC_LEN + 8
}

/// The MAC of a sequence's first message (section 4.3.3): over the
/// request's MAC, the message and the TSIG variables.
fn first_mac(key: &TsigKey, request_mac: &[u8], message: &[u8], variables_of: &[u8]) -> Vec<u8> {
    let mut mac = key.mac();
    mac.update(&(request_mac.len() as u16).to_be_bytes());
    mac.update(request_mac);
    mac.update(message);
    mac.update(variables_of);
    mac.finalize().into_bytes().to_vec()
}

impl Signing<'_> {
    /// The name of the key the request was signed with.
    pub(crate) fn key_name(&self) -> &[u8] {
        &self.key.name
    }

    /// Signs `message` (a whole DNS message) at `now`: appends its TSIG
    /// record and counts it.
    pub(crate) fn sign(&mut self, message: &mut Vec<u8>, now: u64) {
        let digest = if self.first {
            first_mac(self.key, &self.prior_mac, message, &variables(self.key, now, FUDGE, 0, NO_OTHER))
        } else {
            // Section 5.3.1: later messages cover the prior MAC, the message and the timers.
            let mut mac = self.key.mac();
            mac.update(&(self.prior_mac.len() as u16).to_be_bytes());
            mac.update(&self.prior_mac);
            mac.update(message);
            mac.update(&now.to_be_bytes()[2..]);
            mac.update(&FUDGE.to_be_bytes());
            mac.finalize().into_bytes().to_vec()
        };
        let record = Record { key_name: &self.key.name, algorithm: HMAC_SHA256, time_signed: now, fudge: FUDGE, mac: &digest };
        record.append_to(message, self.original_id, 0, NO_OTHER);
        self.prior_mac = digest;
        self.first = false;
    }
}

impl Refusal<'_> {
    /// Appends the refusal's TSIG record to `message` (a NOTAUTH
    /// response): for BADTIME signed, with the server's time `now` in
    /// Other Data; otherwise with an empty MAC.
    pub(crate) fn append_to(&self, message: &mut Vec<u8>, now: u64) {
        let other = if self.error == BADTIME { [&6u16.to_be_bytes()[..], &now.to_be_bytes()[2..]].concat() } else { NO_OTHER.to_vec() };
        let mac = match &self.signed_by {
            Some((key, request_mac)) => {
                first_mac(key, request_mac, message, &variables(key, self.time_signed, self.fudge, self.error, &other))
            }
            None => Vec::new(),
        };
        let record =
            Record { key_name: &self.key_name, algorithm: &self.algorithm, time_signed: self.time_signed, fudge: self.fudge, mac: &mac };
        record.append_to(message, self.original_id, self.error, &other);
    }
}

/// A TSIG record to write.
struct Record<'a> {
    key_name: &'a [u8],
    algorithm: &'a [u8],
    time_signed: u64,
    fudge: u16,
    mac: &'a [u8],
}

impl Record<'_> {
    /// Appends the record, uncompressed, to `message` and counts it in ARCOUNT.
    fn append_to(&self, message: &mut Vec<u8>, original_id: u16, error: u16, other_with_len: &[u8]) {
        message.extend(self.key_name);
        message.extend(types::TSIG.to_be_bytes());
        message.extend(types::CLASS_ANY.to_be_bytes());
        message.extend(0u32.to_be_bytes());
        let rdata_len = self.algorithm.len() + 10 + self.mac.len() + 4 + other_with_len.len();
        message.extend((rdata_len as u16).to_be_bytes());
        message.extend(self.algorithm);
        message.extend(&self.time_signed.to_be_bytes()[2..]);
        message.extend(self.fudge.to_be_bytes());
        message.extend((self.mac.len() as u16).to_be_bytes());
        message.extend(self.mac);
        message.extend(original_id.to_be_bytes());
        message.extend(error.to_be_bytes());
        message.extend(other_with_len);
        let additional = u16::from_be_bytes([message[HEADER_LEN - 2], message[HEADER_LEN - 1]]) + 1;
        message[HEADER_LEN - 2..HEADER_LEN].copy_from_slice(&additional.to_be_bytes());
    }
}
