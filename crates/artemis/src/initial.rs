//! Decrypting a client's QUIC Initial packets (RFC 9000 17.2.2, RFC 9001
//! 5, RFC 9369 for v2): anyone can, since the keys come from the client's
//! Destination Connection ID and a public salt. The dispatcher does it to
//! read the CRYPTO frames that carry the TLS ClientHello.
//!
//! One datagram may hold several coalesced packets: the first must be an
//! Initial; later Initials with the same version and DCID are decrypted
//! too, other long-header packets of the connection (0-RTT, Handshake)
//! are stepped over, and anything after a packet of another connection or
//! a short header is ignored (RFC 9000 12.2). A datagram is decoded whole
//! or dropped whole, so a corrupted copy never half-updates any state.

use rustls::Side;
use rustls::quic::{DirectionalKeys, Keys, Suite, Version};

/// The wire value of QUIC version 1 (RFC 9000).
pub const QUIC_V1: u32 = 0x0000_0001;
/// The wire value of QUIC version 2 (RFC 9369).
pub const QUIC_V2: u32 = 0x6b33_43cf;
/// A client's Initial travels in a datagram of at least this many bytes
/// (RFC 9000 14.1); smaller ones are dropped, and get no Version
/// Negotiation, which would otherwise amplify spoofed traffic.
pub const MIN_INITIAL_DATAGRAM: usize = 1200;
const MAX_CONNECTION_ID: usize = 20;
/// RFC 9000 7.2: a client's first DCID is at least 8 unpredictable bytes.
const MIN_CLIENT_DCID: usize = 8;
const LONG_HEADER: u8 = 0x80;
const FIXED_BIT: u8 = 0x40;
/// Header protection samples 16 bytes, 4 bytes after the packet number's start.
const SAMPLE_OFFSET: usize = 4;
const SAMPLE_LEN: usize = 16;

/// Why a datagram was dropped. Dropping is always safe: the client
/// retransmits what matters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    #[error("truncated: the datagram ends inside the {0}")]
    Truncated(&'static str),
    #[error("a short-header packet where a long header was expected")]
    ShortHeader,
    #[error("a Version Negotiation packet: only servers send those")]
    VersionNegotiation,
    #[error("datagram of {0} bytes: a client's Initial comes in at least 1200")]
    TooSmall(usize),
    #[error("the fixed bit is clear")]
    FixedBitClear,
    #[error("connection ID of {0} bytes: QUIC v1 and v2 allow at most 20")]
    ConnectionIdTooLong(usize),
    #[error("client destination connection ID of {0} bytes: at least 8 are required")]
    ConnectionIdTooShort(usize),
    #[error("the first packet is not an Initial")]
    NotInitial,
    #[error("decryption failed (wrong keys or a corrupted packet)")]
    Undecryptable,
    #[error("reserved header bits are set")]
    ReservedBits,
    #[error("an Initial packet with no frames")]
    NoFrames,
    #[error("frame type {0:#x} is not allowed in an Initial packet")]
    ForbiddenFrame(u64),
    #[error("CRYPTO data beyond offset {0}: no ClientHello is that long")]
    CryptoTooFar(u64),
    #[error("the handshake message is not a ClientHello")]
    NotClientHello,
    #[error("the ClientHello of {0} bytes is longer than this dispatcher buffers")]
    ClientHelloTooLong(usize),
    #[error("the ClientHello does not parse")]
    BadClientHello,
    #[error("the ClientHello names no server (SNI)")]
    NoServerName,
    #[error("the ClientHello's server name is not a host name")]
    BadServerName,
    #[error("this connection has buffered all it may")]
    EntryFull,
    #[error("the reassembly table is full")]
    TableFull,
}

/// The QUIC versions whose Initials this dispatcher can decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuicVersion {
    V1,
    V2,
}

impl QuicVersion {
    pub fn from_wire(version: u32) -> Option<Self> {
        match version {
            QUIC_V1 => Some(Self::V1),
            QUIC_V2 => Some(Self::V2),
            _ => None,
        }
    }

