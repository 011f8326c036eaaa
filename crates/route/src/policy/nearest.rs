//! Nearest by geography: replicas ordered by the great-circle distance
//! from the client's location (MaxMind DB) to their data centers.

use rand::Rng;

use super::{Choice, Miss, order_by_key};
use crate::explain::{Explanation, note};
use crate::geo::{Coordinates, Point, great_circle_km};
use crate::locate::Location;
use crate::replica::Replica;
use crate::sources::GeoDatabase;

/// `places[i]`: where replica `i`'s data center is, if it has one.
pub fn choose(
    places: &[Option<Point>],
    geo: Option<&GeoDatabase>,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    rng: &mut impl Rng,
    mut explanation: Option<&mut Explanation>,
) -> Result<Choice, Miss> {
    let Some(geo) = geo else {
        note(&mut explanation, || "no MaxMind DB is configured".to_string());
        return Err(Miss { scope: 0 });
    };
    let (point, scope) = geo.point(location.client.address);
    let Some(client) = point else {
        note(&mut explanation, || format!("the MaxMind DB has no coordinates for the client (scope /{scope})"));
        return Err(Miss { scope });
    };
    note(&mut explanation, || {
        let listed: Vec<String> = candidates
            .iter()
            .map(|&index| match places[index] {
                Some(place) => format!("{} {:.0} km", replicas[index].id, great_circle_km(client.coordinates, place.coordinates)),
                None => format!("{} unknown", replicas[index].id),
            })
            .collect();
        let Coordinates { latitude, longitude } = client.coordinates;
        format!("client at {latitude:.4}, {longitude:.4} (MaxMind DB, scope /{scope}); distances: {}", listed.join(", "))
    });
    if candidates.iter().all(|&index| places[index].is_none()) {
        note(&mut explanation, || "no replica's data center has coordinates".to_string());
        return Err(Miss { scope });
    }
    // Nearest first: the largest closeness, so its negation ascending.
    let farness = |index: usize| places[index].map(|place| -client.closeness(&place));
    Ok(Choice { order: order_by_key(replicas, candidates, farness, rng), ttl: None, scope })
}
