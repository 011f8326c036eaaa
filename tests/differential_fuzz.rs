//! Differential fuzzing: seeded random queries sent to Pharos, Knot DNS and
//! NSD over UDP and TCP, their replies normalized and compared with the
//! conformance suite's code (tests/support/norm.rs, compare.rs), every
//! class of difference reported once with the smallest query that shows it.
//! The conformance suite (tests/conformance.rs) asks what someone thought
//! to ask; this asks what nobody wrote down.
//!
//! Queries (tests/fuzz/generate.rs): names in and out of the zones, under
//! wildcards, delegations and DNAMEs, empty non-terminals, random labels and
//! case; every kind of type (data, meta, DNSSEC, NXNAME, unknown) and class;
//! header flags, opcodes and RCODEs set; EDNS versions, payloads, DO,
//! options known and unknown, good and malformed (ECS, NSID, COOKIE of every
//! length, padding, keepalive, EDE), overlong options, two OPTs, an OPT in
//! the answer section or with another owner; TSIG with the servers' key,
//! an unknown key, a wrong MAC, an old time, an unknown algorithm; messages
//! cut short or with trailing garbage; QDCOUNT 0 and 2; records in a query.
//!
//! Configurations (one test each): the conformance zones; a seeded
//! generated zone (tests/fuzz/zonegen.rs); the conformance zones with
//! response rate limiting (rate 1, every limited reply slipped) and DNS
//! cookies on every server (Knot mod-rrl and mod-cookies, NSD's rrl-* and
//! answer-cookie, Pharos `[rrl]` and `[cookies]`); the conformance zones
//! signed online by Pharos and by Knot, NSD left out (it cannot sign), the
//! signers' own records (RRSIG, NSEC, DNSKEY, ...) left out of the
//! comparison. Every server knows the TSIG key `fuzz-key`
//! (tests/fuzz/tsig.rs). Under rate limiting a UDP reply that comes empty
//! with TC (slipped, or truncated) is not compared with the others, whose
//! buckets fill at other moments, but with the same server's TCP reply: it
//! must keep the RCODE and the OPT record.
//!
//! Each difference is put on the server that is the odd one out (`odd=`),
//! on a reply that breaks a rule alone (`rule:`), or on the pairs that
//! differ, and made as small as it goes by dropping options, flags and
//! labels while it still shows (tests/fuzz/bench.rs). A class's signature
//! says who, over what, which field, and coarse words about that smallest
//! query, e.g. `odd=pharos [UDP] field=rcode | edns=none qtype=NXNAME`.
//! The report prints each class with its reproduction in words, in hex and
//! as a dig command line where dig can send it. A class listed in
//! `KNOWN_DEVIATIONS` below (the RFC text that allows it, or the
//! reference's fault) does not fail the test; any other does.
//!
//! Run (the CI size is the default, 1,500 queries per configuration):
//!
//!     cargo test --release --test differential_fuzz -- --nocapture
//!     PHAROS_FUZZ_QUERIES=250000 PHAROS_FUZZ_SEED=7 PHAROS_FUZZ_PROGRESS=1 \
//!         nice cargo test --release --test differential_fuzz -- --nocapture --test-threads 1
//!
//! Environment: `PHAROS_FUZZ_QUERIES` (per configuration), `PHAROS_FUZZ_SEED`
//! (default 1; the same seed sends the same queries), `PHAROS_FUZZ_REPORT=FILE`
//! (append the reports there), `PHAROS_FUZZ_REPORT_ONLY=1` (report, never
//! fail), `PHAROS_FUZZ_PROGRESS=1`. Without knotd/nsd the tests print SKIP
//! and pass, unless CI is set, where they fail.

mod common;
mod fuzz;
mod support;

use std::path::{Path, PathBuf};

use fuzz::bench::Bench;
use fuzz::classes::{Deviation, report, run};
use fuzz::generate::Generator;
use fuzz::names::NamePool;
use fuzz::zonegen;
use support::servers::{Extras, Server, Zone, find_program, start_knot, start_nsd, start_pharos};

/// The conformance suite's zones.
const CONFORMANCE_ZONES: &[Zone] = &[
    Zone { origin: "example.com.", file: "example.com.zone" },
    Zone { origin: "sub.example.com.", file: "sub.example.com.zone" },
    Zone { origin: "example.org.", file: "example.org.zone" },
];
const GENERATED_ZONES: &[Zone] = &[Zone { origin: zonegen::ORIGIN, file: zonegen::FILE }];

