//! The control thread: the one thread that runs the control plane's shell
//! (`driver::shell`), the threads and tasks around it (classifier, prober,
//! BGP loading), the clock, and [`ControlThread`], the handle the API and
//! signals reach it through. The rules themselves are in `pharos-control`;
//! this layer reads the time once per request and passes it in.
//!
//! Every change is a request on the thread's queue, so changes are applied
//! one after another without a lock. Under a storm of updates the thread
//! commits at most once per commit window: each commit takes every request
//! that queued meanwhile, applies them in order, validates them together,
//! writes them to the store in one transaction and publishes one snapshot
//! (group commit, as databases do with their logs). A lone update is
//! committed at once. Readers of the state never queue: they load the last
//! published copy.
//!
//! On a store shared by a fleet, the store's follower queues a catch-up
//! whenever another node may have logged a change (at most one is queued
//! at a time; none for a batch this node logged itself, notified back to
//! it: `pharos_control::follow`); edits the store refused because the
//! state was behind are made again, after catching up, from the newer
//! state (`pharos_control::retry`).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

use pharos_answer::SharedSnapshot;
use pharos_bgp::BgpTables;
use pharos_control::follow::Notified;
use pharos_control::group::{Asked, Committer, Edit, group_commit};
use pharos_control::health::{ProbeResult, ReplicaHealth};
use pharos_control::load::LoadStatus;
use pharos_control::retry::{Again, Retries};
use pharos_model::status::SecondaryStatus;
use pharos_model::{Change, ControlError, State};
use pharos_route::latency::MeasurementSpec;
use pharos_store::{Batch, Following};
use pharos_transport::Observation;
use tokio::sync::oneshot;

use crate::config::{BgpConfig, Config};
use crate::data::{DataStatus, unix_millis};
use crate::driver::keys::{KeyStep, KeyView};
use crate::driver::shell::{ControlShell, OpenError};
use crate::observe::activity::ControlActivity;
use crate::observe::history::Event;
use crate::observe::split::Splits;
use crate::published::Published;
use crate::status::FastPathStatus;
use crate::status::StoreStatus;
use crate::tasks::notify;
use crate::tasks::prober;
use crate::tasks::secondary::{self, News, Secondaries};

/// The most requests one commit takes, so a reply never waits for an
/// unbounded batch.
const MAX_BATCH: usize = 256;

/// What the control thread is asked to do.
enum Request {
    Edit(Pending),
    Command(Command),
}

/// Anything but an edit: served on its own, after the edits queued before.
enum Command {
    /// Answered with the BGP table to load afresh, if one is configured.
    /// Answered with the BGP settings, to load the table afresh if one is configured.
    Reload {
        done: oneshot::Sender<Result<BgpConfig, ControlError>>,
    },
    Measurements {
        batch: Vec<MeasurementSpec>,
        done: oneshot::Sender<Result<usize, ControlError>>,
    },
    BgpLoading,
    /// Boxed: the tables' summary is large beside the other commands.
    BgpLoaded(Box<Result<BgpTables, pharos_bgp::LoadError>>),
    ProbeResult(ProbeResult),
    Health {
        done: oneshot::Sender<Vec<ReplicaHealth>>,
    },
    FastPath {
        done: oneshot::Sender<FastPathStatus>,
    },
    Load {
        service: String,
        replica: String,
        value: f64,
        done: oneshot::Sender<Result<(), ControlError>>,
    },
    LoadStatus {
        done: oneshot::Sender<LoadStatus>,
    },
    /// Answered at once: the thread is serving its queue (for a watchdog).
    Ping {
        done: oneshot::Sender<()>,
    },
    /// A zone's DNSSEC keys, after a step in them if one is given.
    Keys {
        zone: String,
        step: Option<KeyStep>,
        done: oneshot::Sender<Result<Vec<KeyView>, ControlError>>,
    },
    /// Apply what other nodes logged, as `notified` says while this is
    /// queued (see `follower_news`); it is emptied once this is served.
    CatchUp {
        notified: Arc<Mutex<Notified<Batch>>>,
    },
    /// What a secondary zone's task found.
    Secondary(News),
}

