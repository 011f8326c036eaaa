//! Response rate limiting in the kernel, as user space's `[rrl]`: alike
//! responses to one network (an IPv4 /24, an IPv6 /56) past the rate are
//! dropped, every slip-th sent as the header, question and OPT record
//! with TC set (what user space's slip makes of the same response, byte
//! for byte, checksums right); other networks, other questions and
//! whitelisted sources have buckets of their own or none. Needs root, as
//! tests/suite/answer.rs.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};

use common::*;
use pharos_answer::{Client, Transport, parse_query, respond};
use pharos_route::Routes;
use pharos_xdp::{FastPath, ResponseLimit, Settings};
use rand::SeedableRng;

const ZONE: &str =
    "@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.53\nwww 300 IN A 192.0.2.80\n";
/// One response a second: a run that takes less than that earns no token
/// back, so every response after the first is limited.
const RATE: u32 = 1;
const SLIP: u32 = 2;
const XDP_DROP: u32 = 1;
const HEADERS_V4: usize = 14 + 20 + 8;

fn limited(whitelist: Vec<(IpAddr, u8)>) -> FastPath {
    let response_limit = ResponseLimit { rate: RATE, slip: SLIP, table_size: 1024, whitelist };
    let mut fast_path = FastPath::load(&Settings { response_limit: Some(response_limit), ..settings() }).expect("the program loads");
    fast_path.sync(&snapshot_of(ZONE, Routes::default())).unwrap();
    fast_path
}

/// A query for `name` A with an EDNS OPT record (which a slipped response
/// keeps), DO clear and no options.
fn query(name: &str) -> Vec<u8> {
    query_with_opt(name, false, &[])
}

/// A query for `name` A whose OPT record has DO as `dnssec_ok` and
/// `options`.
fn query_with_opt(name: &str, dnssec_ok: bool, options: &[u8]) -> Vec<u8> {
    let header = [0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
    let opt = [0, 0, 41, 4, 0xd0, 0, 0, if dnssec_ok { 0x80 } else { 0 }, 0];
    [&header[..], &wire_name(name), &[0, 1, 0, 1], &opt, &(options.len() as u16).to_be_bytes(), options].concat()
}

fn from(source: Ipv4Addr, name: &str) -> Vec<u8> {
    frame_v4_from(source, &query(name), UDP, PORT)
}

/// What user space's slip makes of its response to `message`.
fn user_space_slip(message: &[u8]) -> Vec<u8> {
    let snapshot = snapshot_of(ZONE, Routes::default());
    let client = Client { address: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), transport: Transport::Udp };
    let mut response = Vec::new();
    let answered = respond(message, &client, &snapshot, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut response).unwrap();
    pharos_transport::rrl::slip(&mut response, Some(&parse_query(message).unwrap()), answered.opt_at);
    response
}

/// The UDP checksum a frame from the server carries is right.
fn checksum_is_right(frame: &[u8]) -> bool {
    let server = IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&frame[26..30]).unwrap()));
    let client = IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&frame[30..34]).unwrap()));
    let mut segment = frame[34..].to_vec();
    let carried = u16::from_be_bytes([segment[6], segment[7]]);
    segment[6..8].copy_from_slice(&[0, 0]);
    udp_checksum(server, client, &segment) == carried
}

#[test]
fn past_the_rate_every_second_limited_response_slips_as_user_space_slips_it() {
    if !may_load_bpf() {
        return;
    }
    let source = Ipv4Addr::new(198, 51, 100, 7);
    let frames = vec![from(source, "www.example.test"); 7];
    let (fast_path, runs) = runs_within_a_second(|| limited(vec![]), &frames);
    let actions: Vec<u32> = runs.iter().map(|(action, _)| *action).collect();
    assert_eq!(actions, [XDP_TX, XDP_DROP, XDP_TX, XDP_DROP, XDP_TX, XDP_DROP, XDP_TX]);
    let slipped = &runs[2].1;
    assert_eq!(slipped[HEADERS_V4..], user_space_slip(&query("www.example.test")), "the OPT record, no answer");
    assert_eq!(&slipped[HEADERS_V4 + 4..HEADERS_V4 + 12], &[0, 1, 0, 0, 0, 0, 0, 1], "the question and the OPT record");
    assert!(checksum_is_right(slipped), "{slipped:02x?}");
    assert_eq!(runs[4].1, *slipped);
    assert!(runs[0].1.len() > slipped.len(), "the first response is the whole answer");
    let counters = &fast_path.counters().unwrap().interfaces[0];
    assert_eq!((counters.answered_static, counters.rrl_slipped, counters.rrl_dropped), (1, 3, 3));
}

