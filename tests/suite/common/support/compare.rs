//! Field-by-field comparison of two servers' replies to the same case, plus
//! the checks every reply must pass on its own (RFC rules that need no
//! reference).
//!
//! Every place where a difference is tolerated is an explicit, narrow rule
//! (the `rule_*` functions) with the RFC text that allows it. Nothing is
//! tolerated merely because the server under test behaves differently: the
//! rules are symmetric and were each found necessary between the two
//! references, Knot DNS and NSD.

use std::collections::BTreeSet;
use std::fmt;

use super::cases::{Case, Expect};
use super::norm::{
    Edns, Normalized, OPT_ECS, OPT_NSID, Rrset, RrsetKey, Section, SectionName, describe_edns, opt_record, raw_option, rcode_name,
    type_name,
};
use super::servers::{NSID, PAYLOAD};
use super::wire::{Reply, Transport, name_to_text};

const OPT_EDE: u16 = 15;
const T_NS: u16 = 2;
const T_CNAME: u16 = 5;
const T_DNAME: u16 = 39;
const T_A: u16 = 1;
const T_AAAA: u16 = 28;
const T_SVCB: u16 = 64;
const T_HTTPS: u16 = 65;
const T_HINFO: u16 = 13;
const FORMERR: u16 = 1;
const NOTIMP: u16 = 4;
const BADVERS: u16 = 16;

/// One server's reply to one case over one transport.
#[derive(Clone, Debug)]
pub enum Observed {
    Message(Box<Normalized>),
    Silence,
    Error(String),
}

impl Observed {
    pub fn from_reply(reply: Reply) -> Observed {
        match reply {
            Reply::Message(m) => Observed::Message(Box::new(super::norm::normalize(&m))),
            Reply::Silence => Observed::Silence,
            Reply::Error(e) => Observed::Error(e),
        }
    }

    pub fn message(&self) -> Option<&Normalized> {
        match self {
            Observed::Message(m) => Some(m),
            _ => None,
        }
    }

    fn kind(&self) -> String {
        match self {
            Observed::Message(m) => format!("reply {}", m.summary()),
            Observed::Silence => "no reply".into(),
            Observed::Error(e) => format!("error: {e}"),
        }
    }
}

/// One difference found.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub case: String,
    pub transport: Transport,
    pub field: String,
    /// The servers whose replies the mismatch is about (one for a check of a
    /// single reply, two for a comparison).
    pub servers: Vec<String>,
    /// The server under test's value, prefixed with its name.
    pub left: String,
    /// The reference's value (or the RFC rule), prefixed with its name.
    pub right: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}\n    field: {}\n    {}\n    {}", self.transport, self.case, self.field, self.left, self.right)
    }
}

/// What the comparison knows besides the two replies.
pub struct Context<'a> {
    /// Origins of the served zones, lower case, with the trailing dot.
    pub zones: &'a [&'a str],
}

impl Context<'_> {
    /// The served zone a name belongs to by its name (longest origin that is
    /// a suffix on a label boundary).
    fn zone_of(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.zones.iter().filter(|z| name == **z || name.ends_with(&format!(".{z}")) || **z == ".").max_by_key(|z| z.len()).copied()
    }
}

/// Collects mismatches for one (case, transport) pair.
struct Diff<'a> {
    case: &'a Case,
    transport: Transport,
    left_name: &'a str,
    right_name: &'a str,
    out: &'a mut Vec<Mismatch>,
}

impl Diff<'_> {
    fn push(&mut self, field: impl Into<String>, left: impl fmt::Display, right: impl fmt::Display) {
        self.out.push(Mismatch {
            case: self.case.label.clone(),
            transport: self.transport,
            field: field.into(),
            servers: vec![self.left_name.to_string(), self.right_name.to_string()],
            left: format!("{:>7}: {left}", self.left_name),
            right: format!("{:>7}: {right}", self.right_name),
        });
    }

    fn eq<T: PartialEq + fmt::Display>(&mut self, field: &str, left: T, right: T) {
        if left != right {
            self.push(field, left, right);
        }
    }
}

