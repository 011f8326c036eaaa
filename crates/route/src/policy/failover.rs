//! Failover by priority: every replica of the best (lowest) priority
//! first, in weighted order; then the next priority, and so on.

use rand::Rng;

use super::{Choice, Order, Weights, order_by_probability};
use crate::explain::{Explanation, note};
use crate::replica::Replica;

pub fn choose(replicas: &[Replica], candidates: &[usize], rng: &mut impl Rng, mut explanation: Option<&mut Explanation>) -> Choice {
    let mut priorities: Vec<u32> = candidates.iter().map(|&index| replicas[index].priority).collect();
    priorities.sort_unstable();
    priorities.dedup();
    note(&mut explanation, || format!("priorities present: {priorities:?}; lowest first"));
    let mut order = Order::new();
    for priority in priorities {
        let tier: Weights = candidates
            .iter()
            .filter(|&&index| replicas[index].priority == priority)
            .map(|&index| (index, replicas[index].weight as f64))
            .collect();
        order.extend(order_by_probability(&tier, rng));
    }
    Choice::anyone(order)
}
