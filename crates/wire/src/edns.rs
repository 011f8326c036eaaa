//! EDNS(0) as a query carries it (RFC 6891), with the options Pharos reads:
//! NSID (RFC 5001), Client Subnet (RFC 7871), TCP keepalive (RFC 7828),
//! Padding (RFC 7830) and COOKIE (RFC 7873); and the options only a response carries, Extended
//! DNS Errors (RFC 8914) among them.

use crate::{MessageWriter, read_u16};

pub const OPTION_NSID: u16 = 3;
pub const OPTION_CLIENT_SUBNET: u16 = 8;
pub const OPTION_COOKIE: u16 = 10;
pub const OPTION_KEEPALIVE: u16 = 11;
pub const OPTION_PADDING: u16 = 12;
pub const OPTION_EXTENDED_ERROR: u16 = 15;

/// An Extended DNS Error (RFC 8914): why a response is what it is, as an
/// INFO-CODE and, for humans, an EXTRA-TEXT that may be empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedError {
    pub info_code: u16,
    pub extra_text: &'static str,
}

impl ExtendedError {
    /// Section 4.1: none of the other codes fits; the text says what.
    pub const fn other(extra_text: &'static str) -> ExtendedError {
        ExtendedError { info_code: 0, extra_text }
    }
    /// Section 4.19: the server refuses the query by policy.
    pub const PROHIBITED: ExtendedError = ExtendedError { info_code: 18, extra_text: "" };
    /// Section 4.21: the name is in no zone the server is authoritative for.
    pub const NOT_AUTHORITATIVE: ExtendedError = ExtendedError { info_code: 20, extra_text: "" };
    /// Section 4.22: the query asks for something the server does not do.
    pub const NOT_SUPPORTED: ExtendedError = ExtendedError { info_code: 21, extra_text: "" };
    /// Registered by RFC 9824 section 9: a query for a type that may not be
    /// asked for.
    pub const INVALID_QUERY_TYPE: ExtendedError = ExtendedError { info_code: 30, extra_text: "" };

    /// Octets the option takes in an OPT record, its header included.
    pub fn option_len(&self) -> usize {
        4 + 2 + self.extra_text.len()
    }

    /// Appends the option.
    pub fn write(&self, writer: &mut MessageWriter<'_>) {
        writer.u16(OPTION_EXTENDED_ERROR);
        writer.u16((2 + self.extra_text.len()) as u16);
        writer.u16(self.info_code);
        writer.raw(self.extra_text.as_bytes());
    }
}

/// The DO and CO bits of an OPT record's flags (its TTL's low 16 bits).
pub const EDNS_DO: u32 = 0x8000;
pub const EDNS_CO: u32 = 0x4000;

/// Padded responses are padded to a multiple of this many octets: the
/// block length RFC 8467 section 4.1 recommends for responders.
pub const RESPONSE_PADDING_BLOCK: usize = 468;

/// The OPT record of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edns {
    /// The requestor's UDP payload size, as sent (may be below 512).
    pub udp_payload: u16,
    pub version: u8,
    pub dnssec_ok: bool,
    /// Compact Answers OK (RFC 9824 section 5): a nonexistent name may be
    /// answered NXDOMAIN beside its compact denial.
    pub compact_ok: bool,
    pub wants_nsid: bool,
    pub wants_keepalive: bool,
    /// The query carried a Padding option: it asks for a padded response.
    pub padded: bool,
    pub client_subnet: Option<ClientSubnet>,
    pub cookie: Option<Cookie>,
}

/// A COOKIE option (RFC 7873 section 4): the client's cookie and, if the
/// client learnt one, the server cookie it echoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie {
    pub client: [u8; CLIENT_COOKIE_LEN],
    server: [u8; MAX_SERVER_COOKIE_LEN],
    server_len: u8,
}

pub const CLIENT_COOKIE_LEN: usize = 8;
const MIN_SERVER_COOKIE_LEN: usize = 8;
const MAX_SERVER_COOKIE_LEN: usize = 32;

