//! The routing core through the real server: services answered by region
//! probabilities, EDNS Client Subnet in and scope out, per-region TTLs,
//! and declarations refused whole with the field named.

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use domain::base::iana::{Rcode, Rtype};
use domain::rdata::Aaaa;

use crate::common;
use common::declarations::Declarations;
use common::*;

/// Two regions by CIDR and one service over both families, seeded.
fn routing() -> String {
    let declarations = Declarations::new()
        .region(1, "europe", &["198.51.100.0/24"])
        .region(2, "asia", &["203.0.113.0/24", "2001:db8:aa::/48"])
        .service("svc.example.test")
        .policy("region-probabilities")
        .line("ttl = 300")
        .replica("fra", "192.0.2.10")
        .replica("sin", "192.0.2.20")
        .replica("iad", "192.0.2.30")
        .replica("six", "2001:db8::10")
        .probabilities("default", &[("fra", 0.2, 360), ("sin", 0.3, 360), ("iad", 0.5, 360), ("six", 1.0, 360)])
        .probabilities("europe", &[("fra", 0.6, 60), ("sin", 0.3, 120), ("iad", 0.1, 180)])
        .probabilities("asia", &[("sin", 1.0, 30)])
        .toml();
    format!("random_seed = 7\n{declarations}")
}

/// Pearson's chi-square statistic of observed counts against expected shares.
fn chi_square(observed: &[u32], expected_shares: &[f64]) -> f64 {
    let total: u32 = observed.iter().sum();
    observed.iter().zip(expected_shares).map(|(&count, share)| (count as f64 - share * total as f64).powi(2) / (share * total as f64)).sum()
}

#[test]
fn first_answers_follow_each_regions_probabilities_with_its_ttls() {
    let pharos = start(&routing());
    let asked = Asked::new(pharos.address);
    let replica = |last: u8| IpAddr::from([192, 0, 2, last]);
    // (client subnet, expected share of fra/sin/iad first, TTL of each as first)
    let cases = [("198.51.100.0", [0.6, 0.3, 0.1], [60, 120, 180]), ("192.0.2.0", [0.2, 0.3, 0.5], [360, 360, 360])];
    for (subnet, shares, ttls) in cases {
        let mut firsts = [0u32; 3];
        for id in 0..3000u16 {
            let response = asked.ask(&ecs_query(id, "svc.example.test", Rtype::A, Some((subnet.parse().unwrap(), 24))));
            let (first, ttl) = first_address_and_ttl(&response);
            let index = [10, 20, 30].iter().position(|&last| first == replica(last)).expect("a known replica");
            assert_eq!(ttl, ttls[index], "TTL of {first} first in {subnet}");
            assert_eq!(response.header_counts().ancount(), 3, "every v4 replica is listed");
            firsts[index] += 1;
        }
        // Two degrees of freedom; 13.82 is the 0.1% critical value.
        let statistic = chi_square(&firsts, &shares);
        assert!(statistic < 13.82, "{subnet}: first answers {firsts:?} vs shares {shares:?}, chi-square {statistic:.2}");
    }
    for id in 0..50u16 {
        let (first, ttl) =
            first_address_and_ttl(&asked.ask(&ecs_query(id, "svc.example.test", Rtype::A, Some(("203.0.113.0".parse().unwrap(), 24)))));
        assert_eq!((first, ttl), (replica(20), 30), "asia always gets sin first");
    }
}

