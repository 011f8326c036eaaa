//! Load-aware server selection (MyXDNS section 5.2): from each replica's
//! load and its rank for each region, per-region probabilities for the
//! region-probabilities policy, recomputed by a control loop.
//!
//! Algorithm I drops overloaded replicas and spreads the region over the
//! best-ranked of the rest by capacity; algorithm II weighs each replica by
//! where its load falls between two watermarks, favours better ranks, and
//! normalizes. Both oscillated in MyXDNS's experiment (section 7): every
//! client moves at once to whatever looked idle. Damping smooths each
//! probability towards its target and bounds how far it moves per round.

use std::collections::{BTreeMap, HashMap};

use pharos_model::load_control::LoadControlSpec;
use pharos_model::probabilities::ProbabilitySpec;

/// Replica id -> probability, for one table.
pub type Row = BTreeMap<String, f64>;

/// One replica as the algorithms see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub id: String,
    /// Capacity, for spreading (the replica's weight).
    pub capacity: f64,
    /// Smoothed load; `None` when no fresh value is known (counted idle).
    pub load: Option<f64>,
}

/// The target probabilities of every ranked table for `replicas`.
pub fn targets(spec: &LoadControlSpec, replicas: &[Loaded]) -> BTreeMap<String, Row> {
    spec.ranks
        .iter()
        .map(|(table, ranks)| {
            let rank_of = |id: &str| ranks.get(id).copied().unwrap_or(u32::MAX);
            let row = match spec.algorithm.as_str() {
                "I" => algorithm_one(replicas, rank_of, spec.threshold),
                _ => algorithm_two(replicas, rank_of, spec.low_watermark, spec.high_watermark),
            };
            (table.clone(), row)
        })
        .collect()
}

/// The tables to install: each probability moved from `current`
/// towards `targets` by the smoothing, no more than `max_step`, then
/// normalized.
pub fn damped(spec: &LoadControlSpec, current: &BTreeMap<String, Row>, targets: &BTreeMap<String, Row>) -> BTreeMap<String, Row> {
    targets
        .iter()
        .map(|(table, target)| {
            let Some(previous) = current.get(table) else { return (table.clone(), target.clone()) };
            let moved: Row = target
                .iter()
                .map(|(id, &goal)| {
                    let from = previous.get(id).copied().unwrap_or(goal);
                    let step = ((goal - from) * spec.smoothing).clamp(-spec.max_step, spec.max_step);
                    (id.clone(), (from + step).max(0.0))
                })
                .collect();
            (table.clone(), normalized(moved))
        })
        .collect()
}

/// `tables` in the service spec's form, with `spec`'s TTL.
pub fn as_probabilities(spec: &LoadControlSpec, tables: &BTreeMap<String, Row>) -> BTreeMap<String, BTreeMap<String, ProbabilitySpec>> {
    let entry = |probability: f64| ProbabilitySpec { probability, ttl: spec.ttl };
    tables.iter().map(|(table, row)| (table.clone(), row.iter().map(|(id, &p)| (id.clone(), entry(p))).collect())).collect()
}

/// Reads installed probabilities back as rows.
pub fn rows_of(probabilities: &BTreeMap<String, BTreeMap<String, ProbabilitySpec>>) -> BTreeMap<String, Row> {
    probabilities
        .iter()
        .map(|(table, row)| (table.clone(), row.iter().map(|(id, entry)| (id.clone(), entry.probability)).collect()))
        .collect()
}

/// Algorithm I: leave out the overloaded (all, if every one is); of the
/// rest keep the best-ranked; spread over them by capacity.
fn algorithm_one(replicas: &[Loaded], rank_of: impl Fn(&str) -> u32, threshold: f64) -> Row {
    let fit: Vec<&Loaded> = replicas.iter().filter(|replica| replica.load.unwrap_or(0.0) <= threshold).collect();
    let eligible = if fit.is_empty() { replicas.iter().collect() } else { fit };
    let best = eligible.iter().map(|replica| rank_of(&replica.id)).min().unwrap_or(u32::MAX);
    let weights = replicas.iter().map(|replica| {
        let chosen = eligible.iter().any(|kept| kept.id == replica.id) && rank_of(&replica.id) == best;
        (replica.id.clone(), if chosen { replica.capacity.max(0.0) } else { 0.0 })
    });
    normalized(weights.collect())
}

/// Algorithm II: weight 1 below the low watermark, 0 above the high one,
/// linear between; divided by the rank, so better ranks weigh more;
/// normalized.
fn algorithm_two(replicas: &[Loaded], rank_of: impl Fn(&str) -> u32, low: f64, high: f64) -> Row {
    let weights = replicas.iter().map(|replica| {
        let load = replica.load.unwrap_or(0.0);
        let by_load = ((high - load) / (high - low)).clamp(0.0, 1.0);
        (replica.id.clone(), by_load / f64::from(rank_of(&replica.id).min(1_000_000)))
    });
    normalized(weights.collect())
}

/// `row` scaled to sum to 1; equal shares if it sums to 0.
fn normalized(row: Row) -> Row {
    let total: f64 = row.values().sum();
    let count = row.len().max(1) as f64;
    row.into_iter().map(|(id, weight)| (id, if total > 0.0 { weight / total } else { 1.0 / count })).collect()
}

/// Smoothed load reports of one replica (EWMA).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmoothedLoad {
    pub value: f64,
    /// When last reported (Unix seconds).
    pub at: u64,
}

