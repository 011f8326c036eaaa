//! bench/xdpgen against `pharos serve` over a veth pair (root; it skips
//! loudly without, and fails under CI=true): a bounded count of queries
//! sent as XDP frames out of the client's end, to the server with its fast
//! path on the server's end (answers in XDP) and without it (the socket
//! path), and every query sent answered with the rcode its name has, none
//! truncated, none an answer to another question. Correctness, not timing.

#[path = "suite/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;

use clap::Parser;
use common::netns::{self, Link, Served};

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nwww AAAA 2001:db8::2\n";
/// Names the zone has (NOERROR), and names it has not (NXDOMAIN): one mix each.
const FOUND: &str = "www.example.test A\nwww.example.test AAAA\nns.example.test A\nexample.test SOA\n";
const NOT_FOUND: &str = "nothing.example.test A\nnx1.example.test AAAA\nnx2.www.example.test A\n";
const COUNT: u64 = 3000;
const NOERROR: usize = 0;
const NXDOMAIN: usize = 3;

#[test]
fn every_query_xdpgen_sends_to_the_kernel_path_is_answered_rightly() {
    if netns::may_run() {
        let served = Served::start_with(ZONE, "", true);
        check_answers(&served);
        let (_, shown) = served.api("GET", "/v1/fastpath", None);
        let answered = shown["interfaces"][0]["traffic"]["answered_static"].as_u64().unwrap_or(0);
        assert!(answered >= COUNT / 2, "the kernel answered {answered} queries: the frames did not reach XDP\n{shown}");
    }
}

#[test]
fn every_query_xdpgen_sends_to_the_socket_path_is_answered_rightly() {
    if netns::may_run() {
        let served = Served::start_with(ZONE, "", false);
        check_answers(&served);
    }
}

/// Sends COUNT queries of each mix and checks their answers.
fn check_answers(served: &Served) {
    let link = &served.link;
    // xdpgen's program takes the client's end; the server's end needs a
    // NAPI instance to take XDP frames (ndo_xdp_xmit): GRO gives it one
    // where no XDP program does.
    run(Command::new("ip").args(["-n", &link.client, "link", "set", "dev", &link.client_interface, "xdp", "off"]));
    run(Link::command(&link.server, "ethtool").args(["-K", &link.server_interface, "gro", "on"]));
    let server_mac = mac(&link.server, &link.server_interface);
    let dir = tempfile::tempdir().unwrap();
    for (mix, rcode) in [(FOUND, NOERROR), (NOT_FOUND, NXDOMAIN)] {
        let file = dir.path().join("mix.txt");
        std::fs::write(&file, mix).unwrap();
        let report = send(link, &server_mac, &file);
        let (sent, responses) = (report.sending.sent, report.responses);
        let log = served.log();
        assert_eq!(sent + report.sending.skipped, COUNT, "{}", report.json());
        assert!(sent > 0, "{}", report.json());
        assert_eq!(responses.rcodes[rcode], sent, "every query answered with rcode {rcode}: {}\n{log}", report.json());
        assert_eq!(responses.answered(), sent, "no other rcode: {}", report.json());
        assert_eq!((responses.truncated, responses.unexpected, report.refused), (0, 0, 0), "{}", report.json());
    }
}

/// Runs xdpgen in-process on a thread inside the client's namespace.
fn send(link: &Link, server_mac: &str, mix: &Path) -> xdpgen::Report {
    let args = xdpgen::Args::parse_from([
        "xdpgen",
        "--iface",
        &link.client_interface,
        "--server",
        &netns::SERVER_V4.to_string(),
        "--server-mac",
        server_mac,
        "--source",
        &netns::CLIENT_V4.to_string(),
        "--mix",
        mix.to_str().unwrap(),
        // Slow enough for a debug build on a busy machine; bounded by count.
        "--rate",
        "5000",
        "--count",
        &COUNT.to_string(),
        "--duration",
        "30",
        "--timeout-ms",
        "3000",
    ]);
    Link::inside(&link.client, move || xdpgen::run(&args).unwrap())
}

/// The MAC address of `interface` in `namespace`.
fn mac(namespace: &str, interface: &str) -> String {
    let output = Command::new("ip").args(["-n", namespace, "-br", "link", "show", "dev", interface]).output().unwrap();
    let shown = String::from_utf8(output.stdout).unwrap();
    shown.split_whitespace().nth(2).unwrap_or_else(|| panic!("no MAC address in {shown:?}")).to_string()
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
}
