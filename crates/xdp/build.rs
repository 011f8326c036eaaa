//! Compiles the XDP program (bpf/answer.bpf.c) with clang into OUT_DIR,
//! where src/lib.rs embeds it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "bpf/answer.bpf.c";
const PACKAGES: &str = "Debian packages: clang libbpf-dev (apt-get install clang libbpf-dev)";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("answer.bpf.o");
    if !Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        panic!("pharos-xdp needs libbpf's headers (/usr/include/bpf/bpf_helpers.h): install the {PACKAGES}");
    }
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        // The BPF target has no multiarch default, and <linux/types.h>
        // needs <asm/types.h> from the host's multiarch directory.
        .arg(format!("-I/usr/include/{}", multiarch()))
        .args(["-c", SOURCE, "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|error| panic!("pharos-xdp compiles its BPF program with `{clang}` ({error}): install the {PACKAGES}"));
    assert!(status.success(), "`{clang}` failed to compile {SOURCE} ({status})");
}

/// Debian's multiarch triple for the target, e.g. x86_64-linux-gnu.
fn multiarch() -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    match arch.as_str() {
        "arm" => "arm-linux-gnueabihf".into(),
        _ => format!("{arch}-linux-{}", if env.is_empty() { "gnu" } else { &env }),
    }
}
