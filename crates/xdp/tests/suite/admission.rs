//! Above capacity the kernel holds the most asked static answers: the
//! program counts the questions it is asked, and the next sync installs
//! the snapshot's answers in order of those counts (halved at each sync).
//! Loading needs root, as tests/suite/answer.rs.

use crate::common;

use std::net::IpAddr;

use common::{PORT, UDP, XDP_PASS, XDP_TX, frame_v4, may_load_bpf, run, settings, snapshot_of, wire_name};
use pharos_answer::{Client, Snapshot, Transport, respond};
use pharos_route::Routes;
use pharos_xdp::fill::fill;
use pharos_xdp::maps::AnswerKey;
use pharos_xdp::{FastPath, Synced};
use rand::SeedableRng;

const ZONE: &str = "
$TTL 3600
@        IN SOA ns1 hostmaster 1 7200 3600 1209600 300
         NS  ns1
ns1      A   192.0.2.53
alpha    A   192.0.2.1
beta     A   192.0.2.2
gamma    A   192.0.2.3
delta    A   192.0.2.4
";

/// Asked most, then second most; both A questions.
const HOTTEST: &str = "gamma.example.test";
const SECOND: &str = "delta.example.test";

fn snapshot() -> Snapshot {
    snapshot_of(ZONE, Routes::default())
}

fn query(name: &str) -> Vec<u8> {
    [&[0x51, 0x7a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], &wire_name(name), &[0, 1, 0, 1]].concat()
}

fn user_space(name: &str, snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    let client = Client { address: IpAddr::V4(common::CLIENT_V4), transport: Transport::Udp };
    respond(&query(name), &client, snapshot, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut out).expect("user space answers");
    out
}

/// The kernel's reply to an A query for `name`, or `None` if it passes up.
fn ask(fast_path: &FastPath, name: &str) -> Option<Vec<u8>> {
    let (action, frame) = run(fast_path, &frame_v4(&query(name), UDP, PORT));
    match action {
        XDP_TX => Some(frame[42..].to_vec()),
        XDP_PASS => None,
        other => panic!("unexpected action {other} for {name}"),
    }
}

fn a_question(name: &str) -> AnswerKey {
    AnswerKey::new(&wire_name(name), 1, 1).unwrap()
}

#[test]
fn installs_the_most_asked_answers_and_passes_the_rest_up() {
    if !may_load_bpf() {
        return;
    }
    let snapshot = snapshot();
    let everything = fill(&snapshot);
    let first_two: Vec<AnswerKey> = everything.iter().take(2).map(|(key, _)| *key).collect();
    assert!(
        !first_two.contains(&a_question(HOTTEST)) && !first_two.contains(&a_question(SECOND)),
        "the hot questions must not be the ones fill order installs first"
    );
    let left_out = everything.len() - 2;
    let mut fast_path = FastPath::load(&pharos_xdp::Settings { max_entries: 2, ..settings() }).expect("the program loads");

    // Nothing counted yet: fill order.
    assert_eq!(fast_path.sync(&snapshot).unwrap(), Synced { installed: 2, left_out, ..Synced::default() });
    for _ in 0..30 {
        assert_eq!(ask(&fast_path, HOTTEST), None, "not installed yet");
    }
    for _ in 0..20 {
        assert_eq!(ask(&fast_path, SECOND), None);
    }
    for _ in 0..3 {
        ask(&fast_path, "alpha.example.test");
    }

    // The next sync fills the other (empty) generation with the two.
    assert_eq!(fast_path.sync(&snapshot).unwrap(), Synced { installed: 2, left_out, threshold: 20, ..Synced::default() });
    for name in [HOTTEST, SECOND] {
        assert_eq!(ask(&fast_path, name), Some(user_space(name, &snapshot)), "{name}: installed, byte for byte user space's");
    }
    for name in ["alpha.example.test", "beta.example.test", "ns1.example.test"] {
        assert_eq!(ask(&fast_path, name), None, "{name}: left out, passes up");
        assert!(!user_space(name, &snapshot).is_empty(), "{name}: user space answers it");
    }
    let occupancy = fast_path.occupancy();
    assert_eq!((occupancy.installed, occupancy.left_out, occupancy.threshold), (2, left_out, 20));

    // Counts halve at each sync, then add what was asked since: each of
    // the five names above once (counted, answered or not), so gamma has
    // 30 / 2 + 1 = 16, delta 20 / 2 + 1 = 11, alpha 3 / 2 + 1 = 2. The
    // two stay, into the generation that held fill order's two.
    assert_eq!(fast_path.sync(&snapshot).unwrap(), Synced { installed: 2, removed: 2, left_out, threshold: 11, ..Synced::default() });
    // A question asked more since overtakes: beta 40, gamma 16 / 2 = 8,
    // delta 11 / 2 = 5.
    for _ in 0..40 {
        ask(&fast_path, "beta.example.test");
    }
    assert_eq!(fast_path.sync(&snapshot).unwrap().threshold, 8);
    for name in ["beta.example.test", HOTTEST] {
        assert_eq!(ask(&fast_path, name), Some(user_space(name, &snapshot)), "{name}: installed");
    }
    assert_eq!(ask(&fast_path, SECOND), None, "overtaken: passes up");
}
