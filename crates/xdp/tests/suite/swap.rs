//! Snapshots swap atomically: [`FastPath::sync`] fills the generation not
//! being served and flips to it, so the kernel answers from the new
//! snapshot only, never from leftovers of an older one; above capacity it
//! installs what fits; [`FastPath::suspend`] passes everything up; and
//! [`kernel_path`] says which path answers a question. Loading needs root,
//! as tests/suite/answer.rs.

use crate::common;

use std::collections::HashMap;
use std::net::IpAddr;

use common::{PORT, UDP, XDP_PASS, XDP_TX, frame_v4, may_load_bpf, run, settings, snapshot_of, wire_name};
use pharos_answer::{Client, Snapshot, Transport, respond};
use pharos_route::model::Answering;
use pharos_route::{Policy, Replica, Routes, Service};
use pharos_xdp::fill::fill;
use pharos_xdp::maps::{Answer, AnswerKey};
use pharos_xdp::{FastPath, KernelPath, Synced, kernel_path};
use rand::SeedableRng;

const ZONE: &str = r#"
$TTL 3600
@        IN SOA ns1 hostmaster 1 7200 3600 1209600 300
         NS  ns1
ns1      A   192.0.2.53
www      CNAME host
host     A   192.0.2.80
api      A   192.0.2.90
old      A   192.0.2.70
big      TXT "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc" "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd" "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
"#;

/// Snapshot A: the zone as it is.
fn snapshot_a() -> Snapshot {
    snapshot_of(ZONE, Routes::default())
}

/// Snapshot B: old.example.test gone, host moved (so host's and www's
/// answers change), api answered by a policy the kernel cannot
/// (round robin), so it passes up.
fn snapshot_b() -> Snapshot {
    let zone = ZONE.replace("old      A   192.0.2.70\n", "").replace("192.0.2.80", "192.0.2.81");
    snapshot_of(&zone, routed_api())
}

fn routed_api() -> Routes {
    let replicas = vec![Replica::new("a", "192.0.2.91".parse().unwrap())];
    let service = Service::new("api.example.test.".into(), replicas, Policy::round_robin(), Answering::plain(60, 0));
    let mut routes = Routes::default();
    routes.services.insert(wire_name("api.example.test").into(), service.into());
    routes
}

fn query(name: &str) -> Vec<u8> {
    [&[0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], &wire_name(name), &[0, 1, 0, 1]].concat()
}

fn user_space(message: &[u8], snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    let client = Client { address: IpAddr::V4(common::CLIENT_V4), transport: Transport::Udp };
    respond(message, &client, snapshot, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut out).expect("user space answers");
    out
}

/// The kernel's DNS reply to an A query for `name`, or `None` if it passes up.
fn kernel_reply(fast_path: &FastPath, name: &str) -> Option<Vec<u8>> {
    let (action, frame) = run(fast_path, &frame_v4(&query(name), UDP, PORT));
    match action {
        XDP_TX => Some(frame[42..].to_vec()),
        XDP_PASS => None,
        other => panic!("unexpected action {other} for {name}"),
    }
}

fn loaded() -> Option<FastPath> {
    may_load_bpf().then(|| FastPath::load(&settings()).expect("the program loads"))
}

#[test]
fn passes_everything_up_until_the_first_sync() {
    let Some(fast_path) = loaded() else { return };
    assert_eq!(kernel_reply(&fast_path, "host.example.test"), None);
}

#[test]
fn each_sync_writes_only_what_its_generation_lacks() {
    let Some(mut fast_path) = loaded() else { return };
    let everything = fill(&snapshot_a()).len();
    let all_new = Synced { installed: everything, ..Synced::default() };
    assert_eq!(fast_path.sync(&snapshot_a()).unwrap(), all_new, "generation 1 starts empty");
    assert_eq!(fast_path.sync(&snapshot_a()).unwrap(), all_new, "so does generation 0");
    assert_eq!(fast_path.sync(&snapshot_a()).unwrap(), Synced::default(), "generation 1 holds A already");
    assert_eq!(fast_path.occupancy().installed, everything);

    let held: HashMap<AnswerKey, Answer> = fill(&snapshot_a()).into_iter().collect();
    let wanted: HashMap<AnswerKey, Answer> = fill(&snapshot_b()).into_iter().collect();
    let removed = held.keys().filter(|key| !wanted.contains_key(key)).count();
    let updated = wanted.iter().filter(|(key, answer)| held.get(key).is_some_and(|old| old != *answer)).count();
    assert!(removed >= 2 * 7 && updated >= 2, "api and old gone, host and www changed: {removed} {updated}");
    assert_eq!(fast_path.sync(&snapshot_b()).unwrap(), Synced { updated, removed, ..Synced::default() });
    assert_eq!(fast_path.occupancy().installed, fill(&snapshot_b()).len());
}

