//! quinn's crypto traits over rustls, written here so the transport
//! parameters we send and receive pass through our hands: the replica adds
//! `service_ttl` to its own, and both sides keep the peer's raw bytes
//! (quinn's own glue drops the IDs it does not know, 0xff00 among them).
//!
//! The key types are rustls's: quinn-proto already implements its
//! `HeaderKey` and `PacketKey` for them, so only the session is ours.

use std::any::Any;
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::crypto::{self, ExportKeyingMaterialError, KeyPair, Keys, UnsupportedVersion};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError, TransportErrorCode};
use rustls::pki_types::ServerName;
use rustls::quic::{self as tls_quic, KeyChange, Secrets};

use crate::params::ArtemisParameters;

/// What the handshake tells the application, from
/// `quinn::Connection::handshake_data()` downcast to this type.
#[derive(Clone, Debug)]
pub struct HandshakeData {
    pub alpn: Option<Vec<u8>>,
    /// The SNI the client sent (server side only).
    pub server_name: Option<String>,
    /// The peer's transport parameters as sent, unknown IDs included.
    pub peer_transport_parameters: Vec<u8>,
}

/// The server side: quinn's own config for the Initial keys and Retry
/// tags (nothing Artemis changes), ours for the session.
pub struct ServerCrypto {
    tls: Arc<rustls::ServerConfig>,
    initial: QuicServerConfig,
    extra: ArtemisParameters,
}

impl ServerCrypto {
    /// Fails if `tls` cannot speak QUIC (no TLS 1.3, no initial suite).
    pub fn new(tls: Arc<rustls::ServerConfig>, extra: ArtemisParameters) -> Result<Self, rustls::Error> {
        let initial = QuicServerConfig::try_from(tls.clone()).map_err(|e| rustls::Error::General(e.to_string()))?;
        Ok(Self { tls, initial, extra })
    }
}

impl crypto::ServerConfig for ServerCrypto {
    fn initial_keys(&self, version: u32, dst_cid: &ConnectionId) -> Result<Keys, UnsupportedVersion> {
        self.initial.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.initial.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(self: Arc<Self>, version: u32, params: &TransportParameters) -> Box<dyn crypto::Session> {
        // quinn asked initial_keys first, which refuses unknown versions,
        // and new() checked TLS 1.3: neither can fail here.
        let version = tls_version(version).expect("quinn starts sessions only for versions initial_keys accepted");
        let encoded = encode(params, &self.extra);
        let connection = tls_quic::ServerConnection::new(self.tls.clone(), version, encoded)
            .expect("ServerCrypto::new checked that the config speaks QUIC");
        Box::new(Session::new(tls_quic::Connection::Server(connection), version))
    }
}

/// The client side: sends quinn's parameters unchanged, keeps the server's.
pub struct ClientCrypto {
    tls: Arc<rustls::ClientConfig>,
}

impl ClientCrypto {
    /// Fails if `tls` cannot speak QUIC (no TLS 1.3, no initial suite).
    pub fn new(tls: Arc<rustls::ClientConfig>) -> Result<Self, rustls::Error> {
        QuicClientConfig::try_from(tls.clone()).map_err(|e| rustls::Error::General(e.to_string()))?;
        Ok(Self { tls })
    }
}

impl crypto::ClientConfig for ClientCrypto {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, ConnectError> {
        let tls_version = tls_version(version).ok_or(ConnectError::UnsupportedVersion)?;
        let name = ServerName::try_from(server_name.to_owned()).map_err(|_| ConnectError::InvalidServerName(server_name.to_owned()))?;
        let encoded = encode(params, &ArtemisParameters::default());
        let connection = tls_quic::ClientConnection::new(self.tls.clone(), tls_version, name, encoded)
            .expect("ClientCrypto::new checked that the config speaks QUIC");
        Ok(Box::new(Session::new(tls_quic::Connection::Client(connection), tls_version)))
    }
}

/// A client config that trusts `roots` alone, speaks `alpn`, and keeps
/// the server's raw transport parameters in its [`HandshakeData`].
pub fn client_config(roots: rustls::RootCertStore, alpn: &[u8]) -> quinn::ClientConfig {
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("ring supports TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto = ClientCrypto::new(Arc::new(tls)).expect("a TLS 1.3 config with ring's suites speaks QUIC");
    quinn::ClientConfig::new(Arc::new(crypto))
}

/// One handshake, either side.
struct Session {
    tls: tls_quic::Connection,
    version: tls_quic::Version,
    /// Set once the peer's parameters arrived: quinn wants `true` from
    /// read_handshake exactly once.
    handshake_data_ready: bool,
    next_secrets: Option<Secrets>,
}

impl Session {
    fn new(tls: tls_quic::Connection, version: tls_quic::Version) -> Self {
        Self { tls, version, handshake_data_ready: false, next_secrets: None }
    }

    fn side(&self) -> Side {
        match self.tls {
            tls_quic::Connection::Client(_) => Side::Client,
            tls_quic::Connection::Server(_) => Side::Server,
        }
    }
}

impl crypto::Session for Session {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        let suite = initial_suite();
        let side = match side {
            Side::Client => rustls::Side::Client,
            Side::Server => rustls::Side::Server,
        };
        quinn_keys(suite.keys(dst_cid, side, self.version))
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let peer_transport_parameters = self.tls.quic_transport_parameters()?.to_vec();
        let server_name = match &self.tls {
            tls_quic::Connection::Server(server) => server.server_name().map(str::to_owned),
            tls_quic::Connection::Client(_) => None,
        };
        Some(Box::new(HandshakeData { alpn: self.tls.alpn_protocol().map(<[u8]>::to_vec), server_name, peer_transport_parameters }))
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        let certificates: Vec<_> = self.tls.peer_certificates()?.iter().map(|c| c.clone().into_owned()).collect();
        Some(Box::new(certificates))
    }

    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn crypto::PacketKey>)> {
        let keys = self.tls.zero_rtt_keys()?;
        Some((Box::new(keys.header), Box::new(keys.packet)))
    }

