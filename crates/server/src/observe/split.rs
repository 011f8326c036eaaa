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
//! says how much of the answers one resolver took.
//!
//! The tallies the transports hand over at each reading are merged at
//! once into one table for the window, keyed by service, region and
//! resolver, each entry a minute-by-minute count for the last 6 minutes
//! (so that, like the decisions, the tallies cover at least [`WINDOW`]);
//! a reading computes the figures in one pass over it. The table holds at
//! most [`MAX_RESOLVERS`] entries (about 5 MB): answers to resolvers it has
//! no room for are counted, not kept.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pharos_model::State;
use pharos_model::spec::ServiceSpec;
use pharos_route::RegionId;
use pharos_transport::metrics::resolvers::{Names, REPLICAS_PER_RESOLVER, ReplicaPlaces, ResolverAnswers, Resolvers};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// How far back the realized split looks.
pub const WINDOW: Duration = Duration::from_secs(300);
/// Readings kept at most: a scraper every second fills a window with fewer.
const MAX_READINGS: usize = 512;
/// The resolver tallies' steps: a drain counts for the minute it was
/// drained in, and a minute is forgotten once [`WINDOW`] has passed
/// since its end.
const TALLY_STEP: Duration = Duration::from_secs(60);
const TALLY_STEPS: usize = (WINDOW.as_secs() / TALLY_STEP.as_secs()) as usize + 1;
/// (service, region, resolver) entries the window holds at most: 7/8 of
/// 2^15, the most a hash table of 2^15 buckets holds before it doubles.
pub const MAX_RESOLVERS: usize = 28_672;

/// Answers routed, by service, first replica and region (as counted).
type Decisions = BTreeMap<(String, String, RegionId), u64>;

/// The readings a window is measured from.
#[derive(Debug)]
pub struct SplitWindow {
    readings: Mutex<VecDeque<(Instant, Decisions)>>,
    resolvers: Mutex<ResolverWindow>,
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
    /// Routed answers not tallied since the start, because their
    /// resolver found its transport slot taken or had a fifth first
    /// replica in a thread or in the window; `None` unless resolvers are
    /// tallied.
    pub untallied_answers: Option<u64>,
    /// Routed answers not tallied since the start because the window
    /// held [`MAX_RESOLVERS`] (service, region, resolver) entries already;
    /// `None` unless resolvers are tallied.
    pub over_cap_answers: Option<u64>,
    /// (service, region, resolver) entries the window holds, at most
    /// [`MAX_RESOLVERS`]; `None` unless resolvers are tallied.
    pub window_resolvers: Option<usize>,
}

impl Default for SplitWindow {
    fn default() -> SplitWindow {
        let now = Instant::now();
        SplitWindow { readings: Mutex::new(VecDeque::from([(now, Decisions::new())])), resolvers: Mutex::new(ResolverWindow::new(now)) }
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
            let mut window = self.resolvers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            window.forget_before(now);
            window.merge(now, drained);
            let views = window.views();
            for split in &mut splits.splits {
                let region = state.regions.iter().find(|spec| spec.name == split.region).map_or(pharos_route::UNCLASSIFIED, |spec| spec.id);
                let service = window.names.find(&split.service);
                if let Some(sums) = service.and_then(|service| views.get(&(service, region))) {
                    add_resolver_view(split, sums);
                }
            }
            splits.untallied_answers = Some(window.untallied);
            splits.over_cap_answers = Some(window.over_cap);
            splits.window_resolvers = Some(window.entries.len());
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
        Splits { window_seconds, splits, untallied_answers: None, over_cap_answers: None, window_resolvers: None }
    }
}

