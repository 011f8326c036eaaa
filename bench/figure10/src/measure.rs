//! One connection by each way, from the client's namespace: the time from
//! wanting the name to the end of the handshake (connection setup), and to
//! the replica's first response (a greeting over one stream).
//!
//! - DNS + QUIC: ask the resolver for the name's address, then connect.
//! - Anycast: connect to the anycast address (data center 1's replica).
//! - Artemis: connect to the name's service address through the
//!   dispatcher ([`ArtemisClient`], fresh each time: nothing cached); the
//!   request leaves as soon as the handshake completes, through the
//!   dispatcher, and the connection must then have moved to the replica's
//!   own address.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use domain::base::Message;
use domain::rdata::A;
use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap};
use pharos_artemis_quic::client::{ArtemisClient, Route};
use pharos_artemis_quic::replica::ALPN;
use pharos_artemis_quic::tls::client_config;

use crate::resolver;
use crate::topology::{ANYCAST, FAR, NEAR, PORT, PREFIX, RESOLVER};

/// The most one connection may take before the run fails.
const LIMIT: Duration = Duration::from_secs(5);

/// Milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub setup: f64,
    pub first_response: f64,
}

pub struct Client {
    config: quinn::ClientConfig,
    addresses: ServiceIdMap,
}

fn ms(since: Instant, at: Instant) -> f64 {
    (at - since).as_secs_f64() * 1000.0
}

impl Client {
    /// Trusts `certificates` (DER) alone.
    pub fn new(certificates: &[Vec<u8>]) -> anyhow::Result<Client> {
        let mut roots = rustls::RootCertStore::empty();
        for der in certificates {
            roots.add(der.clone().into())?;
        }
        let prefix = PREFIX.parse().map_err(|error| anyhow::anyhow!("{PREFIX}: {error}"))?;
        let conflicts = ConflictList::parse(&format!("{} {}\n{} {}\n", NEAR.0, NEAR.1, FAR.0, FAR.1), &prefix)
            .map_err(|error| anyhow::anyhow!("conflicts: {error}"))?;
        Ok(Client { config: client_config(roots, ALPN), addresses: ServiceIdMap::new(prefix, conflicts) })
    }

    pub async fn dns_and_quic(&self, name: &str, replica: u16) -> anyhow::Result<Sample> {
        tokio::time::timeout(LIMIT, async {
            let start = Instant::now();
            let address = lookup(name).await?;
            let connection = self.endpoint()?.connect(SocketAddr::new(address, PORT), name)?.await?;
            let setup = Instant::now();
            greet(&connection, replica).await?;
            Ok(Sample { setup: ms(start, setup), first_response: ms(start, Instant::now()) })
        })
        .await?
    }

    pub async fn anycast(&self, name: &str, replica: u16) -> anyhow::Result<Sample> {
        tokio::time::timeout(LIMIT, async {
            let start = Instant::now();
            let anycast: IpAddr = ANYCAST.parse()?;
            let connection = self.endpoint()?.connect(SocketAddr::new(anycast, PORT), name)?.await?;
            let setup = Instant::now();
            greet(&connection, replica).await?;
            Ok(Sample { setup: ms(start, setup), first_response: ms(start, Instant::now()) })
        })
        .await?
    }

    pub async fn artemis(&self, name: &str, replica: u16) -> anyhow::Result<Sample> {
        tokio::time::timeout(LIMIT, async {
            let start = Instant::now();
            let mut client = ArtemisClient::new(self.addresses.clone(), PORT, self.config.clone());
            let mut connected = client.connect(&CanonicalName::new(name)?, start).await?;
            anyhow::ensure!(
                matches!(connected.route, Route::Service { replica: Some(_), .. }),
                "Artemis did not move to a replica: {:?}",
                connected.route
            );
            greet(&connected.connection, replica).await?;
            let sample = Sample { setup: ms(start, connected.handshake_done), first_response: ms(start, Instant::now()) };
            let moved_to = connected.settled().await?;
            anyhow::ensure!(moved_to.is_some(), "Artemis stayed on the service address");
            Ok(sample)
        })
        .await?
    }

    fn endpoint(&self) -> anyhow::Result<quinn::Endpoint> {
        let mut endpoint = quinn::Endpoint::client("0.0.0.0:0".parse()?)?;
        endpoint.set_default_client_config(self.config.clone());
        Ok(endpoint)
    }
}

async fn lookup(name: &str) -> anyhow::Result<IpAddr> {
    let socket = tokio::net::UdpSocket::bind("0.0.0.0:0").await?;
    socket.connect((RESOLVER.parse::<IpAddr>()?, 53)).await?;
    socket.send(&resolver::query(0x4242, name)).await?;
    let mut buffer = vec![0u8; 1500];
    let len = socket.recv(&mut buffer).await?;
    buffer.truncate(len);
    let reply = Message::from_octets(buffer)?;
    let record = reply.answer()?.limit_to::<A>().next().ok_or_else(|| anyhow::anyhow!("no A record for {name}"))??;
    Ok(IpAddr::V4(record.data().addr()))
}

/// One greeting; it must come from `replica`.
async fn greet(connection: &quinn::Connection, replica: u16) -> anyhow::Result<()> {
    let (mut send, mut receive) = connection.open_bi().await?;
    send.write_all(b"ping").await?;
    send.finish()?;
    let reply = receive.read_to_end(4096).await?;
    let expected = format!("hello from replica {replica}\nping");
    anyhow::ensure!(reply == expected.as_bytes(), "{:?} instead of {expected:?}", String::from_utf8_lossy(&reply));
    Ok(())
}