fn opt_str<T: fmt::Display>(v: &Option<T>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "none".into(),
    }
}

/// Checks one reply against the RFC rules that need no reference. The
/// problems are reported with the rule as the "reference" value.
pub fn check_alone(case: &Case, transport: Transport, server: &str, obs: &Observed, out: &mut Vec<Mismatch>) {
    let mut push = |field: &str, got: String, rule: &str| {
        out.push(Mismatch {
            case: case.label.clone(),
            transport,
            field: field.to_string(),
            servers: vec![server.to_string()],
            left: format!("{server:>7}: {got}"),
            right: format!("{:>7}: {rule}", "rule"),
        });
    };
    let n = match (obs, &case.expect) {
        (Observed::Silence, Expect::Silence) => return,
        (Observed::Message(m), Expect::Silence) => {
            push("reply", m.summary(), "no reply to a response (RFC 1035 section 4.1.1, QR)");
            return;
        }
        (Observed::Message(m), Expect::Reply) => m,
        (other, Expect::Reply) => {
            let want = match case.expect_rcode.as_slice() {
                [] => "a reply".to_string(),
                codes => format!("a reply, RCODE {}", codes.iter().map(|c| rcode_name(*c)).collect::<Vec<_>>().join(" or ")),
            };
            push("reply", other.kind(), &want);
            return;
        }
        (Observed::Error(e), Expect::Silence) => {
            push("reply", format!("error: {e}"), "no reply");
            return;
        }
    };
    if let Some(e) = &n.parse_error {
        push("parse", e.clone(), "a well-formed message");
    }
    if !case.expect_rcode.is_empty() && !case.expect_rcode.contains(&n.rcode) {
        let want: Vec<String> = case.expect_rcode.iter().map(|c| rcode_name(*c)).collect();
        push("rcode", rcode_name(n.rcode), &want.join(" or "));
    }
    let query_id = u16::from_be_bytes([case.packet[0], case.packet[1]]);
    if n.id != query_id {
        push("id", format!("{:#06x}", n.id), &format!("{query_id:#06x}, copied from the query (RFC 1035 section 4.1.1)"));
    }
    if !n.qr {
        push("flags.qr", "0".into(), "1 in a response");
    }
    if case.packet.len() >= 4 {
        let q_opcode = (case.packet[2] >> 3) & 0x0f;
        let q_rd = case.packet[2] & 1 != 0;
        if n.opcode != q_opcode {
            push("opcode", n.opcode.to_string(), &format!("{q_opcode}, copied from the query (RFC 1035 section 4.1.1)"));
        }
        if case.well_formed && n.rd != q_rd {
            push("flags.rd", (n.rd as u8).to_string(), &format!("{}, copied (RFC 1035 section 4.1.1)", q_rd as u8));
        }
    }
    if transport == Transport::Udp && n.tc && !case.big {
        push("flags.tc", "1".into(), "0: this reply fits (only cases marked +big may be truncated)");
    }
    if n.ra {
        push("flags.ra", "1".into(), "0: recursion is not offered (RFC 1035 section 4.1.1)");
    }
    if n.z {
        push("flags.z", "1".into(), "0 (RFC 1035 section 4.1.1: reserved, zero in all responses)");
    }
    if case.question.as_ref().is_some_and(|q| q.qclass == 255) && n.aa {
        push("flags.aa", "1".into(), "0: responses to QCLASS=* can never be authoritative (RFC 1034 section 3.7.1)");
    }
    if let Some(q) = &case.question {
        if !n.question.is_empty() && (n.question.len() != 1 || n.question[0] != *q) {
            let got: Vec<String> = n.question.iter().map(|q| q.to_string()).collect();
            push("question", got.join(", "), &format!("{q}, exactly as asked (RFC 1035 section 7.3, 0x20)"));
        }
        if case.well_formed && n.question.is_empty() && n.rcode != FORMERR {
            push("question", "none".into(), &format!("{q} echoed"));
        }
    }
    if n.opt_count > 1 {
        push("edns.count", n.opt_count.to_string(), "at most one OPT (RFC 6891 section 6.1.1)");
    }
    if n.misplaced_opt > 0 {
        push("edns.place", format!("{} OPT outside additional", n.misplaced_opt), "OPT only in the additional section");
    }
    if let Some(e) = &n.edns {
        if e.version != 0 {
            push("edns.version", e.version.to_string(), "0 (RFC 6891 section 6.1.3: the responder's highest version)");
        }
        if e.payload != PAYLOAD {
            push("edns.payload", e.payload.to_string(), &format!("{PAYLOAD}, as configured"));
        }
        let nsid = e.option(OPT_NSID);
        // No NSID demanded on BADVERS: see rule_badvers_options.
        if case.asks_nsid && !case.query_opt_damaged && nsid != Some(NSID.as_bytes()) && n.rcode != BADVERS {
            let got = nsid.map(|v| format!("{:?}", String::from_utf8_lossy(v))).unwrap_or_else(|| "absent".into());
            push("edns.nsid", got, &format!("{NSID:?} (RFC 5001 section 2.2)"));
        }
        if !case.asks_nsid && nsid.is_some() {
            push("edns.nsid", "present".into(), "only when asked for (RFC 5001 section 2.1)");
        }
        if e.z != 0 {
            push("edns.z", format!("{:#x}", e.z), "0 (RFC 6891 section 6.1.4: Z is set to zero by senders)");
        }
    }
    if n.edns.is_some() && !case.query_has_opt && !case.query_opt_damaged {
        push("edns", describe_edns(&n.edns), "no OPT in reply to a query without one (RFC 6891 section 7)");
    }
    if n.edns.is_none() && case.query_has_opt && !case.query_opt_damaged && n.rcode != FORMERR {
        push("edns", "no OPT".into(), "an OPT in reply to a query with one (RFC 6891 section 7)");
    }
    for (name, section) in [("answer", &n.answer), ("authority", &n.authority), ("additional", &n.additional)] {
        for (key, set) in section {
            if set.ttls.len() > 1 {
                push(&format!("{name} {key}"), set.describe(), "one TTL per RRset (RFC 2181 section 5.2)");
            }
            if set.records != set.rdata.len() {
                push(&format!("{name} {key}"), set.describe(), "no duplicate records (RFC 2181 section 5)");
            }
        }
    }
    // A damaged OPT record may or may not have been read as offering more.
    let limit = if case.query_has_opt { query_payload(case).min(PAYLOAD as usize) } else { 512 };
    if transport == Transport::Udp && !case.query_opt_damaged && n.size > limit {
        push(
            "size",
            format!("{} octets", n.size),
            &format!("at most {limit} octets over UDP (RFC 1035 section 2.3.4, RFC 6891 section 6.2.3)"),
        );
    }
}

