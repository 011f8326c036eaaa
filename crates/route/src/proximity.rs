//! What the proximity policies know of the network beyond regions:
//! measured latencies, the BGP view, and places on the globe. One copy per
//! snapshot, shared by every service in it.

use std::net::IpAddr;
use std::sync::Arc;

use crate::as_paths::AsPaths;
use crate::latency::Latencies;
use crate::sources::GeoDatabase;

#[derive(Debug, Clone, Default)]
pub struct Proximity {
    pub latencies: Arc<Latencies>,
    /// Present when BGP tables are configured (loaded or still loading).
    pub as_paths: Option<Arc<AsPaths>>,
    pub geo: Option<Arc<GeoDatabase>>,
}

impl Proximity {
    /// Whether any of the data is kept in a /24 index that
    /// [`prefetch`](Self::prefetch) can start fetching: if not, finding
    /// the client to prefetch for is wasted work.
    pub fn prefetches(&self) -> bool {
        self.latencies.has_slash24_index()
            || self.as_paths.as_deref().is_some_and(|as_paths| as_paths.tables().is_some())
            || self.geo.as_deref().is_some_and(GeoDatabase::has_place_index)
    }

    /// Starts fetching the proximity data a decision for a client at
    /// `address` reads first, where it is large enough to miss the cache.
    pub fn prefetch(&self, address: IpAddr) {
        self.latencies.prefetch(address);
        if let Some(tables) = self.as_paths.as_deref().and_then(AsPaths::tables) {
            tables.ip_to_as.prefetch(address);
        }
        if let Some(geo) = &self.geo {
            geo.prefetch(address);
        }
    }
}
