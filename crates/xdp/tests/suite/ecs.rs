//! Queries with an EDNS Client Subnet option, run with BPF_PROG_TEST_RUN:
//! the kernel classes the client by the subnet when its sender is trusted
//! (by the snapshot's `trusted_subnet_senders`, or all when unset), else
//! by the packet's source, and echoes the subnet with the scope user space
//! writes. Every reply, static or routed, from trusted and untrusted
//! senders, over IPv4 and IPv6 subnets from /0 to full length, is one the
//! user-space path gives byte for byte; a routed class's replies come with
//! its probabilities (chi-square at 0.1 %). Needs root, as tests/suite/answer.rs.

use crate::common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use common::*;
use pharos_answer::Snapshot;
use pharos_route::locate::locate;
use pharos_route::model::Answering;
use pharos_route::prefix::prefix_set;
use pharos_route::{Asker, Policy, ProbabilityTable, RegionRow, Regions, Replica, Routes, Service};
use pharos_xdp::routed::routed_question;

const ZONE: &str =
    "@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.53\nhost 3600 IN A 192.0.2.80\n";
const RUNS: usize = 20_000;
/// Chi-square at 0.001 % for 1 to 3 degrees of freedom (as routed.rs's:
/// the kernel's draws cannot be seeded, and there is one check per case).
const CHI_SQUARE_0_001_PERCENT: [f64; 3] = [19.511, 23.026, 25.902];

/// Senders outside the trusted list of [`trusting_some`].
const UNTRUSTED_V4: &str = "192.0.2.99";
const UNTRUSTED_V6: &str = "2001:db8:2::99";

/// Questions: a static name, and services by region (A and AAAA) and by weight.
const QUESTIONS: [(&str, u16); 4] =
    [("host.example.test", 1), ("geo.example.test", 1), ("geo.example.test", 28), ("weighted.example.test", 1)];

/// Regions 1 (10/8 and 198.51.100/24), 2 (198.51.100.128/25) and 3
/// (2001:db8:1::/48); region probabilities have rows for 1 and 3.
fn routes() -> Routes {
    let mut regions = Regions::default();
    for (network, length, region) in [("10.0.0.0", 8, 1), ("198.51.100.0", 24, 1), ("198.51.100.128", 25, 2), ("2001:db8:1::", 48, 3)] {
        regions.add_prefix(network.parse().unwrap(), length, region);
    }
    let row = |probability, ttl| RegionRow { probability, ttl };
    let table = ProbabilityTable {
        default: vec![row(0.5, 100), row(0.5, 100), row(0.5, 100), row(0.5, 100)],
        regions: [
            (1, vec![row(0.7, 10), row(0.3, 30), row(0.0, 40), row(0.0, 50)]),
            (3, vec![row(0.0, 10), row(0.0, 20), row(0.2, 40), row(0.8, 50)]),
        ]
        .into_iter()
        .collect(),
    };
    let replicas = || {
        ["192.0.2.1", "192.0.2.2", "2001:db8::d", "2001:db8::e"]
            .iter()
            .enumerate()
            .map(|(at, address)| Replica { weight: at as u32 + 1, ..Replica::new(format!("r{at}"), address.parse().unwrap()) })
            .collect::<Vec<_>>()
    };
    let mut routes = Routes { regions: Arc::new(regions), ..Routes::default() };
    for (name, policy) in [("geo", Policy::RegionProbabilities(table)), ("weighted", Policy::Weighted)] {
        let service = Service::new(format!("{name}.example.test."), replicas(), policy, Answering::plain(300, 1));
        routes.services.insert(wire_name(&format!("{name}.example.test")).into(), service.into());
    }
    routes
}

fn trusting_all() -> Snapshot {
    snapshot_of(ZONE, routes())
}

/// Trusts the test's usual client addresses only.
fn trusting_some() -> Snapshot {
    let mut snapshot = trusting_all();
    let trusted = [format!("{CLIENT_V4}/32"), "2001:db8::/64".to_string()];
    snapshot.settings.trusted_subnet_senders = Some(prefix_set("trusted", &trusted).unwrap());
    snapshot
}

/// The option body of `network/source`: family, source, scope 0, the octets the prefix needs.
fn subnet(network: &str, source: u8) -> Vec<u8> {
    let address: IpAddr = network.parse().unwrap();
    let (family, octets) = match address {
        IpAddr::V4(v4) => (1u16, v4.octets().to_vec()),
        IpAddr::V6(v6) => (2, v6.octets().to_vec()),
    };
    let used = usize::from(source).div_ceil(8);
    [&8u16.to_be_bytes()[..], &(4 + used as u16).to_be_bytes(), &family.to_be_bytes(), &[source, 0], &octets[..used]].concat()
}

fn subnets() -> Vec<(&'static str, u8)> {
    vec![
        ("0.0.0.0", 0),
        ("10.0.0.0", 8),
        ("198.51.0.0", 16),
        ("198.51.100.0", 24),
        ("198.51.100.128", 25),
        ("198.51.100.7", 32),
        ("::", 0),
        ("2001:db8::", 32),
        ("2001:db8:1::", 48),
        ("2001:db8:1:ff00::", 56),
        ("2001:db8:1::7", 128),
    ]
}

