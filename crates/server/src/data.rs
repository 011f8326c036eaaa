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
    /// The MaxMind DB in use, if one is configured.
    pub geo: Option<DataFile>,
    /// The IP-to-AS table in use, if one is configured.
    pub asn_table: Option<DataFile>,
}

/// A data file read at start or reload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataFile {
    pub file: PathBuf,
    /// When the data was made (Unix seconds): a MaxMind DB's build time,
    /// else the file's modification time.
    pub made_at: u64,
    /// When this server read it (Unix seconds).
    pub loaded_at: u64,
}

impl DataFile {
    /// `file`, made when its modification time says, loaded at `now` (ms).
    pub fn modified(file: &std::path::Path, now: u64) -> std::io::Result<DataFile> {
        let modified = std::fs::metadata(file)?.modified()?;
        let made_at = modified.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        Ok(DataFile { file: file.to_path_buf(), made_at, loaded_at: now / 1000 })
    }
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

impl LatencyStatus {
    /// How old the oldest measurement in use is at `now` (Unix seconds).
    pub fn oldest_age(&self, now: u64) -> Option<u64> {
        let measured_at = self.next_expiry?.saturating_sub(self.max_age_seconds);
        Some(now.saturating_sub(measured_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_file_was_made_when_it_was_last_modified() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let made = UNIX_EPOCH + std::time::Duration::from_secs(1_400_000_000);
        file.as_file().set_modified(made).unwrap();
        let status = DataFile::modified(file.path(), 1_800_000_000_500).unwrap();
        assert_eq!(status, DataFile { file: file.path().to_path_buf(), made_at: 1_400_000_000, loaded_at: 1_800_000_000 });
        assert!(DataFile::modified(&file.path().with_extension("gone"), 0).is_err(), "a missing file is an error");
    }

    #[test]
    fn the_oldest_measurement_was_taken_its_maximum_age_before_it_expires() {
        let latency = LatencyStatus { measurements: 2, max_age_seconds: 30, next_expiry: Some(1_000_010) };
        assert_eq!(latency.oldest_age(1_000_000), Some(20));
        assert_eq!(LatencyStatus::default().oldest_age(1_000_000), None, "no measurement, no age");
    }
}
