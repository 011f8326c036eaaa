//! For build scripts of crates that embed a BPF program written in C
//! (crates/xdp, bench/xdpgen): [`compile`] runs clang on it into OUT_DIR
//! and sets a cfg when it did. On a machine without clang or libbpf's
//! headers the crate still builds, without the program, and a cargo
//! warning says so; where clang runs, a program that does not compile
//! fails the build.

use std::env;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

const HELPERS: &str = "/usr/include/bpf/bpf_helpers.h";
const PACKAGES: &str = "Debian packages clang and libbpf-dev (apt-get install clang libbpf-dev)";
/// Rewritten by dpkg whenever a package is installed or removed.
const PACKAGE_DATABASE: &str = "/var/lib/dpkg/status";

/// Compiles `source` (relative to the crate) into OUT_DIR/`object` and
/// sets `--cfg {cfg}` when it did; `what` names the program in the
/// warning printed when it is left out. Call from build.rs only.
pub fn compile(source: &str, object: &str, cfg: &str, what: &str) {
    println!("cargo::rerun-if-changed={source}");
    println!("cargo::rerun-if-env-changed=CLANG");
    println!("cargo::rustc-check-cfg=cfg({cfg})");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join(object);
    let leave_out = |why: &str| {
        println!("cargo::warning={what} is left out of this build: {why}; install the {PACKAGES} to build it");
        rerun_after_an_install();
    };
    if !Path::new(HELPERS).exists() {
        return leave_out(&format!("libbpf's headers ({HELPERS}) are missing"));
    }
    println!("cargo::rerun-if-changed={HELPERS}");
    // CLANG names another compiler, or a missing one to build without the program.
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let compiled = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        // The BPF target has no multiarch default, and <linux/types.h>
        // needs <asm/types.h> from the host's multiarch directory.
        .arg(format!("-I/usr/include/{}", multiarch()))
        .args(["-c", source, "-o"])
        .arg(&out)
        .status();
    match compiled {
        Err(error) if error.kind() == ErrorKind::NotFound => leave_out(&format!("`{clang}` was not found")),
        Err(error) => panic!("running `{clang}` to compile {source}: {error}"),
        Ok(status) => {
            assert!(status.success(), "`{clang}` failed to compile {source} ({status})");
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}

/// Asks cargo to run the build script again once a package is installed,
/// and only then. Watching the missing header itself would not do: cargo
/// runs a script again at every build while a path it watches is missing,
/// and once the package puts it there, with the package's own (older)
/// modification time, cargo sees nothing new. Debian's package database
/// changes at every install.
fn rerun_after_an_install() {
    if Path::new(PACKAGE_DATABASE).exists() {
        println!("cargo::rerun-if-changed={PACKAGE_DATABASE}");
    }
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
