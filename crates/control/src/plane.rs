//! The control plane as a state machine, the way quinn-proto drives a
//! connection: it holds the routing state and what is known about the
//! replicas, and each input (a commit, a probe result, a load report, a
//! timer, a batch of latency measurements) is a call that takes the time
//! and returns its effects (the snapshot to publish, the probe plan to run,
//! the changes a load round asks for, the measurements to keep). The driver
//! persists, publishes, probes and keeps the clock.
//!
//! A commit has two steps, so that nothing changes unless the store took
//! it: [`Plane::prepare`] validates the next state by building its
//! snapshot; the driver persists the changes; [`Plane::adopt`] makes the
//! prepared state the current one.

use std::sync::Arc;

use pharos_answer::Snapshot;
use pharos_route::latency::{MeasurementBook, MeasurementSpec};

use crate::build::DataSources;
use crate::edit::check_load;
use crate::fleet::{FleetHealth, Serve};
use crate::health::{Effect, Flip, HealthBook, ProbeAddresses, ProbeResult, ReplicaHealth};
use crate::key_steps::KeySteps;
use crate::load::{LoadControl, LoadSettings, LoadStatus, load_probe_targets};
use crate::probe::{ProbeTarget, Purpose};
use pharos_model::fleet::{FleetReports, NodeVerdict};

use crate::quorum::Quorum;
use crate::snapshot::{Built, SnapshotBuilder};
use pharos_model::ControlError;
use pharos_model::{Change, State};
use pharos_model::{Measurement, check_measurements};

/// The routing state, the data it is built with, and the rules around it.
pub struct Plane {
    /// Shared with readers as published: never copied to be published.
    state: Arc<State>,
    sources: DataSources,
    snapshots: SnapshotBuilder,
    health: HealthBook,
    load: LoadControl,
    /// The probes (health and load) last planned.
    probe_plan: Vec<ProbeTarget>,
    /// Every latency measurement kept, fresh or not yet pruned.
    measurements: MeasurementBook,
    /// Measurements older than this many seconds are not used.
    latency_max_age_seconds: u64,
    /// Health shared with the fleet (a shared store's nodes only).
    fleet: Option<FleetHealth>,
    key_steps: KeySteps,
}

/// The plane's own settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlaneSettings {
    pub load: LoadSettings,
    /// Latency measurements older than this many seconds are not used.
    pub latency_max_age_seconds: u64,
}

/// A commit validated, waiting for its changes to be persisted.
pub struct Prepared {
    next: State,
    health: HealthBook,
    sources: DataSources,
    built: Built,
    /// A builder over newly loaded zones, if the commit brings them.
    snapshots: Option<SnapshotBuilder>,
}

/// What an adopted commit asks the driver to do.
pub struct Effects {
    /// To publish.
    pub snapshot: Snapshot,
    /// The probes to run, if they changed.
    pub probe_plan: Option<Vec<ProbeTarget>>,
}

/// What this node tells the fleet in an exchange of health: its verdicts
/// the fleet has not been told yet, and the stamp to read the others'
/// changed after.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthExchange {
    pub node: String,
    pub verdicts: Vec<NodeVerdict>,
    pub after: u64,
}

/// What a probe result asks of the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterProbe {
    Nothing,
    /// A replica went up or down: say so, and commit (republish); on a
    /// shared store, tell the fleet too.
    Flipped,
    /// This node's probes turned but the fleet's verdict is served: tell
    /// the fleet, and serve its new verdict.
    TellFleet,
    /// The time until a replica could flip changed, for a service whose
    /// TTLs follow it: commit (republish).
    Republish,
}

impl Plane {
    /// A plane over `state` and the `measurements` kept, that has
    /// published nothing yet; the measurements fresh at `now` are used.
    pub fn new(
        state: State,
        measurements: Vec<Measurement>,
        sources: DataSources,
        snapshots: SnapshotBuilder,
        settings: PlaneSettings,
        now: u64,
    ) -> Plane {
        let mut plane = Plane {
            state: Arc::new(state),
            sources,
            snapshots,
            health: HealthBook::default(),
            load: LoadControl::new(settings.load),
            probe_plan: Vec::new(),
            measurements: MeasurementBook::new(),
            latency_max_age_seconds: settings.latency_max_age_seconds,
            fleet: None,
            key_steps: KeySteps::default(),
        };
        plane.keep_measurements(measurements, now);
        plane
    }

    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    pub fn sources(&self) -> &DataSources {
        &self.sources
    }