#[test]
fn a_slip_keeps_the_do_bit_and_the_client_subnet_echoed_as_user_space_keeps_them() {
    if !may_load_bpf() {
        return;
    }
    let subnet = [0, 8, 0, 7, 0, 1, 24, 0, 198, 51, 100];
    for message in [query_with_opt("www.example.test", true, &[]), query_with_opt("www.example.test", true, &subnet)] {
        let frames = vec![frame_v4_from(Ipv4Addr::new(198, 51, 100, 7), &message, UDP, PORT); 3];
        let (_, runs) = runs_within_a_second(|| limited(vec![]), &frames);
        let actions: Vec<u32> = runs.iter().map(|(action, _)| *action).collect();
        assert_eq!(actions, [XDP_TX, XDP_DROP, XDP_TX]);
        let slipped = &runs[2].1[HEADERS_V4..];
        assert_eq!(slipped, user_space_slip(&message), "{slipped:02x?}");
        assert_eq!(slipped.len(), message.len(), "a slip as long as its query");
        let opt_at = 12 + wire_name("www.example.test").len() + 4;
        assert_eq!(slipped[opt_at + 7], 0x80, "DO");
        assert!(checksum_is_right(&runs[2].1));
    }
}

#[test]
fn each_network_and_question_has_its_own_bucket_and_whitelisted_sources_none() {
    if !may_load_bpf() {
        return;
    }
    let frames = [
        from(Ipv4Addr::new(198, 51, 100, 7), "www.example.test"),
        // The same /24: its bucket is spent.
        from(Ipv4Addr::new(198, 51, 100, 200), "www.example.test"),
        // Another question, another /24: buckets of their own.
        from(Ipv4Addr::new(198, 51, 100, 7), "ns1.example.test"),
        from(Ipv4Addr::new(198, 51, 101, 7), "www.example.test"),
        // IPv6: a /56 shares a bucket, the next /56 does not.
        frame_v6_from("2001:db8:0:1::7".parse().unwrap(), &query("www.example.test"), UDP),
        frame_v6_from("2001:db8:0:ff::7".parse().unwrap(), &query("www.example.test"), UDP),
        frame_v6_from("2001:db8:0:100::7".parse().unwrap(), &query("www.example.test"), UDP),
    ];
    let (_, runs) = runs_within_a_second(|| limited(vec![]), &frames);
    let actions: Vec<u32> = runs.iter().map(|(action, _)| *action).collect();
    // The second from a spent bucket is its first limited one: dropped
    // (slip 2 sends the second limited one).
    assert_eq!(actions, [XDP_TX, XDP_DROP, XDP_TX, XDP_TX, XDP_TX, XDP_DROP, XDP_TX]);

    let whitelisted = [(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24)];
    let frames = vec![from(Ipv4Addr::new(198, 51, 100, 7), "www.example.test"); 5];
    let (fast_path, runs) = runs_within_a_second(|| limited(whitelisted.to_vec()), &frames);
    assert!(runs.iter().all(|(action, frame)| *action == XDP_TX && frame.len() > HEADERS_V4 + 40), "never limited");
    assert_eq!(fast_path.counters().unwrap().interfaces[0].answered_static, 5);
}

#[test]
fn settings_it_cannot_apply_are_refused() {
    if !may_load_bpf() {
        return;
    }
    let zero_rate = ResponseLimit { rate: 0, slip: 2, table_size: 1024, whitelist: vec![] };
    let error = FastPath::load(&Settings { response_limit: Some(zero_rate), ..settings() }).err().expect("refused");
    assert!(error.to_string().contains("both must be at least 1"), "{error}");
}