    pub fn wire(self) -> u32 {
        match self {
            Self::V1 => QUIC_V1,
            Self::V2 => QUIC_V2,
        }
    }

    /// The long-header type bits of an Initial: v2 renumbered them.
    fn initial_type(self) -> u8 {
        match self {
            Self::V1 => 0b00,
            Self::V2 => 0b01,
        }
    }

    /// The type bits of a Retry, the one long-header packet with no Length.
    fn retry_type(self) -> u8 {
        match self {
            Self::V1 => 0b11,
            Self::V2 => 0b00,
        }
    }

    pub(crate) fn rustls(self) -> Version {
        match self {
            Self::V1 => Version::V1,
            Self::V2 => Version::V2,
        }
    }
}

/// A connection ID of a version we speak: at most 20 bytes, kept inline
/// so table keys allocate nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId {
    bytes: [u8; MAX_CONNECTION_ID],
    len: u8,
}

impl ConnectionId {
    pub fn new(id: &[u8]) -> Result<Self, DropReason> {
        if id.len() > MAX_CONNECTION_ID {
            return Err(DropReason::ConnectionIdTooLong(id.len()));
        }
        let mut bytes = [0; MAX_CONNECTION_ID];
        bytes[..id.len()].copy_from_slice(id);
        Ok(Self { bytes, len: id.len() as u8 })
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Data of a CRYPTO frame: `data` sits at `offset` in the Initial-level
/// handshake stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CryptoFragment {
    pub offset: u64,
    pub data: Vec<u8>,
}

/// What a datagram that starts with a long header turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// A version we do not speak: send this Version Negotiation packet back.
    Unsupported { version_negotiation: Vec<u8> },
    /// Client Initials, decrypted: the CRYPTO data they carried, in order.
    Initial { version: QuicVersion, dcid: ConnectionId, fragments: Vec<CryptoFragment> },
}

/// Decodes a datagram from a client (see the module's notes).
pub fn decode_datagram(datagram: &[u8]) -> Result<Received, DropReason> {
    let header = LongHeader::parse(datagram)?;
    let Some(version) = QuicVersion::from_wire(header.version) else {
        if datagram.len() < MIN_INITIAL_DATAGRAM {
            return Err(DropReason::TooSmall(datagram.len()));
        }
        return Ok(Received::Unsupported { version_negotiation: version_negotiation(header.dcid, header.scid) });
    };
    if datagram.len() < MIN_INITIAL_DATAGRAM {
        return Err(DropReason::TooSmall(datagram.len()));
    }
    let dcid = ConnectionId::new(header.dcid)?;
    ConnectionId::new(header.scid)?; // only its length matters here
    if header.dcid.len() < MIN_CLIENT_DCID {
        return Err(DropReason::ConnectionIdTooShort(header.dcid.len()));
    }
    if header.packet_type() != version.initial_type() {
        return Err(DropReason::NotInitial);
    }
    let keys = initial_keys(version, dcid.as_slice());
    let mut fragments = Vec::new();
    let mut start = 0;
    while start < datagram.len() {
        let Ok(packet) = LongHeader::parse(&datagram[start..]) else { break };
        if packet.version != header.version || packet.dcid != header.dcid {
            break;
        }
        if packet.packet_type() == version.retry_type() {
            break;
        }
        let is_initial = packet.packet_type() == version.initial_type();
        let packet = packet.with_length(is_initial)?;
        if is_initial {
            let plaintext = decrypt(&keys, &datagram[start..start + packet.end], packet.number_offset)?;
            read_frames(&plaintext, &mut fragments)?;
        }
        start += packet.end;
    }
    Ok(Received::Initial { version, dcid, fragments })
}

/// The version and Destination Connection ID of a long-header packet,
/// read without decrypting anything.
pub fn long_header_ids(datagram: &[u8]) -> Result<(u32, &[u8]), DropReason> {
    let header = LongHeader::parse(datagram)?;
    Ok((header.version, header.dcid))
}

