//! Answer orders worked out when a service is built, so a query costs one
//! random draw (docs/architecture.md: what depends only on a client's
//! class is worked out before any query asks).
//!
//! MyXDNS Algorithm 1 draws replicas one after another; for a given table
//! row that is a fixed probability distribution over the possible orders.
//! For small replica sets we enumerate it once: every permutation with its
//! probability, cut to the answer cap (equal prefixes merged). A query then
//! draws one order from the cumulative distribution.

use rand::Rng;
use rustc_hash::FxHashMap;

use crate::RegionId;
use crate::policy::{Order, Policy};
use crate::replica::Replica;

/// More permutations than this are not enumerated (the sequential draw is
/// used instead): 7 replicas, or more with a small cap.
const MAX_PERMUTATIONS: usize = 5040;

/// The orders a table row can give, with their cumulative probabilities.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedOrders {
    /// Cumulative probabilities as fractions of 2^64, last = u64::MAX.
    thresholds: Vec<u64>,
    orders: Vec<Order>,
}

impl PreparedOrders {
    /// Algorithm 1's distribution for `weights` (replica index, weight),
    /// orders cut to `cap` (0: no cap); `None` if there are too many.
    pub fn build(weights: &[(usize, f64)], cap: usize) -> Option<PreparedOrders> {
        let count = weights.len();
        // count! permutations, as long as that stays within the limit.
        (1..=count).try_fold(1usize, |product, factor| product.checked_mul(factor).filter(|&product| product <= MAX_PERMUTATIONS))?;
        let mut outcomes: Vec<(Order, f64)> = Vec::new();
        let mut prefix = Order::new();
        let mut left: Vec<(usize, f64)> = weights.iter().map(|&(index, weight)| (index, weight.max(0.0))).collect();
        enumerate(&mut left, &mut prefix, 1.0, &mut outcomes);
        Some(PreparedOrders::merged(outcomes, cap))
    }

    /// `outcomes` (orders with their probabilities, summing to 1) cut to
    /// `cap` (0: no cap), equal orders merged.
    fn merged(outcomes: Vec<(Order, f64)>, cap: usize) -> PreparedOrders {
        let mut merged: Vec<(Order, f64)> = Vec::new();
        for (mut order, probability) in outcomes {
            if cap > 0 {
                order.truncate(cap);
            }
            match merged.iter_mut().find(|(known, _)| *known == order) {
                Some((_, total)) => *total += probability,
                None => merged.push((order, probability)),
            }
        }
        let mut cumulative = 0.0;
        let mut thresholds = Vec::with_capacity(merged.len());
        for (_, probability) in &merged {
            cumulative += probability;
            thresholds.push((cumulative.min(1.0) * u64::MAX as f64) as u64);
        }
        if let Some(last) = thresholds.last_mut() {
            *last = u64::MAX;
        }
        PreparedOrders { thresholds, orders: merged.into_iter().map(|(order, _)| order).collect() }
    }

    /// One order, drawn with its probability.
    pub fn draw(&self, rng: &mut impl Rng) -> &Order {
        let point: u64 = rng.random();
        let index = self.thresholds.partition_point(|&threshold| threshold < point);
        &self.orders[index.min(self.orders.len() - 1)]
    }

    /// Each order with its threshold: the cumulative probability, as a
    /// fraction of 2^64, up to and including it. [`PreparedOrders::draw`]
    /// gives the first order whose threshold is at least its draw.
    pub fn thresholds(&self) -> impl Iterator<Item = (&Order, u64)> {
        self.orders.iter().zip(self.thresholds.iter().copied())
    }

    /// The orders of drawing from each of `tiers` in turn and chaining
    /// the results (failover's priorities), cut to `cap` (0: no cap);
    /// `None` if there would be more than a prepared set holds.
    pub fn chained(tiers: &[PreparedOrders], cap: usize) -> Option<PreparedOrders> {
        let mut outcomes: Vec<(Order, f64)> = vec![(Order::new(), 1.0)];
        for tier in tiers {
            if outcomes.len().checked_mul(tier.len())? > MAX_PERMUTATIONS {
                return None;
            }
            outcomes = outcomes
                .iter()
                .flat_map(|(prefix, probability)| {
                    tier.probabilities().map(move |(order, chance)| (prefix.iter().chain(order).copied().collect(), probability * chance))
                })
                .collect();
        }
        Some(PreparedOrders::merged(outcomes, cap))
    }

    /// Each order with its own probability.
    fn probabilities(&self) -> impl Iterator<Item = (&Order, f64)> {
        let below = std::iter::once(0).chain(self.thresholds.iter().copied());
        let shares = self.thresholds.iter().zip(below).map(|(&threshold, below)| (threshold - below) as f64 / u64::MAX as f64);
        self.orders.iter().zip(shares)
    }

    /// How many distinct orders there are.
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }
}

