//! The control plane's record of health probes: which replicas are
//! probed, how, and what the probes said, turned into up and down with
//! hysteresis; on a shared store, also what the fleet's other nodes said,
//! weighed by [`crate::quorum`]. The probing itself (sockets, timers) is
//! the server's; the time is passed in (Unix milliseconds).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use pharos_model::probe::ProbeKind;

use crate::probe::{Hysteresis, ProbeTarget, Probed, ProbedHealth, Purpose};
use pharos_model::fleet::NodeVerdict;
pub use pharos_model::fleet::ReplicaHealth;

use crate::quorum::{FleetVerdicts, FleetView, Quorum};
use pharos_model::State;

/// Addresses this node probes replicas at instead of the declared ones, by
/// (service, replica): a node that reaches a replica by another path.
pub type ProbeAddresses = HashMap<(String, String), IpAddr>;

/// One probe's result, as a prober reports it.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    pub target: ProbeTarget,
    /// `Ok` if the replica served (with the number it reported, for a
    /// load probe); else why not, in words.
    pub outcome: Result<Option<f64>, String>,
}

/// What a result did to its replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The result is for a probe no longer planned (deleted, changed).
    Stale,
    Unchanged,
    /// The state held, but the streak against it moved: the time until it
    /// could flip changed.
    Streak,
    /// This node's probes turned, but the state served is the fleet's
    /// verdict: the fleet is to be told.
    Turned,
    /// The replica went up or down (as served).
    Flipped,
}

/// A replica's probe and what it has said.
#[derive(Debug, Clone)]
struct Entry {
    target: ProbeTarget,
    state: Hysteresis,
    /// The last result, in words.
    last: Arc<str>,
    /// When the state last changed (Unix seconds).
    since: u64,
    /// Whether the fleet has been told the current state.
    published: bool,
    /// The fleet's verdict, while the fleet's reports are fresh.
    fleet: Option<FleetView>,
}

/// Every planned probe, by (service, replica).
#[derive(Debug, Clone, Default)]
pub struct HealthBook {
    entries: HashMap<(String, String), Entry>,
    probe_addresses: Arc<ProbeAddresses>,
}

/// A replica whose served state changed with the fleet's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flip {
    pub service: String,
    pub replica: String,
    pub up: bool,
    pub why: String,
}

impl HealthBook {
    /// An empty book whose probes go to `addresses` where they name one.
    pub fn with_probe_addresses(addresses: ProbeAddresses) -> HealthBook {
        HealthBook { entries: HashMap::new(), probe_addresses: Arc::new(addresses) }
    }

    /// The book for `state`: a probe for every enabled replica of every
    /// service with a health check. A probe that did not change keeps what
    /// it learned; a new or changed one starts afresh, `now`.
    pub fn planned(&self, state: &State, now: u64) -> HealthBook {
        let mut entries = HashMap::new();
        for service in &state.services {
            let Some(spec) = &service.health else { continue };
            for replica in service.replicas.iter().filter(|replica| replica.enabled) {
                let key = (service.name.clone(), replica.id.clone());
                let declared = replica.probe_address.unwrap_or(replica.address);
                let address = self.probe_addresses.get(&key).copied().unwrap_or(declared);
                let target = ProbeTarget {
                    service: service.name.clone(),
                    replica: replica.id.clone(),
                    address,
                    spec: spec.clone(),
                    purpose: Purpose::Health,
                };
                let entry = match self.entries.get(&key) {
                    Some(known) if known.target == target => known.clone(),
                    _ => Entry::fresh(target, now),
                };
                entries.insert(key, entry);
            }
        }
        HealthBook { entries, probe_addresses: self.probe_addresses.clone() }
    }

    /// Every planned probe.
    pub fn targets(&self) -> Vec<ProbeTarget> {
        let mut targets: Vec<ProbeTarget> = self.entries.values().map(|entry| entry.target.clone()).collect();
        targets.sort_by(|a, b| (&a.service, &a.replica).cmp(&(&b.service, &b.replica)));
        targets
    }

    /// What the probes say, for building a snapshot.
    pub fn probed(&self) -> ProbedHealth {
        self.entries.iter().map(|(key, entry)| (key.clone(), entry.probed())).collect()
    }

    /// Takes one result, arrived `now`.
    pub fn record(&mut self, result: &ProbeResult, now: u64) -> Effect {
        let key = (result.target.service.clone(), result.target.replica.clone());
        let Some(entry) = self.entries.get_mut(&key).filter(|entry| entry.target == result.target) else { return Effect::Stale };
        let streak_before = entry.state.streak;
        let served_before = entry.served().0;
        let flipped = entry.state.record(result.outcome.is_ok());
        entry.last = match &result.outcome {
            Ok(_) => format!("probe passed ({})", describe(&entry.target)).into(),
            Err(why) => format!("probe failed ({}): {why}", describe(&entry.target)).into(),
        };
        if flipped {
            entry.since = seconds(now);
            entry.published = false;
            return if entry.served().0 != served_before { Effect::Flipped } else { Effect::Turned };
        }
        if entry.state.streak != streak_before { Effect::Streak } else { Effect::Unchanged }
    }