    /// The data snapshots are built with, for the driver to refresh
    /// (measurements, BGP tables, reloaded files); used from the next commit.
    pub fn sources_mut(&mut self) -> &mut DataSources {
        &mut self.sources
    }

    pub fn snapshots(&self) -> &SnapshotBuilder {
        &self.snapshots
    }

    /// Validates `next` at `now` (over newly loaded zones, if given) by
    /// building its snapshot; nothing changes yet.
    pub fn prepare(&self, next: State, snapshots: Option<SnapshotBuilder>, now: u64) -> Result<Prepared, ControlError> {
        let health = self.health.planned(&next, now);
        let sources = DataSources { probed: Arc::new(health.probed()), ..self.sources.clone() };
        let builder = snapshots.as_ref().unwrap_or(&self.snapshots);
        let built = builder.build(&next.declared(), &sources)?;
        Ok(Prepared { next, health, sources, built, snapshots })
    }

    /// Makes `prepared` (its changes persisted) the current state at `now`.
    pub fn adopt(&mut self, prepared: Prepared, now: u64) -> Effects {
        let Prepared { next, health, sources, built, snapshots } = prepared;
        if let Some(snapshots) = snapshots {
            self.snapshots = snapshots;
        }
        let snapshot = self.snapshots.keep(built);
        self.state = Arc::new(next);
        self.sources = sources;
        let mut targets = health.targets();
        targets.extend(load_probe_targets(&self.state));
        let probe_plan = (self.probe_plan != targets).then(|| targets.clone());
        self.probe_plan = targets;
        self.health = health;
        self.load.schedule(&self.state, now);
        Effects { snapshot, probe_plan }
    }

    /// Takes a probe result arrived `now`.
    pub fn record_probe(&mut self, result: &ProbeResult, now: u64) -> Result<AfterProbe, ControlError> {
        let (service, replica) = (&result.target.service, &result.target.replica);
        if result.target.purpose == Purpose::Load {
            if let Ok(Some(load)) = &result.outcome {
                self.record_load(service, replica, *load, now)?;
            }
            return Ok(AfterProbe::Nothing);
        }
        Ok(match self.health.record(result, now) {
            Effect::Flipped => AfterProbe::Flipped,
            Effect::Turned => AfterProbe::TellFleet,
            Effect::Streak if self.state.service(service).is_some_and(|spec| spec.shrink_ttl) => AfterProbe::Republish,
            Effect::Streak | Effect::Unchanged | Effect::Stale => AfterProbe::Nothing,
        })
    }

    /// Every probed replica's state.
    pub fn health_report(&self) -> Vec<ReplicaHealth> {
        self.health.report()
    }

    /// Probes at `addresses` instead of the declared ones; for a plane
    /// that has planned no probes yet (its first commit plans them).
    pub fn set_probe_addresses(&mut self, addresses: ProbeAddresses) {
        self.health = HealthBook::with_probe_addresses(addresses);
    }

    /// Shares health with a fleet from now on, as `fleet` schedules it.
    pub fn join_fleet(&mut self, fleet: FleetHealth) {
        self.fleet = Some(fleet);
    }

    pub fn in_fleet(&self) -> bool {
        self.fleet.is_some()
    }

    /// Takes a reloaded quorum and report interval, if in a fleet.
    pub fn follow_fleet(&mut self, quorum: Quorum, report_interval_ms: u64) {
        if let Some(fleet) = &mut self.fleet {
            fleet.follow(quorum, report_interval_ms);
        }
    }

    /// Whether this node's health report to the fleet is due at `now`.
    pub fn health_report_due(&self, now: u64) -> bool {
        self.fleet.as_ref().is_some_and(|fleet| fleet.next_report() <= now)
    }

    /// Starts an exchange of health with the fleet at `now` (none outside
    /// a fleet): what to tell it. The next report is due an interval on.
    pub fn exchange_health(&mut self, now: u64) -> Option<HealthExchange> {
        let fleet = self.fleet.as_mut()?;
        let after = fleet.exchange(now);
        let node = fleet.quorum().node.clone();
        let verdicts = self.health.unpublished(&node);
        Some(HealthExchange { node, verdicts, after })
    }

