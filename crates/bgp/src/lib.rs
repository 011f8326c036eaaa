//! BGP routing tables for Pharos's shortest AS-path policy (NetAirt,
//! section 4.3): which AS each address belongs to, and how many AS hops
//! separate two ASes.
//!
//! [`load`] reads a RIB dump (MRT TABLE_DUMP_V2 or TABLE_DUMP, or the text
//! of `bgpdump -m`; plain, gzip or bzip2, recognised by content) and builds
//!
//! - an [`IpToAs`] table: longest-prefix match from an address to the
//!   origin AS of its route, with the ECS scope of the answer;
//! - an [`AsGraph`]: ASes linked when adjacent in some AS path, from which
//!   [`AsGraph::hop_counts_from`] counts hops to every AS.
//!
//! Loading takes seconds and belongs off the query path; a lookup takes
//! tens of nanoseconds.
//!
//! # How routes are read
//!
//! - **Origin AS**: the last AS of the AS_SEQUENCE, whatever the ORIGIN
//!   attribute says (NetAirt takes incomplete, "?", routes the same way).
//!   A path ending in an AS_SET keeps the last AS before the set, the
//!   aggregator: NetAirt's "best available approximation", since the set
//!   is unordered and its true end unknown.
//! - **Links**: two ASes adjacent in an AS_SEQUENCE. Set members are linked
//!   to nothing, a set or confederation segment breaks adjacency, and
//!   prepending (an AS repeated) collapses to one hop.
//! - **Skipped routes**: an empty path (a peer's own route), a path of sets
//!   only, or one with AS 0 (RFC 7607) has no origin and adds nothing.
//! - **Disagreeing peers**: a prefix gets the origin most peers saw, ties
//!   going to the lowest AS number; such prefixes are counted as origin
//!   conflicts in the [`LoadReport`].
//! - **No origin from** default routes, prefixes shorter than a minimum
//!   (/8, /16 by default) or special-purpose space ([`OriginRules`]):
//!   their paths still link ASes, but they name no one's clients.
//! - The graph holds every AS linked to another, and every elected origin.

mod bgpdump;
mod collect;
mod error;
mod graph;
mod input;
mod ip_to_as;
mod mrt;
mod origin_rules;
mod origins;
mod path;
mod report;

use std::path::Path;
use std::time::Instant;

pub use error::LoadError;
pub use graph::{AsGraph, HopCounts};
pub use input::{Compression, Format};
pub use ip_to_as::{IpToAs, ScopedLookup};
pub use origin_rules::{DroppedRoutes, OriginRules};
pub use report::{LoadReport, PROGRESS_EVERY, Progress};

use collect::{Collected, Collector};
use input::Input;

/// The tables built from one RIB dump.
#[derive(Debug)]
pub struct BgpTables {
    /// Address -> origin AS, by longest-prefix match.
    pub ip_to_as: IpToAs,
    /// ASes and the links between them.
    pub graph: AsGraph,
    /// What the load read and built.
    pub report: LoadReport,
}

/// Loads the RIB dump at `path`, taking origins only from routes that pass
/// `rules`, and calling `progress` every [`PROGRESS_EVERY`] routes and once
/// at the end.
///
/// Truncated or corrupt input is an error naming the file and the place
/// (line, or route count and byte offset); so is an update (BGP4MP) file.
pub fn load(path: impl AsRef<Path>, rules: OriginRules, mut progress: impl FnMut(&Progress)) -> Result<BgpTables, LoadError> {
    let started = Instant::now();
    let path = path.as_ref();
    let Input { compression, format, size, bytes_read, reader } = input::open(path)?;
    let mut collector = Collector::new(bytes_read, size, rules, &mut progress);
    let read = match format {
        Format::Mrt => mrt::read(reader, &mut collector),
        Format::BgpdumpText => bgpdump::read(reader, &mut collector),
    };
    read.map_err(|fault| LoadError::Corrupt { path: path.to_owned(), at: fault.at, detail: fault.detail })?;
    if !collector.has_origins() {
        return Err(LoadError::NoRoutes { path: path.to_owned() });
    }
    let Collected { ip_to_as, graph, counts, origin_conflicts, prefixes, dropped } = collector.finish();
    let report = LoadReport {
        file: path.to_owned(),
        format,
        compression,
        routes: counts.routes,
        skipped_routes: counts.skipped_routes,
        skipped_records: counts.skipped_records,
        as_set_paths: counts.as_set_paths,
        dropped,
        origin_conflicts,
        prefixes_v4: prefixes.0,
        prefixes_v6: prefixes.1,
        ases: graph.as_count(),
        links: graph.link_count(),
        memory_bytes: ip_to_as.memory_bytes() + graph.memory_bytes(),
        elapsed: started.elapsed(),
    };
    Ok(BgpTables { ip_to_as, graph, report })
}
