//! Places on the globe and the distances between them, for the nearest
//! policy and the places a geographic database gives clients.

/// A point on the globe, in degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coordinates {
    pub latitude: f64,
    pub longitude: f64,
}

/// A point on the globe, with its unit vector from the Earth's centre: the
/// nearer of two points to a third is the one whose vector has the larger
/// dot product with the third's, so ordering by distance needs no
/// trigonometry per query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub coordinates: Coordinates,
    unit: [f64; 3],
}

impl Point {
    pub fn new(coordinates: Coordinates) -> Point {
        let (latitude, longitude) = (coordinates.latitude.to_radians(), coordinates.longitude.to_radians());
        let unit = [latitude.cos() * longitude.cos(), latitude.cos() * longitude.sin(), latitude.sin()];
        Point { coordinates, unit }
    }

    /// The cosine of the angle between the two points seen from the
    /// Earth's centre: 1 at the same place, -1 at opposite ones.
    pub fn closeness(&self, other: &Point) -> f64 {
        self.unit.iter().zip(other.unit).map(|(a, b)| a * b).sum()
    }
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

    #[test]
    fn closeness_orders_points_as_great_circle_distance_does() {
        let places: Vec<Coordinates> = [(50.1109, 8.6821), (40.7128, -74.0060), (35.6762, 139.6503), (-33.8688, 151.2093), (0.0, 179.9)]
            .iter()
            .map(|&(latitude, longitude)| Coordinates { latitude, longitude })
            .collect();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let client =
                Coordinates { latitude: (state % 180_000) as f64 / 1000.0 - 90.0, longitude: (state >> 32) as f64 % 360.0 - 180.0 };
            let by_km = places.iter().map(|&place| great_circle_km(client, place));
            let by_closeness = places.iter().map(|&place| -Point::new(client).closeness(&Point::new(place)));
            let nearest = |keys: Vec<f64>| (0..keys.len()).min_by(|&a, &b| keys[a].total_cmp(&keys[b])).unwrap();
            assert_eq!(nearest(by_km.collect()), nearest(by_closeness.collect()), "{client:?}");
        }
    }
}
