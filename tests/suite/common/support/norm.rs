//! A response turned into the fields the suite compares.
//!
//! Sections become sets of RRsets keyed by (owner lower-cased, type, class);
//! each RRset keeps its TTLs and the set of its record data in canonical wire
//! form (RFC 4034 section 6.2: names uncompressed and lower-cased), so that
//! record order, name compression and owner case do not count as differences.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bytes::Bytes;
use domain::base::iana::Rtype;
use domain::base::name::ParsedName;
use domain::base::rdata::ComposeRecordData;
use domain::base::{Message, ParsedRecord};
use domain::rdata::AllRecordData;

use super::wire::name_to_text;

pub const OPT_NSID: u16 = 3;
pub const OPT_ECS: u16 = 8;
pub const OPT_COOKIE: u16 = 10;
const T_TSIG: u16 = 250;
const TSIG_BADTIME: u16 = 18;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RrsetKey {
    /// Owner in presentation format, lower-cased.
    pub owner: String,
    pub rtype: u16,
    pub class: u16,
}

impl fmt::Display for RrsetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.owner, class_name(self.class), type_name(self.rtype))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rrset {
    /// Every TTL seen on a record of this RRset (RFC 2181 section 5.2 wants one).
    pub ttls: BTreeSet<u32>,
    /// Canonical record data -> its presentation form (for the diff).
    pub rdata: BTreeMap<Vec<u8>, String>,
    /// Records counted, duplicates included (RFC 2181 section 5: an RRset has no duplicates).
    pub records: usize,
}

impl Rrset {
    /// Same TTLs and the same record data.
    pub fn same_as(&self, other: &Rrset) -> bool {
        self.ttls == other.ttls && self.rdata.keys().eq(other.rdata.keys()) && self.records == other.records
    }

    pub fn describe(&self) -> String {
        let ttls: Vec<String> = self.ttls.iter().map(|t| t.to_string()).collect();
        let data: Vec<&str> = self.rdata.values().map(String::as_str).collect();
        let dup = if self.records != self.rdata.len() { format!(" ({} records with duplicates)", self.records) } else { String::new() };
        format!("ttl {} [{}]{}", ttls.join("/"), data.join(" | "), dup)
    }
}

pub type Section = BTreeMap<RrsetKey, Rrset>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The name exactly as on the wire (case preserved).
    pub name: Vec<u8>,
    pub qtype: u16,
    pub qclass: u16,
}

impl fmt::Display for Question {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", name_to_text(&self.name), class_name(self.qclass), type_name(self.qtype))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edns {
    pub owner_is_root: bool,
    pub payload: u16,
    pub ext_rcode: u8,
    pub version: u8,
    pub dnssec_ok: bool,
    /// The other 15 flag bits.
    pub z: u16,
    /// Option code -> option data, in the order received.
    pub options: Vec<(u16, Vec<u8>)>,
}

impl Edns {
    pub fn option(&self, code: u16) -> Option<&[u8]> {
        self.options.iter().find(|(c, _)| *c == code).map(|(_, d)| d.as_slice())
    }
}

/// Everything compared about one response.
#[derive(Clone, Debug)]
pub struct Normalized {
    pub size: usize,
    pub id: u16,
    pub qr: bool,
    pub opcode: u8,
    pub aa: bool,
    pub tc: bool,
    pub rd: bool,
    pub ra: bool,
    pub z: bool,
    pub ad: bool,
    pub cd: bool,
    /// Full 12-bit RCODE: header bits plus the OPT extended bits.
    pub rcode: u16,
    pub counts: [u16; 4],
    pub question: Vec<Question>,
    pub answer: Section,
    pub authority: Section,
    pub additional: Section,
    pub edns: Option<Edns>,
    /// Number of OPT records in the additional section.
    pub opt_count: usize,
    /// OPT records found outside the additional section.
    pub misplaced_opt: usize,
    /// Set when the message could not be fully parsed.
    pub parse_error: Option<String>,
}