/// The RRsets at the ANY query's name, taken from the reference's answers to
/// one query per type.
pub type AnyNode = Section;

/// Compares the server under test (`left`) with a reference (`right`).
#[allow(clippy::too_many_arguments)]
pub fn compare(
    ctx: &Context<'_>,
    case: &Case,
    transport: Transport,
    left_name: &str,
    left: &Observed,
    left_tcp: Option<&Observed>,
    right_name: &str,
    right: &Observed,
    right_tcp: Option<&Observed>,
    any_node: Option<&AnyNode>,
    out: &mut Vec<Mismatch>,
) {
    let mut d = Diff { case, transport, left_name, right_name, out };
    let (l, r) = match (left, right) {
        (Observed::Message(l), Observed::Message(r)) => (l, r),
        (Observed::Silence, Observed::Silence) => return,
        _ => {
            d.push("reply", left.kind(), right.kind());
            return;
        }
    };

    // ---- header --------------------------------------------------------
    d.eq("opcode", l.opcode, r.opcode);
    if l.rcode != r.rcode {
        if rule_alternative_outcomes(case, l, r) {
            return;
        }
        d.push("rcode", rcode_name(l.rcode), rcode_name(r.rcode));
    }
    for (name, lv, rv) in [
        ("flags.qr", l.qr, r.qr),
        ("flags.aa", l.aa, r.aa),
        ("flags.tc", l.tc, r.tc),
        ("flags.rd", l.rd, r.rd),
        ("flags.ra", l.ra, r.ra),
        ("flags.z", l.z, r.z),
        ("flags.ad", l.ad, r.ad),
        ("flags.cd", l.cd, r.cd),
    ] {
        d.eq(name, lv as u8, rv as u8);
    }

    // ---- question: exact octets of the name, type, class ----------------
    if l.question != r.question && !rule_error_without_question(l, r) {
        let show = |n: &Normalized| {
            if n.question.is_empty() { "none".to_string() } else { n.question.iter().map(|q| q.to_string()).collect::<Vec<_>>().join(", ") }
        };
        d.push("question", show(l), show(r));
    }

    // ---- EDNS -----------------------------------------------------------
    compare_edns(&mut d, case, l, r);

    // ---- sections -------------------------------------------------------
    if transport == Transport::Udp && l.tc && r.tc {
        // Both truncated. RFC 2181 section 9: a truncated response carries
        // whatever whole RRsets fit and its contents are not to be relied
        // on. What must hold: no partial RRset. Each RRset present must
        // equal the one the same server sends over TCP.
        no_partial_rrsets(&mut d, left_name, l, left_tcp);
        no_partial_rrsets(&mut d, right_name, r, right_tcp);
        return;
    }
    // (If only one side set TC, flags.tc is reported and the sections are
    // shown as they are.)

    let (mut la, mut ra) = (l.answer.clone(), r.answer.clone());
    let (mut lns, mut rns) = (l.authority.clone(), r.authority.clone());
    let (mut lad, mut rad) = (l.additional.clone(), r.additional.clone());

    if rule_cname_leaves_zone(ctx, case, l, r, &mut la, &mut ra) {
        // Only the part of the chain inside the query's zone is compared.
        compare_section(&mut d, SectionName::Answer, &la, &ra);
        return;
    }

    if let (Some(node), true) = (any_node, l.rcode == 0 && r.rcode == 0) {
        // RFC 8482 sections 4.1-4.2: the answer to ANY may be any non-empty
        // subset of the RRsets at the name, or one synthesized HINFO. Each
        // side is checked against the name's RRsets, not against the other.
        any_subset(&mut d, left_name, l, node);
        any_subset(&mut d, right_name, r, node);
        // What goes with the chosen subset in the other sections follows from it.
        lad.clear();
        rad.clear();
        lns.retain(|k, _| k.rtype != T_NS);
        rns.retain(|k, _| k.rtype != T_NS);
    } else {
        compare_section(&mut d, SectionName::Answer, &la, &ra);
    }

    rule_optional_apex_ns(ctx, l, r, &mut lns, &mut rns, &mut lad, &mut rad);
    compare_section(&mut d, SectionName::Authority, &lns, &rns);

    rule_svcb_target_additional(l, r, &mut lad, &mut rad);
    if transport == Transport::Udp && !l.tc && !r.tc {
        rule_dropped_additional(&mut d, left_name, l, left_tcp, &mut lad, &mut rad);
        rule_dropped_additional(&mut d, right_name, r, right_tcp, &mut rad, &mut lad);
    }
    compare_section(&mut d, SectionName::Additional, &lad, &rad);
}