    /// Ends `exchange` with what the store answered (`None`: it could not
    /// be reached): serves the fleet's verdicts, or holds those served
    /// while the fleet's last ones are fresh, or serves this node's own
    /// view. Returns the replicas whose served state changed: the driver
    /// commits (republishes) if any did.
    pub fn health_exchanged(&mut self, exchange: HealthExchange, answer: Option<FleetReports>, now: u64) -> Vec<Flip> {
        let Some(fleet) = &mut self.fleet else {
            return Vec::new();
        };
        if answer.is_some() {
            self.health.mark_published(&exchange.verdicts);
        }
        let quorum = fleet.quorum().clone();
        match fleet.exchanged(answer, now) {
            Serve::Fleet(known) => self.health.weigh(&quorum, known, now),
            Serve::Same => Vec::new(),
            Serve::Own => self.health.fleet_lost(),
        }
    }

    /// Folds a load report for `replica` of `service`, arrived `now`, into
    /// its smoothed value.
    pub fn record_load(&mut self, service: &str, replica: &str, value: f64, now: u64) -> Result<(), ControlError> {
        check_load(&self.state, service, replica, value)?;
        self.load.record(service, replica, value, now);
        Ok(())
    }

    /// When the plane must next be woken (Unix ms): for a measurement to
    /// expire, a load-control round, a health report to the fleet or a
    /// key's step.
    pub fn next_wakeup(&self) -> Option<u64> {
        let expiry = self.sources.latencies.next_expiry.map(|seconds| seconds * 1000);
        let report = self.fleet.as_ref().map(FleetHealth::next_report);
        let key_step = self.key_steps.next(self.snapshots.key_steps()).map(|step| step * 1000);
        expiry.into_iter().chain(self.load.next_round()).chain(report).chain(key_step).min()
    }

    /// The key step due at `now` (Unix seconds), if any, not tried yet:
    /// the driver reloads the zones, to be signed for the keys' new states.
    /// It is not tried again, should that reload fail.
    pub fn key_step_due(&mut self, now: u64) -> Option<u64> {
        self.key_steps.due(self.snapshots.key_steps(), now)
    }

    /// Checks a batch of latency measurements arrived `now` against the
    /// declared data centers (the first bad one is named and the whole
    /// batch refused). Returns them to persist, with the time (Unix
    /// seconds) before which kept ones are too old to keep.
    pub fn check_measurements(&self, specs: &[MeasurementSpec], now: u64) -> Result<(Vec<Measurement>, u64), ControlError> {
        let batch = check_measurements(specs, &self.state.datacenters, now / 1000).map_err(ControlError::Invalid)?;
        Ok((batch, self.oldest_fresh(now)))
    }

    /// Serves from a checked (and persisted) batch from the next commit on:
    /// the newest measurement of each subnet and data center wins.
    pub fn keep_measurements(&mut self, batch: Vec<Measurement>, now: u64) {
        for Measurement { subnet, datacenter, measured } in batch {
            let kept = self.measurements.entry(subnet).or_default().entry(datacenter).or_insert(measured);
            if measured.at >= kept.at {
                *kept = measured;
            }
        }
        self.refresh_latencies(now);
    }

    /// Rebuilds the latency table from the measurements still fresh at
    /// `now`, and forgets the others.
    pub fn refresh_latencies(&mut self, now: u64) {
        let oldest = self.oldest_fresh(now);
        for by_datacenter in self.measurements.values_mut() {
            by_datacenter.retain(|_, measured| measured.at >= oldest);
        }
        self.measurements.retain(|_, by_datacenter| !by_datacenter.is_empty());
        let latencies = self.sources.latencies.refreshed(&self.measurements, now / 1000, self.latency_max_age_seconds);
        self.sources.latencies = Arc::new(latencies);
    }

    /// Measurements measured before this (Unix seconds) are too old at
    /// `now`.
    fn oldest_fresh(&self, now: u64) -> u64 {
        (now / 1000).saturating_sub(self.latency_max_age_seconds)
    }

    /// Whether a measurement in use has grown too old at `now`.
    pub fn measurements_expired(&self, now: u64) -> bool {
        self.sources.latencies.next_expiry.is_some_and(|seconds| seconds * 1000 <= now)
    }

    /// The services whose load-control round is due at `now`.
    pub fn due_rounds(&self, now: u64) -> Vec<String> {
        self.load.due(now)
    }

    /// Runs `service`'s load-control round at `now`; returns the change
    /// that installs what it computed, if that differs from the installed.
    pub fn run_round(&mut self, service: &str, now: u64) -> Option<Change> {
        self.load.run_round(&self.state, service, now)
    }