    /// Every replica's probe state, by service and replica.
    pub fn report(&self) -> Vec<ReplicaHealth> {
        let mut report: Vec<ReplicaHealth> = self
            .entries
            .values()
            .map(|entry| ReplicaHealth {
                service: entry.target.service.clone(),
                replica: entry.target.replica.clone(),
                probe: describe(&entry.target),
                up: entry.served().0,
                streak: entry.state.streak,
                last: entry.last.to_string(),
                since: entry.since,
                fleet: entry.fleet.clone(),
            })
            .collect();
        report.sort_by(|a, b| (&a.service, &a.replica).cmp(&(&b.service, &b.replica)));
        report
    }

    /// This node's verdicts the fleet has not been told yet, as `node`.
    pub fn unpublished(&self, node: &str) -> Vec<NodeVerdict> {
        let unpublished = self.entries.iter().filter(|(_, entry)| !entry.published);
        unpublished
            .map(|((service, replica), entry)| NodeVerdict {
                node: node.to_owned(),
                service: service.clone(),
                replica: replica.clone(),
                up: entry.state.up,
                reason: entry.last.to_string(),
                since: entry.since * 1000,
            })
            .collect()
    }

    /// Notes that the fleet has been told `verdicts` (those still current).
    pub fn mark_published(&mut self, verdicts: &[NodeVerdict]) {
        for verdict in verdicts {
            let key = (verdict.service.clone(), verdict.replica.clone());
            let current = |entry: &&mut Entry| entry.state.up == verdict.up && entry.since * 1000 == verdict.since;
            if let Some(entry) = self.entries.get_mut(&key).filter(current) {
                entry.published = true;
            }
        }
    }

    /// Serves the fleet's verdicts, weighed from `reports` at `now`; returns
    /// the replicas whose served state changed.
    pub fn weigh(&mut self, quorum: &Quorum, fleet: &FleetVerdicts, now: u64) -> Vec<Flip> {
        self.serve(|(service, replica), entry| Some(quorum.weigh(service, replica, (entry.state.up, &entry.last), fleet, now)))
    }

    /// Serves this node's own view again (the fleet's reports are stale);
    /// returns the replicas whose served state changed.
    pub fn fleet_lost(&mut self) -> Vec<Flip> {
        self.serve(|_, _| None)
    }

    fn serve(&mut self, mut fleet_view: impl FnMut(&(String, String), &Entry) -> Option<FleetView>) -> Vec<Flip> {
        let mut flips = Vec::new();
        for (key, entry) in &mut self.entries {
            let before = entry.served().0;
            entry.fleet = fleet_view(key, entry);
            let (up, why) = entry.served();
            if up != before {
                flips.push(Flip { service: key.0.clone(), replica: key.1.clone(), up, why: why.to_string() });
            }
        }
        flips.sort_by(|a, b| (&a.service, &a.replica).cmp(&(&b.service, &b.replica)));
        flips
    }
}

impl Entry {
    fn fresh(target: ProbeTarget, now: u64) -> Entry {
        let state = Hysteresis::new(&target.spec);
        let last = if state.up { "not probed yet (counted up)" } else { "not probed yet (counted down until it passes)" };
        Entry { target, state, last: last.into(), since: seconds(now), published: false, fleet: None }
    }

    /// The state served, and why: the fleet's verdict if there is one.
    fn served(&self) -> (bool, Arc<str>) {
        match &self.fleet {
            Some(fleet) => (fleet.up, fleet.why.as_str().into()),
            None => (self.state.up, self.last.clone()),
        }
    }

    fn probed(&self) -> Probed {
        let interval_seconds = self.target.spec.interval_ms.div_ceil(1000) as u32;
        let (up, reason) = self.served();
        Probed { up, reason, stable_for: self.state.probes_to_flip() * interval_seconds }
    }
}

/// Unix seconds of `now` in Unix milliseconds (the API shows seconds).
fn seconds(now: u64) -> u64 {
    now / 1000
}

/// "HTTP GET 10.0.0.1:80/health", for logs and explanations.
pub fn describe(target: &ProbeTarget) -> String {
    let at = std::net::SocketAddr::new(target.address, target.spec.port());
    match target.spec.kind {
        ProbeKind::Tcp => format!("TCP connect {at}"),
        ProbeKind::Http => format!("HTTP GET {at}{}", target.spec.path),
        ProbeKind::Https => format!("HTTPS GET {at}{}", target.spec.path),
        ProbeKind::Dns => format!("DNS {} A at {at}", target.spec.name.as_deref().unwrap_or("?")),
    }
}

#[cfg(test)]
mod tests {
    use pharos_model::fleet::FleetReports;
    use pharos_model::spec::{ReplicaSpec, ServiceSpec};

    use super::*;