/// The client's Initial keys for `dcid`, as the server derives them.
fn initial_keys(version: QuicVersion, dcid: &[u8]) -> DirectionalKeys {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("TLS_AES_128_GCM_SHA256 is QUIC's Initial suite");
    let Suite { suite, quic } = suite;
    Keys::initial(version.rustls(), suite, quic, dcid, Side::Server).remote
}

/// A Version Negotiation packet (RFC 9000 17.2.1) answering a client
/// that sent `dcid` and `scid`: the IDs swapped, then v1 and v2.
pub fn version_negotiation(dcid: &[u8], scid: &[u8]) -> Vec<u8> {
    // 0x40 set, so the packet looks like one with the fixed bit (RFC 9000 17.2.1).
    let mut packet = vec![LONG_HEADER | FIXED_BIT];
    packet.extend_from_slice(&0u32.to_be_bytes());
    for id in [scid, dcid] {
        packet.push(id.len() as u8);
        packet.extend_from_slice(id);
    }
    for version in [QUIC_V1, QUIC_V2] {
        packet.extend_from_slice(&version.to_be_bytes());
    }
    packet
}

/// The invariant part of a long header (RFC 8999 5.1), then, for packets
/// of our versions, where the packet number starts and the packet ends.
struct LongHeader<'a> {
    first: u8,
    version: u32,
    dcid: &'a [u8],
    scid: &'a [u8],
    rest: Reader<'a>,
}

/// A long-header packet's extent inside the bytes it was parsed from.
struct PacketBounds {
    number_offset: usize,
    end: usize,
}

impl<'a> LongHeader<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, DropReason> {
        let mut reader = Reader::new(bytes);
        let first = reader.u8("first byte")?;
        if first & LONG_HEADER == 0 {
            return Err(DropReason::ShortHeader);
        }
        let version = reader.u32("version")?;
        if version == 0 {
            return Err(DropReason::VersionNegotiation);
        }
        let dcid = reader.with_u8_length("destination connection ID")?;
        let scid = reader.with_u8_length("source connection ID")?;
        Ok(Self { first, version, dcid, scid, rest: reader })
    }

    fn packet_type(&self) -> u8 {
        (self.first >> 4) & 0b11
    }

    /// Reads the token (Initials only) and the Length field.
    fn with_length(mut self, has_token: bool) -> Result<PacketBounds, DropReason> {
        if self.first & FIXED_BIT == 0 {
            return Err(DropReason::FixedBitClear);
        }
        if has_token {
            let token_len = self.rest.varint("token length")?;
            self.rest.take(token_len, "token")?;
        }
        let length = self.rest.varint("length")?;
        let number_offset = self.rest.position;
        self.rest.take(length, "packet")?;
        if length < (SAMPLE_OFFSET + SAMPLE_LEN) as u64 {
            return Err(DropReason::Truncated("header protection sample"));
        }
        Ok(PacketBounds { number_offset, end: self.rest.position })
    }
}

/// Removes header protection and decrypts one Initial packet; returns the
/// plaintext frames.
fn decrypt(keys: &DirectionalKeys, packet: &[u8], number_offset: usize) -> Result<Vec<u8>, DropReason> {
    let mut packet = packet.to_vec();
    let sample_start = number_offset + SAMPLE_OFFSET;
    let sample: [u8; SAMPLE_LEN] = packet[sample_start..sample_start + SAMPLE_LEN].try_into().expect("the bounds checked the sample");
    let (header, rest) = packet.split_at_mut(number_offset);
    keys.header.decrypt_in_place(&sample, &mut header[0], &mut rest[..4]).map_err(|_| DropReason::Undecryptable)?;
    let number_len = usize::from(packet[0] & 0b11) + 1;
    let number = packet[number_offset..number_offset + number_len].iter().fold(0u64, |number, &byte| (number << 8) | u64::from(byte));
    let reserved_bits = packet[0] & 0b1100;
    let (header, payload) = packet.split_at_mut(number_offset + number_len);
    // A client's Initial packet numbers start at 0 and stay small, so the
    // truncated number is the full one (RFC 9000 A.3 with none received).
    let plaintext = keys.packet.decrypt_in_place(number, header, payload).map_err(|_| DropReason::Undecryptable)?;
    // Checked only now: before decryption the bits are not authenticated (RFC 9000 17.2).
    if reserved_bits != 0 {
        return Err(DropReason::ReservedBits);
    }
    Ok(plaintext.to_vec())
}

