//! The copies of the secondary zones the shell serves: each zone's last
//! good transfer, kept in the store (setting `secondary:ORIGIN`, its
//! records as master-file text; `secondary-refreshed:ORIGIN`, when a
//! primary last gave or confirmed it, Unix ms) so that a restart with the
//! primaries down serves it until its SOA's expire time has passed since.
//! A zone with no copy yet, or an expired one, is served as expired
//! (SERVFAIL), by a stand-in with a SOA and NS of its own when there is
//! no copy at all.

use std::collections::BTreeMap;

use pharos_model::ControlError;
use pharos_model::spec::service_name;
use pharos_secondary::{Clamps, SoaTimers};
use pharos_store::{Store, StoreError};
use pharos_wire::name;
use pharos_zone::journal::Record;
use pharos_zone::text::{records_of, zone_text};
use pharos_zone::{LoadError, Zone, parse_zone_text};

use crate::config::{Config, PrimaryConfig, ZoneConfig};
use crate::driver::response_settings::{self, SettingsError};
use crate::tasks::secondary::{Primary, SecondaryZone};

/// Why a secondary zone's copy cannot be read from the store.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the store's copy cannot be read")]
    Text(#[from] LoadError),
    #[error("{0}")]
    Origin(String),
    #[error("the store's refresh time {0:?} is not a number")]
    RefreshedAt(String),
}

/// A secondary zone's copy as served.
#[derive(Debug, Clone)]
struct Copy {
    zone: Zone,
    /// When a primary last gave or confirmed it (Unix ms); `None` for the
    /// stand-in of a zone never transferred.
    refreshed_at: Option<u64>,
}

/// Every secondary zone's copy, by origin (lowercase wire form).
#[derive(Debug, Clone, Default)]
pub struct SecondaryCopies(BTreeMap<Box<[u8]>, Copy>);

impl SecondaryCopies {
    /// The copies of `config`'s secondary zones at `now` (Unix ms): those
    /// of `self` kept, the others read from `store`.
    pub fn loaded(&self, config: &Config, store: &mut dyn Store, now: u64) -> Result<SecondaryCopies, (String, CopyError)> {
        let mut copies = BTreeMap::new();
        for spec in config.all_zones().filter(|zone| !zone.primaries.is_empty()) {
            let failed = |error| (spec.origin.clone(), error);
            let origin: Box<[u8]> = service_name(&spec.origin).map_err(|error| failed(CopyError::Origin(error.to_string())))?;
            let copy = match self.0.get(&origin) {
                Some(copy) => copy.clone(),
                None => stored(store, &spec.origin, now).map_err(failed)?,
            };
            copies.insert(origin, copy);
        }
        Ok(SecondaryCopies(copies))
    }

    /// The zone `spec` names, as served; `None` if it is no secondary zone.
    pub fn zone(&self, spec: &ZoneConfig) -> Option<Zone> {
        let origin = service_name(&spec.origin).ok()?;
        Some(self.0.get(&origin)?.zone.clone())
    }

    /// Serves `zone`, given or confirmed by a primary at `at`, from now
    /// on, and keeps its `records` in `store`.
    pub fn copied(&mut self, store: &mut dyn Store, zone: Zone, records: &[Record], at: u64) -> Result<(), StoreError> {
        let origin = name::Display(&zone.origin).to_string();
        store.set_setting(&format!("secondary:{origin}"), &zone_text(&zone.origin, records))?;
        store.set_setting(&format!("secondary-refreshed:{origin}"), &at.to_string())?;
        self.0.insert(zone.origin.clone(), Copy { zone, refreshed_at: Some(at) });
        Ok(())
    }

    /// Notes that a primary confirmed the copy of the zone at `origin` at `at`.
    pub fn confirmed(&mut self, store: &mut dyn Store, origin: &[u8], at: u64) -> Result<(), StoreError> {
        store.set_setting(&format!("secondary-refreshed:{}", name::Display(origin)), &at.to_string())?;
        if let Some(copy) = self.0.get_mut(origin) {
            copy.refreshed_at = Some(at);
        }
        Ok(())
    }

