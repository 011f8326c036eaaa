//! The proximity policies through the real server: BGP tables loaded in
//! the background (and a bad table leaving the good one serving), latency
//! measurements through the API (checked, live at once, aged out, kept
//! across `kill -9`), and nearest by a real MaxMind City database.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use domain::base::iana::Rtype;
use serde_json::{Value, json};

use crate::common;
use common::*;

const TOKEN: &str = "proximity-token";

/// The hand-made BGP table of crates/route/tests/proximity.rs: from the
/// client AS 100 (10.0.0.0/8), AS 200 (fra) and 500 (ams) are one hop
/// away, AS 400 (iad) two.
const RIB: &str = "\
TABLE_DUMP2|1277971199|B|192.0.2.9|300|10.0.0.0/8|300 200 100|IGP|192.0.2.9|0|0||NAG||
TABLE_DUMP2|1277971199|B|192.0.2.9|400|10.0.0.0/8|400 500 100|IGP|192.0.2.9|0|0||NAG||
TABLE_DUMP2|1277971199|B|192.0.2.9|300|203.0.113.0/24|300 400|IGP|192.0.2.9|0|0||NAG||
";

fn city_database() -> PathBuf {
    pharos_test_data::fixture("maxmind-test-GeoIP2-City-Test.mmdb")
}

/// A server with three data centers and one service per proximity policy,
/// each falling back to the declared order.
fn start_proximity(rib: &Path) -> (Pharos, String) {
    let replicas = r#"
[[service.replica]]
id = "iad"
address = "192.0.2.30"
datacenter = "iad"
[[service.replica]]
id = "fra"
address = "192.0.2.10"
datacenter = "fra"
[[service.replica]]
id = "sea"
address = "192.0.2.20"
datacenter = "sea"
"#;
    let services: String = [("near", "shortest-as-path"), ("fast", "lowest-latency"), ("geo", "nearest")]
        .iter()
        .map(|(name, policy)| {
            format!("[[service]]\nname = \"{name}.example.test\"\npolicy = \"{policy}\"\nfallback = \"static\"\n{replicas}")
        })
        .collect();
    let extra = format!(
        r#"[store]
path = "state.sqlite"
[latency]
max_age_seconds = 30
[bgp]
table = "{rib}"
special_purpose_origins = true
[geo]
database = "{geo}"
[[datacenter]]
id = "iad"
latitude = 38.94
longitude = -77.46
asn = 400
[[datacenter]]
id = "fra"
latitude = 50.03
longitude = 8.57
asn = 200
[[datacenter]]
id = "sea"
latitude = 47.45
longitude = -122.31
{services}"#,
        rib = rib.display(),
        geo = city_database().display(),
    );
    start_with_api(TOKEN, &extra)
}

fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    request(method, url, Some(TOKEN), body)
}

/// The addresses answered for `name` to a client in `subnet`, and the ECS
/// scope the answer came back with.
fn answer(pharos: &Pharos, name: &str, subnet: (&str, u8)) -> (Vec<IpAddr>, u8) {
    let response = Asked::new(pharos.address).ask(&ecs_query(1, name, Rtype::A, Some((subnet.0.parse().unwrap(), subnet.1))));
    let addresses =
        response.answer().unwrap().limit_to::<domain::rdata::A>().map(|record| IpAddr::V4(record.unwrap().data().addr())).collect();
    (addresses, echoed_subnet(&response).expect("ECS echoed").scope_prefix_len())
}

fn first(pharos: &Pharos, name: &str, subnet: (&str, u8)) -> String {
    answer(pharos, name, subnet).0[0].to_string()
}

fn bgp_state(api: &str) -> Value {
    call("GET", &format!("{api}/v1/data"), None).1["bgp"].clone()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn shortest_as_path_serves_from_tables_loaded_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let rib = dir.path().join("rib.txt");
    std::fs::write(&rib, RIB).unwrap();
    let (pharos, api) = start_proximity(&rib);
    wait_until("the BGP tables are loaded", || bgp_state(&api)["state"] == "loaded");
    assert_eq!(bgp_state(&api)["loaded"]["routes"], 3);
    // AS 100 -> fra 1 hop, iad 2, sea (no AS) last; the answer holds for 10/8.
    let (addresses, scope) = answer(&pharos, "near.example.test", ("10.1.2.0", 24));
    assert_eq!((addresses, scope), (["192.0.2.10", "192.0.2.30", "192.0.2.20"].map(|text| text.parse().unwrap()).to_vec(), 8));
    let (status, explained) = call("GET", &format!("{api}/v1/explain?name=near.example.test&client=10.1.2.0/24"), None);
    let steps = explained["steps"].to_string();
    assert!(status == 200 && steps.contains("client AS100 (BGP prefix /8)") && steps.contains("iad 2"), "{explained}");
    assert!(pharos.log().contains("BGP tables loaded"), "{}", pharos.log());

    // A table that does not parse leaves the loaded one serving.
    std::fs::write(&rib, "TABLE_DUMP2|not a route\n").unwrap();
    assert_eq!(call("POST", &format!("{api}/v1/reload"), None).0, 200);
    wait_until("the bad table is reported", || bgp_state(&api)["state"] == "failed");
    let error = bgp_state(&api)["error"].as_str().unwrap().to_string();
    assert!(error.contains("rib.txt"), "the error names the file: {error}");
    assert_eq!(first(&pharos, "near.example.test", ("10.1.2.0", 24)), "192.0.2.10");
    assert_eq!(bgp_state(&api)["loaded"]["routes"], 3);
}

