//! Policies: how a service's answer is chosen for a located client.
//!
//! Each policy is one module with one function that orders the candidate
//! replicas. Adding a policy means adding a module and a variant here.

mod failover;
mod lowest_latency;
mod nearest;
mod region_probabilities;
mod round_robin;
mod shortest_as_path;
mod weighted;

use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use pharos_bgp::HopCounts;

use rand::Rng;
use rand::seq::SliceRandom;
use smallvec::SmallVec;

pub use region_probabilities::{ProbabilityTable, RegionRow, order_by_probability};

use crate::explain::{Explanation, note};
use crate::geo::Point;
use crate::locate::Location;
use crate::proximity::Proximity;
use crate::replica::Replica;

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
    /// Lowest measured RTT from the client's subnet (Artemis);
    /// `datacenters` per replica, as indexes into the latency table's.
    LowestLatency { datacenters: Vec<Option<u16>>, fallback: Box<Policy> },
    /// Fewest AS hops from the client's AS (NetAirt); `hops` per replica.
    ShortestAsPath { hops: Vec<Option<Arc<HopCounts>>>, fallback: Box<Policy> },
    /// Shortest great-circle distance; `places` per replica.
    Nearest { places: Vec<Option<Point>>, fallback: Box<Policy> },
}

impl Policy {
    pub fn round_robin() -> Policy {
        Policy::RoundRobin { next: AtomicU32::new(0) }
    }

    /// Short name for explanations and the API.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Which of the declarable policies this is.
    pub fn kind(&self) -> PolicyKind {
        match self {
            Policy::Static => PolicyKind::Static,
            Policy::RoundRobin { .. } => PolicyKind::RoundRobin,
            Policy::Weighted => PolicyKind::Weighted,
            Policy::Failover => PolicyKind::Failover,
            Policy::RegionProbabilities(_) => PolicyKind::RegionProbabilities,
            Policy::LowestLatency { .. } => PolicyKind::LowestLatency,
            Policy::ShortestAsPath { .. } => PolicyKind::ShortestAsPath,
            Policy::Nearest { .. } => PolicyKind::Nearest,
        }
    }
}

/// The policies a service may declare: the one list of their names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    Static,
    RoundRobin,
    Weighted,
    Failover,
    RegionProbabilities,
    LowestLatency,
    ShortestAsPath,
    Nearest,
}

impl PolicyKind {
    /// Every policy, in the order error messages list them.
    pub const ALL: [PolicyKind; 8] = [
        PolicyKind::Static,
        PolicyKind::RoundRobin,
        PolicyKind::Weighted,
        PolicyKind::Failover,
        PolicyKind::RegionProbabilities,
        PolicyKind::LowestLatency,
        PolicyKind::ShortestAsPath,
        PolicyKind::Nearest,
    ];

    /// The name a service declares the policy by.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Static => "static",
            PolicyKind::RoundRobin => "round-robin",
            PolicyKind::Weighted => "weighted",
            PolicyKind::Failover => "failover",
            PolicyKind::RegionProbabilities => "region-probabilities",
            PolicyKind::LowestLatency => "lowest-latency",
            PolicyKind::ShortestAsPath => "shortest-as-path",
            PolicyKind::Nearest => "nearest",
        }
    }

    /// The policy declared as `name`, if there is one.
    pub fn named(name: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Whether the policy looks at data about the client beyond its region,
    /// and so needs a fallback for clients that data does not cover.
    pub fn needs_fallback(self) -> bool {
        matches!(self, PolicyKind::LowestLatency | PolicyKind::ShortestAsPath | PolicyKind::Nearest)
    }
}

/// Replica indexes in answer order; on the stack for up to 8 replicas.
pub type Order = SmallVec<[usize; 8]>;

/// Weights or probabilities of candidates, on the stack for up to 8.
pub type Weights = SmallVec<[(usize, f64); 8]>;

/// What a policy chose: replica indexes in answer order, a TTL if the
/// policy sets one, and the leading client-address bits the choice
/// depended on (0 when it ignores who asks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub order: Order,
    pub ttl: Option<u32>,
    pub scope: u8,
}

impl Choice {
    /// An order that does not depend on the client, with no TTL of its own.
    pub fn anyone(order: Order) -> Choice {
        Choice { order, ttl: None, scope: 0 }
    }
}

/// A proximity policy had no data for this client; `scope` covers the
/// addresses that lack it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Miss {
    pub scope: u8,
}

