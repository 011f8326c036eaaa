//! The registry of open connections of every stream kind (TCP, TLS, HTTPS
//! and QUIC), for enforcing the caps: overall and per client address. A
//! new connection over a cap sheds the longest-idle one, of its client
//! (per-client cap) or of anyone (overall cap), and so does an accept
//! that finds no descriptor left. Connections idle past the timeout are
//! closed (RFC 7766 section 6.2.3).
//!
//! Touched on accept, shed and close only; a query sets its connection's
//! atomic clock and nothing else. Finding the longest-idle connection
//! goes through an [`IdleIndex`], not over every connection.
//!
//! The registry is what a server's stream transports share: it also
//! carries what they count and log ([`Observation`]), and counts the
//! connections it admits and sheds there.

mod idle;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

use crate::Observation;
use crate::config::TcpConfig;
use crate::metrics::Counters;
use idle::IdleIndex;

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

pub struct Registry {
    started: Instant,
    limits: TcpConfig,
    observation: Arc<Observation>,
    inner: Mutex<RegistryInner>,
    /// Set when the server stops: listeners stop accepting, connections
    /// answer what their clients already sent and close.
    draining: watch::Sender<bool>,
}

/// How long a draining connection waits for more of what its client sent
/// before it closes: long enough for pipelined queries already on their
/// way, short enough that a stop is quick.
pub const DRAIN_QUIET: Duration = Duration::from_millis(200);

#[derive(Default)]
struct RegistryInner {
    next_id: u64,
    open: HashMap<u64, Connection>,
    /// Every open connection, longest idle first.
    idle: IdleIndex,
    per_peer: HashMap<IpAddr, Peer>,
}

/// One client address's open connections.
#[derive(Default)]
struct Peer {
    connections: usize,
    /// Its connections, longest idle first.
    idle: IdleIndex,
}

/// A connection's place in the registry; leaving frees it.
pub struct Admission {
    registry: Arc<Registry>,
    id: u64,
    last_active: Arc<AtomicU64>,
    shed: Arc<Notify>,
}

impl Registry {
    pub fn new(limits: TcpConfig, observation: Arc<Observation>) -> Arc<Registry> {
        Arc::new(Registry { started: Instant::now(), limits, observation, inner: Mutex::default(), draining: watch::Sender::new(false) })
    }

    /// Starts the drain: no listener accepts from now on, and each open
    /// connection closes once its client has sent nothing for
    /// [`DRAIN_QUIET`], everything before answered.
    pub fn drain(&self) {
        self.draining.send_replace(true);
    }

    /// Resolves once the drain has started.
    pub async fn drained(&self) {
        let _ = self.draining.subscribe().wait_for(|&draining| draining).await;
    }

    /// What the server's transports count and log.
    pub fn observation(&self) -> &Observation {
        &self.observation
    }

    fn counters(&self) -> &Counters {
        &self.observation.counters
    }

    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RegistryInner> {
        self.inner.lock().expect("registry lock")
    }

    /// Admits a connection from `peer`, first shedding the longest-idle
    /// connection of that peer (if at its cap) or of anyone (if full).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        let mut inner = self.lock();
        if inner.per_peer.get(&peer).is_some_and(|known| known.connections >= self.limits.max_connections_per_client) {
            inner.shed_longest_idle(Some(peer), self.counters());
        } else if inner.open.len() >= self.limits.max_connections {
            inner.shed_longest_idle(None, self.counters());
        }
        let (id, now) = (inner.next_id, self.now_us());
        inner.next_id += 1;
        let last_active = Arc::new(AtomicU64::new(now));
        let shed = Arc::new(Notify::new());
        inner.open.insert(id, Connection { peer, last_active: last_active.clone(), shed: shed.clone() });
        self.counters().connection_opened();
        inner.idle.insert(id, now);
        let known = inner.per_peer.entry(peer).or_default();
        known.connections += 1;
        known.idle.insert(id, now);
        Admission { registry: self.clone(), id, last_active, shed }
    }

    /// Sheds the longest-idle connection of all, to free what it holds (a
    /// descriptor, when accept finds none left). False if none is open.
    pub fn shed_longest_idle(&self) -> bool {
        self.lock().shed_longest_idle(None, self.counters())
    }

    /// The limits every connection lives under.
    pub fn limits(&self) -> &TcpConfig {
        &self.limits
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.lock().open.len()
    }

    /// Closes every connection that has sent no complete query for the
    /// idle timeout, checking a few times per timeout, forever.
    pub async fn close_idle_connections(self: Arc<Self>) {
        let idle_ms = self.limits.idle_timeout_ms;
        let mut every = tokio::time::interval(Duration::from_millis((idle_ms / 4).clamp(10, 1000)));
        loop {
            every.tick().await;
            self.close_idle_since(self.now_us().saturating_sub(idle_ms * 1000));
        }
    }

    /// Closes the connections last active at `idle_since` or earlier.
    fn close_idle_since(&self, idle_since: u64) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        while let Some(id) = inner.idle.take_idle_since(idle_since, clock_of(&inner.open)) {
            inner.close(id, self.counters());
        }
    }
}