/// The frames an Initial may carry (RFC 9000 12.4, table 3); anything
/// else is a protocol violation, so the packet is dropped.
fn read_frames(plaintext: &[u8], fragments: &mut Vec<CryptoFragment>) -> Result<(), DropReason> {
    if plaintext.is_empty() {
        return Err(DropReason::NoFrames);
    }
    let mut reader = Reader::new(plaintext);
    while !reader.is_empty() {
        match reader.varint("frame type")? {
            0x00 | 0x01 => {} // PADDING, PING
            frame @ (0x02 | 0x03) => skip_ack(&mut reader, frame == 0x03)?,
            0x06 => {
                let offset = reader.varint("CRYPTO offset")?;
                let length = reader.varint("CRYPTO length")?;
                let data = reader.take(length, "CRYPTO data")?;
                fragments.push(CryptoFragment { offset, data: data.to_vec() });
            }
            0x1c => {
                reader.varint("CONNECTION_CLOSE error code")?;
                reader.varint("CONNECTION_CLOSE frame type")?;
                let reason_len = reader.varint("CONNECTION_CLOSE reason length")?;
                reader.take(reason_len, "CONNECTION_CLOSE reason")?;
            }
            other => return Err(DropReason::ForbiddenFrame(other)),
        }
    }
    Ok(())
}

/// Steps over an ACK frame (RFC 9000 19.3): its content does not matter here.
fn skip_ack(reader: &mut Reader, with_ecn: bool) -> Result<(), DropReason> {
    reader.varint("ACK largest")?;
    reader.varint("ACK delay")?;
    let ranges = reader.varint("ACK range count")?;
    reader.varint("ACK first range")?;
    for _ in 0..ranges {
        reader.varint("ACK gap")?;
        reader.varint("ACK range")?;
    }
    if with_ecn {
        for _ in 0..3 {
            reader.varint("ACK ECN count")?;
        }
    }
    Ok(())
}

/// Reads big-endian fields and QUIC variable-length integers; running
/// out of bytes names the field it was reading.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, position: 0 }
    }

    fn is_empty(&self) -> bool {
        self.position == self.bytes.len()
    }

    fn take(&mut self, length: u64, field: &'static str) -> Result<&'a [u8], DropReason> {
        let available = self.bytes.len() - self.position;
        let length = usize::try_from(length).ok().filter(|&length| length <= available);
        let length = length.ok_or(DropReason::Truncated(field))?;
        let taken = &self.bytes[self.position..self.position + length];
        self.position += length;
        Ok(taken)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DropReason> {
        Ok(self.take(1, field)?[0])
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DropReason> {
        Ok(u32::from_be_bytes(self.take(4, field)?.try_into().expect("took 4 bytes")))
    }

    fn with_u8_length(&mut self, field: &'static str) -> Result<&'a [u8], DropReason> {
        let length = self.u8(field)?;
        self.take(length.into(), field)
    }

    /// RFC 9000 16: the first byte's two high bits give the length.
    fn varint(&mut self, field: &'static str) -> Result<u64, DropReason> {
        let first = self.u8(field)?;
        let extra = (1usize << (first >> 6)) - 1;
        let rest = self.take(extra as u64, field)?;
        Ok(rest.iter().fold(u64::from(first & 0x3f), |value, &byte| (value << 8) | u64::from(byte)))
    }
}
