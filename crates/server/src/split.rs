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
//!
//! Where the transports tally routed answers per resolver (`[metrics]
//! resolver_view`), each split also says how resolvers' caches skew it.
//! A resolver sends all its clients to the replica it was answered for as
//! long as the answer's TTL lasts, however many clients it has; so the
//! traffic a replica receives follows the share of resolvers' cache time
//! it holds more than the share of answers it got. The estimate gives
//! every resolver the same weight (its clients are unknown here) and
//! splits each resolver's weight by the TTL seconds its answers granted
//! each replica; `caching_skew` is its distance from the realized split.
//! One busy resolver asking again and again (a farm behind one address,
//! or one that ignores TTLs) moves the realized split by its many draws
//! and the cached one by one resolver's weight: `top_resolver_share`
//! says how much of the answers one resolver took. The tallies the
//! transports hand over at each reading are kept for a window, bounded.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pharos_control::State;
use pharos_control::spec::ServiceSpec;
use pharos_route::RegionId;
use pharos_transport::metrics::{ResolverAnswers, ResolverTally, Resolvers};
use serde::Serialize;

/// How far back the realized split looks.
pub const WINDOW: Duration = Duration::from_secs(300);
/// Readings kept at most: a scraper every second fills a window with fewer.
const MAX_READINGS: usize = 512;
/// Resolver tallies kept at most, each (service, region, resolver) once
/// per reading: the oldest readings' go first.
const MAX_TALLIED: usize = 262_144;

/// Answers routed, by service, first replica and region (as counted).
type Decisions = BTreeMap<(String, String, RegionId), u64>;

/// The readings a window is measured from.
#[derive(Debug)]
pub struct SplitWindow {
    readings: Mutex<VecDeque<(Instant, Decisions)>>,
    /// Each reading's per-resolver tally, with the time it was drained.
    tallies: Mutex<VecDeque<(Instant, ResolverTally)>>,
    /// Answers the transports could not tally, since the start.
    untallied: AtomicU64,
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
    /// How resolvers' caches skew it; `None` unless resolvers are tallied.
    pub resolvers: Option<ResolverView>,
}

/// What resolvers' caching does to one split (see the module's words).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ResolverView {
    /// Distinct resolvers answered in the window.
    pub resolvers: usize,
    /// The share of the answers the busiest resolver got.
    pub top_resolver_share: f64,
    /// Between the realized shares and the cached ones.
    pub caching_skew: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReplicaShare {
    pub replica: String,
    pub answers: u64,
    pub realized: f64,
    pub configured: Option<f64>,
    /// Its share of resolvers' cache time; `None` unless resolvers are
    /// tallied.
    pub cached: Option<f64>,
}

/// The splits over the span measured, and how long it was.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Splits {
    pub window_seconds: f64,
    pub splits: Vec<Split>,
    /// Routed answers the transports did not tally (their resolver found
    /// its slot taken), since the start; `None` unless resolvers are
    /// tallied.
    pub untallied_answers: Option<u64>,
}

impl Default for SplitWindow {
    fn default() -> SplitWindow {
        SplitWindow {
            readings: Mutex::new(VecDeque::from([(Instant::now(), Decisions::new())])),
            tallies: Mutex::new(VecDeque::new()),
            untallied: AtomicU64::new(0),
        }
    }
}

impl SplitWindow {
    /// The splits from the window's start to `decisions`, read now, for
    /// the services and regions of `state`; with how resolvers' caches
    /// skew them when the transports' per-resolver tallies, `drained` from
    /// them now, are given.
    pub fn measure(&self, decisions: Decisions, drained: Option<Resolvers>, state: &State) -> Splits {
        let now = Instant::now();
        let mut splits = self.measure_decisions(now, decisions, state);
        if let Some(drained) = drained {
            let by_resolver = self.keep_tally(now, drained.tally);
            for split in &mut splits.splits {
                let region = state.regions.iter().find(|spec| spec.name == split.region).map_or(pharos_route::UNCLASSIFIED, |spec| spec.id);
                if let Some(resolvers) = by_resolver.get(&(split.service.clone(), region)) {
                    add_resolver_view(split, resolvers);
                }
            }
            splits.untallied_answers = Some(self.untallied.fetch_add(drained.untallied, Ordering::Relaxed) + drained.untallied);
        }
        splits
    }

    fn measure_decisions(&self, now: Instant, decisions: Decisions, state: &State) -> Splits {
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
        Splits { window_seconds, splits, untallied_answers: None }
    }

