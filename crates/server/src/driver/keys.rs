//! A zone's DNSSEC keys in the store, as `pharos key` and the API's
//! `/v1/zones/{zone}/keys` read and step them: the rollover steps of
//! `pharos_dnssec::rollover`, timed from the configuration's `[dnssec]`
//! delays and the zone's own TTLs, and each key as shown.

use std::str::FromStr;

use domain::base::name::FromStrError;
use domain::base::{Name, ToName};
use pharos_dnssec::keys::KeyError;
use pharos_dnssec::{KeyTimes, RolloverError, Timings, ZoneKey, ZoneKeys};
use pharos_store::{Store, StoreError};
use ring::rand::SystemRandom;
use serde::{Deserialize, Serialize};

use crate::config::{Config, ZoneConfig, ZoneSource};

/// The TTL printed on the records shown (the zone's own TTL applies once signed).
pub const SHOWN_TTL: u32 = 3600;

/// A step an operator takes in a zone's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyStep {
    /// Start a ZSK rollover by pre-publication.
    RollZsk,
    /// Start a KSK rollover by double signature.
    RollKsk,
    /// The parent's DS names only the new KSK now.
    DsChanged,
}

/// Why a step could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0} has no keys: run `pharos key generate` first")]
    NoKeys(String),
    #[error(transparent)]
    Refused(#[from] RolloverError),
    #[error(transparent)]
    Keys(#[from] KeysError),
}

/// Why a zone's keys cannot be read, or the timings of its rollovers had.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Stored(#[from] KeyError),
    #[error("the configuration serves no zone {0}")]
    NoZone(String),
    #[error(transparent)]
    ZoneFile(#[from] pharos_zone::LoadError),
}

/// A zone name that is not a domain name, as typed.
#[derive(Debug, thiserror::Error)]
#[error("zone {zone:?} is not a domain name: {reason}")]
pub struct ZoneNameError {
    zone: String,
    reason: FromStrError,
}

/// A zone name as typed (with or without its final dot, any case), lowercase.
pub fn zone_name(zone: &str) -> Result<Name<Vec<u8>>, ZoneNameError> {
    let absolute = if zone.ends_with('.') { zone.to_string() } else { format!("{zone}.") };
    let name: Name<Vec<u8>> = Name::from_str(&absolute).map_err(|reason| ZoneNameError { zone: zone.to_owned(), reason })?;
    Ok(name.to_canonical_name())
}

/// The keys `store` keeps for `zone`, if any.
pub fn stored_keys(store: &mut dyn Store, zone: &Name<Vec<u8>>) -> Result<Option<ZoneKeys>, KeysError> {
    let Some(text) = store.setting(&ZoneKeys::setting_name(zone))? else { return Ok(None) };
    Ok(Some(ZoneKeys::from_setting(&text, &SystemRandom::new())?))
}

/// Takes `step` in the keys of `zone` at `now` (Unix seconds) and keeps
/// them in `store`; the keys after it.
pub fn take_step(config: &Config, store: &mut dyn Store, zone: &Name<Vec<u8>>, step: KeyStep, now: u64) -> Result<ZoneKeys, StepError> {
    let timings = timings(config, store, zone)?;
    let mut keys = stored_keys(store, zone)?.ok_or_else(|| StepError::NoKeys(zone.to_string()))?;
    match step {
        KeyStep::RollZsk => keys.roll_zsk(now, timings, &SystemRandom::new())?,
        KeyStep::RollKsk => keys.roll_ksk(now, &SystemRandom::new())?,
        KeyStep::DsChanged => keys.ds_changed(now, timings)?,
    }
    store.set_setting(&ZoneKeys::setting_name(zone), &keys.to_setting()).map_err(KeysError::Store)?;
    Ok(keys)
}

/// The configuration's zone named `zone`.
pub fn zone_config<'c>(config: &'c Config, zone: &Name<Vec<u8>>) -> Option<&'c ZoneConfig> {
    config.all_zones().find(|spec| zone_name(&spec.origin).is_ok_and(|origin| origin == *zone))
}

/// What a rollover of `zone` waits on: its DNSKEY TTL (the SOA's, which
/// the signer gives the DNSKEY RRset), its largest TTL (records, negative
/// answers, the services in it, from the configuration and the store),
/// and the configuration's delays.
fn timings(config: &Config, store: &mut dyn Store, zone: &Name<Vec<u8>>) -> Result<Timings, KeysError> {
    let Some(spec) = zone_config(config, zone) else { return Err(KeysError::NoZone(zone.to_string())) };
    // dnssec = true is for zones read from a file (Config::problems).
    let Some(ZoneSource::File(file)) = spec.source() else { return Err(KeysError::NoZone(zone.to_string())) };
    let loaded = pharos_zone::load_zone_file(&spec.origin, file)?;
    let records = loaded.nodes.values().flat_map(|node| &node.rrsets).map(|rrset| rrset.ttl);
    let (state, _) = store.load()?;
    let inside = |name: &str| zone_name(name).is_ok_and(|name| name.ends_with(zone));
    let services = config
        .services
        .iter()
        .chain(state.services.iter().map(|service| &**service))
        .filter(|service| inside(&service.name))
        .map(|service| service.ttl);
    let max_ttl = records.chain(services).chain([loaded.negative_ttl]).max().unwrap_or_default();
    Ok(Timings {
        dnskey_ttl: loaded.soa().ttl,
        max_ttl,
        propagation: config.dnssec.propagation_seconds,
        ds_ttl: config.dnssec.ds_ttl_seconds,
    })
}

/// One key as shown: its records, state at the time asked and schedule.
#[derive(Debug, Serialize)]
pub struct KeyView {
    pub tag: u16,
    pub role: &'static str,
    pub algorithm: &'static str,
    pub state: &'static str,
    pub times: Times,
    /// Its DNSKEY record, while it is in the zone.
    pub dnskey: Option<String>,
    /// The DS the parent publishes for it, for a key-signing key in the zone.
    pub ds: Option<String>,
}

/// [`KeyTimes`] as shown: Unix seconds.
#[derive(Debug, Serialize)]
pub struct Times {
    pub published: u64,
    pub active: Option<u64>,
    pub retired: Option<u64>,
    pub removed: Option<u64>,
}

impl From<KeyTimes> for Times {
    fn from(times: KeyTimes) -> Times {
        Times { published: times.published, active: times.active, retired: times.retired, removed: times.removed }
    }
}

/// Every key of `zone` as shown at `now` (Unix seconds).
pub fn key_views(keys: &ZoneKeys, zone: &Name<Vec<u8>>, now: u64) -> Vec<KeyView> {
    keys.keys.iter().map(|key| key_view(key, zone, now)).collect()
}

fn key_view(key: &ZoneKey, zone: &Name<Vec<u8>>, now: u64) -> KeyView {
    let state = key.times.state(now);
    let in_zone = state != pharos_dnssec::KeyState::Removed;
    KeyView {
        tag: key.key_tag(),
        role: key.role.name(),
        algorithm: key.algorithm.name(),
        state: state.name(),
        times: key.times.into(),
        dnskey: in_zone.then(|| key.dnskey_record(zone, SHOWN_TTL)),
        ds: (in_zone && key.role.signs_keys()).then(|| key.ds_record(zone, SHOWN_TTL)),
    }
}
