//! The proximity policies on data whose answers can be worked out by hand:
//! a small BGP table, a few latency measurements, and MaxMind's City test
//! database (its test copy in tests/data).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use pharos_control::build::DataSources;
use pharos_control::services::build_routes;
use pharos_model::spec::{DataCenterSpec, Declared, ReplicaSpec, ServiceSpec};
use pharos_route::as_paths::AsPaths;
use pharos_route::latency::{Latencies, Measured, MeasurementBook};
use pharos_route::sources::GeoDatabase;
use pharos_route::{Asker, Decision, Explanation, Family, Routes, route};
use rand::SeedableRng;
use rand::rngs::SmallRng;

fn datacenter(id: &str, latitude: f64, longitude: f64, asn: Option<u32>) -> DataCenterSpec {
    DataCenterSpec { id: id.into(), latitude, longitude, asn }
}

fn replica(id: &str, address: &str, datacenter: Option<&str>, weight: u32) -> ReplicaSpec {
    ReplicaSpec { datacenter: datacenter.map(Into::into), weight, ..ReplicaSpec::new(id, address.parse().unwrap()) }
}

fn service(policy: &str, replicas: Vec<ReplicaSpec>) -> ServiceSpec {
    ServiceSpec { ttl: 60, fallback: Some("static".into()), ..ServiceSpec::new("www.example.test", policy, replicas) }
}

fn routes(datacenters: &[DataCenterSpec], spec: ServiceSpec, sources: &DataSources) -> Routes {
    let declared = Declared { datacenters, services: &[Arc::new(spec)], ..Declared::default() };
    build_routes(&declared, sources, |name| Ok(name.as_bytes().into())).unwrap()
}

/// The decision for `client`, its replica ids in order, and the explanation.
fn ask(routes: &Routes, client: &str, seed: u64) -> (Decision, Vec<String>, String) {
    let service = &routes.services[&b"www.example.test"[..]];
    let address: IpAddr = client.parse().unwrap();
    let mut explanation = Explanation::default();
    let mut rng = SmallRng::seed_from_u64(seed);
    let decision = route(routes, service, Family::V4, &Asker::from_source(address), &mut rng, Some(&mut explanation)).decision;
    let ids = decision.replicas.iter().map(|&index| service.replicas[index].id.clone()).collect();
    (decision, ids, explanation.to_string())
}

/// A `bgpdump -m` table. Paths (peer first, origin last): 300 200 100 and
/// 400 500 100 for 10.0.0.0/8, 300 400 for 203.0.113.0/24, and a lone
/// AS 999 for 198.51.100.0/24. From AS 100, ASes 200 and 500 are one hop
/// away and 300 and 400 two; 999 is not connected.
fn bgp_table(dir: &Path) -> AsPaths {
    let routes = [
        ("300", "10.0.0.0/8", "300 200 100"),
        ("400", "10.0.0.0/8", "400 500 100"),
        ("300", "203.0.113.0/24", "300 400"),
        ("999", "198.51.100.0/24", "999"),
    ];
    let text: String = routes
        .iter()
        .map(|(peer_as, prefix, path)| format!("TABLE_DUMP2|1277971199|B|192.0.2.9|{peer_as}|{prefix}|{path}|IGP|192.0.2.9|0|0||NAG||\n"))
        .collect();
    let path = dir.join("rib.txt");
    std::fs::write(&path, text).unwrap();
    // Documentation and private space, which real tables' rules drop as origins.
    let lab = pharos_bgp::OriginRules { special_purpose_origins: true, ..Default::default() };
    AsPaths::new(Some(Arc::new(pharos_bgp::load(&path, lab, |_| {}).unwrap())))
}