/// Reads the clock of a connection of `open`; `None` once it has closed.
fn clock_of(open: &HashMap<u64, Connection>) -> impl Fn(u64) -> Option<u64> {
    |id| open.get(&id).map(|connection| connection.last_active.load(Ordering::Relaxed))
}

/// [`clock_of`] for the index of `peer`'s connections: `None` too for a
/// connection counted as another peer's since (see [`Admission::reassign`]).
fn clock_of_peer(open: &HashMap<u64, Connection>, peer: IpAddr) -> impl Fn(u64) -> Option<u64> {
    move |id| open.get(&id).filter(|connection| connection.peer == peer).map(|connection| connection.last_active.load(Ordering::Relaxed))
}

impl RegistryInner {
    /// Sheds the longest-idle connection of `of_peer`, or of all; false if
    /// there is none. Each connection closed is counted in `counters`, as
    /// below.
    fn shed_longest_idle(&mut self, of_peer: Option<IpAddr>, counters: &Counters) -> bool {
        let taken = match of_peer {
            Some(peer) => match self.per_peer.get_mut(&peer) {
                Some(known) => known.idle.take_longest_idle(clock_of_peer(&self.open, peer)),
                None => return false,
            },
            None => self.idle.take_longest_idle(clock_of(&self.open)),
        };
        match taken {
            Some(id) => self.close(id, counters),
            None => false,
        }
    }

    /// Removes connection `id` and tells it to close; false if it had left.
    fn close(&mut self, id: u64, counters: &Counters) -> bool {
        let Some(connection) = self.remove(id, counters) else { return false };
        counters.connection_shed();
        connection.shed.notify_one();
        true
    }

    fn remove(&mut self, id: u64, counters: &Counters) -> Option<Connection> {
        let connection = self.open.remove(&id)?;
        counters.connection_closed();
        let open = &self.open;
        self.idle.forget_closed(open.len(), |id| open.contains_key(&id));
        self.leave_peer(connection.peer);
        Some(connection)
    }

    /// One connection fewer for `peer`.
    fn leave_peer(&mut self, peer: IpAddr) {
        let open = &self.open;
        if let Some(known) = self.per_peer.get_mut(&peer) {
            known.connections -= 1;
            match known.connections {
                0 => drop(self.per_peer.remove(&peer)),
                left => known.idle.forget_closed(left, |id| open.get(&id).is_some_and(|connection| connection.peer == peer)),
            }
        }
    }

    /// Counts connection `id` as `client`'s from now on, first shedding
    /// the longest-idle connection of `client` if it is at `cap`.
    fn reassign(&mut self, id: u64, client: IpAddr, cap: usize, counters: &Counters) {
        let Some(connection) = self.open.get_mut(&id) else { return };
        let (from, last_active) = (connection.peer, connection.last_active.load(Ordering::Relaxed));
        if from == client {
            return;
        }
        connection.peer = client;
        self.leave_peer(from);
        if self.per_peer.get(&client).is_some_and(|known| known.connections >= cap) {
            self.shed_longest_idle(Some(client), counters);
        }
        let known = self.per_peer.entry(client).or_default();
        known.connections += 1;
        known.idle.insert(id, last_active);
    }
}

impl Admission {
    /// Marks the connection active: it has just had a complete query. The
    /// clock only goes forward, even when two of the connection's requests
    /// (HTTP/2, QUIC streams) finish at once on two threads.
    pub(crate) fn touch(&self) {
        self.last_active.fetch_max(self.registry.now_us(), Ordering::Relaxed);
    }

