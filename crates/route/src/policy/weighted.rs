//! Weighted random order: each place drawn among the replicas left, in
//! proportion to their weights (the same draw as MyXDNS Algorithm 1).

use rand::Rng;

use super::{Choice, Weights, order_by_probability};
use crate::explain::{Explanation, note};
use crate::model::Replica;

pub fn choose(replicas: &[Replica], candidates: &[usize], rng: &mut impl Rng, mut explanation: Option<&mut Explanation>) -> Choice {
    let weights: Weights = candidates.iter().map(|&index| (index, replicas[index].weight as f64)).collect();
    note(&mut explanation, || {
        let listed: Vec<String> = weights.iter().map(|(index, weight)| format!("{}={weight}", replicas[*index].id)).collect();
        format!("weights: {}", listed.join(", "))
    });
    Choice::anyone(order_by_probability(&weights, rng))
}