pub fn rcode_name(rcode: u16) -> String {
    let name = match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        16 => "BADVERS",
        23 => "BADCOOKIE",
        _ => return format!("RCODE{rcode}"),
    };
    name.to_string()
}

pub fn type_name(rtype: u16) -> String {
    let t = Rtype::from_int(rtype);
    match t.to_mnemonic_str() {
        Some(m) => m.to_string(),
        None => format!("TYPE{rtype}"),
    }
}

pub fn class_name(class: u16) -> String {
    match class {
        1 => "IN".into(),
        3 => "CH".into(),
        4 => "HS".into(),
        254 => "NONE".into(),
        255 => "ANY".into(),
        _ => format!("CLASS{class}"),
    }
}

/// Parses a type mnemonic or `TYPEnnn`.
pub fn parse_type(text: &str) -> Option<u16> {
    let upper = text.to_ascii_uppercase();
    if let Some(num) = upper.strip_prefix("TYPE")
        && let Ok(v) = num.parse::<u16>()
    {
        return Some(v);
    }
    Rtype::from_mnemonic(upper.as_bytes()).map(|t| t.to_int())
}

pub fn parse_class(text: &str) -> Option<u16> {
    let upper = text.to_ascii_uppercase();
    match upper.as_str() {
        "IN" => Some(1),
        "CH" => Some(3),
        "HS" => Some(4),
        "NONE" => Some(254),
        "ANY" => Some(255),
        _ => upper.strip_prefix("CLASS").and_then(|n| n.parse().ok()),
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads the question names straight from the packet so that their case is
/// kept exactly (domain's parsed names compare case-insensitively).
fn raw_questions(packet: &[u8], qdcount: u16) -> Result<Vec<Question>, String> {
    let mut pos = 12;
    let mut out = Vec::new();
    for _ in 0..qdcount {
        let mut name = Vec::new();
        loop {
            let len = *packet.get(pos).ok_or("question name runs past the end")? as usize;
            if len & 0xc0 == 0xc0 {
                return Err("compressed question name".into());
            }
            if len > 63 {
                return Err(format!("bad label type {len:#04x} in question"));
            }
            let label = packet.get(pos..pos + 1 + len).ok_or("question name runs past the end")?;
            name.extend_from_slice(label);
            pos += 1 + len;
            if len == 0 {
                break;
            }
        }
        let tail = packet.get(pos..pos + 4).ok_or("question runs past the end")?;
        out.push(Question { name, qtype: u16::from_be_bytes([tail[0], tail[1]]), qclass: u16::from_be_bytes([tail[2], tail[3]]) });
        pos += 4;
    }
    Ok(out)
}

fn add_record(section: &mut Section, rec: &ParsedRecord<'_, Bytes>, raw: &RawRecord) -> Result<(), String> {
    let owner = rec.owner().to_string().to_ascii_lowercase();
    let owner = if owner.ends_with('.') { owner } else { format!("{owner}.") };
    let key = RrsetKey { owner, rtype: rec.rtype().to_int(), class: rec.class().to_int() };
    let (canonical, text) = match rec.to_record::<AllRecordData<Bytes, ParsedName<Bytes>>>() {
        // A TSIG: only what servers can agree on.
        _ if key.rtype == T_TSIG => tsig_fields(&raw.rdata),
        Ok(Some(r)) => {
            let mut buf = Vec::new();
            r.data().compose_canonical_rdata(&mut buf).map_err(|e| format!("compose: {e:?}"))?;
            (buf, r.data().to_string())
        }
        // Not parseable as its type: raw octets, marked.
        Ok(None) | Err(_) => (raw.rdata.clone(), format!("(unparsed) \\# {} {}", raw.rdata.len(), hex(&raw.rdata))),
    };
    let entry = section.entry(key).or_default();
    entry.ttls.insert(rec.ttl().as_secs());
    entry.rdata.insert(canonical, text);
    entry.records += 1;
    Ok(())
}

/// The fields of a TSIG record two servers can agree on: the algorithm,
/// the error, whether a MAC is there, and Other Data unless it is BADTIME's
/// clock (RFC 8945 section 5.2.3). Time Signed and the MAC are each
/// server's own.
fn tsig_fields(rdata: &[u8]) -> (Vec<u8>, String) {
    let unparsed = || (rdata.to_vec(), format!("(unparsed TSIG) {}", hex(rdata)));
    let mut pos = 0;
    while let Some(&len) = rdata.get(pos) {
        pos += 1 + len as usize;
        if len == 0 || len > 63 {
            break;
        }
    }
    let algorithm = rdata[..pos.min(rdata.len())].to_ascii_lowercase();
    let Some(mac_len) = rdata.get(pos + 8..pos + 10).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize) else { return unparsed() };
    let rest = pos + 10 + mac_len;
    let Some(tail) = rdata.get(rest..rest + 6) else { return unparsed() };
    let error = u16::from_be_bytes([tail[2], tail[3]]);
    let other = if error == TSIG_BADTIME { &[][..] } else { &rdata[rest + 6..] };
    let mut canonical = algorithm.clone();
    canonical.extend_from_slice(&[(mac_len > 0) as u8]);
    canonical.extend_from_slice(&error.to_be_bytes());
    canonical.extend_from_slice(other);
    let text = format!("{} mac={} error={error} other={}", name_to_text(&algorithm), if mac_len > 0 { "yes" } else { "none" }, hex(other));
    (canonical, text)
}

/// A record as it sits in the packet: the fields after the owner, and the
/// record data uninterpreted.
#[derive(Clone, Debug)]
pub struct RawRecord {
    pub owner_is_root: bool,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    pub rdata: Vec<u8>,
}

/// Walks the records after the question section without interpreting them.
fn raw_records(packet: &[u8], counts: [u16; 4]) -> Result<Vec<RawRecord>, String> {
    let mut pos = 12;
    let skip_name = |pos: &mut usize| -> Result<bool, String> {
        let start = *pos;
        loop {
            let len = *packet.get(*pos).ok_or("name runs past the end")?;
            if len & 0xc0 == 0xc0 {
                *pos += 2;
                return Ok(false);
            }
            if len > 63 {
                return Err(format!("bad label type {len:#04x}"));
            }
            *pos += 1 + len as usize;
            if len == 0 {
                return Ok(*pos == start + 1);
            }
        }
    };
    for _ in 0..counts[0] {
        skip_name(&mut pos)?;
        pos += 4;
    }
    let mut out = Vec::new();
    for _ in 0..(counts[1] as usize + counts[2] as usize + counts[3] as usize) {
        let owner_is_root = skip_name(&mut pos)?;
        let fixed = packet.get(pos..pos + 10).ok_or("record header runs past the end")?;
        let rdlen = u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
        let rdata = packet.get(pos + 10..pos + 10 + rdlen).ok_or("record data runs past the end")?;
        out.push(RawRecord {
            owner_is_root,
            rtype: u16::from_be_bytes([fixed[0], fixed[1]]),
            class: u16::from_be_bytes([fixed[2], fixed[3]]),
            ttl: u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
            rdata: rdata.to_vec(),
        });
        pos += 10 + rdlen;
    }
    Ok(out)
}

/// A message's first OPT record, as the header's counts place it.
pub fn opt_record(packet: &[u8]) -> Option<RawRecord> {
    if packet.len() < 12 {
        return None;
    }
    let counts: [u16; 4] = std::array::from_fn(|i| u16::from_be_bytes([packet[4 + 2 * i], packet[5 + 2 * i]]));
    raw_records(packet, counts).ok()?.into_iter().find(|r| r.rtype == 41)
}

/// The data of EDNS option `code` in a message's OPT record, as sent (not
/// normalized).
pub fn raw_option(packet: &[u8], code: u16) -> Option<Vec<u8>> {
    let opt = opt_record(packet)?;
    let mut pos = 0;
    while let Some(header) = opt.rdata.get(pos..pos + 4) {
        let len = u16::from_be_bytes([header[2], header[3]]) as usize;
        if u16::from_be_bytes([header[0], header[1]]) == code {
            return opt.rdata.get(pos + 4..pos + 4 + len).map(<[u8]>::to_vec);
        }
        pos += 4 + len;
    }
    None
}

fn parse_opt(raw: &RawRecord) -> Result<Edns, String> {
    let ttl = raw.ttl;
    let data = &raw.rdata;
    let mut options = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        if pos + 4 > data.len() {
            return Err("OPT option header runs past the end".into());
        }
        let code = u16::from_be_bytes([data[pos], data[pos + 1]]);
        let len = u16::from_be_bytes([data[pos + 2], data[pos + 3]]) as usize;
        let body = data.get(pos + 4..pos + 4 + len).ok_or("OPT option runs past the end")?;
        let mut body = body.to_vec();
        if code == OPT_COOKIE && body.len() > 8 {
            // A server cookie is the server's own (its secret, its clock):
            // only its length is compared.
            body[8..].fill(0);
        }
        options.push((code, body));
        pos += 4 + len;
    }
    Ok(Edns {
        owner_is_root: raw.owner_is_root,
        payload: raw.class,
        ext_rcode: (ttl >> 24) as u8,
        version: ((ttl >> 16) & 0xff) as u8,
        dnssec_ok: ttl & 0x8000 != 0,
        z: (ttl & 0x7fff) as u16,
        options,
    })
}

