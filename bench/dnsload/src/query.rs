//! Query file parsing and wire encoding.
//!
//! Every line of a dnsperf-style query file (`name TYPE`) is encoded once, at
//! start-up, into a complete DNS query message whose last record is an EDNS
//! OPT pseudo-record with an empty RDATA. On the send path the pre-encoded
//! message is copied into a reusable buffer, the ID is patched in and, when
//! an ECS subnet is in use, the OPT RDLENGTH is patched and the pre-encoded
//! Client Subnet option appended. Nothing is allocated per query.

use std::fmt;
use std::net::IpAddr;

/// EDNS UDP payload size advertised in every query.
pub const EDNS_PAYLOAD: u16 = 1232;
/// Upper bound of an encoded query, ECS option included (header 12, name
/// 255, type/class 4, OPT 11, ECS option at most 4 + 4 + 16).
pub const MAX_QUERY_LEN: usize = 12 + 255 + 4 + 11 + 24;

const HEADER_LEN: usize = 12;
const CLASS_IN: u16 = 1;
const TYPE_OPT: u16 = 41;
const OPTION_ECS: u16 = 8;

/// One pre-encoded query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Header + question + OPT record with RDLENGTH 0; ID is zero.
    pub wire: Vec<u8>,
    /// Length of the question section (name + type + class), which starts
    /// at offset 12 in both the query and a well-formed response.
    pub question_len: usize,
}

impl Query {
    /// Encodes a query for `name` / `qtype` (class IN, RD=0, EDNS 1232).
    pub fn new(name: &str, qtype: u16) -> Result<Query, String> {
        let mut wire = Vec::with_capacity(64);
        // Header: ID 0, flags 0 (QUERY, RD=0), QD=1, AN=0, NS=0, AR=1.
        wire.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
        encode_name(name, &mut wire)?;
        wire.extend_from_slice(&qtype.to_be_bytes());
        wire.extend_from_slice(&CLASS_IN.to_be_bytes());
        let question_len = wire.len() - HEADER_LEN;
        // OPT: root owner, TYPE 41, CLASS = payload size, TTL 0, RDLEN 0.
        wire.push(0);
        wire.extend_from_slice(&TYPE_OPT.to_be_bytes());
        wire.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
        wire.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        Ok(Query { wire, question_len })
    }

    /// Sets the DNSSEC OK bit (RFC 3225) in the OPT record, so that a
    /// signed zone answers with its signatures.
    pub fn set_dnssec_ok(&mut self) {
        // The OPT record ends the message: its TTL's third octet (four
        // from the end, before the two of RDLENGTH) holds DO as its top bit.
        let flags = self.wire.len() - 4;
        self.wire[flags] |= 0x80;
    }

    /// The question section bytes.
    pub fn question(&self) -> &[u8] {
        &self.wire[HEADER_LEN..HEADER_LEN + self.question_len]
    }

    /// Writes this query into `buf` with the given ID and optional
    /// pre-encoded EDNS option (see [`ecs_option`]); returns its length.
    /// `buf` must hold at least [`MAX_QUERY_LEN`] bytes.
    #[inline]
    pub fn encode_into(&self, buf: &mut [u8], id: u16, option: Option<&[u8]>) -> usize {
        let base = self.wire.len();
        buf[..base].copy_from_slice(&self.wire);
        buf[0..2].copy_from_slice(&id.to_be_bytes());
        match option {
            None => base,
            Some(opt) => {
                buf[base - 2..base].copy_from_slice(&(opt.len() as u16).to_be_bytes());
                buf[base..base + opt.len()].copy_from_slice(opt);
                base + opt.len()
            }
        }
    }
}

/// Error in an input file, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for LineError {}

/// Yields (line number, trimmed content) for non-blank, non-comment lines.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let l = l.trim();
        (!l.is_empty() && !l.starts_with('#')).then_some((i + 1, l))
    })
}

/// Parses a dnsperf query file: one `name TYPE` per line.
pub fn parse_query_file(text: &str) -> Result<Vec<Query>, LineError> {
    let mut out = Vec::new();
    for (line, l) in content_lines(text) {
        let err = |msg: String| LineError { line, msg };
        let mut fields = l.split_whitespace();
        let name = fields.next().unwrap_or_default();
        let Some(ty) = fields.next() else {
            return Err(err(format!("expected `name TYPE`, got `{l}` (missing type)")));
        };
        if let Some(extra) = fields.next() {
            return Err(err(format!("expected `name TYPE`, unexpected field `{extra}`")));
        }
        let qtype = parse_type(ty).ok_or_else(|| err(format!("unknown record type `{ty}`")))?;
        let q = Query::new(name, qtype).map_err(|m| err(format!("bad name `{name}`: {m}")))?;
        out.push(q);
    }
    if out.is_empty() {
        return Err(LineError { line: 0, msg: "no queries in file".into() });
    }
    Ok(out)
}

