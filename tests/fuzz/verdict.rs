//! Judging one query: every server's replies checked alone and compared
//! pair by pair with tests/suite/common/support/compare.rs, and each differing field
//! put on the server that is the odd one out (with three servers: the one
//! that differs from both others, which agree).

use std::collections::{BTreeMap, BTreeSet};

use super::query::{EdnsOption, FuzzQuery, OPT_NSID, OptPlace};
use crate::support::cases::{Case, Expect};
use crate::support::compare::{Context, Mismatch, Observed, check_alone, compare};
use crate::support::norm::{Normalized, Question, rcode_name};
use crate::support::wire::Transport;

/// The server under test.
pub const PHAROS: &str = "pharos";
const T_IXFR: u16 = 251;
const T_AXFR: u16 = 252;
const NOERROR: u16 = 0;
const FORMERR: u16 = 1;
const NOTIMP: u16 = 4;
const REFUSED: u16 = 5;
const NOTAUTH: u16 = 9;
const BADVERS: u16 = 16;
const BADCOOKIE: u16 = 23;

/// One server's replies to one query.
pub struct Side {
    pub name: &'static str,
    /// The packet as sent to this server (cookies make it differ).
    pub packet: Vec<u8>,
    pub udp: Observed,
    pub tcp: Observed,
}

impl Side {
    pub fn get(&self, transport: Transport) -> &Observed {
        match transport {
            Transport::Udp => &self.udp,
            Transport::Tcp => &self.tcp,
        }
    }
}

/// One difference, put on a server or a pair of servers.
#[derive(Clone, Debug)]
pub struct Finding {
    /// `odd=SERVER` (two servers agree, this one does not), `rule:SERVER`
    /// (a reply breaks an RFC rule on its own), or `A≠B` pairs.
    pub attribution: String,
    pub transport: Transport,
    /// The compared field, coarse (`rcode`, `answer`, `edns.options`, ...).
    pub field: String,
    /// The mismatches behind it, for the report.
    pub details: Vec<Mismatch>,
    /// Pharos is at fault, or agrees with no reference: a reply of its own
    /// breaks a rule, or every server compared with it differs from it.
    pub implicates_pharos: bool,
}

impl Finding {
    /// What must still show while a query is made smaller.
    pub fn same_kind(&self, other: &Finding) -> bool {
        self.attribution == other.attribution && self.transport == other.transport && self.field == other.field
    }
}

/// A field name without the RRset or server it is about.
fn coarse(field: &str) -> String {
    field.split([' ', '(']).next().unwrap_or(field).to_string()
}

/// The case the comparison code expects, for this query as sent to one server.
fn case_for(q: &FuzzQuery, packet: &[u8], transport: Transport) -> Case {
    let intact = q.cut == 0 && q.garbage.is_empty();
    let one_question = q.questions.len() == 1 && q.qdcount.is_none() && intact;
    // The OPT record where the header's counts say it is: not cut, not
    // after a question the header does not count, once, owned by the root.
    let clean_opt =
        q.cut == 0 && q.qdcount.is_none() && q.opt.as_ref().is_some_and(|o| o.place == OptPlace::Additional && !o.twice && o.owner == [0]);
    Case {
        label: q.describe(),
        packet: packet.to_vec(),
        transports: vec![transport],
        expect: if q.header.qr { Expect::Silence } else { Expect::Reply },
        question: one_question.then(|| {
            let first = &q.questions[0];
            Question { name: first.wire_name(), qtype: first.qtype, qclass: first.qclass }
        }),
        query_has_opt: clean_opt,
        query_opt_damaged: q.opt.is_some() && !clean_opt,
        // An NSID option with data asks too (RFC 5001 section 2.1 has the
        // requester send it empty, and the servers answer it either way).
        // In a damaged OPT it may be read or not (see `query_opt_damaged`).
        // The options of another EDNS version mean nothing (RFC 6891
        // section 6.1.3).
        asks_nsid: q.opt.as_ref().is_some_and(|o| o.version == 0 && o.options.iter().any(|op| matches!(op, EdnsOption::Raw(OPT_NSID, _)))),
        any_types: None,
        // Payloads as small as 512 make truncation a choice: UDP replies
        // with TC are checked for whole RRsets rather than compared.
        big: true,
        well_formed: q.header.opcode == 0 && !q.header.qr && one_question && q.opt.as_ref().is_none_or(|_| clean_opt),
        expect_rcode: allowed_rcodes(q),
    }
}

