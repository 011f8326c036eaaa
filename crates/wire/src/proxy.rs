//! The PROXY protocol (HAProxy's, versions 1 and 2): a header a proxy
//! (dnsdist, HAProxy, a cloud load balancer) sends before what it relays,
//! naming the client it relays for. Over a stream it comes once, before
//! the connection's first byte (before the TLS handshake, if any); over
//! UDP it starts every datagram, and only version 2 is defined there.
//!
//! Sans-IO: [`parse`] reads a header from the start of what has been read
//! so far, or says that more is needed; [`parse_datagram`] reads one from a
//! whole datagram; [`announces`] tells, from the first octets, whether
//! something starts like a header at all, which a listener asks of a
//! source that may not send one. The HTTP redirector and every DNS
//! listener read headers here, and nowhere else.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Version 1 headers start with this.
const V1_PREFIX: &[u8] = b"PROXY ";
/// The longest version 1 header, CRLF included.
const V1_MAX: usize = 107;
/// Version 2 headers start with this.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// Version 2's fixed part: the signature, version and command, address
/// family and protocol, and the length of the rest.
const V2_FIXED: usize = 16;
/// The longest version 2 header read: its addresses and a few hundred
/// octets of type-length-value fields, which is what proxies send (the
/// format allows 64 KiB; PowerDNS takes 512 octets after the fixed part by
/// default). A longer one is refused rather than buffered.
pub const V2_MAX: usize = 1024;

/// A whole header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Its length in octets: what follows is the client's own.
    pub length: usize,
    /// The client the proxy relays for, with its port; `None` when the
    /// proxy speaks for itself (a health check: version 1 `UNKNOWN`,
    /// version 2 `LOCAL`), or names no IP client (`AF_UNSPEC`, `AF_UNIX`).
    pub source: Option<SocketAddr>,
}

/// How far a header has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    Header(Header),
    /// The header goes on past what was read.
    Incomplete,
}

/// Whether input starts like a PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announced {
    /// It starts with either version's signature.
    Header,
    /// It cannot be one.
    NotHeader,
    /// It is a beginning of a signature: more must be read to tell.
    Undecided,
}

/// Why a header is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyError {
    /// The input starts with neither version's signature.
    NoHeader,
    /// A version 1 line runs past 107 octets without its CRLF.
    V1TooLong,
    /// A version 1 line is not `PROXY TCP4|TCP6 ADDRESS ADDRESS PORT PORT`
    /// or `PROXY UNKNOWN ...`.
    V1Malformed,
    /// A datagram starts with a version 1 header, which only streams carry.
    V1OverDatagram,
    /// The binary header's version is not 2.
    NotVersion2,
    /// The binary header's command is neither LOCAL nor PROXY.
    UnknownCommand(u8),
    /// The binary header's address family is not one of the four defined.
    UnknownFamily(u8),
    /// The binary header's length leaves no room for its addresses.
    AddressesTooShort,
    /// The binary header says it is longer than [`V2_MAX`].
    TooLong(usize),
    /// A datagram ends inside its header.
    Truncated,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyError::NoHeader => formatter.write_str("the input does not start with a PROXY protocol header"),
            ProxyError::V1TooLong => formatter.write_str("a PROXY version 1 header is longer than 107 octets"),
            ProxyError::V1Malformed => formatter.write_str("a PROXY version 1 header is not PROXY TCP4|TCP6 ADDRESS ADDRESS PORT PORT"),
            ProxyError::V1OverDatagram => formatter.write_str("a datagram starts with a PROXY version 1 header, which only streams carry"),
            ProxyError::NotVersion2 => formatter.write_str("a binary PROXY header is not of version 2"),
            ProxyError::UnknownCommand(command) => write!(formatter, "a PROXY version 2 header has an unknown command ({command})"),
            ProxyError::UnknownFamily(family) => write!(formatter, "a PROXY version 2 header has an unknown address family ({family})"),
            ProxyError::AddressesTooShort => formatter.write_str("a PROXY version 2 header is too short for its addresses"),
            ProxyError::TooLong(length) => write!(formatter, "a PROXY version 2 header of {length} octets is longer than {V2_MAX}"),
            ProxyError::Truncated => formatter.write_str("a datagram ends inside its PROXY header"),
        }
    }
}

impl std::error::Error for ProxyError {}