    /// Keeps `drained` for a window, and merges what is kept by service,
    /// region and resolver.
    fn keep_tally(&self, now: Instant, drained: ResolverTally) -> BTreeMap<(String, RegionId), BTreeMap<IpAddr, ResolverAnswers>> {
        let mut tallies = self.tallies.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tallies.push_back((now, drained));
        while tallies.front().is_some_and(|(drained_at, _)| *drained_at + WINDOW <= now) {
            tallies.pop_front();
        }
        let tallied = |tally: &ResolverTally| tally.values().map(|resolvers| resolvers.len()).sum::<usize>();
        let mut kept: usize = tallies.iter().map(|(_, tally)| tallied(tally)).sum();
        while tallies.len() > 1 && kept > MAX_TALLIED {
            if let Some((_, dropped)) = tallies.pop_front() {
                kept -= tallied(&dropped);
            }
        }
        let mut merged: BTreeMap<(String, RegionId), BTreeMap<IpAddr, ResolverAnswers>> = BTreeMap::new();
        for ((service, region), resolvers) in tallies.iter().flat_map(|(_, tally)| tally) {
            let into = merged.entry((service.to_string(), *region)).or_default();
            for (resolver, answers) in resolvers {
                into.entry(*resolver).or_default().add(answers);
            }
        }
        merged
    }
}

/// Adds to `split` each replica's share of the cache time of `resolvers`
/// (every resolver weighing the same), and how far that is from its
/// realized shares.
fn add_resolver_view(split: &mut Split, resolvers: &BTreeMap<IpAddr, ResolverAnswers>) {
    let mut cached: BTreeMap<&str, f64> = BTreeMap::new();
    for answers in resolvers.values() {
        let seconds: u64 = answers.cached_seconds.values().sum();
        for (replica, &held) in &answers.cached_seconds {
            *cached.entry(replica).or_default() += held as f64 / seconds as f64 / resolvers.len() as f64;
        }
    }
    let answers: u64 = resolvers.values().map(|answers| answers.answers).sum();
    let busiest = resolvers.values().map(|answers| answers.answers).max().unwrap_or(0);
    let mut skew = cached
        .iter()
        .filter(|(replica, _)| !split.replicas.iter().any(|share| share.replica == **replica))
        .map(|(_, share)| share)
        .sum::<f64>();
    for share in &mut split.replicas {
        let cached_share = cached.get(share.replica.as_str()).copied().unwrap_or(0.0);
        skew += (share.realized - cached_share).abs();
        share.cached = Some(cached_share);
    }
    let top_resolver_share = if answers == 0 { 0.0 } else { busiest as f64 / answers as f64 };
    split.resolvers = Some(ResolverView { resolvers: resolvers.len(), top_resolver_share, caching_skew: skew / 2.0 });
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
            ReplicaShare { replica: replica.clone(), answers: count, realized, configured: configured.get(replica).copied(), cached: None }
        })
        .collect();
    let total_variation = (!configured.is_empty())
        .then(|| replicas.iter().map(|share| (share.realized - share.configured.unwrap_or(0.0)).abs()).sum::<f64>() / 2.0);
    Split { service: service.to_string(), region, answers, replicas, total_variation, resolvers: None }
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
    fn every_resolver_weighs_the_same_in_the_cached_split() {
        let answered = BTreeMap::from([("fra".to_string(), 9), ("sin".to_string(), 1)]);
        let mut measured = split("svc", "unclassified".into(), &answered, &BTreeMap::new());
        let resolver = |answers, cached: &[(&str, u64)]| ResolverAnswers {
            answers,
            cached_seconds: cached.iter().map(|&(replica, seconds)| (replica.into(), seconds)).collect(),
        };
        let resolvers = BTreeMap::from([
            ("192.0.2.1".parse().unwrap(), resolver(1, &[("fra", 60)])),
            ("192.0.2.2".parse().unwrap(), resolver(1, &[("sin", 60)])),
            // Busy: 8 answers, 6 to fra for 60 s and 2 to sin for 180 s.
            ("192.0.2.3".parse().unwrap(), resolver(8, &[("fra", 360), ("sin", 360)])),
        ]);
        add_resolver_view(&mut measured, &resolvers);
        let cached: Vec<Option<f64>> = measured.replicas.iter().map(|share| share.cached).collect();
        assert_eq!(cached, [Some(0.5), Some(0.5)], "(1 + 0 + 1/2) / 3 each");
        let view = measured.resolvers.unwrap();
        assert_eq!((view.resolvers, view.top_resolver_share), (3, 0.8));
        assert!((view.caching_skew - 0.4).abs() < 1e-12, "realized 0.9 against cached 0.5: {view:?}");
    }

    #[test]
    fn a_window_measures_from_its_last_reading_at_least_a_window_old() {
        let window = SplitWindow::default();
        let state = State::default();
        let counted = |count| Decisions::from([(("svc".to_string(), "fra".to_string(), 0), count)]);
        assert_eq!(window.measure(counted(5), None, &state).splits[0].answers, 5, "from the start");
        assert_eq!(window.measure(counted(8), None, &state).splits[0].answers, 8, "the start is not a window old yet");
        let mut readings = window.readings.lock().unwrap();
        let long_ago = Instant::now().checked_sub(WINDOW + Duration::from_secs(1)).expect("the machine has run longer than a window");
        readings[0].0 = long_ago;
        readings[1].0 = long_ago;
        drop(readings);
        let measured = window.measure(counted(10), None, &state);
        assert_eq!(measured.splits[0].answers, 5, "from the reading of 5, the newest a window old");
        assert!(measured.window_seconds > WINDOW.as_secs_f64());
    }
}
