//! The Service Dispatcher's decision for each datagram that reaches a
//! service address (Artemis section 3.4), without the sockets: which
//! replica or which other data center's dispatcher gets it, or whether to
//! answer Version Negotiation, wait for the rest of a ClientHello, or drop.
//!
//! - A client's first flight: the ClientHello is reassembled
//!   ([`ClientHelloTable`]), its SNI names the service, and the routing
//!   core chooses the replica through the one door, `pharos_route::route`,
//!   with the client's own address. The buffered datagrams go out in
//!   arrival order, unmodified.
//! - Later packets of that first flight (retransmitted Initials, 0-RTT)
//!   still carry the client's DCID: a small bounded map remembers where
//!   that (client, DCID) went, for a while.
//! - Everything after carries a connection ID the replica issued, which
//!   names it ([`crate::replica_cid`]): forwarded with no state at all.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pharos_route::{Asker, Explanation, Family, Routes, route};
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::client_hello::{ClientHello, ClientHelloTable, Decoded, Limits};
use crate::initial::{ConnectionId, DropReason, long_header_ids};
use crate::replica_cid::{self, REPLICA_CID_LEN};
use crate::service_id::{CanonicalName, ServiceIdMap};

/// Where a datagram goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A replica in this data center, by its unicast address.
    Replica(IpAddr),
    /// The dispatcher of the data center that holds the chosen replica,
    /// and that replica: the tunnel carries its address, so the decision
    /// is made once, here, and the far dispatcher only delivers (routing
    /// again there could choose differently and send it back).
    Dispatcher { datacenter: String, address: IpAddr, replica: IpAddr },
}

/// What to do with a datagram.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send these datagrams, unmodified and in this order, to `target`.
    /// `explanation` is the routing core's, when one was asked for and
    /// the routing core was asked.
    Forward {
        target: Target,
        datagrams: Vec<Vec<u8>>,
        explanation: Option<Explanation>,
    },
    /// Answer the client with this Version Negotiation packet.
    SendVersionNegotiation(Vec<u8>),
    /// The ClientHello is not complete yet; the datagram is kept.
    Wait,
    Drop(Dropped),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    #[error("{0}")]
    Initial(#[from] DropReason),
    #[error("no service is named {0}")]
    UnknownService(CanonicalName),
    #[error("{name} has the service address {expected}, not {arrived_on}")]
    WrongServiceAddress { name: CanonicalName, expected: IpAddr, arrived_on: IpAddr },
    #[error("the routing core chose no replica for {0}")]
    NoReplica(CanonicalName),
    #[error("no dispatcher is known for data center {0}")]
    UnknownDatacenter(String),
    #[error("short-header packet without a replica connection ID")]
    NotReplicaConnectionId,
    #[error("no replica has id {0}")]
    UnknownReplicaId(u16),
}

/// A replica as connection IDs name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaAt {
    pub address: IpAddr,
    /// None: this data center.
    pub datacenter: Option<String>,
}

/// Where things are, as this dispatcher sees them.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// This dispatcher's data center.
    pub datacenter: String,
    /// The other data centers' dispatchers.
    pub dispatchers: HashMap<String, IpAddr>,
    /// Replicas by the id their connection IDs carry.
    pub replicas: HashMap<u16, ReplicaAt>,
}

impl Topology {
    fn target(&self, datacenter: Option<&str>, replica: IpAddr) -> Result<Target, Dropped> {
        match datacenter {
            None => Ok(Target::Replica(replica)),
            Some(datacenter) if datacenter == self.datacenter => Ok(Target::Replica(replica)),
            Some(datacenter) => self
                .dispatchers
                .get(datacenter)
                .map(|&address| Target::Dispatcher { datacenter: datacenter.to_owned(), address, replica })
                .ok_or_else(|| Dropped::UnknownDatacenter(datacenter.to_owned())),
        }
    }
}

/// Bounds of the map of recently routed first flights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentLimits {
    pub entries: usize,
    /// Covers the client's Initial retransmissions and 0-RTT until the
    /// replica's connection IDs take over.
    pub lifetime: Duration,
}

impl Default for RecentLimits {
    fn default() -> Self {
        Self { entries: 16 * 1024, lifetime: Duration::from_secs(10) }
    }
}

/// The dispatcher's state: the reassembly table, the recent first
/// flights, and what it routes by. Time is passed in; the random source
/// is seeded, so a seed replays every decision.
pub struct Dispatcher {
    routes: Arc<Routes>,
    addresses: ServiceIdMap,
    topology: Topology,
    table: ClientHelloTable,
    recent: Recent,
    rng: SmallRng,
}

