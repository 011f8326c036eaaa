//! Why a routing table could not be loaded. Every message names the file,
//! and where the content is at fault, the place in it.

use std::io;
use std::path::PathBuf;

/// A routing table that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The file (after decompression) is empty.
    #[error("{}: the file is empty", path.display())]
    Empty { path: PathBuf },
    /// The file holds BGP update messages, not a table.
    #[error("{}: holds BGP updates (BGP4MP), not a RIB dump; load a RIB snapshot (\"bview\" or \"rib\" file)", path.display())]
    UpdatesNotRib { path: PathBuf },
    /// The content is not a format Pharos reads.
    #[error(
        "{}: not a BGP RIB dump: expected MRT TABLE_DUMP_V2 or TABLE_DUMP, or `bgpdump -m` text (plain, gzip or bzip2)",
        path.display()
    )]
    UnknownFormat { path: PathBuf },
    /// The content is truncated or corrupt at `at`.
    #[error("{}: {at}: {detail}", path.display())]
    Corrupt { path: PathBuf, at: String, detail: String },
    /// The file was read to the end without a single usable route.
    #[error("{}: no route with an origin AS in the file", path.display())]
    NoRoutes { path: PathBuf },
}

/// A fault in the content, before the file name is attached.
#[derive(Debug)]
pub(crate) struct Corruption {
    /// Where: "line 12", "after route 5000 (byte 81920 of the file)".
    pub(crate) at: String,
    pub(crate) detail: String,
}
