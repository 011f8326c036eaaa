//! The XDP program run with BPF_PROG_TEST_RUN on crafted packets: every
//! reply it sends must carry, byte for byte, the DNS message
//! `pharos_answer::respond` gives for the same query over UDP, in correct
//! IP and UDP headers; every packet it does not answer must pass up
//! unchanged. Loading needs root: without it the tests print a loud SKIP
//! and pass, unless the environment variable CI is set, where they fail.

use crate::common;

use std::net::IpAddr;

use common::*;
use pharos_answer::{Client, Snapshot, Transport, respond};
use pharos_xdp::FastPath;
use pharos_xdp::maps::ones_complement_sum;
use rand::SeedableRng;

const ZONE: &str = r#"
$TTL 3600
@        IN SOA ns1 hostmaster 1 7200 3600 1209600 300
         NS  ns1
         MX  10 mail
ns1      A   192.0.2.53
mail     A   192.0.2.25
mail     AAAA 2001:db8::25
www      CNAME host
host     A   192.0.2.80
big      TXT "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
big      TXT "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
big      TXT "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
big      TXT "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
big      TXT "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
"#;

fn snapshot() -> Snapshot {
    snapshot_of(ZONE, Default::default())
}

/// The program loaded and filled from [`snapshot`], or `None` (after a
/// loud SKIP) when this process may not load BPF programs.
fn fast_path() -> Option<FastPath> {
    if !may_load_bpf() {
        return None;
    }
    let mut fast_path = FastPath::load(&settings()).expect("the program loads and passes the verifier");
    fast_path.sync(&snapshot()).expect("the maps fill");
    Some(fast_path)
}

/// A DNS query with RD set and, if `edns` is given, an OPT record with
/// that payload size, version, DO bit and options.
fn query(name: &str, qtype: u16, edns: Option<(u16, u8, bool, &[u8])>) -> Vec<u8> {
    let mut message = vec![0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())];
    message.extend(wire_name(name));
    message.extend(qtype.to_be_bytes());
    message.extend([0, 1]);
    if let Some((payload, version, dnssec_ok, options)) = edns {
        message.extend([0, 0, 41]);
        message.extend(payload.to_be_bytes());
        message.extend([0, version, if dnssec_ok { 0x80 } else { 0 }, 0]);
        message.extend((options.len() as u16).to_be_bytes());
        message.extend(options);
    }
    message
}

/// What user space answers `message` from `client`.
fn user_space(message: &[u8], client: IpAddr) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    respond(message, &Client { address: client, transport: Transport::Udp }, &snapshot(), &mut rng, &mut out).expect("user space answers");
    out
}

/// Checks the kernel's reply to `message` over IPv4, header by header.
fn assert_answers_v4(fast_path: &FastPath, message: &[u8]) {
    let (action, reply) = run(fast_path, &frame_v4(message, UDP, PORT));
    assert_eq!(action, XDP_TX, "answered in the kernel");
    assert_eq!(reply[..14], [&CLIENT_MAC[..], &SERVER_MAC, &[0x08, 0]].concat()[..], "MACs swapped");
    let ip = &reply[14..34];
    assert_eq!(ones_complement_sum(ip), 0xffff, "IPv4 header checksum");
    assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), reply.len() - 14, "IPv4 total length");
    assert_eq!((ip[9], &ip[12..16], &ip[16..20]), (UDP, &SERVER_V4.octets()[..], &CLIENT_V4.octets()[..]), "addresses swapped");
    assert_udp(&reply[34..], IpAddr::V4(SERVER_V4), IpAddr::V4(CLIENT_V4));
    assert_eq!(reply[42..], user_space(message, IpAddr::V4(CLIENT_V4))[..], "the user-space answer");
}

fn assert_answers_v6(fast_path: &FastPath, message: &[u8]) {
    let (action, reply) = run(fast_path, &frame_v6(message, UDP));
    assert_eq!(action, XDP_TX, "answered in the kernel");
    assert_eq!(reply[..14], [&CLIENT_MAC[..], &SERVER_MAC, &[0x86, 0xDD]].concat()[..], "MACs swapped");
    let ip = &reply[14..54];
    assert_eq!(usize::from(u16::from_be_bytes([ip[4], ip[5]])), reply.len() - 54, "IPv6 payload length");
    assert_eq!((ip[6], &ip[8..24], &ip[24..40]), (UDP, &SERVER_V6.octets()[..], &CLIENT_V6.octets()[..]), "addresses swapped");
    assert_udp(&reply[54..], IpAddr::V6(SERVER_V6), IpAddr::V6(CLIENT_V6));
    assert_eq!(reply[62..], user_space(message, IpAddr::V6(CLIENT_V6))[..], "the user-space answer");
}