/// Opens the control plane now, with the classifier the config asks for
/// started on its own thread.
pub fn open(config: Config) -> Result<ControlShell, OpenError> {
    let external = config.classifier.as_ref().map(crate::tasks::classifier::start).transpose().map_err(OpenError::ClassifierThread)?;
    ControlShell::open(config, external, unix_millis())
}

/// Starts the secondary zones' tasks, whose news is queued to the thread
/// as `requests`, with the NOTIFYs the transports take.
fn start_secondaries(shell: &ControlShell, requests: Sender<Request>) -> std::io::Result<Secondaries> {
    let zones = shell.secondary_zones().map_err(std::io::Error::other)?;
    let (inbox, notified) = tokio::sync::mpsc::channel(NOTIFIES_WAITING);
    shell.published().observation.notify_inbox.connect(inbox);
    let news = move |news| drop(requests.send(Request::Command(Command::Secondary(news))));
    Ok(secondary::start(zones, notified, Arc::new(news)))
}

/// How many NOTIFYs taken by the transports may wait for the secondary
/// zones' tasks.
const NOTIFIES_WAITING: usize = 64;

/// The thread that loads the BGP tables could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start loading the BGP tables: {0}")]
struct BgpNotStarted(std::io::Error);

/// A cheap, clonable way to the control thread and to what it published.
#[derive(Clone)]
pub struct ControlThread {
    requests: Sender<Request>,
    published: Arc<Published>,
    snapshot: SharedSnapshot,
    secondaries: Secondaries,
}

impl ControlThread {
    /// Moves `control` onto its own thread, committing at most once per
    /// `window`, and starts loading its BGP tables if it has any.
    pub fn start(mut shell: ControlShell, window: Duration) -> std::io::Result<ControlThread> {
        let (requests, queue) = std::sync::mpsc::channel();
        let published = shell.published().clone();
        let snapshot = shell.snapshot().clone();
        let bgp = shell.config().bgp.clone();
        let probe_plan = shell.probe_plan();
        tokio::spawn(notify::run(shell.notify_plan(), published.clone()));
        let secondaries = start_secondaries(&shell, requests.clone())?;
        shell.follow_store(follower_news(requests.clone(), published.clone()));
        std::thread::Builder::new().name("control".into()).spawn(move || serve(shell, queue, window))?;
        let handle = ControlThread { requests, published, snapshot, secondaries };
        let results = handle.requests.clone();
        let report = move |result| drop(results.send(Request::Command(Command::ProbeResult(result))));
        tokio::spawn(prober::run(probe_plan, Arc::new(report)));
        handle.load_bgp(&bgp)?;
        Ok(handle)
    }

    /// What each secondary zone's timers stand at.
    pub fn secondaries(&self) -> Vec<SecondaryStatus> {
        self.secondaries.statuses()
    }

    /// Asks the secondary zone at `origin` (lowercase wire form) to check
    /// its primaries now; false if it is no secondary zone here.
    pub fn refresh_secondary(&self, origin: &[u8]) -> bool {
        self.secondaries.refresh(origin)
    }

    /// The state as last committed.
    pub fn state(&self) -> Arc<State> {
        self.published.state.load_full()
    }

    /// The proximity data's status as last published.
    pub fn data(&self) -> Arc<DataStatus> {
        self.published.data.load_full()
    }

    /// `[artemis]` as last started or reloaded.
    pub fn artemis(&self) -> Option<Arc<crate::artemis::ArtemisConfig>> {
        self.published.artemis.load_full()
    }

    /// The kernel fast path's status as last published.
    pub fn fastpath(&self) -> Arc<FastPathStatus> {
        self.published.fastpath.load_full()
    }

    /// What the control plane has done, counted.
    pub fn activity(&self) -> &ControlActivity {
        &self.published.activity
    }

    /// What the transports count and log.
    pub fn observation(&self) -> &Observation {
        &self.published.observation
    }