/// Why a query may be answered with an error, and which, by the features
/// that say it: `Must` where the RFCs require an error, `May` where a
/// server may treat it as one (the references do).
enum Fault {
    Must(&'static [u16]),
    May(&'static [u16]),
}

/// The fault a query feature stands for, if any.
fn fault_of(feature: &str) -> Option<Fault> {
    use Fault::{May, Must};
    let fault = match feature {
        // RFC 8945 section 5.2: NOTAUTH with the TSIG error.
        "tsig=unknown-key" | "tsig=bad-mac" | "tsig=bad-time" | "tsig=unknown-algorithm" => Must(&[NOTAUTH]),
        // RFC 1996 section 4.7 has a NOTIFY from no primary ignored; a
        // server that takes none says so in its own way.
        "opcode=NOTIFY" => Must(&[NOTIMP, NOTAUTH, REFUSED]),
        f if f.starts_with("opcode=") => Must(&[NOTIMP]),
        "edns=version" => Must(&[BADVERS]),
        "qclass=not-IN" | "qclass=NONE" => Must(&[REFUSED]),
        // RFC 9824 section 3.5; RFC 9619 section 4; RFC 6891 section
        // 6.1.1 (two OPT records).
        "qtype=NXNAME" | "qdcount=0" | "qdcount=2" | "question=none" | "edns=twice" => Must(&[FORMERR]),
        // What a server may find malformed, or not: an option's content
        // matters only to a server that implements the option and reads it
        // (Pharos reads the first ECS option, and only for a name it
        // serves); an option said longer than it is may swallow the next
        // one and still end inside the record; octets cut from the end may
        // be made up by octets added after.
        f if f.starts_with("edns-option=") && (f.ends_with("-malformed") || f.ends_with("-bad-family") || f.ends_with("-overlong")) => {
            May(&[FORMERR])
        }
        "cut-short" | "trailing-garbage" | "records-in-query" | "rcode-set" | "edns=payload<512" | "edns=misplaced" | "edns=owner" => {
            May(&[FORMERR])
        }
        "qtype=reserved" => May(&[NOTIMP]),
        _ => return None,
    };
    Some(fault)
}

/// The RCODEs a reply may have, checked on each reply alone (empty: no
/// such check). A query for NXNAME must get FORMERR (RFC 9824 section
/// 3.5). A query wrong in two ways or more, one of which requires an
/// error, may get the error of any of them: the RFCs give no order among
/// the checks, and each server has its own (Pharos checks TSIG first,
/// Knot the name's zone, NSD the opcode), so two replies with different
/// allowed errors are not compared further (`rule_alternative_outcomes`).
fn allowed_rcodes(q: &FuzzQuery) -> Vec<u16> {
    let features = q.features();
    let faults: Vec<Fault> = features.iter().filter_map(|f| fault_of(f)).collect();
    let required = faults.iter().any(|fault| matches!(fault, Fault::Must(_)));
    let asks_nxname = features.iter().any(|f| f == "qtype=NXNAME");
    if !(asks_nxname || required && faults.len() >= 2) {
        return Vec::new();
    }
    let mut allowed: Vec<u16> = faults.iter().flat_map(|(Fault::Must(codes) | Fault::May(codes))| codes.iter().copied()).collect();
    // RFC 7873 section 5.4: an empty question with a COOKIE option asks a
    // server that makes cookies for a server cookie alone.
    let cookie =
        |f: &String| ["edns-option=COOKIE-client", "edns-option=COOKIE-bad-server", "edns-option=COOKIE-good"].contains(&f.as_str());
    if features.iter().any(|f| f == "question=none") && features.iter().any(cookie) {
        allowed.push(NOERROR);
    }
    allowed.sort_unstable();
    allowed.dedup();
    allowed
}

/// A UDP reply that is empty with TC set where the same server's TCP reply
/// is not: truncated for size, or slipped by rate limiting.
fn truncated(udp: &Normalized, tcp: &Observed) -> bool {
    udp.tc && udp.answer.is_empty() && udp.authority.is_empty() && tcp.message().is_some_and(|t| !t.tc)
}

/// RFC 6891 section 7 and RFC 8945/7873's extended RCODEs: a reply that
/// slips (RRL) or is truncated is the same reply with its sections left
/// out, so it keeps the RCODE (all 12 bits, the upper ones in OPT) and the
/// OPT record that the whole reply (over TCP) has.
fn check_truncated(
    name: &str,
    udp: &Normalized,
    tcp: &Normalized,
    asks_transfer: bool,
    transport: Transport,
    case: &Case,
    out: &mut Vec<Finding>,
) {
    let mut push = |field: &str, got: String, want: String| {
        out.push(Finding {
            attribution: format!("rule:{name}"),
            transport,
            field: field.into(),
            implicates_pharos: name == PHAROS,
            details: vec![Mismatch {
                case: case.label.clone(),
                transport,
                field: field.into(),
                servers: vec![name.to_string()],
                left: format!("{name:>7}: {got}"),
                right: format!("{:>7}: {want}", "rule"),
            }],
        });
    };
    // Over UDP only: cookies are checked (RFC 7873 section 5.2), zone
    // transfers refused.
    let udp_only = udp.rcode == BADCOOKIE || asks_transfer;
    if udp.rcode != tcp.rcode && !udp_only {
        push(
            "truncated.rcode",
            rcode_name(udp.rcode),
            format!("{}, as over TCP: a truncated reply keeps its RCODE", rcode_name(tcp.rcode)),
        );
    }
    if udp.edns.is_some() != tcp.edns.is_some() {
        let has = |n: &Normalized| if n.edns.is_some() { "an OPT" } else { "no OPT" };
        push("truncated.edns", has(udp).into(), format!("{}, as over TCP (RFC 6891 section 7)", has(tcp)));
    }
}

/// For one field: the pairs of servers (indices) that differ on it, and how.
type Differing = (BTreeSet<(usize, usize)>, Vec<Mismatch>);

/// Everything that differs about one query, over both transports.
pub fn judge(q: &FuzzQuery, sides: &[Side], zones: &[&str]) -> Vec<Finding> {
    let ctx = Context { zones };
    let asks_transfer = q.questions.first().is_some_and(|first| first.qtype == T_AXFR || first.qtype == T_IXFR);
    let mut out = Vec::new();
    for transport in [Transport::Udp, Transport::Tcp] {
        let cases: Vec<Case> = sides.iter().map(|s| case_for(q, &s.packet, transport)).collect();
        let mut comparable = vec![true; sides.len()];
        for (i, side) in sides.iter().enumerate() {
            let obs = side.get(transport);
            if transport == Transport::Udp
                && let (Some(udp), Some(tcp)) = (obs.message(), side.tcp.message())
                && truncated(udp, &side.tcp)
            {
                // Compared with its own TCP reply, not with the others
                // (which may have fitted, or not been rate-limited).
                check_truncated(side.name, udp, tcp, asks_transfer, transport, &cases[i], &mut out);
                comparable[i] = false;
                continue;
            }
            let mut alone = Vec::new();
            check_alone(&cases[i], transport, side.name, obs, &mut alone);
            // Silence or FORMERR are both answers to what cannot be parsed:
            // a missing reply counts only for well-formed queries.
            alone.retain(|m| m.field != "reply" || cases[i].well_formed);
            out.extend(group(alone, transport, |_| format!("rule:{}", side.name)));
            // A reply no parser reads is judged alone (the rule above): what
            // could be read of it is not compared with the others.
            comparable[i] &= obs.message().is_none_or(|m| m.parse_error.is_none());
        }
        let mut differing: BTreeMap<String, Differing> = BTreeMap::new();
        for a in 0..sides.len() {
            for b in a + 1..sides.len() {
                if !comparable[a] || !comparable[b] {
                    continue;
                }
                let (l, r) = (&sides[a], &sides[b]);
                let mut found = Vec::new();
                compare(
                    &ctx,
                    &cases[a],
                    transport,
                    l.name,
                    l.get(transport),
                    Some(&l.tcp),
                    r.name,
                    r.get(transport),
                    Some(&r.tcp),
                    None,
                    &mut found,
                );
                for m in found {
                    let entry = differing.entry(coarse(&m.field)).or_default();
                    entry.0.insert((a, b));
                    entry.1.push(m);
                }
            }
        }
        for (field, (pairs, details)) in differing {
            let attribution = odd_one_out(sides, &comparable, &pairs);
            let implicates_pharos = pharos_alone(sides, &comparable, &pairs);
            out.push(Finding { attribution, transport, field, details, implicates_pharos });
        }
    }
    merge_by_attribution(out)
}

/// The fields in the order a difference is named by: the first that
/// differs, since what follows it often differs because of it (a FORMERR
/// has no answer, and no AA).
const FIELD_ORDER: [&str; 22] = [
    "reply",
    "parse",
    "id",
    "opcode",
    "rcode",
    "truncated.rcode",
    "truncated.edns",
    "question",
    "flags.qr",
    "flags.tc",
    "flags.aa",
    "flags.rd",
    "flags.ra",
    "flags.z",
    "flags.ad",
    "flags.cd",
    "edns",
    "edns.version",
    "edns.count",
    "edns.place",
    "answer",
    "authority",
];

fn field_rank(field: &str) -> usize {
    FIELD_ORDER.iter().position(|f| *f == field).unwrap_or(FIELD_ORDER.len())
}

/// One finding per attribution and transport, named by its first field.
fn merge_by_attribution(findings: Vec<Finding>) -> Vec<Finding> {
    let mut merged: BTreeMap<(String, Transport), Finding> = BTreeMap::new();
    for f in findings {
        match merged.entry((f.attribution.clone(), f.transport)) {
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(f);
            }
            std::collections::btree_map::Entry::Occupied(mut slot) => {
                let kept = slot.get_mut();
                if field_rank(&f.field) < field_rank(&kept.field) {
                    kept.field = f.field;
                }
                kept.details.extend(f.details);
                kept.implicates_pharos |= f.implicates_pharos;
            }
        }
    }
    merged.into_values().collect()
}

/// The server every differing pair involves, when the pairs without it
/// agree; else the differing pairs.
fn odd_one_out(sides: &[Side], comparable: &[bool], pairs: &BTreeSet<(usize, usize)>) -> String {
    let compared: Vec<usize> = (0..sides.len()).filter(|&i| comparable[i]).collect();
    if compared.len() >= 3 {
        for &s in &compared {
            let with_s: BTreeSet<(usize, usize)> = compared.iter().filter(|&&o| o != s).map(|&o| (s.min(o), s.max(o))).collect();
            if *pairs == with_s {
                return format!("odd={}", sides[s].name);
            }
        }
    }
    let names: Vec<String> = pairs.iter().map(|&(a, b)| format!("{}≠{}", sides[a].name, sides[b].name)).collect();
    names.join(",")
}

/// Whether Pharos was compared and differs from every server it was
/// compared with.
fn pharos_alone(sides: &[Side], comparable: &[bool], pairs: &BTreeSet<(usize, usize)>) -> bool {
    let Some(p) = sides.iter().position(|s| s.name == PHAROS).filter(|&p| comparable[p]) else { return false };
    (0..sides.len()).filter(|&o| o != p && comparable[o]).all(|o| pairs.contains(&(p.min(o), p.max(o))))
}

/// Single-reply mismatches grouped by coarse field.
fn group(mismatches: Vec<Mismatch>, transport: Transport, attribution: impl Fn(&Mismatch) -> String) -> Vec<Finding> {
    let mut by_field: BTreeMap<(String, String), Vec<Mismatch>> = BTreeMap::new();
    for m in mismatches {
        by_field.entry((attribution(&m), coarse(&m.field))).or_default().push(m);
    }
    by_field
        .into_iter()
        .map(|((attribution, field), details)| {
            let implicates_pharos = attribution == format!("rule:{PHAROS}");
            Finding { attribution, transport, field, details, implicates_pharos }
        })
        .collect()
}