#[test]
fn measurements_steer_answers_are_checked_age_out_and_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let rib = dir.path().join("rib.txt");
    std::fs::write(&rib, RIB).unwrap();
    let (pharos, api) = start_proximity(&rib);
    let measurements = format!("{api}/v1/measurements");
    assert_eq!(first(&pharos, "fast.example.test", ("10.1.2.0", 24)), "192.0.2.30", "no measurements: the declared order");
    let batch = json!([
        { "subnet": "10.1.0.0/16", "datacenter": "iad", "rtt_ms": 80.0 },
        { "subnet": "10.1.0.0/16", "datacenter": "fra", "rtt_ms": 9.5 },
        { "subnet": "10.1.0.0/16", "datacenter": "sea", "rtt_ms": 150.0 },
    ]);
    assert_eq!(call("POST", &measurements, Some(batch)), (200, json!({ "accepted": 3 })));
    let (addresses, scope) = answer(&pharos, "fast.example.test", ("10.1.2.0", 24));
    assert_eq!((addresses[0].to_string(), scope), ("192.0.2.10".to_string(), 16), "fra is fastest; the scope is the measured /16");

    // One bad row refuses the whole batch: the good row before it is not kept.
    let bad = json!([
        { "subnet": "10.1.0.0/16", "datacenter": "sea", "rtt_ms": 1.0 },
        { "subnet": "10.1.0.0/16", "datacenter": "mars", "rtt_ms": 1.0 },
    ]);
    let (status, reply) = call("POST", &measurements, Some(bad));
    assert_eq!((status, reply["field"].as_str()), (422, Some("measurements[1].datacenter")), "{reply}");
    let (status, reply) = call("POST", &measurements, Some(json!([{ "subnet": "10.1.0.1/16", "datacenter": "sea", "rtt_ms": 1.0 }])));
    assert_eq!((status, reply["field"].as_str()), (422, Some("measurements[0].subnet")), "{reply}");
    assert_eq!(first(&pharos, "fast.example.test", ("10.1.2.0", 24)), "192.0.2.10");

    // Acknowledged measurements survive a crash.
    let pharos = pharos.kill_and_restart();
    assert_eq!(first(&pharos, "fast.example.test", ("10.1.2.0", 24)), "192.0.2.10");

    // A measurement 27 s old (of 30 allowed) steers for about 3 s more.
    let aging = json!([{ "subnet": "10.2.0.0/16", "datacenter": "sea", "rtt_ms": 1.0, "measured_at": unix_now() - 27 }]);
    assert_eq!(call("POST", &measurements, Some(aging)).0, 200);
    assert_eq!(first(&pharos, "fast.example.test", ("10.2.3.0", 24)), "192.0.2.20");
    wait_until("the measurement ages out", || first(&pharos, "fast.example.test", ("10.2.3.0", 24)) == "192.0.2.30");
    let stale = json!([{ "subnet": "10.3.0.0/16", "datacenter": "sea", "rtt_ms": 1.0, "measured_at": unix_now() - 31 }]);
    assert_eq!(call("POST", &measurements, Some(stale)).0, 200);
    assert_eq!(first(&pharos, "fast.example.test", ("10.3.0.0", 24)), "192.0.2.30", "too old on arrival: ignored");
}