#[test]
fn after_a_swap_every_answer_is_the_new_snapshots() {
    let Some(mut fast_path) = loaded() else { return };
    fast_path.sync(&snapshot_a()).unwrap();
    for name in ["host.example.test", "www.example.test", "old.example.test", "api.example.test"] {
        assert_eq!(kernel_reply(&fast_path, name), Some(user_space(&query(name), &snapshot_a())), "{name} from A");
    }
    fast_path.sync(&snapshot_b()).unwrap();
    for name in ["host.example.test", "www.example.test", "ns1.example.test"] {
        assert_eq!(kernel_reply(&fast_path, name), Some(user_space(&query(name), &snapshot_b())), "{name} from B");
    }
    assert_eq!(kernel_reply(&fast_path, "old.example.test"), None, "removed in B: passes up");
    assert_eq!(kernel_reply(&fast_path, "api.example.test"), None, "routed in B: passes up");

    // Back to A, into the generation that held A two syncs ago, then to B
    // into the one that held B: neither generation's leftovers show.
    fast_path.sync(&snapshot_a()).unwrap();
    assert_eq!(kernel_reply(&fast_path, "host.example.test"), Some(user_space(&query("host.example.test"), &snapshot_a())));
    assert!(kernel_reply(&fast_path, "old.example.test").is_some(), "old is back with A");
    fast_path.sync(&snapshot_b()).unwrap();
    assert_eq!(kernel_reply(&fast_path, "host.example.test"), Some(user_space(&query("host.example.test"), &snapshot_b())));
    assert_eq!(kernel_reply(&fast_path, "old.example.test"), None, "gone again");
}

#[test]
fn above_capacity_installs_what_fits_and_counts_the_rest() {
    if !may_load_bpf() {
        return;
    }
    let small = pharos_xdp::Settings { max_entries: 5, ..settings() };
    let mut fast_path = FastPath::load(&small).expect("the program loads");
    let everything = fill(&snapshot_a()).len();
    let synced = fast_path.sync(&snapshot_a()).unwrap();
    assert_eq!(synced, Synced { installed: 5, left_out: everything - 5, ..Synced::default() });
    assert_eq!((fast_path.occupancy().installed, fast_path.occupancy().capacity), (5, 5));
    // The second generation has its own room.
    assert_eq!(fast_path.sync(&snapshot_a()).unwrap(), synced);
}

#[test]
fn suspend_passes_everything_up_until_the_next_sync() {
    let Some(mut fast_path) = loaded() else { return };
    fast_path.sync(&snapshot_a()).unwrap();
    assert!(kernel_reply(&fast_path, "host.example.test").is_some());
    fast_path.suspend().unwrap();
    assert_eq!(kernel_reply(&fast_path, "host.example.test"), None, "suspended");
    fast_path.sync(&snapshot_b()).unwrap();
    assert_eq!(kernel_reply(&fast_path, "host.example.test"), Some(user_space(&query("host.example.test"), &snapshot_b())));
}

#[test]
fn rejects_settings_it_cannot_serve() {
    // Checked before anything is loaded: no root needed.
    let no_room = pharos_xdp::Settings { max_entries: 0, ..settings() };
    assert!(FastPath::load(&no_room).err().unwrap().to_string().contains("max_entries is 0"));
    let no_ports = pharos_xdp::Settings { ports: vec![], ..settings() };
    assert!(FastPath::load(&no_ports).err().unwrap().to_string().contains("no port given"));
}

#[test]
fn kernel_path_says_where_a_question_is_answered() {
    let snapshot = snapshot_b();
    assert_eq!(kernel_path(&snapshot, &wire_name("HOST.example.test"), 1), KernelPath::Static);
    assert_eq!(kernel_path(&snapshot, &wire_name("host.example.test"), 1).to_string(), "answered in the kernel (static reply)");
    let passes = |name: &str, qtype: u16| kernel_path(&snapshot, &wire_name(name), qtype).to_string();
    assert_eq!(passes("api.example.test", 1), "passes up to user space: round robin keeps state");
    assert!(passes("big.example.test", 16).contains("larger than the kernel's 1024-octet limit"), "{}", passes("big.example.test", 16));
    assert!(passes("host.example.test", 33).starts_with("passes up to user space: the kernel holds this name's answers"));
    assert!(passes("nothing.example.test", 1).contains("no answer built at load"));
    assert!(passes("example.test", 252).contains("zone transfers"));
}
