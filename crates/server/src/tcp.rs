//! DNS over TCP (RFC 7766): two-octet length framing, many queries per
//! connection, answered as soon as each is read (pipelining), with an idle
//! timeout and caps on connections that shed the longest-idle one first.
//! DNS over TLS is the same conversation inside TLS, so the connection loop
//! here serves any byte stream, and the registry counts every kind of
//! connection: TCP, TLS, HTTPS and QUIC.
//!
//! Each connection is its own task: a client that stalls, reads slowly or
//! sends half a message holds only its own task, never another's.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use pharos_answer::{Client, ResponseOptions, Transport, respond_with};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::config::TcpConfig;
use crate::snapshot::SharedSnapshot;

/// Read buffer per connection; grows only for a message that needs it.
const READ_CHUNK: usize = 16 * 1024;

/// What the registry knows of one open connection.
struct Connection {
    peer: IpAddr,
    /// Microseconds since the registry started, at the last complete
    /// query: fine enough that a connection's query and another's arrival
    /// are seldom at the same instant, which would make "idle longest" a tie.
    last_active: Arc<AtomicU64>,
    /// Told when the connection should close to make room for another.
    shed: Arc<Notify>,
}

/// Open connections, for enforcing the caps. Touched on accept and close
/// only; a query updates its connection's atomic clock and nothing else.
pub struct Registry {
    started: Instant,
    limits: TcpConfig,
    inner: Mutex<RegistryInner>,
}

#[derive(Default)]
struct RegistryInner {
    next_id: u64,
    open: HashMap<u64, Connection>,
    per_peer: HashMap<IpAddr, usize>,
}

/// A connection's place in the registry; leaving frees it.
pub struct Admission {
    registry: Arc<Registry>,
    id: u64,
    last_active: Arc<AtomicU64>,
    shed: Arc<Notify>,
}

impl Registry {
    pub fn new(limits: TcpConfig) -> Arc<Registry> {
        Arc::new(Registry { started: Instant::now(), limits, inner: Mutex::default() })
    }

    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    /// Admits a connection from `peer`, first shedding the longest-idle
    /// connection of that peer (if at its cap) or of anyone (if full).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        let mut inner = self.inner.lock().expect("registry lock");
        if inner.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_connections_per_client {
            inner.shed_longest_idle(Some(peer));
        } else if inner.open.len() >= self.limits.max_connections {
            inner.shed_longest_idle(None);
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let last_active = Arc::new(AtomicU64::new(self.now_us()));
        let shed = Arc::new(Notify::new());
        inner.open.insert(id, Connection { peer, last_active: last_active.clone(), shed: shed.clone() });
        *inner.per_peer.entry(peer).or_default() += 1;
        Admission { registry: self.clone(), id, last_active, shed }
    }

    /// The limits every connection lives under.
    pub fn limits(&self) -> &TcpConfig {
        &self.limits
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.inner.lock().expect("registry lock").open.len()
    }
}

impl RegistryInner {
    fn shed_longest_idle(&mut self, of_peer: Option<IpAddr>) {
        let candidate = self
            .open
            .iter()
            .filter(|(_, connection)| of_peer.is_none_or(|peer| connection.peer == peer))
            // Ties (same microsecond) go to the older connection.
            .min_by_key(|&(&id, connection)| (connection.last_active.load(Ordering::Relaxed), id))
            .map(|(&id, _)| id);
        if let Some(connection) = candidate.and_then(|id| self.remove(id)) {
            connection.shed.notify_one();
        }
    }

    fn remove(&mut self, id: u64) -> Option<Connection> {
        let connection = self.open.remove(&id)?;
        if let Some(count) = self.per_peer.get_mut(&connection.peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&connection.peer);
            }
        }
        Some(connection)
    }
}

impl Registry {
    /// Closes every connection that has sent no complete query for the
    /// idle timeout (RFC 7766 section 6.2.3), checking a few times per
    /// timeout, forever.
    pub async fn close_idle_connections(self: Arc<Self>) {
        let idle_ms = self.limits.idle_timeout_ms;
        let mut every = tokio::time::interval(Duration::from_millis((idle_ms / 4).clamp(10, 1000)));
        loop {
            every.tick().await;
            let now = self.now_us();
            let mut inner = self.inner.lock().expect("registry lock");
            let idle: Vec<u64> = inner
                .open
                .iter()
                .filter(|(_, connection)| millis_since_touch(&connection.last_active, now) >= idle_ms)
                .map(|(&id, _)| id)
                .collect();
            for connection in idle.into_iter().filter_map(|id| inner.remove(id)) {
                connection.shed.notify_one();
            }
        }
    }
}

/// Whole milliseconds from the last touch of `last_active` to `now_us`.
fn millis_since_touch(last_active: &AtomicU64, now_us: u64) -> u64 {
    now_us.saturating_sub(last_active.load(Ordering::Relaxed)) / 1000
}

impl Admission {
    /// Marks the connection active: it has just had a complete query.
    pub(crate) fn touch(&self) {
        self.last_active.store(self.registry.now_us(), Ordering::Relaxed);
    }