/// The per-resolver tallies of the last [`TALLY_STEPS`] minutes, merged
/// by service, region and resolver.
#[derive(Debug)]
struct ResolverWindow {
    /// When minute 0 began.
    started: Instant,
    /// The minute each step's counts are of, by minute modulo the steps.
    minutes: [Option<u64>; TALLY_STEPS],
    names: Names,
    entries: FxHashMap<ResolverKey, ResolverEntry>,
    untallied: u64,
    over_cap: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ResolverKey {
    service: u32,
    region: RegionId,
    resolver: IpAddr,
}

/// One resolver's answers for one service and region, minute by minute
/// (by minute modulo the steps): counts and the seconds of caching each of
/// its first replicas (in `replicas`) was granted, by place. Seconds
/// saturate at 2^32 (136 years a minute).
#[derive(Debug, Clone)]
struct ResolverEntry {
    replicas: ReplicaPlaces,
    answers: [u32; TALLY_STEPS],
    seconds: [[u32; REPLICAS_PER_RESOLVER]; TALLY_STEPS],
}

const EMPTY_ENTRY: ResolverEntry =
    ResolverEntry { replicas: ReplicaPlaces::EMPTY, answers: [0; TALLY_STEPS], seconds: [[0; REPLICAS_PER_RESOLVER]; TALLY_STEPS] };

impl ResolverEntry {
    /// This entry's places with `replicas` placed (free places taken for
    /// new ones), and the place of each, in order; `None` when they do not
    /// all fit.
    fn places(&self, replicas: &[u32]) -> Option<(ReplicaPlaces, [usize; REPLICAS_PER_RESOLVER])> {
        let mut places = self.replicas;
        let mut placed = [0; REPLICAS_PER_RESOLVER];
        for (at, &replica) in placed.iter_mut().zip(replicas) {
            *at = places.place(replica)?;
        }
        Some((places, placed))
    }

    /// Forgets the minutes of `steps`; whether any answer is left.
    fn forget(&mut self, steps: &[usize]) -> bool {
        for &step in steps {
            self.answers[step] = 0;
            self.seconds[step] = [0; REPLICAS_PER_RESOLVER];
        }
        for place in 0..REPLICAS_PER_RESOLVER {
            if self.seconds.iter().all(|seconds| seconds[place] == 0) {
                self.replicas.free(place);
            }
        }
        self.answers.iter().any(|&answers| answers > 0)
    }
}

/// One split's resolvers, summed in a reading's pass.
#[derive(Debug, Default, PartialEq)]
struct ResolverSums<'names> {
    resolvers: usize,
    answers: u64,
    busiest: u64,
    /// Per replica, the sum over resolvers of its share of each one's
    /// cache time.
    cached: BTreeMap<&'names str, f64>,
}

impl<'names> ResolverSums<'names> {
    /// Adds a resolver given `answers`, and `cached` seconds of caching
    /// per replica.
    fn add(&mut self, answers: u64, cached: impl Iterator<Item = (&'names str, u64)> + Clone) {
        let seconds: u64 = cached.clone().map(|(_, seconds)| seconds).sum();
        for (replica, held) in cached.filter(|(_, held)| *held > 0) {
            *self.cached.entry(replica).or_default() += held as f64 / seconds as f64;
        }
        self.resolvers += 1;
        self.answers += answers;
        self.busiest = self.busiest.max(answers);
    }
}

impl ResolverWindow {
    fn new(started: Instant) -> ResolverWindow {
        ResolverWindow {
            started,
            minutes: [None; TALLY_STEPS],
            names: Names::default(),
            entries: FxHashMap::default(),
            untallied: 0,
            over_cap: 0,
        }
    }

    fn minute(&self, now: Instant) -> u64 {
        now.duration_since(self.started).as_secs() / TALLY_STEP.as_secs()
    }

    /// Forgets the minutes that ended a window or more before `now`, and
    /// the resolvers left without answers.
    fn forget_before(&mut self, now: Instant) {
        let minute = self.minute(now);
        let mut stale = [0; TALLY_STEPS];
        let mut count = 0;
        for (step, held) in self.minutes.iter_mut().enumerate() {
            if held.is_some_and(|held| held + TALLY_STEPS as u64 <= minute) {
                *held = None;
                stale[count] = step;
                count += 1;
            }
        }
        if count > 0 {
            self.entries.retain(|_, entry| entry.forget(&stale[..count]));
        }
    }

