//! Nearest by geography: replicas ordered by the great-circle distance
//! from the client's location (MaxMind DB) to their data centers.

use rand::Rng;

use super::{Choice, Miss, order_by_key};
use crate::explain::{Explanation, note};
use crate::locate::Location;
use crate::model::Replica;
use crate::proximity::great_circle_km;
use crate::sources::{Coordinates, GeoDatabase};

/// `places[i]`: where replica `i`'s data center is, if it has one.
pub fn choose(
    places: &[Option<Coordinates>],
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
    let (point, scope) = geo.coordinates(location.client.address);
    let Some(client) = point else {
        note(&mut explanation, || format!("the MaxMind DB has no coordinates for the client (prefix /{scope})"));
        return Err(Miss { scope });
    };
    let distance = |index: usize| places[index].map(|place| great_circle_km(client, place));
    note(&mut explanation, || {
        let listed: Vec<String> = candidates
            .iter()
            .map(|&index| match distance(index) {
                Some(km) => format!("{} {km:.0} km", replicas[index].id),
                None => format!("{} unknown", replicas[index].id),
            })
            .collect();
        format!("client at {:.4}, {:.4} (MaxMind DB prefix /{scope}); distances: {}", client.latitude, client.longitude, listed.join(", "))
    });
    if candidates.iter().all(|&index| distance(index).is_none()) {
        note(&mut explanation, || "no replica's data center has coordinates".to_string());
        return Err(Miss { scope });
    }
    Ok(Choice { order: order_by_key(replicas, candidates, distance, rng), ttl: None, scope })
}
