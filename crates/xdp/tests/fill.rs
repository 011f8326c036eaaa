//! What the kernel is given to answer: every entry [`fill`] yields is the
//! reply `pharos_answer::respond` gives, names a routing policy answers
//! are left out, and [`FastPath::sync`] installs, updates and removes
//! entries as snapshots change (that part needs root, as tests/answer.rs).

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{PORT, UDP, XDP_PASS, XDP_TX, frame_v4, may_load_bpf, run, snapshot_of};
use pharos_answer::{Client, Snapshot, Transport, respond};
use pharos_route::model::Answering;
use pharos_route::{Policy, Replica, Routes, Service};
use pharos_xdp::fill::fill;
use pharos_xdp::{FastPath, Synced};

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
    routes.services.insert(wire_name("api.example.test").into(), service);
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

#[test]
fn sync_installs_updates_and_removes_what_changed() {
    if !may_load_bpf() {
        return;
    }
    let mut fast_path = FastPath::load(&[PORT]).expect("the program loads");
    let api_query = frame_v4(&query(&wire_name("api.example.test"), [0, 1]), UDP, PORT);
    let first = snapshot_of(ZONE, Routes::default());
    let everything = fill(&first).len();
    assert_eq!(fast_path.sync(&first).unwrap(), Synced { installed: everything, updated: 0, removed: 0 });
    assert_eq!(fast_path.sync(&first).unwrap(), Synced::default(), "nothing changed");
    assert_eq!(run(&fast_path, &api_query).0, XDP_TX, "a static name is answered in the kernel");

    let routed = snapshot_of(ZONE, routed_api());
    let removed = everything - fill(&routed).len();
    assert_eq!(fast_path.sync(&routed).unwrap(), Synced { installed: 0, updated: 0, removed });
    assert_eq!(run(&fast_path, &api_query).0, XDP_PASS, "a routed name passes up");

    // Another address for host: its A answer, and the CNAME chain of www
    // that ends there, change; nothing else does.
    let moved = snapshot_of(&ZONE.replace("192.0.2.80", "192.0.2.81"), routed_api());
    let synced = fast_path.sync(&moved).unwrap();
    assert_eq!((synced.installed, synced.removed), (0, 0));
    assert!(synced.updated >= 2, "host and www updated: {synced:?}");
    let www_query = query(&wire_name("www.example.test"), [0, 1]);
    let (action, reply) = run(&fast_path, &frame_v4(&www_query, UDP, PORT));
    assert_eq!(action, XDP_TX);
    assert_eq!(reply[42..], user_space(&www_query, &moved)[..], "the new answer");
    assert_eq!(fast_path.len(), fill(&moved).len());
}