/// Whether `input` starts like a header of either version.
pub fn announces(input: &[u8]) -> Announced {
    let starts = |signature: &[u8]| {
        let common = input.len().min(signature.len());
        (input[..common] == signature[..common]).then_some(common == signature.len())
    };
    match (starts(V1_PREFIX), starts(V2_SIGNATURE)) {
        (Some(true), _) | (_, Some(true)) => Announced::Header,
        (None, None) => Announced::NotHeader,
        _ => Announced::Undecided,
    }
}

/// Reads a header of either version from the start of `input`, the first
/// octets of a stream.
pub fn parse(input: &[u8]) -> Result<Parsed, ProxyError> {
    if V1_PREFIX.starts_with(&input[..input.len().min(V1_PREFIX.len())]) {
        parse_v1(input)
    } else if V2_SIGNATURE.starts_with(&input[..input.len().min(V2_SIGNATURE.len())]) {
        parse_v2(input)
    } else {
        Err(ProxyError::NoHeader)
    }
}

/// Reads the version 2 header at the start of `datagram`, which must hold
/// it whole.
pub fn parse_datagram(datagram: &[u8]) -> Result<Header, ProxyError> {
    if datagram.starts_with(V1_PREFIX) {
        return Err(ProxyError::V1OverDatagram);
    }
    if !datagram.starts_with(V2_SIGNATURE) {
        return Err(ProxyError::NoHeader);
    }
    match parse_v2(datagram)? {
        Parsed::Header(header) => Ok(header),
        Parsed::Incomplete => Err(ProxyError::Truncated),
    }
}

/// Version 1: one line of text, `PROXY TCP4 client server client-port
/// server-port`, or `PROXY UNKNOWN` and anything up to the line's end.
fn parse_v1(input: &[u8]) -> Result<Parsed, ProxyError> {
    let Some(end) = input.windows(2).take(V1_MAX - 1).position(|pair| pair == b"\r\n") else {
        return if input.len() < V1_MAX { Ok(Parsed::Incomplete) } else { Err(ProxyError::V1TooLong) };
    };
    let line = std::str::from_utf8(&input[V1_PREFIX.len()..end]).map_err(|_| ProxyError::V1Malformed)?;
    let fields: Vec<&str> = line.split(' ').collect();
    let source = match fields[..] {
        ["UNKNOWN", ..] => None,
        ["TCP4", client, server, client_port, server_port] => {
            server.parse::<Ipv4Addr>().map_err(malformed)?;
            Some(SocketAddr::new(client.parse::<Ipv4Addr>().map_err(malformed)?.into(), v1_ports(client_port, server_port)?))
        }
        ["TCP6", client, server, client_port, server_port] => {
            server.parse::<Ipv6Addr>().map_err(malformed)?;
            let client = client.parse::<Ipv6Addr>().map_err(malformed)?.to_canonical();
            Some(SocketAddr::new(client, v1_ports(client_port, server_port)?))
        }
        _ => return Err(ProxyError::V1Malformed),
    };
    Ok(Parsed::Header(Header { length: end + 2, source }))
}

fn malformed(_: impl std::error::Error) -> ProxyError {
    ProxyError::V1Malformed
}

/// Both ports of a version 1 header are decimal numbers below 65536;
/// returns the client's.
fn v1_ports(client: &str, server: &str) -> Result<u16, ProxyError> {
    let port = |text: &str| text.bytes().all(|byte| byte.is_ascii_digit()).then(|| text.parse::<u16>().ok()).flatten();
    port(server).and(port(client)).ok_or(ProxyError::V1Malformed)
}

