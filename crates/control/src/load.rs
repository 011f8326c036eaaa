//! Load on the control plane: reports kept smoothed (pushed through the
//! API or probed), and the control loop that turns them into region
//! probabilities (MyXDNS algorithms I and II, optionally damped). A round
//! returns the change to install, through the same path as an API upload.
//! Times are passed in (Unix milliseconds).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::load_control::{self, LoadBook, Loaded, Row, SmoothedLoad, rows_of};
use crate::probe::{ProbeTarget, Purpose};
use pharos_model::spec::ServiceSpec;
use pharos_model::{Change, State};

/// How load reports are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadSettings {
    /// Reports older than this many seconds are ignored.
    pub max_age_seconds: u64,
    /// Weight of each new report in the smoothed value (EWMA), 0 to 1.
    pub smoothing: f64,
}

/// What the control loop last did for one service (`GET /v1/load`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoadRun {
    pub service: String,
    /// Unix seconds.
    pub at: u64,
    /// Each replica's smoothed load as used (none: no fresh report).
    pub loads: BTreeMap<String, Option<f64>>,
    /// The tables before the round, what the algorithm computed, and what
    /// was installed after damping.
    pub previous: BTreeMap<String, Row>,
    pub targets: BTreeMap<String, Row>,
    pub installed: BTreeMap<String, Row>,
}

/// Smoothed loads and the control loop's last runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoadStatus {
    pub replicas: Vec<ReplicaLoad>,
    pub runs: Vec<LoadRun>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReplicaLoad {
    pub service: String,
    pub replica: String,
    pub load: f64,
    /// Unix seconds of the last report.
    pub at: u64,
}

/// Smoothed loads, the rounds due and the last run of each.
#[derive(Debug, Clone)]
pub struct LoadControl {
    settings: LoadSettings,
    loads: LoadBook,
    /// When each load-controlled service's next round is due (Unix ms).
    rounds: HashMap<String, u64>,
    runs: BTreeMap<String, LoadRun>,
}

impl LoadControl {
    pub fn new(settings: LoadSettings) -> LoadControl {
        LoadControl { settings, loads: LoadBook::default(), rounds: HashMap::new(), runs: BTreeMap::new() }
    }

    /// Folds a load report for `replica` of `service`, checked before
    /// (see [`crate::edit::check_load`]), into its smoothed value.
    pub fn record(&mut self, service: &str, replica: &str, value: f64, now: u64) {
        let key = (service.to_string(), replica.to_string());
        let smoothed = SmoothedLoad::report(self.loads.get(&key).copied(), value, now / 1000, self.settings.smoothing);
        self.loads.insert(key, smoothed);
    }

    /// When the next round is due (Unix ms), if any service is controlled.
    pub fn next_round(&self) -> Option<u64> {
        self.rounds.values().copied().min()
    }

    /// The services whose round is due at `now`.
    pub fn due(&self, now: u64) -> Vec<String> {
        self.rounds.iter().filter(|(_, at)| **at <= now).map(|(service, _)| service.clone()).collect()
    }

    /// Keeps one round scheduled per load-controlled service of `state`,
    /// the first one interval after `now`, and forgets the loads of
    /// services gone.
    pub fn schedule(&mut self, state: &State, now: u64) {
        let controlled: HashMap<&str, u64> =
            state.services.iter().filter_map(|spec| Some((spec.name.as_str(), spec.load_control.as_ref()?.interval_ms))).collect();
        self.rounds.retain(|service, _| controlled.contains_key(service.as_str()));
        for (service, interval) in controlled {
            self.rounds.entry(service.to_string()).or_insert(now + interval);
        }
        self.loads.retain(|(service, _), _| state.service(service).is_some());
    }

    /// One round for `service` at `now`: targets from the fresh loads,
    /// damped from the installed table. Returns the change that installs
    /// them, if they differ from the installed ones.
    pub fn run_round(&mut self, state: &State, service: &str, now: u64) -> Option<Change> {
        let spec = state.service(service)?;
        let control = spec.load_control.as_ref()?;
        self.rounds.insert(service.to_string(), now + control.interval_ms);
        let loaded = self.fresh_loads(spec, now);
        let targets = load_control::targets(control, &loaded);
        let previous = rows_of(&spec.probabilities);
        let installed = load_control::damped(control, &previous, &targets);
        let loads = loaded.iter().map(|replica| (replica.id.clone(), replica.load)).collect();
        let run = LoadRun { service: service.to_string(), at: now / 1000, loads, previous, targets, installed: installed.clone() };
        self.runs.insert(service.to_string(), run);
        let probabilities = load_control::as_probabilities(control, &installed);
        (probabilities != spec.probabilities).then(|| Change::PutService(ServiceSpec { probabilities, ..ServiceSpec::clone(spec) }))
    }

    /// What the last round for `service` did.
    pub fn last_run(&self, service: &str) -> Option<&LoadRun> {
        self.runs.get(service)
    }

    /// `spec`'s replicas with their smoothed loads, if fresh at `now`.
    fn fresh_loads(&self, spec: &ServiceSpec, now: u64) -> Vec<Loaded> {
        let oldest = (now / 1000).saturating_sub(self.settings.max_age_seconds);
        let load_of =
            |id: &str| self.loads.get(&(spec.name.clone(), id.to_string())).filter(|load| load.at >= oldest).map(|load| load.value);
        spec.replicas
            .iter()
            .map(|replica| Loaded { id: replica.id.clone(), capacity: f64::from(replica.weight), load: load_of(&replica.id) })
            .collect()
    }

    /// Smoothed loads and the last round of each load-controlled service.
    pub fn status(&self) -> LoadStatus {
        let mut replicas: Vec<ReplicaLoad> = self
            .loads
            .iter()
            .map(|((service, replica), load)| ReplicaLoad {
                service: service.clone(),
                replica: replica.clone(),
                load: load.value,
                at: load.at,
            })
            .collect();
        replicas.sort_by(|a, b| (&a.service, &a.replica).cmp(&(&b.service, &b.replica)));
        LoadStatus { replicas, runs: self.runs.values().cloned().collect() }
    }
}

/// The load probes `state` asks for: one per enabled replica of every
/// service with a `load_probe`.
pub fn load_probe_targets(state: &State) -> Vec<ProbeTarget> {
    let mut targets = Vec::new();
    for service in &state.services {
        let Some(spec) = &service.load_probe else { continue };
        for replica in service.replicas.iter().filter(|replica| replica.enabled) {
            let address = replica.probe_address.unwrap_or(replica.address);
            targets.push(ProbeTarget {
                service: service.name.clone(),
                replica: replica.id.clone(),
                address,
                spec: spec.clone(),
                purpose: Purpose::Load,
            });
        }
    }
    targets
}
