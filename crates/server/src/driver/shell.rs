//! The control plane's shell: the I/O around its rules
//! ([`pharos_control::plane::Plane`]), and the one path by which routing
//! state changes, whether the change comes from the API or from the
//! config file. The shell reads the files, owns the store, publishes
//! snapshots and probe plans, and does what the rules decide; it is run by
//! the control thread (`driver::thread`), which keeps the clock.
//!
//! A change is applied to a copy of the state, the new snapshot is built
//! from the copy (which validates everything), the change is committed to
//! the store, and only then is the snapshot swapped in. Anything that
//! fails on the way leaves the store and the live snapshot as they were.
//!
//! A store shared by a fleet logs every committed batch under a sequence
//! number. The node keeps the last one its state holds; it catches up by
//! applying the batches logged after it, in order, through the same commit
//! (without writing them back), whenever the store's follower wakes it:
//! those the notifications carried if none is missing, else read back
//! (`pharos_control::follow`). A change made from a state the store has
//! moved past is refused there, so the node catches up and makes the
//! change again from the newer state (`pharos_control::retry`):
//! concurrent read-modify-writes through different nodes never undo one
//! another.
//!
//! Measurements posted to any node reach the others the same way: each
//! catch-up also reads the batches of measurements recorded after the
//! last one read (by their stamps, see `pharos_store`).
//!
//! Nodes sharing a database also share health (`pharos_control::quorum`,
//! scheduled by `pharos_control::fleet`): the plane says when to report
//! and what, the shell makes the exchange with the store, and the plane
//! weighs what it read. The file's declarations are applied when they
//! changed since last applied (`pharos_control::declared`), and signed
//! zones are reloaded when a key changes state (`pharos_control::key_steps`).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::{ArcSwap, ArcSwapOption};
use pharos_answer::{SharedSnapshot, Snapshot};
use pharos_bgp::BgpTables;
use pharos_control::build::DataSources;
use pharos_control::declared;
use pharos_control::fleet::FleetHealth;
use pharos_control::follow::{self, ANYTHING_NEW, CatchUp};
use pharos_control::health::{ProbeResult, ReplicaHealth, describe};
use pharos_control::load::{LoadSettings, LoadStatus};
use pharos_control::plane::{AfterProbe, Plane, PlaneSettings};
use pharos_control::probe::ProbeTarget;
use pharos_control::quorum::Quorum;
use pharos_control::retry::Retries;
use pharos_control::snapshot::SnapshotBuilder;
use pharos_dnssec::keys::KeyError;
use pharos_dnssec::{NoActiveKeys, Signer, Window, ZoneKeys};
pub use pharos_model::api::{Delegated, Explained};
use pharos_model::spec::service_name;
use pharos_model::{Change, ControlError, Measurement, State};
use pharos_route::as_paths::AsPaths;
use pharos_route::external::ExternalRegions;
use pharos_route::latency::MeasurementSpec;
use pharos_route::sources::{AsnTable, AsnTableError, GeoDatabase, GeoDatabaseError};
use pharos_route::{Asker, Explanation, Family, Routed, route};
use pharos_store::{Batches, PostgresStore, SqliteStore, Store, StoreError};
use pharos_transport::Observation;
use pharos_transport::metrics::Counters;
use pharos_zone::journal::{DEFAULT_JOURNAL_VERSIONS, Journal};
use pharos_zone::{Zone, load_zone_file};
use rand::Rng;
use tokio::sync::watch;

use crate::config::{Config, ConfigError, StoreConfig, ZoneSource};
use crate::data::{BgpState, BgpStatus, DataFile, DataStatus, LatencyStatus, bgp_summary, modified_file};
use crate::driver::keys::{self, KeyStep, KeyView, StepError};
use crate::driver::response_settings;
use crate::driver::secondary_copies::{self, CopyError, SecondaryCopies};
use crate::driver::state_cache::{self, CacheError, Cached, StateCache};
use crate::observe::activity::ControlActivity;
use crate::observe::history::EventLog;
use crate::observe::split::SplitWindow;
use crate::published::Published;
use crate::status::FastPathStatus;
use crate::status::{StoreState, StoreStatus, store_engine};
use crate::tasks::fastpath::KernelFastPath;
use crate::tasks::notify;
use crate::tasks::secondary::{News, SecondaryZone};
use pharos_wire::causes;

/// Why the store cannot be opened. A PostgreSQL URL is not repeated: it
/// may hold a password.
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    #[error("cannot open the PostgreSQL store (store.url)")]
    Postgres(#[source] StoreError),
    #[error("cannot open the store {}", path.display())]
    Sqlite { path: PathBuf, source: StoreError },
    #[error(transparent)]
    InMemory(StoreError),
}

