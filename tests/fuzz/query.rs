//! One generated query as a structure: every oddity the fuzzer can put in
//! a packet is a field, so that a query can be encoded, described, turned
//! into a dig command line and made smaller one field at a time.

use std::fmt::Write as _;

use super::tsig::{self, TsigMode};
use crate::support::norm::{class_name, type_name};
use crate::support::wire::name_to_text;

pub const OPT_NSID: u16 = 3;
pub const OPT_ECS: u16 = 8;
pub const OPT_COOKIE: u16 = 10;
pub const OPT_KEEPALIVE: u16 = 11;
pub const OPT_PADDING: u16 = 12;
pub const OPT_EDE: u16 = 15;
/// The client cookie the fuzzer asks each server's cookie for.
pub const CLIENT_COOKIE: &[u8; 8] = b"fuzzfuzz";

/// The header fields a query sets (the counts follow from the sections,
/// except `qdcount`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub qr: bool,
    pub opcode: u8,
    pub aa: bool,
    pub tc: bool,
    pub rd: bool,
    pub ra: bool,
    pub z: bool,
    pub ad: bool,
    pub cd: bool,
    pub rcode: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// Labels, leftmost first, case as sent.
    pub labels: Vec<Vec<u8>>,
    pub qtype: u16,
    pub qclass: u16,
}

impl Question {
    pub fn wire_name(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for label in &self.labels {
            out.push(label.len() as u8);
            out.extend_from_slice(label);
        }
        out.push(0);
        out
    }

    pub fn name_text(&self) -> String {
        name_to_text(&self.wire_name())
    }
}

/// One EDNS option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EdnsOption {
    /// Code and data as given.
    Raw(u16, Vec<u8>),
    /// The cookie the receiving server gave the fuzzer for `CLIENT_COOKIE`
    /// (see `Target::good_cookie`), or that client cookie alone when it
    /// gave none.
    GoodCookie,
    /// An option whose length says `extra` octets more than it holds (its
    /// OPT's RDLENGTH is right: the option runs past the end of the record).
    LongerThanItIs(u16, Vec<u8>, u8),
}

impl EdnsOption {
    fn encode(&self, target: &Target, out: &mut Vec<u8>) {
        let (code, data, claimed) = match self {
            EdnsOption::Raw(code, data) => (*code, data.clone(), data.len()),
            EdnsOption::GoodCookie => {
                let data = target.good_cookie.clone().unwrap_or_else(|| CLIENT_COOKIE.to_vec());
                let len = data.len();
                (OPT_COOKIE, data, len)
            }
            EdnsOption::LongerThanItIs(code, data, extra) => (*code, data.clone(), data.len() + *extra as usize),
        };
        out.extend_from_slice(&code.to_be_bytes());
        out.extend_from_slice(&(claimed as u16).to_be_bytes());
        out.extend_from_slice(&data);
    }

    fn describe(&self) -> String {
        match self {
            EdnsOption::Raw(code, data) => format!("{}={}", option_name(*code), hex(data)),
            EdnsOption::GoodCookie => format!("COOKIE={}+the server's cookie", hex(CLIENT_COOKIE)),
            EdnsOption::LongerThanItIs(code, data, extra) => format!("{}={} (length +{extra})", option_name(*code), hex(data)),
        }
    }
}

pub fn option_name(code: u16) -> String {
    match code {
        OPT_NSID => "NSID".into(),
        OPT_ECS => "ECS".into(),
        OPT_COOKIE => "COOKIE".into(),
        OPT_KEEPALIVE => "KEEPALIVE".into(),
        OPT_PADDING => "PADDING".into(),
        OPT_EDE => "EDE".into(),
        _ => format!("OPT{code}"),
    }
}

impl EdnsOption {
    pub fn code(&self) -> u16 {
        match self {
            EdnsOption::Raw(code, _) | EdnsOption::LongerThanItIs(code, _, _) => *code,
            EdnsOption::GoodCookie => OPT_COOKIE,
        }
    }
}

