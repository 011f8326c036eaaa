//! Records the commit the binary is built from, for `pharos --version`:
//! `PHAROS_COMMIT` if the builder sets it (a package built from a source
//! tarball), else what git says of the checkout, else "unknown".

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PHAROS_COMMIT");
    let commit = std::env::var("PHAROS_COMMIT").ok().filter(|commit| !commit.is_empty()).or_else(git_commit);
    println!("cargo:rustc-env=PHAROS_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}

/// The checked-out commit, abbreviated; asks to be run again when HEAD or
/// the branch it names moves.
fn git_commit() -> Option<String> {
    for file in ["HEAD", "refs", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            println!("cargo:rerun-if-changed={}", PathBuf::from(path).display());
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn git(arguments: &[&str]) -> Option<String> {
    let output = Command::new("git").args(arguments).output().ok().filter(|output| output.status.success())?;
    String::from_utf8(output.stdout).ok().map(|text| text.trim().to_owned()).filter(|text| !text.is_empty())
}
