//! Differential conformance: Pharos's answers compared field by field with
//! reference authoritative servers (Knot DNS, the primary reference, and
//! NSD) serving the same zone files (tests/zones/).
//!
//! Tests:
//! - `references_agree`: knotd against nsd. It proves the harness: where the
//!   two references differ, either the difference is one the RFCs allow and is
//!   encoded as a narrow rule in tests/suite/common/support/compare.rs (`rule_*`), or one
//!   reference breaks an RFC and the case is listed in
//!   `KNOWN_REFERENCE_DEVIATIONS` below with the reason (it is then judged
//!   against the other reference and the single-reply checks). An entry that
//!   no longer shows fails this test, so the list cannot go stale.
//! - `pharos_matches_knot`, `pharos_matches_nsd`: Pharos against each.
//! - `invalid_zones_are_refused`: zone files both references refuse to load
//!   (tests/zones/invalid/) are refused by `pharos check-zone` too.
//!
//! The cases: tests/conformance/queries.txt (one query per line, with
//! modifiers) and the hand-built packets in tests/suite/common/support/cases.rs. The zones:
//! tests/zones/. Besides the comparison, every reply is checked on its own
//! (`check_alone`: ID, QR, opcode and RD copied, RA and Z clear, the question
//! echoed octet for octet, OPT rules, NSID, UDP size limits, one TTL per
//! RRset, the RCODE a case expects).
//!
//! Each test starts its own servers on free loopback ports, sends every case
//! over UDP and TCP, collects every mismatch, prints them all, then fails if
//! there was any. Without knotd/nsd installed the tests print SKIP and pass,
//! unless the environment variable CI is set, where they fail.
//!
//! Environment:
//! - `PHAROS_CONFORMANCE_FILTER=text`: run only cases whose label contains text.
//! - `PHAROS_CONFORMANCE_KEEP=1`: keep the servers' temporary directories.
//! - `PHAROS_CONFORMANCE_DUMP=1`: print every reply of both servers.

use crate::common::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::cases::{Case, Expect, conformance_cases};
use support::compare::{AnyNode, Context, Mismatch, Observed, check_alone, compare};
use support::norm::Section;
use support::servers::{Extras, Server, Zone, find_program, start_knot, start_nsd, start_pharos};
use support::wire::{QuerySpec, Transport, exchange};

/// The zones every server serves: a parent, its child, and an unrelated zone.
const ZONES: &[Zone] = &[
    Zone { origin: "example.com.", file: "example.com.zone" },
    Zone { origin: "sub.example.com.", file: "sub.example.com.zone" },
    Zone { origin: "example.org.", file: "example.org.zone" },
];

const TIMEOUT: Duration = Duration::from_millis(1500);
/// For cases that expect no reply at all.
const SILENCE_TIMEOUT: Duration = Duration::from_millis(300);
/// Cases in flight at once per server (replies are independent of order).
const PARALLEL: usize = 8;

/// Where a reference server is known to deviate from the RFCs (or from what
/// this suite requires), found by `references_agree`. Mismatches involving
/// that server on that case (and transport, and fields) are set aside and
/// the case is judged by the other reference and the single-reply rules.
/// Never list Pharos here.
struct Deviation {
    /// Start of the case label.
    case: &'static str,
    server: &'static str,
    transport: Option<Transport>,
    /// Field name prefixes concerned; empty: all.
    fields: &'static [&'static str],
    why: &'static str,
}

const KNOT_DROPS: &str = "Knot drops a query whose question it cannot parse, or whose QDCOUNT is not 1, \
    without a reply; RFC 1035 section 4.1.1 has FORMERR for a query the server cannot interpret, \
    RFC 9619 section 4 requires FORMERR for QDCOUNT > 1, and this suite requires it whenever the \
    12-octet header is readable";

