//! One connection slot of an upstream's pool: a task that connects when a
//! query comes and no connection is open, carries queries over the
//! connection while it lives, and connects again (resuming the TLS
//! session) for the next query after it dies. What differs between DNS
//! over TLS and over QUIC is behind [`Transport`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use crate::upstream::Upstream;

/// Queries a slot may have waiting. A try finding the queue full goes
/// elsewhere at once.
pub const QUEUE: usize = 1024;
/// Queries a connection takes from its queue at once.
pub const BATCH: usize = 64;

/// Why a connection was closed by the forwarder, for the log.
pub const SILENT: &str = "dropped, as it owed answers and received none for too long";
pub const STOPPING: &str = "the forwarder is stopping";

/// An answer, and how long after the query left it came.
#[derive(Debug)]
pub struct Answered {
    pub message: Vec<u8>,
    pub rtt: Duration,
}

/// One try of a query, handed to a slot: the message and the way back to
/// the try. A request dropped unanswered tells the try it failed.
pub struct Request {
    /// The client's message; the transport sets the ID it goes under.
    pub message: Vec<u8>,
    sent: Option<oneshot::Sender<Instant>>,
    sent_at: Option<Instant>,
    answer: oneshot::Sender<Answered>,
}

/// The try's side of a request.
pub struct Pending {
    /// When the query left: its retransmission timer starts then.
    pub sent: oneshot::Receiver<Instant>,
    pub answer: oneshot::Receiver<Answered>,
}

impl Request {
    pub fn new(message: Vec<u8>) -> (Request, Pending) {
        let (sent, sent_receiver) = oneshot::channel();
        let (answer, answer_receiver) = oneshot::channel();
        (Request { message, sent: Some(sent), sent_at: None, answer }, Pending { sent: sent_receiver, answer: answer_receiver })
    }

    /// The query is leaving on a connection now.
    pub fn mark_sent(&mut self) {
        let now = Instant::now();
        self.sent_at = Some(now);
        if let Some(sent) = self.sent.take() {
            let _ = sent.send(now);
        }
    }

    /// Hands `message` to the try (if it still waits), and returns the
    /// round trip it took.
    pub fn answer(self, message: Vec<u8>) -> Duration {
        let rtt = self.sent_at.map_or(Duration::ZERO, |sent_at| sent_at.elapsed());
        let _ = self.answer.send(Answered { message, rtt });
        rtt
    }

    /// True once no one waits for the answer: another try was answered
    /// first, or the query was given up.
    pub fn is_abandoned(&self) -> bool {
        self.answer.is_closed()
    }

    /// Runs `work` to its end, unless no one waits for the answer first.
    pub async fn unless_abandoned<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            output = work => Some(output),
            () = self.answer.closed() => None,
        }
    }
}

/// Where a connection belongs: slot `index` of `upstream`'s pool.
#[derive(Clone)]
pub struct PoolSlot {
    pub upstream: Arc<Upstream>,
    pub index: usize,
}

impl PoolSlot {
    /// The slot's connection answered a query `rtt` after it left.
    pub fn on_answer(&self, rtt: Duration) {
        self.upstream.on_answer(self.index, rtt);
    }

    /// Tells from now on when the slot's connection has gone silent, to be
    /// dropped.
    pub fn silenced(&self) -> watch::Receiver<()> {
        self.upstream.silenced(self.index)
    }
}

/// A way of carrying DNS to an upstream.
pub trait Transport: Send + 'static {
    type Connection: Send;

    /// Connects and completes the handshake; returns the connection and the
    /// round-trip time the handshake measured.
    fn connect(&mut self) -> impl Future<Output = anyhow::Result<(Self::Connection, Duration)>> + Send;

    /// Carries `first`, then every query from `queue`, over `connection`
    /// of `slot` until it dies or goes silent; returns why it closed.
    fn serve(
        &mut self,
        connection: Self::Connection,
        first: Request,
        queue: &mut mpsc::Receiver<Request>,
        slot: &PoolSlot,
    ) -> impl Future<Output = String> + Send;

    /// Server certificates verified by this slot's handshakes so far.
    fn certificates_verified(&self) -> u64;
}

/// Runs `slot` until the forwarder stops.
pub async fn run<T: Transport>(mut transport: T, slot: PoolSlot, mut queue: mpsc::Receiver<Request>) {
    let PoolSlot { upstream, index } = &slot;
    while let Some(first) = queue.recv().await {
        let Some(connection) = connect(&mut transport, upstream, *index).await else {
            // The queries waiting for this connection fail now, and so
            // each goes on to its next try at once.
            drop(first);
            while queue.try_recv().is_ok() {}
            continue;
        };
        let closed = transport.serve(connection, first, &mut queue, &slot).await;
        tracing::info!(upstream = %upstream.spec, connection = index, "connection closed: {closed}");
    }
}

async fn connect<T: Transport>(transport: &mut T, upstream: &Upstream, index: usize) -> Option<T::Connection> {
    let verified_before = transport.certificates_verified();
    let started = Instant::now();
    let limit = upstream.connect_timeout();
    let error = match tokio::time::timeout(limit, transport.connect()).await {
        Ok(Ok((connection, round_trip))) => {
            let resumed = transport.certificates_verified() == verified_before;
            upstream.on_connected(index, round_trip, resumed, started.elapsed());
            return Some(connection);
        }
        Ok(Err(error)) => error,
        Err(_) => anyhow::anyhow!("no handshake within {limit:?}"),
    };
    upstream.on_connect_failure(index, &error);
    None
}
