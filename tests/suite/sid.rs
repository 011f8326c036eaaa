//! `pharos sid` through the binary: the address alone on one line, and a
//! clear error (and a failing exit status) for each bad input.

use std::process::{Command, Output};

fn sid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pharos")).arg("sid").args(args).env_remove("RUST_BACKTRACE").output().unwrap()
}

fn refused(args: &[&str]) -> String {
    let output = sid(args);
    assert!(!output.status.success(), "pharos sid {args:?} succeeded");
    assert!(output.stdout.is_empty());
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn prints_the_address_alone() {
    let output = sid(&["--prefix", "192.0.2.0/24", "WWW.example.com."]);
    assert!(output.status.success());
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "192.0.2.97\n");
}

#[test]
fn the_conflict_list_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let conflicts = dir.path().join("conflicts");
    std::fs::write(&conflicts, "# moved\nwww.example.com 192.0.2.200\n").unwrap();
    let output = sid(&["--prefix", "192.0.2.0/24", "www.example.com", "--conflicts", conflicts.to_str().unwrap()]);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "192.0.2.200\n");
}

#[test]
fn bad_inputs_say_what_is_wrong() {
    assert!(refused(&["--prefix", "192.0.2.1/24", "a.example"]).contains("did you mean 192.0.2.0/24?"));
    assert!(refused(&["--prefix", "192.0.2.0/33", "a.example"]).contains("longer than the address's 32 bits"));
    assert!(refused(&["--prefix", "192.0.2.0/24", "bad_name.example"]).contains("is not a valid host name"));

    let dir = tempfile::tempdir().unwrap();
    let conflicts = dir.path().join("conflicts");
    std::fs::write(&conflicts, "a.example 192.0.2.1\nb.example 10.0.0.1\n").unwrap();
    let error = refused(&["--prefix", "192.0.2.0/24", "a.example", "--conflicts", conflicts.to_str().unwrap()]);
    assert!(error.contains("line 2: 10.0.0.1 for b.example is outside the service prefix 192.0.2.0/24"), "{error}");
    let missing = dir.path().join("missing");
    assert!(refused(&["--prefix", "192.0.2.0/24", "a.example", "--conflicts", missing.to_str().unwrap()]).contains("reading"));
}