    /// Smoothed loads and the last round of each load-controlled service.
    pub fn load_status(&self) -> LoadStatus {
        self.load.status()
    }

    /// What the last round for `service` did, for logs.
    pub fn last_round(&self, service: &str) -> Option<&crate::load::LoadRun> {
        self.load.last_run(service)
    }
}

#[cfg(test)]
mod tests {
    use pharos_answer::Settings;
    use pharos_route::Health;
    use pharos_zone::parse_zone_text;

    use super::*;
    use pharos_model::spec::service_name;
    use pharos_model::spec::{DataCenterSpec, ServiceSpec};

    const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\n";

    /// A plane serving example.test, with no services yet.
    fn plane() -> Plane {
        let zone = parse_zone_text("example.test", ZONE, "example.test.zone").unwrap();
        let snapshots = SnapshotBuilder::new(vec![zone], Settings::default());
        let settings = PlaneSettings { load: LoadSettings { max_age_seconds: 30, smoothing: 1.0 }, latency_max_age_seconds: 60 };
        Plane::new(State::default(), Vec::new(), DataSources::default(), snapshots, settings, 0)
    }

    fn service(extra: serde_json::Value) -> ServiceSpec {
        let mut json = serde_json::json!({
            "name": "www.example.test", "replica": [{ "id": "a", "address": "192.0.2.1" }, { "id": "b", "address": "192.0.2.2" }],
        });
        json.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(json).unwrap()
    }

    /// Commits `changes` at `now`, as the driver does (without a store).
    fn commit(plane: &mut Plane, changes: &[Change], now: u64) -> Effects {
        let prepared = plane.prepare(plane.state().with(changes), None, now).unwrap();
        plane.adopt(prepared, now)
    }

    fn health_of(effects: &Effects, replica: usize) -> Health {
        let name = service_name("www.example.test").unwrap();
        effects.snapshot.routes.service(&name).unwrap().replicas[replica].health
    }

    #[test]
    fn a_refused_commit_changes_nothing() {
        let mut plane = plane();
        commit(&mut plane, &[Change::PutService(service(serde_json::json!({})))], 0);
        let outside = ServiceSpec { name: "www.elsewhere.test".into(), ..service(serde_json::json!({})) };
        let refused = plane.prepare(plane.state().with(&[Change::PutService(outside)]), None, 0);
        let Err(error) = refused else { panic!("a service outside the zones is refused") };
        assert_eq!(error.to_string(), "service[www.elsewhere.test.].name: not inside any served zone");
        assert_eq!(plane.state().services.len(), 1);
    }

    #[test]
    fn probe_results_flip_a_replica_with_hysteresis() {
        let mut plane = plane();
        let probed = service(
            serde_json::json!({ "health": { "kind": "tcp", "port": 80, "interval_ms": 1000, "timeout_ms": 500, "rise": 2, "fall": 2 } }),
        );
        let effects = commit(&mut plane, &[Change::PutService(probed)], 0);
        let targets = effects.probe_plan.expect("a new plan: one probe per replica");
        assert_eq!(targets.len(), 2);
        let failed = ProbeResult { target: targets[0].clone(), outcome: Err("connection refused".into()) };
        assert_eq!(plane.record_probe(&failed, 1000).unwrap(), AfterProbe::Nothing, "one failure is not enough");
        assert_eq!(plane.record_probe(&failed, 2000).unwrap(), AfterProbe::Flipped);
        let effects = commit(&mut plane, &[], 2000);
        assert!(effects.probe_plan.is_none(), "the same probes");
        assert_eq!((health_of(&effects, 0), health_of(&effects, 1)), (Health::Down, Health::Up));
        assert!(plane.health_report()[0].since == 2 && !plane.health_report()[0].up, "down since 2 s");
    }