/// Why the control plane cannot open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Store(#[from] StoreOpenError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Stored(#[from] StoreError),
    #[error(transparent)]
    Zones(#[from] ZonesError),
    #[error(transparent)]
    Sources(#[from] SourcesError),
    #[error(transparent)]
    Settings(#[from] response_settings::SettingsError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("cannot start the thread that frees retired snapshots")]
    RetireThread(#[source] std::io::Error),
    #[error("cannot start the classifier thread")]
    ClassifierThread(#[source] std::io::Error),
}

/// Why the zone files cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ZonesError {
    #[error("zone {origin}")]
    File { origin: String, source: pharos_zone::LoadError },
    #[error("zone {origin}")]
    Signer { origin: String, source: SignerError },
    #[error("secondary zone {origin}")]
    Copy { origin: String, source: CopyError },
}

impl ZonesError {
    fn copy((origin, source): (String, CopyError)) -> ZonesError {
        ZonesError::Copy { origin, source }
    }
}

/// Why a zone with `dnssec = true` cannot be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("dnssec = true but the store has no keys for it: run `pharos key generate` first")]
    NoKeys,
    #[error(transparent)]
    Keys(#[from] KeyError),
    #[error(transparent)]
    NoActiveKeys(#[from] NoActiveKeys),
}

/// Why the MaxMind DB or the IP-to-AS table the configuration names
/// cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    #[error("cannot read the MaxMind DB {}", path.display())]
    ReadGeo { path: PathBuf, source: std::io::Error },
    #[error("{}", path.display())]
    Geo { path: PathBuf, source: GeoDatabaseError },
    #[error("cannot read the IP-to-AS table {}", path.display())]
    ReadAsnTable { path: PathBuf, source: std::io::Error },
    #[error("{}", path.display())]
    AsnTable { path: PathBuf, source: AsnTableError },
    #[error("cannot read the IP-to-AS table's modification time")]
    AsnTableModified(#[source] std::io::Error),
}

/// Why a secret kept in the store cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no randomness for the store's {key}")]
    NoRandom { key: String, source: rand::rand_core::OsError },
}

/// The store the config names: a PostgreSQL database, a SQLite file, or
/// else an in-memory SQLite. (The config has checked it names one.)
/// `pharos key` opens it too.
pub fn open_store(config: &StoreConfig) -> Result<Box<dyn Store>, StoreOpenError> {
    Ok(match (&config.url, &config.path) {
        (Some(url), _) => Box::new(PostgresStore::open(url, crate::scheduling::yield_to_queries).map_err(StoreOpenError::Postgres)?),
        (None, Some(path)) => Box::new(SqliteStore::open(path).map_err(|source| StoreOpenError::Sqlite { path: path.clone(), source })?),
        (None, None) => Box::new(SqliteStore::open(std::path::Path::new(":memory:")).map_err(StoreOpenError::InMemory)?),
    })
}

/// The store `config` names; if it is a shared database that cannot be
/// reached, and a state cached from it is kept at `cache`: a store that
/// connects later, and that state.
fn open_store_or_cache(config: &Config, cache: Option<&Path>) -> Result<(Box<dyn Store>, Option<Cached>), OpenError> {
    let error = match open_store(&config.store) {
        Ok(store) => return Ok((store, None)),
        Err(error) => error,
    };
    let unreachable = matches!(error, StoreOpenError::Postgres(StoreError::Unreachable(_)));
    let (true, Some(url), Some(cache)) = (unreachable, &config.store.url, cache.filter(|path| path.exists())) else {
        return Err(error.into());
    };
    let cached = state_cache::read(cache)?;
    tracing::warn!(
        "{}; serving the state cached in {} (sequence {}) until it can be reached",
        causes(&error),
        cache.display(),
        cached.sequence
    );
    Ok((Box::new(PostgresStore::open_later(url, crate::scheduling::yield_to_queries)?), Some(cached)))
}

/// The control plane's shell: the rules ([`Plane`]) with the store, the
/// files and the snapshot published from them.
pub struct ControlShell {
    config: Config,
    plane: Plane,
    store: Box<dyn Store>,
    snapshot: SharedSnapshot,
    /// Every latency measurement kept, fresh or not yet pruned.
    data: DataStatus,
    published: Arc<Published>,
    /// The probes the prober should be running.
    probe_plan: watch::Sender<Arc<Vec<ProbeTarget>>>,
    /// The zones the notifier tells secondaries about.
    notify_plan: watch::Sender<notify::Plan>,
    /// The kernel's copy of the answers, once started.
    fast_path: Option<KernelFastPath>,
    /// The sequence of the last batch of the store's change log that the
    /// state holds.
    applied: u64,
    /// The stamp of the last batch of measurements read from the store.
    measured: u64,
    /// The state cached locally (a shared store's nodes only).
    cache: Option<StateCache>,
    /// Frees the snapshots and states publications replace.
    retired: Retired,
    /// The secondary zones' copies as served.
    copies: SecondaryCopies,
}

/// How this node, named as `config` says, weighs the fleet's health
/// reports.
fn quorum(config: &Config) -> Quorum {
    let health = &config.health;
    Quorum { node: health.node_name(&config.server), stale_after_ms: health.stale_after_ms, down_share: health.quorum }
}

/// Refuses a reload that renames a fleet's node (`health.node`, else the
/// host name and first listen address) or moves its probe addresses: the
/// fleet knows its verdicts by its name, and its probes' states hold
/// for the paths they were taken on. Both take a restart.
fn check_health_unmoved(serving: &Config, fresh: &Config) -> Result<(), ControlError> {
    let restart =
        "takes a restart, not a reload: the fleet keeps this node's verdicts under its name and its probes' states for the paths they took";
    if fresh.health.node_name(&fresh.server) != serving.health.node_name(&serving.server) {
        return Err(ControlError::invalid(
            "health.node",
            format!("changed from {:?}: renaming a node {restart}", serving.health.node_name(&serving.server)),
        ));
    }
    if fresh.health.probe_address != serving.health.probe_address {
        return Err(ControlError::invalid("health.probe_address", format!("changed: moving a probe {restart}")));
    }
    Ok(())
}

impl ControlShell {
    /// Loads the zones, opens the store (an in-memory one if none is
    /// configured), applies the file's declarations and builds the first
    /// snapshot, at `now` (Unix ms); from the locally cached state instead
    /// if the store is a shared database that cannot be reached (see
    /// `state_cache`). `external` is the classifier the driver started, if
    /// one is configured.
    pub fn open(config: Config, external: Option<Arc<ExternalRegions>>, now: u64) -> Result<ControlShell, OpenError> {
        let cache = state_cache::path(&config);
        let (mut store, cached) = open_store_or_cache(&config, cache.as_deref())?;
        let copies = SecondaryCopies::default().loaded(&config, store.as_mut(), now).map_err(ZonesError::copy)?;
        let snapshots = SnapshotBuilder::new(load_zones(&config, store.as_mut(), &copies, now)?, response_settings::from_config(&config)?)
            .with_catalog(config.produced_catalog(now)?);
        let snapshot = Arc::new(arc_swap::ArcSwap::from_pointee(snapshots.without_services()?));
        let (mut sources, (geo, asn_table)) = load_sources(&config, now)?;
        sources.external = external;
        // Until the BGP tables load, shortest-as-path services fall back.
        sources.as_paths = config.bgp.table.as_ref().map(|_| Arc::new(AsPaths::new(None)));
        let data = DataStatus { bgp: BgpStatus::configured(config.bgp.table.clone()), geo, asn_table, ..DataStatus::default() };
        let published = Arc::new(Published {
            state: ArcSwap::default(),
            data: ArcSwap::default(),
            fastpath: ArcSwap::default(),
            artemis: ArcSwapOption::from(config.artemis.clone().map(Arc::new)),
            activity: ControlActivity::default(),
            observation: Arc::new(Observation::new(Counters::new(config.metrics.counting, config.metrics.tallies_resolvers()))),
            split: SplitWindow::default(),
            events: EventLog::default(),
            store: std::sync::Mutex::new(StoreStatus::new(store_engine(&config.store))),
        });
        let (probe_plan, _) = watch::channel(Arc::new(Vec::new()));
        let (notify_plan, _) = watch::channel(notify::Plan::default());
        let load = LoadSettings { max_age_seconds: config.load.max_age_seconds, smoothing: config.load.smoothing };
        let settings = PlaneSettings { load, latency_max_age_seconds: config.latency.max_age_seconds };
        let from_cache = cached.is_some();
        // Measurements wait for the database when serving from the cache.
        let (state, applied, (measurements, measured)) = match cached {
            Some(Cached { sequence, state }) => (state, sequence, (Vec::new(), 0)),
            None => {
                let (state, applied) = store.load()?;
                (state, applied, store.measurements_after(0)?)
            }
        };
        let mut plane = Plane::new(state, measurements, sources, snapshots, settings, now);
        plane.set_probe_addresses(config.health.probe_addresses()?);
        if config.store.url.is_some() {
            plane.join_fleet(FleetHealth::new(quorum(&config), config.health.report_interval_ms, now));
        }
        let mut shell = ControlShell {
            config,
            plane,
            store,
            snapshot,
            data,
            published,
            probe_plan,
            notify_plan,
            fast_path: None,
            applied,
            measured,
            cache: cache.map(StateCache::new),
            retired: Retired::start().map_err(OpenError::RetireThread)?,
            copies,
        };
        shell.latencies_changed();
        if from_cache {
            // The file's declarations wait for the next reload.
            let why = format!("the database could not be reached at start: serving the state cached at sequence {applied}");
            shell.published.update_store_status(|status| status.serving_cache = Some(why));
            shell.republish(now)?;
        } else {
            let changed = shell.changed_declarations(&shell.config.clone())?;
            shell.apply(&changed, now)?;
            shell.remember_declarations(&changed)?;
        }
        shell.publish_data();
        Ok(shell)
    }

    /// Starts the kernel fast path the config asks for (if any), filled
    /// from the live snapshot; from now on every snapshot published is
    /// written to the kernel first.
    pub fn start_fast_path(&mut self) {
        let snapshot = self.snapshot.load();
        self.fast_path = Some(KernelFastPath::start(&self.config, &snapshot, self.published.clone()));
    }

    /// The fast path's status, with its traffic counters as of now.
    pub fn fastpath_now(&self) -> FastPathStatus {
        match &self.fast_path {
            Some(fast_path) => fast_path.status_now(),
            None => self.published.fastpath.load().as_ref().clone(),
        }
    }

    /// What readers that never queue see; current as of every reply.
    pub fn published(&self) -> &Arc<Published> {
        &self.published
    }

    fn publish_data(&self) {
        self.published.data.store(Arc::new(self.data.clone()));
    }

    pub fn snapshot(&self) -> &SharedSnapshot {
        &self.snapshot
    }

    pub fn state(&self) -> &State {
        self.plane.state()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store, for the server's own settings.
    pub fn store(&mut self) -> &mut dyn Store {
        self.store.as_mut()
    }

    /// The store's setting `key`, else `octets` random octets in hex kept
    /// there first (nodes starting together on an empty store all keep the
    /// first one written); and whether this call made it.
    pub fn secret_setting(&mut self, key: &str, octets: usize) -> Result<(String, bool), SecretError> {
        if let Some(kept) = self.store.setting(key)? {
            return Ok((kept, false));
        }
        use rand::TryRngCore;
        let mut fresh = vec![0u8; octets];
        rand::rngs::OsRng.try_fill_bytes(&mut fresh).map_err(|source| SecretError::NoRandom { key: key.to_owned(), source })?;
        let made: String = fresh.iter().map(|byte| format!("{byte:02x}")).collect();
        let kept = self.store.setting_or_insert(key, &made)?;
        let made_here = kept == made;
        Ok((kept, made_here))
    }

    /// The DNSSEC keys of `zone` as shown at `now` (Unix ms), after taking
    /// `step` in them if given; a step is followed by a reload, so that the
    /// zones are signed with the keys in their new states at once.
    pub fn zone_keys(&mut self, zone: &str, step: Option<KeyStep>, now: u64) -> Result<Vec<KeyView>, ControlError> {
        let name = keys::zone_name(zone).map_err(|error| ControlError::invalid("zone", error.to_string()))?;
        if keys::zone_config(&self.config, &name).is_none() {
            return Err(ControlError::NotFound(format!("zone {zone}")));
        }
        let no_keys = || ControlError::NotFound(format!("keys of zone {zone}"));
        let kept = match step {
            None => keys::stored_keys(self.store.as_mut(), &name).map_err(zones_error)?.ok_or_else(no_keys)?,
            Some(step) => match keys::take_step(&self.config, self.store.as_mut(), &name, step, now / 1000) {
                Ok(kept) => {
                    self.reload(now)?;
                    kept
                }
                Err(StepError::NoKeys(_)) => return Err(no_keys()),
                Err(StepError::Refused(refused)) => {
                    return Err(ControlError::Conflict { field: "step".into(), message: refused.to_string() });
                }
                Err(StepError::Keys(error)) => return Err(zones_error(error)),
            },
        };
        Ok(keys::key_views(&kept, &name, now / 1000))
    }

    /// Applies `changes`, which no token asked for (the file's
    /// declarations, the load control's), all or nothing (see the module
    /// comment), at `now` (Unix ms, as every time the control plane is given).
    pub fn apply(&mut self, changes: &[Change], now: u64) -> Result<(), ControlError> {
        self.catching_up(now, |shell| shell.commit(shell.plane.state().with(changes), Made::ToStore(changes, &[]), None, now))
    }

    /// Runs `attempt`, and again after catching up while the store refuses
    /// it as `pharos_control::retry` says.
    fn catching_up<T>(&mut self, now: u64, attempt: impl Fn(&mut ControlShell) -> Result<T, ControlError>) -> Result<T, ControlError> {
        let mut retries = Retries::default();
        loop {
            let outcome = attempt(self);
            let (Some(again), Err(refusal)) = (retries.again(&outcome), &outcome) else {
                return outcome;
            };
            let caught_up = self.found_news(now);
            retries.settle(again, &caught_up, refusal.clone())?;
            retries.tried();
        }
    }

    /// Catches up with whatever the store logged since the state; whether
    /// that was anything (an edit refused as invalid may name what it
    /// brought).
    pub fn found_news(&mut self, now: u64) -> Result<bool, ControlError> {
        let applied = self.applied;
        self.catch_up(ANYTHING_NEW, now)?;
        Ok(self.applied != applied)
    }

    /// Has the store's follower call `wake` whenever other nodes may have
    /// logged changes (never, for a store no other node writes).
    pub fn follow_store(&mut self, wake: pharos_store::Wake) {
        self.store.follow(wake);
    }

    /// Applies the batches logged after the last one the state holds, in
    /// order and as one commit (one snapshot), without writing them back;
    /// then serves the measurements other nodes recorded since the last
    /// read (both read at once). If the batches cannot be applied (this node's zones lack a
    /// name another node's have, say), none is and the status says why.
    /// Nothing is read if the state holds `wanted` already (a batch this
    /// node logged, notified back to it); [`ANYTHING_NEW`] reads anyway.
    pub fn catch_up(&mut self, wanted: u64, now: u64) -> Result<(), ControlError> {
        self.catch_up_notified(wanted, Batches::new(), now)
    }

    /// [`ControlShell::catch_up`] given the batches that notifications carried
    /// (see `pharos_store::Following`): if they are every batch after the
    /// last one the state holds up to `wanted`, they are applied without
    /// a read. The measurements other nodes recorded then wait for the
    /// next read (a batch notified without its changes, the follower's
    /// look every second).
    pub fn catch_up_notified(&mut self, wanted: u64, notified: Batches, now: u64) -> Result<(), ControlError> {
        let caught_up = match follow::catch_up(self.applied, wanted, notified) {
            CatchUp::Nothing => return Ok(()),
            CatchUp::Apply(batches) => self.apply_logged(batches, now),
            CatchUp::Read => {
                self.published.activity.catch_up_read();
                self.store.news_after(self.applied, self.measured).map_err(ControlError::store).and_then(|news| {
                    self.apply_logged(news.batches, now)?;
                    self.take_measurements(news.measurements, now)
                })
            }
        };
        let error = caught_up.as_ref().err().map(ToString::to_string);
        self.published.update_store_status(|status| {
            // Reached: the state is the database's from now on.
            if error.is_none() {
                status.serving_cache = None;
            }
            status.catch_up_error = error;
        });
        caught_up
    }

    fn apply_logged(&mut self, batches: Batches, now: u64) -> Result<(), ControlError> {
        let Some(&(last, _)) = batches.last() else {
            return Ok(());
        };
        // Each batch's authors, with how many of the changes are its.
        let mut changes: Vec<Change> = Vec::new();
        let mut authored: Vec<(usize, Vec<String>)> = Vec::with_capacity(batches.len());
        for (_, batch) in batches {
            authored.push((batch.changes.len(), batch.authors));
            changes.extend(batch.changes);
        }
        // Set first: the commit publishes it with the snapshot.
        let before = std::mem::replace(&mut self.applied, last);
        self.commit(self.plane.state().with(&changes), Made::Logged(&changes), None, now).inspect_err(|_| self.applied = before)?;
        // Listed with this node's own changes, by the tokens that asked
        // for them, whichever node took them.
        let mut rest = changes.as_slice();
        for (count, authors) in authored {
            let (batch, after) = rest.split_at(count);
            self.published.events.changed(now, batch, &authors);
            rest = after;
        }
        Ok(())
    }

    /// Serves the measurements recorded (by any node) after the last
    /// batch read, read with the stamp to ask after next time.
    fn take_measurements(&mut self, (batch, measured): (Vec<Measurement>, u64), now: u64) -> Result<(), ControlError> {
        self.measured = measured;
        if batch.is_empty() {
            return Ok(());
        }
        self.plane.keep_measurements(batch, now);
        self.latencies_changed();
        self.republish(now)
    }

    /// The sequence of the last batch of the store's change log that the
    /// state holds.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Commits `changes`, asked for by the tokens named `authors`, for a
    /// caller that has already applied them to the state, making `next`:
    /// they are not applied a second time.
    pub fn apply_made(&mut self, next: State, changes: &[Change], authors: &[String], now: u64) -> Result<(), ControlError> {
        self.commit(next, Made::ToStore(changes, authors), None, now)
    }

    /// What a secondary zone's task found at `now` (Unix ms): a new copy
    /// is served (its zone's next version, as a reloaded file's) and kept
    /// in the store, an expired one served SERVFAIL. A copy the snapshot
    /// cannot take is refused, and the zone served as it was.
    pub fn secondary_news(&mut self, news: News, now: u64) -> Result<(), ControlError> {
        let zone = match news {
            News::Copied { mut zone, records, at } => {
                let journal_versions =
                    self.config.all_zones().find(|spec| service_name(&spec.origin).is_ok_and(|origin| origin == zone.origin));
                zone.journal = Arc::new(Journal::new(journal_versions.map_or(DEFAULT_JOURNAL_VERSIONS, |spec| spec.journal_versions)));
                self.republish_zone(zone.clone(), now)?;
                return self.copies.copied(self.store.as_mut(), zone, &records, at).map_err(ControlError::store);
            }
            News::Confirmed { origin, at } => return self.copies.confirmed(self.store.as_mut(), &origin, at).map_err(ControlError::store),
            News::Expired { origin } => self.copies.expired(&origin),
        };
        zone.map_or(Ok(()), |zone| self.republish_zone(zone, now))
    }

    /// Publishes the snapshot with `zone` in place of the one of its origin.
    fn republish_zone(&mut self, zone: Zone, now: u64) -> Result<(), ControlError> {
        let snapshots = self.plane.snapshots().with_zone(zone);
        self.commit(self.plane.state().as_ref().clone(), Made::ToStore(&[], &[]), Some((self.config.clone(), snapshots)), now)
    }

    /// The secondary zones as their tasks start.
    pub fn secondary_zones(&self) -> Result<Vec<SecondaryZone>, response_settings::SettingsError> {
        self.copies.zones(&self.config)
    }

    /// Re-reads the config file and the zone files, and re-applies the
    /// file's declarations. On any error the old zones and state keep serving.
    pub fn reload(&mut self, now: u64) -> Result<(), ControlError> {
        let fresh = self.config.reread().map_err(zones_error)?;
        let copies = self.copies.loaded(&fresh, self.store.as_mut(), now).map_err(|error| zones_error(ZonesError::copy(error)))?;
        let loaded = load_zones(&fresh, self.store.as_mut(), &copies, now).map_err(zones_error)?;
        let (mut sources, (geo, asn_table)) = load_sources(&fresh, now).map_err(zones_error)?;
        // The classifier keeps running; its answers are asked for afresh.
        let serving = self.plane.sources();
        sources.external = serving.external.clone();
        // Measurements stay; BGP tables stay until new ones have loaded.
        sources.latencies = serving.latencies.clone();
        sources.as_paths = fresh.bgp.table.as_ref().map(|_| serving.as_paths.clone().unwrap_or_default());
        if let Some(external) = &sources.external {
            external.clear();
        }
        let changed = self.changed_declarations(&fresh)?;
        if self.plane.in_fleet() {
            check_health_unmoved(&self.config, &fresh)?;
        }
        secondary_copies::check_secondaries_unmoved(&self.config, &fresh)?;
        let previous_sources = std::mem::replace(self.plane.sources_mut(), sources);
        // Regions are rebuilt: the data they use was reloaded too.
        let settings = response_settings::from_config(&fresh).map_err(zones_error)?;
        let mut snapshots = self.plane.snapshots().reloaded(loaded, settings);
        // A catalog configured anew starts at a new serial; one unchanged keeps counting.
        if fresh.catalog != self.config.catalog {
            snapshots = snapshots.with_catalog(fresh.produced_catalog(now)?);
        }
        if let Err(error) = self.commit(self.plane.state().with(&changed), Made::ToStore(&changed, &[]), Some((fresh, snapshots)), now) {
            *self.plane.sources_mut() = previous_sources;
            return Err(error);
        }
        self.copies = copies;
        self.remember_declarations(&changed)?;
        self.plane.follow_fleet(quorum(&self.config), self.config.health.report_interval_ms);
        if self.config.bgp.table.is_none() {
            self.data.bgp = BgpStatus::configured(self.config.bgp.table.clone());
        }
        (self.data.geo, self.data.asn_table) = (geo, asn_table);
        self.publish_data();
        self.published.artemis.store(self.config.artemis.clone().map(Arc::new));
        Ok(())
    }

    /// What the proximity data looks like now.
    pub fn data(&self) -> &DataStatus {
        &self.data
    }

    /// Keeps a batch of latency measurements (refused whole if any is bad)
    /// and serves from them at once.
    pub fn record_measurements(&mut self, specs: &[MeasurementSpec], now: u64) -> Result<usize, ControlError> {
        let (batch, older_than) = self.catching_up(now, |shell| shell.plane.check_measurements(specs, now))?;
        let stamp = self.store.record_measurements(&batch, older_than)?;
        self.measured = follow::read_with_own(self.measured, stamp);
        self.plane.keep_measurements(batch, now);
        self.latencies_changed();
        self.republish(now)?;
        Ok(specs.len())
    }

    /// Stops using measurements that have grown too old.
    pub fn expire_measurements(&mut self, now: u64) -> Result<(), ControlError> {
        self.plane.refresh_latencies(now);
        self.latencies_changed();
        self.republish(now)
    }

    /// Shows the latency table in use in the data status.
    fn latencies_changed(&mut self) {
        let latencies = &self.plane.sources().latencies;
        let max_age_seconds = self.config.latency.max_age_seconds;
        self.data.latency = LatencyStatus { measurements: latencies.count, max_age_seconds, next_expiry: latencies.next_expiry };
    }

    /// Serves from newly loaded BGP tables, or records why they failed to
    /// load (the tables serving, if any, stay).
    pub fn install_bgp(&mut self, loaded: Result<BgpTables, pharos_bgp::LoadError>, now: u64) -> Result<(), ControlError> {
        match loaded {
            Ok(tables) => {
                self.data.bgp =
                    BgpStatus { state: BgpState::Loaded, loaded: Some(bgp_summary(&tables, now)), error: None, ..self.data.bgp.clone() };
                self.plane.sources_mut().as_paths = Some(Arc::new(AsPaths::new(Some(Arc::new(tables)))));
                self.republish(now)
            }
            Err(error) => {
                self.data.bgp = BgpStatus { state: BgpState::Failed, error: Some(error.to_string()), ..self.data.bgp.clone() };
                self.publish_data();
                Ok(())
            }
        }
    }

    /// Marks BGP tables as loading (again).
    pub fn bgp_loading(&mut self) {
        self.data.bgp = BgpStatus { state: BgpState::Loading, ..self.data.bgp.clone() };
        self.publish_data();
    }

    /// Builds and publishes a snapshot from the same state and the current
    /// data.
    fn republish(&mut self, now: u64) -> Result<(), ControlError> {
        self.commit(self.plane.state().as_ref().clone(), Made::ToStore(&[], &[]), None, now)
    }

    /// The file's declarations that differ from the version of them last
    /// applied (see `pharos_control::declared`).
    fn changed_declarations(&mut self, config: &Config) -> Result<Vec<Change>, StoreError> {
        let declarations = declared::declarations(&config.datacenters, &config.regions, &config.services);
        declared::changed(declarations, |record| self.store.setting(record))
    }

    fn remember_declarations(&mut self, applied: &[Change]) -> Result<(), StoreError> {
        for declaration in applied {
            let (record, value) = declared::record(declaration);
            self.store.set_setting(&record, &value)?;
        }
        Ok(())
    }

    /// Validates `next`, the state after `made` (with newly read files,
    /// if any), by building its snapshot, commits the changes to the store
    /// (unless it has logged them already), then publishes the snapshot
    /// and the probe plan, and caches the state.
    /// Each phase's time is counted (`pharos_snapshot_publish_phase_seconds`).
    fn commit(&mut self, next: State, made: Made<'_>, files: Option<(Config, SnapshotBuilder)>, now: u64) -> Result<(), ControlError> {
        let started = Instant::now();
        let mut phases = Phases::start(self.published.clone());
        let (config, snapshots) = files.unzip();
        let reloaded = config.is_some();
        let prepared = self.plane.prepare(next, snapshots, now)?;
        phases.end("build");
        let changes = match made {
            Made::ToStore(changes, authors) if !changes.is_empty() => {
                self.applied = self.store.apply(self.applied, changes, authors)?;
                self.published.events.changed(now, changes, authors);
                phases.end("store");
                changes
            }
            Made::ToStore(changes, _) | Made::Logged(changes) => changes,
        };
        if let Some(config) = config {
            self.config = config;
        }
        let effects = self.plane.adopt(prepared, now);
        phases.end("adopt");
        // The kernel first: it never answers from an older snapshot than
        // user space, except while this one is being stored.
        if let Some(fast_path) = &mut self.fast_path {
            fast_path.sync(&effects.snapshot);
            phases.end("kernel");
        }
        let snapshot = Arc::new(effects.snapshot);
        self.retired.retire(self.snapshot.swap(snapshot.clone()));
        self.notify_plan.send_if_modified(|plan| {
            let changed = reloaded || plan.zones_changed(&snapshot);
            if changed {
                *plan =
                    notify::Plan { snapshot: Some(snapshot), secondaries: notify::secondaries(&self.config, &self.plane.state().zones) };
            }
            changed
        });
        if let Some(targets) = effects.probe_plan {
            self.probe_plan.send_replace(Arc::new(targets));
        }
        self.retired.retire(self.published.state.swap(self.plane.state().clone()));
        self.published.update_store_status(|status| status.last_sequence = self.applied);
        phases.end("swap");
        self.keep_cache(changes);
        self.publish_data();
        phases.end("cache");
        self.published.activity.published(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Caches the state locally if `changes` moved its sequence; a failure
    /// is logged: the state is the database's, the cache only helps a start
    /// without it.
    fn keep_cache(&mut self, changes: &[Change]) {
        let Some(cache) = &mut self.cache else {
            return;
        };
        if let Err(error) = cache.keep(self.plane.state(), self.applied, changes) {
            tracing::warn!("cannot cache the state locally: {}", causes(&error));
        }
    }

    /// The probes to run, as they change.
    pub fn probe_plan(&self) -> watch::Receiver<Arc<Vec<ProbeTarget>>> {
        self.probe_plan.subscribe()
    }

    /// What the notifier should tell secondaries, as it changes.
    pub fn notify_plan(&self) -> watch::Receiver<notify::Plan> {
        self.notify_plan.subscribe()
    }

    /// Takes a probe result; a replica that goes up or down (or, for a
    /// service that shrinks TTLs, gets closer to it) is served at once.
    pub fn record_probe(&mut self, result: &ProbeResult, now: u64) -> Result<(), ControlError> {
        let (service, replica) = (&result.target.service, &result.target.replica);
        match self.plane.record_probe(result, now)? {
            AfterProbe::TellFleet => {
                let seen = if result.outcome.is_ok() { "up" } else { "down" };
                tracing::info!(service = %service, replica = %replica, "probes from this node see the replica {seen}; telling the fleet");
                self.exchange_health(now)
            }
            AfterProbe::Flipped => {
                self.published.activity.health_flipped(service, replica);
                let probe = describe(&result.target);
                match &result.outcome {
                    Ok(_) => tracing::info!(service = %service, replica = %replica, "replica up: {probe}"),
                    Err(why) => tracing::warn!(service = %service, replica = %replica, "replica down: {probe}: {why}"),
                }
                let why = result.outcome.as_ref().err().map_or(probe.clone(), |why| format!("{probe}: {why}"));
                self.published.events.health(now, service, replica, result.outcome.is_ok(), &why);
                self.republish(now)?;
                self.exchange_health(now)
            }
            AfterProbe::Republish => self.republish(now),
            AfterProbe::Nothing => Ok(()),
        }
    }

    /// Every probed replica's state.
    pub fn health_report(&self) -> Vec<ReplicaHealth> {
        self.plane.health_report()
    }

    /// Tells the store this node's new verdicts and that it is alive,
    /// reads every node's (those changed since the last exchange), and
    /// serves what the plane weighs from them. Skipped while the store's
    /// follower is not connected (the plane is told the store was not
    /// reached): the call would wait for a connection the follower cannot
    /// make either.
    fn exchange_health(&mut self, now: u64) -> Result<(), ControlError> {
        let Some(exchange) = self.plane.exchange_health(now) else {
            return Ok(());
        };
        let reachable = self.published.store_status().state == StoreState::Following;
        let answer = reachable.then(|| self.store.exchange_health(&exchange.node, now, &exchange.verdicts, exchange.after));
        let answer = match answer {
            Some(Ok(reports)) => Some(reports),
            Some(Err(error)) => {
                tracing::warn!("cannot share health with the fleet: {error}");
                None
            }
            None => None,
        };
        let flips = self.plane.health_exchanged(exchange, answer, now);
        for flip in &flips {
            self.published.activity.health_flipped(&flip.service, &flip.replica);
            match flip.up {
                true => tracing::info!(service = %flip.service, replica = %flip.replica, "replica up: {}", flip.why),
                false => tracing::warn!(service = %flip.service, replica = %flip.replica, "replica down: {}", flip.why),
            }
            self.published.events.health(now, &flip.service, &flip.replica, flip.up, &flip.why);
        }
        if flips.is_empty() { Ok(()) } else { self.republish(now) }
    }

    /// Folds a load report for `replica` of `service` into its smoothed
    /// value.
    pub fn record_load(&mut self, service: &str, replica: &str, value: f64, now: u64) -> Result<(), ControlError> {
        self.plane.record_load(service, replica, value, now)
    }

    /// When the control thread must next wake by itself (Unix ms): for a
    /// measurement to expire, a load-control round, a health report to the
    /// fleet or a key's step.
    pub fn next_wakeup(&self) -> Option<u64> {
        self.plane.next_wakeup()
    }

    /// Does what is due at `now`: signs the zones again when a key changes
    /// state, drops expired measurements, reports health to the fleet, runs
    /// due load-control rounds and installs what they computed.
    pub fn wake(&mut self, now: u64) -> Result<(), ControlError> {
        if self.plane.key_step_due(now).is_some() {
            self.reload(now)?;
            tracing::info!("signed zones signed again: a key changed state");
        }
        if self.plane.measurements_expired(now) {
            self.expire_measurements(now)?;
        }
        if self.plane.health_report_due(now) {
            self.exchange_health(now)?;
        }
        for service in self.plane.due_rounds(now) {
            let change = self.plane.run_round(&service, now);
            self.published.activity.load_round(&service);
            tracing::debug!(service, run = ?self.plane.last_round(&service), "load control round");
            if let Some(change) = change {
                self.apply(&[change], now)?;
            }
        }
        Ok(())
    }

    /// Smoothed loads and the last round of each load-controlled service.
    pub fn load_status(&self) -> LoadStatus {
        self.plane.load_status()
    }
}

/// Frees what publications replace on a thread of its own, as batch work:
/// freeing the previous state and snapshot of 10,000 services takes
/// milliseconds, which neither the acknowledgement nor the next
/// publication need wait for. (A query thread still holding the old
/// snapshot frees it itself, once done with it.)
struct Retired(std::sync::mpsc::Sender<Box<dyn Send>>);

impl Retired {
    fn start() -> std::io::Result<Retired> {
        let (retire, retired) = std::sync::mpsc::channel::<Box<dyn Send>>();
        std::thread::Builder::new().name("retire".into()).spawn(move || {
            crate::scheduling::yield_to_queries();
            retired.into_iter().for_each(drop);
        })?;
        Ok(Retired(retire))
    }

    /// Has `replaced` freed on the retiring thread (here, should that
    /// thread be gone).
    fn retire(&self, replaced: impl Send + 'static) {
        drop(self.0.send(Box::new(replaced)));
    }
}

/// What a commit changes in the state.
enum Made<'a> {
    /// Changes to commit to the store (none: the same state, published
    /// again with newly read files or data), and the names of the tokens
    /// that asked for them (none: the server's own).
    ToStore(&'a [Change], &'a [String]),
    /// Batches the store has logged already, read back (the sequence they
    /// end at is set first).
    Logged(&'a [Change]),
}

/// Times the phases of a publication one after another.
struct Phases {
    published: Arc<Published>,
    since: Instant,
}

impl Phases {
    fn start(published: Arc<Published>) -> Phases {
        Phases { published, since: Instant::now() }
    }

    /// Counts the time since the last phase ended as `phase`'s.
    fn end(&mut self, phase: &'static str) {
        let now = Instant::now();
        self.published.activity.publish_phase(phase, (now - self.since).as_secs_f64());
        self.since = now;
    }
}

/// Why a client at `client` (an address, or an address/prefix as ECS would
/// carry it) gets what it gets for `service` and `family` in `snapshot`,
/// drawing any chance from `rng`: through the same door, with the same
/// random source, as a query gets exactly this answer.
pub fn explain(snapshot: &Snapshot, service: &str, client: &str, family: Family, rng: &mut impl Rng) -> Result<Explained, ControlError> {
    let asker = parse_asker(client)?;
    let wire = service_name(service).map_err(|error| ControlError::invalid("name", error.to_string()))?;
    let routed = snapshot.routes.service(&wire).ok_or_else(|| ControlError::NotFound(format!("service {service}")))?;
    let mut explanation = Explanation::default();
    let family = routed.redirectors_family().unwrap_or(family);
    let Routed { location, decision } = route(&snapshot.routes, routed, family, &asker, rng, Some(&mut explanation));
    let answer =
        decision.replicas.iter().map(|&index| (routed.replicas[index].id.clone(), routed.replicas[index].address.to_string())).collect();
    let delegated_to = decision.replicas.first().map(|&index| &routed.replicas[index]).and_then(|chosen| {
        let cname = pharos_wire::name::Display(chosen.cname.as_deref()?).to_string();
        explanation
            .steps
            .push(format!("second-tier redirector {} ({}) chosen: answered with a CNAME to {cname}", chosen.id, chosen.address));
        Some(Delegated { redirector: chosen.id.clone(), address: chosen.address.to_string(), cname })
    });
    Ok(Explained {
        service: routed.name.clone(),
        region: location.region,
        scope: decision.scope,
        ttl: decision.ttl,
        answer,
        steps: explanation.steps,
        delegated_to,
    })
}

/// What an operator sees of the MaxMind DB and the IP-to-AS table.
type SourceFiles = (Option<DataFile>, Option<DataFile>);

/// Reads the MaxMind DB and IP-to-AS table the config names, if any, at
/// `now` (Unix ms).
pub(crate) fn load_sources(config: &Config, now: u64) -> Result<(DataSources, SourceFiles), SourcesError> {
    let geo = match &config.geo.database {
        Some(path) => {
            let started = std::time::Instant::now();
            let bytes = std::fs::read(path).map_err(|source| SourcesError::ReadGeo { path: path.clone(), source })?;
            let geo = GeoDatabase::from_bytes(bytes).map_err(|source| SourcesError::Geo { path: path.clone(), source })?;
            let (ranges, places) = geo.place_index_size().unwrap_or_default();
            let seconds = started.elapsed().as_secs_f64();
            tracing::info!(path = %path.display(), ipv4_ranges = ranges, places, seconds, "MaxMind DB loaded");
            Some(Arc::new(geo))
        }
        None => None,
    };
    let geo_file = config.geo.database.as_ref().zip(geo.as_ref());
    let geo_file = geo_file.map(|(path, geo)| DataFile { file: path.clone(), made_at: geo.built_at(), loaded_at: now / 1000 });
    let asn_table = match &config.geo.asn_table {
        Some(path) => {
            let text = read_maybe_gzipped(path).map_err(|source| SourcesError::ReadAsnTable { path: path.clone(), source })?;
            let table = AsnTable::parse(&text).map_err(|source| SourcesError::AsnTable { path: path.clone(), source })?;
            tracing::info!(path = %path.display(), prefixes = table.prefixes, "IP-to-AS table loaded");
            Some(Arc::new(table))
        }
        None => None,
    };
    let asn_file = config.geo.asn_table.as_ref().map(|path| modified_file(path, now)).transpose();
    let asn_file = asn_file.map_err(SourcesError::AsnTableModified)?;
    Ok((DataSources { asn_table, geo, ..DataSources::default() }, (geo_file, asn_file)))
}

fn read_maybe_gzipped(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    if path.extension().is_some_and(|extension| extension == "gz") {
        flate2::read::GzDecoder::new(file).read_to_string(&mut text)?;
    } else {
        std::io::BufReader::new(file).read_to_string(&mut text)?;
    }
    Ok(text)
}

/// Why new zone files (or the config naming them) cannot be served: the
/// error with every cause it gives.
fn zones_error(error: impl Into<Box<dyn Error + Send + Sync>>) -> ControlError {
    let error: Box<dyn Error + Send + Sync> = error.into();
    ControlError::Zones(Arc::from(Box::<dyn Error + Send + Sync>::from(causes(&*error))))
}

/// Loads every zone file, and takes each secondary zone's copy from
/// `copies`; a zone with `dnssec = true` gets a signer with its keys from
/// `store` and signatures valid from `now` (Unix ms).
fn load_zones(config: &Config, store: &mut dyn Store, copies: &SecondaryCopies, now: u64) -> Result<Vec<Zone>, ZonesError> {
    let window = Window::from_now(now / 1000, config.dnssec.validity_seconds);
    config
        .all_zones()
        .map(|spec| {
            let loaded = match (spec.source(), copies.zone(spec)) {
                (Some(ZoneSource::File(file)), _) => load_zone_file(&spec.origin, file),
                (_, Some(copy)) => Ok(copy),
                // Config::problems refuses a zone of no source, or two.
                (_, None) => unreachable!("zone {} has one source", spec.origin),
            };
            let mut zone = loaded.map_err(|source| ZonesError::File { origin: spec.origin.clone(), source })?;
            zone.journal = Arc::new(Journal::new(spec.journal_versions));
            if spec.dnssec {
                let signer = signer_of(&zone, store, window, now / 1000)
                    .map_err(|source| ZonesError::Signer { origin: spec.origin.clone(), source })?;
                zone.signer = Some(Arc::new(signer));
            }
            Ok(zone)
        })
        .collect()
}

/// The signer of `zone`, with the keys the store keeps for it in the
/// states they are in at `now` (Unix seconds).
fn signer_of(zone: &Zone, store: &mut dyn Store, window: Window, now: u64) -> Result<Signer, SignerError> {
    let Some(text) = store.setting(&ZoneKeys::setting_name_of_wire(&zone.origin)?)? else {
        return Err(SignerError::NoKeys);
    };
    let keys = ZoneKeys::from_setting(&text, &ring::rand::SystemRandom::new())?;
    Ok(Signer::new(&zone.origin, keys, window, now)?)
}

/// Reads "192.0.2.1" or "192.0.2.0/24" as the routing core's asker.
fn parse_asker(client: &str) -> Result<Asker, ControlError> {
    let invalid = || ControlError::invalid("client", format!("{client:?} is not an address or address/prefix"));
    match client.split_once('/') {
        None => client.parse().map(Asker::from_source).map_err(|_| invalid()),
        Some(_) => {
            let (address, known_bits) =
                pharos_route::prefix::parse_prefix(client).map_err(|error| ControlError::invalid("client", error.to_string()))?;
            Ok(Asker { address, known_bits, from_client_subnet: true })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tells, as it is freed, which thread frees it.
    struct Freed(std::sync::mpsc::Sender<String>);

    impl Drop for Freed {
        fn drop(&mut self) {
            drop(self.0.send(std::thread::current().name().unwrap_or_default().to_owned()));
        }
    }

    #[test]
    fn what_a_publication_replaces_is_freed_on_the_retiring_thread() {
        let retired = Retired::start().unwrap();
        let (freed, by) = std::sync::mpsc::channel();
        retired.retire(Freed(freed));
        assert_eq!(by.recv_timeout(std::time::Duration::from_secs(10)).unwrap(), "retire");
    }
}
