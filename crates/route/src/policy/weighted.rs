//! Weighted random order: each place drawn among the replicas left, in
//! proportion to their weights (the same draw as MyXDNS Algorithm 1).

use rand::Rng;

use super::{Choice, Weights, order_by_probability};
use crate::explain::{Explanation, note};
use crate::replica::Replica;

pub fn choose(replicas: &[Replica], candidates: &[usize], rng: &mut impl Rng, explanation: Option<&mut Explanation>) -> Choice {
    Choice::anyone(order_by_probability(&weigh(replicas, candidates, explanation), rng))
}

/// The candidates' weights, noted when explaining. The query path's
/// prepared orders are drawn from these same weights.
pub fn weigh(replicas: &[Replica], candidates: &[usize], mut explanation: Option<&mut Explanation>) -> Weights {
    let weights: Weights = candidates.iter().map(|&index| (index, replicas[index].weight as f64)).collect();
    note(&mut explanation, || {
        let listed: Vec<String> = weights.iter().map(|(index, weight)| format!("{}={weight}", replicas[*index].id)).collect();
        format!("weights: {}", listed.join(", "))
    });
    weights
}
