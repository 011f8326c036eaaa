//! Shortest AS path (NetAirt section 4.3): replicas ordered by how many AS
//! hops separate the client's AS from each replica's data center AS,
//! equal distances in weighted random order.

use std::sync::Arc;

use pharos_bgp::HopCounts;
use rand::Rng;

use super::{Choice, Miss, order_by_key};
use crate::as_paths::AsPaths;
use crate::explain::{Explanation, note};
use crate::locate::Location;
use crate::replica::Replica;

/// `hops[i]`: hop counts from replica `i`'s data center AS, if it has one
/// in the graph.
pub fn choose(
    hops: &[Option<Arc<HopCounts>>],
    as_paths: Option<&AsPaths>,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    rng: &mut impl Rng,
    mut explanation: Option<&mut Explanation>,
) -> Result<Choice, Miss> {
    let Some((as_paths, (client, scope))) =
        as_paths.and_then(|as_paths| Some((as_paths, as_paths.client_graph_index(location.client.address)?)))
    else {
        note(&mut explanation, || "the BGP tables are not loaded (yet)".to_string());
        return Err(Miss { scope: 0 });
    };
    // The AS number and prefix only matter to explanations.
    let client_as = || as_paths.client_as(location.client.address).and_then(|lookup| lookup.found);
    let Some(client) = client else {
        note(&mut explanation, || match client_as() {
            Some((asn, length)) => format!("AS{asn} (BGP prefix /{length}) is not in the AS graph"),
            None if as_paths.tables().is_some_and(|tables| tables.ip_to_as.only_default_route_covers(location.client.address)) => {
                format!("AS unknown (only a default route covers it; scope /{scope})")
            }
            None => format!("the client's address is in no BGP prefix (scope /{scope})"),
        });
        return Err(Miss { scope });
    };
    let distance = |index: usize| Some(f64::from(hops[index].as_ref()?.at(client)?));
    note(&mut explanation, || {
        let (asn, length) = client_as().unwrap_or_default();
        let listed: Vec<String> = candidates.iter().map(|&index| format!("{} {}", replicas[index].id, shown(distance(index)))).collect();
        format!("client AS{asn} (BGP prefix /{length}); AS hops to each replica's data center: {}", listed.join(", "))
    });
    if candidates.iter().all(|&index| distance(index).is_none()) {
        note(&mut explanation, || format!("AS{} reaches none of the replicas' ASes", client_as().unwrap_or_default().0));
        return Err(Miss { scope });
    }
    Ok(Choice { order: order_by_key(replicas, candidates, distance, rng), ttl: None, scope })
}

fn shown(hops: Option<f64>) -> String {
    hops.map_or("unknown".to_string(), |hops| format!("{hops}"))
}
