//! One connection slot of an upstream's pool: a task that connects when a
//! query comes and no connection is open, carries queries over the
//! connection while it lives, and connects again (resuming the TLS
//! session) for the next query after it dies. What differs between DNS
//! over TLS and over QUIC is behind [`Transport`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::error::ConnectError;
use crate::request::Request;
use crate::upstream::Upstream;

/// Queries a connection takes from its queue at once.
pub const BATCH: usize = 64;

/// Why a connection was closed by the forwarder, for the log.
pub const SILENT: &str = "dropped, as it owed answers and received none for too long";
pub const STOPPING: &str = "the forwarder is stopping";

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
    fn connect(&mut self) -> impl Future<Output = Result<(Self::Connection, Duration), ConnectError>> + Send;

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
        Err(_) => ConnectError::Timeout(limit),
    };
    upstream.on_connect_failure(index, &error);
    None
}