    #[test]
    fn load_rounds_come_due_at_their_interval_and_install_what_they_compute() {
        let mut plane = plane();
        let controlled = service(serde_json::json!({
            "policy": "region-probabilities",
            "load_control": { "algorithm": "I", "threshold": 0.5, "interval_ms": 1000, "ranks": { "default": { "a": 1, "b": 2 } } },
        }));
        commit(&mut plane, &[Change::PutService(controlled)], 0);
        assert_eq!(plane.next_wakeup(), Some(1000));
        assert!(plane.due_rounds(999).is_empty());
        plane.record_load("www.example.test", "a", 0.9, 500).unwrap();
        assert!(plane.record_load("www.example.test", "c", 0.1, 500).is_err(), "no such replica");
        assert_eq!(plane.due_rounds(1000), ["www.example.test"]);
        let Some(Change::PutService(installed)) = plane.run_round("www.example.test", 1000) else { panic!("a change to install") };
        let default = &installed.probabilities["default"];
        assert_eq!((default["a"].probability, default["b"].probability), (0.0, 1.0), "a is overloaded");
        assert_eq!(plane.next_wakeup(), Some(2000), "the next round, one interval on");
        commit(&mut plane, &[Change::PutService(installed)], 1000);
        assert_eq!(plane.run_round("www.example.test", 2000), None, "nothing new to install");
    }

    #[test]
    fn measurements_are_used_until_they_grow_too_old() {
        let mut plane = plane();
        let fra = DataCenterSpec { id: "fra".into(), latitude: 50.1, longitude: 8.7, asn: None };
        commit(&mut plane, &[Change::PutDataCenter(fra)], 0);
        let measured = |datacenter: &str| MeasurementSpec {
            subnet: "10.0.0.0/8".into(),
            datacenter: datacenter.into(),
            rtt_ms: 5.0,
            measured_at: None,
        };
        let Err(refused) = plane.check_measurements(&[measured("fra"), measured("sin")], 10_000) else { panic!("sin is not declared") };
        assert_eq!(refused.to_string(), "measurements[1].datacenter: no data center \"sin\" is declared");
        let (batch, older_than) = plane.check_measurements(&[measured("fra")], 100_000).unwrap();
        assert_eq!(older_than, 40, "60 s before 100 s");
        plane.keep_measurements(batch, 100_000);
        assert_eq!(plane.sources().latencies.count, 1);
        let expiry = plane.next_wakeup().expect("a measurement to expire");
        assert!(!plane.measurements_expired(expiry - 1) && plane.measurements_expired(expiry));
        plane.refresh_latencies(expiry);
        assert_eq!((plane.sources().latencies.count, plane.next_wakeup()), (0, None));
    }

    /// A plane serving www.example.test, its replica a probed (one result
    /// flips it) and b not, as node n1 of a fleet whose verdicts go stale
    /// after 1 s, reporting every 200 ms from `now`.
    fn fleet_plane(now: u64) -> Plane {
        let mut plane = plane();
        let quorum = Quorum { node: "n1".into(), stale_after_ms: 1000, down_share: crate::quorum::MAJORITY };
        plane.join_fleet(FleetHealth::new(quorum, 200, now));
        let probed = service(serde_json::json!({ "health": { "kind": "tcp", "port": 80, "interval_ms": 100, "rise": 1, "fall": 1 } }));
        let mut probed = probed;
        probed.replicas[1].enabled = false;
        commit(&mut plane, &[Change::PutService(probed)], now);
        plane
    }

    /// What n2 and n3 report at `at`: replica a up.
    fn others_see_a_up(at: u64, stamp: u64) -> FleetReports {
        let up = |node: &str| NodeVerdict {
            node: node.into(),
            service: "www.example.test".into(),
            replica: "a".into(),
            up: true,
            reason: "probe passed".into(),
            since: 0,
        };
        FleetReports { reported: [("n2".to_owned(), at), ("n3".to_owned(), at)].into(), verdicts: vec![up("n2"), up("n3")], stamp }
    }

    fn served_up(plane: &Plane) -> bool {
        plane.health_report()[0].up
    }

    #[test]
    fn a_node_reports_its_health_when_due_and_when_its_probes_turn() {
        let mut plane = fleet_plane(0);
        assert!(plane.health_report_due(0) && plane.next_wakeup() == Some(0), "the first report at once");
        let told = plane.exchange_health(0).expect("a node of a fleet");
        assert_eq!((told.node.as_str(), told.verdicts.len(), told.after), ("n1", 1, 0), "{told:?}");
        assert_eq!(plane.health_exchanged(told, Some(others_see_a_up(0, 1)), 0), [], "up everywhere: nothing flips");
        assert_eq!(plane.next_wakeup(), Some(200));
        assert!(!plane.health_report_due(199) && plane.health_report_due(200));
        let alive = plane.exchange_health(200).unwrap();
        assert!(alive.verdicts.is_empty() && alive.after == 1, "told already: only that it is alive, reading after stamp 1");
        let target = plane.probe_plan[0].clone();
        let failed = ProbeResult { target, outcome: Err("connection refused".into()) };
        assert_eq!(plane.record_probe(&failed, 250).unwrap(), AfterProbe::TellFleet, "the fleet's verdict is served");
        let turned = plane.exchange_health(250).unwrap();
        assert_eq!((turned.verdicts.len(), turned.verdicts[0].up), (1, false));
        assert_eq!(plane.next_wakeup(), Some(450), "an interval after the turn was told");
        assert_eq!(plane.health_exchanged(turned, Some(others_see_a_up(250, 2)), 250), [], "two of three see it up");
        assert!(served_up(&plane));
        assert!(plane.exchange_health(300).unwrap().verdicts.is_empty(), "the turn was told");
    }