    /// The zone at `origin` as served expired; `None` if it is no
    /// secondary zone here.
    pub fn expired(&mut self, origin: &[u8]) -> Option<Zone> {
        let copy = self.0.get_mut(origin)?;
        copy.zone.expired = true;
        Some(copy.zone.clone())
    }

    /// `config`'s secondary zones as their tasks start: primaries with
    /// their keys, bounds, and copies.
    pub fn zones(&self, config: &Config) -> Result<Vec<SecondaryZone>, SettingsError> {
        let secondaries = config.all_zones().filter(|zone| !zone.primaries.is_empty());
        secondaries
            .map(|spec| {
                let origin: Box<[u8]> = service_name(&spec.origin).map_err(SettingsError::SecondaryOrigin)?;
                let primaries = spec.primaries.iter().enumerate().map(|(index, primary)| {
                    let key =
                        primary.key.as_deref().map(|key| response_settings::primary_key(config, &spec.origin, index, key)).transpose()?;
                    Ok(Primary { address: primary.address, key })
                });
                let copy = self.0.get(&origin).and_then(|copy| Some((records_of(&copy.zone).into(), copy.refreshed_at?)));
                let clamps = Clamps { min: spec.refresh_min_seconds, max: spec.refresh_max_seconds };
                Ok(SecondaryZone { origin, primaries: primaries.collect::<Result<_, SettingsError>>()?, clamps, copy })
            })
            .collect()
    }
}

/// Refuses a reload that adds, removes or moves a secondary zone (its
/// primaries, keys or refresh bounds): each zone's task starts with the
/// server. Who may NOTIFY it is reloaded.
pub fn check_secondaries_unmoved(serving: &Config, fresh: &Config) -> Result<(), ControlError> {
    let secondaries = |config: &Config| -> Vec<(String, Vec<PrimaryConfig>, u32, u32)> {
        let zones = config.all_zones().filter(|zone| !zone.primaries.is_empty());
        zones.map(|zone| (zone.origin.clone(), zone.primaries.clone(), zone.refresh_min_seconds, zone.refresh_max_seconds)).collect()
    };
    if secondaries(serving) != secondaries(fresh) {
        let why = "adding, removing or changing a secondary zone (its primaries, keys or refresh bounds) takes a restart, not a reload";
        return Err(ControlError::invalid("zone", why));
    }
    Ok(())
}

/// The store's copy of the zone `origin` at `now`: expired if its SOA's
/// expire time has passed since it was last refreshed; else the stand-in.
fn stored(store: &mut dyn Store, origin: &str, now: u64) -> Result<Copy, CopyError> {
    let origin = origin.trim_end_matches('.');
    let Some(text) = store.setting(&format!("secondary:{origin}."))? else {
        return Ok(Copy { zone: stand_in(origin)?, refreshed_at: None });
    };
    let mut zone = parse_zone_text(origin, &text, &format!("the store's copy of {origin}"))?;
    let refreshed = store.setting(&format!("secondary-refreshed:{origin}."))?.unwrap_or_default();
    let refreshed_at: u64 = refreshed.parse().map_err(|_| CopyError::RefreshedAt(refreshed.clone()))?;
    let expire = SoaTimers::of(&zone.soa().rdatas[0]).map_or(0, |timers| u64::from(timers.expire) * 1000);
    zone.expired = refreshed_at + expire <= now;
    Ok(Copy { zone, refreshed_at: Some(refreshed_at) })
}

/// What stands in for a zone never transferred: a SOA and NS of its own
/// (serial 0, which any primary's is newer than or equal to), expired.
fn stand_in(origin: &str) -> Result<Zone, LoadError> {
    let mut zone = parse_zone_text(origin, "@ 0 IN SOA @ @ 0 0 0 0 0\n@ 0 IN NS @\n", "a secondary zone's stand-in")?;
    zone.expired = true;
    Ok(zone)
}