    fn early_data_accepted(&self) -> Option<bool> {
        match &self.tls {
            tls_quic::Connection::Client(client) => Some(client.is_early_data_accepted()),
            tls_quic::Connection::Server(_) => None,
        }
    }

    fn is_handshaking(&self) -> bool {
        self.tls.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.tls.read_hs(buf).map_err(|error| tls_error(&self.tls, error))?;
        let newly_ready = !self.handshake_data_ready && self.tls.quic_transport_parameters().is_some();
        self.handshake_data_ready |= newly_ready;
        Ok(newly_ready)
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        match self.tls.quic_transport_parameters() {
            None => Ok(None),
            Some(mut raw) => Ok(Some(TransportParameters::read(self.side(), &mut raw)?)),
        }
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        match self.tls.write_hs(buf)? {
            KeyChange::Handshake { keys } => Some(quinn_keys(keys)),
            KeyChange::OneRtt { keys, next } => {
                self.next_secrets = Some(next);
                Some(quinn_keys(keys))
            }
        }
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn crypto::PacketKey>>> {
        let keys = self.next_secrets.as_mut()?.next_packet_keys();
        Some(KeyPair { local: Box::new(keys.local), remote: Box::new(keys.remote) })
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        crate::retry::is_valid(self.version, orig_dst_cid, header, payload)
    }

    fn export_keying_material(&self, output: &mut [u8], label: &[u8], context: &[u8]) -> Result<(), ExportKeyingMaterialError> {
        self.tls.export_keying_material(output, label, Some(context)).map(|_| ()).map_err(|_| ExportKeyingMaterialError)
    }
}

/// The rustls key schedule's version for a QUIC version number.
pub(crate) fn tls_version(version: u32) -> Option<tls_quic::Version> {
    match version {
        1 => Some(tls_quic::Version::V1),
        0x6b33_43cf => Some(tls_quic::Version::V2),
        0xff00_001d..=0xff00_0020 => Some(tls_quic::Version::V1Draft),
        _ => None,
    }
}

/// Initial packets always use AES-128-GCM with SHA-256 (RFC 9001 5.2).
fn initial_suite() -> tls_quic::Suite {
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("ring's TLS13_AES_128_GCM_SHA256 supports QUIC")
}

fn quinn_keys(keys: tls_quic::Keys) -> Keys {
    Keys {
        header: KeyPair { local: Box::new(keys.local.header), remote: Box::new(keys.remote.header) },
        packet: KeyPair { local: Box::new(keys.local.packet), remote: Box::new(keys.remote.packet) },
    }
}

/// quinn's parameters, then ours.
fn encode(params: &TransportParameters, extra: &ArtemisParameters) -> Vec<u8> {
    let mut encoded = Vec::new();
    params.write(&mut encoded);
    extra.write(&mut encoded);
    encoded
}

/// A TLS failure as QUIC reports it: the alert as a CRYPTO_ERROR code.
fn tls_error(tls: &tls_quic::Connection, error: rustls::Error) -> TransportError {
    let code = match tls.alert() {
        Some(alert) => TransportErrorCode::crypto(alert.into()),
        None => TransportErrorCode::PROTOCOL_VIOLATION,
    };
    TransportError { code, frame: None, reason: error.to_string() }
}
