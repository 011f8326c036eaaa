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
//! "PXDC" | family (4 or 6) | client IP, port | service IP, port | replica IP | the client's datagram
//! ```
//!
//! Ports are 2 bytes big-endian; the three addresses share the family.
//! Only configured peer dispatchers are believed (the socket side checks
//! the sender), since the header names a client the far side will
//! impersonate.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The first bytes of every tunnel datagram.
const MAGIC: &[u8; 4] = b"PXDC";

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
}

impl Tunnelled<'_> {
    pub fn encode(&self) -> Result<Vec<u8>, TunnelError> {
        let family = match (self.client, self.service, self.replica) {
            (SocketAddr::V4(_), SocketAddr::V4(_), IpAddr::V4(_)) => 4,
            (SocketAddr::V6(_), SocketAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => return Err(TunnelError::MixedFamilies { client: self.client, service: self.service, replica: self.replica }),
        };
        let mut bytes = Vec::with_capacity(5 + 3 * 18 + self.datagram.len());
        bytes.extend_from_slice(MAGIC);
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

/// Reads a tunnel datagram; the client's datagram is borrowed from it.
pub fn decode(bytes: &[u8]) -> Result<Tunnelled<'_>, TunnelError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(TunnelError::NoMagic)?;
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

    fn sample(client: &str, service: &str, replica: &str) -> Tunnelled<'static> {
        Tunnelled {
            client: client.parse().unwrap(),
            service: service.parse().unwrap(),
            replica: replica.parse().unwrap(),
            datagram: b"\xc3 a QUIC Initial",
        }
    }

    #[test]
    fn both_families_round_trip_with_the_datagram_untouched() {
        for tunnelled in [
            sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2"),
            sample("[2001:db8::2]:50000", "[2001:db8:5::7]:443", "2001:db8:22::2"),
        ] {
            let bytes = tunnelled.encode().unwrap();
            assert_eq!(&bytes[..4], b"PXDC");
            assert!(bytes.ends_with(tunnelled.datagram));
            assert_eq!(decode(&bytes).unwrap(), tunnelled);
        }
        let v4 = sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2").encode().unwrap();
        assert_eq!(&v4[4..11], &[4, 10, 77, 1, 2, 0xc3, 0x50]);
    }

    #[test]
    fn bad_tunnel_datagrams_say_what_is_wrong() {
        let good = sample("10.77.1.2:50000", "10.99.0.5:443", "10.77.22.2").encode().unwrap();
        assert_eq!(decode(b"GRE!"), Err(TunnelError::NoMagic));
        assert_eq!(decode(b"PXDC"), Err(TunnelError::Truncated("family")));
        assert_eq!(decode(&[&good[..4], &[5], &good[5..]].concat()), Err(TunnelError::BadFamily(5)));
        assert_eq!(decode(&good[..8]), Err(TunnelError::Truncated("client address")));
        assert_eq!(decode(&good[..14]), Err(TunnelError::Truncated("service address")));
        assert_eq!(decode(&good[..20]), Err(TunnelError::Truncated("replica address")));
        assert_eq!(decode(&good[..21]).unwrap().datagram, b"", "an empty datagram is the far side's to drop");
        let mixed = sample("10.77.1.2:50000", "[2001:db8:5::7]:443", "10.77.22.2");
        assert!(matches!(mixed.encode(), Err(TunnelError::MixedFamilies { .. })));
    }
}