const KNOWN_REFERENCE_DEVIATIONS: &[Deviation] = &[
    Deviation { case: "QDCOUNT=2", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "QDCOUNT=1, no question", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "question name cut short", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "question without QCLASS", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "question name with a compression loop", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "question name with label type 0x40", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "question name of 321 octets", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation { case: "48 octets of noise", server: "knot", transport: None, fields: &[], why: KNOT_DROPS },
    Deviation {
        case: "QDCOUNT=0, header only",
        server: "nsd",
        transport: Some(Transport::Tcp),
        fields: &[],
        why: "NSD closes a TCP connection whose message is a bare 12-octet header, without a reply \
              (it answers FORMERR to the same over UDP)",
    },
    Deviation {
        case: "QDCOUNT=1, no question",
        server: "nsd",
        transport: Some(Transport::Tcp),
        fields: &[],
        why: "NSD closes a TCP connection whose message is a bare 12-octet header, without a reply",
    },
    Deviation {
        case: "QDCOUNT=0 with an OPT record",
        server: "nsd",
        transport: None,
        fields: &[],
        why: "NSD answers NOERROR to QDCOUNT=0 with an OPT; RFC 7873 section 5.4 allows an empty \
              question only with a COOKIE option, anything else cannot be interpreted (FORMERR, \
              RFC 1035 section 4.1.1), as Knot answers",
    },
    Deviation {
        case: "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij.yx.example.com A",
        server: "knot",
        transport: None,
        fields: &[],
        why: "Knot 3.2 answers NXDOMAIN (with SOA) when the DNAME substitution overflows 255 octets; \
              RFC 6672 section 2.2 requires YXDOMAIN, as NSD answers",
    },
    Deviation {
        case: "www.example.com A +class=ANY",
        server: "knot",
        transport: None,
        fields: &["flags.aa"],
        why: "Knot sets AA on a QCLASS=* answer; RFC 1034 section 3.7.1: responses to QCLASS=* \
              queries can never be authoritative (NSD clears it)",
    },
    Deviation {
        case: "www.example.com A +class=HS",
        server: "nsd",
        transport: None,
        fields: &["question"],
        why: "NSD leaves the question out of its REFUSED reply to a class it does not serve (HS); \
              RFC 1035 section 7.3 has resolvers match replies by their question, as Knot keeps it",
    },
    Deviation {
        case: "www.bigdeleg.example.com A +noedns",
        server: "nsd",
        transport: Some(Transport::Udp),
        fields: &[],
        why: "NSD 4.6 leaves in-domain glue out of a referral that does not fit without setting TC; \
              RFC 9471 section 3 requires TC=1 then, as Knot does",
    },
    Deviation { case: "www.example.com A +class=CH", server: "knot", transport: None, fields: &["edns.ede"], why: KNOT_NO_CLASS_EDE },
    Deviation { case: "www.example.com A +class=HS", server: "knot", transport: None, fields: &["edns.ede"], why: KNOT_NO_CLASS_EDE },
];

/// Deviations of a reference that show only against Pharos: comparing NSD
/// with Knot does not reach these fields, so the references' run does not
/// demand them.
const KNOWN_DEVIATIONS_AGAINST_PHAROS: &[Deviation] = &[Deviation {
    case: "opcode 4 (NOTIFY) example.com SOA",
    server: "nsd",
    transport: None,
    fields: &["flags.aa", "question"],
    why: "NSD refuses a NOTIFY from an address it does not take them from with AA set and the question left \
              out; RFC 1996 section 4.7 has the reply repeat the question, as Knot does (and neither sets AA \
              on a refusal)",
}];

const KNOT_NO_CLASS_EDE: &str = "Knot refuses a class it does not serve without saying why; this suite requires \
    the Extended DNS Error NSD sends, 21 Not Supported (RFC 8914 section 4.22), so that a client learns the \
    refusal is about the class";

fn deviation_for(m: &Mismatch) -> Option<usize> {
    deviation_in(KNOWN_REFERENCE_DEVIATIONS, m)
}

/// The index of the deviation of `deviations` that `m` is, if any.
fn deviation_in(deviations: &[Deviation], m: &Mismatch) -> Option<usize> {
    deviations.iter().position(|d| {
        m.case.starts_with(d.case)
            && m.servers.iter().any(|s| s == d.server)
            && d.transport.is_none_or(|t| t == m.transport)
            && (d.fields.is_empty() || d.fields.iter().any(|f| m.field.starts_with(f)))
    })
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn zone_dir() -> PathBuf {
    manifest_dir().join("tests/zones")
}

fn all_cases() -> Vec<Case> {
    let mut cases = conformance_cases();
    if let Ok(filter) = std::env::var("PHAROS_CONFORMANCE_FILTER") {
        cases.retain(|c| c.label.contains(&filter));
    }
    cases
}

/// Finds a reference server binary. Missing: a failure under CI, else None
/// after a loud SKIP line.
fn require(program: &str, package: &str) -> Option<PathBuf> {
    if let Some(p) = find_program(program) {
        return Some(p);
    }
    let msg = format!("`{program}` is not installed (Debian package `{package}`): the differential conformance suite needs it");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this is a failure. Install it with `apt-get install {package}`.");
    }
    eprintln!("\n*** SKIP: {msg}. Install it with `apt-get install {package}`. ***\n");
    None
}

fn start(which: &str) -> Option<Server> {
    let zones = zone_dir();
    let result = match which {
        "knot" => start_knot(&require("knotd", "knot")?, &zones, ZONES, &Extras::default()),
        "nsd" => start_nsd(&require("nsd", "nsd")?, &zones, ZONES, &Extras::default()),
        "pharos" => start_pharos(Path::new(env!("CARGO_BIN_EXE_pharos")), &zones, ZONES, &Extras::default()),
        _ => unreachable!(),
    };
    Some(result.unwrap_or_else(|e| panic!("starting {which}: {e}")))
}

/// Every case's reply over each of its transports.
type Replies = Vec<HashMap<Transport, Observed>>;

fn run_cases(server: &Server, cases: &[Case]) -> Replies {
    let run = |case: &Case| -> HashMap<Transport, Observed> {
        let timeout = if case.expect == Expect::Silence { SILENCE_TIMEOUT } else { TIMEOUT };
        case.transports.iter().map(|&t| (t, Observed::from_reply(exchange(server.addr, t, &case.packet, timeout)))).collect()
    };
    let mut results: Vec<Option<HashMap<Transport, Observed>>> = vec![None; cases.len()];
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..PARALLEL)
            .map(|w| s.spawn(move || (w..cases.len()).step_by(PARALLEL).map(|i| (i, run(&cases[i]))).collect::<Vec<_>>()))
            .collect();
        for worker in workers {
            for (i, r) in worker.join().unwrap() {
                results[i] = Some(r);
            }
        }
    });
    results.into_iter().map(Option::unwrap).collect()
}