    /// The split delivered since the sliding window's start, against the
    /// configured one.
    pub fn split(&self) -> Splits {
        let counters = &self.published.observation.counters;
        let drained = counters.tallying_resolvers().then(|| counters.drain_resolvers());
        self.published.split.measure(counters.totals().decisions, drained, &self.state())
    }

    /// The last health transitions, changes and requests to change.
    pub fn events(&self) -> Vec<Event> {
        self.published.events.recent()
    }

    /// Logs that the token `token` asked the API for `what` and was
    /// answered `status`.
    pub fn audit(&self, token: &str, what: &str, status: u16) {
        self.published.events.audit(crate::data::unix_millis(), token, what, status);
    }

    /// The store, and how this node follows it.
    pub fn store_status(&self) -> StoreStatus {
        self.published.store_status()
    }

    /// The snapshot the transports serve.
    pub fn snapshot(&self) -> &SharedSnapshot {
        &self.snapshot
    }

    /// Queues `edit`, asked for by the token named `author`; resolves once
    /// its changes are committed and live (to the changes made), or
    /// refused (to why).
    pub async fn edit(&self, author: String, edit: Edit) -> Result<Vec<Change>, ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Edit((Asked { author, edit }, done)), reply).await?
    }

    /// Re-reads the config and zone files between two commits, then the
    /// BGP tables in the background.
    pub async fn reload(&self) -> Result<(), ControlError> {
        let (done, reply) = oneshot::channel();
        let bgp = self.ask(Request::Command(Command::Reload { done }), reply).await??;
        self.load_bgp(&bgp).map_err(|error| ControlError::zones(BgpNotStarted(error)))
    }

    /// The DNSSEC keys of `zone`, after taking `step` in them if given.
    pub async fn zone_keys(&self, zone: String, step: Option<KeyStep>) -> Result<Vec<KeyView>, ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::Keys { zone, step, done }), reply).await?
    }

    /// Every probed replica's state, as the control thread has it.
    pub async fn health(&self) -> Result<Vec<ReplicaHealth>, ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::Health { done }), reply).await
    }

    /// The kernel fast path's status with its traffic counters read now
    /// (the counters live in maps the control thread owns).
    pub async fn fastpath_now(&self) -> Result<FastPathStatus, ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::FastPath { done }), reply).await
    }

    /// Folds a pushed load report into the replica's smoothed load.
    pub async fn record_load(&self, service: String, replica: String, value: f64) -> Result<(), ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::Load { service, replica, value, done }), reply).await?
    }

    /// Smoothed loads and what the load-control loop last did.
    pub async fn load_status(&self) -> Result<LoadStatus, ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::LoadStatus { done }), reply).await
    }

    /// Resolves once the control thread has served everything queued
    /// before: it is not stuck.
    pub async fn ping(&self) -> Result<(), ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::Ping { done }), reply).await
    }

    /// Keeps a batch of latency measurements; resolves once they are live.
    pub async fn record_measurements(&self, batch: Vec<MeasurementSpec>) -> Result<usize, ControlError> {
        let (done, reply) = oneshot::channel();
        self.ask(Request::Command(Command::Measurements { batch, done }), reply).await?
    }

    /// Loads the BGP tables at `path` on a thread of their own, logging
    /// progress, and has the control thread serve from them once loaded.
    /// Starts loading the configured BGP table, if there is one.
    fn load_bgp(&self, bgp: &BgpConfig) -> std::io::Result<()> {
        let Some(path) = bgp.table.clone() else {
            return Ok(());
        };
        let rules = bgp.origin_rules();
        let requests = self.requests.clone();
        let _ = requests.send(Request::Command(Command::BgpLoading));
        std::thread::Builder::new().name("bgp-load".into()).spawn(move || {
            crate::scheduling::yield_to_queries();
            tracing::info!(file = %path.display(), "loading BGP tables");
            let loaded = pharos_bgp::load(&path, rules, |progress| {
                let percent = 100.0 * progress.bytes_read as f64 / progress.file_size.max(1) as f64;
                tracing::info!(routes = progress.routes, "loading BGP tables: {percent:.0}% of {}", path.display());
            });
            match &loaded {
                Ok(tables) => tracing::info!("BGP tables loaded: {}", tables.report),
                Err(error) => tracing::error!("BGP tables not loaded, the previous ones (if any) keep serving: {error}"),
            }
            let _ = requests.send(Request::Command(Command::BgpLoaded(Box::new(loaded))));
        })?;
        Ok(())
    }

    async fn ask<T>(&self, request: Request, reply: oneshot::Receiver<T>) -> Result<T, ControlError> {
        let gone = || ControlError::Stopped;
        self.requests.send(request).map_err(|_| gone())?;
        reply.await.map_err(|_| gone())
    }
}