fn assert_udp(segment: &[u8], from: IpAddr, to: IpAddr) {
    assert_eq!(segment[..4], [&PORT.to_be_bytes()[..], &CLIENT_PORT.to_be_bytes()].concat()[..], "ports swapped");
    assert_eq!(usize::from(u16::from_be_bytes([segment[4], segment[5]])), segment.len(), "UDP length");
    let mut zeroed = segment.to_vec();
    zeroed[6..8].fill(0);
    assert_eq!(segment[6..8], udp_checksum(from, to, &zeroed).to_be_bytes(), "UDP checksum");
}

fn assert_passes(fast_path: &FastPath, frame: &[u8]) {
    let (action, out) = run(fast_path, frame);
    assert_eq!(action, XDP_PASS, "passed up");
    assert_eq!(out, frame, "unchanged");
}

#[test]
fn answers_ipv4_without_edns() {
    let Some(fast_path) = fast_path() else { return };
    assert_answers_v4(&fast_path, &query("host.example.test", 1, None));
    assert_answers_v4(&fast_path, &query("example.test", 15, None));
    assert_answers_v4(&fast_path, &query("mail.example.test", 16, None));
}

#[test]
fn answers_ipv4_with_edns_and_do() {
    let Some(fast_path) = fast_path() else { return };
    assert_answers_v4(&fast_path, &query("www.example.test", 1, Some((1232, 0, false, &[]))));
    assert_answers_v4(&fast_path, &query("mail.example.test", 28, Some((4096, 0, true, &[]))));
    assert_answers_v4(&fast_path, &query("big.example.test", 16, Some((1232, 0, true, &[]))));
    // Compact Answers OK (RFC 9824 section 5), with DO and without: echoed as user space echoes it.
    for dnssec_ok in [false, true] {
        let mut compact_ok = query("www.example.test", 1, Some((1232, 0, dnssec_ok, &[])));
        let flags_at = compact_ok.len() - 4;
        compact_ok[flags_at] |= 0x40;
        assert_answers_v4(&fast_path, &compact_ok);
    }
}

#[test]
fn answers_ipv6_with_and_without_edns() {
    let Some(fast_path) = fast_path() else { return };
    assert_answers_v6(&fast_path, &query("ns1.example.test", 1, None));
    assert_answers_v6(&fast_path, &query("example.test", 2, Some((1232, 0, true, &[]))));
    assert_answers_v6(&fast_path, &query("example.test", 6, Some((600, 0, false, &[]))));
}

#[test]
fn keeps_the_case_of_the_question() {
    let Some(fast_path) = fast_path() else { return };
    assert_answers_v4(&fast_path, &query("HoSt.ExAmPlE.tEsT", 1, None));
    assert_answers_v6(&fast_path, &query("WWW.EXAMPLE.TEST", 1, Some((1232, 0, true, &[]))));
}

#[test]
fn answers_frames_with_an_ethernet_trailer() {
    let Some(fast_path) = fast_path() else { return };
    let message = query("host.example.test", 1, None);
    let (action, reply) = run(&fast_path, &[frame_v4(&message, UDP, PORT), vec![0; 600]].concat());
    assert_eq!(action, XDP_TX, "answered in the kernel");
    assert_eq!(reply[42..], user_space(&message, IpAddr::V4(CLIENT_V4))[..], "the user-space answer, the trailer gone");
}

#[test]
fn passes_up_misses() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(&fast_path, &frame_v4(&query("nothing.example.test", 1, None), UDP, PORT));
    assert_passes(&fast_path, &frame_v4(&query("host.elsewhere.test", 1, None), UDP, PORT));
}

#[test]
fn passes_up_other_protocols_and_ports() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(&fast_path, &frame_v4(&query("host.example.test", 1, None), TCP, PORT));
    assert_passes(&fast_path, &frame_v4(&query("host.example.test", 1, None), UDP, 5353));
}

#[test]
fn passes_up_fragments() {
    let Some(fast_path) = fast_path() else { return };
    let mut frame = frame_v4(&query("host.example.test", 1, None), UDP, PORT);
    frame[20] |= 0x20; // More fragments.
    assert_passes(&fast_path, &frame);
}

#[test]
fn passes_up_ipv4_options() {
    let Some(fast_path) = fast_path() else { return };
    let mut frame = frame_v4(&query("host.example.test", 1, None), UDP, PORT);
    frame[14] = 0x46;
    assert_passes(&fast_path, &frame);
}

#[test]
fn passes_up_ipv6_extension_headers() {
    let Some(fast_path) = fast_path() else { return };
    // Hop-by-hop options first: the UDP header is not where it would be.
    assert_passes(&fast_path, &frame_v6(&query("host.example.test", 1, None), 0));
}