/// Parses an ECS file: one subnet per line (`203.0.113.0/24`,
/// `2001:db8::/48`; a bare address means a host prefix). Returns the
/// pre-encoded EDNS options.
pub fn parse_ecs_file(text: &str) -> Result<Vec<Vec<u8>>, LineError> {
    let mut out = Vec::new();
    for (line, l) in content_lines(text) {
        out.push(parse_subnet(l).map_err(|msg| LineError { line, msg })?);
    }
    if out.is_empty() {
        return Err(LineError { line: 0, msg: "no subnets in file".into() });
    }
    Ok(out)
}

/// Parses `addr[/prefix]` into an encoded ECS option.
pub fn parse_subnet(s: &str) -> Result<Vec<u8>, String> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let addr: IpAddr = addr.trim().parse().map_err(|_| format!("bad address in `{s}`"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => p.trim().parse::<u8>().map_err(|_| format!("bad prefix length in `{s}`"))?,
    };
    if prefix > max {
        return Err(format!("prefix /{prefix} too long for `{s}` (max {max})"));
    }
    Ok(ecs_option(addr, prefix))
}

/// Encodes an EDNS Client Subnet option (RFC 7871): code 8, length, family,
/// source prefix, scope prefix 0 and the address truncated to
/// ceil(prefix / 8) bytes with the bits beyond the prefix zeroed.
pub fn ecs_option(addr: IpAddr, prefix: u8) -> Vec<u8> {
    let (family, bytes): (u16, Vec<u8>) = match addr {
        IpAddr::V4(a) => (1, a.octets().to_vec()),
        IpAddr::V6(a) => (2, a.octets().to_vec()),
    };
    let prefix = prefix.min(bytes.len() as u8 * 8);
    let n = (prefix as usize).div_ceil(8);
    let mut addr_bytes = bytes[..n].to_vec();
    let rem = prefix % 8;
    if rem != 0 {
        addr_bytes[n - 1] &= 0xffu8 << (8 - rem);
    }
    let mut out = Vec::with_capacity(8 + n);
    out.extend_from_slice(&OPTION_ECS.to_be_bytes());
    out.extend_from_slice(&((4 + n) as u16).to_be_bytes());
    out.extend_from_slice(&family.to_be_bytes());
    out.push(prefix);
    out.push(0);
    out.extend_from_slice(&addr_bytes);
    out
}

