//! Why the forwarder could not start, why a connection to an upstream
//! could not be made, and why a DNS over QUIC stream brought no answer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why the forwarder cannot start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error(transparent)]
    ClientTls(#[from] ClientTlsError),
    #[error("{name:?} is not a server name")]
    ServerName { name: String, source: rustls::pki_types::InvalidDnsNameError },
    #[error("TLS configuration unfit for QUIC")]
    Quic(#[source] quinn::crypto::rustls::NoInitialCipherSuite),
    /// `hint` says what may help, or is empty.
    #[error("cannot listen for DNS on {transport} {address}{hint}")]
    Listen { transport: &'static str, address: SocketAddr, hint: &'static str, source: std::io::Error },
    /// The signals it stops or reports on cannot be waited for.
    #[error(transparent)]
    Signals(#[from] std::io::Error),
}

/// Why the certificates to trust cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("--ca {}", path.display())]
    Ca { path: PathBuf, source: RootsError },
    #[error("no --ca given, and the system's CA bundle {} is unusable: give --ca FILE", path.display())]
    SystemBundle { path: PathBuf, source: RootsError },
}

/// What is wrong with a PEM file of certificates to trust.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    #[error("cannot read {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not PEM", path.display())]
    NotPem { path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("{} holds no certificate (\"-----BEGIN CERTIFICATE-----\")", path.display())]
    Empty { path: PathBuf },
    #[error("none of the certificates in {} can be trusted: they cannot be parsed", path.display())]
    Unparsable { path: PathBuf },
}

/// Why a connection slot's TLS client configuration cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    #[error("TLS: cannot build a certificate verifier from the trusted certificates")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    #[error("TLS: the crypto provider lacks these protocol versions")]
    ProtocolVersions(#[source] rustls::Error),
}

/// Why a connection to an upstream was not made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("TCP connection failed")]
    Tcp(#[source] std::io::Error),
    /// The connected socket refused an option.
    #[error(transparent)]
    Socket(std::io::Error),
    #[error("TLS handshake failed")]
    TlsHandshake(#[source] std::io::Error),
    #[error("cannot open a UDP socket for QUIC")]
    QuicSocket(#[source] std::io::Error),
    #[error(transparent)]
    QuicConnect(#[from] quinn::ConnectError),
    #[error("QUIC handshake failed")]
    QuicHandshake(#[source] quinn::ConnectionError),
    #[error("no handshake within {0:?}")]
    Timeout(Duration),
}

/// Why a DNS over QUIC stream brought no answer.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Open(#[from] quinn::ConnectionError),
    #[error(transparent)]
    Write(#[from] quinn::WriteError),
    #[error(transparent)]
    Finish(#[from] quinn::ClosedStream),
    #[error(transparent)]
    Read(#[from] quinn::ReadToEndError),
    #[error("the stream ended inside the length")]
    EndsInLength,
    #[error("the stream holds {held} octets after a length of {length}")]
    WrongLength { held: usize, length: usize },
    #[error("the stream holds what is no DNS response")]
    NotResponse,
}
