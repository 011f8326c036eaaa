//! What a load is doing and what it did, for the operator's command line.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::{Compression, DroppedRoutes, Format};

/// How far a load has got, reported every [`PROGRESS_EVERY`] routes and at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Routes (one prefix as seen by one peer) read so far.
    pub routes: u64,
    /// Bytes of the file read so far (compressed bytes for a compressed file).
    pub bytes_read: u64,
    /// The file's size in bytes.
    pub file_size: u64,
}

/// How many routes pass between two progress reports.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// What a load read and built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The file loaded.
    pub file: PathBuf,
    /// What it held, as recognised from its content.
    pub format: Format,
    pub compression: Compression,
    /// Routes read: one prefix as seen by one peer.
    pub routes: u64,
    /// Routes with no usable origin: an empty AS path (a route the peer
    /// originates itself), a path of sets only, or one containing AS 0.
    pub skipped_routes: u64,
    /// MRT records the parser rejected while the framing around them held
    /// (e.g. RIB_GENERIC, unknown subtypes, a malformed attribute block).
    pub skipped_records: u64,
    /// Routes whose AS path has an AS_SET.
    pub as_set_paths: u64,
    /// Routes that gave no origin: default routes, too short prefixes and
    /// special-purpose space (see [`crate::OriginRules`]).
    pub dropped: DroppedRoutes,
    /// Prefixes whose peers disagreed on the origin AS.
    pub origin_conflicts: u64,
    /// Distinct IPv4 prefixes with an origin.
    pub prefixes_v4: usize,
    /// Distinct IPv6 prefixes with an origin.
    pub prefixes_v6: usize,
    /// ASes in the graph.
    pub ases: usize,
    /// Undirected links in the graph.
    pub links: usize,
    /// Heap bytes of the IP-to-AS table and of the graph.
    pub memory_bytes: usize,
    /// Wall time of the whole load.
    pub elapsed: Duration,
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} ({}, {}) in {:.2} s", self.file.display(), self.format, self.compression, self.elapsed.as_secs_f64())?;
        writeln!(f, "  routes {}, skipped routes {}, skipped records {}", self.routes, self.skipped_routes, self.skipped_records)?;
        let DroppedRoutes { default_routes, too_short, special_purpose } = self.dropped;
        writeln!(f, "  no origin taken from: default routes {default_routes}, too short {too_short}, special-purpose {special_purpose}")?;
        writeln!(f, "  prefixes {} IPv4 + {} IPv6, origin conflicts {}", self.prefixes_v4, self.prefixes_v6, self.origin_conflicts)?;
        writeln!(f, "  AS_SET paths {}", self.as_set_paths)?;
        write!(f, "  AS graph {} ASes, {} links; tables {:.1} MiB", self.ases, self.links, self.memory_bytes as f64 / (1 << 20) as f64)
    }
}