fn query(name: &str, qtype: u16, option: &[u8]) -> Vec<u8> {
    let mut message = [&[0x0E, 0xC5, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1][..], &wire_name(name), &qtype.to_be_bytes(), &[0, 1]].concat();
    message.extend([0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0]);
    message.extend((option.len() as u16).to_be_bytes());
    message.extend(option);
    message
}

/// How many replies the kernel lists for the class user space places the
/// asker in (1 for a static name).
fn variants_for(snapshot: &Snapshot, name: &str, qtype: u16, asker: &Asker) -> usize {
    let Some(service) = snapshot.routes.service(&wire_name(name)) else { return 1 };
    let routed = routed_question(service, &wire_name(name), qtype).unwrap();
    let region = locate(asker, &snapshot.routes.regions, None).region;
    routed.classes.iter().find(|(class, _)| *class == region).or_else(|| routed.classes.last()).unwrap().1.len()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn every_reply_to_a_client_subnet_is_one_user_space_gives() {
    let senders = [(CLIENT_V4.into(), true), (CLIENT_V6.into(), true), (ip(UNTRUSTED_V4), false), (ip(UNTRUSTED_V6), false)];
    for (snapshot, trusts_some) in [(trusting_all(), false), (trusting_some(), true)] {
        let Some(fast_path) = loaded(&snapshot) else { return };
        for (sender, trusted) in senders {
            for (network, source) in subnets() {
                let believed = trusted || !trusts_some;
                let asker = if believed {
                    Asker { address: ip(network), known_bits: source, from_client_subnet: true }
                } else {
                    Asker::from_source(sender)
                };
                for (name, qtype) in QUESTIONS {
                    let message = query(name, qtype, &subnet(network, source));
                    let possible = user_space_replies(&snapshot, sender, &message, variants_for(&snapshot, name, qtype, &asker));
                    for _ in 0..20 {
                        let reply = kernel_reply(&fast_path, sender, &message);
                        assert!(
                            possible.contains(&reply),
                            "{name} {qtype} from {sender} for {network}/{source} (believed: {believed}): {reply:02x?} is no user-space reply"
                        );
                    }
                }
            }
        }
    }
}

/// The reply's ECS scope: the region's /24 (or /25) for the region
/// policy, 0 for the weighted one and for an untrusted sender.
#[test]
fn the_echoed_scope_is_the_decisions() {
    let snapshot = trusting_some();
    let Some(fast_path) = loaded(&snapshot) else { return };
    let scope_of = |sender: IpAddr, name: &str| {
        let reply = kernel_reply(&fast_path, sender, &query(name, 1, &subnet("198.51.100.0", 24)));
        reply[reply.len() - 4]
    };
    assert_eq!(scope_of(CLIENT_V4.into(), "geo.example.test"), 25);
    assert_eq!(scope_of(CLIENT_V4.into(), "weighted.example.test"), 0);
    assert_eq!(scope_of(CLIENT_V4.into(), "host.example.test"), 0);
    assert_eq!(scope_of(ip(UNTRUSTED_V4), "geo.example.test"), 0);
}

#[test]
fn a_subnets_class_draws_with_its_probabilities() {
    let snapshot = trusting_some();
    let Some(fast_path) = loaded(&snapshot) else { return };
    let service = snapshot.routes.service(&wire_name("geo.example.test")).unwrap();
    let routed = routed_question(service, &wire_name("geo.example.test"), 1).unwrap();
    // Region 1 by a /8, and the /0 subnet: unclassified, the default row.
    for ((network, source), region) in [(("10.0.0.0", 8), 1), (("0.0.0.0", 0), u32::MAX)] {
        let option = subnet(network, source);
        let message = query("geo.example.test", 1, &option);
        let (_, variants) = routed.classes.iter().find(|(class, _)| *class == region).unwrap();
        let mut below = 0u64;
        let shares: Vec<(Vec<u8>, f64)> = variants
            .iter()
            .map(|(threshold, answer)| {
                let share = (u64::from(*threshold) + 1 - below) as f64 / (1u64 << 32) as f64;
                below = u64::from(*threshold) + 1;
                (answer.body().to_vec(), share)
            })
            .collect();
        assert!(shares.len() >= 2, "{network}/{source}: {shares:?}");
        let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
        for _ in 0..RUNS {
            let reply = kernel_reply(&fast_path, CLIENT_V4.into(), &message);
            *counts.entry(reply[message.len() - 11 - option.len()..reply.len() - 11 - option.len()].to_vec()).or_default() += 1;
        }
        let chi_square: f64 = shares
            .iter()
            .map(|(body, share)| (counts.get(body).copied().unwrap_or(0) as f64 - share * RUNS as f64).powi(2) / (share * RUNS as f64))
            .sum();
        let critical = CHI_SQUARE_0_001_PERCENT[shares.len() - 2];
        assert!(chi_square < critical, "{network}/{source}: chi-square {chi_square:.2} >= {critical} ({counts:?})");
        assert_eq!(counts.len(), shares.len(), "{network}/{source}: only the listed variants");
    }
}
