//! The per-source token bucket: a source that asks more than its burst
//! is limited (passed up or dropped, as configured, and counted), others
//! are not, and an IPv6 /64 is one source. Needs root, as tests/suite/answer.rs.

use crate::common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::*;
use pharos_route::Routes;
use pharos_xdp::{FastPath, OverLimit, RateLimit, Settings};

const ZONE: &str = "@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.53\n";
const BURST: u32 = 3;
/// One token a second: a run of queries that takes less than that cannot
/// earn a token back, so the (burst + 1)th query is limited.
const PER_SECOND: u32 = 1;
const XDP_DROP: u32 = 1;

fn limited(over_limit: OverLimit) -> FastPath {
    let settings = Settings { rate_limit: Some(RateLimit { per_second: PER_SECOND, burst: BURST, over_limit }), ..settings() };
    let mut fast_path = FastPath::load(&settings).expect("the program loads");
    fast_path.sync(&snapshot_of(ZONE, Routes::default())).unwrap();
    fast_path
}

fn query() -> Vec<u8> {
    [&[0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], &wire_name("ns1.example.test"), &[0, 1, 0, 1]].concat()
}

/// The query from source address 198.51.100.`last`.
fn from_v4(last: u8) -> Vec<u8> {
    frame_v4_from(Ipv4Addr::new(198, 51, 100, last), &query(), UDP, PORT)
}

/// The query from 2001:db8::`interface_id` (one /64 for all).
fn from_v6(interface_id: u16) -> Vec<u8> {
    frame_v6_from(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, interface_id), &query(), UDP)
}

/// The actions for `frames`, run within a second.
fn actions_within_a_second(over_limit: OverLimit, frames: &[Vec<u8>]) -> (FastPath, Vec<u32>) {
    let (fast_path, runs) = runs_within_a_second(|| limited(over_limit), frames);
    (fast_path, runs.into_iter().map(|(action, _)| action).collect())
}

#[test]
fn the_query_past_the_burst_passes_up_and_other_sources_are_answered() {
    if !may_load_bpf() {
        return;
    }
    let frames = [from_v4(7), from_v4(7), from_v4(7), from_v4(7), from_v4(8), from_v4(7)];
    let (fast_path, actions) = actions_within_a_second(OverLimit::Pass, &frames);
    assert_eq!(actions, [XDP_TX, XDP_TX, XDP_TX, XDP_PASS, XDP_TX, XDP_PASS]);
    let counters = &fast_path.counters().unwrap().interfaces[0];
    assert_eq!((counters.answered_static, counters.rate_limited_passed, counters.rate_limited_dropped), (4, 2, 0));
}

#[test]
fn drops_over_the_limit_when_told_to() {
    if !may_load_bpf() {
        return;
    }
    let frames = [from_v4(7), from_v4(7), from_v4(7), from_v4(7)];
    let (fast_path, actions) = actions_within_a_second(OverLimit::Drop, &frames);
    assert_eq!(actions, [XDP_TX, XDP_TX, XDP_TX, XDP_DROP]);
    assert_eq!(fast_path.counters().unwrap().interfaces[0].rate_limited_dropped, 1);
}

#[test]
fn an_ipv6_slash_64_is_one_source() {
    if !may_load_bpf() {
        return;
    }
    let frames = [from_v6(1), from_v6(2), from_v6(3), from_v6(4), from_v4(7)];
    let (_, actions) = actions_within_a_second(OverLimit::Pass, &frames);
    assert_eq!(actions, [XDP_TX, XDP_TX, XDP_TX, XDP_PASS, XDP_TX]);
}

#[test]
fn refuses_a_rate_or_burst_of_zero() {
    for (per_second, burst) in [(0, 5), (5, 0)] {
        let settings = Settings { rate_limit: Some(RateLimit { per_second, burst, over_limit: OverLimit::Pass }), ..settings() };
        let error = FastPath::load(&settings).err().expect("refused").to_string();
        assert!(error.contains("must be at least 1"), "{error}");
    }
}