/// The INFO-CODEs of a reply's Extended DNS Error options, in order.
fn ede_codes(edns: &Edns) -> Vec<u16> {
    let codes = edns.options.iter().filter(|(code, _)| *code == OPT_EDE);
    codes.map(|(_, data)| data.get(..2).map_or(u16::MAX, |code| u16::from_be_bytes([code[0], code[1]]))).collect()
}

fn compare_edns(d: &mut Diff<'_>, case: &Case, l: &Normalized, r: &Normalized) {
    match (&l.edns, &r.edns) {
        (None, None) => {}
        (Some(le), Some(re)) => {
            d.eq("edns.version", le.version, re.version);
            d.eq("edns.do", le.dnssec_ok as u8, re.dnssec_ok as u8);
            d.eq("edns.z", format!("{:#x}", le.z), format!("{:#x}", re.z));
            d.eq("edns.payload", le.payload, re.payload);
            d.eq("edns.owner_is_root", le.owner_is_root, re.owner_is_root);
            let nsid = |e: &Edns| opt_str(&e.option(OPT_NSID).map(|v| format!("{:?}", String::from_utf8_lossy(v))));
            if !(l.rcode == BADVERS && r.rcode == BADVERS) {
                d.eq("edns.nsid", nsid(le), nsid(re));
            }
            // Extended DNS Errors: the same INFO-CODEs. The EXTRA-TEXT is
            // for humans, in each server's own words (RFC 8914 section 2).
            d.eq("edns.ede", format!("{:?}", ede_codes(le)), format!("{:?}", ede_codes(re)));
            // Other options: the same codes with the same data. ECS has a
            // rule of its own.
            let others = |e: &Edns| -> BTreeSet<(u16, Vec<u8>)> {
                e.options.iter().filter(|(c, _)| ![OPT_NSID, OPT_ECS, OPT_EDE].contains(c)).cloned().collect()
            };
            if others(le) != others(re) {
                d.push("edns.options", describe_edns(&l.edns), describe_edns(&r.edns));
            }
            rule_ecs(d, case, le, re);
        }
        _ => d.push("edns", describe_edns(&l.edns), describe_edns(&r.edns)),
    }
}

