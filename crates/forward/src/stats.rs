//! Counters of what the forwarder has done, logged on SIGUSR1 and at exit,
//! so that an operator (or a test) can see its connections, handshakes and
//! retransmissions without a debugger.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Stats {
    /// Client queries read.
    pub queries: AtomicU64,
    /// Queries answered from an upstream.
    pub answered: AtomicU64,
    /// Queries answered SERVFAIL: no upstream answered within the tries.
    pub servfail: AtomicU64,
    /// UDP answers truncated to the client's size limit.
    pub truncated: AtomicU64,
    /// Tries after a query's first.
    pub retransmissions: AtomicU64,
    /// Tries that went unanswered for their retransmission timeout.
    pub timeouts: AtomicU64,
    /// Upstream connections made, and how their handshakes went.
    pub connections: AtomicU64,
    pub full_handshakes: AtomicU64,
    pub resumed_handshakes: AtomicU64,
    pub connect_failures: AtomicU64,
    /// The most queries outstanding on one upstream connection at once.
    pub peak_in_flight: AtomicU64,
}

impl Stats {
    pub fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One log line with every counter, as `name=value`.
    pub fn log(&self) {
        let value = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        tracing::info!(
            queries = value(&self.queries),
            answered = value(&self.answered),
            servfail = value(&self.servfail),
            truncated = value(&self.truncated),
            retransmissions = value(&self.retransmissions),
            timeouts = value(&self.timeouts),
            connections = value(&self.connections),
            full_handshakes = value(&self.full_handshakes),
            resumed_handshakes = value(&self.resumed_handshakes),
            connect_failures = value(&self.connect_failures),
            peak_in_flight = value(&self.peak_in_flight),
            "stats"
        );
    }
}

/// The queries outstanding on one connection, feeding the peak.
#[derive(Debug)]
pub struct InFlight {
    count: AtomicU64,
    stats: Arc<Stats>,
}

/// One query outstanding on a connection, until dropped.
#[derive(Debug)]
pub struct InFlightQuery(Arc<InFlight>);

impl InFlight {
    pub fn new(stats: Arc<Stats>) -> Arc<InFlight> {
        Arc::new(InFlight { count: AtomicU64::new(0), stats })
    }

    pub fn enter(self: &Arc<Self>) -> InFlightQuery {
        let count = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        self.stats.peak_in_flight.fetch_max(count, Ordering::Relaxed);
        InFlightQuery(self.clone())
    }
}

impl Drop for InFlightQuery {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::Relaxed);
    }
}