/// Encodes a presentation-format domain name (with `\X` and `\DDD`
/// escapes) as uncompressed wire format.
pub fn encode_name(name: &str, out: &mut Vec<u8>) -> Result<(), String> {
    let start = out.len();
    if name == "." {
        out.push(0);
        return Ok(());
    }
    if name.is_empty() {
        return Err("empty name".into());
    }
    let b = name.as_bytes();
    let mut i = 0;
    let mut label_start = out.len();
    out.push(0); // placeholder for the first label's length
    let mut pending = false; // does the current label have content?
    while i < b.len() {
        let c = b[i];
        match c {
            b'.' => {
                if !pending {
                    return Err("empty label".into());
                }
                close_label(out, label_start)?;
                label_start = out.len();
                out.push(0);
                pending = false;
                i += 1;
                continue;
            }
            b'\\' => {
                let rest = &b[i + 1..];
                if rest.len() >= 3 && rest[..3].iter().all(u8::is_ascii_digit) {
                    let v = (rest[0] - b'0') as u32 * 100 + (rest[1] - b'0') as u32 * 10 + (rest[2] - b'0') as u32;
                    if v > 255 {
                        return Err(format!("escape \\{} out of range", &name[i + 1..i + 4]));
                    }
                    out.push(v as u8);
                    i += 4;
                } else if let Some(&e) = rest.first() {
                    out.push(e);
                    i += 2;
                } else {
                    return Err("dangling backslash".into());
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
        pending = true;
    }
    if pending {
        close_label(out, label_start)?;
        out.push(0);
    }
    // else: trailing dot, the placeholder already is the root label.
    if out.len() - start > 255 {
        return Err(format!("name is {} octets long (max 255)", out.len() - start));
    }
    Ok(())
}

fn close_label(out: &mut [u8], label_start: usize) -> Result<(), String> {
    let len = out.len() - label_start - 1;
    if len > 63 {
        return Err(format!("label is {len} octets long (max 63)"));
    }
    out[label_start] = len as u8;
    Ok(())
}

/// Parses a record type mnemonic (case-insensitive) or `TYPEnnn`.
pub fn parse_type(s: &str) -> Option<u16> {
    const TYPES: &[(&str, u16)] = &[
        ("A", 1),
        ("NS", 2),
        ("CNAME", 5),
        ("SOA", 6),
        ("NULL", 10),
        ("WKS", 11),
        ("PTR", 12),
        ("HINFO", 13),
        ("MINFO", 14),
        ("MX", 15),
        ("TXT", 16),
        ("RP", 17),
        ("AFSDB", 18),
        ("SIG", 24),
        ("KEY", 25),
        ("AAAA", 28),
        ("LOC", 29),
        ("SRV", 33),
        ("NAPTR", 35),
        ("KX", 36),
        ("CERT", 37),
        ("DNAME", 39),
        ("APL", 42),
        ("DS", 43),
        ("SSHFP", 44),
        ("IPSECKEY", 45),
        ("RRSIG", 46),
        ("NSEC", 47),
        ("DNSKEY", 48),
        ("DHCID", 49),
        ("NSEC3", 50),
        ("NSEC3PARAM", 51),
        ("TLSA", 52),
        ("SMIMEA", 53),
        ("HIP", 55),
        ("CDS", 59),
        ("CDNSKEY", 60),
        ("OPENPGPKEY", 61),
        ("CSYNC", 62),
        ("ZONEMD", 63),
        ("SVCB", 64),
        ("HTTPS", 65),
        ("SPF", 99),
        ("NID", 104),
        ("L32", 105),
        ("L64", 106),
        ("LP", 107),
        ("EUI48", 108),
        ("EUI64", 109),
        ("TKEY", 249),
        ("TSIG", 250),
        ("IXFR", 251),
        ("AXFR", 252),
        ("ANY", 255),
        ("URI", 256),
        ("CAA", 257),
    ];
    if let Some(&(_, v)) = TYPES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
        return Some(v);
    }
    let num = s.get(..4).filter(|p| p.eq_ignore_ascii_case("TYPE")).map(|_| &s[4..])?;
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    num.parse::<u16>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_plain_query() {
        let q = Query::new("www.example.com", 1).unwrap();
        let mut expect = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        expect.extend_from_slice(b"\x03www\x07example\x03com\x00");
        expect.extend_from_slice(&[0, 1, 0, 1]);
        expect.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(q.wire, expect);
        assert_eq!(q.question(), &expect[12..12 + 21]);
        // Trailing dot makes no difference; RD (byte 2 bit 0) is clear.
        assert_eq!(Query::new("www.example.com.", 1).unwrap(), q);
        assert_eq!(q.wire[2] & 0x01, 0);
    }

    #[test]
    fn dnssec_ok_sets_only_the_do_bit() {
        let plain = Query::new("www.example.com", 1).unwrap();
        let mut signed = plain.clone();
        signed.set_dnssec_ok();
        let end = plain.wire.len();
        // OPT TTL: extended rcode 0, version 0, flags 0x8000 (DO); RDLENGTH 0.
        assert_eq!(&signed.wire[end - 6..], &[0, 0, 0x80, 0, 0, 0]);
        assert_eq!(&signed.wire[..end - 4], &plain.wire[..end - 4]);
        // The ECS option is appended after the flags, which it leaves alone.
        let opt = parse_subnet("203.0.113.0/24").unwrap();
        let mut buf = [0u8; MAX_QUERY_LEN];
        let n = signed.encode_into(&mut buf, 1, Some(&opt));
        assert_eq!(buf[end - 4], 0x80);
        assert_eq!(&buf[end..n], &opt[..]);
    }

    #[test]
    fn encodes_root_and_escapes() {
        let q = Query::new(".", 2).unwrap();
        assert_eq!(&q.wire[12..17], &[0, 0, 2, 0, 1]);
        let mut out = Vec::new();
        encode_name(r"a\.b.c\065", &mut out).unwrap();
        assert_eq!(out, b"\x03a.b\x02cA\x00");
    }

    #[test]
    fn encode_into_sets_id_and_ecs() {
        let q = Query::new("example.com", 28).unwrap();
        let mut buf = [0u8; MAX_QUERY_LEN];
        let n = q.encode_into(&mut buf, 0xbeef, None);
        assert_eq!(n, q.wire.len());
        assert_eq!(&buf[..2], &[0xbe, 0xef]);
        assert_eq!(&buf[2..n], &q.wire[2..]);

        let opt = parse_subnet("203.0.113.0/24").unwrap();
        let n = q.encode_into(&mut buf, 7, Some(&opt));
        assert_eq!(n, q.wire.len() + opt.len());
        let base = q.wire.len();
        // OPT RDLENGTH patched, option appended, rest unchanged.
        assert_eq!(&buf[base - 2..base], &(opt.len() as u16).to_be_bytes());
        assert_eq!(&buf[base..n], &opt[..]);
        assert_eq!(&buf[2..base - 2], &q.wire[2..base - 2]);
        // Reusing the buffer without ECS restores RDLENGTH 0.
        let n = q.encode_into(&mut buf, 7, None);
        assert_eq!(&buf[n - 2..n], &[0, 0]);
    }

    #[test]
    fn ecs_v4_24() {
        assert_eq!(parse_subnet("203.0.113.77/24").unwrap(), vec![0, 8, 0, 7, 0, 1, 24, 0, 203, 0, 113]);
    }

    #[test]
    fn ecs_v4_0() {
        assert_eq!(parse_subnet("10.1.2.3/0").unwrap(), vec![0, 8, 0, 4, 0, 1, 0, 0]);
    }

    #[test]
    fn ecs_v4_20_not_byte_aligned() {
        // 198.51.100.1/20 -> 198.51.96.0: third octet 0x64 masked to 0x60.
        assert_eq!(parse_subnet("198.51.100.1/20").unwrap(), vec![0, 8, 0, 7, 0, 1, 20, 0, 198, 51, 0x60]);
        // /9 keeps one bit of the second octet.
        assert_eq!(parse_subnet("10.255.0.0/9").unwrap(), vec![0, 8, 0, 6, 0, 1, 9, 0, 10, 0x80]);
    }

    #[test]
    fn ecs_v6_48() {
        assert_eq!(parse_subnet("2001:db8:1234:5678::1/48").unwrap(), vec![0, 8, 0, 10, 0, 2, 48, 0, 0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34]);
    }

    #[test]
    fn ecs_v6_128_and_bare_address() {
        let mut expect = vec![0, 8, 0, 20, 0, 2, 128, 0];
        expect.extend_from_slice(&"2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(parse_subnet("2001:db8::1/128").unwrap(), expect);
        assert_eq!(parse_subnet("2001:db8::1").unwrap(), expect);
        assert_eq!(parse_subnet("192.0.2.1").unwrap(), vec![0, 8, 0, 8, 0, 1, 32, 0, 192, 0, 2, 1]);
    }

    #[test]
    fn ecs_errors() {
        assert!(parse_subnet("192.0.2.0/33").is_err());
        assert!(parse_subnet("2001:db8::/129").is_err());
        assert!(parse_subnet("not-an-ip/24").is_err());
        assert!(parse_subnet("192.0.2.0/x").is_err());
        let e = parse_ecs_file("# c\n192.0.2.0/24\n\nbogus\n").unwrap_err();
        assert_eq!(e.line, 4);
        assert_eq!(parse_ecs_file("10.0.0.0/8\n2001:db8::/32\n").unwrap().len(), 2);
    }

    #[test]
    fn parses_query_file() {
        let qs = parse_query_file("# comment\n\nexample.com A\n  www.example.com\tAAAA  \nx.test type65\nfoo mx\n").unwrap();
        assert_eq!(qs.len(), 4);
        assert_eq!(&qs[1].question()[qs[1].question_len - 4..], &[0, 28, 0, 1]);
        assert_eq!(&qs[2].question()[qs[2].question_len - 4..], &[0, 65, 0, 1]);
        assert_eq!(&qs[3].question()[qs[3].question_len - 4..], &[0, 15, 0, 1]);
    }

    #[test]
    fn query_file_errors_carry_line_numbers() {
        let e = parse_query_file("example.com A\nexample.com\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.msg.contains("missing type"), "{e}");

        let e = parse_query_file("# x\n\nexample.com BOGUS\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().starts_with("line 3: unknown record type `BOGUS`"), "{e}");

        let e = parse_query_file("example.com A extra\n").unwrap_err();
        assert_eq!(e.line, 1);

        let e = parse_query_file("a..b A\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.contains("empty label"), "{e}");

        let long = "x".repeat(64);
        let e = parse_query_file(&format!("ok.test A\n{long}.test A\n")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.msg.contains("max 63"), "{e}");

        let name = vec!["abcdefghij"; 30].join(".");
        let e = parse_query_file(&format!("{name} A\n")).unwrap_err();
        assert!(e.msg.contains("max 255"), "{e}");

        assert!(parse_query_file("x A\nx TYPE70000\n").is_err());
        assert!(parse_query_file("# only comments\n\n").is_err());
    }

    #[test]
    fn max_query_len_bound_holds() {
        let name = vec!["a".repeat(63); 3].join(".") + "." + &"b".repeat(61);
        let q = Query::new(&name, 1).unwrap();
        let opt = parse_subnet("2001:db8::1/128").unwrap();
        assert!(q.wire.len() + opt.len() <= MAX_QUERY_LEN);
    }
}
