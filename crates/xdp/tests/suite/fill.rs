//! What the kernel is given to answer: every entry [`fill`] yields is the
//! reply `pharos_answer::respond` gives, and names a routing policy
//! answers are left out.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};

use common::snapshot_of;
use pharos_answer::{Client, Snapshot, Transport, respond};
use pharos_route::model::Answering;
use pharos_route::{Policy, Replica, Routes, Service};
use pharos_xdp::fill::fill;

use crate::common::wire_name;
use rand::SeedableRng;

const ZONE: &str = r#"
$TTL 3600
@        IN SOA ns1 hostmaster 1 7200 3600 1209600 300
         NS  ns1
         MX  10 mail
ns1      A   192.0.2.53
mail     A   192.0.2.25
www      CNAME host
host     A   192.0.2.80
api      A   192.0.2.90
"#;

/// Routes answering api.example.test by policy.
fn routed_api() -> Routes {
    let replicas = vec![Replica::new("a", "192.0.2.91".parse().unwrap())];
    let service = Service::new("api.example.test.".into(), replicas, Policy::Static, Answering::plain(60, 0));
    let mut routes = Routes::default();
    routes.services.insert(wire_name("api.example.test").into(), service.into());
    routes
}

/// A query for `name` (wire form) and `qtype`, without EDNS.
fn query(name: &[u8], qtype: [u8; 2]) -> Vec<u8> {
    [&[0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], name, &qtype, &[0, 1]].concat()
}

fn user_space(message: &[u8], snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Udp };
    respond(message, &client, snapshot, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut out).expect("user space answers");
    out
}

fn name_of(key: &pharos_xdp::maps::AnswerKey) -> &[u8] {
    let end = key.name.iter().position(|&octet| octet == 0).expect("a wire name ends with the root");
    &key.name[..=end]
}

#[test]
fn every_entry_is_the_user_space_reply() {
    let snapshot = snapshot_of(ZONE, Routes::default());
    let entries = fill(&snapshot);
    assert!(entries.len() >= 6 * 7, "every name, at least for the common types: {}", entries.len());
    for (key, answer) in &entries {
        let message = query(name_of(key), key.qtype);
        let response = user_space(&message, &snapshot);
        let counts = [1, answer.counts[0], answer.counts[1], answer.counts[2]].map(u16::to_be_bytes).concat();
        let flags = 0x8100 | answer.flags;
        assert_eq!(response[2..4], flags.to_be_bytes(), "flags of {key:?}");
        assert_eq!(response[4..12], counts[..], "counts of {key:?}");
        assert_eq!(response[message.len()..], *answer.body(), "body of {key:?}");
    }
}

#[test]
fn leaves_out_names_answered_by_policy() {
    let api = wire_name("api.example.test");
    let static_entries = fill(&snapshot_of(ZONE, Routes::default()));
    assert!(static_entries.iter().any(|(key, _)| name_of(key) == api), "a static name is installed");
    let routed_entries = fill(&snapshot_of(ZONE, routed_api()));
    assert!(!routed_entries.iter().any(|(key, _)| name_of(key) == api), "a routed name passes up");
    assert_eq!(routed_entries.len(), static_entries.len() - static_entries.iter().filter(|(key, _)| name_of(key) == api).count());
}
