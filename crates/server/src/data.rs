//! The proximity data behind the policies, as the control plane keeps it:
//! latency measurements as they arrive through the API, BGP tables as
//! they load in the background, and what the operator can see of both.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use pharos_bgp::{BgpTables, DroppedRoutes, LoadReport};
use serde::Serialize;

/// Milliseconds since the Unix epoch: the one clock of the control plane,
/// read by its driver (`plane`) and passed in.
pub fn unix_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
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
    /// The summary of `tables`, loaded at `now` (Unix ms).
    pub fn of(tables: &BgpTables, now: u64) -> BgpSummary {
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
            loaded_at: now / 1000,
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