// ---------------------------------------------------------------------------
// The rules: each tolerates one kind of difference the RFCs allow.
// ---------------------------------------------------------------------------

/// RULE: the case lists several acceptable RCODEs (see `Case::expect_rcode`
/// and the RFC notes where each such case is built) and the two servers
/// chose different ones. Each reply was already checked to be one of them
/// by `check_alone`; a different outcome makes the other fields
/// incomparable. Applies only to cases that list more than one RCODE.
fn rule_alternative_outcomes(case: &Case, l: &Normalized, r: &Normalized) -> bool {
    case.expect_rcode.len() > 1 && case.expect_rcode.contains(&l.rcode) && case.expect_rcode.contains(&r.rcode)
}

/// RULE: a FORMERR or NOTIMP reply may leave the question section out.
/// RFC 1035 section 4.1.1: FORMERR means the server could not interpret the
/// query, NOTIMP that it does not implement the kind of query, and for an
/// opcode it does not implement it cannot know the sections' layout, so
/// neither can be required to echo a question. When both echo one, it is
/// compared.
fn rule_error_without_question(l: &Normalized, r: &Normalized) -> bool {
    let may_omit = |n: &Normalized| n.question.is_empty() && (n.rcode == FORMERR || n.rcode == NOTIMP);
    may_omit(l) || may_omit(r)
}

