//! How a service's region probabilities follow load (MyXDNS section
//! 5.2), as an operator declares it; the algorithms that compute them are
//! `pharos_control::load_control`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

/// How a service's probabilities follow load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadControlSpec {
    /// "I" or "II".
    pub algorithm: String,
    /// Algorithm I: a replica above this load is overloaded.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Algorithm II: weight 0 above this load.
    #[serde(default = "default_high")]
    pub high_watermark: f64,
    /// Algorithm II: weight 1 below this load.
    #[serde(default = "default_low")]
    pub low_watermark: f64,
    /// How often the probabilities are recomputed.
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    /// Table name ("default" or a region's name) -> replica id -> rank
    /// (1 is best). A replica a table does not rank ranks last.
    pub ranks: BTreeMap<String, BTreeMap<String, u32>>,
    /// Share of the way to the computed target a probability moves per
    /// round (1: all of it, no smoothing).
    #[serde(default = "one")]
    pub smoothing: f64,
    /// The most a probability may move per round (1: no bound).
    #[serde(default = "one")]
    pub max_step: f64,
    /// TTL of the answers (per region row).
    #[serde(default = "default_ttl")]
    pub ttl: u32,
}

fn default_threshold() -> f64 {
    0.5
}
fn default_high() -> f64 {
    0.6
}
fn default_low() -> f64 {
    0.4
}
fn default_interval() -> u64 {
    10_000
}
fn one() -> f64 {
    1.0
}
fn default_ttl() -> u32 {
    30
}

impl LoadControlSpec {
    /// Checks the numbers and names; `field` names the spec in errors.
    pub fn check(&self, field: &str, replica_ids: &[&str]) -> Result<(), SpecError> {
        let invalid = |name: &str, message: String| Err(SpecError { field: format!("{field}.{name}"), message });
        if self.algorithm != "I" && self.algorithm != "II" {
            return invalid("algorithm", format!("{:?} is not \"I\" or \"II\"", self.algorithm));
        }
        if self.algorithm == "II" && self.low_watermark >= self.high_watermark {
            return invalid("low_watermark", "must be below high_watermark".into());
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return invalid("smoothing", format!("{} is not in (0, 1]", self.smoothing));
        }
        if !(self.max_step > 0.0 && self.max_step <= 1.0) {
            return invalid("max_step", format!("{} is not in (0, 1]", self.max_step));
        }
        if self.interval_ms < 100 {
            return invalid("interval_ms", "recompute at most every 100 ms".into());
        }
        for (table, ranks) in &self.ranks {
            if let Some(unknown) = ranks.keys().find(|id| !replica_ids.contains(&id.as_str())) {
                return invalid(&format!("ranks[{table}]"), format!("no replica {unknown:?} in this service"));
            }
            if ranks.values().any(|&rank| rank == 0) {
                return invalid(&format!("ranks[{table}]"), "ranks start at 1 (best)".into());
            }
        }
        Ok(())
    }
}
