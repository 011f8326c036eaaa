//! The proximity data behind the policies, as the control plane keeps it:
//! latency measurements as they arrive through the API, BGP tables as
//! they load in the background, and what the operator can see of both.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use pharos_bgp::{BgpTables, DroppedRoutes, LoadReport};
use pharos_control::spec::{DataCenterSpec, SpecError};
use pharos_route::latency::{Measured, MeasurementSpec};
use pharos_route::prefix::parse_prefix;
use pharos_store::Measurement;
use serde::Serialize;

/// How far in the future a measurement's time may be (clock skew between
/// the measuring host and this one) before it is refused.
const ALLOWED_SKEW_SECONDS: u64 = 300;

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

/// Milliseconds since the Unix epoch.
pub fn unix_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Checks a batch of measurements against the declared data centers; the
/// first bad one is named and the whole batch refused.
pub fn check_measurements(specs: &[MeasurementSpec], datacenters: &[DataCenterSpec], now: u64) -> Result<Vec<Measurement>, SpecError> {
    specs.iter().enumerate().map(|(index, spec)| check_measurement(spec, &format!("measurements[{index}]"), datacenters, now)).collect()
}

fn check_measurement(spec: &MeasurementSpec, field: &str, datacenters: &[DataCenterSpec], now: u64) -> Result<Measurement, SpecError> {
    let invalid = |name: &str, message: String| SpecError { field: format!("{field}.{name}"), message };
    let subnet: (IpAddr, u8) = parse_prefix(&spec.subnet).map_err(|message| invalid("subnet", message))?;
    if !datacenters.iter().any(|datacenter| datacenter.id == spec.datacenter) {
        return Err(invalid("datacenter", format!("no data center {:?} is declared", spec.datacenter)));
    }
    if !spec.rtt_ms.is_finite() || !(0.0..=600_000.0).contains(&spec.rtt_ms) {
        return Err(invalid("rtt_ms", format!("{} is not a round-trip time (0 to 600000 ms)", spec.rtt_ms)));
    }
    let at = spec.measured_at.unwrap_or(now);
    if at > now + ALLOWED_SKEW_SECONDS {
        return Err(invalid("measured_at", format!("{at} is {} s in the future", at - now)));
    }
    Ok(Measurement { subnet, datacenter: spec.datacenter.clone(), measured: Measured { rtt_ms: spec.rtt_ms, at } })
}

/// What an operator sees of the proximity data (`GET /v1/data`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DataStatus {
    pub bgp: BgpStatus,
    pub latency: LatencyStatus,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BgpStatus {
    /// "not configured", "loading", "loaded" or "failed" (the last good
    /// table, if any, keeps serving).
    pub state: &'static str,
    pub file: Option<PathBuf>,
    /// The table serving now.
    pub loaded: Option<BgpSummary>,
    /// Why the last load failed.
    pub error: Option<String>,
}

impl BgpStatus {
    /// The state before any load has finished.
    pub fn configured(config: &crate::config::Config) -> BgpStatus {
        let state = if config.bgp.table.is_some() { "loading" } else { "not configured" };
        BgpStatus { state, file: config.bgp.table.clone(), loaded: None, error: None }
    }
}

/// The numbers of a loaded BGP table.
#[derive(Debug, Clone, Serialize)]
pub struct BgpSummary {
    pub file: PathBuf,
    pub routes: u64,
    pub prefixes_v4: usize,
    pub prefixes_v6: usize,
    pub ases: usize,
    pub links: usize,
    pub origin_conflicts: u64,
    pub as_set_paths: u64,
    /// Routes that gave no origin AS, by the rule that dropped them.
    pub routes_without_origin: RoutesWithoutOrigin,
    pub memory_bytes: usize,
    pub load_seconds: f64,
    pub loaded_at: u64,
}

/// Routes a table holds that name no one's clients (see [`pharos_bgp::OriginRules`]).
#[derive(Debug, Clone, Serialize)]
pub struct RoutesWithoutOrigin {
    pub default_routes: u64,
    /// Shorter than `bgp.min_prefix_length_v4` or `_v6`.
    pub too_short: u64,
    /// In special-purpose space (RFC 6890).
    pub special_purpose: u64,
}

impl BgpSummary {
    pub fn of(tables: &BgpTables) -> BgpSummary {
        let LoadReport {
            file,
            routes,
            prefixes_v4,
            prefixes_v6,
            ases,
            links,
            origin_conflicts,
            as_set_paths,
            dropped,
            memory_bytes,
            elapsed,
            ..
        } = &tables.report;
        let DroppedRoutes { default_routes, too_short, special_purpose } = *dropped;
        BgpSummary {
            file: file.clone(),
            routes: *routes,
            prefixes_v4: *prefixes_v4,
            prefixes_v6: *prefixes_v6,
            ases: *ases,
            links: *links,
            origin_conflicts: *origin_conflicts,
            as_set_paths: *as_set_paths,
            routes_without_origin: RoutesWithoutOrigin { default_routes, too_short, special_purpose },
            memory_bytes: *memory_bytes,
            load_seconds: elapsed.as_secs_f64(),
            loaded_at: unix_now(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencyStatus {
    /// Fresh measurements in use.
    pub measurements: usize,
    pub max_age_seconds: u64,
    /// When the oldest one in use stops counting (Unix seconds).
    pub next_expiry: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(subnet: &str, datacenter: &str, rtt_ms: f64, measured_at: Option<u64>) -> MeasurementSpec {
        MeasurementSpec { subnet: subnet.into(), datacenter: datacenter.into(), rtt_ms, measured_at }
    }

    #[test]
    fn every_bad_measurement_is_named() {
        let fra = [DataCenterSpec { id: "fra".into(), latitude: 50.1, longitude: 8.7, asn: None }];
        let error = |specs: &[MeasurementSpec]| check_measurements(specs, &fra, 10_000).unwrap_err().to_string();
        let good = spec("10.0.0.0/8", "fra", 1.0, None);
        assert_eq!(
            check_measurements(std::slice::from_ref(&good), &fra, 10_000).unwrap()[0].measured,
            Measured { rtt_ms: 1.0, at: 10_000 }
        );
        assert!(error(&[good.clone(), spec("10.0.0.1/8", "fra", 1.0, None)]).starts_with("measurements[1].subnet: "));
        assert_eq!(error(&[spec("10.0.0.0/8", "sin", 1.0, None)]), "measurements[0].datacenter: no data center \"sin\" is declared");
        assert!(error(&[spec("10.0.0.0/8", "fra", -1.0, None)]).starts_with("measurements[0].rtt_ms: -1 is not"));
        assert!(error(&[spec("10.0.0.0/8", "fra", f64::NAN, None)]).starts_with("measurements[0].rtt_ms: NaN is not"));
        assert_eq!(error(&[spec("10.0.0.0/8", "fra", 1.0, Some(20_000))]), "measurements[0].measured_at: 20000 is 10000 s in the future");
    }
}