/// Where an OPT record is put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptPlace {
    Additional,
    /// In the answer section (RFC 6891 section 6.1.1: additional only).
    Answer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opt {
    /// Owner name in wire form (RFC 6891: the root).
    pub owner: Vec<u8>,
    pub payload: u16,
    pub ext_rcode: u8,
    pub version: u8,
    pub dnssec_ok: bool,
    pub z: u16,
    pub options: Vec<EdnsOption>,
    pub place: OptPlace,
    /// A second copy in the additional section.
    pub twice: bool,
}

impl Default for Opt {
    fn default() -> Self {
        Opt {
            owner: vec![0],
            payload: 1232,
            ext_rcode: 0,
            version: 0,
            dnssec_ok: false,
            z: 0,
            options: Vec::new(),
            place: OptPlace::Additional,
            twice: false,
        }
    }
}

impl Opt {
    fn encode(&self, target: &Target, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.owner);
        out.extend_from_slice(&41u16.to_be_bytes());
        out.extend_from_slice(&self.payload.to_be_bytes());
        out.push(self.ext_rcode);
        out.push(self.version);
        let flags = (if self.dnssec_ok { 0x8000 } else { 0 }) | (self.z & 0x7fff);
        out.extend_from_slice(&flags.to_be_bytes());
        let mut rdata = Vec::new();
        for option in &self.options {
            option.encode(target, &mut rdata);
        }
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&rdata);
    }
}

/// A query the fuzzer sends to every server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuzzQuery {
    pub header: Header,
    pub questions: Vec<Question>,
    /// QDCOUNT when it is not the number of questions.
    pub qdcount: Option<u16>,
    /// A record (an A record at the first question's name) in the answer
    /// section, and one in the authority section.
    pub answer_record: bool,
    pub authority_record: bool,
    pub opt: Option<Opt>,
    pub tsig: Option<TsigMode>,
    /// Octets cut from the end of the encoded message.
    pub cut: usize,
    /// Octets appended after the message.
    pub garbage: Vec<u8>,
}

/// What the encoding of a query depends on besides the query: the server
/// it goes to, and the message ID.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub id: u16,
    /// The whole COOKIE option (client and server cookie) that server last
    /// answered `CLIENT_COOKIE` with (cookies configurations).
    pub good_cookie: Option<Vec<u8>>,
}

impl FuzzQuery {
    /// A plain query: one question, an OPT with payload 1232, nothing odd.
    pub fn plain(labels: Vec<Vec<u8>>, qtype: u16) -> FuzzQuery {
        FuzzQuery {
            header: Header::default(),
            questions: vec![Question { labels, qtype, qclass: 1 }],
            qdcount: None,
            answer_record: false,
            authority_record: false,
            opt: Some(Opt::default()),
            tsig: None,
            cut: 0,
            garbage: Vec::new(),
        }
    }

    pub fn encode(&self, target: &Target) -> Vec<u8> {
        let h = &self.header;
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(&target.id.to_be_bytes());
        out.push((h.qr as u8) << 7 | (h.opcode & 0x0f) << 3 | (h.aa as u8) << 2 | (h.tc as u8) << 1 | h.rd as u8);
        out.push((h.ra as u8) << 7 | (h.z as u8) << 6 | (h.ad as u8) << 5 | (h.cd as u8) << 4 | (h.rcode & 0x0f));
        let opt_in_answer = self.opt.as_ref().is_some_and(|o| o.place == OptPlace::Answer);
        let opts_in_additional = self.opt.as_ref().map_or(0, |o| (o.place == OptPlace::Additional) as u16 + o.twice as u16);
        let counts = [
            self.qdcount.unwrap_or(self.questions.len() as u16),
            self.answer_record as u16 + opt_in_answer as u16,
            self.authority_record as u16,
            opts_in_additional,
        ];
        for count in counts {
            out.extend_from_slice(&count.to_be_bytes());
        }
        for q in &self.questions {
            out.extend_from_slice(&q.wire_name());
            out.extend_from_slice(&q.qtype.to_be_bytes());
            out.extend_from_slice(&q.qclass.to_be_bytes());
        }
        let record = |out: &mut Vec<u8>| {
            // An A record at the question's name (compressed pointer to it).
            out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        };
        if self.answer_record {
            record(&mut out);
        }
        if let Some(opt) = self.opt.as_ref().filter(|o| o.place == OptPlace::Answer) {
            opt.encode(target, &mut out);
        }
        if self.authority_record {
            record(&mut out);
        }
        if let Some(opt) = &self.opt {
            for _ in 0..opts_in_additional {
                opt.encode(target, &mut out);
            }
        }
        if let Some(mode) = self.tsig {
            tsig::sign(&mut out, mode);
        }
        out.truncate(out.len().saturating_sub(self.cut).max(2));
        out.extend_from_slice(&self.garbage);
        out
    }

