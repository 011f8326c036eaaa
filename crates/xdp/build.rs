//! Compiles the XDP program (bpf/answer.bpf.c) with clang into OUT_DIR,
//! where src/lib.rs embeds it, and sets `pharos_xdp_program` when it did.
//! On a machine without clang or libbpf's headers the crate still builds,
//! without the program (FastPath::load then says why), and a warning says
//! so; where clang runs, a program that does not compile fails the build.

use std::env;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "bpf/answer.bpf.c";
const HELPERS: &str = "/usr/include/bpf/bpf_helpers.h";
const PACKAGES: &str = "Debian packages clang and libbpf-dev (apt-get install clang libbpf-dev)";

fn main() {
    println!("cargo::rerun-if-changed={SOURCE}");
    println!("cargo::rerun-if-changed={HELPERS}");
    println!("cargo::rerun-if-env-changed=CLANG");
    println!("cargo::rustc-check-cfg=cfg(pharos_xdp_program)");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("answer.bpf.o");
    if !Path::new(HELPERS).exists() {
        return leave_out(&format!("libbpf's headers ({HELPERS}) are missing"));
    }
    // CLANG names another compiler, or a missing one to build without the program.
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let compiled = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        // The BPF target has no multiarch default, and <linux/types.h>
        // needs <asm/types.h> from the host's multiarch directory.
        .arg(format!("-I/usr/include/{}", multiarch()))
        .args(["-c", SOURCE, "-o"])
        .arg(&out)
        .status();
    match compiled {
        Err(error) if error.kind() == ErrorKind::NotFound => leave_out(&format!("`{clang}` was not found")),
        Err(error) => panic!("running `{clang}` to compile {SOURCE}: {error}"),
        Ok(status) => {
            assert!(status.success(), "`{clang}` failed to compile {SOURCE} ({status})");
            println!("cargo::rustc-cfg=pharos_xdp_program");
        }
    }
}

/// Builds the crate without the program, saying why and what fixes it.
fn leave_out(why: &str) {
    println!("cargo::warning=pharos-xdp: the kernel fast path (XDP) is left out of this build: {why}; install the {PACKAGES} to build it");
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
