//! The query cases: the data-driven list in tests/conformance/queries.txt,
//! and hand-made malformed or unusual packets.

use std::path::Path;

use super::norm::{Question, parse_class, parse_type};
use super::wire::{EdnsSpec, QuerySpec, Transport, encode_name};

/// What a case expects beyond "the same as the reference".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A reply.
    Reply,
    /// No reply at all (a response is never answered, RFC 1035 section 4.1.1).
    Silence,
}

#[derive(Clone, Debug)]
pub struct Case {
    /// What the case is, for the diff (the query-list line, or a description).
    pub label: String,
    pub packet: Vec<u8>,
    pub transports: Vec<Transport>,
    pub expect: Expect,
    /// The question as sent, when the packet holds one well-formed question
    /// (the reply must echo it octet for octet).
    pub question: Option<Question>,
    /// The query carried an OPT record.
    pub query_has_opt: bool,
    /// The query carried an OPT record that is not the one OPT of a
    /// readable query (cut short, sent twice, misplaced, owned by another
    /// name): whether the reply has one, or the NSID asked in it, is not
    /// checked.
    pub query_opt_damaged: bool,
    /// The query asked for the NSID (in a damaged OPT too: a server that
    /// never saw the option must not answer it).
    pub asks_nsid: bool,
    /// For ANY: the RRset types at the name (RFC 8482 subset rule).
    pub any_types: Option<Vec<u16>>,
    /// The response may be too large for UDP: UDP replies are checked for TC
    /// and whole RRsets rather than compared section by section.
    pub big: bool,
    /// The query is a well-formed QUERY (opcode 0, QR 0, one question).
    pub well_formed: bool,
    /// The RCODEs the RFCs allow for this case, checked on each reply alone.
    /// With more than one, two servers that chose different ones are not
    /// compared further (see compare.rs).
    pub expect_rcode: Vec<u16>,
}

/// The octets a hex string spells.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits: {text:?}"));
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|e| format!("{text:?}: {e}"))).collect()
}

fn parse_num(text: &str) -> Result<u32, String> {
    let r = if let Some(h) = text.strip_prefix("0x") { u32::from_str_radix(h, 16) } else { text.parse() };
    r.map_err(|e| format!("{text:?}: {e}"))
}

/// Parses one line of the query list.
fn parse_line(line: &str, id: u16) -> Result<Case, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 2 {
        return Err("expected QNAME QTYPE".into());
    }
    let qname = if words[0].ends_with('.') { words[0].to_string() } else { format!("{}.", words[0]) };
    let qtype = parse_type(words[1]).ok_or_else(|| format!("unknown type {}", words[1]))?;
    let mut q = QuerySpec::new(&qname, qtype);
    q.id = id;
    let mut transports = vec![Transport::Udp, Transport::Tcp];
    let mut any_types = None;
    let mut big = false;
    let mut asks_nsid = false;
    let mut expect_rcode = Vec::new();
    for word in &words[2..] {
        let (key, value) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (*word, None),
        };
        let need = || value.ok_or_else(|| format!("{key} needs a value"));
        let edns = |q: &mut QuerySpec| -> Result<(), String> {
            if q.edns.is_none() {
                return Err(format!("{key} with +noedns"));
            }
            Ok(())
        };
        match key {
            "+rd" => q.rd = true,
            "+cd" => q.cd = true,
            "+ad" => q.ad = true,
            "+z" => q.z = true,
            "+opcode" => q.opcode = parse_num(need()?)? as u8,
            "+class" => q.qclass = parse_class(need()?).ok_or("bad class")?,
            "+noedns" => q.edns = None,
            "+bufsize" => {
                edns(&mut q)?;
                q.edns.as_mut().unwrap().payload = parse_num(need()?)? as u16;
            }
            "+do" => {
                edns(&mut q)?;
                q.edns.as_mut().unwrap().dnssec_ok = true;
            }
            "+ednsver" => {
                edns(&mut q)?;
                q.edns.as_mut().unwrap().version = parse_num(need()?)? as u8;
            }
            "+ednsz" => {
                edns(&mut q)?;
                q.edns.as_mut().unwrap().z = parse_num(need()?)? as u16;
            }
            "+nsid" => {
                edns(&mut q)?;
                q.edns.as_mut().unwrap().options.push((3, Vec::new()));
                asks_nsid = true;
            }
            "+opt" => {
                edns(&mut q)?;
                let (code, data) = need()?.split_once(':').ok_or("+opt=CODE:HEX")?;
                let code = parse_num(code)? as u16;
                q.edns.as_mut().unwrap().options.push((code, parse_hex(data)?));
            }
            "+twoopt" => {
                edns(&mut q)?;
                q.second_opt = true;
            }
            "+udp" => transports = vec![Transport::Udp],
            "+tcp" => transports = vec![Transport::Tcp],
            "+types" => {
                let types: Result<Vec<u16>, String> =
                    need()?.split(',').map(|t| parse_type(t).ok_or_else(|| format!("unknown type {t}"))).collect();
                any_types = Some(types?);
            }
            "+big" => big = true,
            "+rcode" => {
                for name in need()?.split(',') {
                    expect_rcode.push(parse_rcode(name).ok_or_else(|| format!("unknown rcode {name}"))?);
                }
            }
            _ => return Err(format!("unknown modifier {word}")),
        }
    }
    let question = Question { name: encode_name(&qname), qtype, qclass: q.qclass };
    Ok(Case {
        label: line.to_string(),
        packet: q.encode(),
        transports,
        expect: Expect::Reply,
        question: Some(question),
        query_has_opt: q.edns.is_some(),
        query_opt_damaged: false,
        asks_nsid,
        any_types,
        big,
        well_formed: q.opcode == 0,
        expect_rcode,
    })
}

