//! The kernel fast path inside `pharos serve`: when it cannot run (no such
//! interface, a mode the interface refuses, no root), the server says why,
//! once, in its log, in `GET /v1/fastpath` and `pharos ctl fastpath`, and
//! answers from user space.

mod common;

use std::process::Command;

use common::{request, start_with_api, udp_query};
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
    let json: serde_json::Value = serde_json::from_str(&ctl(&api, &["--json", "fastpath"])).unwrap();
    assert_eq!(json, shown);
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
