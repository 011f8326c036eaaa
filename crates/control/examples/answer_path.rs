//! Measures the sans-IO query path alone: `respond()` over a zone and a
//! query list, no sockets. Prints nanoseconds per query.
//!
//!     cargo run --release -p pharos-control --example answer_path -- ORIGIN ZONEFILE QUERYFILE [ROUNDS] [--routed]
//!
//! QUERYFILE is dnsperf format (`name TYPE` per line). With `--routed`, the
//! queries are instead for a service `svc.ORIGIN` answered by region
//! probabilities over 8 regions (10.1/16 .. 10.8/16), each query carrying
//! an EDNS Client Subnet from one of 10,000 different /24s. Under
//! `valgrind --tool=callgrind` the instruction counts are repeatable even
//! on a busy machine.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use pharos_answer::{Client, Settings, Transport, respond};
use pharos_control::build::DataSources;
use pharos_control::snapshot::build_snapshot;
use pharos_model::probabilities::ProbabilitySpec;
use pharos_model::spec::{Declared, RegionSpec, ReplicaSpec, ServiceSpec};
use pharos_zone::load_zone_file;
use rand::SeedableRng;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let routed = args.iter().any(|arg| arg == "--routed");
    let args: Vec<&String> = args.iter().filter(|arg| *arg != "--routed").collect();
    let [_, origin, zone_file, query_file, rest @ ..] = args.as_slice() else {
        eprintln!("usage: answer_path ORIGIN ZONEFILE QUERYFILE [ROUNDS] [--routed]");
        std::process::exit(2);
    };
    let rounds: usize = rest.first().map_or(200, |rounds| rounds.parse().expect("ROUNDS is a number"));
    let zone = load_zone_file(origin, zone_file.as_ref()).unwrap_or_else(|error| panic!("{error}"));
    let service_name = format!("svc.{}", origin.trim_end_matches('.'));
    let (services, queries) = if routed {
        (vec![Arc::new(service(&service_name))], (0..10_000u32).map(|index| routed_query(&service_name, index)).collect())
    } else {
        let queries: Vec<Vec<u8>> = std::fs::read_to_string(query_file).expect("query file").lines().filter_map(encode_query).collect();
        (Vec::new(), queries)
    };
    let regions = if routed { regions() } else { Vec::new() };
    let declared = Declared { regions: &regions, services: &services, ..Declared::default() };
    let snapshot =
        build_snapshot(vec![zone], Settings::default(), &declared, &DataSources::default()).expect("the benchmark service is valid");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Udp };
    let mut out = Vec::with_capacity(4096);
    let started = Instant::now();
    let mut answered = 0usize;
    for _ in 0..rounds {
        for query in &queries {
            out.clear();
            answered += usize::from(respond(query, &client, &snapshot, &mut rng, &mut out).is_some());
        }
    }
    let elapsed = started.elapsed();
    println!("{answered} answers, {:.1} ns/query", elapsed.as_nanos() as f64 / (rounds * queries.len()) as f64);
}

fn regions() -> Vec<RegionSpec> {
    (1..=8)
        .map(|id| RegionSpec { id, name: format!("r{id}"), prefixes: vec![format!("10.{id}.0.0/16")], ..RegionSpec::default() })
        .collect()
}

/// Three replicas; each region prefers a different one.
fn service(name: &str) -> ServiceSpec {
    let replicas: Vec<ReplicaSpec> =
        (1..=3).map(|index| ReplicaSpec::new(format!("r{index}"), IpAddr::V4(Ipv4Addr::new(192, 0, 2, index)))).collect();
    let mut probabilities = BTreeMap::new();
    for region in 1..=8u32 {
        let row: BTreeMap<String, ProbabilitySpec> = (1..=3u32)
            .map(|index| (format!("r{index}"), ProbabilitySpec { probability: if index == region % 3 + 1 { 0.8 } else { 0.1 }, ttl: 60 }))
            .collect();
        probabilities.insert(format!("r{region}"), row);
    }
    ServiceSpec { ttl: 300, probabilities, ..ServiceSpec::new(name, "region-probabilities", replicas) }
}

/// A query for the service with ECS from /24 number `index`: spread over
/// 10.0/16 .. 10.9/16, so most fall in one of the 8 regions.
fn routed_query(service: &str, index: u32) -> Vec<u8> {
    let mut packet = encode_query(&format!("{service} A")).expect("a valid query");
    packet.truncate(packet.len() - 2);
    let subnet = [10, (index % 10) as u8, (index / 10 % 256) as u8];
    packet.extend([0, 11, 0, 8, 0, 7, 0, 1, 24, 0]);
    packet.extend(subnet);
    packet
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
