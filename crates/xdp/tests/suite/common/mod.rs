//! Helpers shared by the tests: wire names, frames from the client to
//! the server, and running the program on them.

// Each test binary uses its own part of these.
#![allow(dead_code)]

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use aya::programs::{TestRun, TestRunOptions};
use pharos_answer::{Client, Settings, Snapshot, Transport, respond};
use pharos_route::Routes;
use pharos_xdp::maps::ones_complement_sum;
use pharos_xdp::{FastPath, Settings as FastPathSettings};
use pharos_zone::{ZoneSet, parse_zone_text};
use rand::SeedableRng;

pub const PORT: u16 = 53;
pub const CLIENT_PORT: u16 = 40000;
pub const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x53);
pub const UDP: u8 = 17;
pub const TCP: u8 = 6;
// The program's verdicts (enum xdp_action in <linux/bpf.h>).
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;

/// Whether this process may load the BPF program: it needs root, and a
/// build that has the program. If not, prints a loud SKIP, or fails when
/// the environment variable CI is set.
pub fn may_load_bpf() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && pharos_xdp::PROGRAM.is_some() {
        return true;
    }
    let msg = if root { "this build has no XDP program (clang or libbpf-dev was missing)" } else { "loading an XDP program needs root" };
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this is a failure");
    }
    eprintln!("\n*** SKIP: {msg}. ***\n");
    false
}

pub fn wire_name(text: &str) -> Vec<u8> {
    let mut wire = Vec::new();
    for label in text.split('.') {
        wire.push(label.len() as u8);
        wire.extend(label.as_bytes());
    }
    wire.push(0);
    wire
}

/// A frame carrying `payload` from the client to the server over IPv4
/// (protocol `protocol`, to `port`).
pub fn frame_v4(payload: &[u8], protocol: u8, port: u16) -> Vec<u8> {
    frame_v4_from(CLIENT_V4, payload, protocol, port)
}

pub fn frame_v4_from(client: Ipv4Addr, payload: &[u8], protocol: u8, port: u16) -> Vec<u8> {
    let mut frame = ethernet(0x0800);
    let total = 20 + 8 + payload.len();
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, protocol, 0, 0];
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip.extend(client.octets());
    ip.extend(SERVER_V4.octets());
    let check = !ones_complement_sum(&ip);
    ip[10..12].copy_from_slice(&check.to_be_bytes());
    frame.extend(ip);
    frame.extend(udp(IpAddr::V4(client), IpAddr::V4(SERVER_V4), CLIENT_PORT, port, payload));
    frame
}

pub fn frame_v6(payload: &[u8], next_header: u8) -> Vec<u8> {
    frame_v6_from(CLIENT_V6, payload, next_header)
}

pub fn frame_v6_from(client: Ipv6Addr, payload: &[u8], next_header: u8) -> Vec<u8> {
    let mut frame = ethernet(0x86DD);
    frame.extend([0x60, 0, 0, 0]);
    frame.extend(((8 + payload.len()) as u16).to_be_bytes());
    frame.extend([next_header, 64]);
    frame.extend(client.octets());
    frame.extend(SERVER_V6.octets());
    frame.extend(udp(IpAddr::V6(client), IpAddr::V6(SERVER_V6), CLIENT_PORT, PORT, payload));
    frame
}

/// A UDP query frame from `client`, over its family.
pub fn frame_from(client: IpAddr, payload: &[u8]) -> Vec<u8> {
    match client {
        IpAddr::V4(v4) => frame_v4_from(v4, payload, UDP, PORT),
        IpAddr::V6(v6) => frame_v6_from(v6, payload, UDP),
    }
}

fn ethernet(ethertype: u16) -> Vec<u8> {
    [&SERVER_MAC[..], &CLIENT_MAC, &ethertype.to_be_bytes()].concat()
}

fn udp(from: IpAddr, to: IpAddr, from_port: u16, to_port: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut segment = [&from_port.to_be_bytes()[..], &to_port.to_be_bytes(), &len.to_be_bytes(), &[0, 0], payload].concat();
    let check = udp_checksum(from, to, &segment);
    segment[6..8].copy_from_slice(&check.to_be_bytes());
    segment
}

