//! What the proximity policies know of the network beyond regions:
//! measured latencies, the BGP view, and places on the globe. One copy per
//! snapshot, shared by every service in it.

use std::sync::Arc;

use crate::as_paths::AsPaths;
use crate::latency::Latencies;
use crate::sources::{Coordinates, GeoDatabase};

#[derive(Debug, Clone, Default)]
pub struct Proximity {
    pub latencies: Arc<Latencies>,
    /// Present when BGP tables are configured (loaded or still loading).
    pub as_paths: Option<Arc<AsPaths>>,
    pub geo: Option<Arc<GeoDatabase>>,
}

/// Kilometres along the great circle between two points (haversine, on a
/// sphere of the Earth's mean radius).
pub fn great_circle_km(from: Coordinates, to: Coordinates) -> f64 {
    const EARTH_RADIUS_KM: f64 = 6371.0088;
    let (lat1, lat2) = (from.latitude.to_radians(), to.latitude.to_radians());
    let half_dlat = (lat2 - lat1) / 2.0;
    let half_dlon = (to.longitude - from.longitude).to_radians() / 2.0;
    let a = half_dlat.sin().powi(2) + lat1.cos() * lat2.cos() * half_dlon.sin().powi(2);
    2.0 * EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn great_circle_distances_match_known_values() {
        let point = |latitude, longitude| Coordinates { latitude, longitude };
        // Frankfurt to New York is about 6,200 km; a quarter meridian 10,008 km.
        let frankfurt_new_york = great_circle_km(point(50.1109, 8.6821), point(40.7128, -74.0060));
        assert!((frankfurt_new_york - 6_200.0).abs() < 30.0, "{frankfurt_new_york}");
        assert!((great_circle_km(point(0.0, 0.0), point(90.0, 0.0)) - 10_007.5).abs() < 1.0);
        assert_eq!(great_circle_km(point(10.0, 20.0), point(10.0, 20.0)), 0.0);
        assert!((great_circle_km(point(0.0, 179.5), point(0.0, -179.5)) - 111.2).abs() < 0.5, "across the date line");
    }
}
