//! Routed answers in the kernel, run with BPF_PROG_TEST_RUN from clients
//! in several classes (regions of their own, a region without a row of
//! its own, no region; IPv4 and IPv6): every reply is one the user-space
//! path gives that client, byte for byte, and over 20,000 runs per class
//! and question the kernel draws each variant with its configured
//! probability (chi-square at 0.1 %: the kernel's random source cannot be
//! seeded). Policies that decide per query pass up. A service of
//! second-tier redirectors answers an AAAA question with the CNAME of one
//! (IPv4-addressed) redirector in the kernel too. Needs root, as
//! tests/suite/answer.rs.

use crate::common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use common::*;
use pharos_answer::Snapshot;
use pharos_route::model::Answering;
use pharos_route::{Policy, ProbabilityTable, RegionRow, Regions, Replica, Routes, Service};
use pharos_xdp::routed::routed_question;
use pharos_xdp::{KernelPath, kernel_path};

const ZONE: &str = "@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.53\n";
const RUNS: usize = 20_000;

/// Chi-square at 0.001 % for 1 to 15 degrees of freedom: one check per
/// (name, client) pair, on draws the kernel's unseedable random source
/// makes, so each check is strict enough that the whole test fails by
/// chance less than once in a thousand runs (at 20,000 draws it still
/// finds a 1.6 % bias between two equal shares).
const CHI_SQUARE_0_001_PERCENT: [f64; 15] =
    [19.511, 23.026, 25.902, 28.473, 30.856, 33.107, 35.259, 37.332, 39.341, 41.296, 43.206, 45.076, 46.912, 48.716, 50.493];

fn replica(id: &str, address: &str, weight: u32, priority: u32) -> Replica {
    Replica { weight, priority, ..Replica::new(id, address.parse().unwrap()) }
}

fn replicas() -> Vec<Replica> {
    vec![
        replica("a", "192.0.2.1", 1, 1),
        replica("b", "192.0.2.2", 2, 1),
        replica("c", "192.0.2.3", 3, 2),
        replica("d", "2001:db8::d", 1, 1),
        replica("e", "2001:db8::e", 3, 2),
    ]
}

/// Regions 1 and 2 in IPv4, 3 in IPv6; region probabilities have rows for
/// 1 and 3 only, so region 2 gets the default row, as do clients no
/// region claims.
fn routes() -> Routes {
    routes_placing_198_51_100_in(1)
}

/// As [`routes`], 198.51.100.0/24 in `region`.
fn routes_placing_198_51_100_in(region: u32) -> Routes {
    let mut regions = Regions::default();
    regions.add_prefix("198.51.100.0".parse().unwrap(), 24, region);
    regions.add_prefix("203.0.113.0".parse().unwrap(), 24, 2);
    regions.add_prefix("2001:db8:1::".parse().unwrap(), 48, 3);
    let row = |probability, ttl| RegionRow { probability, ttl };
    let table = ProbabilityTable {
        default: vec![row(0.5, 100), row(0.3, 100), row(0.2, 100), row(0.5, 100), row(0.5, 100)],
        regions: [
            (1, vec![row(0.7, 10), row(0.0, 20), row(0.3, 30), row(0.0, 40), row(0.0, 50)]),
            (3, vec![row(0.0, 10), row(0.0, 20), row(0.0, 30), row(0.1, 40), row(0.9, 50)]),
        ]
        .into_iter()
        .collect(),
    };
    let mut routes = Routes { regions: Arc::new(regions), ..Routes::default() };
    for (name, policy, max_answers) in [
        ("geo", Policy::RegionProbabilities(table), 2),
        ("weighted", Policy::Weighted, 1),
        ("failover", Policy::Failover, 0),
        ("static", Policy::Static, 0),
        ("rotating", Policy::round_robin(), 0),
    ] {
        let service = Service::new(format!("{name}.example.test."), replicas(), policy, Answering::plain(300, max_answers));
        routes.services.insert(wire_name(&format!("{name}.example.test")).into(), service.into());
    }
    let redirector = |id: &str, address: &str, zone: &str| Replica {
        cname: Some(wire_name(&format!("tiered.{zone}.example.test")).into()),
        ..replica(id, address, 1, 1)
    };
    let redirectors = vec![redirector("eu", "192.0.2.101", "eu"), redirector("us", "192.0.2.102", "us")];
    let tiered = Service::new("tiered.example.test.".into(), redirectors, Policy::Weighted, Answering::plain(300, 0));
    routes.services.insert(wire_name("tiered.example.test").into(), tiered.into());
    routes
}

/// Clients: region 1 and 2, no region (IPv4); region 3 and no region (IPv6).
fn clients() -> Vec<IpAddr> {
    ["198.51.100.7", "203.0.113.9", "192.0.2.200", "2001:db8:1::7", "2001:db8:2::7"].iter().map(|text| text.parse().unwrap()).collect()
}

fn query(name: &str, qtype: u16) -> Vec<u8> {
    [&[0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], &wire_name(name), &qtype.to_be_bytes(), &[0, 1]].concat()
}