/// Version 2: binary, the addresses after the fixed part, then optional
/// type-length-value fields, which are skipped.
fn parse_v2(input: &[u8]) -> Result<Parsed, ProxyError> {
    let Some(fixed) = input.get(..V2_FIXED) else { return Ok(Parsed::Incomplete) };
    let (version, command, family) = (fixed[12] >> 4, fixed[12] & 0x0F, fixed[13] >> 4);
    let length = V2_FIXED + usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    if version != 2 {
        return Err(ProxyError::NotVersion2);
    }
    if length > V2_MAX {
        return Err(ProxyError::TooLong(length));
    }
    let Some(addresses) = input.get(V2_FIXED..length) else { return Ok(Parsed::Incomplete) };
    let source = match (command, family) {
        // LOCAL: the proxy's own connection, a health check.
        (0, _) => None,
        (1, 1) => {
            let fields: &[u8; 12] = addresses.first_chunk().ok_or(ProxyError::AddressesTooShort)?;
            let address = Ipv4Addr::from(*fields.first_chunk::<4>().expect("four octets"));
            Some(SocketAddrV4::new(address, u16::from_be_bytes([fields[8], fields[9]])).into())
        }
        (1, 2) => {
            let fields: &[u8; 36] = addresses.first_chunk().ok_or(ProxyError::AddressesTooShort)?;
            let address = Ipv6Addr::from(*fields.first_chunk::<16>().expect("16 octets"));
            let port = u16::from_be_bytes([fields[32], fields[33]]);
            Some(match address.to_ipv4_mapped() {
                Some(mapped) => SocketAddrV4::new(mapped, port).into(),
                None => SocketAddrV6::new(address, port, 0, 0).into(),
            })
        }
        // AF_UNSPEC and AF_UNIX: no IP address to go by.
        (1, 0 | 3) => None,
        (1, family) => return Err(ProxyError::UnknownFamily(family)),
        (command, _) => return Err(ProxyError::UnknownCommand(command)),
    };
    Ok(Parsed::Header(Header { length, source }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut header = V2_SIGNATURE.to_vec();
        header.extend([0x20 | command, family << 4 | 1]);
        header.extend((addresses.len() as u16).to_be_bytes());
        header.extend(addresses);
        header
    }

    fn source_of(header: &[u8]) -> Result<Option<SocketAddr>, ProxyError> {
        match parse(header)? {
            Parsed::Header(Header { length, source }) if length == header.len() => Ok(source),
            other => panic!("{other:?} for a whole header of {} octets", header.len()),
        }
    }

    fn at(text: &str) -> Option<SocketAddr> {
        Some(text.parse().unwrap())
    }

    const IPV4: [u8; 12] = [198, 51, 100, 7, 192, 0, 2, 1, 0xDC, 0x04, 0, 53];

    fn ipv6(client: &str) -> Vec<u8> {
        let mut fields = client.parse::<Ipv6Addr>().unwrap().octets().to_vec();
        fields.extend("2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        fields.extend([0xDC, 0x04, 0, 53]);
        fields
    }

    #[test]
    fn reads_version_1() {
        assert_eq!(source_of(b"PROXY TCP4 198.51.100.7 192.0.2.1 56324 80\r\n"), Ok(at("198.51.100.7:56324")));
        assert_eq!(source_of(b"PROXY TCP6 2001:db8::7 2001:db8::1 56324 443\r\n"), Ok(at("[2001:db8::7]:56324")));
        assert_eq!(source_of(b"PROXY TCP6 ::ffff:192.0.2.7 ::1 1 2\r\n"), Ok(at("192.0.2.7:1")));
        assert_eq!(source_of(b"PROXY UNKNOWN ffff:f...f:ffff 65535 65535\r\n"), Ok(None));
        assert_eq!(source_of(b"PROXY UNKNOWN\r\n"), Ok(None));
        assert_eq!(parse(b"PROXY TCP4 198.51.100.7 192.0"), Ok(Parsed::Incomplete));
        assert_eq!(parse(b"PRO"), Ok(Parsed::Incomplete));
        for bad in [
            &b"PROXY TCP4 198.51.100.7 192.0.2.1 56324\r\n"[..],
            b"PROXY TCP4 2001:db8::7 192.0.2.1 1 2\r\n",
            b"PROXY TCP4 198.51.100.7 2001:db8::1 1 2\r\n",
            b"PROXY TCP4 198.51.100.7 192.0.2.1 1 +2\r\n",
            b"PROXY TCP4 198.51.100.7 192.0.2.1 1 65536\r\n",
            b"PROXY TCP4  198.51.100.7 192.0.2.1 1 2\r\n",
            b"PROXY UDP4 198.51.100.7 192.0.2.1 1 2\r\n",
            b"PROXY TCP4 \xFF 192.0.2.1 1 2\r\n",
        ] {
            assert_eq!(parse(bad), Err(ProxyError::V1Malformed), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse(&[b"PROXY UNKNOWN ".as_slice(), &[b'x'; 100]].concat()), Err(ProxyError::V1TooLong));
    }

    #[test]
    fn reads_version_2_and_skips_its_extensions() {
        assert_eq!(source_of(&v2(1, 1, &IPV4)), Ok(at("198.51.100.7:56324")));
        let with_tlvs = [&IPV4[..], &[0x04, 0, 3, 1, 2, 3, 0xEE, 0, 1, 9]].concat();
        assert_eq!(source_of(&v2(1, 1, &with_tlvs)), Ok(at("198.51.100.7:56324")));
        assert_eq!(source_of(&v2(1, 2, &ipv6("2001:db8::7"))), Ok(at("[2001:db8::7]:56324")));
        assert_eq!(source_of(&v2(1, 2, &ipv6("::ffff:192.0.2.7"))), Ok(at("192.0.2.7:56324")), "a mapped IPv4 client");
        assert_eq!(source_of(&v2(0, 0, &[])), Ok(None), "LOCAL");
        assert_eq!(source_of(&v2(0, 1, &IPV4)), Ok(None), "LOCAL, with the proxy's own addresses");
        assert_eq!(source_of(&v2(1, 0, &[])), Ok(None), "AF_UNSPEC");
        assert_eq!(source_of(&v2(1, 3, &[0; 216])), Ok(None), "AF_UNIX");
    }

    #[test]
    fn refuses_broken_version_2_headers() {
        let whole = v2(1, 1, &IPV4);
        for cut in [5, 12, 15, 20] {
            assert_eq!(parse(&whole[..cut]), Ok(Parsed::Incomplete), "{cut} octets");
            assert_eq!(parse_datagram(&whole[..cut]), if cut < 12 { Err(ProxyError::NoHeader) } else { Err(ProxyError::Truncated) });
        }
        assert_eq!(parse(&v2(1, 1, &IPV4[..11])), Err(ProxyError::AddressesTooShort));
        assert_eq!(parse(&v2(1, 2, &IPV4)), Err(ProxyError::AddressesTooShort));
        assert_eq!(parse(&v2(2, 1, &IPV4)), Err(ProxyError::UnknownCommand(2)));
        assert_eq!(parse(&v2(1, 4, &IPV4)), Err(ProxyError::UnknownFamily(4)));
        let mut version_1 = whole.clone();
        version_1[12] = 0x11;
        assert_eq!(parse(&version_1), Err(ProxyError::NotVersion2));
        let oversized = v2(1, 1, &[0; V2_MAX - V2_FIXED + 1]);
        assert_eq!(parse(&oversized[..V2_FIXED]), Err(ProxyError::TooLong(V2_MAX + 1)), "refused before it is read");
        assert_eq!(source_of(&v2(1, 1, &[0; V2_MAX - V2_FIXED])), Ok(at("0.0.0.0:0")), "the longest taken");
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(ProxyError::NoHeader));
        assert_eq!(parse(b"\r\n\r\nx"), Err(ProxyError::NoHeader));
    }

    #[test]
    fn a_datagram_holds_a_whole_version_2_header_and_then_its_query() {
        let datagram = [v2(1, 1, &IPV4), vec![0xAB; 29]].concat();
        assert_eq!(parse_datagram(&datagram), Ok(Header { length: 28, source: at("198.51.100.7:56324") }));
        assert_eq!(parse_datagram(b"PROXY TCP4 198.51.100.7 192.0.2.1 1 2\r\n"), Err(ProxyError::V1OverDatagram));
        assert_eq!(parse_datagram(&[0xAB; 40]), Err(ProxyError::NoHeader));
    }

    #[test]
    fn tells_what_starts_like_a_header() {
        assert_eq!(announces(b""), Announced::Undecided);
        assert_eq!(announces(b"PROX"), Announced::Undecided);
        assert_eq!(announces(b"\r\n\r\n\0"), Announced::Undecided);
        assert_eq!(announces(b"PROXY "), Announced::Header);
        assert_eq!(announces(&v2(1, 1, &IPV4)[..12]), Announced::Header);
        assert_eq!(announces(b"PROXZ"), Announced::NotHeader);
        assert_eq!(announces(&[0, 29, 0xAB, 0xCD]), Announced::NotHeader, "a framed DNS query");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(ProxyError::UnknownFamily(4).to_string(), "a PROXY version 2 header has an unknown address family (4)");
        assert!(ProxyError::TooLong(2000).to_string().contains("2000 octets is longer than 1024"));
    }
}