impl Cookie {
    /// Reads the option body. RFC 7873 section 5.2.2: a body of 8 octets
    /// is a client cookie alone, 16 to 40 one with a server cookie, and
    /// any other length makes the query malformed.
    pub fn parse(body: &[u8]) -> Option<Cookie> {
        let (client, server) = body.split_first_chunk::<CLIENT_COOKIE_LEN>()?;
        if !server.is_empty() && !(MIN_SERVER_COOKIE_LEN..=MAX_SERVER_COOKIE_LEN).contains(&server.len()) {
            return None;
        }
        let mut cookie = Cookie { client: *client, server: [0; MAX_SERVER_COOKIE_LEN], server_len: server.len() as u8 };
        cookie.server[..server.len()].copy_from_slice(server);
        Some(cookie)
    }

    /// The server cookie the client echoed, if any.
    pub fn server(&self) -> Option<&[u8]> {
        (self.server_len > 0).then(|| &self.server[..usize::from(self.server_len)])
    }
}

/// An EDNS Client Subnet option (RFC 7871 section 6), validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSubnet {
    /// 1 for IPv4, 2 for IPv6 (IANA address family numbers).
    pub family: u16,
    pub source_prefix: u8,
    pub scope_prefix: u8,
    /// The address, zero beyond `source_prefix`, left-aligned.
    pub address: [u8; 16],
}

impl ClientSubnet {
    /// Bits in an address of this family.
    pub fn family_bits(family: u16) -> Option<u8> {
        match family {
            1 => Some(32),
            2 => Some(128),
            _ => None,
        }
    }

    /// Parses and validates the option body. RFC 7871 section 7.1.1 (via
    /// section 6): an unknown family, a prefix longer than the family's
    /// address, more address octets than the prefix needs, or bits set
    /// beyond the prefix make the query malformed.
    pub fn parse(body: &[u8]) -> Option<ClientSubnet> {
        let family = read_u16(body, 0)?;
        let source_prefix = *body.get(2)?;
        let scope_prefix = *body.get(3)?;
        let address_bytes = &body[4..];
        let bits = Self::family_bits(family)?;
        if source_prefix > bits || scope_prefix > bits {
            return None;
        }
        if address_bytes.len() != (source_prefix as usize).div_ceil(8) {
            return None;
        }
        let mut address = [0u8; 16];
        address[..address_bytes.len()].copy_from_slice(address_bytes);
        let spare_bits = (8 - source_prefix % 8) % 8;
        if let Some(&last) = address_bytes.last()
            && last & ((1u16 << spare_bits) - 1) as u8 != 0
        {
            return None;
        }
        Some(ClientSubnet { family, source_prefix, scope_prefix, address })
    }
}

impl ClientSubnet {
    /// The address as an `IpAddr` (zero beyond the source prefix).
    pub fn ip(&self) -> std::net::IpAddr {
        match self.family {
            1 => std::net::IpAddr::from(<[u8; 4]>::try_from(&self.address[..4]).expect("four octets")),
            _ => std::net::IpAddr::from(self.address),
        }
    }

    /// Length of the option body when echoed.
    pub fn echo_len(&self) -> usize {
        4 + (self.source_prefix as usize).div_ceil(8)
    }

    /// Appends the option (code, length, body) as RFC 7871 section 7.2.1
    /// says a response carries it: family, source prefix and address as
    /// asked, and the scope the answer is valid for.
    pub fn write_echo(&self, scope_prefix: u8, writer: &mut MessageWriter<'_>) {
        writer.u16(OPTION_CLIENT_SUBNET);
        writer.u16(self.echo_len() as u16);
        writer.u16(self.family);
        writer.raw(&[self.source_prefix, scope_prefix]);
        writer.raw(&self.address[..(self.source_prefix as usize).div_ceil(8)]);
    }
}

/// Appends an edns-tcp-keepalive option (RFC 7828 section 3.1) with the
/// idle timeout the server keeps a connection for, in units of 100 ms.
pub fn write_keepalive(writer: &mut MessageWriter<'_>, timeout: u16) {
    writer.u16(OPTION_KEEPALIVE);
    writer.u16(2);
    writer.u16(timeout);
}

/// The size of the Padding option, its own four octets included, that
/// makes a message of `unpadded_len` octets a multiple of
/// [`RESPONSE_PADDING_BLOCK`] long.
pub fn padding_option_len(unpadded_len: usize) -> usize {
    let with_option = unpadded_len + 4;
    4 + (RESPONSE_PADDING_BLOCK - with_option % RESPONSE_PADDING_BLOCK) % RESPONSE_PADDING_BLOCK
}

