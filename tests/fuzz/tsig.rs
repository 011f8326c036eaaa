//! A small TSIG signer (RFC 8945, HMAC-SHA256) for the fuzzer's queries:
//! signed with the key every server knows, or on purpose wrongly.
//!
//! Not `domain`'s signer (tests/suite/tsig.rs uses it): its builder starts every
//! message empty, so it cannot sign the packets the fuzzer encodes byte by
//! byte (an OPT in the answer section, two OPTs, records in a query), and
//! it knows only the algorithms it implements, so it cannot name one no
//! server knows. The HMAC is ring's, which `domain` signs with too.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::hmac;

use crate::support::servers::TsigKeySpec;

/// The key every server of a comparison is configured with.
pub const KEY: TsigKeySpec = TsigKeySpec { name: "fuzz-key", secret: "ZnV6emluZyBwaGFyb3MgYWdhaW5zdCBrbm90LCBuc2Q=" };
/// `KEY`'s secret, decoded.
const SECRET: &[u8] = b"fuzzing pharos against knot, nsd";
const KEY_NAME: &[u8] = b"\x08fuzz-key\x00";
const UNKNOWN_KEY_NAME: &[u8] = b"\x0bunknown-key\x00";
const HMAC_SHA256: &[u8] = b"\x0bhmac-sha256\x00";
const UNKNOWN_ALGORITHM: &[u8] = b"\x0chmac-unknown\x00";
const FUDGE: u16 = 300;
const CLASS_ANY: u16 = 255;
const T_TSIG: u16 = 250;

/// How a query is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TsigMode {
    /// With the servers' key, rightly, now.
    Good,
    /// With a key no server knows (RFC 8945 section 5.2.2: BADKEY).
    UnknownKey,
    /// With the servers' key name but a MAC of the wrong secret (BADSIG).
    BadMac,
    /// Rightly, but signed an hour ago (section 5.2.3: BADTIME).
    BadTime,
    /// With an algorithm no server knows (section 5.2.1: BADKEY).
    UnknownAlgorithm,
}

pub const MODES: [TsigMode; 5] = [TsigMode::Good, TsigMode::UnknownKey, TsigMode::BadMac, TsigMode::BadTime, TsigMode::UnknownAlgorithm];

impl fmt::Display for TsigMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TsigMode::Good => "good",
            TsigMode::UnknownKey => "unknown-key",
            TsigMode::BadMac => "bad-mac",
            TsigMode::BadTime => "bad-time",
            TsigMode::UnknownAlgorithm => "unknown-algorithm",
        })
    }
}

/// Appends a TSIG record to `message` (a whole message whose ARCOUNT does
/// not count it yet) and counts it.
pub fn sign(message: &mut Vec<u8>, mode: TsigMode) {
    if message.len() < 12 {
        return;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let time = if mode == TsigMode::BadTime { now - 3600 } else { now };
    let key_name = if mode == TsigMode::UnknownKey { UNKNOWN_KEY_NAME } else { KEY_NAME };
    let algorithm = if mode == TsigMode::UnknownAlgorithm { UNKNOWN_ALGORITHM } else { HMAC_SHA256 };
    let secret: &[u8] = if mode == TsigMode::BadMac { b"not the secret the servers hold" } else { SECRET };
    let time48 = &time.to_be_bytes()[2..];

    // RFC 8945 section 4.3.3: the message, then the TSIG variables.
    let mut mac = hmac::Context::with_key(&hmac::Key::new(hmac::HMAC_SHA256, secret));
    mac.update(message);
    mac.update(key_name);
    mac.update(&CLASS_ANY.to_be_bytes());
    mac.update(&0u32.to_be_bytes());
    mac.update(algorithm);
    mac.update(time48);
    mac.update(&FUDGE.to_be_bytes());
    mac.update(&[0, 0, 0, 0]); // error, other len
    let tag = mac.sign();
    let mac = tag.as_ref();

    let mut rdata = algorithm.to_vec();
    rdata.extend_from_slice(time48);
    rdata.extend_from_slice(&FUDGE.to_be_bytes());
    rdata.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    rdata.extend_from_slice(mac);
    rdata.extend_from_slice(&message[..2]); // original ID
    rdata.extend_from_slice(&[0, 0, 0, 0]);
    message.extend_from_slice(key_name);
    message.extend_from_slice(&T_TSIG.to_be_bytes());
    message.extend_from_slice(&CLASS_ANY.to_be_bytes());
    message.extend_from_slice(&0u32.to_be_bytes());
    message.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    message.extend_from_slice(&rdata);
    let arcount = u16::from_be_bytes([message[10], message[11]]) + 1;
    message[10..12].copy_from_slice(&arcount.to_be_bytes());
}

/// dig's `-y` for a mode dig can sign with.
pub fn dig_flag(mode: TsigMode) -> Option<String> {
    match mode {
        TsigMode::Good => Some(format!(" -y hmac-sha256:{}:{}", KEY.name, KEY.secret)),
        TsigMode::UnknownKey => Some(format!(" -y hmac-sha256:unknown-key:{}", KEY.secret)),
        TsigMode::BadMac => Some(format!(" -y hmac-sha256:{}:bm90IHRoZSBzZWNyZXQgdGhlIHNlcnZlcnMgaG9sZA==", KEY.name)),
        TsigMode::BadTime | TsigMode::UnknownAlgorithm => None,
    }
}