#[test]
fn shortest_as_path_orders_by_hops_and_falls_back_without_an_as() {
    let dir = tempfile::tempdir().unwrap();
    let sources = DataSources { as_paths: Some(Arc::new(bgp_table(dir.path()))), ..DataSources::default() };
    let datacenters =
        [datacenter("fra", 50.1, 8.7, Some(200)), datacenter("ams", 52.4, 4.9, Some(500)), datacenter("iad", 38.9, -77.4, Some(400))];
    let replicas = vec![
        replica("far", "192.0.2.3", Some("iad"), 1),
        replica("unplaced", "192.0.2.4", None, 1),
        replica("near-fra", "192.0.2.1", Some("fra"), 1),
        replica("near-ams", "192.0.2.2", Some("ams"), 3),
    ];
    let routes = routes(&datacenters, service("shortest-as-path", replicas), &sources);
    let mut firsts = BTreeMap::new();
    for seed in 0..400 {
        let (decision, ids, _) = ask(&routes, "10.1.2.3", seed);
        assert_eq!(decision.scope, 8, "the answer holds for all of 10.0.0.0/8");
        assert_eq!(ids[2..], ["far", "unplaced"], "two hops, then no AS");
        *firsts.entry(ids[0].clone()).or_insert(0) += 1;
    }
    // The one-hop tie goes by weight, 3:1: near-ams first about 300 times
    // in 400 (binomial sd 8.7, so 250-350 is beyond five sd).
    assert!((250..=350).contains(&firsts["near-ams"]), "{firsts:?}");
    let (_, _, explanation) = ask(&routes, "10.1.2.3", 0);
    assert!(
        explanation.contains("client AS100 (BGP prefix /8)") && explanation.contains("far 2") && explanation.contains("unplaced unknown"),
        "{explanation}"
    );
    let (decision, ids, explanation) = ask(&routes, "192.0.2.200", 0);
    assert_eq!(ids, ["far", "unplaced", "near-fra", "near-ams"], "the static fallback keeps the declared order");
    assert!(explanation.contains("in no BGP prefix") && explanation.contains("falling back to policy static"), "{explanation}");
    assert!(decision.scope > 0, "the miss is scoped too");
    let (_, _, explanation) = ask(&routes, "198.51.100.7", 0);
    assert!(explanation.contains("AS999 reaches none of the replicas' ASes"), "{explanation}");
}

#[test]
fn shortest_as_path_falls_back_while_tables_load() {
    let sources = DataSources { as_paths: Some(Arc::new(AsPaths::new(None))), ..DataSources::default() };
    let spec = service("shortest-as-path", vec![replica("a", "192.0.2.1", Some("fra"), 1)]);
    let routes = routes(&[datacenter("fra", 50.1, 8.7, Some(200))], spec, &sources);
    let (_, ids, explanation) = ask(&routes, "10.1.2.3", 0);
    assert_eq!(ids, ["a"]);
    assert!(explanation.contains("not loaded (yet)"), "{explanation}");
}

#[test]
fn lowest_latency_picks_the_fastest_data_center_with_a_serving_replica() {
    let mut book = MeasurementBook::new();
    let mut measure = |subnet: &str, length: u8, datacenter: &str, rtt_ms: f64| {
        book.entry((subnet.parse().unwrap(), length)).or_default().insert(datacenter.into(), Measured { rtt_ms, at: 1_000 });
    };
    measure("10.1.0.0", 16, "iad", 80.0);
    measure("10.1.0.0", 16, "fra", 12.0);
    measure("10.1.0.0", 16, "sin", 3.0);
    measure("10.2.0.0", 16, "sin", 1.0);
    let sources = DataSources { latencies: Arc::new(Latencies::build(&book, 1_100, 600)), ..DataSources::default() };
    let datacenters = [datacenter("fra", 50.1, 8.7, None), datacenter("iad", 38.9, -77.4, None), datacenter("sin", 1.3, 103.8, None)];
    let mut down_in_sin = replica("s", "192.0.2.9", Some("sin"), 1);
    down_in_sin.down = true;
    let replicas = vec![replica("i", "192.0.2.3", Some("iad"), 1), replica("f", "192.0.2.1", Some("fra"), 1), down_in_sin];
    let routes = routes(&datacenters, service("lowest-latency", replicas), &sources);
    let (decision, ids, explanation) = ask(&routes, "10.1.200.1", 0);
    assert_eq!((ids, decision.scope), (vec!["f".to_string(), "i".to_string()], 16), "sin is fastest but its only replica is down");
    assert!(explanation.contains("measured from 10.1.0.0/16: sin 3.0 ms (100 s old), fra 12.0 ms"), "{explanation}");
    assert!(explanation.contains("lowest RTT with a serving replica: fra (12.0 ms)"), "{explanation}");
    let (_, ids, explanation) = ask(&routes, "10.2.0.1", 0);
    assert_eq!(ids, ["i", "f"], "only sin is measured from 10.2/16: the static fallback");
    assert!(explanation.contains("no measured data center holds a serving replica"), "{explanation}");
    let (decision, _, explanation) = ask(&routes, "192.0.2.1", 0);
    assert!(explanation.contains("no fresh measurements"), "{explanation}");
    assert_eq!(decision.scope, 16, "every address sharing 16 bits misses every measured /16 too");
}

