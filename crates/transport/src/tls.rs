//! What the encrypted mechanisms share: one certificate and one way of
//! setting up TLS. DNS over TLS ([`crate::dot`]), over HTTPS
//! ([`crate::doh`]) and over QUIC ([`crate::doq`]), and HTTP redirection
//! over HTTPS ([`crate::redirect`]), and the server's control API, each
//! take their acceptor from here:
//! TLS 1.3, with 1.2 allowed where the protocol allows it, and sessions
//! resumed from tickets, since a full handshake is the main cost of a new
//! connection.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::ProducesTickets;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{HandshakeKind, ServerConfig, SupportedProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::Observation;
use crate::certificate::{self, CertificateError};
use crate::config::Settings;
use crate::metrics::Secured;
use crate::registry::Admission;
use crate::{doq, http};

/// DNS over TLS and HTTPS accept TLS 1.2 clients too.
const TLS_12_AND_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];
/// QUIC is defined over TLS 1.3 only (RFC 9001 section 4.2).
const TLS_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// The certificate of `[tls]`, loaded once, and the provider that signs
/// with it. Each acceptor made from it is a configuration of its own, so
/// that a session made on one address of a transport resumes on any other
/// (the ticket key is the configuration's) and on no other transport.
pub struct Tls {
    provider: Arc<CryptoProvider>,
    certificate: Arc<CertifiedKey>,
}

/// Why rustls cannot be set up to present the certificate.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS: the crypto provider lacks these protocol versions")]
    ProtocolVersions(#[source] rustls::Error),
    #[error("TLS: cannot make a session ticket key")]
    TicketKey(#[source] rustls::Error),
}

impl Tls {
    /// Loads (or makes) the certificate of `settings`.
    pub fn load(settings: &Settings) -> Result<Tls, CertificateError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certificate = certificate::load(settings, &provider)?;
        Ok(Tls { provider, certificate })
    }

    /// An acceptor for DNS over TLS, which offers no ALPN.
    pub fn dns_acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        Ok(TlsAcceptor::from(self.server_config(TLS_12_AND_13, &[])?))
    }

    /// An acceptor for HTTPS: HTTP/2 or HTTP/1.1, as ALPN chooses.
    pub fn https_acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        Ok(TlsAcceptor::from(self.server_config(TLS_12_AND_13, http::ALPN)?))
    }

    /// An acceptor for a server that speaks HTTP/1.1 only (the control
    /// API): ALPN offers nothing else, so no client starts HTTP/2.
    pub fn http1_acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        Ok(TlsAcceptor::from(self.server_config(TLS_12_AND_13, &[b"http/1.1"])?))
    }

    /// The TLS side of DNS over QUIC: TLS 1.3 and the "doq" protocol only.
    /// Its resumptions are counted, in `observation`, as its ticket key
    /// accepts tickets.
    pub fn quic_config(&self, observation: &Arc<Observation>) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = self.server_config(TLS_13, &[doq::ALPN])?;
        let counted = Arc::new(CountingTicketer(config.ticketer.clone(), observation.clone()));
        Arc::get_mut(&mut config).expect("a configuration just made has no other owner").ticketer = counted;
        Ok(config)
    }

    /// A rustls server configuration presenting the certificate, offering the
    /// `alpn` protocols, and resuming sessions: TLS 1.3 and 1.2 from tickets
    /// (RFC 8446 section 2.2, RFC 5077), TLS 1.2 also from session IDs.
    fn server_config(&self, versions: &[&'static SupportedProtocolVersion], alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(versions)
            .map_err(TlsError::ProtocolVersions)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(SingleCertAndKey::from(self.certificate.clone())));
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(TlsError::TicketKey)?;
        Ok(Arc::new(config))
    }
}

/// A ticket key that counts the QUIC sessions it resumes, since quinn does
/// not say which handshakes resumed one.
struct CountingTicketer(Arc<dyn ProducesTickets>, Arc<Observation>);

impl std::fmt::Debug for CountingTicketer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_tuple("CountingTicketer").field(&self.0).finish_non_exhaustive()
    }
}

impl ProducesTickets for CountingTicketer {
    fn enabled(&self) -> bool {
        self.0.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.0.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.0.encrypt(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let plain = self.0.decrypt(cipher);
        if plain.is_some() {
            self.1.counters.count_quic_resumption();
        }
        plain
    }
}

/// The server side of a TLS handshake over TCP, counted as `over`'s. A
/// client that stalls in it is dropped like any idle connection, by the
/// registry.
pub async fn handshake<Stream>(acceptor: &TlsAcceptor, stream: Stream, admission: &Admission, over: Secured) -> Option<TlsStream<Stream>>
where
    Stream: AsyncRead + AsyncWrite + Unpin,
{
    match admission.unless_shed(acceptor.accept(stream)).await? {
        Ok(stream) => {
            let resumed = stream.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed);
            admission.observation().counters.count_handshake(over, resumed);
            Some(stream)
        }
        Err(error) => {
            tracing::debug!(%error, "TLS handshake failed");
            None
        }
    }
}
