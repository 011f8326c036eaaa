//! Time one routing decision (locate the client, then decide) for each
//! policy, on real data: a BGP RIB dump, a MaxMind City database, and a
//! synthetic set of latency measurements.
//!
//!     cargo run --release -p pharos-control --example decide [-- --bgp RIB --geo MMDB]
//!
//! By default the RouteViews JINX RIB and DB-IP's City Lite database of the
//! large data sets (`$PHAROS_DATA`, see tests/data/README.md).
//!
//! Every decision is timed on its own (the cost of reading the clock,
//! measured first, is taken off), so the table shows the median and the
//! tail of single decisions, not an average over a batch.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use pharos_control::build::DataSources;
use pharos_control::services::build_routes;
use pharos_model::probabilities::ProbabilitySpec;
use pharos_model::spec::{DataCenterSpec, Declared, RegionSpec, ReplicaSpec, ServiceSpec};
use pharos_route::as_paths::AsPaths;
use pharos_route::latency::{Latencies, Measured, MeasurementBook};
use pharos_route::policy::PolicyKind;
use pharos_route::sources::GeoDatabase;
use pharos_route::{Asker, Family, Routes, route};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Data centers in real cities, announced from ASes that are in RIB dumps
/// of any year (Level 3, Cogent, NTT, Hurricane Electric, Telia, Tata,
/// GTT, AT&T).
const DATACENTERS: [(&str, f64, f64, u32); 8] = [
    ("den", 39.74, -104.99, 3356),
    ("iad", 38.95, -77.45, 174),
    ("nrt", 35.76, 140.39, 2914),
    ("sjc", 37.36, -121.93, 6939),
    ("arn", 59.65, 17.92, 1299),
    ("bom", 19.09, 72.87, 6453),
    ("fra", 50.03, 8.57, 3257),
    ("dfw", 32.90, -97.04, 7018),
];

const POLICIES: [&str; 6] = ["static", "weighted", "region-probabilities", "shortest-as-path", "lowest-latency", "nearest"];

struct Options {
    bgp: PathBuf,
    geo: PathBuf,
    decisions: usize,
    measured_subnets: usize,
    seed: u64,
}

fn options() -> Options {
    let data = pharos_test_data::large_data_directory();
    let mut options = Options {
        bgp: data.join("bgp/routeviews.route-views.jinx.ribs.1401487200.bz2"),
        geo: data.join("geoip/dbip-city-lite-2023-04.mmdb"),
        decisions: 200_000,
        measured_subnets: 100_000,
        seed: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--bgp" => options.bgp = value.into(),
            "--geo" => options.geo = value.into(),
            "--decisions" => options.decisions = value.parse().expect("--decisions N"),
            "--measured-subnets" => options.measured_subnets = value.parse().expect("--measured-subnets N"),
            "--seed" => options.seed = value.parse().expect("--seed N"),
            other => panic!("unknown option {other}; see the comment at the top of examples/decide.rs"),
        }
    }
    options
}

fn main() {
    let options = options();
    let mut rng = SmallRng::seed_from_u64(options.seed);
    eprintln!("loading {} ...", options.bgp.display());
    let tables = pharos_bgp::load(&options.bgp, pharos_bgp::OriginRules::default(), |_| {}).expect("a BGP table");
    eprintln!("{}", tables.report);
    let geo = GeoDatabase::from_bytes(std::fs::read(&options.geo).expect("the MaxMind DB")).expect("a MaxMind DB");
    let subnets: Vec<Ipv4Addr> = (0..options.measured_subnets).map(|_| public_address(&mut rng)).collect();
    let sources = DataSources {
        geo: Some(Arc::new(geo)),
        as_paths: Some(Arc::new(AsPaths::new(Some(Arc::new(tables))))),
        latencies: Arc::new(measurements(&subnets, &mut rng)),
        ..DataSources::default()
    };
    let routes = routes(&sources);
    // Half the clients in measured subnets, half anywhere.
    let clients: Vec<IpAddr> = (0..options.decisions)
        .map(|index| match index % 2 {
            0 => IpAddr::V4(Ipv4Addr::from(u32::from(subnets[rng.random_range(0..subnets.len())]) | rng.random_range(0..256))),
            _ => IpAddr::V4(public_address(&mut rng)),
        })
        .collect();
    let overhead = clock_overhead();
    println!("one decision (locate + decide), {} clients, clock overhead {overhead} ns taken off", clients.len());
    println!("{:<22} {:>10} {:>10} {:>10}", "policy", "median ns", "p99 ns", "mean ns");
    for policy in POLICIES {
        let mut times = time_policy(&routes, policy, &clients, overhead, &mut rng);
        times.sort_unstable();
        let mean = times.iter().sum::<u64>() as f64 / times.len() as f64;
        let percentile = |share: f64| times[((times.len() - 1) as f64 * share) as usize];
        println!("{policy:<22} {:>10} {:>10} {mean:>10.0}", percentile(0.5), percentile(0.99));
    }
}