/// The query for host.example.test with `edit` applied to its DNS message.
fn edited(edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut message = query("host.example.test", 1, Some((1232, 0, false, &[])));
    edit(&mut message);
    frame_v4(&message, UDP, PORT)
}

#[test]
fn passes_up_responses() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(&fast_path, &edited(|message| message[2] |= 0x80));
}

#[test]
fn passes_up_other_opcodes() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(&fast_path, &edited(|message| message[2] |= 4 << 3));
}

#[test]
fn passes_up_other_question_counts() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(&fast_path, &edited(|message| message[5] = 2));
}

#[test]
fn passes_up_edns_versions_above_0() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(&fast_path, &frame_v4(&query("host.example.test", 1, Some((1232, 1, false, &[]))), UDP, PORT));
}

/// Options besides one plain Client Subnet (tests/suite/ecs.rs) pass up, as do
/// subnets user space refuses (FORMERR) or would echo another scope of.
#[test]
fn passes_up_edns_options() {
    let Some(fast_path) = fast_path() else { return };
    let nsid = [0, 3, 0, 0];
    let cookie = [0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    let padding = [0, 12, 0, 2, 0, 0];
    let subnet = [0, 8, 0, 7, 0, 1, 24, 0, 198, 51, 100];
    let two_subnets = [subnet, subnet].concat();
    let subnet_and_nsid = [&subnet[..], &nsid].concat();
    let with_scope = [0, 8, 0, 7, 0, 1, 24, 24, 198, 51, 100];
    let bits_past_prefix = [0, 8, 0, 7, 0, 1, 23, 0, 198, 51, 101];
    let octet_too_many = [0, 8, 0, 8, 0, 1, 24, 0, 198, 51, 100, 0];
    let prefix_too_long = [0, 8, 0, 9, 0, 1, 33, 0, 198, 51, 100, 7, 0];
    let unknown_family = [0, 8, 0, 5, 0, 3, 8, 0, 10];
    let length_past_end = [0, 8, 0, 8, 0, 1, 24, 0, 198, 51, 100];
    for option in [
        &nsid[..],
        &cookie,
        &padding,
        &two_subnets,
        &subnet_and_nsid,
        &with_scope,
        &bits_past_prefix,
        &octet_too_many,
        &prefix_too_long,
        &unknown_family,
        &length_past_end,
    ] {
        assert_passes(&fast_path, &frame_v4(&query("host.example.test", 1, Some((1232, 0, false, option))), UDP, PORT));
    }
}

#[test]
fn passes_up_a_second_opt() {
    let Some(fast_path) = fast_path() else { return };
    assert_passes(
        &fast_path,
        &edited(|message| {
            message[11] = 2;
            message.extend([0, 0, 41, 4, 0, 0, 0, 0, 0, 0, 0]);
        }),
    );
}

/// A TSIG record (RFC 8945) of key `key.`: the kernel reads no further
/// than its type, so its MAC need not be right.
fn tsig_record() -> Vec<u8> {
    let mut record = b"\x03key\x00\x00\xfa\x00\xff\x00\x00\x00\x00".to_vec();
    let mut rdata = b"\x0bhmac-sha256\x00\x00\x00\x6b\x49\xd2\x00\x01\x2c\x00\x20".to_vec();
    rdata.extend([0xAA; 32]);
    rdata.extend([0xAB, 0xCD, 0, 0, 0, 0]);
    record.extend((rdata.len() as u16).to_be_bytes());
    record.extend(rdata);
    record
}

#[test]
fn passes_up_signed_queries_for_user_space_to_check_and_sign() {
    let Some(fast_path) = fast_path() else { return };
    // After an OPT record: two additional records (EDNS_UNSUPPORTED).
    assert_passes(
        &fast_path,
        &edited(|message| {
            message[11] = 2;
            message.extend(tsig_record());
        }),
    );
    // Alone: an additional record that is not OPT (NOT_A_PLAIN_QUERY).
    let mut signed = query("host.example.test", 1, None);
    signed[11] = 1;
    signed.extend(tsig_record());
    assert_passes(&fast_path, &frame_v4(&signed, UDP, PORT));
}

#[test]
fn passes_up_replies_larger_than_the_client_takes() {
    let Some(fast_path) = fast_path() else { return };
    // Five 100-octet TXT records: more than 512 octets without EDNS.
    assert_passes(&fast_path, &frame_v4(&query("big.example.test", 16, None), UDP, PORT));
    assert_passes(&fast_path, &frame_v6(&query("big.example.test", 16, Some((512, 0, false, &[]))), UDP));
}