#[test]
fn client_subnet_is_echoed_with_the_scope_the_answer_depends_on() {
    let pharos = start(&routing());
    let asked = Asked::new(pharos.address);
    let in_europe = asked.ask(&ecs_query(1, "svc.example.test", Rtype::A, Some(("198.51.100.0".parse().unwrap(), 24))));
    let echoed = echoed_subnet(&in_europe).expect("ECS echoed");
    assert_eq!((echoed.addr(), echoed.source_prefix_len(), echoed.scope_prefix_len()), ("198.51.100.0".parse().unwrap(), 24, 24));
    let in_asia_v6 = asked.ask(&ecs_query(2, "svc.example.test", Rtype::A, Some(("2001:db8:aa::".parse().unwrap(), 56))));
    assert_eq!(echoed_subnet(&in_asia_v6).unwrap().scope_prefix_len(), 48);
    assert_eq!(first_address_and_ttl(&in_asia_v6).1, 30, "an IPv6 client subnet places the client too");
    let zero = asked.ask(&ecs_query(3, "svc.example.test", Rtype::A, Some(("0.0.0.0".parse().unwrap(), 0))));
    assert_eq!(echoed_subnet(&zero).unwrap().scope_prefix_len(), 0, "a /0 subnet says nothing: scope 0");
    let static_data = asked.ask(&ecs_query(4, "www.example.test", Rtype::A, Some(("198.51.100.0".parse().unwrap(), 24))));
    assert_eq!(echoed_subnet(&static_data).unwrap().scope_prefix_len(), 0, "zone data is the same for everyone");
    let no_subnet = asked.ask(&ecs_query(5, "svc.example.test", Rtype::A, None));
    assert!(echoed_subnet(&no_subnet).is_none());
    // 198.51.100.0/20: the third octet's low bits (100 = 0b0110_0100) lie past the prefix.
    let malformed = asked.ask(&ecs_query(6, "svc.example.test", Rtype::A, Some(("198.51.100.0".parse().unwrap(), 20))));
    assert_eq!(malformed.header().rcode(), Rcode::FORMERR, "address bits past the source prefix (RFC 7871 section 6)");
}

#[test]
fn a_service_name_answers_its_other_types_like_any_name() {
    let pharos = start(&routing());
    let asked = Asked::new(pharos.address);
    let v6 = asked.ask(&ecs_query(1, "svc.example.test", Rtype::AAAA, None));
    let record = v6.answer().unwrap().limit_to::<Aaaa>().next().unwrap().unwrap();
    assert_eq!(record.data().addr().to_string(), "2001:db8::10");
    let txt = asked.ask(&ecs_query(2, "svc.example.test", Rtype::TXT, None));
    assert_eq!(
        (txt.header().rcode(), txt.header_counts().ancount(), txt.header_counts().nscount()),
        (Rcode::NOERROR, 0, 1),
        "NODATA with SOA"
    );
    assert!(txt.header().aa());
}

fn refused_declaration(extra: &str, zone: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("z.zone"), zone).unwrap();
    let config = dir.path().join("pharos.toml");
    std::fs::write(
        &config,
        format!("[server]\nlisten = [\"127.0.0.1:{}\"]\n{extra}\n[[zone]]\norigin = \"example.test\"\nfile = \"z.zone\"\n", free_port()),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["serve", "--config"]).arg(&config).output().unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_declarations_are_refused_naming_the_field() {
    let unknown_replica = routing().replace("sin = { probability = 1.0, ttl = 30 }", "nowhere = { probability = 1.0, ttl = 30 }");
    assert!(refused_declaration(&unknown_replica, ZONE).contains("service[svc.example.test].probabilities[asia][nowhere]: no replica"));
    let taken = routing().replace("svc.example.test", "www.example.test");
    let message = refused_declaration(&taken, ZONE);
    assert!(message.contains("service[www.example.test.].name: www.example.test. already has records"), "{message}");
    let outside = routing().replace("svc.example.test", "svc.example.org");
    assert!(refused_declaration(&outside, ZONE).contains("not inside any served zone"));
}

#[test]
fn client_subnets_from_untrusted_resolvers_are_ignored() {
    let untrusting = routing().replace("random_seed = 7", "random_seed = 7\nclient_subnet_trusted_from = [\"10.0.0.0/8\"]");
    let pharos = start(&untrusting);
    let asked = Asked::new(pharos.address);
    let mut ttls = std::collections::BTreeSet::new();
    for id in 0..40u16 {
        let response = asked.ask(&ecs_query(id, "svc.example.test", Rtype::A, Some(("203.0.113.0".parse().unwrap(), 24))));
        ttls.insert(first_address_and_ttl(&response).1);
        assert_eq!(echoed_subnet(&response).unwrap().scope_prefix_len(), 0);
    }
    assert_eq!(ttls.into_iter().collect::<Vec<_>>(), [360], "placed by the source 127.0.0.1 (unclassified), not by asia's subnet");
}

