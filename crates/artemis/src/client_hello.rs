//! Reassembling a client's ClientHello from its Initials, and reading the
//! server name (SNI) and ALPN from it.
//!
//! With post-quantum key shares a ClientHello spans two or three Initials,
//! and Chrome, Firefox and quic-go split and reorder its CRYPTO frames on
//! purpose. So the dispatcher keeps a small table keyed by (client
//! address, version, DCID): the CRYPTO data received so far by offset, and
//! the datagrams themselves, to be forwarded unmodified once the name is
//! known. Every entry has a deadline, and the table caps its entries, the
//! bytes of one entry and the bytes of all: a flood can fill it, never
//! grow it. What does not fit is dropped, and the client retransmits.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tls_parser::{TlsExtension, TlsMessage, TlsMessageHandshake};

use crate::initial::{ConnectionId, CryptoFragment, DropReason, QuicVersion, Received, decode_datagram};
use crate::service_id::CanonicalName;

/// TLS handshake message type of a ClientHello (RFC 8446 4).
const CLIENT_HELLO: u8 = 1;
/// The handshake header: type (1 byte) and length (3 bytes).
const HANDSHAKE_HEADER: usize = 4;
/// The SNI entry type for a DNS host name (RFC 6066 3).
const SNI_HOST_NAME: u8 = 0;

/// What the dispatcher reads from a ClientHello to route it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    pub server_name: CanonicalName,
    /// The offered application protocols, in the client's order.
    pub alpn: Vec<Vec<u8>>,
}

/// One datagram's effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// An unknown version: send this Version Negotiation packet back.
    VersionNegotiation(Vec<u8>),
    /// Part of a ClientHello, kept until the rest arrives.
    Incomplete,
    /// The whole ClientHello, and the connection's datagrams in arrival order.
    Complete { hello: ClientHello, datagrams: Vec<Vec<u8>> },
}

/// The table's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub entries: usize,
    /// Datagrams and CRYPTO data of one connection; also bounds the ClientHello.
    pub bytes_per_entry: usize,
    pub total_bytes: usize,
    /// How long a partial ClientHello waits for the rest.
    pub lifetime: Duration,
}

