//! Sealing a client's Initial packet the way a client does (RFC 9001 5):
//! with the client's Initial keys from rustls's key schedule, then header
//! protection. The dispatcher never seals; its tests, the fuzz target and
//! the benchmark build exact, and exactly malformed, Initials with it.

use rustls::Side;
use rustls::quic::{DirectionalKeys, Keys};

use crate::initial::QuicVersion;

/// The AEAD tag of AES-128-GCM, QUIC's Initial cipher.
const TAG_LEN: usize = 16;
/// Sealed packets always carry a 4-byte packet number and a 2-byte Length.
const NUMBER_LEN: usize = 4;

/// How an Initial is built; [`Sealed::new`] gives a valid one.
#[derive(Debug, Clone)]
pub struct Sealed {
    /// Must be v1 or v2: the keys depend on it.
    pub version: u32,
    pub first_byte: u8,
    pub dcid: Vec<u8>,
    pub scid: Vec<u8>,
    pub packet_number: u32,
    pub frames: Vec<u8>,
    /// The packet is padded with PADDING frames up to this size.
    pub datagram_size: usize,
}

impl Sealed {
    pub fn new(frames: Vec<u8>) -> Self {
        Self {
            version: crate::initial::QUIC_V1,
            first_byte: 0xc3, // long header, fixed bit, Initial (v1), 4-byte packet number
            dcid: vec![0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08],
            scid: vec![0xaa; 8],
            packet_number: 0,
            frames,
            datagram_size: crate::initial::MIN_INITIAL_DATAGRAM,
        }
    }

    /// The protected packet. Panics for a version other than v1 and v2,
    /// or frames too long for the 2-byte Length (16 KB): both are bugs of
    /// the caller, not inputs.
    pub fn seal(&self) -> Vec<u8> {
        let version = QuicVersion::from_wire(self.version).expect("sealing needs v1 or v2");
        let mut header = vec![self.first_byte];
        header.extend_from_slice(&self.version.to_be_bytes());
        for id in [&self.dcid, &self.scid] {
            header.push(id.len() as u8);
            header.extend_from_slice(id);
        }
        header.push(0); // no token
        let overhead = header.len() + 2 + NUMBER_LEN + TAG_LEN;
        let mut payload = self.frames.clone();
        payload.resize(payload.len().max(self.datagram_size.saturating_sub(overhead)), 0);
        let length = u16::try_from(NUMBER_LEN + payload.len() + TAG_LEN).ok().filter(|&length| length < 0x4000);
        header.extend_from_slice(&(0x4000 | length.expect("an Initial's Length fits 14 bits")).to_be_bytes());
        let number_offset = header.len();
        header.extend_from_slice(&self.packet_number.to_be_bytes());
        let keys = client_keys(version, &self.dcid);
        let tag = keys.packet.encrypt_in_place(self.packet_number.into(), &header, &mut payload).expect("AES-GCM seals any length");
        let mut packet = header;
        packet.extend_from_slice(&payload);
        packet.extend_from_slice(tag.as_ref());
        let sample: [u8; 16] = packet[number_offset + 4..number_offset + 20].try_into().expect("payload and tag exceed the sample");
        let (first, rest) = packet.split_at_mut(number_offset);
        keys.header.encrypt_in_place(&sample, &mut first[0], &mut rest[..NUMBER_LEN]).expect("a 16-byte sample");
        packet
    }
}

fn client_keys(version: QuicVersion, dcid: &[u8]) -> DirectionalKeys {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("TLS_AES_128_GCM_SHA256 is QUIC's Initial suite");
    Keys::initial(version.rustls(), suite.suite, suite.quic, dcid, Side::Client).local
}

/// A CRYPTO frame carrying `data` at `offset` (8-byte varints, always valid).
pub fn crypto_frame(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x06];
    frame.extend_from_slice(&(0xc000_0000_0000_0000 | offset).to_be_bytes());
    frame.extend_from_slice(&(0xc000_0000_0000_0000 | data.len() as u64).to_be_bytes());
    frame.extend_from_slice(data);
    frame
}
