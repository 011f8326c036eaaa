//! The program counts what it does with each packet, per interface:
//! crafted packets for every reason, run with BPF_PROG_TEST_RUN (which
//! delivers them as if received on `lo`), among them queries whose UDP
//! checksum is wrong, absent, or in the partial form local senders leave.
//! Needs root, as tests/suite/answer.rs.

use crate::common;

use common::*;
use pharos_route::Routes;
use pharos_xdp::{FastPath, InterfaceCounters};

/// ns1 answers A queries; big's six 100-octet TXT records are too large
/// for a client without EDNS.
fn zone() -> String {
    let big: String = (b'a'..b'g').map(|letter| format!("big 3600 IN TXT \"{}\"\n", char::from(letter).to_string().repeat(100))).collect();
    format!("@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.53\n{big}")
}

fn query(name: &str, qtype: u16, arcount: u8) -> Vec<u8> {
    [&[0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, arcount][..], &wire_name(name), &qtype.to_be_bytes(), &[0, 1]].concat()
}

/// `query` with an OPT record advertising `payload`, of EDNS `version`, with `options`.
fn with_opt(mut message: Vec<u8>, payload: u16, version: u8, options: &[u8]) -> Vec<u8> {
    message.extend([0, 0, 41]);
    message.extend(payload.to_be_bytes());
    message.extend([0, version, 0, 0]);
    message.extend((options.len() as u16).to_be_bytes());
    message.extend(options);
    message
}

/// For the IPv4 UDP segment `segment` (from the client to the server):
/// its full checksum (as if its checksum field were 0), or, if `partial`,
/// the partial form a local sender leaves for offload: the pseudo-header's
/// sum alone.
fn checksum_of(segment: &[u8], partial: bool) -> u16 {
    let mut zeroed = segment.to_vec();
    zeroed[6..8].fill(0);
    if !partial {
        return udp_checksum(CLIENT_V4.into(), SERVER_V4.into(), &zeroed);
    }
    let pseudo = [&CLIENT_V4.octets()[..], &SERVER_V4.octets(), &[0, UDP], &(segment.len() as u16).to_be_bytes()].concat();
    pharos_xdp::maps::ones_complement_sum(&pseudo)
}

/// Runs each frame, checking the program's action on it, then reads the
/// counters of the one interface the runs arrive on.
fn counted_after(fast_path: &FastPath, sent: &[(Vec<u8>, u32)]) -> InterfaceCounters {
    for (frame, action) in sent {
        assert_eq!(run(fast_path, frame).0, *action);
    }
    let counters = fast_path.counters().unwrap();
    assert_eq!(counters.interfaces.len(), 1, "{counters:?}");
    counters.interfaces[0].clone()
}

