//! The tunnel between data centers' dispatchers: when the routing core
//! chooses a replica in another data center, this dispatcher sends the
//! client's datagram, unmodified, to that data center's dispatcher in one
//! UDP datagram of its own, with what the far side cannot know: the
//! client's address, the service address the client sent to, and the
//! replica chosen here (the decision is made once: routing again there
//! could choose differently). The far dispatcher delivers it to that
//! replica by VXLAN, as its own.
//!
//! UDP because this project's kernels have no GRE or IPIP, and VXLAN
//! would need the far dispatcher's kernel to hand it a frame it then
//! re-tunnels; our own format keeps the addresses explicit. Layout:
//!
//! ```text
//! "PXDC" | sent (Unix ms) | family (4 or 6) | client IP, port | service IP, port | replica IP | the client's datagram | tag
//! ```
//!
//! Ports are 2 bytes big-endian, the time 8; the three addresses share the
//! family. The header names a client the far side will impersonate, so
//! the far side believes only its configured peers, and only datagrams
//! whose tag, HMAC-SHA256 under the key the dispatchers share, covers all
//! that precedes it, sent within [`WINDOW_MS`] of its own clock: an old
//! datagram replayed later is refused. A copy replayed within the window
//! reaches the replica as a duplicate, which QUIC discards itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The first bytes of every tunnel datagram.
const MAGIC: &[u8; 4] = b"PXDC";
/// HMAC-SHA256's, whole.
const TAG_LEN: usize = 32;
/// How far a datagram's sending time may be from the receiver's clock,
/// either way: the inter-DC delay plus the clocks' difference (NTP keeps
/// it to milliseconds).
pub const WINDOW_MS: u64 = 2_000;
/// The shortest key accepted: 128 bits.
pub const MIN_KEY_LEN: usize = 16;

/// The key every dispatcher of the deployment shares.
#[derive(Clone)]
pub struct TunnelKey(Hmac<Sha256>);

impl std::fmt::Debug for TunnelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TunnelKey(..)")
    }
}

impl TunnelKey {
    /// At least [`MIN_KEY_LEN`] bytes, from a random source.
    pub fn new(key: &[u8]) -> Result<Self, KeyError> {
        if key.len() < MIN_KEY_LEN {
            return Err(KeyError::Short(key.len()));
        }
        Ok(Self(Hmac::new_from_slice(key).expect("HMAC takes a key of any length")))
    }

    /// The key written in hex (either case; surrounding white space, as a
    /// file's last newline, ignored).
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        let bytes = data_encoding::HEXLOWER_PERMISSIVE.decode(text.trim().as_bytes()).map_err(|error| KeyError::Hex(error.to_string()))?;
        Self::new(&bytes)
    }

    fn tag(&self, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(body);
        mac
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the tunnel key is {0} bytes; at least {MIN_KEY_LEN} (32 hex digits) are needed")]
    Short(usize),
    #[error("the tunnel key is not hex: {0}")]
    Hex(String),
}

/// One tunnelled datagram, as the far dispatcher reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnelled<'a> {
    pub client: SocketAddr,
    pub service: SocketAddr,
    pub replica: IpAddr,
    pub datagram: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelError {
    #[error("not an inter-DC tunnel datagram (no PXDC magic)")]
    NoMagic,
    #[error("address family {0} (4 or 6 expected)")]
    BadFamily(u8),
    #[error("truncated in the {0}")]
    Truncated(&'static str),
    #[error("client {client}, service {service} and replica {replica} are not of one address family")]
    MixedFamilies { client: SocketAddr, service: SocketAddr, replica: IpAddr },
    #[error("the tag does not match: not sealed with our key, or changed on the way")]
    BadTag,
    #[error("sent at {sent} ms, {now} ms here: outside the {WINDOW_MS} ms window (replayed, or clocks apart)")]
    OutsideWindow { sent: u64, now: u64 },
}

impl Tunnelled<'_> {
    /// The tunnel datagram, sent at `now` (Unix ms) and tagged under `key`.
    pub fn seal(&self, key: &TunnelKey, now: u64) -> Result<Vec<u8>, TunnelError> {
        let mut bytes = self.body(now)?;
        let tag = key.tag(&bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        Ok(bytes)
    }

    fn body(&self, sent: u64) -> Result<Vec<u8>, TunnelError> {
        let family = match (self.client, self.service, self.replica) {
            (SocketAddr::V4(_), SocketAddr::V4(_), IpAddr::V4(_)) => 4,
            (SocketAddr::V6(_), SocketAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => return Err(TunnelError::MixedFamilies { client: self.client, service: self.service, replica: self.replica }),
        };
        let mut bytes = Vec::with_capacity(13 + 3 * 18 + self.datagram.len() + TAG_LEN);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&sent.to_be_bytes());
        bytes.push(family);
        for address in [self.client, self.service] {
            push_ip(&mut bytes, address.ip());
            bytes.extend_from_slice(&address.port().to_be_bytes());
        }
        push_ip(&mut bytes, self.replica);
        bytes.extend_from_slice(self.datagram);
        Ok(bytes)
    }
}

fn push_ip(bytes: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => bytes.extend_from_slice(&v4.octets()),
        IpAddr::V6(v6) => bytes.extend_from_slice(&v6.octets()),
    }
}