/// The most octets [`write_padding`] can add to a message.
pub const MAX_PADDING_OPTION_LEN: usize = 4 + RESPONSE_PADDING_BLOCK - 1;

/// Appends a Padding option (RFC 7830) of zeros that brings the message to
/// a multiple of [`RESPONSE_PADDING_BLOCK`] octets. It must be the last
/// thing written: the message ends with it, its OPT record too.
pub fn write_padding(writer: &mut MessageWriter<'_>) {
    let padding = padding_option_len(writer.len()) - 4;
    writer.u16(OPTION_PADDING);
    writer.u16(padding as u16);
    writer.zeros(padding);
}

/// Why an OPT record was rejected: both make the query FORMERR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdnsError {
    /// An option runs past the end of the record data.
    BadOptionLayout,
    /// A Client Subnet option that RFC 7871 calls malformed.
    BadClientSubnet,
    /// A COOKIE option of a length RFC 7873 does not allow.
    BadCookie,
}

impl Edns {
    /// An OPT record's CLASS and TTL fields read, its options not: what a
    /// FORMERR to a malformed option echoes.
    pub fn without_options(class: u16, ttl: u32) -> Edns {
        Edns {
            udp_payload: class,
            version: (ttl >> 16) as u8,
            dnssec_ok: ttl & EDNS_DO != 0,
            compact_ok: ttl & EDNS_CO != 0,
            wants_nsid: false,
            wants_keepalive: false,
            padded: false,
            client_subnet: None,
            cookie: None,
        }
    }

    /// Reads an OPT record from its CLASS, TTL and RDATA fields. The
    /// options of a version other than 0 are not read: they mean nothing
    /// to Pharos (RFC 6891 section 6.1.3), and the reply, whatever error it
    /// carries, answers none of them (no NSID, no cookie), as Knot DNS's
    /// and NSD's BADVERS answer none.
    pub fn parse(class: u16, ttl: u32, rdata: &[u8]) -> Result<Edns, MalformedOpt> {
        let mut edns = Edns::without_options(class, ttl);
        if edns.version != 0 {
            return Ok(edns);
        }
        let mut first_error = None;
        let mut pos = 0;
        while pos < rdata.len() {
            let Some((code, body)) = option_at(rdata, pos) else {
                // Nothing past a broken layout can be trusted, not even
                // what was read before it.
                let readable = Edns::without_options(class, ttl);
                return Err(MalformedOpt { error: EdnsError::BadOptionLayout, readable });
            };
            if let Err(error) = edns.read_option(code, body) {
                first_error.get_or_insert(error);
            }
            pos += 4 + body.len();
        }
        match first_error {
            None => Ok(edns),
            // The FORMERR answers what was well formed (NSID, as Knot DNS's
            // does; a cookie, as RFC 7873 has every reply to one carry
            // one), but no subnet: it is an answer for nobody's.
            Some(error) => Err(MalformedOpt { error, readable: Edns { client_subnet: None, ..edns } }),
        }
    }

    fn read_option(&mut self, code: u16, body: &[u8]) -> Result<(), EdnsError> {
        match code {
            OPTION_NSID => self.wants_nsid = true,
            OPTION_KEEPALIVE => self.wants_keepalive = true,
            OPTION_PADDING => self.padded = true,
            // RFC 7871 does not say what a second subnet means: the first
            // counts (Knot DNS's option reader, which its geographic
            // module uses, finds the first), and the others are ignored as
            // unknown options are.
            OPTION_CLIENT_SUBNET if self.client_subnet.is_none() => {
                self.client_subnet = Some(ClientSubnet::parse(body).ok_or(EdnsError::BadClientSubnet)?);
            }
            OPTION_CLIENT_SUBNET => {}
            // RFC 7873 does not say what a second cookie means either: the
            // last counts, as in Knot DNS's mod-cookies.
            OPTION_COOKIE => self.cookie = Some(Cookie::parse(body).ok_or(EdnsError::BadCookie)?),
            _ => {} // RFC 6891 section 6.1.2: unknown options are ignored.
        }
        Ok(())
    }
}