    /// Runs `work` to its end, or until the connection is shed (gone idle,
    /// or crowded out by newer ones), whichever comes first.
    pub(crate) async fn unless_shed<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            output = work => Some(output),
            () = self.shed.notified() => None,
        }
    }

    /// True if the connection has been idle for the idle timeout: it was
    /// shed for that, not to make room.
    pub(crate) fn is_idle(&self) -> bool {
        millis_since_touch(&self.last_active, self.registry.now_us()) >= self.registry.limits.idle_timeout_ms
    }

    /// The limits the connection lives under.
    pub(crate) fn limits(&self) -> &TcpConfig {
        self.registry.limits()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.registry.inner.lock().expect("registry lock").remove(self.id);
    }
}

/// A TCP listener on `address` for `transport`, logged.
pub(crate) async fn bind(address: SocketAddr, transport: &str) -> anyhow::Result<TcpListener> {
    let listener = TcpListener::bind(address).await.with_context(|| format!("cannot listen for {transport} on TCP {address}"))?;
    tracing::info!(%address, "serving {transport}");
    Ok(listener)
}

/// Accepts connections on `listener` forever, one task each. Each
/// connection's random source is drawn from `rng`.
pub async fn serve(listener: TcpListener, snapshot: SharedSnapshot, registry: Arc<Registry>, rng: SmallRng) {
    let options = ResponseOptions { keepalive: Some(registry.limits().keepalive_timeout()), pad: false };
    accept_each(listener, registry, rng, move |stream, peer, admission, rng| {
        let client = Client { address: peer.ip(), transport: Transport::Stream };
        serve_connection(stream, client, options, snapshot.clone(), admission, rng)
    })
    .await
}

/// Accepts connections on `listener` forever. Each is admitted to the
/// registry, then served by `serve` in a task of its own, with a random
/// source drawn from `rng`.
pub(crate) async fn accept_each<Serve, Served>(listener: TcpListener, registry: Arc<Registry>, mut rng: SmallRng, serve: Serve)
where
    Serve: Fn(TcpStream, SocketAddr, Admission, SmallRng) -> Served,
    Served: Future<Output = ()> + Send + 'static,
{
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors and the like: keep serving those we have.
                tracing::warn!(%error, "accept failed");
                tokio::task::yield_now().await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let admission = registry.admit(peer.ip());
        tokio::spawn(serve(stream, peer, admission, SmallRng::from_rng(&mut rng)));
    }
}

/// Reads framed queries from `stream` and writes framed answers, with
/// `options` in their OPT records, until the client closes, goes idle,
/// stops reading, or is shed.
pub(crate) async fn serve_connection(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    client: Client,
    options: ResponseOptions,
    snapshot: SharedSnapshot,
    admission: Admission,
    mut rng: SmallRng,
) {
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut output: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        // Idle connections are closed by the registry's sweeper through
        // the shed signal, so no read needs a timer of its own.
        let Some(Ok(1..)) = admission.unless_shed(stream.read_buf(&mut input)).await else { return };
        let consumed = answer_frames(&input, &client, &options, &snapshot, &mut rng, &mut output);
        input.drain(..consumed);
        if consumed > 0 {
            admission.touch();
        }
        if !output.is_empty() {
            if !write_answers(&mut stream, &output, admission.limits().write_timeout()).await {
                return;
            }
            output.clear();
        }
        if input.capacity() - input.len() < 512 {
            input.reserve(READ_CHUNK);
        }
    }
}

/// Writes `output`, waiting up to `timeout` for a client that reads
/// slowly. False if the connection should close.
async fn write_answers(stream: &mut (impl AsyncWrite + Unpin), output: &[u8], timeout: Duration) -> bool {
    let written = async {
        stream.write_all(output).await?;
        // TLS holds records back until flushed; for TCP this does nothing.
        stream.flush().await
    };
    matches!(tokio::time::timeout(timeout, written).await, Ok(Ok(())))
}

/// Answers every complete frame at the start of `input`, appending framed
/// responses to `output`; returns how many input octets were used.
pub fn answer_frames(
    input: &[u8],
    client: &Client,
    options: &ResponseOptions,
    snapshot: &SharedSnapshot,
    rng: &mut SmallRng,
    output: &mut Vec<u8>,
) -> usize {
    let current = snapshot.load();
    let mut consumed = 0;
    while let Some(length) = input.get(consumed..consumed + 2).map(|prefix| u16::from_be_bytes([prefix[0], prefix[1]]) as usize) {
        let Some(message) = input.get(consumed + 2..consumed + 2 + length) else { break };
        let length_at = output.len();
        output.extend_from_slice(&[0, 0]);
        if respond_with(message, client, options, &current, rng, output) {
            let response_len = (output.len() - length_at - 2) as u16;
            output[length_at..length_at + 2].copy_from_slice(&response_len.to_be_bytes());
        } else {
            output.truncate(length_at);
        }
        consumed += 2 + length;
    }
    consumed
}
