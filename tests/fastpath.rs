//! The kernel fast path inside `pharos serve`: when it cannot run (no such
//! interface, a mode the interface refuses, no root), the server says why,
//! once, in its log, in `GET /v1/fastpath` and `pharos ctl fastpath`, and
//! answers from user space; its per-source rate limit holds in user space
//! too.

mod common;

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use common::{query_bytes, request, start_with_api, udp_query};
use domain::base::iana::Rtype;

const TOKEN: &str = "fastpath-test-token";
/// The warning the server logs when it serves without the fast path.
const OFF: &str = "kernel fast path off, serving from user space only";

#[test]
fn a_fast_path_that_cannot_attach_is_reported_and_the_server_answers() {
    for (fastpath, interface) in [
        ("interfaces = [\"nosuch0\"]", "nosuch0"),
        // The loopback device has no native XDP: only generic mode.
        ("interfaces = [\"lo\"]\nmode = \"native\"", "lo"),
    ] {
        let (pharos, api) = start_with_api(TOKEN, &format!("[fastpath]\n{fastpath}"));
        let answer = udp_query(pharos.address, "www.example.test", Rtype::A).expect("answered from user space");
        assert_eq!(answer.header_counts().ancount(), 1, "{fastpath}");
        let log = pharos.log();
        assert_eq!(log.matches(OFF).count(), 1, "{fastpath}: one warning, saying why:\n{log}");
        // Without root the program does not load at all, and the warning says so.
        let why = if is_root() { interface } else { "not running as root" };
        let warning = log.lines().find(|line| line.contains(OFF)).unwrap();
        assert!(warning.contains(why), "{fastpath}: the warning should name {why:?}: {warning}");

        let (status, shown) = request("GET", &format!("{api}/v1/fastpath"), Some(TOKEN), None);
        assert_eq!((status, shown["state"].as_str()), (200, Some("failed")), "{shown}");
        assert!(shown["reason"].as_str().unwrap().contains(why), "{shown}");
        assert_eq!(shown["interfaces"][0]["name"], interface);
        assert_eq!(shown["interfaces"][0]["attached"], false);
        let table = ctl(&api, &["fastpath"]);
        assert!(table.contains("kernel fast path: failed") && table.contains(why), "{table}");
        assert!(table.lines().any(|line| line.starts_with(interface) && line.contains(" no ")), "{table}");
    }
}

#[test]
fn without_interfaces_the_fast_path_is_off() {
    let (pharos, api) = start_with_api(TOKEN, "");
    assert!(!pharos.log().contains("kernel fast path"), "nothing to say when not asked for:\n{}", pharos.log());
    let (_, shown) = request("GET", &format!("{api}/v1/fastpath"), Some(TOKEN), None);
    assert_eq!((shown["state"].as_str(), shown["interfaces"].as_array().map(Vec::len)), (Some("off"), Some(0)), "{shown}");
    assert!(shown["user_space_rate_limited"].is_null(), "no limit configured: {shown}");
    let json: serde_json::Value = serde_json::from_str(&ctl(&api, &["--json", "fastpath"])).unwrap();
    assert_eq!(json, shown);
}

#[test]
fn user_space_drops_a_source_over_its_limit_and_answers_the_others() {
    const BURST: u16 = 5;
    // One token a second: the burst is all a source gets while the test runs.
    let (pharos, api) = start_with_api(TOKEN, &format!("[fastpath.rate_limit]\nper_second = 1\nburst = {BURST}"));
    let flooder = UdpSocket::bind("127.0.0.2:0").unwrap();
    for id in 0..=BURST {
        flooder.send_to(&query_bytes(id, "www.example.test", Rtype::A), pharos.address).unwrap();
    }
    let answered = answers(&flooder);
    assert_eq!(answered.len(), usize::from(BURST), "the burst is answered, the one after it is not: {answered:?}");
    let other = UdpSocket::bind("127.0.0.3:0").unwrap();
    other.send_to(&query_bytes(99, "www.example.test", Rtype::A), pharos.address).unwrap();
    assert_eq!(answers(&other), vec![99], "another source has a bucket of its own");
    let (_, shown) = request("GET", &format!("{api}/v1/fastpath"), Some(TOKEN), None);
    assert_eq!(shown["user_space_rate_limited"], 1, "{shown}");
    assert!(ctl(&api, &["fastpath"]).contains("user space dropped 1 UDP queries"));
}

/// The IDs of the responses `socket` receives until it has heard nothing
/// for a while.
fn answers(socket: &UdpSocket) -> Vec<u16> {
    socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut buffer = [0; 512];
    let mut ids = Vec::new();
    while let Ok(length) = socket.recv(&mut buffer) {
        assert!(length >= 2);
        ids.push(u16::from_be_bytes([buffer[0], buffer[1]]));
    }
    ids
}

/// What `pharos ctl ARGS` prints; it must succeed.
fn ctl(api: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", api, "--token", TOKEN]).args(args).output().unwrap();
    assert!(output.status.success(), "pharos ctl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