/// RULE: RFC 7871 section 7.2.1: a server that does not implement Client
/// Subnet answers without the option, one that does echoes FAMILY, SOURCE
/// PREFIX-LENGTH and ADDRESS with its own SCOPE PREFIX-LENGTH. Either is
/// correct: each side's option, when present, is checked against the query.
fn rule_ecs(d: &mut Diff<'_>, case: &Case, le: &Edns, re: &Edns) {
    // A damaged OPT record's options cannot be read back here as the
    // server read them: nothing to check an echo against.
    if case.query_opt_damaged {
        return;
    }
    let q_ecs = query_option(case, OPT_ECS);
    let check = |e: &Edns| -> Option<String> {
        let resp = e.option(OPT_ECS)?;
        let ok = match &q_ecs {
            Some(q) => resp.len() == q.len() && q.len() >= 4 && resp[..3] == q[..3] && resp[4..] == q[4..],
            None => false,
        };
        (!ok).then(|| format!("ECS {resp:02x?}"))
    };
    let rule = format!("no ECS, or the query's {q_ecs:02x?} echoed with a scope (RFC 7871 section 7.2.1)");
    if let Some(bad) = check(le) {
        d.push("edns.ecs", bad, &rule);
    }
    if let Some(bad) = check(re) {
        d.push("edns.ecs", &rule, bad);
    }
}

/// RULE: the zone's own NS RRset in the authority section of a positive
/// answer, and the addresses of those name servers in the additional
/// section, are optional. RFC 1034 section 4.3.2 step 3a copies only the
/// answer for authoritative data (the example in section 6.2.1 has an empty
/// authority section); step 6 adds "other RRs which may be useful" at the
/// server's choice. NSD adds them, Knot does not. Applied only when one side
/// has exactly the zone's apex NS RRset in authority and the other has an
/// empty authority section, both replies being NOERROR, AA, with an answer.
fn rule_optional_apex_ns(
    ctx: &Context<'_>,
    l: &Normalized,
    r: &Normalized,
    lns: &mut Section,
    rns: &mut Section,
    lad: &mut Section,
    rad: &mut Section,
) {
    let positive = |n: &Normalized| n.rcode == 0 && n.aa && !n.answer.is_empty();
    if !positive(l) || !positive(r) {
        return;
    }
    let strip = |n: &Normalized, ns: &mut Section, ad: &mut Section, other_ns: &Section, other_ad: &Section| {
        if !other_ns.is_empty() || ns.len() != 1 {
            return;
        }
        let (key, set) = ns.iter().next().unwrap();
        let is_apex = ctx.zone_of(&key.owner) == Some(key.owner.as_str());
        let answer_in_zone = n.answer.keys().any(|k| ctx.zone_of(&k.owner) == Some(key.owner.as_str()));
        if key.rtype != T_NS || !is_apex || !answer_in_zone {
            return;
        }
        let targets: Vec<String> = set.rdata.keys().map(|rd| name_to_text(rd)).collect();
        ns.clear();
        ad.retain(|k, _| !((k.rtype == T_A || k.rtype == T_AAAA) && targets.contains(&k.owner) && !other_ad.contains_key(k)));
    };
    let (lns0, rns0, lad0, rad0) = (lns.clone(), rns.clone(), lad.clone(), rad.clone());
    strip(l, lns, lad, &rns0, &rad0);
    strip(r, rns, rad, &lns0, &lad0);
}

