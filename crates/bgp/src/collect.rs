//! Gathers routes as a reader produces them, then builds the tables.

use std::num::NonZeroU32;

use ipnet::IpNet;
use rustc_hash::FxHashSet;

use crate::graph::AsGraph;
use crate::input::ByteCount;
use crate::ip_to_as::IpToAs;
use crate::origin_rules::{Dropped, DroppedRoutes, OriginRules};
use crate::origins::{OriginVotes, Prefix};
use crate::path::PathHops;
use crate::report::{PROGRESS_EVERY, Progress};

/// Counts kept while reading, for the load report.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) routes: u64,
    pub(crate) skipped_routes: u64,
    pub(crate) skipped_records: u64,
    pub(crate) as_set_paths: u64,
}

/// The tables built from the routes, and what building them counted.
pub(crate) struct Collected {
    pub(crate) ip_to_as: IpToAs,
    pub(crate) graph: AsGraph,
    pub(crate) counts: Counts,
    pub(crate) origin_conflicts: u64,
    pub(crate) prefixes: (usize, usize),
    pub(crate) dropped: DroppedRoutes,
}

/// What the routes read so far gave: origin votes, links and counts.
pub(crate) struct Collector<'p> {
    v4: OriginVotes<u32>,
    v6: OriginVotes<u128>,
    /// Each link once, lower AS number first. Paths repeat the same links
    /// millions of times, so a set stays small where a list would not.
    links: FxHashSet<(u32, u32)>,
    rules: OriginRules,
    dropped: DroppedRoutes,
    /// Whether a default route was dropped, IPv4 and IPv6: addresses no
    /// other route covers are then covered by it alone.
    default_routes: [bool; 2],
    counts: Counts,
    bytes_read: ByteCount,
    file_size: u64,
    progress: &'p mut dyn FnMut(&Progress),
}

impl<'p> Collector<'p> {
    pub(crate) fn new(bytes_read: ByteCount, file_size: u64, rules: OriginRules, progress: &'p mut dyn FnMut(&Progress)) -> Self {
        Collector {
            v4: OriginVotes::default(),
            v6: OriginVotes::default(),
            links: FxHashSet::default(),
            rules,
            dropped: DroppedRoutes::default(),
            default_routes: [false; 2],
            counts: Counts::default(),
            bytes_read,
            file_size,
            progress,
        }
    }

    /// Takes one peer's route to `prefix`.
    pub(crate) fn route(&mut self, prefix: IpNet, hops: &PathHops) {
        self.counts.routes += 1;
        self.counts.as_set_paths += u64::from(hops.has_set());
        match hops.origin().and_then(NonZeroU32::new) {
            Some(origin) => {
                match self.rules.check(prefix) {
                    Ok(()) => self.vote(prefix, origin),
                    Err(why) => self.drop_origin(prefix, why),
                }
                self.links.extend(hops.links().map(|(a, b)| (a.min(b), a.max(b))));
            }
            None => self.counts.skipped_routes += 1,
        }
        if self.counts.routes.is_multiple_of(PROGRESS_EVERY) {
            self.report_progress();
        }
    }

    fn vote(&mut self, prefix: IpNet, origin: NonZeroU32) {
        let length = prefix.prefix_len();
        match prefix {
            IpNet::V4(net) => self.v4.add(Prefix { address: net.network().into(), length }, origin),
            IpNet::V6(net) => self.v6.add(Prefix { address: net.network().into(), length }, origin),
        }
    }

    fn drop_origin(&mut self, prefix: IpNet, why: Dropped) {
        self.dropped.count(why);
        if why == Dropped::DefaultRoute {
            self.default_routes[usize::from(prefix.addr().is_ipv6())] = true;
        }
    }

    /// Counts a record the parser could not read, though the file goes on.
    pub(crate) fn skip_record(&mut self) {
        self.counts.skipped_records += 1;
    }

    /// Routes taken so far, to say where a fault was found.
    pub(crate) fn routes(&self) -> u64 {
        self.counts.routes
    }

    /// Bytes of the file read so far, to say where a fault was found.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read.get()
    }

    /// Whether any route gave an origin.
    pub(crate) fn has_origins(&self) -> bool {
        !self.v4.is_empty() || !self.v6.is_empty()
    }

    fn report_progress(&mut self) {
        (self.progress)(&Progress { routes: self.counts.routes, bytes_read: self.bytes_read.get(), file_size: self.file_size });
    }

    /// Elects each prefix's origin and builds the tables.
    pub(crate) fn finish(mut self) -> Collected {
        self.report_progress();
        let v4 = self.v4.elect();
        let v6 = self.v6.elect();
        let links: Vec<(u32, u32)> = self.links.into_iter().collect();
        let origins = v4.origins.iter().map(|&(_, origin)| origin.get()).chain(v6.origins.iter().map(|&(_, origin)| origin.get()));
        let graph = AsGraph::new(origins, &links);
        Collected {
            ip_to_as: IpToAs::new(&v4.origins, &v6.origins, &graph).with_default_routes(self.default_routes),
            graph,
            counts: self.counts,
            origin_conflicts: v4.conflicts + v6.conflicts,
            prefixes: (v4.origins.len(), v6.origins.len()),
            dropped: self.dropped,
        }
    }
}