/// A random unicast IPv4 address outside 0/8, 10/8, 127/8 and 224/3.
fn public_address(rng: &mut impl Rng) -> Ipv4Addr {
    loop {
        let address = Ipv4Addr::from(rng.random::<u32>() & 0xffff_ff00);
        let first = address.octets()[0];
        if !matches!(first, 0 | 10 | 127 | 224..=255) {
            return address;
        }
    }
}

/// Every subnet measured from every data center, a random RTT each.
fn measurements(subnets: &[Ipv4Addr], rng: &mut impl Rng) -> Latencies {
    let mut book = MeasurementBook::new();
    for &subnet in subnets {
        let by_datacenter = book.entry((IpAddr::V4(subnet), 24)).or_default();
        for (id, ..) in DATACENTERS {
            by_datacenter.insert(id.to_string(), Measured { rtt_ms: rng.random_range(1.0..300.0), at: 1_000 });
        }
    }
    Latencies::build(&book, 1_000, 3_600)
}

/// One service per policy, each with one replica per data center, and
/// eight regions of random /8s for the region-probabilities table.
fn routes(sources: &DataSources) -> Routes {
    let datacenters: Vec<DataCenterSpec> = DATACENTERS
        .iter()
        .map(|&(id, latitude, longitude, asn)| DataCenterSpec { id: id.into(), latitude, longitude, asn: Some(asn) })
        .collect();
    let regions: Vec<RegionSpec> = (1..=8)
        .map(|id| RegionSpec { id, name: format!("r{id}"), prefixes: vec![format!("{}.0.0.0/8", 20 + id * 20)], ..RegionSpec::default() })
        .collect();
    let services: Vec<Arc<ServiceSpec>> = POLICIES.iter().map(|policy| Arc::new(service(policy, &regions))).collect();
    let declared = Declared { datacenters: &datacenters, regions: &regions, services: &services, ..Declared::default() };
    build_routes(&declared, sources, |name| Ok(name.as_bytes().into())).expect("valid declarations")
}

fn service(policy: &str, regions: &[RegionSpec]) -> ServiceSpec {
    let replicas: Vec<ReplicaSpec> = DATACENTERS
        .iter()
        .enumerate()
        .map(|(index, &(id, ..))| ReplicaSpec {
            datacenter: Some(id.into()),
            ..ReplicaSpec::new(id, IpAddr::V4(Ipv4Addr::new(192, 0, 2, index as u8 + 1)))
        })
        .collect();
    let mut probabilities = BTreeMap::new();
    if policy == "region-probabilities" {
        for (index, region) in regions.iter().enumerate() {
            let row = replicas
                .iter()
                .enumerate()
                .map(|(replica, spec)| {
                    (spec.id.clone(), ProbabilitySpec { probability: if replica == index { 0.8 } else { 0.03 }, ttl: 60 })
                })
                .collect();
            probabilities.insert(region.name.clone(), row);
        }
    }
    let proximity = PolicyKind::named(policy).is_some_and(PolicyKind::needs_fallback);
    ServiceSpec { ttl: 60, probabilities, fallback: proximity.then(|| "weighted".into()), ..ServiceSpec::new(policy, policy, replicas) }
}

/// Times each client's decision, in nanoseconds.
fn time_policy(routes: &Routes, policy: &str, clients: &[IpAddr], overhead: u64, rng: &mut SmallRng) -> Vec<u64> {
    let service = &routes.services[policy.as_bytes()];
    clients
        .iter()
        .map(|&client| {
            let started = Instant::now();
            std::hint::black_box(route(routes, service, Family::V4, &Asker::from_source(client), rng, None));
            (started.elapsed().as_nanos() as u64).saturating_sub(overhead)
        })
        .collect()
}

/// The median cost of reading the clock twice.
fn clock_overhead() -> u64 {
    let mut samples: Vec<u64> = (0..100_000)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(());
            started.elapsed().as_nanos() as u64
        })
        .collect();
    samples.sort_unstable();
    samples[samples.len() / 2]
}