pub fn normalize(packet: &[u8]) -> Normalized {
    let mut n = Normalized {
        size: packet.len(),
        id: 0,
        qr: false,
        opcode: 0,
        aa: false,
        tc: false,
        rd: false,
        ra: false,
        z: false,
        ad: false,
        cd: false,
        rcode: 0,
        counts: [0; 4],
        question: Vec::new(),
        answer: Section::new(),
        authority: Section::new(),
        additional: Section::new(),
        edns: None,
        opt_count: 0,
        misplaced_opt: 0,
        parse_error: None,
    };
    if packet.len() < 12 {
        n.parse_error = Some(format!("reply shorter than a header: {} octets", packet.len()));
        return n;
    }
    n.id = u16::from_be_bytes([packet[0], packet[1]]);
    n.qr = packet[2] & 0x80 != 0;
    n.opcode = (packet[2] >> 3) & 0x0f;
    n.aa = packet[2] & 0x04 != 0;
    n.tc = packet[2] & 0x02 != 0;
    n.rd = packet[2] & 0x01 != 0;
    n.ra = packet[3] & 0x80 != 0;
    n.z = packet[3] & 0x40 != 0;
    n.ad = packet[3] & 0x20 != 0;
    n.cd = packet[3] & 0x10 != 0;
    n.rcode = (packet[3] & 0x0f) as u16;
    for i in 0..4 {
        n.counts[i] = u16::from_be_bytes([packet[4 + 2 * i], packet[5 + 2 * i]]);
    }
    match raw_questions(packet, n.counts[0]) {
        Ok(q) => n.question = q,
        Err(e) => {
            n.parse_error = Some(e);
            return n;
        }
    }
    let raw = match raw_records(packet, n.counts) {
        Ok(r) => r,
        Err(e) => {
            n.parse_error = Some(e);
            return n;
        }
    };
    let msg = match Message::from_octets(Bytes::copy_from_slice(packet)) {
        Ok(m) => m,
        Err(e) => {
            n.parse_error = Some(format!("{e}"));
            return n;
        }
    };
    let mut result = || -> Result<(), String> {
        let mut section = msg.answer().map_err(|e| format!("question: {e}"))?;
        let mut index = 0;
        for (idx, target) in [&mut n.answer, &mut n.authority, &mut n.additional].into_iter().enumerate() {
            for rec in &mut section {
                let rec = rec.map_err(|e| format!("section {idx}: {e}"))?;
                let raw = &raw[index];
                index += 1;
                if rec.rtype() == Rtype::OPT {
                    if idx == 2 {
                        n.opt_count += 1;
                        if n.edns.is_none() {
                            n.edns = Some(parse_opt(raw)?);
                        }
                    } else {
                        n.misplaced_opt += 1;
                    }
                    continue;
                }
                add_record(target, &rec, raw)?;
            }
            if idx < 2 {
                section = section.next_section().map_err(|e| format!("section {idx}: {e}"))?.ok_or("missing section")?;
            }
        }
        Ok(())
    };
    if let Err(e) = result() {
        n.parse_error = Some(e);
    }
    if let Some(edns) = &n.edns {
        // The upper 8 bits of the RCODE live in the OPT TTL (RFC 6891 section 6.1.3).
        n.rcode |= (edns.ext_rcode as u16) << 4;
    }
    n
}

