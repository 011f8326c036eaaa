//! What the control thread has done, counted as it commits, publishes,
//! probes and notifies: metrics of `prometheus-client`, registered into
//! each scrape by `crate::api::metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// The label of a publication's phase.
type PhaseLabels = [(&'static str, &'static str); 1];

/// Labels of a replica's metrics.
pub(crate) type ReplicaLabels = [(&'static str, String); 2];

/// What the control thread counts as it commits, publishes and probes.
#[derive(Debug)]
pub struct ControlActivity {
    commits: Counter,
    commit_batch: Histogram,
    commit_seconds: Histogram,
    publish_seconds: Histogram,
    publish_phase_seconds: Family<PhaseLabels, Histogram, fn() -> Histogram>,
    health_transitions: Family<ReplicaLabels, Counter>,
    load_rounds: Family<[(&'static str, String); 1], Counter>,
    catch_up_reads: Counter,
    notifies: Family<[(&'static str, String); 2], Counter>,
    auth_failures: Family<[(&'static str, &'static str); 1], Counter>,
    auth_throttled: Counter,
}

impl Default for ControlActivity {
    fn default() -> ControlActivity {
        ControlActivity {
            commits: Counter::default(),
            // Up to the group commit's cap of 256 edits.
            commit_batch: Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
            commit_seconds: Histogram::new(SECONDS_BOUNDS),
            publish_seconds: Histogram::new(SECONDS_BOUNDS),
            publish_phase_seconds: Family::new_with_constructor(|| Histogram::new(SECONDS_BOUNDS)),
            health_transitions: Family::default(),
            load_rounds: Family::default(),
            catch_up_reads: Counter::default(),
            notifies: Family::default(),
            auth_failures: Family::default(),
            auth_throttled: Counter::default(),
        }
    }
}

/// From a tenth of a millisecond to ten seconds, for the control plane's work.
const SECONDS_BOUNDS: [f64; 10] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 10.0];

impl ControlActivity {
    /// A group commit of `edits` edits that took `seconds`.
    pub fn committed(&self, edits: usize, seconds: f64) {
        self.commits.inc();
        self.commit_batch.observe(edits as f64);
        self.commit_seconds.observe(seconds);
    }

    /// A snapshot built and published in `seconds`.
    pub fn published(&self, seconds: f64) {
        self.publish_seconds.observe(seconds);
    }

    /// One phase of a publication (see `ControlShell::commit`) that took
    /// `seconds`.
    pub fn publish_phase(&self, phase: &'static str, seconds: f64) {
        self.publish_phase_seconds.get_or_create(&[("phase", phase)]).observe(seconds);
    }

    /// A replica went up or down.
    pub fn health_flipped(&self, service: &str, replica: &str) {
        self.health_transitions.get_or_create(&replica_labels(service, replica)).inc();
    }

    /// A load-control round ran for `service`.
    pub fn load_round(&self, service: &str) {
        self.load_rounds.get_or_create(&[("service", service.to_string())]).inc();
    }

    /// The shared store's change log was read for batches other nodes
    /// logged.
    pub fn catch_up_read(&self) {
        self.catch_up_reads.inc();
    }

    /// A NOTIFY for `zone` was sent, or ended as `outcome`
    /// ("acknowledged", "refused", "given_up").
    pub fn notify(&self, zone: &str, outcome: &'static str) {
        self.notifies.get_or_create(&[("zone", zone.to_string()), ("outcome", outcome.to_string())]).inc();
    }

    /// A request to the control API was refused for its token, `reason`
    /// ("missing", "wrong" or "revoked").
    pub fn auth_failed(&self, reason: &'static str) {
        self.auth_failures.get_or_create(&[("reason", reason)]).inc();
    }

    /// A request to the control API was refused unread: its source had
    /// failed to authenticate too often just before.
    pub fn auth_throttled(&self) {
        self.auth_throttled.inc();
    }

    /// Adds these metrics to a scrape's `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register("pharos_control_commits", "Group commits of the control plane", self.commits.clone());
        registry.register("pharos_control_commit_batch_edits", "Edits per group commit", self.commit_batch.clone());
        registry.register_with_unit(
            "pharos_control_commit",
            "Time a group commit took, validation, store and publication included",
            Unit::Seconds,
            self.commit_seconds.clone(),
        );
        registry.register_with_unit(
            "pharos_snapshot_publish",
            "Time to build and publish a snapshot",
            Unit::Seconds,
            self.publish_seconds.clone(),
        );
        registry.register_with_unit(
            "pharos_snapshot_publish_phase",
            "Time each phase of a publication took: build (validate and build the snapshot), store (commit the changes), \
             adopt (make it the control plane's), kernel (the fast path's copy), swap (serve it), cache (the state kept locally by a fleet's node)",
            Unit::Seconds,
            self.publish_phase_seconds.clone(),
        );
        registry.register("pharos_health_transitions", "Replicas going up or down", self.health_transitions.clone());
        registry.register("pharos_load_control_rounds", "Load-control rounds run", self.load_rounds.clone());
        registry.register("pharos_store_catch_up_reads", "Reads of the shared store's change log", self.catch_up_reads.clone());
        registry.register("pharos_notifies", "NOTIFYs sent to secondaries, and how each ended", self.notifies.clone());
        registry.register(
            "pharos_api_auth_failures",
            "Control API requests refused for their bearer token: missing, wrong or revoked",
            self.auth_failures.clone(),
        );
        registry.register(
            "pharos_api_auth_throttled",
            "Control API requests refused unread because their source failed to authenticate too often",
            self.auth_throttled.clone(),
        );
    }
}

/// The labels of `replica` of `service`'s metrics.
pub(crate) fn replica_labels(service: &str, replica: &str) -> ReplicaLabels {
    [("service", service.to_string()), ("replica", replica.to_string())]
}
