//! `pharos check --config FILE`: the demo configuration passes; each of a
//! dozen seeded errors is found and named where it is (file:line, or the
//! setting's path), several at once are all reported, and nothing is
//! served or written meanwhile.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A copy of the demo configuration and its zone in a directory of its
/// own, to break one thing in.
struct Checked {
    directory: tempfile::TempDir,
}

impl Checked {
    fn demo() -> Checked {
        let directory = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::create_dir(directory.path().join("zones")).unwrap();
        std::fs::copy(root.join("zones/example.test.zone"), directory.path().join("zones/example.test.zone")).unwrap();
        let config = std::fs::read_to_string(root.join("pharos.toml")).unwrap();
        std::fs::write(directory.path().join("pharos.toml"), config).unwrap();
        Checked { directory }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    /// Replaces `from` by `to` in the file `name` (which must hold it).
    fn edit(&self, name: &str, from: &str, to: &str) -> &Checked {
        let text = std::fs::read_to_string(self.path(name)).unwrap();
        assert!(text.contains(from), "{name} has no {from:?}");
        std::fs::write(self.path(name), text.replacen(from, to, 1)).unwrap();
        self
    }

    /// Adds `text` to the end of the configuration.
    fn append(&self, text: &str) -> &Checked {
        let config = std::fs::read_to_string(self.path("pharos.toml")).unwrap();
        std::fs::write(self.path("pharos.toml"), format!("{config}\n{text}\n")).unwrap();
        self
    }

    /// The number of the first line of file `name` holding `text`.
    fn line_of(&self, name: &str, text: &str) -> usize {
        let file = std::fs::read_to_string(self.path(name)).unwrap();
        file.lines().position(|line| line.contains(text)).expect("the text is there") + 1
    }

    fn check(&self) -> Output {
        Command::new(env!("CARGO_BIN_EXE_pharos")).arg("check").arg("--config").arg(self.path("pharos.toml")).output().unwrap()
    }

    /// Runs the check, which must fail, and returns its errors.
    fn errors(&self) -> String {
        let output = self.check();
        let errors = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(1), "the check passed: {}", String::from_utf8_lossy(&output.stdout));
        assert!(errors.contains("serve would not start with it"), "{errors}");
        errors
    }

    /// Runs the check, which must fail naming each of `expected`.
    fn finds(&self, expected: &[&str]) {
        let errors = self.errors();
        for expected in expected {
            assert!(errors.contains(expected), "no {expected:?} in:\n{errors}");
        }
    }
}

#[test]
fn the_demo_configuration_is_ready_to_serve_and_checking_it_writes_nothing() {
    let checked = Checked::demo();
    let output = checked.check();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    for part in ["zone example.test", "13 names", "policy declarations: 1 services, 1 regions", "ready to serve"] {
        assert!(stdout.contains(part), "no {part:?} in:\n{stdout}");
    }
    assert!(!checked.path("pharos.sqlite").exists(), "the check made the store");
}

#[test]
fn a_bad_zone_line_is_named_by_file_and_line() {
    let checked = Checked::demo();
    checked.edit("zones/example.test.zone", "www ", "www 300 IN A 192.0.2.999\nwww ");
    checked.finds(&[&format!("example.test.zone:{}", checked.line_of("zones/example.test.zone", "192.0.2.999"))]);
}

#[test]
fn a_toml_type_error_is_named_by_line_and_column() {
    let checked = Checked::demo();
    checked.edit("pharos.toml", "threads = 0", "threads = \"four\"");
    // The column of the value, after `threads = `.
    checked.finds(&[&format!("pharos.toml:{}:11", checked.line_of("pharos.toml", "threads = \"four\"")), "invalid type"]);
}

#[test]
fn an_unknown_setting_is_named() {
    let checked = Checked::demo();
    checked.edit("pharos.toml", "threads = 0", "threads = 0\nthreds = 2");
    checked.finds(&[&format!("pharos.toml:{}:1", checked.line_of("pharos.toml", "threds")), "unknown field `threds`"]);
}

