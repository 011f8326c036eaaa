//! Whom the forwarder trusts, and the TLS client configurations it makes
//! from that. Certificates are always verified: against the CA file given,
//! else against the system's CA bundle; there is no way to turn that off.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme, SupportedProtocolVersion};

use crate::config::Protocol;
use crate::error::{ClientTlsError, RootsError, TrustError};

/// The protocol DNS over QUIC names in the handshake (RFC 9250 section 4.1).
pub const DOQ_ALPN: &[u8] = b"doq";
/// Where Debian and its kin keep the system's CA bundle, unless the
/// SSL_CERT_FILE environment variable (as OpenSSL reads it) says otherwise.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// DNS over TLS takes TLS 1.2 too (RFC 7858 requires no more).
const TLS_12_AND_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];
/// QUIC is defined over TLS 1.3 only (RFC 9001 section 4.2).
const TLS_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// The certificates the forwarder trusts.
pub struct Trust {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl Trust {
    /// Trusts the certificates in the PEM file `ca`, else the system's.
    pub fn load(ca: Option<&Path>) -> Result<Trust, TrustError> {
        let roots = match ca {
            Some(path) => read_roots(path).map_err(|source| TrustError::Ca { path: path.to_path_buf(), source })?,
            None => {
                let path = std::env::var_os("SSL_CERT_FILE").map_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE), PathBuf::from);
                read_roots(&path).map_err(|source| TrustError::SystemBundle { path, source })?
            }
        };
        Ok(Trust { roots: Arc::new(roots), provider: Arc::new(rustls::crypto::ring::default_provider()) })
    }

    /// A client configuration for one connection slot of a `protocol`
    /// upstream. Each slot has its own, and so its own session cache: the
    /// slot's next connection resumes the session of its last one, and the
    /// configuration's verifier tells full handshakes from resumed ones.
    pub fn client_tls(&self, protocol: Protocol) -> Result<ClientTls, ClientTlsError> {
        let webpki = WebPkiServerVerifier::builder_with_provider(self.roots.clone(), self.provider.clone())
            .build()
            .map_err(ClientTlsError::Verifier)?;
        let verifier = Arc::new(CountingVerifier { webpki, verified: AtomicU64::new(0) });
        let versions = match protocol {
            Protocol::Tls => TLS_12_AND_13,
            Protocol::Quic => TLS_13,
        };
        let mut config = ClientConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(versions)
            .map_err(ClientTlsError::ProtocolVersions)?
            // "Dangerous" only in that rustls cannot vouch for a verifier
            // it did not write; this one is its own webpki verifier, counted.
            .dangerous()
            .with_custom_certificate_verifier(verifier.clone())
            .with_no_client_auth();
        if protocol == Protocol::Quic {
            config.alpn_protocols = vec![DOQ_ALPN.to_vec()];
        }
        Ok(ClientTls { config: Arc::new(config), verifier })
    }
}

/// Reads PEM certificates to trust from `path`.
fn read_roots(path: &Path) -> Result<RootCertStore, RootsError> {
    let pem = std::fs::read(path).map_err(|source| RootsError::Read { path: path.to_path_buf(), source })?;
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|source| RootsError::NotPem { path: path.to_path_buf(), source })?;
    if certificates.is_empty() {
        return Err(RootsError::Empty { path: path.to_path_buf() });
    }
    let mut roots = RootCertStore::empty();
    let (added, _unusable) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(RootsError::Unparsable { path: path.to_path_buf() });
    }
    Ok(roots)
}

/// The TLS client configuration of one connection slot.
pub struct ClientTls {
    pub config: Arc<ClientConfig>,
    verifier: Arc<CountingVerifier>,
}

impl ClientTls {
    /// Server certificates verified so far: one per full handshake, none
    /// in a resumed one (the server sends no certificate then).
    pub fn certificates_verified(&self) -> u64 {
        self.verifier.verified.load(Ordering::Relaxed)
    }
}

/// Verifies certificates as webpki does, counting those that pass: quinn
/// does not say whether a handshake resumed a session, but this tells.
#[derive(Debug)]
struct CountingVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    verified: AtomicU64,
}

impl ServerCertVerifier for CountingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        self.verified.fetch_add(1, Ordering::Relaxed);
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, certificate, signature)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, certificate, signature)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pharos_wire::causes;

    #[test]
    fn a_ca_file_that_holds_no_certificate_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let error = causes(&Trust::load(Some(&missing)).err().unwrap());
        assert!(error.contains("missing.pem") && error.contains("cannot read"), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let error = causes(&Trust::load(Some(&empty)).err().unwrap());
        assert!(error.contains("holds no certificate"), "{error}");
    }
}