    /// Runs `work` to its end, or until the connection is shed (gone idle,
    /// or crowded out by newer ones), whichever comes first. Once the
    /// server drains, `work` has [`DRAIN_QUIET`] left to end.
    pub(crate) async fn unless_shed<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let mut work = std::pin::pin!(work);
        tokio::select! {
            output = &mut work => return Some(output),
            () = self.shed.notified() => return None,
            () = self.registry.drained() => {}
        }
        tokio::select! {
            output = tokio::time::timeout(DRAIN_QUIET, work) => output.ok(),
            () = self.shed.notified() => None,
        }
    }

    /// True if the connection has been idle for the idle timeout: it was
    /// shed for that, not to make room.
    pub(crate) fn is_idle(&self) -> bool {
        let idle_us = self.registry.now_us().saturating_sub(self.last_active.load(Ordering::Relaxed));
        idle_us / 1000 >= self.registry.limits.idle_timeout_ms
    }

    /// Counts the connection as `client`'s from now on: behind a proxy,
    /// the client its PROXY header names, so that the cap per client is
    /// each client's and not the proxy's.
    pub(crate) fn reassign(&self, client: IpAddr) {
        let cap = self.registry.limits.max_connections_per_client;
        self.registry.lock().reassign(self.id, client, cap, self.registry.counters());
    }

    /// What the server's transports count and log.
    pub(crate) fn observation(&self) -> &Observation {
        self.registry.observation()
    }

    /// The limits the connection lives under.
    pub(crate) fn limits(&self) -> &TcpConfig {
        self.registry.limits()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.registry.lock().remove(self.id, self.registry.counters());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LATER: u64 = 1 << 40;

    fn registry(max_connections: usize, max_connections_per_client: usize) -> Arc<Registry> {
        Registry::new(
            TcpConfig { max_connections, max_connections_per_client, ..TcpConfig::default() },
            Arc::new(Observation::new(Counters::new(true, false))),
        )
    }

    fn address(last_octet: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last_octet])
    }

    /// Which of `admissions` are still open (not shed).
    fn still_open(registry: &Registry, admissions: &[Admission]) -> Vec<bool> {
        let inner = registry.lock();
        admissions.iter().map(|admission| inner.open.contains_key(&admission.id)).collect()
    }

    /// Sets a connection's clock to `at`, later than any admission here.
    fn touch_at(admission: &Admission, at: u64) {
        admission.last_active.store(at, Ordering::Relaxed);
    }

    #[test]
    fn a_full_registry_sheds_the_longest_idle_connection_of_all() {
        let registry = registry(3, 3);
        let mut admissions: Vec<Admission> = (1..=3).map(|octet| registry.admit(address(octet))).collect();
        touch_at(&admissions[0], LATER);
        admissions.push(registry.admit(address(4)));
        assert_eq!(still_open(&registry, &admissions), [true, false, true, true]);
        touch_at(&admissions[2], LATER + 1);
        admissions.push(registry.admit(address(5)));
        assert_eq!(still_open(&registry, &admissions), [true, false, true, false, true]);
        assert_eq!(registry.open_connections(), 3);
    }

    #[test]
    fn a_client_at_its_cap_sheds_its_own_longest_idle_connection() {
        let registry = registry(10, 2);
        let other = registry.admit(address(9));
        let mine: Vec<Admission> = (0..2).map(|_| registry.admit(address(1))).collect();
        touch_at(&mine[0], LATER);
        let newest = registry.admit(address(1));
        assert_eq!(still_open(&registry, &[other]), [true], "another client's idler connection stays");
        assert_eq!(still_open(&registry, &mine), [true, false]);
        assert_eq!(still_open(&registry, &[newest]), [true]);
    }

    #[test]
    fn behind_a_proxy_each_client_has_its_own_cap_and_the_proxy_none_of_theirs() {
        let (proxy, client, other) = (address(4), address(1), address(2));
        let registry = registry(10, 2);
        // Each admitted as the proxy's, then its header read.
        let relayed: Vec<Admission> = [client, client, other, other]
            .into_iter()
            .map(|named| {
                let admission = registry.admit(proxy);
                admission.reassign(named);
                admission
            })
            .collect();
        assert_eq!(still_open(&registry, &relayed), [true; 4], "four through one proxy under a cap of two");
        touch_at(&relayed[0], LATER);
        let third = registry.admit(proxy);
        third.reassign(client);
        assert_eq!(still_open(&registry, &relayed), [true, false, true, true], "the client's own idlest goes");
        assert!(still_open(&registry, &[third])[0]);
        let waiting: Vec<Admission> = (0..2).map(|_| registry.admit(proxy)).collect();
        assert_eq!(still_open(&registry, &relayed), [true, false, true, true], "the proxy's cap sheds none of its clients'");
        assert_eq!(still_open(&registry, &waiting), [true, true]);
    }

    #[test]
    fn shedding_on_demand_takes_the_idlest_until_none_is_left() {
        let registry = registry(10, 10);
        let admissions: Vec<Admission> = (1..=2).map(|octet| registry.admit(address(octet))).collect();
        touch_at(&admissions[0], LATER);
        assert!(registry.shed_longest_idle());
        assert_eq!(still_open(&registry, &admissions), [true, false]);
        assert!(registry.shed_longest_idle());
        assert!(!registry.shed_longest_idle(), "nothing left to shed");
    }

    #[test]
    fn closed_connections_leave_their_client_and_the_indexes() {
        let registry = registry(10, 2);
        let first = registry.admit(address(1));
        drop(registry.admit(address(1)));
        let second = registry.admit(address(1));
        assert_eq!(still_open(&registry, &[first, second]), [true, true], "the closed one made room under the client's cap");
        drop(registry.admit(address(2)));
        assert!(!registry.lock().per_peer.contains_key(&address(2)), "a client with nothing open is forgotten");
    }

    #[test]
    fn the_sweep_closes_exactly_those_idle_past_the_cutoff() {
        let registry = registry(10, 10);
        let admissions: Vec<Admission> = (1..=3).map(|octet| registry.admit(address(octet))).collect();
        touch_at(&admissions[1], LATER);
        registry.close_idle_since(LATER - 1);
        assert_eq!(still_open(&registry, &admissions), [false, true, false]);
        registry.close_idle_since(LATER);
        assert_eq!(still_open(&registry, &admissions), [false, false, false]);
    }
}
