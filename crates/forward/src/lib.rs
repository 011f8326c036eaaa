//! `pharos forward`: the client side of persistent DNS connections. A
//! forwarder on the client's own host takes queries from stub resolvers
//! over UDP and TCP on loopback and sends them to upstream servers over a
//! small pool of long-lived, encrypted connections: DNS over TLS (RFC 7858)
//! or DNS over QUIC (RFC 9250), to Pharos or any server that speaks them.
//!
//! That is the deployment model of "Persistent DNS connections for improved
//! performance" (Jonglez, Birbalta, Heusse, IFIP Networking 2019): a lost
//! packet is resent by TCP or QUIC on their own RTT-based timers, where a
//! stub resolver over UDP waits one to five seconds. On top of that, a
//! query unanswered for its upstream's measured retransmission timeout
//! (RFC 6298) is hedged on a connection that does not have it yet, and the
//! first answer wins. Queries are pipelined; a connection that dies or goes
//! silent is made again at the next query, resuming its TLS session; an
//! upstream that fails is rested with backoff while the next in order
//! serves.
//!
//! The decisions are sans-IO, in plain structs tested without a network
//! or a clock: [`rtt`] (when to hedge), [`tries`] (where), [`silence`]
//! (whether a connection is alive), [`health`] (whether an upstream is
//! worth trying) and [`message`] (what is written).
//! The tasks around them are in `listen` (clients), `forwarder` (a query's
//! tries), `slot` (a pool's connections), `dot` and `doq` (the transports).

pub mod config;
pub mod health;
pub mod message;
pub mod rtt;
pub mod silence;
pub mod tries;

mod cli;
mod doq;
mod dot;
mod error;
mod forwarder;
mod framing;
mod ids;
mod listen;
mod pool;
mod request;
mod slot;
mod stats;
mod trust;
mod upstream;

use std::sync::Arc;

pub use cli::{ArgsError, ForwardArgs};
pub use config::{ConfigError, ForwardConfig};
pub use error::{ClientTlsError, ConnectError, ForwardError, RootsError, StreamError, TrustError};
use tokio::signal::unix::{SignalKind, signal};

use crate::forwarder::Forwarder;
use crate::stats::Stats;

/// Forwards until interrupted (SIGINT). Each SIGUSR1 logs the counters.
pub async fn run(config: ForwardConfig) -> Result<(), ForwardError> {
    let forwarder = Arc::new(Forwarder::start(&config, Arc::new(Stats::default()))?);
    for &address in &config.listen {
        listen::serve(address, forwarder.clone()).await?;
    }
    // Listening for SIGUSR1 before saying we are up: its default action
    // would end the process.
    let mut stats_requests = signal(SignalKind::user_defined1())?;
    let upstreams: Vec<String> = config.upstreams.iter().map(ToString::to_string).collect();
    tracing::info!(listen = ?config.listen, ?upstreams, "forwarding DNS");
    loop {
        tokio::select! {
            _ = stats_requests.recv() => forwarder.stats().log(),
            interrupted = tokio::signal::ctrl_c() => {
                forwarder.stats().log();
                return Ok(interrupted?);
            }
        }
    }
}
