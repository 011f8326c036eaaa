//! A seeded random zone: names of several depths with many types, wildcards
//! (one with children of its own), delegations with glue, DNAMEs, CNAME
//! chains that end inside, outside and nowhere, and the empty non-terminals
//! deep names leave. Each kind of name lives under its own first label so
//! that no rule of zone contents is broken (nothing below a delegation but
//! glue, nothing below a DNAME, a CNAME alone at its name): Knot DNS and NSD
//! both load it.

use std::fmt::Write as _;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub const ORIGIN: &str = "fuzz.test.";
pub const FILE: &str = "fuzz.test.zone";

/// Labels names are drawn from: few, so that random query names hit them.
const LABELS: [&str; 8] = ["a", "b", "c", "www", "mail", "x", "deep", "Mixed"];

/// Record data of each type a name may hold, by type mnemonic.
fn random_rrset(rng: &mut SmallRng, owner: &str) -> String {
    let mut out = String::new();
    let records = rng.random_range(1..=3);
    let kind = rng.random_range(0..11);
    for i in 0..records {
        let data = match kind {
            0 => format!("A 192.0.2.{}", 1 + i * 7 + rng.random_range(0..7)),
            1 => format!("AAAA 2001:db8::{:x}", 1 + i * 16 + rng.random_range(0..16)),
            2 => format!("TXT \"text {i} {}\"", "z".repeat(rng.random_range(0..200))),
            3 => format!("MX {} mail.{ORIGIN}", 10 * (i + 1)),
            4 => format!("SRV 0 {i} 443 www.{ORIGIN}"),
            5 => format!("CAA 0 issue \"ca{i}.example\""),
            6 => format!("HINFO \"cpu{i}\" \"os\""),
            7 => format!("SSHFP 1 1 {:040x}", 0x1234u64 + i as u64),
            8 => format!("PTR target{i}.example."),
            9 => format!("TYPE65280 \\# 3 0102{:02x}", i),
            _ => format!("NAPTR {} 10 \"U\" \"E2U+sip\" \"\" .", 100 + i),
        };
        let _ = writeln!(out, "{owner} 300 IN {data}");
        if kind == 6 || kind == 7 {
            break; // one is enough, and keeps RRsets of fixed-size data distinct
        }
    }
    out
}

/// The zone file's text for `seed`.
pub fn generate(seed: u64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x7a6f6e65);
    let mut zone = format!(
        "$ORIGIN {ORIGIN}\n$TTL 300\n@ SOA ns1 hostmaster 1 7200 3600 1209600 60\n@ NS ns1\n@ NS ns2\n\
         ns1 A 192.0.2.53\nns2 AAAA 2001:db8::53\n@ MX 10 mail\nmail A 192.0.2.25\n@ TXT \"apex\"\n"
    );
    // Ordinary names, 1 to 4 labels deep, under "n".
    let mut taken = std::collections::BTreeSet::new();
    for _ in 0..rng.random_range(15..40) {
        let depth = rng.random_range(1..=4);
        let labels: Vec<&str> = (0..depth).map(|_| LABELS[rng.random_range(0..LABELS.len())]).collect();
        let owner = format!("{}.n", labels.join(".")).to_ascii_lowercase();
        if taken.insert(owner.clone()) || rng.random_bool(0.3) {
            zone.push_str(&random_rrset(&mut rng, &owner));
        }
    }
    // Wildcards: one plain, one with a CNAME, one beside names of its own.
    zone.push_str("*.w1 300 IN A 192.0.2.77\n*.w1 300 IN TXT \"wild\"\n");
    zone.push_str("*.w2 300 IN CNAME www.n\n");
    zone.push_str("*.w3 300 IN MX 5 mail\nreal.w3 300 IN A 192.0.2.78\ndeep.sub.w3 300 IN A 192.0.2.79\n");
    // Delegations: glue in the zone, out of the zone, and below the cut.
    for i in 1..=rng.random_range(1..=3) {
        let _ = write!(zone, "d{i} NS ns.d{i}\nd{i} NS ns.outside.example.\nns.d{i} A 192.0.2.{}\n", 100 + i);
        if rng.random_bool(0.5) {
            let _ = writeln!(zone, "ns.d{i} AAAA 2001:db8::{i}");
        }
    }
    // DNAMEs: into the zone, outside, and to a name that does not exist.
    zone.push_str("dn1 DNAME n\ndn2 DNAME example.net.\ndn3 DNAME nowhere\n");
    // CNAME chains: to data, out of the zone, to nothing, and a loop.
    let target = taken.iter().next().cloned().unwrap_or_else(|| "www.n".into());
    let _ = writeln!(zone, "c1 CNAME c2\nc2 CNAME c3\nc3 CNAME {target}");
    zone.push_str("c4 CNAME www.example.net.\nc5 CNAME missing.n\nc6 CNAME c7\nc7 CNAME c6\nc8 CNAME w1\nc9 CNAME x.w1\n");
    zone
}
