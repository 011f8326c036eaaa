//! The Artemis client: computes a name's service address, connects to it,
//! learns the replica's preferred address and service_ttl from the raw
//! transport parameters, and connects straight to the replica while the
//! ttl lasts.
//!
//! A connection is handed over as soon as its handshake completes, so the
//! first request leaves at once on the path it has (the dispatcher forwards
//! it by the replica's connection ID); the move to the replica's address
//! waits, in a task of its own, for the handshake to be confirmed (RFC
//! 9000 9). Each connection has its own endpoint and socket, so a move
//! applies to that connection alone.
//!
//! Optionally ([`ArtemisClient::race_dns`]) a DNS lookup of the name
//! through Pharos races the service address, as the paper allows: the
//! connection whose handshake completes first is kept, the other dropped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::base::{Message, MessageBuilder, Name, Rtype};
use domain::rdata::{A, Aaaa};
use pharos_artemis::service_id::{CanonicalName, ServiceIdMap};
use ring::rand::SecureRandom;

use crate::cache::ReplicaCache;
use crate::params::{self, ParameterError, ServiceParameters};
use crate::socket::{HookedSocket, Migration};
use crate::tls::HandshakeData;

/// How long to wait for HANDSHAKE_DONE before the move is given up (the
/// connection then stays on the service address).
const CONFIRMATION_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the racing DNS lookup waits for its answer.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Connect(#[from] quinn::ConnectError),
    #[error(transparent)]
    Connection(#[from] quinn::ConnectionError),
    #[error("the replica's transport parameters: {0}")]
    Parameters(#[from] ParameterError),
    #[error("the client config is not built on tls::ClientCrypto: the replica's raw transport parameters are out of reach")]
    NotArtemisCrypto,
    #[error("the handshake was not confirmed within {0:?}")]
    NotConfirmed(Duration),
    #[error("the task moving the connection to the replica ended abnormally: {0}")]
    MoveTask(#[from] tokio::task::JoinError),
    #[error("the DNS lookup through {server}: {reason}")]
    Lookup { server: SocketAddr, reason: String },
}

/// Where a connection went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the service address; then to `replica` if it named one.
    Service { service: SocketAddr, replica: Option<SocketAddr>, service_ttl: Option<Duration> },
    /// Straight to a replica remembered from an earlier connection.
    Cached { replica: SocketAddr },
    /// To the address a DNS lookup through `server` gave, which won the race.
    Dns { server: SocketAddr, address: SocketAddr },
}

pub struct Connected {
    pub connection: quinn::Connection,
    pub route: Route,
    /// When the handshake completed, before confirmation and the move:
    /// the connection setup time bench/figure10 compares with DNS's.
    pub handshake_done: Instant,
    migration: Arc<Migration>,
    /// The move to the replica, once the handshake is confirmed.
    moving: Option<tokio::task::JoinHandle<Result<(), ClientError>>>,
    /// Kept with its connection: its socket is the connection's own.
    _endpoint: quinn::Endpoint,
}

impl Connected {
    /// Waits until the move to the replica is done, and returns where the
    /// connection went: the replica's address, or `None` if it stays where
    /// it was (no preferred address, or straight to a cached replica
    /// already). An error if the move was given up: the handshake was not
    /// confirmed in time, or the connection closed first.
    pub async fn settled(&mut self) -> Result<Option<SocketAddr>, ClientError> {
        if let Some(moving) = self.moving.take() {
            moving.await??;
        }
        Ok(self.migration.moved().map(|(_service, replica)| replica))
    }
}

pub struct ArtemisClient {
    addresses: ServiceIdMap,
    port: u16,
    config: quinn::ClientConfig,
    cache: ReplicaCache,
    /// The DNS server (Pharos) whose lookup races the service address.
    dns_race: Option<SocketAddr>,
}

impl ArtemisClient {
    /// `config` must come from [`crate::tls::client_config`] (or be built
    /// on [`crate::tls::ClientCrypto`]): only that glue keeps the
    /// replica's raw transport parameters.
    pub fn new(addresses: ServiceIdMap, port: u16, config: quinn::ClientConfig) -> Self {
        Self { addresses, port, config, cache: ReplicaCache::default(), dns_race: None }
    }

    /// Races a lookup of the name through `server` (A or AAAA, the service
    /// address's family) against the service address on every connection
    /// not made straight to a cached replica.
    pub fn race_dns(mut self, server: SocketAddr) -> Self {
        self.dns_race = Some(server);
        self
    }

    /// Connects to `name`'s replica, straight if one is remembered at
    /// `now`, else through its service address (raced by DNS if asked).
    pub async fn connect(&mut self, name: &CanonicalName, now: Instant) -> Result<Connected, ClientError> {
        if let Some(replica) = self.cache.get(name, now) {
            return self.straight(name, replica, Route::Cached { replica }).await;
        }
        let connected = match self.dns_race {
            None => self.through_service(name).await?,
            Some(server) => {
                let (mut service, mut dns) = (pin!(self.through_service(name)), pin!(self.through_dns(name, server)));
                // The first handshake to complete wins; if one fails first, the other may still.
                tokio::select! {
                    first = &mut service => match first { Ok(connected) => connected, Err(_) => dns.await? },
                    first = &mut dns => match first { Ok(connected) => connected, Err(_) => service.await? },
                }
            }
        };
        if let Route::Service { replica: Some(replica), service_ttl: Some(ttl), .. } = connected.route {
            self.cache.insert(name.clone(), replica, ttl, now);
        }
        Ok(connected)
    }

    async fn through_service(&self, name: &CanonicalName) -> Result<Connected, ClientError> {
        let service = SocketAddr::new(self.addresses.address_of(name), self.port);
        let migration = Arc::new(Migration::default());
        let (connection, endpoint) = self.handshake(name, service, migration.clone()).await?;
        let handshake_done = Instant::now();
        let learned = server_parameters(&connection)?;
        let replica = learned.preferred_address_like(service);
        let moving = replica.map(|replica| tokio::spawn(move_once_confirmed(connection.clone(), migration.clone(), service, replica)));
        let route = Route::Service { service, replica, service_ttl: learned.service_ttl };
        Ok(Connected { connection, route, handshake_done, migration, moving, _endpoint: endpoint })
    }

    /// A lookup of `name` through `server`, then a handshake with the
    /// address it gave; nothing to move to or cache after.
    async fn through_dns(&self, name: &CanonicalName, server: SocketAddr) -> Result<Connected, ClientError> {
        let v6 = self.addresses.address_of(name).is_ipv6();
        let address = SocketAddr::new(lookup(name, v6, server).await?, self.port);
        self.straight(name, address, Route::Dns { server, address }).await
    }

    /// A handshake with `address`, a replica's own: nothing to move to after.
    async fn straight(&self, name: &CanonicalName, address: SocketAddr, route: Route) -> Result<Connected, ClientError> {
        let migration = Arc::new(Migration::default());
        let (connection, endpoint) = self.handshake(name, address, migration.clone()).await?;
        let handshake_done = Instant::now();
        Ok(Connected { connection, route, handshake_done, migration, moving: None, _endpoint: endpoint })
    }

    async fn handshake(
        &self,
        name: &CanonicalName,
        remote: SocketAddr,
        migration: Arc<Migration>,
    ) -> Result<(quinn::Connection, quinn::Endpoint), ClientError> {
        let any: IpAddr = match remote {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let socket = HookedSocket::new(std::net::UdpSocket::bind((any, 0))?, migration)?;
        let mut endpoint = quinn::Endpoint::new_with_abstract_socket(
            quinn::EndpointConfig::default(),
            None,
            Arc::new(socket),
            Arc::new(quinn::TokioRuntime),
        )?;
        endpoint.set_default_client_config(self.config.clone());
        let connection = endpoint.connect(remote, name.as_str())?.await?;
        Ok((connection, endpoint))
    }
}

/// The first A (or AAAA, with `v6`) record for `name` that `server` answers.
async fn lookup(name: &CanonicalName, v6: bool, server: SocketAddr) -> Result<IpAddr, ClientError> {
    let failed = |reason: String| ClientError::Lookup { server, reason };
    let rtype = if v6 { Rtype::AAAA } else { Rtype::A };
    let qname = Name::<Vec<u8>>::vec_from_str(name.as_str()).map_err(|error| failed(error.to_string()))?;
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(random_id()?);
    builder.header_mut().set_rd(true);
    let mut question = builder.question();
    question.push((qname, rtype)).map_err(|error| failed(error.to_string()))?;
    let query = question.finish();
    let any: IpAddr = if server.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let socket = tokio::net::UdpSocket::bind((any, 0)).await?;
    socket.connect(server).await?;
    socket.send(&query).await?;
    let mut buffer = vec![0u8; 4096];
    let ask = async {
        // Replies to another id (a stale or forged one) are skipped.
        loop {
            let len = socket.recv(&mut buffer).await?;
            if let Ok(reply) = Message::from_octets(&buffer[..len])
                && reply.header().id() == u16::from_be_bytes([query[0], query[1]])
            {
                return first_address(&reply, v6).ok_or_else(|| failed(format!("no {rtype} record for {name}")));
            }
        }
    };
    tokio::time::timeout(LOOKUP_TIMEOUT, ask).await.map_err(|_| failed(format!("no answer within {LOOKUP_TIMEOUT:?}")))?
}

fn first_address(reply: &Message<&[u8]>, v6: bool) -> Option<IpAddr> {
    let answer = reply.answer().ok()?;
    if v6 {
        answer.limit_to::<Aaaa>().find_map(Result::ok).map(|record| IpAddr::V6(record.data().addr()))
    } else {
        answer.limit_to::<A>().find_map(Result::ok).map(|record| IpAddr::V4(record.data().addr()))
    }
}

/// A query id no off-path sender can guess.
fn random_id() -> Result<u16, ClientError> {
    let mut id = [0u8; 2];
    ring::rand::SystemRandom::new().fill(&mut id).map_err(|_| std::io::Error::other("no system randomness"))?;
    Ok(u16::from_be_bytes(id))
}

fn server_parameters(connection: &quinn::Connection) -> Result<ServiceParameters, ClientError> {
    let handshake =
        connection.handshake_data().and_then(|data| data.downcast::<HandshakeData>().ok()).ok_or(ClientError::NotArtemisCrypto)?;
    Ok(params::parse(&handshake.peer_transport_parameters)?)
}

/// Moves the connection from `service` to `replica` once the handshake is
/// confirmed. Requests sent before then went through the service address;
/// their answers come back from either address.
async fn move_once_confirmed(
    connection: quinn::Connection,
    migration: Arc<Migration>,
    service: SocketAddr,
    replica: SocketAddr,
) -> Result<(), ClientError> {
    confirmed(&connection).await?;
    migration.move_to(service, replica);
    Ok(())
}

/// Waits for the server's HANDSHAKE_DONE: a client must not move before
/// (RFC 9000 9). quinn reports it only in its frame counts.
async fn confirmed(connection: &quinn::Connection) -> Result<(), ClientError> {
    let wait = async {
        while connection.stats().frame_rx.handshake_done == 0 {
            if let Some(reason) = connection.close_reason() {
                return Err(ClientError::Connection(reason));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    };
    tokio::time::timeout(CONFIRMATION_TIMEOUT, wait).await.map_err(|_| ClientError::NotConfirmed(CONFIRMATION_TIMEOUT))?
}