/// For ANY cases: the RRsets at the name, asked type by type of `reference` over TCP.
fn any_nodes(reference: &Server, cases: &[Case]) -> HashMap<usize, AnyNode> {
    let mut nodes = HashMap::new();
    for (i, case) in cases.iter().enumerate() {
        let (Some(types), Some(q)) = (&case.any_types, &case.question) else { continue };
        let qname = support::wire::name_to_text(&q.name);
        let mut node = Section::new();
        for &t in types {
            let mut spec = QuerySpec::new(&qname, t);
            spec.id = 0x7700 + t;
            if let Observed::Message(m) = Observed::from_reply(exchange(reference.addr, Transport::Tcp, &spec.encode(), TIMEOUT)) {
                for (k, v) in &m.answer {
                    if k.owner == qname.to_ascii_lowercase() && k.rtype == t {
                        node.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        nodes.insert(i, node);
    }
    nodes
}

/// Runs every case on both servers and compares. Returns all mismatches.
/// Single-reply RFC checks are run on `left`, and on `right` too when
/// `check_right` is set.
fn differential(left: &Server, right: &Server, check_right: bool) -> (usize, Vec<Mismatch>) {
    let origins: Vec<&str> = ZONES.iter().map(|z| z.origin).collect();
    let ctx = Context { zones: &origins };
    let cases = all_cases();
    let started = Instant::now();
    let (lr, rr) = std::thread::scope(|s| {
        let l = s.spawn(|| run_cases(left, &cases));
        let r = s.spawn(|| run_cases(right, &cases));
        (l.join().unwrap(), r.join().unwrap())
    });
    let nodes = any_nodes(right, &cases);
    let mut out = Vec::new();
    let mut exchanges = 0;
    let dump = std::env::var_os("PHAROS_CONFORMANCE_DUMP").is_some();
    for (i, case) in cases.iter().enumerate() {
        for &t in &case.transports {
            exchanges += 1;
            if dump {
                let show = |o: &Observed| match o.message() {
                    Some(m) => m.dump(),
                    None => format!("    {o:?}\n"),
                };
                eprint!("=== [{t}] {}\n  {}:\n{}  {}:\n{}", case.label, left.name, show(&lr[i][&t]), right.name, show(&rr[i][&t]));
            }
            check_alone(case, t, left.name, &lr[i][&t], &mut out);
            if check_right {
                check_alone(case, t, right.name, &rr[i][&t], &mut out);
            }
            compare(
                &ctx,
                case,
                t,
                left.name,
                &lr[i][&t],
                lr[i].get(&Transport::Tcp),
                right.name,
                &rr[i][&t],
                rr[i].get(&Transport::Tcp),
                nodes.get(&i),
                &mut out,
            );
        }
    }
    eprintln!("{} vs {}: {} cases, {} exchanges each, {:.1?}", left.name, right.name, cases.len(), exchanges, started.elapsed());
    (cases.len(), out)
}

/// Prints the mismatches and fails if there is any. Mismatches explained by
/// a known reference deviation are listed apart and do not fail. With
/// `demand_all_deviations`, a known deviation that no longer shows fails
/// too (the reference was fixed: the entry must go).
fn report(title: &str, cases: usize, all: Vec<Mismatch>, demand_all_deviations: bool) {
    let mut used = vec![0usize; KNOWN_REFERENCE_DEVIATIONS.len()];
    let mut mismatches = Vec::new();
    let mut against_pharos = vec![0usize; KNOWN_DEVIATIONS_AGAINST_PHAROS.len()];
    for m in all {
        match (deviation_for(&m), deviation_in(KNOWN_DEVIATIONS_AGAINST_PHAROS, &m)) {
            (Some(i), _) => used[i] += 1,
            (None, Some(i)) => against_pharos[i] += 1,
            (None, None) => mismatches.push(m),
        }
    }
    for (d, n) in KNOWN_DEVIATIONS_AGAINST_PHAROS.iter().zip(against_pharos).filter(|(_, n)| *n > 0) {
        eprintln!("{title}: set aside {n} mismatch(es) of {} on {:?}: {}", d.server, d.case, d.why);
    }
    for (i, d) in KNOWN_REFERENCE_DEVIATIONS.iter().enumerate() {
        if used[i] > 0 {
            eprintln!("{title}: set aside {} mismatch(es) of {} on {:?}: {}", used[i], d.server, d.case, d.why);
        }
    }
    let filtered = std::env::var_os("PHAROS_CONFORMANCE_FILTER").is_some();
    if demand_all_deviations && !filtered {
        let stale: Vec<&str> = KNOWN_REFERENCE_DEVIATIONS.iter().zip(&used).filter(|(_, n)| **n == 0).map(|(d, _)| d.case).collect();
        assert!(stale.is_empty(), "{title}: known reference deviations that no longer occur (remove them): {stale:?}");
    }
    if mismatches.is_empty() {
        eprintln!("{title}: {cases} cases, no mismatch");
        return;
    }
    let mut text = format!("\n===== {title}: {} mismatches over {cases} cases =====\n", mismatches.len());
    let mut last_case = String::new();
    for m in &mismatches {
        if m.case != last_case {
            text.push_str(&format!("\n--- {}\n", m.case));
            last_case = m.case.clone();
        }
        text.push_str(&format!("  [{}] {}\n      {}\n      {}\n", m.transport, m.field, m.left, m.right));
    }
    eprintln!("{text}");
    panic!("{title}: {} mismatches (listed above)", mismatches.len());
}

#[test]
fn references_agree() {
    let Some(knot) = start("knot") else { return };
    let Some(nsd) = start("nsd") else { return };
    let (n, mismatches) = differential(&nsd, &knot, true);
    report("nsd vs knot (the references)", n, mismatches, true);
}

#[test]
fn pharos_matches_knot() {
    let Some(knot) = start("knot") else { return };
    let pharos = start("pharos").unwrap();
    let (n, mismatches) = differential(&pharos, &knot, false);
    report("pharos vs knot", n, mismatches, false);
}

#[test]
fn pharos_matches_nsd() {
    let Some(nsd) = start("nsd") else { return };
    let pharos = start("pharos").unwrap();
    let (n, mismatches) = differential(&pharos, &nsd, false);
    report("pharos vs nsd", n, mismatches, false);
}

/// Zone files that break a rule answers cannot show (CNAME beside other
/// data, names below a DNAME, no SOA, ...): both references refuse to load
/// them, and so must Pharos (`pharos check-zone`, the loader `serve` uses).
#[test]
fn invalid_zones_are_refused() {
    let dir = manifest_dir().join("tests/zones/invalid");
    let mut zones: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "zone"))
        .map(|p| (format!("{}.invalid.test.", p.file_stem().unwrap().to_string_lossy()), p))
        .collect();
    zones.sort();
    assert!(!zones.is_empty(), "no zone files in {}", dir.display());
    let mut problems = Vec::new();

    // The references first: a file stays in invalid/ only while both refuse it.
    if let Some(knotd) = require("knotd", "knot") {
        let verdicts = support::servers::knot_accepts(&knotd, &zones).unwrap_or_else(|e| panic!("{e}"));
        for ((origin, file), loaded) in zones.iter().zip(verdicts) {
            if loaded {
                problems.push(format!("knot loads {} ({origin}): not an invalid zone", file.display()));
            }
        }
    }
    if let Some(checkzone) = require("nsd-checkzone", "nsd") {
        for (origin, file) in &zones {
            let status = std::process::Command::new(&checkzone)
                .arg(origin)
                .arg(file)
                .current_dir(&dir)
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", checkzone.display()));
            if status.status.success() {
                problems.push(format!("nsd-checkzone accepts {} ({origin}): not an invalid zone", file.display()));
            }
        }
    }

    for (origin, file) in &zones {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pharos"))
            .arg("check-zone")
            .arg(format!("{}={}", origin.trim_end_matches('.'), file.display()))
            .current_dir(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => problems.push(format!("pharos accepts {} ({origin}), which both references refuse", file.display())),
            Some(101) | None => problems.push(format!("pharos crashed on {}: {stderr}", file.display())),
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}