impl Dispatcher {
    pub fn new(
        routes: Arc<Routes>,
        addresses: ServiceIdMap,
        topology: Topology,
        limits: Limits,
        recent_limits: RecentLimits,
        seed: u64,
    ) -> Self {
        Self {
            routes,
            addresses,
            topology,
            table: ClientHelloTable::new(limits),
            recent: Recent::new(recent_limits),
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Takes a new routing snapshot; decisions already made stand.
    pub fn set_routes(&mut self, routes: Arc<Routes>) {
        self.routes = routes;
    }

    /// The reassembly table, to watch its size.
    pub fn table(&self) -> &ClientHelloTable {
        &self.table
    }

    /// Decides what to do with `datagram`, received from `client` on `service_address`.
    pub fn on_datagram(&mut self, client: SocketAddr, service_address: IpAddr, datagram: &[u8], now: Instant) -> Action {
        self.dispatch(client, service_address, datagram, now, false)
    }

    /// As [`Self::on_datagram`], and a forward decided by the routing core
    /// carries its explanation.
    pub fn on_datagram_explained(&mut self, client: SocketAddr, service_address: IpAddr, datagram: &[u8], now: Instant) -> Action {
        self.dispatch(client, service_address, datagram, now, true)
    }

    fn dispatch(&mut self, client: SocketAddr, service_address: IpAddr, datagram: &[u8], now: Instant, explain: bool) -> Action {
        let Some(&first) = datagram.first() else { return Action::Drop(DropReason::Truncated("first byte").into()) };
        if first & 0x80 == 0 {
            let dcid = datagram.get(1..1 + REPLICA_CID_LEN).unwrap_or_default();
            return self.forward_by_connection_id(dcid, datagram);
        }
        self.recent.expire(now);
        let dcid = match long_header_ids(datagram) {
            Ok((_, dcid)) => dcid,
            Err(reason) => return Action::Drop(reason.into()),
        };
        if let Some(target) = ConnectionId::new(dcid).ok().and_then(|dcid| self.recent.get(client, dcid)) {
            return forward(target.clone(), vec![datagram.to_vec()], None);
        }
        match self.table.receive(client, datagram, now) {
            Ok(Decoded::VersionNegotiation(packet)) => Action::SendVersionNegotiation(packet),
            Ok(Decoded::Incomplete) => Action::Wait,
            Ok(Decoded::Complete { hello, datagrams }) => match self.route_hello(client, service_address, &hello, explain) {
                Ok((target, explanation)) => {
                    let dcid = ConnectionId::new(dcid).expect("a decoded Initial's DCID fits");
                    self.recent.insert(client, dcid, target.clone(), now);
                    forward(target, datagrams, explanation)
                }
                Err(dropped) => Action::Drop(dropped),
            },
            // Not a first flight: a Handshake or 0-RTT packet, or the client's
            // Initial acknowledging the replica's, both addressed to the replica.
            Err(_) if replica_cid::decode(dcid).is_some() => self.forward_by_connection_id(dcid, datagram),
            Err(reason) => Action::Drop(reason.into()),
        }
    }

    fn forward_by_connection_id(&self, dcid: &[u8], datagram: &[u8]) -> Action {
        let Some(replica_id) = replica_cid::decode(dcid) else { return Action::Drop(Dropped::NotReplicaConnectionId) };
        let Some(replica) = self.topology.replicas.get(&replica_id) else {
            return Action::Drop(Dropped::UnknownReplicaId(replica_id));
        };
        match self.topology.target(replica.datacenter.as_deref(), replica.address) {
            Ok(target) => forward(target, vec![datagram.to_vec()], None),
            Err(dropped) => Action::Drop(dropped),
        }
    }

    /// Asks the routing core which replica serves the ClientHello's service
    /// to this client, and where that replica is.
    fn route_hello(
        &mut self,
        client: SocketAddr,
        service_address: IpAddr,
        hello: &ClientHello,
        explain: bool,
    ) -> Result<(Target, Option<Explanation>), Dropped> {
        let name = &hello.server_name;
        let service = self.routes.service(&name.wire()).ok_or_else(|| Dropped::UnknownService(name.clone()))?;
        let expected = self.addresses.address_of(name);
        if expected != service_address {
            return Err(Dropped::WrongServiceAddress { name: name.clone(), expected, arrived_on: service_address });
        }
        // The replica answers on the connection's address family.
        let family = if service_address.is_ipv4() { Family::V4 } else { Family::V6 };
        let mut explanation = explain.then(Explanation::default);
        let asker = Asker::from_source(client.ip());
        let routed = route(&self.routes, service, family, &asker, &mut self.rng, explanation.as_mut());
        let &chosen = routed.decision.replicas.first().ok_or_else(|| Dropped::NoReplica(name.clone()))?;
        let replica = &service.replicas[chosen];
        let target = self.topology.target(replica.datacenter.as_deref(), replica.address)?;
        Ok((target, explanation))
    }
}

fn forward(target: Target, datagrams: Vec<Vec<u8>>, explanation: Option<Explanation>) -> Action {
    Action::Forward { target, datagrams, explanation }
}

/// First flights routed lately: (client, DCID) -> target, bounded and
/// expiring, so a retransmitted Initial or a 0-RTT packet follows its
/// ClientHello. When full, nothing more is remembered: such a packet is
/// then reassembled and routed afresh.
struct Recent {
    limits: RecentLimits,
    targets: HashMap<(SocketAddr, ConnectionId), (Target, Instant)>,
    expiries: VecDeque<(Instant, SocketAddr, ConnectionId)>,
}

impl Recent {
    fn new(limits: RecentLimits) -> Self {
        Self { limits, targets: HashMap::new(), expiries: VecDeque::new() }
    }

    fn get(&self, client: SocketAddr, dcid: ConnectionId) -> Option<&Target> {
        self.targets.get(&(client, dcid)).map(|(target, _)| target)
    }

    fn insert(&mut self, client: SocketAddr, dcid: ConnectionId, target: Target, now: Instant) {
        if self.targets.len() >= self.limits.entries {
            return;
        }
        let deadline = now + self.limits.lifetime;
        self.targets.insert((client, dcid), (target, deadline));
        self.expiries.push_back((deadline, client, dcid));
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(deadline, client, dcid)) = self.expiries.front() {
            if deadline > now {
                break;
            }
            self.expiries.pop_front();
            if self.targets.get(&(client, dcid)).is_some_and(|(_, kept)| *kept == deadline) {
                self.targets.remove(&(client, dcid));
            }
        }
    }
}