    /// The query in words, as a log line shows it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for q in &self.questions {
            let _ = write!(out, "{} {} {}", q.name_text(), class_name(q.qclass), type_name(q.qtype));
            out.push_str("; ");
        }
        if self.questions.is_empty() {
            out.push_str("no question; ");
        }
        let h = &self.header;
        let flags: Vec<&str> =
            [(h.qr, "qr"), (h.aa, "aa"), (h.tc, "tc"), (h.rd, "rd"), (h.ra, "ra"), (h.z, "z"), (h.ad, "ad"), (h.cd, "cd")]
                .into_iter()
                .filter_map(|(on, name)| on.then_some(name))
                .collect();
        let _ = write!(out, "opcode {} flags [{}] rcode {}", h.opcode, flags.join(" "), h.rcode);
        if let Some(n) = self.qdcount {
            let _ = write!(out, "; QDCOUNT={n}");
        }
        if self.answer_record {
            out.push_str("; a record in answer");
        }
        if self.authority_record {
            out.push_str("; a record in authority");
        }
        match &self.opt {
            None => out.push_str("; no EDNS"),
            Some(o) => {
                let options: Vec<String> = o.options.iter().map(EdnsOption::describe).collect();
                let _ = write!(
                    out,
                    "; EDNS version {} payload {} do={} z={:#x} ext-rcode {}{}{}{} options [{}]",
                    o.version,
                    o.payload,
                    o.dnssec_ok as u8,
                    o.z,
                    o.ext_rcode,
                    if o.owner != [0] { format!(" owner {}", name_to_text(&o.owner)) } else { String::new() },
                    if o.place == OptPlace::Answer { " in answer" } else { "" },
                    if o.twice { " twice" } else { "" },
                    options.join(", ")
                );
            }
        }
        if let Some(mode) = self.tsig {
            let _ = write!(out, "; TSIG {mode}");
        }
        if self.cut > 0 {
            let _ = write!(out, "; last {} octets cut", self.cut);
        }
        if !self.garbage.is_empty() {
            let _ = write!(out, "; {} octets of trailing garbage", self.garbage.len());
        }
        out
    }

    /// A `dig` command line that sends this query, when dig can.
    pub fn dig_command(&self, server: std::net::SocketAddr) -> Option<String> {
        let h = &self.header;
        let plain = !h.qr && h.opcode == 0 && !h.tc && !h.ra && h.rcode == 0;
        let [q] = self.questions.as_slice() else { return None };
        if !plain || self.qdcount.is_some() || self.answer_record || self.authority_record || self.cut > 0 || !self.garbage.is_empty() {
            return None;
        }
        let name = q.name_text();
        if name.contains('\\') || name.contains('\'') {
            return None;
        }
        let mut cmd = format!(
            "dig @{} -p {} +norec +tries=1 -c {} -t {} '{name}'",
            server.ip(),
            server.port(),
            class_name(q.qclass),
            type_name(q.qtype)
        );
        for (on, flag) in [(h.aa, "+aaflag"), (h.z, "+zflag"), (h.ad, "+adflag"), (h.cd, "+cdflag")] {
            if on {
                let _ = write!(cmd, " {flag}");
            }
        }
        if h.rd {
            cmd = cmd.replace("+norec", "+rec");
        }
        match &self.opt {
            None => cmd.push_str(" +noedns"),
            Some(o) => {
                if o.owner != [0] || o.place != OptPlace::Additional || o.twice || o.ext_rcode != 0 {
                    return None;
                }
                let _ = write!(cmd, " +edns={} +bufsize={} +ednsflags={:#x}", o.version, o.payload, o.z);
                if o.dnssec_ok {
                    cmd.push_str(" +dnssec");
                }
                cmd.push_str(" +nocookie");
                for option in &o.options {
                    match option {
                        EdnsOption::Raw(code, data) => {
                            let _ =
                                write!(cmd, " +ednsopt={code}{}", if data.is_empty() { String::new() } else { format!(":{}", hex(data)) });
                        }
                        _ => return None,
                    }
                }
            }
        }
        if let Some(mode) = self.tsig {
            cmd.push_str(&tsig::dig_flag(mode)?);
        }
        Some(cmd)
    }

    /// Every query one step simpler than this one, simplest first: the
    /// shrinker keeps the first that still shows the difference.
    pub fn simpler(&self) -> Vec<FuzzQuery> {
        let mut out = Vec::new();
        let mut push = |change: &dyn Fn(&mut FuzzQuery)| {
            let mut q = self.clone();
            change(&mut q);
            if q != *self {
                out.push(q);
            }
        };
        push(&|q| q.garbage.clear());
        push(&|q| q.cut = 0);
        push(&|q| q.tsig = None);
        push(&|q| q.qdcount = None);
        push(&|q| q.answer_record = false);
        push(&|q| q.authority_record = false);
        push(&|q| q.questions.truncate(1));
        // Toward the plain query, which has an OPT record: a class says
        // `edns=none` only when its difference needs the OPT left out.
        push(&|q| q.opt = Some(Opt::default()));
        if let Some(opt) = &self.opt {
            for i in 0..opt.options.len() {
                push(&|q| {
                    q.opt.as_mut().unwrap().options.remove(i);
                });
            }
            let defaults = Opt::default();
            push(&|q| q.opt.as_mut().unwrap().twice = false);
            push(&|q| q.opt.as_mut().unwrap().place = OptPlace::Additional);
            push(&|q| q.opt.as_mut().unwrap().owner = defaults.owner.clone());
            push(&|q| q.opt.as_mut().unwrap().version = 0);
            push(&|q| q.opt.as_mut().unwrap().ext_rcode = 0);
            push(&|q| q.opt.as_mut().unwrap().z = 0);
            push(&|q| q.opt.as_mut().unwrap().dnssec_ok = false);
            push(&|q| q.opt.as_mut().unwrap().payload = defaults.payload);
        }
        push(&|q| q.header = Header::default());
        push(&|q| q.header.qr = false);
        push(&|q| q.header.opcode = 0);
        push(&|q| q.header.rcode = 0);
        push(&|q| q.header.tc = false);
        push(&|q| q.header.aa = false);
        push(&|q| q.header.ra = false);
        push(&|q| q.header.z = false);
        push(&|q| q.header.ad = false);
        push(&|q| q.header.cd = false);
        push(&|q| q.header.rd = false);
        if let Some(first) = self.questions.first() {
            if first.qclass != 1 {
                push(&|q| q.questions[0].qclass = 1);
            }
            if first.qtype != 1 {
                push(&|q| q.questions[0].qtype = 1);
            }
            if first.labels.iter().any(|l| l.iter().any(u8::is_ascii_uppercase)) {
                push(&|q| q.questions[0].labels.iter_mut().for_each(|l| l.make_ascii_lowercase()));
            }
            if !first.labels.is_empty() {
                push(&|q| {
                    q.questions[0].labels.remove(0);
                });
            }
        }
        out
    }

    /// Coarse words about the query, for a difference's signature: what
    /// kind of type and class it asks, which header fields are odd, what
    /// its EDNS and TSIG are, and its shape.
    pub fn features(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.questions.first() {
            Some(q) => {
                out.push(format!("qtype={}", type_kind(q.qtype)));
                match q.qclass {
                    1 => {}
                    254 | 255 => out.push(format!("qclass={}", class_name(q.qclass))),
                    _ => out.push("qclass=not-IN".into()),
                }
            }
            None => out.push("question=none".into()),
        }
        let h = &self.header;
        match h.opcode {
            0 => {}
            1 => out.push("opcode=IQUERY".into()),
            2 => out.push("opcode=STATUS".into()),
            4 => out.push("opcode=NOTIFY".into()),
            5 => out.push("opcode=UPDATE".into()),
            6 => out.push("opcode=DSO".into()),
            _ => out.push("opcode=unassigned".into()),
        }
        for (on, name) in [(h.qr, "qr"), (h.aa, "aa"), (h.tc, "tc"), (h.ra, "ra"), (h.z, "z"), (h.ad, "ad"), (h.cd, "cd")] {
            if on {
                out.push(format!("flag={name}"));
            }
        }
        if h.rcode != 0 {
            out.push("rcode-set".into());
        }
        if self.qdcount.is_some() || self.questions.len() != 1 {
            out.push(format!("qdcount={}", self.qdcount.unwrap_or(self.questions.len() as u16)));
        }
        if self.answer_record || self.authority_record {
            out.push("records-in-query".into());
        }
        match &self.opt {
            None => out.push("edns=none".into()),
            Some(o) => {
                for (odd, word) in [
                    (o.version != 0, "edns=version"),
                    (o.owner != [0], "edns=owner"),
                    (o.place != OptPlace::Additional, "edns=misplaced"),
                    (o.twice, "edns=twice"),
                    (o.ext_rcode != 0, "edns=ext-rcode"),
                    (o.z != 0, "edns=z"),
                    (o.dnssec_ok, "edns=do"),
                    (o.payload < 512, "edns=payload<512"),
                ] {
                    if odd {
                        out.push(word.into());
                    }
                }
                for option in &o.options {
                    out.push(format!("edns-option={}", option_kind(option)));
                }
                let codes: Vec<u16> = o.options.iter().map(EdnsOption::code).collect();
                for (i, code) in codes.iter().enumerate() {
                    if codes[..i].contains(code) {
                        out.push(format!("edns-option-twice={}", option_name(*code)));
                    }
                }
            }
        }
        if let Some(mode) = self.tsig {
            out.push(format!("tsig={mode}"));
        }
        if self.cut > 0 {
            out.push("cut-short".into());
        }
        if !self.garbage.is_empty() {
            out.push("trailing-garbage".into());
        }
        out.sort();
        out.dedup();
        out
    }
}

