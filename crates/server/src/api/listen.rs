//! How the control API's connections arrive: over plain TCP, or over TLS
//! with the certificate of `[tls]` (`[control] tls = true`); either way
//! with the peer's address ([`Peer`]), by which failed authentications
//! are counted.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The address a request came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes under way at most; beyond, new connections wait in the
/// kernel's backlog.
const MOST_HANDSHAKES: usize = 256;

/// A TCP listener whose connections are handed on once their TLS
/// handshake is done. Handshakes run side by side: a slow client holds up
/// no other.
pub(crate) struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    pub(crate) fn new(listener: TcpListener, acceptor: TlsAcceptor) -> TlsListener {
        TlsListener { listener, acceptor, handshakes: JoinSet::new() }
    }

    /// Starts the handshake of a connection from `peer`; a failed or slow
    /// one is dropped (logged at debug: any client can fail one).
    fn handshake(&mut self, stream: TcpStream, peer: SocketAddr) {
        let accepting = self.acceptor.accept(stream);
        self.handshakes.spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, accepting).await {
                Ok(Ok(stream)) => Some((stream, peer)),
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "control API: TLS handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!(%peer, "control API: TLS handshake timed out");
                    None
                }
            }
        });
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                // None only when no handshake is under way: then the
                // branch waits out this round and the listener is polled.
                Some(joined) = self.handshakes.join_next() => {
                    if let Ok(Some(secured)) = joined {
                        return secured;
                    }
                }
                accepted = self.listener.accept(), if self.handshakes.len() < MOST_HANDSHAKES => match accepted {
                    Ok((stream, peer)) => self.handshake(stream, peer),
                    // Out of descriptors, most likely: a pause, not a spin.
                    Err(error) => {
                        tracing::warn!(%error, "control API: cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}
