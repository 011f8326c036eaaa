//! The live snapshot: built from configuration and zone files off the query
//! path, published with one atomic pointer swap.

use std::sync::Arc;

use anyhow::Context;
use arc_swap::ArcSwap;
use pharos_answer::{Settings, Snapshot};
use pharos_route::spec::build_routes;
use pharos_wire::name;
use pharos_zone::{Zone, ZoneSet, load_zone_file};

use crate::config::Config;

/// The snapshot every transport reads; readers never lock.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;

/// Loads every zone of `config` and freezes them with the settings.
/// Any error leaves nothing half-built: the caller keeps its old snapshot.
pub fn build_snapshot(config: &Config) -> anyhow::Result<Snapshot> {
    let mut zones = config
        .zones
        .iter()
        .map(|zone| load_zone_file(&zone.origin, &zone.file).with_context(|| format!("zone {}", zone.origin)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let routes = build_routes(&config.regions, &config.services, service_name)?;
    for service in routes.services.keys() {
        reserve_in_zone(&mut zones, service)?;
    }
    let zones = ZoneSet::new(zones).map_err(anyhow::Error::msg)?;
    let settings =
        Settings { nsid: config.server.nsid.as_ref().map(|nsid| nsid.as_bytes().into()), udp_payload: config.server.udp_payload };
    Ok(Snapshot { zones, routes, settings })
}

fn service_name(text: &str) -> Result<Box<[u8]>, String> {
    name::from_dotted(text).map(Box::from).map_err(|error| format!("{text:?} is not a domain name ({error:?})"))
}

/// Makes a service's name exist in the most specific zone containing it.
fn reserve_in_zone(zones: &mut [Zone], service: &[u8]) -> anyhow::Result<()> {
    let shown = name::Display(service);
    let zone = zones
        .iter_mut()
        .filter(|zone| name::is_at_or_below(service, &zone.origin))
        .max_by_key(|zone| zone.origin.len())
        .with_context(|| format!("service[{shown}].name: not inside any served zone"))?;
    zone.reserve_name(service).map_err(|message| anyhow::anyhow!("service[{shown}].name: {message}"))
}
