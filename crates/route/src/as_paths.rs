//! The BGP view the shortest AS-path policy reads (NetAirt section 4.3):
//! which AS a client is in, and how many AS hops lie between it and each
//! data center's AS.
//!
//! Breadth-first searches run once per data center AS and are kept for
//! every snapshot built on the same tables, so a policy update does not
//! search the graph again, and a query only reads one hop count per
//! replica.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use pharos_bgp::{BgpTables, HopCounts, ScopedLookup};
use rustc_hash::FxHashMap;

/// BGP tables, or the fact that they are configured but not loaded yet.
#[derive(Debug, Default)]
pub struct AsPaths {
    tables: Option<Arc<BgpTables>>,
    searched: Mutex<FxHashMap<u32, Option<Arc<HopCounts>>>>,
}

impl AsPaths {
    /// Paths over `tables`; `None` while they are still loading.
    pub fn new(tables: Option<Arc<BgpTables>>) -> AsPaths {
        AsPaths { tables, searched: Mutex::default() }
    }

    pub fn tables(&self) -> Option<&BgpTables> {
        self.tables.as_deref()
    }

    /// The origin AS of `address`, its graph index, and the ECS scope of
    /// that answer; `None` while the tables are loading.
    pub fn client_as(&self, address: IpAddr) -> Option<ScopedLookup> {
        Some(self.tables.as_ref()?.ip_to_as.lookup_scoped(address))
    }

    /// The graph index of the client's AS, if it has one, and the ECS scope
    /// of that answer: what a decision needs, at the least cost. `None`
    /// while the tables are loading.
    pub fn client_graph_index(&self, address: IpAddr) -> Option<(Option<usize>, u8)> {
        Some(self.tables.as_ref()?.ip_to_as.graph_index_scoped(address))
    }

    /// Hop counts from `asn` to every AS; `None` if the tables are not
    /// loaded or `asn` is not in their graph. Searched once per AS.
    pub fn hops_from(&self, asn: u32) -> Option<Arc<HopCounts>> {
        let tables = self.tables.as_ref()?;
        let mut searched = self.searched.lock().expect("hop count cache lock");
        searched.entry(asn).or_insert_with(|| tables.graph.hop_counts_from(asn).map(Arc::new)).clone()
    }
}