/// Queries per configuration in CI.
const CI_QUERIES: usize = 1500;

/// Classes of difference that are not Pharos's to fix.
const KNOWN_DEVIATIONS: &[Deviation] = &[];

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?}: not a number")))
}

/// Finds a reference server binary. Missing: a failure under CI, else None
/// after a loud SKIP line.
fn require(program: &str, package: &str) -> Option<PathBuf> {
    if let Some(p) = find_program(program) {
        return Some(p);
    }
    let msg = format!("`{program}` is not installed (Debian package `{package}`): the differential fuzzer needs it");
    assert!(std::env::var_os("CI").is_none(), "{msg}; CI is set, so this is a failure. Install it with `apt-get install {package}`.");
    eprintln!("\n*** SKIP: {msg}. Install it with `apt-get install {package}`. ***\n");
    None
}

/// The servers on `zone_dir`, each configured with `extras`: Pharos, Knot
/// and NSD, or without NSD when the zones are signed online.
fn start_all(zone_dir: &Path, zones: &[Zone], extras: &Extras) -> Option<Vec<Server>> {
    let knot = start_knot(&require("knotd", "knot")?, zone_dir, zones, extras).unwrap_or_else(|e| panic!("knot: {e}"));
    let nsd = match extras.signed {
        true => None,
        false => Some(start_nsd(&require("nsd", "nsd")?, zone_dir, zones, extras).unwrap_or_else(|e| panic!("nsd: {e}"))),
    };
    let pharos = start_pharos(Path::new(env!("CARGO_BIN_EXE_pharos")), zone_dir, zones, extras).unwrap_or_else(|e| panic!("pharos: {e}"));
    Some([Some(pharos), Some(knot), nsd].into_iter().flatten().collect())
}

/// Runs one configuration and fails on any class no deviation explains.
fn fuzz_configuration(config: &str, zone_dir: &Path, zones: &[Zone], extras: Extras) {
    let Some(servers) = start_all(zone_dir, zones, &extras) else { return };
    let origins: Vec<&'static str> = zones.iter().map(|z| z.origin).collect();
    let mut bench = Bench::new(servers.iter().collect(), origins, &extras);
    let Some(checkzone) = require("named-checkzone", "bind9-utils") else { return };
    let pool = NamePool::from_zones(&checkzone, zone_dir, zones);
    let seed = env_number("PHAROS_FUZZ_SEED", 1);
    let mut generator = Generator::new(seed, &pool);
    let count = env_number("PHAROS_FUZZ_QUERIES", CI_QUERIES as u64) as usize;
    let found = run(&mut bench, &mut generator, count);
    let unexplained = report(&format!("{config} (seed {seed})"), &found, &bench, KNOWN_DEVIATIONS);
    if std::env::var_os("PHAROS_FUZZ_REPORT_ONLY").is_none() {
        assert!(unexplained.is_empty(), "{config}: {} classes of difference unexplained (listed above):\n{}", unexplained.len(), unexplained.join("\n"));
    }
}

fn tsig_only() -> Extras {
    Extras { tsig: Some(fuzz::tsig::KEY), ..Extras::default() }
}

fn conformance_zone_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zones")
}

#[test]
fn conformance_zones() {
    fuzz_configuration("conformance_zones", &conformance_zone_dir(), CONFORMANCE_ZONES, tsig_only());
}

#[test]
fn generated_zone() {
    let dir = tempfile::tempdir().unwrap();
    let seed = env_number("PHAROS_FUZZ_SEED", 1);
    std::fs::write(dir.path().join(zonegen::FILE), zonegen::generate(seed)).unwrap();
    fuzz_configuration("generated_zone", dir.path(), GENERATED_ZONES, tsig_only());
}

/// Signed online by Pharos and by Knot (NSD cannot sign), each with keys
/// of its own: signatures, keys and denial records are left out of the
/// comparison (Pharos denies by RFC 9824 compact denial, Knot by NSEC).
#[test]
fn signed_zones() {
    let extras = Extras { signed: true, ..tsig_only() };
    fuzz_configuration("signed_zones", &conformance_zone_dir(), CONFORMANCE_ZONES, extras);
}

#[test]
fn rate_limits_and_cookies() {
    let extras = Extras { rrl: Some((1, 1)), cookies: true, ..tsig_only() };
    fuzz_configuration("rate_limits_and_cookies", &conformance_zone_dir(), CONFORMANCE_ZONES, extras);
}