impl Default for Limits {
    /// Room for a ClientHello of three full Initials with ML-KEM shares
    /// (about 1.5-2 KB, in 1200-1500 byte datagrams, counted twice: as
    /// datagrams and as CRYPTO data), and a few thousand handshakes in
    /// flight; a client's Initial retransmission comes after about 1 s.
    fn default() -> Self {
        Self { entries: 4096, bytes_per_entry: 12 * 1024, total_bytes: 8 * 1024 * 1024, lifetime: Duration::from_secs(2) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ConnectionKey {
    client: SocketAddr,
    version: QuicVersion,
    dcid: ConnectionId,
}

/// A partial ClientHello.
#[derive(Debug)]
struct Pending {
    fragments: BTreeMap<u64, Vec<u8>>,
    datagrams: Vec<Vec<u8>>,
    bytes: usize,
    deadline: Instant,
}

/// The reassembly table (see the module's notes). Time is passed in.
#[derive(Debug)]
pub struct ClientHelloTable {
    limits: Limits,
    pending: HashMap<ConnectionKey, Pending>,
    /// Deadlines in the order they were set, which is their sorted order
    /// since `now` never goes back and the lifetime is fixed.
    expiries: VecDeque<(Instant, ConnectionKey)>,
    total_bytes: usize,
}

impl ClientHelloTable {
    pub fn new(limits: Limits) -> Self {
        Self { limits, pending: HashMap::new(), expiries: VecDeque::new(), total_bytes: 0 }
    }

    /// Partial ClientHellos held.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Bytes held: datagrams and CRYPTO data, without the maps' own overhead.
    pub fn bytes(&self) -> usize {
        self.total_bytes
    }

    /// Takes one datagram that starts with a long header, from `client`.
    /// A datagram that is dropped leaves the table as it was, except that
    /// a ClientHello found malformed ends its entry.
    pub fn receive(&mut self, client: SocketAddr, datagram: &[u8], now: Instant) -> Result<Decoded, DropReason> {
        self.expire(now);
        let (version, dcid, fragments) = match decode_datagram(datagram)? {
            Received::Unsupported { version_negotiation } => return Ok(Decoded::VersionNegotiation(version_negotiation)),
            Received::Initial { version, dcid, fragments } => (version, dcid, fragments),
        };
        let key = ConnectionKey { client, version, dcid };
        self.admit(key, datagram, fragments, now)?;
        match self.assembled(&key) {
            Ok(None) => Ok(Decoded::Incomplete),
            Ok(Some(hello)) => {
                let pending = self.remove(&key);
                Ok(Decoded::Complete { hello, datagrams: pending.datagrams })
            }
            Err(reason) => {
                self.remove(&key);
                Err(reason)
            }
        }
    }

    /// Stores the datagram and its CRYPTO data if they fit and add data.
    fn admit(&mut self, key: ConnectionKey, datagram: &[u8], fragments: Vec<CryptoFragment>, now: Instant) -> Result<(), DropReason> {
        let limit = self.limits.bytes_per_entry as u64;
        if let Some(too_far) = fragments.iter().find(|fragment| fragment.offset + fragment.data.len() as u64 > limit) {
            return Err(DropReason::CryptoTooFar(too_far.offset + too_far.data.len() as u64));
        }
        let cost = datagram.len() + fragments.iter().map(|fragment| fragment.data.len()).sum::<usize>();
        let held = self.pending.get(&key).map(|pending| pending.bytes);
        if held.unwrap_or(0) + cost > self.limits.bytes_per_entry {
            return Err(DropReason::EntryFull);
        }
        if self.total_bytes + cost > self.limits.total_bytes || (held.is_none() && self.pending.len() >= self.limits.entries) {
            return Err(DropReason::TableFull);
        }
        if let Some(pending) = self.pending.get(&key)
            && fragments.iter().all(|fragment| covered(&pending.fragments, fragment))
        {
            // A retransmission or duplicate: nothing new to keep or forward.
            return Ok(());
        }
        if held.is_none() {
            let deadline = now + self.limits.lifetime;
            self.expiries.push_back((deadline, key));
            let pending = Pending { fragments: BTreeMap::new(), datagrams: Vec::new(), bytes: 0, deadline };
            self.pending.insert(key, pending);
        }
        let pending = self.pending.get_mut(&key).expect("inserted above");
        for fragment in fragments {
            let kept = pending.fragments.entry(fragment.offset).or_default();
            if fragment.data.len() > kept.len() {
                *kept = fragment.data;
            }
        }
        pending.datagrams.push(datagram.to_vec());
        pending.bytes += cost;
        self.total_bytes += cost;
        Ok(())
    }

    /// The ClientHello, once the data from offset 0 covers it.
    fn assembled(&self, key: &ConnectionKey) -> Result<Option<ClientHello>, DropReason> {
        let Some(pending) = self.pending.get(key) else { return Ok(None) };
        let prefix = contiguous_prefix(&pending.fragments);
        if prefix.len() < HANDSHAKE_HEADER {
            return Ok(None);
        }
        if prefix[0] != CLIENT_HELLO {
            return Err(DropReason::NotClientHello);
        }
        let total = HANDSHAKE_HEADER + (usize::from(prefix[1]) << 16 | usize::from(prefix[2]) << 8 | usize::from(prefix[3]));
        if total > self.limits.bytes_per_entry {
            return Err(DropReason::ClientHelloTooLong(total));
        }
        if prefix.len() < total {
            return Ok(None);
        }
        parse_client_hello(&prefix[..total]).map(Some)
    }

    fn remove(&mut self, key: &ConnectionKey) -> Pending {
        let pending = self.pending.remove(key).expect("removing a held entry");
        self.total_bytes -= pending.bytes;
        pending
    }

    /// Forgets the entries whose deadline has passed.
    fn expire(&mut self, now: Instant) {
        while let Some(&(deadline, key)) = self.expiries.front() {
            if deadline > now {
                break;
            }
            self.expiries.pop_front();
            // The key may have completed, or completed and come back later.
            if self.pending.get(&key).is_some_and(|pending| pending.deadline == deadline) {
                self.remove(&key);
            }
        }
    }
}

/// Whether `fragment` adds no byte to those held.
fn covered(held: &BTreeMap<u64, Vec<u8>>, fragment: &CryptoFragment) -> bool {
    let end = fragment.offset + fragment.data.len() as u64;
    let mut reached = fragment.offset;
    for (&offset, data) in held.range(..end) {
        if offset > reached {
            return false;
        }
        reached = reached.max(offset + data.len() as u64);
        if reached >= end {
            return true;
        }
    }
    reached >= end
}

/// The stream's bytes from offset 0 up to the first gap.
fn contiguous_prefix(fragments: &BTreeMap<u64, Vec<u8>>) -> Vec<u8> {
    let mut stream = Vec::new();
    for (&offset, data) in fragments {
        let Ok(offset) = usize::try_from(offset) else { break };
        if offset > stream.len() {
            break;
        }
        let new_bytes = (offset + data.len()).saturating_sub(stream.len());
        stream.extend_from_slice(&data[data.len() - new_bytes..]);
    }
    stream
}

/// Reads the server name and ALPN from a complete ClientHello message.
fn parse_client_hello(message: &[u8]) -> Result<ClientHello, DropReason> {
    let Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello)))) = tls_parser::parse_tls_message_handshake(message) else {
        return Err(DropReason::BadClientHello);
    };
    let extensions = hello.ext.ok_or(DropReason::NoServerName)?;
    let (_, extensions) = tls_parser::parse_tls_extensions(extensions).map_err(|_| DropReason::BadClientHello)?;
    let mut server_name = None;
    let mut alpn = Vec::new();
    for extension in extensions {
        match extension {
            TlsExtension::SNI(names) => {
                server_name = names.into_iter().find(|(kind, _)| kind.0 == SNI_HOST_NAME).map(|(_, name)| name);
            }
            TlsExtension::ALPN(protocols) => alpn = protocols.into_iter().map(<[u8]>::to_vec).collect(),
            _ => {}
        }
    }
    let server_name = server_name.ok_or(DropReason::NoServerName)?;
    let server_name = std::str::from_utf8(server_name).map_err(|_| DropReason::BadServerName)?;
    let server_name = CanonicalName::new(server_name).map_err(|_| DropReason::BadServerName)?;
    Ok(ClientHello { server_name, alpn })
}