/// Where the store's follower sends its news: into the store status, and,
/// when others may have logged changes, a catch-up on the control thread's
/// queue unless one is queued already (see `pharos_control::follow`).
fn follower_news(requests: Sender<Request>, published: Arc<Published>) -> pharos_store::Wake {
    let notified = Arc::new(Mutex::new(Notified::default()));
    Box::new(move |news| {
        published.update_store_status(|status| crate::status::follow(status, &news));
        let must_queue = {
            let mut waiting = notified.lock().expect("no holder panics");
            match news {
                Following::Lost(why) => {
                    tracing::warn!("not following the store's changes, reconnecting: {why}");
                    return;
                }
                Following::Listening => {
                    tracing::info!("following the store's changes");
                    waiting.look()
                }
                Following::Notified(sequence, batch) => waiting.logged(sequence, batch),
                Following::Look => waiting.look(),
            }
        };
        if must_queue {
            let _ = requests.send(Request::Command(Command::CatchUp { notified: notified.clone() }));
        }
    })
}

/// The control thread: waits for a request (or for a measurement to grow
/// too old, a load-control round, or a health report to the fleet), lets the commit window pass since
/// the last commit, then serves everything queued by then.
fn serve(mut shell: ControlShell, queue: Receiver<Request>, window: Duration) {
    crate::scheduling::yield_to_queries();
    let mut last_commit: Option<Instant> = None;
    loop {
        let first = match next_request(&shell, &queue) {
            Ok(request) => request,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(error) = shell.wake(unix_millis()) {
                    tracing::error!("a timed task of the control plane failed: {error}");
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if let Some(wait) = last_commit.and_then(|at| (at + window).checked_duration_since(Instant::now())) {
            std::thread::sleep(wait);
        }
        let batch = drain(first, &queue);
        last_commit = Some(Instant::now());
        serve_batch(&mut shell, batch);
    }
}

/// The next request, waiting no longer than until the control plane's
/// next timed task; none if that is due, so that a busy queue (probe
/// results, say) never keeps a timed task waiting.
fn next_request(shell: &ControlShell, queue: &Receiver<Request>) -> Result<Request, RecvTimeoutError> {
    match shell.next_wakeup() {
        Some(at) if at <= unix_millis() => Err(RecvTimeoutError::Timeout),
        Some(at) => queue.recv_timeout(Duration::from_millis(at.saturating_sub(unix_millis()))),
        None => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
    }
}

fn drain(first: Request, queue: &Receiver<Request>) -> Vec<Request> {
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match queue.try_recv() {
            Ok(request) => batch.push(request),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
        }
    }
    batch
}

/// Serves requests in arrival order: runs of edits commit together, any
/// other request on its own after the edits before it.
fn serve_batch(shell: &mut ControlShell, batch: Vec<Request>) {
    let mut edits = Vec::new();
    for request in batch {
        match request {
            Request::Edit(pending) => edits.push(pending),
            Request::Command(command) => {
                commit_edits(shell, std::mem::take(&mut edits));
                serve_command(shell, command);
            }
        }
    }
    commit_edits(shell, edits);
}

fn serve_command(shell: &mut ControlShell, command: Command) {
    let now = unix_millis();
    match command {
        Command::Reload { done } => {
            let _ = done.send(shell.reload(now).map(|()| shell.config().bgp.clone()));
        }
        Command::Measurements { batch, done } => {
            let _ = done.send(shell.record_measurements(&batch, now));
        }
        Command::BgpLoading => shell.bgp_loading(),
        Command::BgpLoaded(loaded) => {
            if let Err(error) = shell.install_bgp(*loaded, now) {
                tracing::error!("cannot serve from the new BGP tables: {error}");
            }
        }
        Command::Secondary(news) => {
            if let Err(error) = shell.secondary_news(news, now) {
                tracing::error!("cannot serve a secondary zone's new copy; it is served as it was: {error}");
            }
        }
        Command::ProbeResult(result) => {
            if let Err(error) = shell.record_probe(&result, now) {
                tracing::error!("cannot serve the new health of {}/{}: {error}", result.target.service, result.target.replica);
            }
        }
        Command::Health { done } => drop(done.send(shell.health_report())),
        Command::FastPath { done } => drop(done.send(shell.fastpath_now())),
        Command::Load { service, replica, value, done } => drop(done.send(shell.record_load(&service, &replica, value, now))),
        Command::LoadStatus { done } => drop(done.send(shell.load_status())),
        Command::Ping { done } => drop(done.send(())),
        Command::Keys { zone, step, done } => drop(done.send(shell.zone_keys(&zone, step, now))),
        Command::CatchUp { notified } => {
            // Emptied first: a change logged from now on queues another.
            let (wanted, batches) = notified.lock().expect("no holder panics").take();
            if let Err(error) = shell.catch_up_notified(wanted, batches, now) {
                tracing::error!("cannot apply the changes other nodes made: {error}");
            }
        }
    }
}

/// Where an edit's outcome goes: the changes it made, or why none.
type EditReply = oneshot::Sender<Result<Vec<Change>, ControlError>>;

type Pending = (Asked, EditReply);

/// Commits `edits` as a group (see `pharos_control::group`), now, and
/// replies to each. Those the store refused are committed again after
/// catching up, as `pharos_control::retry` says (and as `ControlShell::apply`
/// does).
fn commit_edits(shell: &mut ControlShell, mut edits: Vec<Pending>) {
    if edits.is_empty() {
        return;
    }
    let started = Instant::now();
    let count = edits.len();
    let mut retries = Retries::default();
    while !edits.is_empty() {
        let now = unix_millis();
        let (group, replies): (Vec<Asked>, Vec<EditReply>) = edits.into_iter().unzip();
        let outcomes = group_commit(&mut Now { shell, now }, &group);
        let mut refused: Vec<(Asked, EditReply, Again, ControlError)> = Vec::new();
        for ((edit, done), outcome) in group.into_iter().zip(replies).zip(outcomes) {
            match (retries.again(&outcome), outcome) {
                (Some(again), Err(refusal)) => refused.push((edit, done, again, refusal)),
                (_, outcome) => drop(done.send(outcome)),
            }
        }
        if refused.is_empty() {
            break;
        }
        let caught_up = shell.found_news(now);
        edits = refused
            .into_iter()
            .filter_map(|(edit, done, again, refusal)| match retries.settle(again, &caught_up, refusal) {
                Ok(()) => Some((edit, done)),
                Err(outcome) => {
                    drop(done.send(Err(outcome)));
                    None
                }
            })
            .collect();
        retries.tried();
    }
    shell.published().activity.committed(count, started.elapsed().as_secs_f64());
}

/// The control plane at one moment, as a group commit commits to it.
struct Now<'a> {
    shell: &'a mut ControlShell,
    now: u64,
}