/// The records a signer adds, each with its own keys and form of denial:
/// RRSIG, NSEC, DNSKEY, NSEC3, NSEC3PARAM, CDS, CDNSKEY.
const SIGNER_TYPES: [u16; 7] = [46, 47, 48, 50, 51, 59, 60];

impl Normalized {
    /// Leaves out what two signers with different keys and denial forms
    /// cannot agree on (`SIGNER_TYPES`), to compare the rest.
    pub fn strip_signatures(&mut self) {
        for section in [&mut self.answer, &mut self.authority, &mut self.additional] {
            section.retain(|k, _| !SIGNER_TYPES.contains(&k.rtype));
        }
    }

    pub fn flags_text(&self) -> String {
        let mut f = Vec::new();
        for (on, name) in [
            (self.qr, "qr"),
            (self.aa, "aa"),
            (self.tc, "tc"),
            (self.rd, "rd"),
            (self.ra, "ra"),
            (self.z, "z"),
            (self.ad, "ad"),
            (self.cd, "cd"),
        ] {
            if on {
                f.push(name);
            }
        }
        f.join(" ")
    }

    pub fn section(&self, which: SectionName) -> &Section {
        match which {
            SectionName::Answer => &self.answer,
            SectionName::Authority => &self.authority,
            SectionName::Additional => &self.additional,
        }
    }