/// Every conformance case: the query list, then the crafted packets.
pub fn conformance_cases() -> Vec<Case> {
    let mut cases = load_query_list(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/queries.txt"), 0x1000);
    cases.extend(crafted_cases(0x8000));
    cases
}

/// Reads the query list. IDs are allocated from `first_id` upwards.
pub fn load_query_list(path: &Path, first_id: u16) -> Vec<Case> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cases = Vec::new();
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let id = first_id.wrapping_add(cases.len() as u16);
        match parse_line(line, id) {
            Ok(mut case) => {
                case.label = format!("{line}  [queries.txt:{}]", lineno + 1);
                cases.push(case)
            }
            Err(e) => panic!("{}:{}: {e}: {raw}", path.display(), lineno + 1),
        }
    }
    cases
}

/// A header: ID, flag octets, counts.
fn header(id: u16, b2: u8, b3: u8, counts: [u16; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12);
    out.extend_from_slice(&id.to_be_bytes());
    out.push(b2);
    out.push(b3);
    for c in counts {
        out.extend_from_slice(&c.to_be_bytes());
    }
    out
}

fn question_bytes(name: &str, qtype: u16) -> Vec<u8> {
    let mut out = encode_name(name);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out
}

fn opt_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    EdnsSpec::default().encode(&mut out);
    out
}

fn crafted(label: &str, packet: Vec<u8>) -> Case {
    Case {
        label: label.to_string(),
        packet,
        transports: vec![Transport::Udp, Transport::Tcp],
        expect: Expect::Reply,
        question: None,
        query_has_opt: false,
        query_opt_damaged: false,
        asks_nsid: false,
        any_types: None,
        big: false,
        well_formed: false,
        expect_rcode: vec![FORMERR],
    }
}

const FORMERR: u16 = 1;
const NOERROR: u16 = 0;
const NOTIMP: u16 = 4;
const REFUSED: u16 = 5;
const NOTAUTH: u16 = 9;

/// RCODE mnemonics used in the query list.
fn parse_rcode(name: &str) -> Option<u16> {
    (0..4096u16).find(|&v| super::norm::rcode_name(v) == name.to_ascii_uppercase())
}

