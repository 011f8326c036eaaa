//! Every mechanism asks the routing core through one door, so the explain
//! API shows exactly what a query gets: for 10,000 seeded (service,
//! client) pairs over every policy, the DNS answer, the HTTP redirect and
//! the explanation, each drawing from the same seed, name the same
//! replicas with the same TTL.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use domain::base::{Message, MessageBuilder, Name, Rtype};
use domain::rdata::AllRecordData;
use pharos_answer::{Client, Snapshot, Transport};
use pharos_route::Family;
use pharos_route::latency::MeasurementSpec;
use pharos_server::Config;
use pharos_server::driver::shell::explain;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const PAIRS: u64 = 10_000;

/// Each policy once, over nine replicas (too many for prepared orders)
/// or three (prepared), some with an answer cap.
const SERVICES: [(&str, &str, usize, usize); 10] = [
    ("static", "static", 3, 0),
    ("round-robin", "round-robin", 3, 2),
    ("weighted", "weighted", 3, 0),
    ("weighted-many", "weighted", 9, 4),
    ("failover", "failover", 9, 0),
    ("region-probabilities", "region-probabilities", 3, 2),
    ("region-probabilities-many", "region-probabilities", 9, 0),
    ("lowest-latency", "lowest-latency", 3, 0),
    ("shortest-as-path", "shortest-as-path", 3, 0),
    ("nearest", "nearest", 3, 0),
];

const DATACENTERS: [(&str, f64, f64, u32); 3] = [("iad", 38.94, -77.46, 400), ("fra", 50.03, 8.57, 200), ("sin", 1.36, 103.99, 300)];

/// From AS 100 (10.0.0.0/8), AS 200 (fra) is one hop away and AS 400
/// (iad) two; 203.0.113.0/24 sits in AS 300 (sin).
const RIB: &str = "\
TABLE_DUMP2|1277971199|B|192.0.2.9|300|10.0.0.0/8|300 200 100|IGP|192.0.2.9|0|0||NAG||
TABLE_DUMP2|1277971199|B|192.0.2.9|400|10.0.0.0/8|400 500 100|IGP|192.0.2.9|0|0||NAG||
TABLE_DUMP2|1277971199|B|192.0.2.9|300|203.0.113.0/24|300|IGP|192.0.2.9|0|0||NAG||
";

/// Clients in regions, in the BGP table, in the test GeoIP database, in
/// measured subnets, and nowhere, of both families.
const CLIENT_NETWORKS: [&str; 8] =
    ["198.51.100.", "203.0.113.", "10.1.2.", "81.2.69.", "89.160.20.", "192.0.2.", "2001:db8:aa::", "2001:db8:bb::"];

#[test]
fn explain_dns_and_redirects_decide_alike() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    // One snapshot per mechanism: round-robin counts the answers it gives.
    let [dns, redirect, explained] = [0, 1, 2].map(|_| snapshot(&config));
    let mut pairs = SmallRng::seed_from_u64(2026);
    for seed in 0..PAIRS {
        let (service, _, _, _) = SERVICES[pairs.random_range(0..SERVICES.len())];
        let name = format!("{service}.example.test");
        let client = client(&mut pairs);
        let family = if client.is_ipv4() { Family::V4 } else { Family::V6 };

        let answered = dns_answer(&dns, &name, client, family, seed);
        let explanation = explain(&explained, &name, &client.to_string(), family, &mut SmallRng::seed_from_u64(seed)).unwrap();
        let told: Vec<IpAddr> = explanation.answer.iter().map(|(_, address)| address.parse().unwrap()).collect();
        assert_eq!(answered, (told.clone(), explanation.ttl), "seed {seed}: {name} for {client}\n{:#?}", explanation.steps);

        let wire = pharos_model::spec::service_name(&name).unwrap();
        let routed = redirect.routes.service(&wire).unwrap();
        let target = pharos_transport::redirect_target(&redirect.routes, routed, client, &mut SmallRng::seed_from_u64(seed));
        let sent_to = target.map(|(replica, ttl)| (replica.address, ttl));
        assert_eq!(sent_to, told.first().map(|&first| (first, explanation.ttl)), "seed {seed}: {name} for {client}");
    }
}

/// A client address in one of [`CLIENT_NETWORKS`].
fn client(rng: &mut SmallRng) -> IpAddr {
    let network = CLIENT_NETWORKS[rng.random_range(0..CLIENT_NETWORKS.len())];
    format!("{network}{}", rng.random_range(1..255)).parse().unwrap()
}