impl Committer for Now<'_> {
    fn state(&self) -> &State {
        self.shell.state()
    }

    fn commit(&mut self, next: State, changes: &[Change], authors: &[String]) -> Result<(), ControlError> {
        self.shell.apply_made(next, changes, authors, self.now)
    }
}

#[cfg(test)]
mod tests {
    use pharos_model::spec::ServiceSpec;
    use pharos_store::Store;

    use super::*;

    /// A control plane serving one zone, with no services yet.
    fn shell(dir: &std::path::Path) -> ControlShell {
        let zone = "$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\n";
        std::fs::write(dir.join("example.test.zone"), zone).unwrap();
        let text = "[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n[store]\npath = \"state.db\"\n";
        std::fs::write(dir.join("pharos.toml"), text).unwrap();
        open(Config::from_file(&dir.join("pharos.toml")).unwrap()).unwrap()
    }

    fn service(name: &str) -> ServiceSpec {
        serde_json::from_value(serde_json::json!({
            "name": name, "replica": [{ "id": "a", "address": "192.0.2.1" }, { "id": "b", "address": "192.0.2.2" }],
        }))
        .unwrap()
    }

    /// An edit that sets replica `a`'s weight of `name` from what it finds.
    fn add_weight(name: &'static str, extra: u32) -> Edit {
        Box::new(move |state: &State| {
            let mut service = pharos_control::edit::find_service(state, name)?.clone();
            service.replicas[0].weight += extra;
            Ok(vec![Change::PutService(service)])
        })
    }