/// Orders `candidates` (indexes into `replicas`) for a client at `location`.
pub fn choose(
    policy: &Policy,
    replicas: &[Replica],
    candidates: &[usize],
    location: &Location,
    proximity: &Proximity,
    rng: &mut impl Rng,
    mut explanation: Option<&mut Explanation>,
) -> Choice {
    let found = match policy {
        Policy::Static => return Choice::anyone(Order::from_slice(candidates)),
        Policy::RoundRobin { next } => return round_robin::choose(next, candidates),
        Policy::Weighted => return weighted::choose(replicas, candidates, rng, explanation),
        Policy::Failover => return failover::choose(replicas, candidates, rng, explanation),
        Policy::RegionProbabilities(table) => return region_probabilities::choose(table, replicas, candidates, location, rng, explanation),
        Policy::LowestLatency { datacenters, .. } => {
            lowest_latency::choose(datacenters, &proximity.latencies, replicas, candidates, location, rng, explanation.as_deref_mut())
        }
        Policy::ShortestAsPath { hops, .. } => {
            let as_paths = proximity.as_paths.as_deref();
            shortest_as_path::choose(hops, as_paths, replicas, candidates, location, rng, explanation.as_deref_mut())
        }
        Policy::Nearest { places, .. } => {
            nearest::choose(places, proximity.geo.as_deref(), replicas, candidates, location, rng, explanation.as_deref_mut())
        }
    };
    found.unwrap_or_else(|miss| {
        let fallback = policy.fallback().expect("only proximity policies miss, and each has a fallback");
        note(&mut explanation, || format!("falling back to policy {}", fallback.name()));
        let choice = choose(fallback, replicas, candidates, location, proximity, rng, explanation);
        Choice { scope: choice.scope.max(miss.scope), ..choice }
    })
}

/// Notes what a policy whose orders were prepared draws from (the same
/// rows and weights [`choose`] would use), without drawing: the draw
/// itself comes from the prepared orders, as on the query path.
pub fn describe_prepared(policy: &Policy, replicas: &[Replica], candidates: &[usize], location: &Location, explanation: &mut Explanation) {
    match policy {
        Policy::RegionProbabilities(table) => {
            region_probabilities::weigh(table, replicas, candidates, location, Some(explanation));
        }
        Policy::Weighted => {
            weighted::weigh(replicas, candidates, Some(explanation));
        }
        Policy::Static
        | Policy::RoundRobin { .. }
        | Policy::Failover
        | Policy::LowestLatency { .. }
        | Policy::ShortestAsPath { .. }
        | Policy::Nearest { .. } => {}
    }
}

impl Policy {
    /// What a proximity policy answers with when it has no data.
    pub fn fallback(&self) -> Option<&Policy> {
        match self {
            Policy::LowestLatency { fallback, .. } | Policy::ShortestAsPath { fallback, .. } | Policy::Nearest { fallback, .. } => {
                Some(fallback)
            }
            _ => None,
        }
    }
}

/// Candidates by `key`, smallest first and those without one last; runs
/// of equal keys in weighted random order (Algorithm 1 over weights).
fn order_by_key(replicas: &[Replica], candidates: &[usize], key: impl Fn(usize) -> Option<f64>, rng: &mut impl Rng) -> Order {
    let mut keyed: SmallVec<[(f64, usize); 8]> = candidates.iter().map(|&index| (key(index).unwrap_or(f64::INFINITY), index)).collect();
    keyed.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut order = Order::new();
    for run in keyed.chunk_by(|a, b| a.0 == b.0) {
        order_tied(replicas, run, rng, &mut order);
    }
    order
}

/// Appends a run of candidates with equal keys in weighted random order.
/// Most runs are one replica, and many tie at equal weights: those skip
/// the draws of Algorithm 1, which cost a proximity policy about a tenth
/// of its time in the server (bench/RESULTS.md, "bench/proximity").
fn order_tied(replicas: &[Replica], run: &[(f64, usize)], rng: &mut impl Rng, order: &mut Order) {
    let first = order.len();
    order.extend(run.iter().map(|&(_, index)| index));
    let tied = &mut order[first..];
    let weight = |index: usize| replicas[index].weight;
    if tied.len() < 2 {
        return;
    }
    if tied.iter().all(|&index| weight(index) == weight(tied[0]) && weight(index) > 0) {
        tied.shuffle(rng);
        return;
    }
    let weights: Weights = tied.iter().map(|&index| (index, weight(index) as f64)).collect();
    let drawn = order_by_probability(&weights, rng);
    order[first..].copy_from_slice(&drawn);
}
