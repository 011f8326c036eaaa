//! Round robin: the candidates rotated by one more place for each answer.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{Choice, Order};

pub fn choose(next: &AtomicU32, candidates: &[usize]) -> Choice {
    let mut order = Order::from_slice(candidates);
    if !order.is_empty() {
        let turn = next.fetch_add(1, Ordering::Relaxed) as usize;
        order.rotate_left(turn % candidates.len());
    }
    Choice::anyone(order)
}