    fn state(interval_ms: u64, replicas: &[&str]) -> State {
        let probe =
            serde_json::from_value(serde_json::json!({ "kind": "tcp", "port": 80, "interval_ms": interval_ms, "rise": 2, "fall": 2 }));
        let replicas = replicas.iter().map(|id| ReplicaSpec::new(*id, "192.0.2.1".parse().unwrap())).collect();
        State {
            services: vec![Arc::new(ServiceSpec { health: Some(probe.unwrap()), ..ServiceSpec::new("s.test", "static", replicas) })],
            ..State::default()
        }
    }

    fn result(book: &HealthBook, replica: &str, outcome: Result<Option<f64>, String>) -> ProbeResult {
        let target = book.targets().into_iter().find(|target| target.replica == replica).unwrap();
        ProbeResult { target, outcome }
    }

    #[test]
    fn results_flip_replicas_with_hysteresis_and_stale_ones_are_ignored() {
        let mut book = HealthBook::default().planned(&state(1000, &["a", "b"]), 0);
        let refused = || Err("connection refused".to_string());
        assert_eq!(book.record(&result(&book, "a", refused()), 0), Effect::Streak);
        assert_eq!(book.probed()[&("s.test".into(), "a".into())].stable_for, 1, "one more failure flips it");
        assert_eq!(book.record(&result(&book, "a", refused()), 0), Effect::Flipped);
        let probed = book.probed();
        let a = &probed[&("s.test".into(), "a".into())];
        assert!(!a.up && a.reason.contains("TCP connect 192.0.2.1:80") && a.reason.contains("connection refused"), "{a:?}");
        let old = result(&book, "b", Ok(None));
        // Replanning with a changed probe starts it afresh; results of the old one no longer count.
        let replanned = book.planned(&state(2000, &["a"]), 0);
        assert_eq!(replanned.targets().len(), 1);
        let mut replanned = replanned;
        assert_eq!(replanned.record(&old, 0), Effect::Stale);
        assert!(replanned.probed()[&("s.test".into(), "a".into())].up, "a changed probe starts afresh (counted up)");
        // An unchanged plan keeps what was learned.
        assert!(!book.planned(&state(1000, &["a", "b"]), 0).probed()[&("s.test".into(), "a".into())].up);
    }

    #[test]
    fn the_fleet_is_told_each_transition_and_its_verdict_is_served() {
        let here: ProbeAddresses = [(("s.test".to_owned(), "a".to_owned()), "198.51.100.7".parse().unwrap())].into();
        let mut book = HealthBook::with_probe_addresses(here).planned(&state(1000, &["a", "b"]), 3000);
        assert_eq!(book.targets()[0].address, "198.51.100.7".parse::<std::net::IpAddr>().unwrap(), "this node's own path to a");
        let fresh = book.unpublished("n1");
        assert_eq!(fresh.len(), 2, "new probes are told too");
        assert!(fresh.iter().all(|verdict| verdict.up && verdict.since == 3000 && verdict.node == "n1"), "{fresh:?}");
        book.mark_published(&fresh);
        assert!(book.unpublished("n1").is_empty());
        let refused = || Err("connection refused".to_string());
        book.record(&result(&book, "a", refused()), 4000);
        assert_eq!(book.record(&result(&book, "a", refused()), 5000), Effect::Flipped);
        let told = book.unpublished("n1");
        assert_eq!((told.len(), told[0].up, told[0].since), (1, false, 5000), "{told:?}");
        let quorum = Quorum { node: "n1".into(), stale_after_ms: 5000, down_share: crate::quorum::MAJORITY };
        let up_elsewhere = |replica: &str, node: &str| NodeVerdict {
            node: node.into(),
            service: "s.test".into(),
            replica: replica.into(),
            up: true,
            reason: "probe passed".into(),
            since: 0,
        };
        let mut fleet = FleetVerdicts::default();
        fleet.take(FleetReports {
            reported: [("n2".to_owned(), 5000), ("n3".to_owned(), 5000)].into(),
            verdicts: vec![up_elsewhere("a", "n2"), up_elsewhere("a", "n3")],
            stamp: 1,
        });
        let flips = book.weigh(&quorum, &fleet, 5000);
        assert_eq!(flips, [Flip { service: "s.test".into(), replica: "a".into(), up: true, why: flips[0].why.clone() }]);
        let a = &book.report()[0];
        assert!(a.up && a.fleet.as_ref().unwrap().nodes_down == ["n1"], "served up: {a:?}");
        assert!(!book.probed()[&("s.test".into(), "b".into())].reason.contains("n2"), "n2 said nothing of b");
        let passed = result(&book, "a", Ok(None));
        assert_eq!(book.record(&passed, 6000), Effect::Streak);
        assert_eq!(book.record(&passed, 7000), Effect::Turned, "up here too, and the fleet's verdict was up already");
        assert_eq!(book.unpublished("n1")[0].since, 7000);
        book.record(&result(&book, "a", refused()), 8000);
        book.record(&result(&book, "a", refused()), 9000);
        let lost = book.fleet_lost();
        assert_eq!((lost.len(), lost[0].up), (1, false), "alone again, its own probes rule");
    }
}