/// The UDP checksum of `segment` (its checksum field zeroed) between
/// `from` and `to` (RFC 768, RFC 8200 section 8.1).
pub fn udp_checksum(from: IpAddr, to: IpAddr, segment: &[u8]) -> u16 {
    let addresses = |address: IpAddr| match address {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    let mut pseudo = [addresses(from), addresses(to)].concat();
    pseudo.extend([0, UDP]);
    pseudo.extend((segment.len() as u16).to_be_bytes());
    let sum = u32::from(ones_complement_sum(&pseudo)) + u32::from(ones_complement_sum(segment));
    let folded = ((sum & 0xffff) + (sum >> 16)) as u16;
    match !folded {
        0 => 0xffff,
        check => check,
    }
}

/// The settings the tests load the program with: port 53, room for 4096
/// answers per snapshot, no rate limit.
pub fn settings() -> FastPathSettings {
    FastPathSettings { ports: vec![PORT], max_entries: 4096, rate_limit: None, response_limit: None }
}

/// Runs the program on `frame`: its action and the frame it leaves.
pub fn run(fast_path: &FastPath, frame: &[u8]) -> (u32, Vec<u8>) {
    let mut out = vec![0; 4096];
    let options = TestRunOptions { data_in: Some(frame), data_out: Some(&mut out), ..TestRunOptions::default() };
    let result = fast_path.program().unwrap().test_run(options).expect("BPF_PROG_TEST_RUN runs");
    out.truncate(result.data_size_out as usize);
    (result.return_value, out)
}

/// `frames` run on a program `load` makes afresh, all within a second
/// (tried afresh up to three times when the machine stalls longer): for
/// limits whose one token a second a quicker run cannot earn back. The
/// program, and each run's action and frame.
pub fn runs_within_a_second(load: impl Fn() -> FastPath, frames: &[Vec<u8>]) -> (FastPath, Vec<(u32, Vec<u8>)>) {
    for _ in 0..3 {
        let fast_path = load();
        let start = std::time::Instant::now();
        let runs = frames.iter().map(|frame| run(&fast_path, frame)).collect();
        if start.elapsed() < std::time::Duration::from_millis(900) {
            return (fast_path, runs);
        }
    }
    panic!("three runs of {} packets each took a second or more", frames.len());
}

/// A snapshot serving `zone` as example.test, with `routes`.
pub fn snapshot_of(zone: &str, routes: Routes) -> Snapshot {
    let zone = parse_zone_text("example.test", zone, "test.zone").expect("test zone loads");
    Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes, settings: Settings::default() }
}

/// Every reply user space gives `client` for `message`: drawn with seeds
/// 0, 1, ... until `variants` distinct ones (as many as the kernel lists
/// for the client's class).
pub fn user_space_replies(snapshot: &Snapshot, client: IpAddr, message: &[u8], variants: usize) -> HashSet<Vec<u8>> {
    let asker = Client { address: client, transport: Transport::Udp };
    let mut seen = HashSet::new();
    for seed in 0..10_000 {
        let mut out = Vec::new();
        respond(message, &asker, snapshot, &mut rand::rngs::SmallRng::seed_from_u64(seed), &mut out).expect("user space answers");
        seen.insert(out);
        if seen.len() == variants {
            return seen;
        }
    }
    panic!("user space gave {} distinct replies in 10,000 draws, the kernel lists {variants}", seen.len());
}

/// The kernel's DNS reply to `message` from `client`, past the headers.
pub fn kernel_reply(fast_path: &FastPath, client: IpAddr, message: &[u8]) -> Vec<u8> {
    let (action, frame) = run(fast_path, &frame_from(client, message));
    assert_eq!(action, XDP_TX, "answered in the kernel");
    let headers = if client.is_ipv4() { 42 } else { 62 };
    frame[headers..].to_vec()
}

/// The program loaded with the default [`settings`] and filled from
/// `snapshot`, or `None` (after a loud SKIP) where BPF may not be loaded.
pub fn loaded(snapshot: &Snapshot) -> Option<FastPath> {
    if !may_load_bpf() {
        return None;
    }
    let mut fast_path = FastPath::load(&settings()).expect("the program loads");
    fast_path.sync(snapshot).expect("the maps fill");
    Some(fast_path)
}