impl SmoothedLoad {
    /// Folds in a report: `alpha` of the new value, the rest of the old.
    pub fn report(previous: Option<SmoothedLoad>, value: f64, at: u64, alpha: f64) -> SmoothedLoad {
        match previous {
            Some(old) => SmoothedLoad { value: alpha * value + (1.0 - alpha) * old.value, at },
            None => SmoothedLoad { value, at },
        }
    }
}

/// Smoothed loads by (service, replica).
pub type LoadBook = HashMap<(String, String), SmoothedLoad>;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(algorithm: &str, ranks: &[(&str, &[(&str, u32)])]) -> LoadControlSpec {
        let ranks =
            ranks.iter().map(|(table, row)| (table.to_string(), row.iter().map(|(id, rank)| (id.to_string(), *rank)).collect())).collect();
        LoadControlSpec {
            algorithm: algorithm.into(),
            threshold: 0.5,
            high_watermark: 0.6,
            low_watermark: 0.4,
            interval_ms: 1000,
            ranks,
            smoothing: 1.0,
            max_step: 1.0,
            ttl: 30,
        }
    }

    fn loaded(loads: &[(&str, f64, Option<f64>)]) -> Vec<Loaded> {
        loads.iter().map(|&(id, capacity, load)| Loaded { id: id.into(), capacity, load }).collect()
    }

    fn row(pairs: &[(&str, f64)]) -> Row {
        pairs.iter().map(|&(id, p)| (id.to_string(), p)).collect()
    }

    #[test]
    fn algorithm_one_keeps_the_best_ranked_that_are_not_overloaded() {
        let spec = spec("I", &[("eu", &[("a", 1), ("b", 1), ("c", 2)])]);
        // a is overloaded: b (rank 1) takes everything.
        let computed = targets(&spec, &loaded(&[("a", 1.0, Some(0.9)), ("b", 1.0, Some(0.3)), ("c", 1.0, Some(0.1))]));
        assert_eq!(computed["eu"], row(&[("a", 0.0), ("b", 1.0), ("c", 0.0)]));
        // Both rank-1 replicas fit: spread 3:1 by capacity.
        let computed = targets(&spec, &loaded(&[("a", 3.0, Some(0.2)), ("b", 1.0, Some(0.3)), ("c", 1.0, None)]));
        assert_eq!(computed["eu"], row(&[("a", 0.75), ("b", 0.25), ("c", 0.0)]));
        // All overloaded: spread over the best-ranked of all.
        let computed = targets(&spec, &loaded(&[("a", 1.0, Some(0.9)), ("b", 1.0, Some(0.8)), ("c", 1.0, Some(0.7))]));
        assert_eq!(computed["eu"], row(&[("a", 0.5), ("b", 0.5), ("c", 0.0)]));
    }

    #[test]
    fn algorithm_two_weighs_by_watermarks_and_rank() {
        let spec = spec("II", &[("eu", &[("a", 1), ("b", 2)])]);
        // a at 0.5: weight 0.5, rank 1 -> 0.5; b idle: weight 1, rank 2 -> 0.5.
        let computed = targets(&spec, &loaded(&[("a", 1.0, Some(0.5)), ("b", 1.0, Some(0.1))]));
        assert_eq!(computed["eu"], row(&[("a", 0.5), ("b", 0.5)]));
        // a above the high watermark: weight 0.
        let computed = targets(&spec, &loaded(&[("a", 1.0, Some(0.7)), ("b", 1.0, Some(0.45))]));
        assert_eq!(computed["eu"], row(&[("a", 0.0), ("b", 1.0)]));
        // Both above it: equal shares rather than nothing.
        let computed = targets(&spec, &loaded(&[("a", 1.0, Some(0.9)), ("b", 1.0, Some(0.9))]));
        assert_eq!(computed["eu"], row(&[("a", 0.5), ("b", 0.5)]));
    }

    #[test]
    fn damping_smooths_and_bounds_each_move() {
        let mut spec = spec("II", &[]);
        (spec.smoothing, spec.max_step) = (0.5, 0.1);
        let current = BTreeMap::from([("eu".to_string(), row(&[("a", 1.0), ("b", 0.0)]))]);
        let target = BTreeMap::from([("eu".to_string(), row(&[("a", 0.0), ("b", 1.0)]))]);
        let moved = damped(&spec, &current, &target);
        // Half the way would be 0.5; the step bound keeps it to 0.1.
        assert_eq!(moved["eu"], row(&[("a", 0.9), ("b", 0.1)]));
        let fresh = damped(&spec, &BTreeMap::new(), &target);
        assert_eq!(fresh, target, "a first table is installed as computed");
    }

    #[test]
    fn loads_are_smoothed_and_specs_checked() {
        let first = SmoothedLoad::report(None, 1.0, 10, 0.5);
        assert_eq!(SmoothedLoad::report(Some(first), 0.0, 11, 0.5), SmoothedLoad { value: 0.5, at: 11 });
        let field = |spec: LoadControlSpec| spec.check("service[s].load_control", &["a", "b"]).map_err(|error| error.field);
        assert_eq!(field(spec("II", &[("eu", &[("a", 1)])])), Ok(()));
        assert_eq!(field(spec("III", &[])).unwrap_err(), "service[s].load_control.algorithm");
        assert_eq!(field(spec("I", &[("eu", &[("z", 1)])])).unwrap_err(), "service[s].load_control.ranks[eu]");
        assert_eq!(field(LoadControlSpec { low_watermark: 0.7, ..spec("II", &[]) }).unwrap_err(), "service[s].load_control.low_watermark");
        assert_eq!(field(LoadControlSpec { smoothing: 0.0, ..spec("II", &[]) }).unwrap_err(), "service[s].load_control.smoothing");
    }
}
