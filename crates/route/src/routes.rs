//! The routing table of a snapshot: services by name, and the regions.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::locate::Regions;
use crate::model::Service;
use crate::proximity::Proximity;

/// Everything the routing core reads, frozen with the snapshot.
#[derive(Debug, Default)]
pub struct Routes {
    /// By lowercase wire-format name. Names and services are shared
    /// between snapshots: a change rebuilds only the services it touches.
    pub services: FxHashMap<Arc<[u8]>, Arc<Service>>,
    /// Shared between snapshots while the region declarations and the
    /// data they are looked up in stay the same.
    pub regions: Arc<Regions>,
    pub proximity: Proximity,
}

impl Routes {
    /// The service at `name` (lowercase wire form), if there is one.
    pub fn service(&self, name: &[u8]) -> Option<&Service> {
        if self.services.is_empty() { None } else { self.services.get(name).map(|service| &**service) }
    }
}
