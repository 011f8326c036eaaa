//! Region probabilities (MyXDNS section 3): for each replica, a probability
//! and a TTL per region, and a default row for unclassified clients. The
//! answer lists the replicas in the order of MyXDNS Algorithm 1.

use rand::Rng;
use rand::seq::SliceRandom;
use rustc_hash::FxHashMap;

use super::{Choice, Order, Weights};
use crate::explain::{Explanation, note};
use crate::locate::Location;
use crate::replica::Replica;
use crate::{RegionId, UNCLASSIFIED};

/// One replica's entry in one region: the chance it is drawn and the TTL
/// of the answer when it comes first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegionRow {
    pub probability: f64,
    pub ttl: u32,
}

/// A service's whole table, with rows indexed like the service's replicas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbabilityTable {
    /// For region 0 and for regions the table has no rows for.
    pub default: Vec<RegionRow>,
    pub regions: FxHashMap<RegionId, Vec<RegionRow>>,
}

pub fn choose(
    table: &ProbabilityTable,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    rng: &mut impl Rng,
    explanation: Option<&mut Explanation>,
) -> Choice {
    let (rows, weights) = weigh(table, replicas, candidates, location, explanation);
    let order = order_by_probability(&weights, rng);
    let ttl = order.first().and_then(|&first| rows.get(first)).map(|row| row.ttl);
    Choice { order, ttl, scope: location.scope }
}

/// The rows that apply to a client at `location`, and the candidates'
/// probabilities in them; notes both when explaining. The query path's
/// prepared orders are drawn from these same probabilities.
pub fn weigh<'t>(
    table: &'t ProbabilityTable,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    mut explanation: Option<&mut Explanation>,
) -> (&'t [RegionRow], Weights) {
    let rows = match table.regions.get(&location.region) {
        Some(rows) => {
            note(&mut explanation, || format!("using the probability table of region {}", location.region));
            rows
        }
        None => {
            note(&mut explanation, || match location.region {
                UNCLASSIFIED => "using the default probabilities (unclassified client)".to_string(),
                region => format!("region {region} has no probabilities for this service: using the defaults"),
            });
            &table.default
        }
    };
    let weights: Weights = candidates.iter().map(|&index| (index, rows.get(index).map_or(0.0, |row| row.probability))).collect();
    note(&mut explanation, || {
        let total: f64 = weights.iter().map(|(_, weight)| weight).sum();
        let listed: Vec<String> = weights
            .iter()
            .map(|(index, weight)| format!("{} {:.3}", replicas[*index].id, if total > 0.0 { weight / total } else { 0.0 }))
            .collect();
        format!("normalized probabilities: {}", listed.join(", "))
    });
    (rows, weights)
}

/// MyXDNS Algorithm 1: repeatedly draw the next replica among those left,
/// in proportion to their probabilities; once every one left has
/// probability 0, append them in random order.
pub fn order_by_probability(weights: &[(usize, f64)], rng: &mut impl Rng) -> Order {
    let mut left: Weights = weights.iter().map(|&(index, weight)| (index, weight.max(0.0))).collect();
    let mut order = Order::new();
    while !left.is_empty() {
        let total: f64 = left.iter().map(|(_, weight)| weight).sum();
        if total <= 0.0 {
            left.shuffle(rng);
            order.extend(left.iter().map(|&(index, _)| index));
            break;
        }
        let mut point = rng.random::<f64>() * total;
        let drawn = left.iter().position(|(_, weight)| {
            point -= weight;
            point < 0.0 && *weight > 0.0
        });
        // Rounding can leave `point` a hair above zero at the end.
        let drawn = drawn.unwrap_or_else(|| left.iter().rposition(|(_, weight)| *weight > 0.0).expect("total > 0"));
        order.push(left.remove(drawn).0);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::located;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn zero_probability_replicas_come_last_in_random_order() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..200 {
            let order = order_by_probability(&[(0, 0.0), (1, 0.7), (2, 0.0), (3, 0.3)], &mut rng);
            assert_eq!(order.len(), 4);
            assert!(order[..2].contains(&1) && order[..2].contains(&3), "{order:?}");
        }
        let all_zero = order_by_probability(&[(0, 0.0), (1, 0.0)], &mut rng);
        assert_eq!(all_zero.len(), 2);
    }

    #[test]
    fn first_place_frequencies_follow_the_probabilities() {
        // 40,000 draws; the standard error of a share p is sqrt(p(1-p)/n) < 0.0025,
        // so 0.015 is a six-sigma bound: a fixed seed makes it exact anyway.
        let mut rng = SmallRng::seed_from_u64(42);
        let mut first = [0u32; 3];
        for _ in 0..40_000 {
            first[order_by_probability(&[(0, 5.0), (1, 3.0), (2, 2.0)], &mut rng)[0]] += 1;
        }
        for (count, expected) in first.iter().zip([0.5, 0.3, 0.2]) {
            assert!((*count as f64 / 40_000.0 - expected).abs() < 0.015, "{first:?}");
        }
    }

    #[test]
    fn the_ttl_is_the_first_replicas_ttl_in_the_clients_region() {
        let mut table = ProbabilityTable {
            default: vec![RegionRow { probability: 1.0, ttl: 360 }, RegionRow { probability: 0.0, ttl: 30 }],
            regions: FxHashMap::default(),
        };
        table.regions.insert(5, vec![RegionRow { probability: 0.0, ttl: 60 }, RegionRow { probability: 1.0, ttl: 20 }]);
        let mut rng = SmallRng::seed_from_u64(1);
        let replicas: Vec<Replica> = ["a", "b"].map(|id| Replica::new(id, "192.0.2.1".parse().unwrap())).into();
        let in_region = choose(&table, &replicas, &[0, 1], &located(5), &mut rng, None);
        assert_eq!(in_region, Choice { order: Order::from_slice(&[1, 0]), ttl: Some(20), scope: 24 });
        let elsewhere = choose(&table, &replicas, &[0, 1], &located(9), &mut rng, None);
        assert_eq!(elsewhere, Choice { order: Order::from_slice(&[0, 1]), ttl: Some(360), scope: 24 });
    }
}