/// Reads a tunnel datagram received at `now` (Unix ms): believed only if
/// its tag is right under `key` and it was sent within the window. The
/// client's datagram is borrowed from it.
pub fn open<'a>(bytes: &'a [u8], key: &TunnelKey, now: u64) -> Result<Tunnelled<'a>, TunnelError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(TunnelError::NoMagic)?;
    let body_len = bytes.len().checked_sub(TAG_LEN).filter(|&len| len >= MAGIC.len()).ok_or(TunnelError::Truncated("tag"))?;
    let (body, tag) = bytes.split_at(body_len);
    key.tag(body).verify_slice(tag).map_err(|_| TunnelError::BadTag)?;
    let rest = &rest[..body_len - MAGIC.len()];
    let (sent, rest) = rest.split_first_chunk::<8>().ok_or(TunnelError::Truncated("time"))?;
    let sent = u64::from_be_bytes(*sent);
    if sent.abs_diff(now) > WINDOW_MS {
        return Err(TunnelError::OutsideWindow { sent, now });
    }
    let (&family, rest) = rest.split_first().ok_or(TunnelError::Truncated("family"))?;
    let ip_len = match family {
        4 => 4,
        6 => 16,
        other => return Err(TunnelError::BadFamily(other)),
    };
    let mut reader = Reader { rest, ip_len };
    let client = reader.socket_address("client address")?;
    let service = reader.socket_address("service address")?;
    let replica = reader.ip("replica address")?;
    Ok(Tunnelled { client, service, replica, datagram: reader.rest })
}