    /// Every compared field, one section per line group (for
    /// PHAROS_CONFORMANCE_DUMP).
    pub fn dump(&self) -> String {
        let mut out = format!("    {} opcode {}\n", self.summary(), self.opcode);
        for q in &self.question {
            out.push_str(&format!("    question: {q}\n"));
        }
        for which in [SectionName::Answer, SectionName::Authority, SectionName::Additional] {
            for (k, set) in self.section(which) {
                out.push_str(&format!("    {which}: {k} {}\n", set.describe()));
            }
        }
        out.push_str(&format!("    edns: {}\n", describe_edns(&self.edns)));
        if let Some(e) = &self.parse_error {
            out.push_str(&format!("    parse error: {e}\n"));
        }
        out
    }

    /// A short one-line summary, for diffs.
    pub fn summary(&self) -> String {
        format!(
            "{} [{}] an={} ns={} ar={} {}B",
            rcode_name(self.rcode),
            self.flags_text(),
            self.counts[1],
            self.counts[2],
            self.counts[3],
            self.size
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionName {
    Answer,
    Authority,
    Additional,
}

impl fmt::Display for SectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SectionName::Answer => "answer",
            SectionName::Authority => "authority",
            SectionName::Additional => "additional",
        })
    }
}

pub fn describe_edns(e: &Option<Edns>) -> String {
    match e {
        None => "no OPT".into(),
        Some(e) => {
            let opts: Vec<String> = e
                .options
                .iter()
                .map(|(c, d)| match *c {
                    OPT_NSID => format!("NSID={:?}", String::from_utf8_lossy(d)),
                    _ => format!("opt{}={}", c, hex(d)),
                })
                .collect();
            format!(
                "version {} payload {} do={} z={:#x}{} options [{}]",
                e.version,
                e.payload,
                e.dnssec_ok as u8,
                e.z,
                if e.owner_is_root { "" } else { " owner-not-root" },
                opts.join(", ")
            )
        }
    }
}