/// Malformed and unusual packets, built octet by octet.
pub fn crafted_cases(first_id: u16) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut id = first_id;
    let mut next_id = || {
        id = id.wrapping_add(1);
        id
    };
    let www_a = question_bytes("www.example.com.", 1);

    // QDCOUNT 0: nothing to answer (RFC 1035 section 4.1.1: FORMERR).
    let p = header(next_id(), 0, 0, [0, 0, 0, 0]);
    cases.push(crafted("QDCOUNT=0, header only", p));
    let mut p = header(next_id(), 0, 0, [0, 0, 0, 1]);
    p.extend(opt_bytes());
    let mut c = crafted("QDCOUNT=0 with an OPT record", p);
    c.query_has_opt = true;
    cases.push(c);

    // QDCOUNT 2: two questions (RFC 9619: FORMERR).
    let mut p = header(next_id(), 0, 0, [2, 0, 0, 0]);
    p.extend(&www_a);
    p.extend(question_bytes("www.example.com.", 28));
    cases.push(crafted("QDCOUNT=2 (www A, www AAAA)", p));

    // Opcodes other than QUERY. STATUS (2), IQUERY (1, obsolete, RFC 3425),
    // an unassigned one (3) and 15: NOTIMP (RFC 1035 section 4.1.1).
    for (opcode, name) in [(2u8, "STATUS"), (1, "IQUERY"), (3, "unassigned 3"), (15, "unassigned 15")] {
        let mut p = header(next_id(), opcode << 3, 0, [1, 0, 0, 0]);
        p.extend(&www_a);
        let mut c = crafted(&format!("opcode {opcode} ({name}) www.example.com A"), p);
        c.expect_rcode = vec![NOTIMP];
        c.question = Some(Question { name: encode_name("www.example.com."), qtype: 1, qclass: 1 });
        cases.push(c);
    }
    // NOTIFY and UPDATE for a served zone from an address nobody allowed.
    for (opcode, name, qtype) in [(4u8, "NOTIFY", 6u16), (5, "UPDATE", 6)] {
        let mut p = header(next_id(), (opcode << 3) | if opcode == 4 { 0x04 } else { 0 }, 0, [1, 0, 0, 0]);
        p.extend(question_bytes("example.com.", qtype));
        let mut c = crafted(&format!("opcode {opcode} ({name}) example.com SOA"), p);
        // RFC 1035 section 4.1.1: NOTIMP for an opcode not implemented;
        // RFC 2136 section 3 / RFC 1996 section 3: REFUSED or NOTAUTH when
        // the request is not allowed (RFC 8945 reuses 9 as "not authorized").
        c.expect_rcode = vec![NOTIMP, REFUSED, NOTAUTH];
        c.question = Some(Question { name: encode_name("example.com."), qtype, qclass: 1 });
        cases.push(c);
    }

    // QR=1: a response is never answered (RFC 1035 section 4.1.1; answering
    // would let two servers loop). Over TCP the server may also close.
    let mut p = header(next_id(), 0x80, 0, [1, 0, 0, 0]);
    p.extend(&www_a);
    let mut c = crafted("QR=1 (a response sent as a query)", p);
    c.expect = Expect::Silence;
    c.expect_rcode = vec![];
    cases.push(c);
    let mut p = header(next_id(), 0x84, 0, [1, 1, 0, 0]);
    p.extend(&www_a);
    p.extend(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 192, 0, 2, 80]);
    let mut c = crafted("QR=1 AA=1 with an answer record (a whole response)", p);
    c.expect = Expect::Silence;
    c.expect_rcode = vec![];
    cases.push(c);

    // Shorter than a header: nothing to address a reply to.
    let p = vec![0x12, 0x34, 0x00, 0x00, 0x00];
    let mut c = crafted("5 octets", p);
    c.expect = Expect::Silence;
    c.expect_rcode = vec![];
    cases.push(c);

    // The header is readable: FORMERR.
    let p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    cases.push(crafted("QDCOUNT=1, no question", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    p.extend(&[3, b'w', b'w', b'w', 7, b'e', b'x', b'a', b'm']);
    cases.push(crafted("question name cut short", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    p.extend(encode_name("www.example.com."));
    p.extend(&[0, 1]);
    cases.push(crafted("question without QCLASS", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    p.extend(&[3, b'w', b'w', b'w', 0xc0, 12, 0, 1, 0, 1]);
    cases.push(crafted("question name with a compression loop", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    p.extend(&[0x41, b'x', 0, 0, 1, 0, 1]);
    cases.push(crafted("question name with label type 0x40", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    for _ in 0..5 {
        p.push(63);
        p.extend(std::iter::repeat_n(b'a', 63));
    }
    p.extend(&[0, 0, 1, 0, 1]);
    cases.push(crafted("question name of 321 octets", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 1]);
    p.extend(&www_a);
    cases.push(crafted("ARCOUNT=1, additional section missing", p));
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 1]);
    p.extend(&www_a);
    p.extend(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 8, 0, 3, 0, 0]); // option runs past RDATA
    let mut c = crafted("OPT option longer than its RDATA", p);
    c.query_has_opt = true;
    cases.push(c);
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 1]);
    p.extend(&www_a);
    p.extend(&[3, b'f', b'o', b'o', 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]); // owner not root
    let mut c = crafted("OPT with owner foo. (RFC 6891 section 6.1.2)", p);
    c.query_has_opt = true;
    // RFC 6891 section 6.1.2 says the owner MUST be 0 (root) but not what a
    // responder does with another one: rejecting the query (FORMERR) and
    // ignoring the owner (a normal answer) are both seen and both harmless.
    c.expect_rcode = vec![FORMERR, NOERROR];
    cases.push(c);
    let mut p = header(next_id(), 0, 0, [1, 0, 0, 0]);
    p.extend(&www_a);
    p.extend(&[0xde, 0xad, 0xbe, 0xef]);
    let mut c = crafted("4 octets of trailing garbage after the question", p);
    // RFC 1035 does not say whether octets after the counted sections make
    // a message malformed: FORMERR and ignoring them are both seen.
    c.expect_rcode = vec![FORMERR, NOERROR];
    c.well_formed = true;
    c.question = Some(Question { name: encode_name("www.example.com."), qtype: 1, qclass: 1 });
    cases.push(c);
    // Deterministic noise after a header that claims one of everything.
    let mut p = header(next_id(), 0, 0, [1, 1, 1, 1]);
    let mut x: u32 = 0x1234_5678;
    for _ in 0..48 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p.push((x >> 24) as u8);
    }
    cases.push(crafted("48 octets of noise after the header", p));

    cases
}
