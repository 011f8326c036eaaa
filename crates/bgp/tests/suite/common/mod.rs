//! What both test files of pharos-bgp need: a dump written to a file,
//! and the origin rules its hand-made tables load with.

use std::path::PathBuf;

use pharos_bgp::OriginRules;

/// A file in a fresh temporary directory, kept alive with it.
pub struct TempFile {
    _directory: tempfile::TempDir,
    pub path: PathBuf,
}

/// Writes `content` to a file called `name` in a directory of its own.
pub fn temp_file(name: &str, content: &[u8]) -> TempFile {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join(name);
    std::fs::write(&path, content).unwrap();
    TempFile { _directory: directory, path }
}

/// These tables use documentation and private space, which a real
/// table's rules drop as origins.
pub fn lab() -> OriginRules {
    OriginRules { special_purpose_origins: true, ..OriginRules::default() }
}