/// The addresses and TTL of the DNS answer for `name`, in order.
fn dns_answer(snapshot: &Snapshot, name: &str, client: IpAddr, family: Family, seed: u64) -> (Vec<IpAddr>, u32) {
    let qtype = if family == Family::V4 { Rtype::A } else { Rtype::AAAA };
    let mut query = MessageBuilder::new_vec().question();
    query.push((Name::<Vec<u8>>::from_chars(name.chars()).unwrap(), qtype)).unwrap();
    let client = Client { address: client, transport: Transport::Udp };
    let mut response = Vec::new();
    assert!(pharos_answer::respond(&query.finish(), &client, snapshot, &mut SmallRng::seed_from_u64(seed), &mut response).is_some());
    let response = Message::from_octets(response).unwrap();
    let mut addresses = Vec::new();
    let mut ttl = 0;
    for record in response.answer().unwrap().limit_to::<AllRecordData<_, _>>() {
        let record = record.unwrap();
        ttl = record.ttl().as_secs();
        match record.data() {
            AllRecordData::A(a) => addresses.push(IpAddr::V4(a.addr())),
            AllRecordData::Aaaa(aaaa) => addresses.push(IpAddr::V6(aaaa.addr())),
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    (addresses, ttl)
}

/// A fresh control plane on `config`, with BGP tables and latency
/// measurements loaded: its first full snapshot.
fn snapshot(config: &Config) -> Arc<Snapshot> {
    let now = pharos_server::data::unix_millis();
    let mut control = pharos_server::driver::thread::open(config.clone()).unwrap();
    let tables = pharos_bgp::load(config.bgp.table.as_ref().unwrap(), config.bgp.origin_rules(), |_| {}).unwrap();
    control.install_bgp(Ok(tables), now).unwrap();
    let measured = |subnet: &str, datacenter: &str, rtt_ms| MeasurementSpec {
        subnet: subnet.into(),
        datacenter: datacenter.into(),
        rtt_ms,
        measured_at: None,
    };
    let measurements = [measured("192.0.2.0/24", "sin", 12.0), measured("192.0.2.0/24", "fra", 80.0), measured("10.1.0.0/16", "iad", 5.0)];
    control.record_measurements(&measurements, now).unwrap();
    control.snapshot().load_full()
}

/// A zone, a BGP table and a config declaring every service of [`SERVICES`].
fn write_config(dir: &Path) -> Config {
    let zone = "$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\n";
    std::fs::write(dir.join("example.test.zone"), zone).unwrap();
    std::fs::write(dir.join("rib.txt"), RIB).unwrap();
    let geo = pharos_test_data::fixture("maxmind-test-GeoIP2-City-Test.mmdb");
    let mut text = format!(
        "[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n\
         [bgp]\ntable = \"{}\"\nspecial_purpose_origins = true\n[geo]\ndatabase = \"{}\"\n\
         [[region]]\nid = 1\nname = \"europe\"\nprefixes = [\"198.51.100.0/24\", \"2001:db8:aa::/48\"]\n\
         [[region]]\nid = 2\nname = \"asia\"\nprefixes = [\"203.0.113.0/24\"]\n",
        dir.join("rib.txt").display(),
        geo.display()
    );
    for (id, latitude, longitude, asn) in DATACENTERS {
        text += &format!("[[datacenter]]\nid = \"{id}\"\nlatitude = {latitude}\nlongitude = {longitude}\nasn = {asn}\n");
    }
    for (name, policy, replicas, max_answers) in SERVICES {
        text += &service(name, policy, replicas, max_answers);
    }
    std::fs::write(dir.join("pharos.toml"), text).unwrap();
    Config::from_file(&dir.join("pharos.toml")).unwrap()
}

/// One service's declaration: `replicas` of each family, spread over the
/// data centers with weights and priorities that differ.
fn service(name: &str, policy: &str, replicas: usize, max_answers: usize) -> String {
    let fallback =
        if name.starts_with("lowest") || name.starts_with("shortest") || name == "nearest" { "fallback = \"weighted\"\n" } else { "" };
    let mut text =
        format!("[[service]]\nname = \"{name}.example.test\"\npolicy = \"{policy}\"\nttl = 300\nmax_answers = {max_answers}\n{fallback}");
    for index in 0..replicas {
        let (datacenter, ..) = DATACENTERS[index % DATACENTERS.len()];
        for (family, address) in [("4", format!("192.0.2.{}", 10 + index)), ("6", format!("2001:db8::{}", 10 + index))] {
            let weight = 1 + index % 4;
            let priority = 1 + index % 3;
            text += &format!(
                "[[service.replica]]\nid = \"r{index}-{family}\"\naddress = \"{address}\"\ndatacenter = \"{datacenter}\"\nweight = {weight}\npriority = {priority}\n"
            );
        }
    }
    if policy == "region-probabilities" {
        for (table, skew) in [("default", 1.0), ("europe", 3.0), ("asia", 0.2)] {
            text += &format!("[service.probabilities.{table}]\n");
            for index in 0..replicas {
                let probability = 1.0 + skew * index as f64;
                for family in ["4", "6"] {
                    text += &format!("r{index}-{family} = {{ probability = {probability}, ttl = {} }}\n", 30 + 10 * index);
                }
            }
        }
    }
    text
}
