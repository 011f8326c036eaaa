//! The split actually delivered against the configured one, per service
//! and client region: the share of first answers each replica got over a
//! sliding window, beside the share its policy gives it (a
//! `region-probabilities` row, or `weighted` weights), and the total
//! variation distance between the two (half the sum of the differences:
//! 0 when they agree, 1 when they share nothing).
//!
//! The window is made of the transports' decision counts read at each
//! request (`GET /v1/split`, `/metrics`): a request measures from the
//! newest earlier reading at least [`WINDOW`] old, or the oldest kept, and
//! says how long a span that was. No timer, no work between readings.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pharos_control::State;
use pharos_control::spec::ServiceSpec;
use pharos_route::RegionId;
use serde::Serialize;

/// How far back the realized split looks.
pub const WINDOW: Duration = Duration::from_secs(300);
/// Readings kept at most: a scraper every second fills a window with fewer.
const MAX_READINGS: usize = 512;

/// Answers routed, by service, first replica and region (as counted).
type Decisions = BTreeMap<(String, String, RegionId), u64>;

/// The readings a window is measured from.
#[derive(Debug)]
pub struct SplitWindow {
    readings: Mutex<VecDeque<(Instant, Decisions)>>,
}

/// One service's split for clients of one region.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Split {
    pub service: String,
    pub region: String,
    /// First answers in the window.
    pub answers: u64,
    pub replicas: Vec<ReplicaShare>,
    /// Between the realized and the configured shares; `None` when the
    /// policy configures no share.
    pub total_variation: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReplicaShare {
    pub replica: String,
    pub answers: u64,
    pub realized: f64,
    pub configured: Option<f64>,
}

/// The splits over the span measured, and how long it was.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Splits {
    pub window_seconds: f64,
    pub splits: Vec<Split>,
}

impl Default for SplitWindow {
    fn default() -> SplitWindow {
        SplitWindow { readings: Mutex::new(VecDeque::from([(Instant::now(), Decisions::new())])) }
    }
}

impl SplitWindow {
    /// The splits from the window's start to `decisions`, read now, for
    /// the services and regions of `state`.
    pub fn measure(&self, decisions: Decisions, state: &State) -> Splits {
        let now = Instant::now();
        let mut readings = self.readings.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Keep one reading at least a window old: the start of the next.
        while readings.len() > 1 && readings[1].0 + WINDOW <= now {
            readings.pop_front();
        }
        let (start, baseline) = readings.front().expect("a reading is always kept");
        let window_seconds = now.duration_since(*start).as_secs_f64();
        let splits = splits(&delivered(baseline, &decisions), state);
        if readings.len() == MAX_READINGS {
            readings.remove(1);
        }
        readings.push_back((now, decisions));
        Splits { window_seconds, splits }
    }
}

/// What `now` counts beyond `baseline`, by service, region and replica.
fn delivered(baseline: &Decisions, now: &Decisions) -> BTreeMap<(String, RegionId), BTreeMap<String, u64>> {
    let mut delivered: BTreeMap<(String, RegionId), BTreeMap<String, u64>> = BTreeMap::new();
    for ((service, replica, region), &count) in now {
        let before = baseline.get(&(service.clone(), replica.clone(), *region)).copied().unwrap_or(0);
        if count > before {
            *delivered.entry((service.clone(), *region)).or_default().entry(replica.clone()).or_default() += count - before;
        }
    }
    delivered
}

fn splits(delivered: &BTreeMap<(String, RegionId), BTreeMap<String, u64>>, state: &State) -> Vec<Split> {
    let mut splits = Vec::new();
    for ((service, region), answered) in delivered {
        let region_name = state.regions.iter().find(|spec| spec.id == *region).map(|spec| spec.name.clone());
        let spec = state.services.iter().find(|spec| spec.name.trim_end_matches('.') == service.trim_end_matches('.'));
        let configured = spec.map(|spec| configured_shares(spec, region_name.as_deref())).unwrap_or_default();
        splits.push(split(service, region_name.unwrap_or_else(|| "unclassified".into()), answered, &configured));
    }
    splits
}