/// Regions by AS number (RouteViews 2014 table via pyasn) and by country and
/// continent (MaxMind's GeoIP2 Country test database), from their extracts
/// in tests/data.
fn geo_routing() -> String {
    let mmdb = pharos_test_data::fixture("maxmind-test-GeoIP2-Country-Test.mmdb");
    let asn_table = pharos_test_data::fixture("pyasn-ipasn-20140513-extract.dat.gz");
    let declarations = Declarations::new()
        .region_by(1, "google", "asns = [15169]")
        .region_by(2, "sweden", "countries = [\"SE\"]")
        .region_by(3, "europe", "continents = [\"EU\"]")
        .service("svc.example.test")
        .policy("region-probabilities")
        .replica("only", "192.0.2.10")
        .probabilities("default", &[("only", 1.0, 100)])
        .probabilities("google", &[("only", 1.0, 101)])
        .probabilities("sweden", &[("only", 1.0, 102)])
        .probabilities("europe", &[("only", 1.0, 103)])
        .toml();
    format!(
        "random_seed = 3\n[geo]\ndatabase = {:?}\nasn_table = {:?}\n{declarations}",
        mmdb.display().to_string(),
        asn_table.display().to_string()
    )
}

#[test]
fn regions_by_as_number_country_and_continent_from_real_data() {
    let pharos = start(&geo_routing());
    let asked = Asked::new(pharos.address);
    let ask = |subnet: &str, prefix: u8| asked.ask(&ecs_query(1, "svc.example.test", Rtype::A, Some((subnet.parse().unwrap(), prefix))));
    let ttl_for = |subnet: &str, prefix: u8| first_address_and_ttl(&ask(subnet, prefix)).1;
    assert_eq!(ttl_for("8.8.8.0", 24), 101, "8.8.8.0/24 originates in AS15169");
    assert_eq!(echoed_subnet(&ask("8.8.8.0", 24)).unwrap().scope_prefix_len(), 24, "the table's prefix is 8.8.8.0/24");
    // The test database covers small networks around its sample addresses.
    assert_eq!(ttl_for("89.160.20.112", 32), 102, "MaxMind's test data puts 89.160.20.112 in Sweden");
    assert_eq!(ttl_for("81.2.69.142", 32), 103, "and 81.2.69.142 in the United Kingdom, in Europe");
    assert_eq!(ttl_for("216.160.83.56", 32), 100, "and 216.160.83.56 in the United States: no region");
}

/// A classifier process: answers region 5 for 203.0.113.0/24, and too late
/// (after the timeout) for 198.18.0.0/24.
fn spawn_classifier() -> SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 0) {
                    let answer = match line.trim() {
                        "203.0.113.0/24" => "5\n",
                        "198.18.0.0/24" => {
                            std::thread::sleep(Duration::from_millis(400));
                            "5\n"
                        }
                        _ => "0\n",
                    };
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    address
}

fn classified_routing(classifier: SocketAddr) -> String {
    let declarations = Declarations::new()
        .region_by(5, "external", "")
        .service("svc.example.test")
        .policy("region-probabilities")
        .replica("only", "192.0.2.10")
        .probabilities("default", &[("only", 1.0, 100)])
        .probabilities("external", &[("only", 1.0, 55)])
        .toml();
    format!("random_seed = 5\n[classifier]\naddress = \"{classifier}\"\ntimeout_ms = 100\n{declarations}")
}

#[test]
fn an_external_classifier_places_clients_without_delaying_answers() {
    let pharos = start(&classified_routing(spawn_classifier()));
    let asked = Asked::new(pharos.address);
    let ttl_for = |subnet: &str| {
        first_address_and_ttl(&asked.ask(&ecs_query(1, "svc.example.test", Rtype::A, Some((subnet.parse().unwrap(), 24))))).1
    };
    assert_eq!(ttl_for("203.0.113.0"), 100, "unclassified until the classifier has answered");
    wait_until("the classifier's answer is used", || ttl_for("203.0.113.0") == 55);
    let response = asked.ask(&ecs_query(2, "svc.example.test", Rtype::A, Some(("203.0.113.0".parse().unwrap(), 24))));
    assert_eq!(echoed_subnet(&response).unwrap().scope_prefix_len(), 24, "answers are cached per /24");
    for _ in 0..10 {
        assert_eq!(ttl_for("198.18.0.0"), 100, "a classifier slower than the timeout leaves the client unclassified");
    }
}

#[test]
fn a_missing_classifier_leaves_clients_unclassified() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let pharos = start(&classified_routing(nobody));
    let asked = Asked::new(pharos.address);
    for id in 0..20u16 {
        let response = asked.ask(&ecs_query(id, "svc.example.test", Rtype::A, Some(("203.0.113.0".parse().unwrap(), 24))));
        assert_eq!(first_address_and_ttl(&response).1, 100);
    }
}