    /// Adds `drained` to the minute of `now`.
    fn merge(&mut self, now: Instant, drained: Resolvers) {
        let minute = self.minute(now);
        let step = (minute % TALLY_STEPS as u64) as usize;
        self.minutes[step] = Some(minute);
        self.untallied += drained.untallied;
        for ((service, region), resolvers) in drained.tally {
            let service = self.names.number(&service);
            for (resolver, answers) in resolvers {
                self.add(ResolverKey { service, region, resolver }, step, &answers);
            }
        }
    }

    fn add(&mut self, key: ResolverKey, step: usize, answers: &ResolverAnswers) {
        if answers.cached_seconds.len() > REPLICAS_PER_RESOLVER {
            self.untallied += answers.answers;
            return;
        }
        let mut replicas = [0; REPLICAS_PER_RESOLVER];
        for (replica, name) in replicas.iter_mut().zip(answers.cached_seconds.keys()) {
            *replica = self.names.number(name);
        }
        let replicas = &replicas[..answers.cached_seconds.len()];
        let full = self.entries.len() >= MAX_RESOLVERS;
        let entry = match self.entries.get_mut(&key) {
            Some(entry) => entry,
            None if full => {
                self.over_cap += answers.answers;
                return;
            }
            None => self.entries.entry(key).or_insert(EMPTY_ENTRY),
        };
        let Some((places, placed)) = entry.places(replicas) else {
            self.untallied += answers.answers;
            return;
        };
        entry.replicas = places;
        entry.answers[step] = entry.answers[step].saturating_add(u32::try_from(answers.answers).unwrap_or(u32::MAX));
        for (&place, &seconds) in placed.iter().zip(answers.cached_seconds.values()) {
            let kept = &mut entry.seconds[step][place];
            *kept = kept.saturating_add(u32::try_from(seconds).unwrap_or(u32::MAX));
        }
    }

    /// Every split's resolver sums, in one pass over the entries.
    fn views(&self) -> BTreeMap<(u32, RegionId), ResolverSums<'_>> {
        let mut views: BTreeMap<(u32, RegionId), ResolverSums<'_>> = BTreeMap::new();
        for (key, entry) in &self.entries {
            let answers: u64 = entry.answers.iter().map(|&answers| u64::from(answers)).sum();
            let cached = entry.replicas.held().map(|(place, replica)| {
                let seconds: u64 = entry.seconds.iter().map(|seconds| u64::from(seconds[place])).sum();
                (self.names.name(replica), seconds)
            });
            views.entry((key.service, key.region)).or_default().add(answers, cached);
        }
        views
    }
}

