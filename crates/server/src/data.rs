//! The proximity data behind the policies, as the control plane keeps it:
//! latency measurements as they arrive through the API, BGP tables as
//! they load in the background, and what the operator can see of both
//! (`pharos_model`'s status types, which `pharos ctl` reads them back with).

use std::time::{SystemTime, UNIX_EPOCH};

use pharos_bgp::{BgpTables, DroppedRoutes, LoadReport};
pub use pharos_model::status::{BgpState, BgpStatus, BgpSummary, DataFile, DataStatus, LatencyStatus, RoutesWithoutOrigin};

/// Milliseconds since the Unix epoch: the one clock of the control plane,
/// read by its driver (`plane`) and passed in.
pub fn unix_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// `file`, made when its modification time says, loaded at `now` (ms).
pub fn modified_file(file: &std::path::Path, now: u64) -> std::io::Result<DataFile> {
    let modified = std::fs::metadata(file)?.modified()?;
    let made_at = modified.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    Ok(DataFile { file: file.to_path_buf(), made_at, loaded_at: now / 1000 })
}

/// The summary of `tables`, loaded at `now` (Unix ms).
pub fn bgp_summary(tables: &BgpTables, now: u64) -> BgpSummary {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_file_was_made_when_it_was_last_modified() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let made = UNIX_EPOCH + std::time::Duration::from_secs(1_400_000_000);
        file.as_file().set_modified(made).unwrap();
        let status = modified_file(file.path(), 1_800_000_000_500).unwrap();
        assert_eq!(status, DataFile { file: file.path().to_path_buf(), made_at: 1_400_000_000, loaded_at: 1_800_000_000 });
        assert!(modified_file(&file.path().with_extension("gone"), 0).is_err(), "a missing file is an error");
    }
}