/// The share of first answers the policy of `spec` gives each replica for
/// clients in `region` (`None`: unclassified); empty when the policy
/// gives none (it decides by proximity, load, order...).
fn configured_shares(spec: &ServiceSpec, region: Option<&str>) -> BTreeMap<String, f64> {
    let weights: BTreeMap<String, f64> = match spec.policy.as_str() {
        "region-probabilities" => {
            let table = region.and_then(|name| spec.probabilities.get(name)).or_else(|| spec.probabilities.get("default"));
            table.into_iter().flatten().map(|(replica, row)| (replica.clone(), row.probability)).collect()
        }
        "weighted" => {
            let enabled = spec.replicas.iter().filter(|replica| replica.enabled);
            enabled.map(|replica| (replica.id.clone(), f64::from(replica.weight))).collect()
        }
        _ => BTreeMap::new(),
    };
    let total: f64 = weights.values().sum();
    if total <= 0.0 {
        return BTreeMap::new();
    }
    weights.into_iter().map(|(replica, weight)| (replica, weight / total)).collect()
}

fn split(service: &str, region: String, answered: &BTreeMap<String, u64>, configured: &BTreeMap<String, f64>) -> Split {
    let answers: u64 = answered.values().sum();
    let mut names: Vec<&String> = answered.keys().chain(configured.keys()).collect();
    names.sort();
    names.dedup();
    let replicas: Vec<ReplicaShare> = names
        .into_iter()
        .map(|replica| {
            let count = answered.get(replica).copied().unwrap_or(0);
            let realized = if answers == 0 { 0.0 } else { count as f64 / answers as f64 };
            ReplicaShare { replica: replica.clone(), answers: count, realized, configured: configured.get(replica).copied() }
        })
        .collect();
    let total_variation = (!configured.is_empty())
        .then(|| replicas.iter().map(|share| (share.realized - share.configured.unwrap_or(0.0)).abs()).sum::<f64>() / 2.0);
    Split { service: service.to_string(), region, answers, replicas, total_variation }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distance_is_half_the_sum_of_the_differences() {
        let answered = BTreeMap::from([("fra".to_string(), 30), ("sin".to_string(), 10)]);
        let configured = BTreeMap::from([("fra".to_string(), 0.5), ("sin".to_string(), 0.25), ("syd".to_string(), 0.25)]);
        let measured = split("svc", "europe".into(), &answered, &configured);
        assert_eq!(measured.answers, 40);
        let shares: Vec<(&str, f64, Option<f64>)> =
            measured.replicas.iter().map(|share| (share.replica.as_str(), share.realized, share.configured)).collect();
        assert_eq!(shares, [("fra", 0.75, Some(0.5)), ("sin", 0.25, Some(0.25)), ("syd", 0.0, Some(0.25))]);
        assert_eq!(measured.total_variation, Some(0.25));
        assert_eq!(split("svc", "europe".into(), &answered, &BTreeMap::new()).total_variation, None, "nothing configured");
    }

    #[test]
    fn a_window_measures_from_its_last_reading_at_least_a_window_old() {
        let window = SplitWindow::default();
        let state = State::default();
        let counted = |count| Decisions::from([(("svc".to_string(), "fra".to_string(), 0), count)]);
        assert_eq!(window.measure(counted(5), &state).splits[0].answers, 5, "from the start");
        assert_eq!(window.measure(counted(8), &state).splits[0].answers, 8, "the start is not a window old yet");
        let mut readings = window.readings.lock().unwrap();
        let long_ago = Instant::now().checked_sub(WINDOW + Duration::from_secs(1)).expect("the machine has run longer than a window");
        readings[0].0 = long_ago;
        readings[1].0 = long_ago;
        drop(readings);
        let measured = window.measure(counted(10), &state);
        assert_eq!(measured.splits[0].answers, 5, "from the reading of 5, the newest a window old");
        assert!(measured.window_seconds > WINDOW.as_secs_f64());
    }
}