#[test]
fn counts_each_answer_and_each_reason_to_pass_up() {
    if !may_load_bpf() {
        return;
    }
    let mut fast_path = FastPath::load(&settings()).expect("the program loads");
    assert!(fast_path.counters().unwrap().interfaces.is_empty(), "nothing seen yet");
    let ns1 = query("ns1.example.test", 1, 0);
    assert_eq!(run(&fast_path, &frame_v4(&ns1, UDP, PORT)).0, XDP_PASS, "not synced yet");
    fast_path.sync(&snapshot_of(&zone(), Routes::default())).unwrap();

    let mut fragment = frame_v4(&ns1, UDP, PORT);
    fragment[20] |= 0x20; // More fragments.
    let mut response = ns1.clone();
    response[2] |= 0x80;
    let mut corrupted = frame_v4(&ns1, UDP, PORT);
    *corrupted.last_mut().unwrap() ^= 0x01; // QCLASS 0x0001 becomes 0x0000.
    let check = checksum_of(&corrupted[34..], false);
    corrupted[40..42].copy_from_slice(&check.to_be_bytes());
    *corrupted.last_mut().unwrap() ^= 0x01; // Back to IN: the checksum no longer matches.
    let mut unchecked_v6 = frame_v6(&ns1, UDP);
    unchecked_v6[60..62].fill(0);
    let mut unchecked_v4 = frame_v4(&ns1, UDP, PORT);
    unchecked_v4[40..42].fill(0);
    let mut partial_v4 = frame_v4(&ns1, UDP, PORT);
    let partial = checksum_of(&partial_v4[34..], true);
    partial_v4[40..42].copy_from_slice(&partial.to_be_bytes());
    let sent: [(Vec<u8>, u32); 16] = [
        (frame_v4(&ns1, UDP, PORT), XDP_TX),
        (frame_v6(&ns1, UDP), XDP_TX),
        (frame_v4(&ns1, TCP, PORT), XDP_PASS),
        (frame_v4(&ns1, UDP, 5353), XDP_PASS),
        (fragment, XDP_PASS),
        (frame_v6(&ns1, 0), XDP_PASS),
        (frame_v4(&response, UDP, PORT), XDP_PASS),
        (frame_v4(&with_opt(query("ns1.example.test", 1, 1), 1232, 1, &[]), UDP, PORT), XDP_PASS),
        (frame_v4(&with_opt(query("ns1.example.test", 1, 1), 1232, 0, &[0, 3, 0, 0]), UDP, PORT), XDP_PASS),
        (frame_v4(&query("ns1.example.test", 1, 2), UDP, PORT), XDP_PASS),
        (frame_v4(&query("nothing.example.test", 1, 0), UDP, PORT), XDP_PASS),
        (frame_v4(&query("big.example.test", 16, 0), UDP, PORT), XDP_PASS),
        (corrupted, XDP_PASS),
        (unchecked_v6, XDP_PASS),
        (unchecked_v4, XDP_TX),
        (partial_v4, XDP_TX),
    ];
    let counters = counted_after(&fast_path, &sent);
    let expected = InterfaceCounters {
        ifindex: counters.ifindex,
        interface: Some("lo".into()),
        answered_static: 4,
        bad_checksum: 2,
        too_large: 1,
        not_for_us: 2,
        fragment_or_options: 2,
        not_a_plain_query: 1,
        edns_unsupported: 3,
        no_entry: 1,
        suspended: 1,
        ..InterfaceCounters::default()
    };
    assert_eq!(counters, expected);
    assert_eq!(counters.answered(), 4);
}

/// The first-label filter passes a question up before the rest of its
/// packet is read when no question of the snapshot begins with its first
/// label's eight octets (case folded); one that does goes on to the
/// checks a first label cannot settle. An EDNS version the kernel does
/// not take tells the two apart: counted as unsupported only if read.
#[test]
fn a_first_label_no_question_has_passes_up_unread() {
    if !may_load_bpf() {
        return;
    }
    let mut fast_path = FastPath::load(&settings()).expect("the program loads");
    let zone = format!("{}longlabel1 3600 IN A 192.0.2.1\n", zone());
    fast_path.sync(&snapshot_of(&zone, Routes::default())).unwrap();
    let version_1 = |name: &str| frame_v4(&with_opt(query(name, 1, 1), 1232, 1, &[]), UDP, PORT);
    let sent: [(Vec<u8>, u32); 5] = [
        (frame_v4(&query("NS1.Example.TEST", 1, 0), UDP, PORT), XDP_TX),
        (frame_v4(&query("LongLabel1.example.test", 1, 0), UDP, PORT), XDP_TX),
        (version_1("ns1.example.test"), XDP_PASS),
        (version_1("longlabel2.example.test"), XDP_PASS),
        (version_1("unknown.example.test"), XDP_PASS),
    ];
    let counters = counted_after(&fast_path, &sent);
    let expected = InterfaceCounters {
        ifindex: counters.ifindex,
        interface: Some("lo".into()),
        answered_static: 2,
        edns_unsupported: 2,
        no_entry: 1,
        ..InterfaceCounters::default()
    };
    assert_eq!(counters, expected);
}