/// A service's prepared orders for one family: per region that has its
/// own table row, and for everyone else. `None` where there were too many
/// orders to enumerate (the query then draws sequentially).
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    default: Option<PreparedOrders>,
    by_region: FxHashMap<RegionId, Option<PreparedOrders>>,
}

impl Prepared {
    /// Prepares what `policy` can answer from `candidates`, cut to `cap`.
    /// Policies whose order does not come from fixed weights prepare nothing.
    pub fn new(policy: &Policy, replicas: &[Replica], candidates: &[usize], cap: usize) -> Prepared {
        let weights =
            |weight_of: &dyn Fn(usize) -> f64| -> Vec<(usize, f64)> { candidates.iter().map(|&index| (index, weight_of(index))).collect() };
        match policy {
            Policy::RegionProbabilities(table) => {
                let row_weights = |rows: &[crate::policy::RegionRow]| weights(&|index| rows.get(index).map_or(0.0, |row| row.probability));
                Prepared {
                    default: PreparedOrders::build(&row_weights(&table.default), cap),
                    by_region: table
                        .regions
                        .iter()
                        .map(|(&region, rows)| (region, PreparedOrders::build(&row_weights(rows), cap)))
                        .collect(),
                }
            }
            Policy::Weighted => Prepared {
                default: PreparedOrders::build(&weights(&|index| replicas[index].weight as f64), cap),
                by_region: FxHashMap::default(),
            },
            Policy::Static
            | Policy::RoundRobin { .. }
            | Policy::Failover
            | Policy::LowestLatency { .. }
            | Policy::ShortestAsPath { .. }
            | Policy::Nearest { .. } => Prepared::default(),
        }
    }

    /// The prepared orders for a client in `region`, if there are any.
    pub fn for_region(&self, region: RegionId) -> Option<&PreparedOrders> {
        match self.by_region.get(&region) {
            Some(own_row) => own_row.as_ref(),
            None => self.default.as_ref(),
        }
    }
}

/// Every way Algorithm 1 can finish from `prefix` with `left` still to
/// place, and its probability: the next replica in proportion to its
/// weight, or, once all left weigh 0, every arrangement equally likely.
fn enumerate(left: &mut Vec<(usize, f64)>, prefix: &mut Order, probability: f64, outcomes: &mut Vec<(Order, f64)>) {
    if left.is_empty() {
        outcomes.push((prefix.clone(), probability));
        return;
    }
    let total: f64 = left.iter().map(|(_, weight)| weight).sum();
    for position in 0..left.len() {
        let (index, weight) = left[position];
        let chance = if total > 0.0 { weight / total } else { 1.0 / left.len() as f64 };
        if chance == 0.0 {
            continue;
        }
        left.remove(position);
        prefix.push(index);
        enumerate(left, prefix, probability * chance, outcomes);
        prefix.pop();
        left.insert(position, (index, weight));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;
    use crate::policy::order_by_probability;

    /// Frequencies of full orders from the prepared draw and from the
    /// sequential Algorithm 1 agree (200,000 draws each: every share's
    /// standard error is below 0.0012, so 0.008 is beyond six sigma).
    #[test]
    fn draws_follow_the_same_distribution_as_algorithm_1() {
        for weights in [vec![(0, 0.6), (1, 0.3), (2, 0.1)], vec![(0, 0.0), (1, 2.0), (2, 0.0), (3, 1.0)], vec![(5, 0.0), (6, 0.0)]] {
            let prepared = PreparedOrders::build(&weights, 0).unwrap();
            let mut rng = SmallRng::seed_from_u64(9);
            let mut from_prepared: HashMap<Order, f64> = HashMap::new();
            let mut from_sequential: HashMap<Order, f64> = HashMap::new();
            for _ in 0..200_000 {
                *from_prepared.entry(prepared.draw(&mut rng).clone()).or_default() += 1.0 / 200_000.0;
                *from_sequential.entry(order_by_probability(&weights, &mut rng)).or_default() += 1.0 / 200_000.0;
            }
            for (order, share) in &from_sequential {
                let prepared_share = from_prepared.get(order).copied().unwrap_or(0.0);
                assert!((share - prepared_share).abs() < 0.008, "{weights:?} {order:?}: {share} vs {prepared_share}");
            }
            assert_eq!(from_prepared.len(), from_sequential.len(), "{weights:?}");
        }
    }

    #[test]
    fn a_cap_merges_orders_with_the_same_prefix_and_big_sets_are_not_enumerated() {
        let prepared = PreparedOrders::build(&[(0, 1.0), (1, 1.0), (2, 1.0)], 1).unwrap();
        assert_eq!(prepared.len(), 3);
        let eight: Vec<(usize, f64)> = (0..8).map(|index| (index, 1.0)).collect();
        assert!(PreparedOrders::build(&eight, 0).is_none());
    }
}
