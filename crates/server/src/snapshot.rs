//! The live snapshot: built from configuration and zone files off the query
//! path, published with one atomic pointer swap.

use std::sync::Arc;

use anyhow::Context;
use arc_swap::ArcSwap;
use pharos_answer::{Settings, Snapshot};
use pharos_zone::{ZoneSet, load_zone_file};

use crate::config::Config;

/// The snapshot every transport reads; readers never lock.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;

/// Loads every zone of `config` and freezes them with the settings.
/// Any error leaves nothing half-built: the caller keeps its old snapshot.
pub fn build_snapshot(config: &Config) -> anyhow::Result<Snapshot> {
    let zones = config
        .zones
        .iter()
        .map(|zone| load_zone_file(&zone.origin, &zone.file).with_context(|| format!("zone {}", zone.origin)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let zones = ZoneSet::new(zones).map_err(anyhow::Error::msg)?;
    let settings =
        Settings { nsid: config.server.nsid.as_ref().map(|nsid| nsid.as_bytes().into()), udp_payload: config.server.udp_payload };
    Ok(Snapshot { zones, settings })
}
