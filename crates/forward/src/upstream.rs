//! One upstream server: its spec, how its path has been doing (round-trip
//! time, standing, and each connection's silence), and the queues of its
//! pool's connection slots.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pharos_wire::causes;
use tokio::sync::{mpsc, watch};

use crate::config::{ForwardConfig, UpstreamSpec};
use crate::error::ConnectError;
use crate::health::Health;
use crate::request::{Pending, QUEUE, Request};
use crate::rtt::{INITIAL_RTO, RttEstimator};
use crate::silence::{Silence, silence_limit};
use crate::stats::Stats;

/// An upstream, shared by its slots' tasks and the queries' tries.
pub struct Upstream {
    pub spec: UpstreamSpec,
    path: Mutex<PathState>,
    slots: Vec<mpsc::Sender<Request>>,
    /// Per slot: told when its connection has gone silent, to drop it.
    silenced: Vec<watch::Sender<()>>,
    stats: Arc<Stats>,
}

/// What the upstream's answers and silences have shown.
struct PathState {
    rtt: RttEstimator,
    health: Health,
    /// Per slot, of its current connection.
    silences: Vec<Silence>,
}

impl Upstream {
    /// An upstream of `config`'s pool size, and the queues its slots
    /// are to take queries from (`crate::pool` starts them).
    pub fn new(spec: UpstreamSpec, config: &ForwardConfig, stats: Arc<Stats>) -> (Arc<Upstream>, Vec<mpsc::Receiver<Request>>) {
        let (slots, queues): (Vec<_>, Vec<_>) = (0..config.connections).map(|_| mpsc::channel(QUEUE)).unzip();
        let path = PathState {
            rtt: RttEstimator::new(config.rto),
            health: Health::default(),
            silences: vec![Silence::default(); config.connections],
        };
        let silenced = (0..config.connections).map(|_| watch::Sender::new(())).collect();
        (Arc::new(Upstream { spec, path: Mutex::new(path), slots, silenced, stats }), queues)
    }

    fn path(&self) -> MutexGuard<'_, PathState> {
        self.path.lock().expect("upstream path state")
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// Hands a query to connection slot `index`; `None` if its queue is full.
    pub fn submit(&self, index: usize, message: &[u8]) -> Option<Pending> {
        let (request, pending) = Request::new(message.to_vec());
        self.slots[index].try_send(request).ok()?;
        Some(pending)
    }

    /// False while the upstream rests.
    pub fn is_available(&self, now: Instant) -> bool {
        self.path().health.is_available(now)
    }

    /// The retransmission timeout of a query sent now.
    pub fn rto(&self) -> Duration {
        self.path().rtt.rto()
    }

    /// How long a handshake may take: the initial RTO, which is how long
    /// the kernel waits before it resends a lost SYN, and then an RTO for
    /// each round trip of the handshake.
    pub fn connect_timeout(&self) -> Duration {
        INITIAL_RTO + self.rto() * self.spec.protocol.handshake_round_trips()
    }

    /// Slot `index`'s connection answered a query `rtt` after it left: a
    /// round-trip sample, the connection alive, the upstream in good
    /// standing.
    pub fn on_answer(&self, index: usize, rtt: Duration) {
        let mut path = self.path();
        path.rtt.on_sample(rtt);
        path.health.on_answer();
        path.silences[index].on_answer(Instant::now());
    }

    /// Tells slot `index` from now on when its connection has gone silent.
    pub fn silenced(&self, index: usize) -> watch::Receiver<()> {
        self.silenced[index].subscribe()
    }

    /// A try sent at `sent_at` went unanswered for its RTO: the timeout of
    /// the next backs off.
    pub fn on_timeout(&self, sent_at: Instant, now: Instant) {
        self.path().rtt.on_timeout(sent_at, now);
    }

    /// A try sent at `sent_at` on slot `index` is still unanswered at `now`.
    /// If its connection has owed answers for longer than the transport
    /// takes to repair losses, with none received, it is dropped, so that
    /// the slot makes a fresh one: a connection whose peer has vanished (a
    /// QUIC server restarted, say) may otherwise look open for long.
    /// Returns whether it was.
    pub fn drop_if_silent(&self, index: usize, sent_at: Instant, now: Instant) -> bool {
        let silent = {
            let mut path = self.path();
            let limit = silence_limit(path.rtt.srtt());
            path.silences[index].is_dead(sent_at, now, limit).then_some(limit)
        };
        let Some(limit) = silent else { return false };
        tracing::warn!(upstream = %self.spec, connection = index, ?limit, "the connection owed answers and received none for that long: dropping it");
        self.silenced[index].send_replace(());
        true
    }

    /// Rests the upstream, so that the next in order takes its queries.
    pub fn rest(&self, now: Instant) {
        let rest = self.path().health.on_failure(now);
        tracing::warn!(upstream = %self.spec, ?rest, "resting the upstream");
    }

    /// Slot `index` has a new connection, whose handshake measured
    /// `round_trip` and took `took` in all.
    pub fn on_connected(&self, index: usize, round_trip: Duration, resumed: bool, took: Duration) {
        {
            let mut path = self.path();
            path.rtt.on_handshake(round_trip);
            path.silences[index] = Silence::default();
        }
        Stats::count(&self.stats.connections);
        Stats::count(if resumed { &self.stats.resumed_handshakes } else { &self.stats.full_handshakes });
        let handshake = if resumed { "resumed" } else { "full" };
        tracing::info!(upstream = %self.spec, connection = index, handshake, ?round_trip, ?took, "connected");
    }

    /// Slot `index` could not connect: the upstream rests.
    pub fn on_connect_failure(&self, index: usize, error: &ConnectError) {
        Stats::count(&self.stats.connect_failures);
        let rest = self.path().health.on_failure(Instant::now());
        tracing::warn!(upstream = %self.spec, connection = index, ?rest, "cannot connect: {}", causes(error));
    }
}
