//! The build script of a crate that embeds a BPF program runs again when,
//! and only when, it could now do otherwise: a second build with nothing
//! changed compiles nothing, and installing the missing package brings
//! the program in at the next build.
//!
//! A scratch crate built with cargo, in a private mount namespace where
//! libbpf's headers are hidden (an empty directory mounted over them) and
//! where "installing a package" is a fresh copy of dpkg's database mounted
//! over it, as dpkg rewrites it. Needs root (the namespace), clang and
//! libbpf-dev; without them it says SKIP (a failure under CI=true).

use std::path::Path;
use std::process::Command;

const HEADERS: &str = "/usr/include/bpf";
const PACKAGE_DATABASE: &str = "/var/lib/dpkg/status";

/// The scratch crate: its binary prints whether the program was built in.
fn write_scratch_crate(dir: &Path) {
    let bpf_build = env!("CARGO_MANIFEST_DIR");
    let manifest = format!(
        "[package]\nname = \"scratch\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [build-dependencies]\npharos-bpf-build = {{ path = \"{bpf_build}\" }}\n\n[workspace]\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() { println!(\"built in: {}\", cfg!(scratch_program)); }\n").unwrap();
    let build = "fn main() { pharos_bpf_build::compile(\"pass.bpf.c\", \"pass.o\", \"scratch_program\", \"scratch\"); }\n";
    std::fs::write(dir.join("build.rs"), build).unwrap();
    let program = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
                   SEC(\"xdp\") int pass(struct xdp_md *ctx) { return XDP_PASS; }\n\
                   char LICENSE[] SEC(\"license\") = \"GPL\";\n";
    std::fs::write(dir.join("pass.bpf.c"), program).unwrap();
}

/// Why this machine cannot run the test, if it cannot.
fn missing_prerequisite() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (a private mount namespace is needed)");
    }
    if !Path::new(HEADERS).join("bpf_helpers.h").exists() || !Path::new(PACKAGE_DATABASE).exists() {
        return Some("libbpf-dev (or dpkg's database) is missing");
    }
    if Command::new("clang").arg("--version").output().is_err() {
        return Some("clang is missing");
    }
    None
}

/// The steps, in one shell inside the namespace; each build's verbose
/// line about the scratch crate ("Fresh" or "Dirty ...") is printed
/// after a marker.
const STEPS: &str = r#"
set -eu
mount --bind "$EMPTY" "$HEADERS"
cargo build -q
echo "== second build"; cargo build -v 2>&1 | grep -E '(Fresh|Dirty|Compiling) scratch' || true
umount "$HEADERS"
cp "$DATABASE" "$NEW_DATABASE"
mount --bind "$NEW_DATABASE" "$DATABASE"
echo "== after the install"; cargo run -q
echo "== again"; cargo build -v 2>&1 | grep -E '(Fresh|Dirty|Compiling) scratch' || true
"#;

#[test]
fn builds_once_without_the_headers_and_again_once_they_are_installed() {
    if let Some(why) = missing_prerequisite() {
        assert!(std::env::var_os("CI").is_none(), "under CI this test must run: {why}");
        eprintln!("SKIP builds_once_without_the_headers_and_again_once_they_are_installed: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_scratch_crate(dir.path());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let output = Command::new("unshare")
        .args(["-m", "bash", "-c", STEPS])
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .env("EMPTY", &empty)
        .env("HEADERS", HEADERS)
        .env("DATABASE", PACKAGE_DATABASE)
        .env("NEW_DATABASE", dir.path().join("status"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}\n{}", String::from_utf8_lossy(&output.stderr));
    let after = |marker: &str| said.split(marker).nth(1).and_then(|rest| rest.lines().nth(1)).unwrap_or("").trim().to_string();
    assert!(after("== second build").starts_with("Fresh scratch"), "the build script ran again with nothing changed:\n{said}");
    assert_eq!(after("== after the install"), "built in: true", "the install was not noticed:\n{said}");
    assert!(after("== again").starts_with("Fresh scratch"), "{said}");
}
