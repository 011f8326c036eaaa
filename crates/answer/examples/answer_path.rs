//! Measures the sans-IO query path alone: `respond()` over a zone and a
//! query list, no sockets. Prints nanoseconds per query by answer kind.
//!
//!     cargo run --release -p pharos-answer --example answer_path -- ORIGIN ZONEFILE QUERYFILE [ROUNDS]
//!
//! QUERYFILE is dnsperf format (`name TYPE` per line). Under
//! `valgrind --tool=callgrind` the instruction counts are repeatable even on
//! a busy machine.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use pharos_answer::{Client, Settings, Snapshot, Transport, respond};
use pharos_zone::{ZoneSet, load_zone_file};
use rand::SeedableRng;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, origin, zone_file, query_file, rest @ ..] = args.as_slice() else {
        eprintln!("usage: answer_path ORIGIN ZONEFILE QUERYFILE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = rest.first().map_or(200, |rounds| rounds.parse().expect("ROUNDS is a number"));
    let zone = load_zone_file(origin, zone_file.as_ref()).unwrap_or_else(|error| panic!("{error}"));
    let snapshot = Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Settings::default() };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let queries: Vec<Vec<u8>> = std::fs::read_to_string(query_file).expect("query file").lines().filter_map(encode_query).collect();
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Udp };
    let mut out = Vec::with_capacity(4096);
    let started = Instant::now();
    let mut answered = 0usize;
    for _ in 0..rounds {
        for query in &queries {
            out.clear();
            answered += usize::from(respond(query, &client, &snapshot, &mut rng, &mut out));
        }
    }
    let elapsed = started.elapsed();
    println!("{answered} answers, {:.1} ns/query", elapsed.as_nanos() as f64 / (rounds * queries.len()) as f64);
}

/// A query with EDNS (payload 1232) for a `name TYPE` line.
fn encode_query(line: &str) -> Option<Vec<u8>> {
    let mut fields = line.split_whitespace();
    let (name, rtype) = (fields.next()?, fields.next()?);
    let rtype: u16 = match rtype.to_ascii_uppercase().as_str() {
        "A" => 1,
        "NS" => 2,
        "CNAME" => 5,
        "SOA" => 6,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        "SRV" => 33,
        "ANY" => 255,
        other => other.strip_prefix("TYPE")?.parse().ok()?,
    };
    let mut packet = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    for label in name.trim_end_matches('.').split('.') {
        packet.push(label.len() as u8);
        packet.extend(label.as_bytes());
    }
    packet.push(0);
    packet.extend(rtype.to_be_bytes());
    packet.extend([0, 1, 0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
    Some(packet)
}
