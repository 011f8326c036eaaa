//! Load on the control plane: reports kept smoothed (pushed through the
//! API or probed), and the control loop that turns them into region
//! probabilities (MyXDNS algorithms I and II, optionally damped),
//! installed through the same path as an API upload.

use std::collections::{BTreeMap, HashMap};

use pharos_control::load_control::{Loaded, Row, SmoothedLoad, rows_of};
use pharos_control::probe::{ProbeTarget, Purpose};
use pharos_control::spec::ServiceSpec;
use pharos_control::{Change, State};
use serde::Serialize;

use pharos_control::ControlError;
use pharos_control::edit::check_load;

use super::Control;
use crate::data::{unix_millis, unix_now};

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

impl Control {
    /// Folds a load report for `replica` of `service` into its smoothed
    /// value.
    pub fn record_load(&mut self, service: &str, replica: &str, value: f64) -> Result<(), ControlError> {
        check_load(&self.state, service, replica, value)?;
        let key = (service.to_string(), replica.to_string());
        let smoothed = SmoothedLoad::report(self.loads.get(&key).copied(), value, unix_now(), self.config.load.smoothing);
        self.loads.insert(key, smoothed);
        Ok(())
    }

    /// When the control thread must next wake by itself (Unix ms): for a
    /// measurement to expire or a load-control round.
    pub fn next_wakeup(&self) -> Option<u64> {
        let expiry = self.sources.latencies.next_expiry.map(|seconds| seconds * 1000);
        expiry.into_iter().chain(self.load_rounds.values().copied()).min()
    }

    /// Does what is due: drops expired measurements, runs due load-control
    /// rounds.
    pub fn wake(&mut self) -> Result<(), ControlError> {
        let now = unix_millis();
        if self.sources.latencies.next_expiry.is_some_and(|seconds| seconds * 1000 <= now) {
            self.expire_measurements()?;
        }
        let due: Vec<String> = self.load_rounds.iter().filter(|(_, at)| **at <= now).map(|(service, _)| service.clone()).collect();
        for service in due {
            self.run_load_control(&service)?;
        }
        Ok(())
    }

    /// Keeps one round scheduled per load-controlled service of the state,
    /// the first one interval from now.
    pub(super) fn schedule_load_rounds(&mut self) {
        let controlled: HashMap<&str, u64> =
            self.state.services.iter().filter_map(|spec| Some((spec.name.as_str(), spec.load_control.as_ref()?.interval_ms))).collect();
        self.load_rounds.retain(|service, _| controlled.contains_key(service.as_str()));
        let now = unix_millis();
        for (service, interval) in controlled {
            self.load_rounds.entry(service.to_string()).or_insert(now + interval);
        }
        self.loads.retain(|(service, _), _| self.state.services.iter().any(|spec| spec.name == *service));
    }

    /// One round for `service`: targets from the fresh loads, damped from
    /// the installed table, installed if they differ.
    fn run_load_control(&mut self, service: &str) -> Result<(), ControlError> {
        let Some(spec) = self.state.services.iter().find(|spec| spec.name == service).cloned() else { return Ok(()) };
        let Some(control) = spec.load_control.clone() else { return Ok(()) };
        self.load_rounds.insert(service.to_string(), unix_millis() + control.interval_ms);
        let loaded = self.fresh_loads(&spec);
        let targets = control.targets(&loaded);
        let previous = rows_of(&spec.probabilities);
        let installed = control.damped(&previous, &targets);
        let loads = loaded.iter().map(|replica| (replica.id.clone(), replica.load)).collect();
        let run = LoadRun { service: service.to_string(), at: unix_now(), loads, previous, targets, installed: installed.clone() };
        tracing::debug!(service, ?run, "load control round");
        self.load_runs.insert(service.to_string(), run);
        let probabilities = control.as_probabilities(&installed);
        if probabilities == spec.probabilities {
            return Ok(());
        }
        self.apply(&[Change::PutService(ServiceSpec { probabilities, ..spec })])
    }

    /// `spec`'s replicas with their smoothed loads, if fresh.
    fn fresh_loads(&self, spec: &ServiceSpec) -> Vec<Loaded> {
        let oldest = unix_now().saturating_sub(self.config.load.max_age_seconds);
        let load_of =
            |id: &str| self.loads.get(&(spec.name.clone(), id.to_string())).filter(|load| load.at >= oldest).map(|load| load.value);
        spec.replicas
            .iter()
            .map(|replica| Loaded { id: replica.id.clone(), capacity: f64::from(replica.weight), load: load_of(&replica.id) })
            .collect()
    }

    /// Smoothed loads and the last round of each load-controlled service.
    pub fn load_status(&self) -> LoadStatus {
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
        LoadStatus { replicas, runs: self.load_runs.values().cloned().collect() }
    }
}

/// The load probes `state` asks for: one per enabled replica of every
/// service with a `load_probe`.
pub(super) fn load_probe_targets(state: &State) -> Vec<ProbeTarget> {
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