    type Outcome = oneshot::Receiver<Result<Vec<Change>, ControlError>>;

    /// The token `ops` asks for `edits`.
    fn queue(edits: Vec<Edit>) -> (Vec<Request>, Vec<Outcome>) {
        edits
            .into_iter()
            .map(|edit| {
                let (done, reply) = oneshot::channel();
                (Request::Edit((Asked { author: "ops".into(), edit }, done)), reply)
            })
            .unzip()
    }

    #[test]
    fn a_batch_applies_in_order_and_refuses_only_the_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let mut shell = shell(dir.path());
        let put = |spec: ServiceSpec| -> Edit { Box::new(move |_: &State| Ok(vec![Change::PutService(spec.clone())])) };
        let (batch, mut replies) = queue(vec![
            put(service("www.example.test")),
            add_weight("www.example.test", 4),
            put(service("www.elsewhere.test")),
            add_weight("nosuch.example.test", 1),
            add_weight("www.example.test", 10),
        ]);
        serve_batch(&mut shell, batch);
        let outcomes: Vec<_> = replies.iter_mut().map(|reply| reply.try_recv().unwrap().map(|_| ())).collect();
        assert!(outcomes[0].is_ok() && outcomes[1].is_ok() && outcomes[4].is_ok(), "{outcomes:?}");
        assert!(matches!(&outcomes[2], Err(ControlError::Invalid(error)) if error.message.contains("not inside any served zone")));
        assert!(matches!(outcomes[3], Err(ControlError::NotFound(_))));
        // Both read-modify-writes landed: none overwrote the other.
        assert_eq!(shell.state().services.len(), 1);
        assert_eq!(shell.state().services[0].replicas[0].weight, 15);
        assert!(shell.snapshot().load().routes.service(b"\x03www\x07example\x04test\x00").is_some());
        drop(shell);
        let mut store = pharos_store::SqliteStore::open(&dir.path().join("state.db")).unwrap();
        let (reopened, _) = store.load().unwrap();
        assert_eq!(reopened.services[0].replicas[0].weight, 15, "committed to the store");
        let authors: Vec<Vec<String>> = store.changes_after(0).unwrap().into_iter().map(|(_, batch)| batch.authors).collect();
        assert!(authors.iter().all(|authors| authors == &["ops"]), "each batch names who asked: {authors:?}");
    }

    #[tokio::test]
    async fn the_handle_commits_lone_edits_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let handle = ControlThread::start(shell(dir.path()), Duration::from_millis(20)).unwrap();
        let spec = service("app.example.test");
        let changes = handle.edit("ops".into(), Box::new(move |_: &State| Ok(vec![Change::PutService(spec.clone())]))).await.unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(handle.state().services[0].name, "app.example.test");
        handle.reload().await.unwrap();
        let (first, second) = tokio::join!(
            handle.edit("ops".into(), add_weight("app.example.test", 1)),
            handle.edit("ci".into(), add_weight("app.example.test", 2))
        );
        assert!(first.is_ok() && second.is_ok());
        assert_eq!(handle.state().services[0].replicas[0].weight, 4);
    }
}