/// Adds to `split` each replica's share of the cache time of the
/// resolvers summed in `sums` (every resolver weighing the same), and how
/// far that is from its realized shares.
fn add_resolver_view(split: &mut Split, sums: &ResolverSums<'_>) {
    let resolvers = sums.resolvers.max(1) as f64;
    let mut skew = sums
        .cached
        .iter()
        .filter(|(replica, _)| !split.replicas.iter().any(|share| share.replica == **replica))
        .map(|(_, share)| share / resolvers)
        .sum::<f64>();
    for share in &mut split.replicas {
        let cached_share = sums.cached.get(share.replica.as_str()).copied().unwrap_or(0.0) / resolvers;
        skew += (share.realized - cached_share).abs();
        share.cached = Some(cached_share);
    }
    let top_resolver_share = if sums.answers == 0 { 0.0 } else { sums.busiest as f64 / sums.answers as f64 };
    split.resolvers = Some(ResolverView { resolvers: sums.resolvers, top_resolver_share, caching_skew: skew / 2.0 });
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
        let mut sums = ResolverSums::default();
        sums.add(1, [("fra", 60)].into_iter());
        sums.add(1, [("sin", 60)].into_iter());
        // Busy: 8 answers, 6 to fra for 60 s and 2 to sin for 180 s.
        sums.add(8, [("fra", 360), ("sin", 360)].into_iter());
        add_resolver_view(&mut measured, &sums);
        let cached: Vec<Option<f64>> = measured.replicas.iter().map(|share| share.cached).collect();
        assert_eq!(cached, [Some(0.5), Some(0.5)], "(1 + 0 + 1/2) / 3 each");
        let view = measured.resolvers.unwrap();
        assert_eq!((view.resolvers, view.top_resolver_share), (3, 0.8));
        assert!((view.caching_skew - 0.4).abs() < 1e-12, "realized 0.9 against cached 0.5: {view:?}");
    }

    fn drained(resolvers: impl Iterator<Item = (u32, &'static [(&'static str, u64)])>) -> Resolvers {
        let mut drained = Resolvers::default();
        for (number, cached) in resolvers {
            let answers = ResolverAnswers {
                answers: cached.len() as u64,
                cached_seconds: cached.iter().map(|&(replica, seconds)| (replica.into(), seconds)).collect(),
            };
            let resolver = IpAddr::from((0x0a00_0000 + number).to_be_bytes());
            drained.tally.entry(("svc".into(), 0)).or_default().insert(resolver, answers);
        }
        drained
    }

    #[test]
    fn the_window_keeps_at_most_its_cap_of_resolvers_and_counts_the_answers_it_drops() {
        let mut window = ResolverWindow::new(Instant::now());
        let now = Instant::now();
        let over = 1000;
        window.merge(now, drained((0..MAX_RESOLVERS as u32 + over).map(|number| (number, &[("fra", 60)][..]))));
        assert_eq!(window.entries.len(), MAX_RESOLVERS);
        assert_eq!(window.over_cap, u64::from(over), "one answer each");
        // Some of these were kept, some not: each answer is kept or counted.
        window.merge(now, drained((0..10).map(|number| (number, &[("sin", 60)][..]))));
        let newcomers = MAX_RESOLVERS as u32 + over;
        window.merge(now, drained((newcomers..newcomers + 10).map(|number| (number, &[("sin", 60)][..]))));
        assert_eq!(window.entries.len(), MAX_RESOLVERS);
        assert!(window.over_cap >= u64::from(over) + 10, "the newcomers' answers at least: {}", window.over_cap);
        let sums = &window.views()[&(0, 0)];
        assert_eq!(sums.resolvers, MAX_RESOLVERS);
        assert_eq!(sums.answers + window.over_cap, MAX_RESOLVERS as u64 + u64::from(over) + 20);
    }

    #[test]
    fn minutes_a_window_old_are_forgotten_and_a_fifth_replica_is_not_tallied() {
        let start = Instant::now();
        let mut window = ResolverWindow::new(start);
        window.merge(start, drained([(1, &[("a", 10), ("b", 10)][..]), (2, &[("a", 10)][..])].into_iter()));
        let later = start + WINDOW;
        window.forget_before(later);
        window.merge(later, drained([(1, &[("c", 10), ("d", 10)][..])].into_iter()));
        window.merge(later, drained([(1, &[("e", 10)][..])].into_iter()));
        assert_eq!(window.untallied, 1, "a, b, c and d are held");
        assert_eq!(window.views()[&(0, 0)].resolvers, 2, "the first minute ended less than a window ago");
        window.forget_before(start + WINDOW + TALLY_STEP);
        let sums = &window.views()[&(0, 0)];
        assert_eq!((sums.resolvers, sums.answers), (1, 2), "only the second reading's");
        assert_eq!(sums.cached, BTreeMap::from([("c", 0.5), ("d", 0.5)]));
        window.merge(start + WINDOW + TALLY_STEP, drained([(1, &[("e", 10)][..])].into_iter()));
        assert_eq!(window.untallied, 1, "a and b were forgotten: e has room");
        window.forget_before(start + 2 * WINDOW + 2 * TALLY_STEP);
        assert!(window.entries.is_empty(), "every minute forgotten");
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