/// The option (code, body) at `pos` of an OPT record's data, if its length
/// fits.
fn option_at(rdata: &[u8], pos: usize) -> Option<(u16, &[u8])> {
    let code = read_u16(rdata, pos)?;
    let len = read_u16(rdata, pos + 2)? as usize;
    Some((code, rdata.get(pos + 4..pos + 4 + len)?))
}

/// An OPT record Pharos cannot use: the query is FORMERR (RFC 6891 section
/// 7), and its response carries an OPT record all the same, made from
/// what could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedOpt {
    pub error: EdnsError,
    /// CLASS and TTL, and the well-formed options but a subnet.
    pub readable: Edns,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ecs(family: u16, source: u8, scope: u8, address: &[u8]) -> Vec<u8> {
        let mut body = family.to_be_bytes().to_vec();
        body.extend([source, scope]);
        body.extend(address);
        body
    }

    #[test]
    fn accepts_well_formed_client_subnets() {
        let v4 = ClientSubnet::parse(&ecs(1, 24, 0, &[192, 0, 2])).unwrap();
        assert_eq!((v4.family, v4.source_prefix), (1, 24));
        assert_eq!(&v4.address[..4], &[192, 0, 2, 0]);
        assert!(ClientSubnet::parse(&ecs(1, 0, 0, &[])).is_some());
        assert!(ClientSubnet::parse(&ecs(1, 20, 0, &[10, 1, 0x10])).is_some());
        assert!(ClientSubnet::parse(&ecs(2, 48, 0, &[0x20, 1, 0xd, 0xb8, 0, 1])).is_some());
    }

    #[test]
    fn echoes_a_client_subnet_with_a_scope() {
        let subnet = ClientSubnet::parse(&ecs(1, 20, 0, &[10, 1, 0x10])).unwrap();
        let mut out = Vec::new();
        let mut writer = MessageWriter::new(&mut out);
        subnet.write_echo(16, &mut writer);
        assert_eq!(writer.message()[crate::HEADER_LEN..], [0, 8, 0, 7, 0, 1, 20, 16, 10, 1, 0x10]);
        assert_eq!(subnet.ip(), "10.1.16.0".parse::<std::net::IpAddr>().unwrap());
    }

    #[test]
    fn the_first_of_two_client_subnets_counts() {
        let option = |address: u8| [&OPTION_CLIENT_SUBNET.to_be_bytes()[..], &[0, 7], &ecs(1, 24, 0, &[192, 0, address])].concat();
        let mut rdata = option(2);
        rdata.extend([&OPTION_CLIENT_SUBNET.to_be_bytes()[..], &[0, 2, 0xff, 0xff]].concat());
        let edns = Edns::parse(1232, 0, &[option(2), option(3)].concat()).unwrap();
        assert_eq!(edns.client_subnet.unwrap().address[..3], [192, 0, 2]);
        assert!(Edns::parse(1232, 0, &rdata).is_ok(), "a second one, malformed, is not read");
    }

    #[test]
    fn rejects_malformed_client_subnets() {
        assert!(ClientSubnet::parse(&ecs(3, 8, 0, &[1])).is_none(), "unknown family");
        assert!(ClientSubnet::parse(&ecs(1, 33, 0, &[1, 2, 3, 4, 5])).is_none(), "prefix too long");
        assert!(ClientSubnet::parse(&ecs(1, 24, 0, &[1, 2, 3, 4])).is_none(), "too many octets");
        assert!(ClientSubnet::parse(&ecs(1, 20, 0, &[10, 1, 0x11])).is_none(), "bits past prefix");
        assert!(ClientSubnet::parse(&[0, 1, 24]).is_none(), "short option");
    }

    #[test]
    fn reads_cookies_and_rejects_the_lengths_rfc_7873_does_not_allow() {
        let client_only = Cookie::parse(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!((client_only.client, client_only.server()), ([1, 2, 3, 4, 5, 6, 7, 8], None));
        let body: Vec<u8> = (0..24).collect();
        let both = Cookie::parse(&body).unwrap();
        assert_eq!((&both.client[..], both.server()), (&body[..8], Some(&body[8..])));
        assert_eq!(Cookie::parse(&[0; 40]).unwrap().server().unwrap().len(), 32);
        for bad_len in [0, 7, 9, 15, 41] {
            assert_eq!(Cookie::parse(&vec![0; bad_len]), None, "{bad_len} octets");
        }
        let rdata = [0, 10, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(Edns::parse(1232, 0, &rdata).map_err(|m| m.error), Err(EdnsError::BadCookie));
    }

    #[test]
    fn pads_to_a_whole_number_of_blocks() {
        for unpadded in [12, 100, 463, 464, 465, 468, 1000] {
            let mut out = Vec::new();
            let mut writer = MessageWriter::new(&mut out);
            writer.zeros(unpadded - crate::HEADER_LEN);
            write_padding(&mut writer);
            let padded = writer.len();
            assert_eq!(padded % RESPONSE_PADDING_BLOCK, 0, "{unpadded} octets padded to {padded}");
            assert!(padded - unpadded <= MAX_PADDING_OPTION_LEN);
            let padding_len = (padded - unpadded - 4) as u16;
            assert_eq!(out[unpadded..unpadded + 4], [&OPTION_PADDING.to_be_bytes()[..], &padding_len.to_be_bytes()].concat());
        }
    }

    #[test]
    fn writes_the_keepalive_timeout() {
        let mut out = Vec::new();
        write_keepalive(&mut MessageWriter::new(&mut out), 100);
        assert_eq!(out[crate::HEADER_LEN..], [0, 11, 0, 2, 0, 100]);
    }

    #[test]
    fn reads_flags_and_ignores_unknown_options() {
        let rdata = [0, 3, 0, 0, 0xFF, 0x01, 0, 2, 9, 9, 0, 12, 0, 1, 0];
        let edns = Edns::parse(1232, 0x0000_8000, &rdata).unwrap();
        assert_eq!((edns.udp_payload, edns.version, edns.dnssec_ok, edns.wants_nsid), (1232, 0, true, true));
        assert!(edns.padded && !edns.wants_keepalive);
        let version_one = Edns::parse(1232, 0x0001_8000, &rdata).unwrap();
        assert_eq!((version_one.version, version_one.dnssec_ok, version_one.wants_nsid), (1, true, false), "options of version 1 unread");
        assert_eq!(Edns::parse(512, 0, &[0, 3, 0, 5, 1]).map_err(|m| m.error), Err(EdnsError::BadOptionLayout));
    }

    #[test]
    fn a_malformed_option_leaves_the_other_requests_readable() {
        let nsid = [0, 3, 0, 0];
        let bad_cookie = [0, 10, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let subnet = [&OPTION_CLIENT_SUBNET.to_be_bytes()[..], &[0, 7], &ecs(1, 24, 0, &[192, 0, 2])].concat();
        for rdata in [[&bad_cookie[..], &subnet, &nsid].concat(), [&nsid[..], &subnet, &bad_cookie].concat()] {
            let malformed = Edns::parse(1232, 0x8000, &rdata).unwrap_err();
            assert_eq!(malformed.error, EdnsError::BadCookie);
            let readable = malformed.readable;
            assert!(readable.wants_nsid && readable.dnssec_ok);
            assert!(readable.client_subnet.is_none() && readable.cookie.is_none(), "neither the subnet nor the bad cookie");
        }
        let good_cookie = [0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        let bad_subnet = [&OPTION_CLIENT_SUBNET.to_be_bytes()[..], &[0, 2, 0, 9]].concat();
        let malformed = Edns::parse(1232, 0, &[&good_cookie[..], &bad_subnet].concat()).unwrap_err();
        assert_eq!((malformed.error, malformed.readable.cookie.unwrap().client), (EdnsError::BadClientSubnet, [1, 2, 3, 4, 5, 6, 7, 8]));
        let broken_layout = [&nsid[..], &[0, 3, 0, 5, 1]].concat();
        assert!(!Edns::parse(1232, 0, &broken_layout).unwrap_err().readable.wants_nsid);
    }

    #[test]
    fn the_last_of_two_cookies_counts() {
        let cookie = |first: u8| [&[0, 10, 0, 8][..], &[first, 2, 3, 4, 5, 6, 7, 8]].concat();
        let edns = Edns::parse(1232, 0, &[cookie(1), cookie(9)].concat()).unwrap();
        assert_eq!(edns.cookie.unwrap().client[0], 9);
    }
}