/// RULE: a CNAME chain that leaves the query's zone for another zone the
/// same server also serves. RFC 1034 section 4.3.2 step 3a says to restart
/// the lookup with the new name ("go back to step 1", which searches all
/// available zones), and NSD does; Knot stops after the CNAME that leaves the
/// zone (and answers the target as its own zone sees it), and resolvers
/// re-query the target anyway (RFC 2181 section 5.4.1 ranks such data low).
/// Applied only when a CNAME in the chain points into a *different served*
/// zone: the chain up to and including that CNAME is compared, the rest of
/// the answer and the other sections are not.
fn rule_cname_leaves_zone(ctx: &Context<'_>, case: &Case, l: &Normalized, r: &Normalized, la: &mut Section, ra: &mut Section) -> bool {
    let Some(q) = &case.question else { return false };
    let qname = name_to_text(&q.name).to_ascii_lowercase();
    let Some(home) = ctx.zone_of(&qname) else { return false };
    // Walks the chain in one answer; returns the names inside the home zone.
    let chain = |n: &Normalized| -> (Vec<String>, bool) {
        let mut names = vec![qname.clone()];
        let mut cur = qname.clone();
        for _ in 0..16 {
            let key = RrsetKey { owner: cur.clone(), rtype: T_CNAME, class: q.qclass };
            let Some(set) = n.answer.get(&key) else { break };
            let Some(target) = set.rdata.keys().next().map(|rd| name_to_text(rd)) else { break };
            match ctx.zone_of(&target) {
                Some(z) if z != home => return (names, true),
                _ => {}
            }
            if names.contains(&target) {
                break;
            }
            names.push(target.clone());
            cur = target;
        }
        (names, false)
    };
    let (lnames, lleaves) = chain(l);
    let (rnames, rleaves) = chain(r);
    if !lleaves && !rleaves {
        return false;
    }
    // DNAME records of the home zone stay compared too.
    let keep = |names: &Vec<String>, k: &RrsetKey| names.contains(&k.owner) || (ctx.zone_of(&k.owner) == Some(home) && k.rtype == T_DNAME);
    la.retain(|k, _| keep(&lnames, k));
    ra.retain(|k, _| keep(&rnames, k));
    true
}

/// RULE: RFC 9460 section 4.2: authoritative servers SHOULD (not MUST) add
/// A, AAAA and SVCB records for in-zone TargetNames of SVCB/HTTPS answers to
/// the additional section. Knot does, NSD does not. Such RRsets present on
/// one side only are not compared; present on both, they are.
fn rule_svcb_target_additional(l: &Normalized, r: &Normalized, lad: &mut Section, rad: &mut Section) {
    let targets = |n: &Normalized| -> BTreeSet<String> {
        n.answer
            .iter()
            .filter(|(k, _)| k.rtype == T_SVCB || k.rtype == T_HTTPS)
            .flat_map(|(_, s)| s.rdata.keys())
            .filter(|rd| rd.len() > 2)
            .map(|rd| name_to_text(&rd[2..]))
            .collect()
    };
    let mut all = targets(l);
    all.extend(targets(r));
    if all.is_empty() {
        return;
    }
    let optional = |k: &RrsetKey| all.contains(&k.owner) && [T_A, T_AAAA, T_SVCB, T_HTTPS].contains(&k.rtype);
    let (l0, r0) = (lad.clone(), rad.clone());
    lad.retain(|k, _| !optional(k) || r0.contains_key(k));
    rad.retain(|k, _| !optional(k) || l0.contains_key(k));
}

/// RULE: RFC 2181 section 9: additional data that does not fit is left out
/// without setting TC. If `n` (one side's UDP reply) lacks additional RRsets
/// its TCP reply has, and the smallest one left out would not have fit,
/// check that what it has is whole and drop the RRsets it left out from both
/// sides' comparison (`mine` is its additional section, `theirs` the other
/// side's).
fn rule_dropped_additional(
    d: &mut Diff<'_>,
    server: &str,
    n: &Normalized,
    tcp: Option<&Observed>,
    mine: &mut Section,
    theirs: &mut Section,
) {
    let Some(tcp) = tcp.and_then(Observed::message) else { return };
    if tcp.answer != n.answer || !tcp.additional.keys().any(|k| !n.additional.contains_key(k)) {
        return;
    }
    let limit = if d.case.query_has_opt { query_payload(d.case).min(PAYLOAD as usize) } else { 512 };
    // Smallest RRset left out: each record at least a 2-octet compressed
    // owner, 10 octets of fixed fields and its data.
    let smallest = tcp
        .additional
        .iter()
        .filter(|(k, _)| !n.additional.contains_key(*k))
        .map(|(_, s)| s.rdata.keys().map(|rd| 12 + rd.len()).sum::<usize>())
        .min()
        .unwrap_or(0);
    if n.size + smallest <= limit {
        return; // there was room: not a space problem, compare normally
    }
    for (key, set) in &n.additional {
        if let Some(full) = tcp.additional.get(key)
            && !full.same_as(set)
        {
            d.push(
                format!("additional {key} ({server}, UDP vs TCP)"),
                set.describe(),
                format!("whole RRset {} (RFC 2181 section 9)", full.describe()),
            );
        }
    }
    for key in tcp.additional.keys() {
        if !n.additional.contains_key(key) {
            mine.remove(key);
            theirs.remove(key);
        }
    }
}

