//! The transport parameters Artemis adds or reads (RFC 9000 18.2):
//! `service_ttl` (0xff00, varint seconds: how long a client may connect
//! straight to this replica) and `preferred_address` (0x0d, the replica's
//! own unicast address), read from the peer's raw bytes.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

/// Artemis's transport parameter: seconds a client may cache the replica.
pub const SERVICE_TTL: u64 = 0xff00;
const PREFERRED_ADDRESS: u64 = 0x0d;

/// What a replica adds to quinn's own parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArtemisParameters {
    pub service_ttl: Option<Duration>,
}

impl ArtemisParameters {
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        if let Some(ttl) = self.service_ttl {
            let mut value = Vec::new();
            write_varint(ttl.as_secs(), &mut value);
            write_varint(SERVICE_TTL, out);
            write_varint(value.len() as u64, out);
            out.extend_from_slice(&value);
        }
    }
}

/// What a client learns from a replica's parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceParameters {
    pub service_ttl: Option<Duration>,
    pub preferred_v4: Option<SocketAddrV4>,
    pub preferred_v6: Option<SocketAddrV6>,
}

impl ServiceParameters {
    /// The preferred address of the family `like` has.
    pub fn preferred_address_like(&self, like: SocketAddr) -> Option<SocketAddr> {
        match like {
            SocketAddr::V4(_) => self.preferred_v4.map(SocketAddr::V4),
            SocketAddr::V6(_) => self.preferred_v6.map(SocketAddr::V6),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParameterError {
    #[error("transport parameters end inside a {0}")]
    Truncated(&'static str),
    #[error("service_ttl is not one varint")]
    BadServiceTtl,
    #[error("preferred_address is {0} bytes, not 41 + its connection ID + 0..20")]
    BadPreferredAddress(usize),
}

/// Reads `service_ttl` and `preferred_address` from a peer's encoded
/// parameters, skipping every other one.
pub fn parse(mut raw: &[u8]) -> Result<ServiceParameters, ParameterError> {
    let mut found = ServiceParameters::default();
    while !raw.is_empty() {
        let id = read_varint(&mut raw).ok_or(ParameterError::Truncated("parameter id"))?;
        let len = read_varint(&mut raw).ok_or(ParameterError::Truncated("parameter length"))?;
        let len = usize::try_from(len).ok().filter(|len| *len <= raw.len()).ok_or(ParameterError::Truncated("parameter value"))?;
        let (mut value, rest) = raw.split_at(len);
        raw = rest;
        match id {
            SERVICE_TTL => {
                let seconds = read_varint(&mut value).filter(|_| value.is_empty()).ok_or(ParameterError::BadServiceTtl)?;
                found.service_ttl = Some(Duration::from_secs(seconds));
            }
            PREFERRED_ADDRESS => (found.preferred_v4, found.preferred_v6) = preferred_address(value)?,
            _ => {}
        }
    }
    Ok(found)
}

/// IPv4 address and port, IPv6 address and port, connection ID, reset
/// token; an all-zero address means none of that family.
fn preferred_address(value: &[u8]) -> Result<(Option<SocketAddrV4>, Option<SocketAddrV6>), ParameterError> {
    const FIXED: usize = 4 + 2 + 16 + 2 + 1 + 16;
    let cid_len = *value.get(24).ok_or(ParameterError::BadPreferredAddress(value.len()))? as usize;
    if value.len() != FIXED + cid_len || cid_len > 20 {
        return Err(ParameterError::BadPreferredAddress(value.len()));
    }
    let v4 = Ipv4Addr::from(<[u8; 4]>::try_from(&value[0..4]).expect("4 bytes"));
    let v4_port = u16::from_be_bytes([value[4], value[5]]);
    let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(&value[6..22]).expect("16 bytes"));
    let v6_port = u16::from_be_bytes([value[22], value[23]]);
    let v4 = (!v4.is_unspecified()).then(|| SocketAddrV4::new(v4, v4_port));
    let v6 = (!v6.is_unspecified()).then(|| SocketAddrV6::new(v6, v6_port, 0, 0));
    Ok((v4, v6))
}

fn read_varint(input: &mut &[u8]) -> Option<u64> {
    let first = *input.first()?;
    let len = 1usize << (first >> 6);
    let bytes = input.get(..len)?;
    let value = bytes[1..].iter().fold(u64::from(first & 0x3f), |value, byte| value << 8 | u64::from(*byte));
    *input = &input[len..];
    Some(value)
}

fn write_varint(value: u64, out: &mut Vec<u8>) {
    match value {
        0..=0x3f => out.push(value as u8),
        0x40..=0x3fff => out.extend_from_slice(&(value as u16 | 0x4000).to_be_bytes()),
        0x4000..=0x3fff_ffff => out.extend_from_slice(&(value as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(value.min((1 << 62) - 1) | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameter(id: u64, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_varint(id, &mut out);
        write_varint(value.len() as u64, &mut out);
        out.extend_from_slice(value);
        out
    }

    #[test]
    fn service_ttl_round_trips_at_every_varint_width() {
        for seconds in [0, 63, 64, 16383, 16384, 1 << 30, (1 << 62) - 1] {
            let mut raw = parameter(0x04, &[0x40, 0x10]);
            ArtemisParameters { service_ttl: Some(Duration::from_secs(seconds)) }.write(&mut raw);
            assert_eq!(parse(&raw).unwrap().service_ttl, Some(Duration::from_secs(seconds)));
        }
        let mut none = Vec::new();
        ArtemisParameters::default().write(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn reads_the_preferred_address_of_each_family() {
        let mut value = vec![127, 0, 0, 2, 0x11, 0x5c];
        value.extend_from_slice(&[0; 18]);
        value.push(8);
        value.extend_from_slice(&[7; 8 + 16]);
        let found = parse(&parameter(PREFERRED_ADDRESS, &value)).unwrap();
        assert_eq!(found.preferred_v4, Some("127.0.0.2:4444".parse().unwrap()));
        assert_eq!(found.preferred_v6, None);
        assert_eq!(found.preferred_address_like("127.0.0.9:1".parse().unwrap()), Some("127.0.0.2:4444".parse().unwrap()));
        assert_eq!(found.preferred_address_like("[::1]:1".parse().unwrap()), None);
    }

    #[test]
    fn refuses_malformed_parameters() {
        assert_eq!(parse(&[0x40]), Err(ParameterError::Truncated("parameter id")));
        assert_eq!(parse(&[0x04]), Err(ParameterError::Truncated("parameter length")));
        assert_eq!(parse(&[0x04, 0x05, 0x01]), Err(ParameterError::Truncated("parameter value")));
        assert_eq!(parse(&parameter(SERVICE_TTL, &[0x40])), Err(ParameterError::BadServiceTtl));
        assert_eq!(parse(&parameter(SERVICE_TTL, &[0x01, 0x02])), Err(ParameterError::BadServiceTtl));
        assert_eq!(parse(&parameter(PREFERRED_ADDRESS, &[0; 10])), Err(ParameterError::BadPreferredAddress(10)));
        let mut long_cid = vec![0; 24];
        long_cid.push(21);
        long_cid.extend_from_slice(&[0; 21 + 16]);
        assert_eq!(parse(&parameter(PREFERRED_ADDRESS, &long_cid)), Err(ParameterError::BadPreferredAddress(62)));
    }
}