    #[test]
    fn without_the_store_a_node_holds_the_fleet_s_verdicts_for_the_staleness_window_then_serves_its_own() {
        let mut plane = fleet_plane(0);
        let target = plane.probe_plan[0].clone();
        let told = plane.exchange_health(0).unwrap();
        plane.health_exchanged(told, Some(others_see_a_up(0, 1)), 0);
        plane.record_probe(&ProbeResult { target, outcome: Err("connection refused".into()) }, 100).unwrap();
        let turned = plane.exchange_health(100).unwrap();
        assert_eq!(plane.health_exchanged(turned, Some(others_see_a_up(100, 2)), 100), []);
        for now in [300, 500, 1099] {
            let unheard = plane.exchange_health(now).unwrap();
            assert_eq!(unheard.verdicts.len(), 0, "told at 100");
            assert_eq!(plane.health_exchanged(unheard, None, now), [], "held at {now}");
            assert!(served_up(&plane), "the fleet's verdict still, at {now}");
        }
        let lost = plane.exchange_health(1100).unwrap();
        let flips = plane.health_exchanged(lost, None, 1100);
        assert_eq!((flips.len(), flips[0].up), (1, false), "1 s after the last exchange, its own probes rule: {flips:?}");
        assert!(!served_up(&plane));
        let back = plane.exchange_health(1300).unwrap();
        let flips = plane.health_exchanged(back, Some(others_see_a_up(1300, 3)), 1300);
        assert_eq!((flips.len(), flips[0].up), (1, true), "reached again: the fleet's verdict");
    }

    #[test]
    fn a_node_alone_exchanges_no_health() {
        let mut plane = plane();
        assert!(!plane.in_fleet() && !plane.health_report_due(0));
        assert_eq!(plane.exchange_health(0), None);
        assert_eq!(plane.next_wakeup(), None);
    }

    #[test]
    fn a_signed_zone_is_signed_again_when_a_key_changes_state_and_a_failed_step_is_not_retried() {
        use pharos_dnssec::{Algorithm, KeyTimes, Role, Signer, Window, ZoneKey, ZoneKeys};
        let random = ring::rand::SystemRandom::new();
        let key = |times| ZoneKey::generate(Algorithm::EcdsaP256Sha256, Role::Csk, &random).unwrap().with_times(times);
        let retiring = KeyTimes { published: 1000, active: Some(1000), retired: Some(2000), removed: Some(3000) };
        let next = KeyTimes { published: 1000, active: Some(2000), retired: None, removed: None };
        let mut zone = parse_zone_text("example.test", ZONE, "example.test.zone").unwrap();
        let keys = ZoneKeys { keys: vec![key(retiring), key(next)] };
        zone.signer = Some(Arc::new(Signer::new(&zone.origin, keys, Window::from_now(1500, 86_400), 1500).unwrap()));
        let settings = PlaneSettings { load: LoadSettings { max_age_seconds: 30, smoothing: 1.0 }, latency_max_age_seconds: 60 };
        let snapshots = SnapshotBuilder::new(vec![zone], Settings::default());
        let mut plane = Plane::new(State::default(), Vec::new(), DataSources::default(), snapshots, settings, 1_500_000);
        assert_eq!(plane.next_wakeup(), Some(2_000_000), "the second key's activation");
        assert_eq!(plane.key_step_due(1_999_999), None);
        assert_eq!(plane.key_step_due(2_000_000), Some(2000));
        // The reload for it failed: the signer is the same, its step tried.
        assert_eq!((plane.next_wakeup(), plane.key_step_due(2_500_000)), (None, None));
    }
}
