//! Where the tests find their data. Two kinds:
//!
//! - [`fixture`]: small extracts committed in the repository's
//!   `tests/data/` (its README gives each one's source and licence), which
//!   every policy's tests run on;
//! - [`large`]: the whole data sets, too large or not free to commit,
//!   found in the directory the environment variable [`LARGE_DATA`] names
//!   (by default `../shared/data` beside the repository). A test that
//!   needs one and does not find it says what is missing and skips, except
//!   under `CI=true`, where the data sets are beside the clone and a
//!   missing one is a failure.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable that names the directory of the large data sets.
pub const LARGE_DATA: &str = "PHAROS_DATA";

/// The repository's root: this crate is `crates/test-data` in it.
fn repository() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `tests/data/NAME`, which is committed: a missing one is a broken checkout.
pub fn fixture(name: &str) -> PathBuf {
    let path = repository().join("tests/data").join(name);
    assert!(path.is_file(), "{} is missing: it is part of the repository (tests/data/README.md)", path.display());
    path
}

/// Where the large data sets are looked for.
pub fn large_data_directory() -> PathBuf {
    std::env::var_os(LARGE_DATA).map(PathBuf::from).unwrap_or_else(|| repository().join("../shared/data"))
}

/// The large data set at `relative` (e.g. `bgp/routeviews.route-views.jinx.ribs.1401487200.bz2`)
/// inside [`large_data_directory`], or `None` after saying that the
/// calling test skips for want of it. Under `CI=true` a missing data set
/// fails the test instead.
pub fn large(relative: &str) -> Option<PathBuf> {
    let directory = large_data_directory();
    let path = directory.join(relative);
    if path.is_file() {
        return Some(path);
    }
    let missing = format!(
        "the large data set {relative} is not in {} (set {LARGE_DATA} to the directory that holds the project's data sets; \
         tests/data/README.md says where they come from)",
        directory.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{missing}");
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    // Written to the stream itself, not through eprintln!, which the test
    // harness captures: a skip must show in the suite's output.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {missing}");
    None
}