// ---------------------------------------------------------------------------

/// The data of option `code` in the case's query OPT, if any.
fn query_option(case: &Case, code: u16) -> Option<Vec<u8>> {
    case.query_has_opt.then(|| raw_option(&case.packet, code)).flatten()
}

/// The UDP payload size the query offered: 512 without EDNS; RFC 6891
/// section 6.2.5: values below 512 are treated as 512.
fn query_payload(case: &Case) -> usize {
    let offered = case.query_has_opt.then(|| opt_record(&case.packet)).flatten();
    offered.map_or(512, |opt| usize::from(opt.class).max(512))
}

fn compare_section(d: &mut Diff<'_>, which: SectionName, l: &Section, r: &Section) {
    let keys: BTreeSet<&RrsetKey> = l.keys().chain(r.keys()).collect();
    for key in keys {
        match (l.get(key), r.get(key)) {
            (Some(a), Some(b)) if a.same_as(b) => {}
            (a, b) => {
                let show = |s: Option<&Rrset>| s.map(|s| s.describe()).unwrap_or_else(|| "absent".into());
                d.push(format!("{which} {key}"), show(a), show(b));
            }
        }
    }
}

fn no_partial_rrsets(d: &mut Diff<'_>, server: &str, udp: &Normalized, tcp: Option<&Observed>) {
    let Some(tcp) = tcp.and_then(Observed::message) else {
        d.push("tc", format!("{server}: truncated, but no TCP reply to check it against"), "a TCP reply");
        return;
    };
    if tcp.tc {
        d.push("tc", format!("{server}: TC set over TCP"), "a complete TCP reply");
    }
    for which in [SectionName::Answer, SectionName::Authority, SectionName::Additional] {
        for (key, set) in udp.section(which) {
            match tcp.section(which).get(key) {
                Some(full) if full.same_as(set) => {}
                Some(full) => d.push(
                    format!("{which} {key} (truncated UDP vs TCP of {server})"),
                    set.describe(),
                    format!("whole RRset {} (RFC 2181 section 9: no partial RRsets)", full.describe()),
                ),
                None => d.push(
                    format!("{which} {key} (truncated UDP vs TCP of {server})"),
                    set.describe(),
                    "absent from the complete TCP reply",
                ),
            }
        }
    }
}

fn any_subset(d: &mut Diff<'_>, server: &str, n: &Normalized, node: &AnyNode) {
    if n.answer.is_empty() {
        d.push(
            format!("answer ({server}, ANY)"),
            "empty answer to ANY",
            "a non-empty subset of the RRsets at the name (RFC 8482 section 4)",
        );
        return;
    }
    // RFC 8482 section 4.2: a single synthesized HINFO "RFC8482" "" is allowed.
    if n.answer.len() == 1 {
        let (key, set) = n.answer.iter().next().unwrap();
        if key.rtype == T_HINFO && set.rdata.values().any(|t| t.contains("RFC8482")) {
            return;
        }
    }
    for (key, set) in &n.answer {
        match node.get(key) {
            Some(real) if real.same_as(set) => {}
            Some(real) => d.push(
                format!("answer {key} ({server}, ANY)"),
                set.describe(),
                format!("{} as answered for type {}", real.describe(), type_name(key.rtype)),
            ),
            None => d.push(format!("answer {key} ({server}, ANY)"), set.describe(), "not an RRset at the name (RFC 8482 section 4.1)"),
        }
    }
}
