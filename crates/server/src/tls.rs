//! The encrypted transports: DNS over TLS (RFC 7858), over HTTPS (RFC 8484,
//! in [`crate::doh`]) and over QUIC (RFC 9250, in [`crate::doq`]). They
//! share one certificate and one way of setting up TLS: TLS 1.3, with 1.2
//! allowed where the protocol allows it, and sessions resumed from tickets,
//! since a full handshake is the main cost of a new connection. HTTP
//! redirection over HTTPS ([`crate::redirect`]) presents the same certificate.
//!
//! DNS over TLS itself is here too, being TCP's conversation inside TLS:
//! the same framing, pipelining and connection caps, from [`crate::tcp`].

use std::sync::Arc;

use anyhow::Context;
use pharos_answer::{Client, ResponseOptions, Transport};
use rand::rngs::SmallRng;
use rustls::crypto::CryptoProvider;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ServerConfig, SupportedProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::Config;
use crate::registry::{Admission, Registry};
use crate::snapshot::SharedSnapshot;
use crate::{certificate, doh, doq, http, tcp};

/// Worker numbers of the transports' random sources (see
/// [`Config::worker_rng`]), clear of UDP's (counting up from 0) and TCP's
/// (counting down from `u64::MAX`).
const DOT_WORKERS: u64 = 1 << 60;
const DOH_WORKERS: u64 = 2 << 60;
const DOQ_WORKERS: u64 = 3 << 60;

/// DNS over TLS and HTTPS accept TLS 1.2 clients too.
const TLS_12_AND_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];
/// QUIC is defined over TLS 1.3 only (RFC 9001 section 4.2).
const TLS_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// Binds every encrypted listener of `config` and serves each in its own
/// task. Does nothing when none is configured: no certificate is needed then.
pub async fn start(config: &Config, snapshot: &SharedSnapshot, registry: &Arc<Registry>) -> anyhow::Result<()> {
    if !config.tls.is_enabled() {
        return Ok(());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = certificate::load(config, &provider)?;
    // One configuration per transport, so that a session made on one of its
    // addresses resumes on any other (the ticket key is the configuration's).
    let dot = TlsAcceptor::from(server_config(&provider, &certificate, TLS_12_AND_13, &[])?);
    for (index, &address) in (0..).zip(&config.tls.listen) {
        let listener = tcp::bind(address, "DNS over TLS").await?;
        let rng = config.worker_rng(DOT_WORKERS + index);
        tokio::spawn(serve(listener, dot.clone(), snapshot.clone(), registry.clone(), rng));
    }
    let doh = TlsAcceptor::from(server_config(&provider, &certificate, TLS_12_AND_13, http::ALPN)?);
    for (index, &address) in (0..).zip(&config.tls.https_listen) {
        let listener = tcp::bind(address, "DNS over HTTPS").await?;
        let rng = config.worker_rng(DOH_WORKERS + index);
        tokio::spawn(doh::serve(listener, doh.clone(), snapshot.clone(), registry.clone(), rng));
    }
    let doq = server_config(&provider, &certificate, TLS_13, &[doq::ALPN])?;
    for (index, &address) in (0..).zip(&config.tls.quic_listen) {
        let endpoint = doq::endpoint(address, doq.clone(), &config.tcp)
            .with_context(|| format!("cannot listen for DNS over QUIC on UDP {address}"))?;
        tracing::info!(%address, "serving DNS over QUIC");
        let rng = config.worker_rng(DOQ_WORKERS + index);
        tokio::spawn(doq::serve(endpoint, snapshot.clone(), registry.clone(), rng));
    }
    Ok(())
}

/// An acceptor for HTTPS (HTTP/2 or HTTP/1.1, as ALPN chooses) presenting
/// the certificate of `[tls]`, for mechanisms other than DNS that serve
/// HTTPS: HTTP redirection.
pub(crate) fn https_acceptor(config: &Config) -> anyhow::Result<TlsAcceptor> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = certificate::load(config, &provider)?;
    Ok(TlsAcceptor::from(server_config(&provider, &certificate, TLS_12_AND_13, http::ALPN)?))
}

/// A rustls server configuration presenting `certificate`, offering the
/// `alpn` protocols, and resuming sessions: TLS 1.3 and 1.2 from tickets
/// (RFC 8446 section 2.2, RFC 5077), TLS 1.2 also from session IDs.
fn server_config(
    provider: &Arc<CryptoProvider>,
    certificate: &Arc<CertifiedKey>,
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> anyhow::Result<Arc<ServerConfig>> {
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .context("TLS: the crypto provider lacks these protocol versions")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(certificate.clone())));
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    config.ticketer = rustls::crypto::ring::Ticketer::new().context("TLS: cannot make a session ticket key")?;
    Ok(Arc::new(config))
}

/// Serves DNS over TLS on `listener` forever, one task per connection.
async fn serve(listener: TcpListener, acceptor: TlsAcceptor, snapshot: SharedSnapshot, registry: Arc<Registry>, rng: SmallRng) {
    // Padding only for those that pad their queries, and the keepalive
    // only for those that ask: see `pharos_answer::ResponseOptions`.
    let options = ResponseOptions { keepalive: Some(registry.limits().keepalive_timeout()), pad: true };
    tcp::accept_each(listener, registry, rng, move |stream, peer, admission, rng| {
        let (acceptor, snapshot) = (acceptor.clone(), snapshot.clone());
        async move {
            let Some(stream) = handshake(&acceptor, stream, &admission).await else { return };
            let client = Client { address: peer.ip(), transport: Transport::Stream };
            tcp::serve_connection(stream, client, options, snapshot, admission, rng).await;
        }
    })
    .await
}

/// The server side of a TLS handshake. A client that stalls in it is
/// dropped like any idle connection, by the registry.
pub(crate) async fn handshake<Stream>(acceptor: &TlsAcceptor, stream: Stream, admission: &Admission) -> Option<TlsStream<Stream>>
where
    Stream: AsyncRead + AsyncWrite + Unpin,
{
    match admission.unless_shed(acceptor.accept(stream)).await? {
        Ok(stream) => Some(stream),
        Err(error) => {
            tracing::debug!(%error, "TLS handshake failed");
            None
        }
    }
}
