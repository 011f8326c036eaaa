//! Policies: how a service's answer is chosen for a located client.
//!
//! Each policy is one module with one function that orders the candidate
//! replicas. Adding a policy means adding a module and a variant here.

mod failover;
mod region_probabilities;
mod round_robin;
mod weighted;

use std::sync::atomic::AtomicU32;

use rand::Rng;
use smallvec::SmallVec;

pub use region_probabilities::{ProbabilityTable, RegionRow, order_by_probability};

use crate::explain::Explanation;
use crate::locate::Location;
use crate::model::Replica;

/// A service's policy, with any state it keeps between answers.
#[derive(Debug)]
pub enum Policy {
    /// The replicas in the order they were configured.
    Static,
    /// The configured order, rotated by one for each answer.
    RoundRobin { next: AtomicU32 },
    /// Random order, each place drawn in proportion to weight.
    Weighted,
    /// Lowest priority number first; within a priority, by weight.
    Failover,
    /// Per-region probabilities and TTLs (MyXDNS): Algorithm 1's order.
    RegionProbabilities(ProbabilityTable),
}

impl Policy {
    pub fn round_robin() -> Policy {
        Policy::RoundRobin { next: AtomicU32::new(0) }
    }

    /// Short name for explanations and the API.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Static => "static",
            Policy::RoundRobin { .. } => "round-robin",
            Policy::Weighted => "weighted",
            Policy::Failover => "failover",
            Policy::RegionProbabilities(_) => "region-probabilities",
        }
    }
}

/// Replica indexes in answer order; on the stack for up to 8 replicas.
pub type Order = SmallVec<[usize; 8]>;

/// Weights or probabilities of candidates, on the stack for up to 8.
pub type Weights = SmallVec<[(usize, f64); 8]>;

/// What a policy chose: replica indexes in answer order, and a TTL if the
/// policy sets one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub order: Order,
    pub ttl: Option<u32>,
}

/// Orders `candidates` (indexes into `replicas`) for a client at `location`.
pub fn choose(
    policy: &Policy,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    rng: &mut impl Rng,
    explanation: Option<&mut Explanation>,
) -> Choice {
    match policy {
        Policy::Static => Choice { order: Order::from_slice(candidates), ttl: None },
        Policy::RoundRobin { next } => round_robin::choose(next, candidates),
        Policy::Weighted => weighted::choose(replicas, candidates, rng, explanation),
        Policy::Failover => failover::choose(replicas, candidates, rng, explanation),
        Policy::RegionProbabilities(table) => region_probabilities::choose(table, replicas, candidates, location, rng, explanation),
    }
}