struct Reader<'a> {
    rest: &'a [u8],
    ip_len: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, field: &'static str) -> Result<&'a [u8], TunnelError> {
        if self.rest.len() < len {
            return Err(TunnelError::Truncated(field));
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    fn ip(&mut self, field: &'static str) -> Result<IpAddr, TunnelError> {
        let bytes = self.take(self.ip_len, field)?;
        Ok(match <[u8; 4]>::try_from(bytes) {
            Ok(v4) => Ipv4Addr::from(v4).into(),
            Err(_) => Ipv6Addr::from(<[u8; 16]>::try_from(bytes).expect("ip_len is 4 or 16")).into(),
        })
    }

    fn socket_address(&mut self, field: &'static str) -> Result<SocketAddr, TunnelError> {
        let ip = self.ip(field)?;
        let port = self.take(2, field)?;
        Ok(SocketAddr::new(ip, u16::from_be_bytes([port[0], port[1]])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_764_000_000_000;

    fn key() -> TunnelKey {
        TunnelKey::from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f").unwrap()
    }

    fn sample(client: &str, service: &str, replica: &str) -> Tunnelled<'static> {
        Tunnelled {
            client: client.parse().unwrap(),
            service: service.parse().unwrap(),
            replica: replica.parse().unwrap(),
            datagram: b"\xc3 a QUIC Initial",
        }
    }

    /// `body`, tagged under [`key`] as a sender would: a well-signed
    /// datagram whose content is wrong.
    fn tagged(body: &[u8]) -> Vec<u8> {
        [body, &key().tag(body).finalize().into_bytes()[..]].concat()
    }

    #[test]
    fn both_families_round_trip_with_the_datagram_untouched() {
        for tunnelled in [
            sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2"),
            sample("[2001:db8::2]:50000", "[2001:db8:5::7]:443", "2001:db8:22::2"),
        ] {
            let bytes = tunnelled.seal(&key(), NOW).unwrap();
            assert_eq!(&bytes[..4], b"PXDC");
            assert!(bytes[..bytes.len() - TAG_LEN].ends_with(tunnelled.datagram));
            assert_eq!(open(&bytes, &key(), NOW + 5).unwrap(), tunnelled);
        }
        let v4 = sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2").seal(&key(), NOW).unwrap();
        assert_eq!(&v4[4..12], &NOW.to_be_bytes());
        assert_eq!(&v4[12..19], &[4, 10, 77, 1, 2, 0xc3, 0x50]);
    }

    #[test]
    fn a_wrong_tag_or_a_time_outside_the_window_is_refused() {
        let sealed = sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2").seal(&key(), NOW).unwrap();
        let other = TunnelKey::new(&[7; 32]).unwrap();
        assert_eq!(open(&sealed, &other, NOW), Err(TunnelError::BadTag), "another deployment's key");
        for at in [5, 13, sealed.len() - 20, sealed.len() - 1] {
            let mut changed = sealed.clone();
            changed[at] ^= 1;
            assert_eq!(open(&changed, &key(), NOW), Err(TunnelError::BadTag), "byte {at} changed");
        }
        assert_eq!(open(&sealed, &key(), NOW + WINDOW_MS), Ok(sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2")));
        assert_eq!(open(&sealed, &key(), NOW + WINDOW_MS + 1), Err(TunnelError::OutsideWindow { sent: NOW, now: NOW + WINDOW_MS + 1 }));
        assert_eq!(open(&sealed, &key(), NOW - WINDOW_MS - 1), Err(TunnelError::OutsideWindow { sent: NOW, now: NOW - WINDOW_MS - 1 }));
    }

    #[test]
    fn bad_tunnel_datagrams_say_what_is_wrong() {
        let body = sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2").body(NOW).unwrap();
        assert_eq!(open(b"GRE!", &key(), NOW), Err(TunnelError::NoMagic));
        assert_eq!(open(&[&b"PXDC"[..], &[0; TAG_LEN - 1]].concat(), &key(), NOW), Err(TunnelError::Truncated("tag")));
        assert_eq!(open(&tagged(b"PXDC"), &key(), NOW), Err(TunnelError::Truncated("time")));
        assert_eq!(open(&tagged(&body[..12]), &key(), NOW), Err(TunnelError::Truncated("family")));
        assert_eq!(open(&tagged(&[&body[..12], &[5], &body[13..]].concat()), &key(), NOW), Err(TunnelError::BadFamily(5)));
        assert_eq!(open(&tagged(&body[..16]), &key(), NOW), Err(TunnelError::Truncated("client address")));
        assert_eq!(open(&tagged(&body[..22]), &key(), NOW), Err(TunnelError::Truncated("service address")));
        assert_eq!(open(&tagged(&body[..28]), &key(), NOW), Err(TunnelError::Truncated("replica address")));
        assert_eq!(open(&tagged(&body[..29]), &key(), NOW).unwrap().datagram, b"", "an empty datagram is the far side's to drop");
        let mixed = sample("10.77.1.2:50000", "[2001:db8:5::7]:443", "10.77.22.2");
        assert!(matches!(mixed.seal(&key(), NOW), Err(TunnelError::MixedFamilies { .. })));
    }

    #[test]
    fn a_short_or_garbled_key_is_refused() {
        assert_eq!(TunnelKey::new(&[1; 15]).err(), Some(KeyError::Short(15)));
        assert_eq!(TunnelKey::from_hex("00112233").err(), Some(KeyError::Short(4)));
        assert!(matches!(TunnelKey::from_hex("zz"), Err(KeyError::Hex(_))));
        assert!(TunnelKey::from_hex("  000102030405060708090A0B0C0D0E0F\n").is_ok(), "a file's newline, upper case");
    }
}