#[test]
fn a_missing_certificate_is_named() {
    Checked::demo().edit("pharos.toml", "[tls]\n", "[tls]\ncertificate = \"missing.pem\"\nkey = \"missing.key\"\n").finds(&["missing.pem"]);
}

#[test]
fn a_certificate_without_its_key_is_named_by_setting() {
    Checked::demo()
        .edit("pharos.toml", "[tls]\n", "[tls]\ncertificate = \"cert.pem\"\n")
        .finds(&["tls.certificate and tls.key go together"]);
}

#[test]
fn a_policy_naming_an_unknown_replica_is_named() {
    Checked::demo().edit("pharos.toml", "iad = { probability", "lhr = { probability").finds(&["app.example.test", "lhr"]);
}

#[test]
fn an_unreadable_bgp_table_is_named() {
    Checked::demo().append("[bgp]\ntable = \"missing.mrt\"").finds(&["missing.mrt"]);
}

#[test]
fn a_maxmind_database_that_is_not_one_is_named() {
    let checked = Checked::demo();
    std::fs::write(checked.path("geo.mmdb"), "not a MaxMind DB").unwrap();
    checked.append("[geo]\ndatabase = \"geo.mmdb\"").finds(&["geo.mmdb"]);
}

#[test]
fn a_tsig_secret_that_is_not_base64_is_named() {
    Checked::demo()
        .append("[[tsig_key]]\nname = \"transfer.\"\nalgorithm = \"hmac-sha256\"\nsecret = \"not base64!\"")
        .finds(&["transfer."]);
}

#[test]
fn a_refresh_not_shorter_than_the_signatures_is_named_by_setting() {
    Checked::demo()
        .edit("pharos.toml", "refresh_seconds = 604800", "refresh_seconds = 2000000")
        .finds(&["dnssec.refresh_seconds = 2000000"]);
}

#[test]
fn a_signed_zone_without_keys_is_named() {
    Checked::demo().edit("pharos.toml", "dnssec = false", "dnssec = true").finds(&["zone example.test", "keys"]);
}

#[test]
fn a_store_written_by_a_newer_pharos_is_refused_naming_both_versions() {
    let checked = Checked::demo();
    store_at_schema(&checked.path("pharos.sqlite"), 999);
    checked.finds(&["pharos.sqlite", "schema is version 999", "newer than this Pharos (0.1.0)"]);
}

#[test]
fn an_unreachable_postgresql_store_is_named() {
    let port = crate::common::free_port();
    Checked::demo()
        .edit("pharos.toml", "path = \"pharos.sqlite\"", &format!("url = \"postgres://pharos@127.0.0.1:{port}/pharos?connect_timeout=2\""))
        .finds(&["PostgreSQL cannot be reached"]);
}

#[test]
fn every_error_is_reported_at_once() {
    let checked = Checked::demo();
    checked.edit("zones/example.test.zone", "www ", "www 300 IN A 192.0.2.999\nwww ");
    checked.edit("pharos.toml", "refresh_seconds = 604800", "refresh_seconds = 0");
    checked.append("[bgp]\ntable = \"missing.mrt\"");
    let errors = checked.errors();
    for expected in ["example.test.zone:", "dnssec.refresh_seconds = 0", "missing.mrt", "3 error(s)"] {
        assert!(errors.contains(expected), "no {expected:?} in:\n{errors}");
    }
    assert!(errors.contains("policy declarations not checked") || !errors.contains("policy declarations:"), "{errors}");
}

/// A SQLite file whose schema says `version`, as a Pharos that knew that
/// many migrations would have left it (written with Python's sqlite3: the
/// suite links no SQLite of its own).
fn store_at_schema(path: &Path, version: u32) {
    let script = format!("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version = {version}'); c.commit()");
    let output = Command::new("python3").arg("-c").arg(script).arg(path).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}