/// The variants' probabilities for the class `client` is in: from the
/// kernel's form of the question (the thresholds it draws against) and
/// the region `locate` gives the client.
fn class_shares(snapshot: &Snapshot, name: &str, qtype: u16, client: IpAddr) -> Vec<(Vec<u8>, f64)> {
    let service = snapshot.routes.service(&wire_name(name)).unwrap();
    let routed = routed_question(service, &wire_name(name), qtype).unwrap();
    let region = pharos_route::locate::locate(&pharos_route::Asker::from_source(client), &snapshot.routes.regions, None).region;
    let (_, variants) = routed.classes.iter().find(|(class, _)| *class == region).or_else(|| routed.classes.last()).unwrap();
    let mut below = 0u64;
    variants
        .iter()
        .map(|(threshold, answer)| {
            let share = (u64::from(*threshold) + 1 - below) as f64 / (1u64 << 32) as f64;
            below = u64::from(*threshold) + 1;
            (answer.body().to_vec(), share)
        })
        .collect()
}

const ROUTED: [(&str, u16); 6] = [
    ("geo.example.test", 1),
    ("geo.example.test", 28),
    ("weighted.example.test", 1),
    ("failover.example.test", 1),
    ("static.example.test", 28),
    ("tiered.example.test", 28),
];

#[test]
fn every_routed_reply_is_one_user_space_gives_that_client() {
    let snapshot = snapshot_of(ZONE, routes());
    let Some(fast_path) = loaded(&snapshot) else { return };
    for (name, qtype) in ROUTED {
        for client in clients() {
            let message = query(name, qtype);
            let variants = class_shares(&snapshot, name, qtype, client).len();
            let possible = user_space_replies(&snapshot, client, &message, variants);
            for _ in 0..200 {
                let reply = kernel_reply(&fast_path, client, &message);
                assert!(possible.contains(&reply), "{name} {qtype} from {client}: {reply:02x?} is no user-space reply");
            }
        }
    }
    let counters = fast_path.counters().unwrap();
    assert_eq!(counters.interfaces[0].answered_routed, (ROUTED.len() * clients().len() * 200) as u64);
}

#[test]
fn the_kernel_draws_each_variant_with_its_probability() {
    let snapshot = snapshot_of(ZONE, routes());
    let Some(fast_path) = loaded(&snapshot) else { return };
    for (name, qtype) in ROUTED {
        for client in clients() {
            let shares = class_shares(&snapshot, name, qtype, client);
            if shares.len() < 2 {
                continue;
            }
            let message = query(name, qtype);
            let body_at = message.len();
            let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
            for _ in 0..RUNS {
                *counts.entry(kernel_reply(&fast_path, client, &message)[body_at..].to_vec()).or_default() += 1;
            }
            let chi_square: f64 = shares
                .iter()
                .map(|(body, share)| {
                    let expected = share * RUNS as f64;
                    let seen = counts.get(body).copied().unwrap_or(0) as f64;
                    (seen - expected).powi(2) / expected
                })
                .sum();
            let critical = CHI_SQUARE_0_001_PERCENT[shares.len() - 2];
            assert!(
                chi_square < critical,
                "{name} {qtype} from {client}: chi-square {chi_square:.2} >= {critical} ({counts:?} vs {shares:?})"
            );
            assert_eq!(counts.len(), shares.len(), "{name} {qtype} from {client}: only the listed variants");
        }
    }
}

#[test]
fn policies_that_decide_per_query_pass_up_and_explain_says_so() {
    let snapshot = snapshot_of(ZONE, routes());
    // Region 1's row draws a or c first and then the other (b weighs 0):
    // two orders; region 3's row weighs a, b and c all 0, so every order
    // of two of them is as likely, as it is by the default row: six each.
    assert_eq!(
        kernel_path(&snapshot, &wire_name("rotating.example.test"), 1).to_string(),
        "passes up to user space: round robin keeps state"
    );
    assert_eq!(kernel_path(&snapshot, &wire_name("geo.example.test"), 1), KernelPath::Routed { classes: 3, variants: 2 + 6 + 6 });
    assert_eq!(
        kernel_path(&snapshot, &wire_name("static.example.test"), 28).to_string(),
        "answered in the kernel (routed: 1 classes, 1 variants)"
    );
    assert!(kernel_path(&snapshot, &wire_name("static.example.test"), 15).to_string().contains("A and AAAA questions only"));
    let Some(fast_path) = loaded(&snapshot) else { return };
    let (action, _) = run(&fast_path, &frame_from(clients()[0], &query("rotating.example.test", 1)));
    assert_eq!(action, XDP_PASS);
    let occupancy = fast_path.occupancy();
    assert!(occupancy.routed_classes > 4 && occupancy.variants > 10, "{occupancy:?}");
}

#[test]
fn a_client_whose_region_moves_is_answered_by_its_new_class_after_the_sync() {
    let before = snapshot_of(ZONE, routes());
    let after = snapshot_of(ZONE, routes_placing_198_51_100_in(2));
    let Some(mut fast_path) = loaded(&before) else { return };
    let client = clients()[0];
    let message = query("geo.example.test", 1);
    let replies = |snapshot| user_space_replies(snapshot, client, &message, class_shares(snapshot, "geo.example.test", 1, client).len());
    let (region_1, default_row) = (replies(&before), replies(&after));
    assert!(region_1.is_disjoint(&default_row), "the two classes' replies differ (in their TTLs)");
    // The first queries leave the client's class in the kernel's cache.
    for _ in 0..50 {
        assert!(region_1.contains(&kernel_reply(&fast_path, client, &message)));
    }
    fast_path.sync(&after).unwrap();
    for _ in 0..200 {
        let reply = kernel_reply(&fast_path, client, &message);
        assert!(default_row.contains(&reply), "{reply:02x?} is not the new class's");
    }
}
