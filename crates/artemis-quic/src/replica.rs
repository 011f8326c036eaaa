//! The replica: a quinn server that names itself in its connection IDs,
//! advertises its own unicast address as `preferred_address`, and tells
//! clients how long they may come straight back (`service_ttl`).
//!
//! It binds the wildcard address of its port, so it receives both what
//! the dispatcher delivers to the service address (held on a local
//! interface) and what migrated clients send to the preferred address;
//! quinn-udp's IP_PKTINFO answers each from the address it came to.
//! It speaks two protocols, by ALPN: a greeting for tests (each
//! bidirectional stream gets `hello from replica N` and its own bytes
//! back) and HTTP/3 (h3), one small page naming the replica for every
//! request, so a browser can be the client.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::cid::ReplicaCidGenerator;
use crate::params::ArtemisParameters;
use crate::socket::{ArrivalCounts, HookedSocket};
use crate::tls::{HandshakeData, ServerCrypto};

/// The ALPN of the greeting protocol.
pub const ALPN: &[u8] = b"artemis-hello";
/// The ALPN of HTTP/3.
pub const H3_ALPN: &[u8] = b"h3";
/// The most a request may carry.
const MAX_REQUEST: usize = 4096;

#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    pub replica_id: u16,
    /// The address clients reach through the dispatcher.
    pub service_address: IpAddr,
    /// This replica's own unicast address and the port of both (0: any
    /// free port, see [`Replica::local_addr`]).
    pub preferred_address: SocketAddr,
    pub service_ttl: Duration,
    /// The name its self-signed certificate is for.
    pub server_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("the service address {service} and the preferred address {preferred} must differ and be of one family")]
    Addresses { service: IpAddr, preferred: IpAddr },
    #[error("certificate for {name:?}: {source}")]
    Certificate { name: String, source: rcgen::Error },
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    #[error("binding {address}: {source}")]
    Bind { address: SocketAddr, source: std::io::Error },
}

pub struct Replica {
    endpoint: quinn::Endpoint,
    certificate: CertificateDer<'static>,
    replica_id: u16,
    arrivals: Arc<ArrivalCounts>,
}

impl Replica {
    /// Binds the replica's port on every local address. Call from inside
    /// a tokio runtime.
    pub fn bind(config: &ReplicaConfig) -> Result<Self, ReplicaError> {
        let (service, preferred) = (config.service_address, config.preferred_address.ip());
        if service == preferred || service.is_ipv4() != preferred.is_ipv4() {
            return Err(ReplicaError::Addresses { service, preferred });
        }
        let (certificate, key) = self_signed(&config.server_name)?;
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(vec![certificate.clone()], key)?;
        tls.alpn_protocols = vec![ALPN.to_vec(), H3_ALPN.to_vec()];
        let wildcard = match preferred {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let address = SocketAddr::new(wildcard, config.preferred_address.port());
        let bind_error = |source| ReplicaError::Bind { address, source };
        let socket = std::net::UdpSocket::bind(address).map_err(bind_error)?;
        let port = socket.local_addr().map_err(bind_error)?.port();
        let extra = ArtemisParameters { service_ttl: Some(config.service_ttl) };
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(ServerCrypto::new(Arc::new(tls), extra)?));
        match SocketAddr::new(preferred, port) {
            SocketAddr::V4(address) => server.preferred_address_v4(Some(address)),
            SocketAddr::V6(address) => server.preferred_address_v6(Some(address)),
        };
        let mut endpoint = quinn::EndpointConfig::default();
        let replica_id = config.replica_id;
        endpoint.cid_generator(move || Box::new(ReplicaCidGenerator::new(replica_id)));
        let arrivals = Arc::new(ArrivalCounts::new(service));
        let socket = HookedSocket::new(socket, arrivals.clone()).map_err(bind_error)?;
        let endpoint = quinn::Endpoint::new_with_abstract_socket(endpoint, Some(server), Arc::new(socket), Arc::new(quinn::TokioRuntime))
            .map_err(bind_error)?;
        Ok(Self { endpoint, certificate, replica_id, arrivals })
    }

    /// The self-signed certificate clients must trust.
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.certificate
    }

    /// Datagrams received at the service address and at its own.
    pub fn arrivals(&self) -> Arc<ArrivalCounts> {
        self.arrivals.clone()
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Serves every connection until the endpoint closes, telling
    /// `on_connection` of each completed handshake.
    pub async fn serve(self, on_connection: impl Fn(&Connected) + Send + Sync + 'static) {
        let (on_connection, replica_id) = (Arc::new(on_connection), self.replica_id);
        while let Some(incoming) = self.endpoint.accept().await {
            let on_connection = on_connection.clone();
            tokio::spawn(async move {
                match incoming.await {
                    Ok(connection) => serve_connection(connection, replica_id, &*on_connection).await,
                    Err(error) => tracing::debug!(%error, "handshake failed"),
                }
            });
        }
    }
}

/// A handshake the replica completed.
#[derive(Clone, Debug)]
pub struct Connected {
    pub client: SocketAddr,
    /// The address the client reached: the service address through the
    /// dispatcher, or the replica's own.
    pub local: Option<IpAddr>,
    pub alpn: Vec<u8>,
}

async fn serve_connection(connection: quinn::Connection, replica_id: u16, on_connection: &(dyn Fn(&Connected) + Send + Sync)) {
    let handshake = connection.handshake_data().and_then(|data| data.downcast::<HandshakeData>().ok());
    let alpn = handshake.and_then(|handshake| handshake.alpn).unwrap_or_default();
    on_connection(&Connected { client: connection.remote_address(), local: connection.local_ip(), alpn: alpn.clone() });
    if alpn == H3_ALPN {
        crate::http3::serve(connection, replica_id).await;
    } else {
        while let Ok((send, receive)) = connection.accept_bi().await {
            tokio::spawn(greet_stream(send, receive, replica_id));
        }
    }
}

async fn greet_stream(mut send: quinn::SendStream, mut receive: quinn::RecvStream, replica_id: u16) {
    let answer = async {
        let request = receive.read_to_end(MAX_REQUEST).await?;
        let mut reply = format!("hello from replica {replica_id}\n").into_bytes();
        reply.extend_from_slice(&request);
        send.write_all(&reply).await?;
        send.finish()?;
        send.stopped().await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    };
    if let Err(error) = answer.await {
        tracing::debug!(%error, "stream failed");
    }
}

fn self_signed(name: &str) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), ReplicaError> {
    let certified = rcgen::generate_simple_self_signed(vec![name.to_owned()])
        .map_err(|source| ReplicaError::Certificate { name: name.to_owned(), source })?;
    let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    Ok((certified.cert.der().clone(), key.into()))
}