/// The value of the one sample of `family` in a scrape.
fn scraped(api: &str, family: &str) -> Option<f64> {
    let (status, text) = call("GET", &format!("{api}/metrics"), None);
    assert_eq!(status, 200, "{text}");
    let text = text.as_str().expect("the text format").to_string();
    text.lines().find_map(|line| line.strip_prefix(family)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_data_source_says_how_old_its_data_is() {
    let dir = tempfile::tempdir().unwrap();
    let rib = dir.path().join("rib.txt");
    std::fs::write(&rib, RIB).unwrap();
    let (_pharos, api) = start_proximity(&rib);
    let geo = call("GET", &format!("{api}/v1/data"), None).1["geo"].clone();
    assert_eq!(geo["file"], city_database().display().to_string());
    let (made_at, loaded_at) = (geo["made_at"].as_u64().unwrap(), geo["loaded_at"].as_u64().unwrap());
    assert!(made_at > 1_000_000_000 && made_at < loaded_at, "the test database's build time: {geo}");
    let age = scraped(&api, "pharos_geo_database_age_seconds").expect("a MaxMind DB is in use");
    let expected = (unix_now() - made_at) as f64;
    assert!((expected - 10.0..=expected).contains(&age), "{age} s old, built at {made_at}");

    assert_eq!(scraped(&api, "pharos_latency_oldest_measurement_age_seconds"), None, "no measurement yet");
    let measured = json!([
        { "subnet": "10.2.0.0/16", "datacenter": "sea", "rtt_ms": 1.0, "measured_at": unix_now() - 20 },
        { "subnet": "10.3.0.0/16", "datacenter": "sea", "rtt_ms": 1.0, "measured_at": unix_now() - 5 },
    ]);
    assert_eq!(call("POST", &format!("{api}/v1/measurements"), Some(measured)).0, 200);
    let oldest = scraped(&api, "pharos_latency_oldest_measurement_age_seconds").expect("measurements are in use");
    // Whole seconds on both sides: a second either way.
    assert!((19.0..30.0).contains(&oldest), "the oldest was measured 20 s before it was posted: {oldest}");
}

#[test]
fn nearest_uses_the_city_coordinates_of_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let rib = dir.path().join("rib.txt");
    std::fs::write(&rib, RIB).unwrap();
    let (pharos, api) = start_proximity(&rib);
    // Milton, WA in the test database (a /29): sea, then iad, then fra.
    let (addresses, scope) = answer(&pharos, "geo.example.test", ("216.160.83.56", 32));
    assert_eq!((addresses, scope), (["192.0.2.20", "192.0.2.30", "192.0.2.10"].map(|text| text.parse().unwrap()).to_vec(), 29));
    // London (a /31): fra first.
    assert_eq!(first(&pharos, "geo.example.test", ("81.2.69.142", 32)), "192.0.2.10");
    let (_, explained) = call("GET", &format!("{api}/v1/explain?name=geo.example.test&client=81.2.69.142"), None);
    assert!(explained["steps"].to_string().contains("client at 51.5142, -0.0931"), "{explained}");
}

/// The real RouteViews JINX table holds default routes (0.0.0.0/0 from
/// AS30844, ::/0 from AS37105) and leaked special-purpose /30s: none of
/// them is taken for a client's origin, so a client only a default route
/// covers gets the fallback, and the API counts what each rule dropped.
/// Its extract in tests/data holds those routes and Google's 8.8.8.0/24.
#[test]
fn a_default_route_is_no_clients_origin() {
    let jinx = pharos_test_data::fixture("jinx-extract.ribs.bz2");
    let extra = format!(
        "[bgp]\ntable = \"{}\"\n[[datacenter]]\nid = \"goo\"\nlatitude = 37.4\nlongitude = -122.1\nasn = 15169\n\
         [[service]]\nname = \"near.example.test\"\npolicy = \"shortest-as-path\"\nfallback = \"static\"\n\
         [[service.replica]]\nid = \"first\"\naddress = \"192.0.2.10\"\n\
         [[service.replica]]\nid = \"goo\"\naddress = \"192.0.2.20\"\ndatacenter = \"goo\"\n",
        jinx.display()
    );
    let (pharos, api) = start_with_api(TOKEN, &extra);
    wait_until("the JINX table is loaded", || bgp_state(&api)["state"] == "loaded");
    let dropped = &bgp_state(&api)["loaded"]["routes_without_origin"];
    assert_eq!(*dropped, json!({ "default_routes": 2, "too_short": 0, "special_purpose": 15 }), "{}", bgp_state(&api));

    // 240.0.0.0/4 is in no route but AS30844's default: the fallback decides.
    assert_eq!(first(&pharos, "near.example.test", ("240.0.0.1", 32)), "192.0.2.10");
    let (_, explained) = call("GET", &format!("{api}/v1/explain?name=near.example.test&client=240.0.0.1"), None);
    let steps = explained["steps"].to_string();
    assert!(steps.contains("AS unknown (only a default route covers it") && steps.contains("falling back to policy static"), "{explained}");
    // Google's own prefix: AS15169, zero hops to the goo data center.
    assert_eq!(first(&pharos, "near.example.test", ("8.8.8.8", 32)), "192.0.2.20");
}