#[test]
fn nearest_orders_by_great_circle_distance_from_the_maxmind_city() {
    let city = GeoDatabase::from_bytes(std::fs::read(pharos_test_data::fixture("maxmind-test-GeoIP2-City-Test.mmdb")).unwrap()).unwrap();
    let sources = DataSources { geo: Some(Arc::new(city)), ..DataSources::default() };
    let datacenters =
        [datacenter("lhr", 51.47, -0.45, None), datacenter("sea", 47.45, -122.31, None), datacenter("syd", -33.95, 151.18, None)];
    let replicas = vec![
        replica("syd", "192.0.2.3", Some("syd"), 1),
        replica("lhr", "192.0.2.1", Some("lhr"), 1),
        replica("sea", "192.0.2.2", Some("sea"), 1),
    ];
    let routes = routes(&datacenters, service("nearest", replicas), &sources);
    // 216.160.83.56 is Milton, WA (47.2513, -122.3149) in the test database, a /29.
    let (decision, ids, explanation) = ask(&routes, "216.160.83.56", 0);
    assert_eq!((ids, decision.scope), (vec!["sea".to_string(), "lhr".to_string(), "syd".to_string()], 29));
    assert!(
        explanation.contains("client at 47.2513, -122.3149 (MaxMind DB, scope /29)") && explanation.contains("sea 22 km"),
        "{explanation}"
    );
    // 81.2.69.142 is London (51.5142, -0.0931), a /31.
    let (decision, ids, _) = ask(&routes, "81.2.69.142", 0);
    assert_eq!((ids[0].as_str(), decision.scope), ("lhr", 31));
    let (_, ids, explanation) = ask(&routes, "192.0.2.1", 0);
    assert_eq!(ids, ["syd", "lhr", "sea"], "not in the database: the static fallback");
    assert!(explanation.contains("no coordinates for the client"), "{explanation}");
}

#[test]
fn proximity_policies_need_their_data_and_a_plain_fallback() {
    let error = |spec: ServiceSpec| {
        let declared = Declared { services: &[Arc::new(spec)], ..Declared::default() };
        build_routes(&declared, &DataSources::default(), |name| Ok(name.as_bytes().into())).unwrap_err().to_string()
    };
    let one = || vec![replica("a", "192.0.2.1", None, 1)];
    assert!(error(service("shortest-as-path", one())).contains(".policy: needs BGP tables ([bgp] table)"));
    assert!(error(service("nearest", one())).contains(".policy: needs a MaxMind City database"));
    let mut chained = service("lowest-latency", one());
    chained.fallback = Some("nearest".into());
    assert!(error(chained).contains(".fallback: \"nearest\" needs a fallback itself"));
    let mut needless = service("weighted", one());
    needless.fallback = Some("static".into());
    assert!(error(needless).contains(".fallback: only the policies lowest-latency, shortest-as-path, nearest have a fallback"));
}