/// The kind of a type, coarse: data, meta (RFC 6895 section 3.1), NXNAME,
/// obsolete, unknown.
pub fn type_kind(qtype: u16) -> String {
    match qtype {
        128 => "NXNAME".into(),
        41 | 249 | 250 | 251 | 252 | 253 | 254 | 255 => format!("meta({})", type_name(qtype)),
        // DS, RRSIG, NSEC, DNSKEY, NSEC3, NSEC3PARAM, and the child's
        // CDS and CDNSKEY (RFC 7344), which a signer may publish itself.
        43 | 46 | 47 | 48 | 50 | 51 | 59 | 60 => format!("dnssec({})", type_name(qtype)),
        0 | 65535 => "reserved".into(),
        _ if type_name(qtype).starts_with("TYPE") => "unknown".into(),
        _ => "data".into(),
    }
}

/// An option in a word: its name, and whether it is well-formed for it.
fn option_kind(option: &EdnsOption) -> String {
    match option {
        EdnsOption::GoodCookie => "COOKIE-good".into(),
        EdnsOption::LongerThanItIs(code, _, _) => format!("{}-overlong", option_name(*code)),
        EdnsOption::Raw(code, data) => {
            let shape = match *code {
                OPT_NSID | OPT_KEEPALIVE if !data.is_empty() => "-data",
                OPT_COOKIE => match data.len() {
                    8 => "-client",
                    16..=40 => "-bad-server",
                    _ => "-malformed",
                },
                OPT_ECS => ecs_shape(data),
                _ => "",
            };
            format!("{}{shape}", option_name(*code))
        }
    }
}

/// Whether an ECS option's data is well-formed (RFC 7871 section 6).
fn ecs_shape(data: &[u8]) -> &'static str {
    if data.len() < 4 {
        return "-malformed";
    }
    let family = u16::from_be_bytes([data[0], data[1]]);
    let (source, scope) = (data[2] as usize, data[3]);
    let max = match family {
        1 => 32,
        2 => 128,
        _ => return "-bad-family",
    };
    if source > max || data.len() - 4 != source.div_ceil(8) {
        "-malformed"
    } else if scope != 0 {
        "-scope"
    } else {
        ""
    }
}

pub fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}
