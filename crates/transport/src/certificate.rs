//! The certificate the encrypted transports present: the operator's PEM
//! files, or a self-signed certificate made at first start and kept in the
//! state directory, so that later starts (and pinning clients) see the same.

use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::config::{Settings, TlsConfig};

/// Names of the generated certificate and key files in the state directory.
const GENERATED_CERTIFICATE: &str = "pharos-tls-certificate.pem";
const GENERATED_KEY: &str = "pharos-tls-key.pem";

/// Why the certificate cannot be presented, with the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("cannot read {setting} {}", path.display())]
    Read { setting: &'static str, path: PathBuf, source: std::io::Error },
    #[error("tls.certificate {} with tls.key {}", certificate.display(), key.display())]
    Unusable { certificate: PathBuf, key: PathBuf, source: PemError },
    #[error("generated TLS certificate")]
    GeneratedUnusable(#[source] PemError),
    #[error("cannot find the directory {}", path.display())]
    Directory { path: PathBuf, source: std::io::Error },
    #[error("{} is there but {} is not: remove {} to have a new pair made, or give tls.certificate and tls.key", present.display(), absent.display(), present.display())]
    HalfPair { present: PathBuf, absent: PathBuf },
    #[error("cannot make a self-signed TLS certificate")]
    Generate(#[source] rcgen::Error),
    #[error("cannot create {}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// What is wrong with a certificate chain and key given as PEM.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("the certificate file is not PEM (\"-----BEGIN CERTIFICATE-----\")")]
    NotPem(#[source] rustls::pki_types::pem::Error),
    #[error("the certificate file holds no certificate (\"-----BEGIN CERTIFICATE-----\")")]
    NoCertificate,
    #[error("the key file holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey(#[source] rustls::pki_types::pem::Error),
    #[error("the key is unusable or is not the certificate's")]
    Mismatch(#[source] rustls::Error),
}

/// The files a generated certificate and its key are kept in, in the
/// state directory `directory`.
pub fn generated_files(directory: &Path) -> [PathBuf; 2] {
    [directory.join(GENERATED_CERTIFICATE), directory.join(GENERATED_KEY)]
}

/// Reads the operator's certificate and key, if `tls` names them, as
/// [`load`] would (for `pharos check`); a generated pair is left alone.
pub fn check_configured(tls: &TlsConfig) -> Result<(), CertificateError> {
    if let (Some(certificate), Some(key)) = (&tls.certificate, &tls.key) {
        read(certificate, key, &rustls::crypto::ring::default_provider())?;
    }
    Ok(())
}

/// The certificate of `settings`: its `tls.certificate` and `tls.key`,
/// else the generated pair in the state directory, made now if not there yet.
pub fn load(settings: &Settings, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, CertificateError> {
    if let (Some(certificate), Some(key)) = (&settings.tls.certificate, &settings.tls.key) {
        return read(certificate, key, provider);
    }
    let names = subject_names(settings);
    let Some(directory) = settings.state_directory.as_deref() else {
        tracing::warn!("no store or configuration file to keep a TLS certificate beside: a self-signed one serves this run only");
        let (certificate, key) = self_signed(&names)?;
        return certified(certificate.as_bytes(), key.as_bytes(), provider).map_err(CertificateError::GeneratedUnusable);
    };
    // Absolute, so that the log says where the files are.
    let directory =
        std::path::absolute(directory).map_err(|source| CertificateError::Directory { path: directory.to_path_buf(), source })?;
    let (certificate, key) = (directory.join(GENERATED_CERTIFICATE), directory.join(GENERATED_KEY));
    match (certificate.exists(), key.exists()) {
        (true, true) => tracing::info!(certificate = %certificate.display(), "TLS: the self-signed certificate made at an earlier start"),
        (false, false) => {
            generate(&certificate, &key, &names)?;
            tracing::info!(certificate = %certificate.display(), "TLS: made a self-signed certificate");
        }
        (certificate_exists, _) => {
            let (present, absent) = if certificate_exists { (certificate, key) } else { (key, certificate) };
            return Err(CertificateError::HalfPair { present, absent });
        }
    }
    read(&certificate, &key, provider)
}

/// Reads a PEM certificate chain and its private key, and checks that they
/// belong together.
fn read(certificate: &Path, key: &Path, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, CertificateError> {
    let read_setting =
        |setting, path: &Path| std::fs::read(path).map_err(|source| CertificateError::Read { setting, path: path.to_path_buf(), source });
    let (certificate_pem, key_pem) = (read_setting("tls.certificate", certificate)?, read_setting("tls.key", key)?);
    certified(&certificate_pem, &key_pem, provider).map_err(|source| CertificateError::Unusable {
        certificate: certificate.to_path_buf(),
        key: key.to_path_buf(),
        source,
    })
}

/// Parses a PEM certificate chain and private key into the form rustls serves.
fn certified(certificate_pem: &[u8], key_pem: &[u8], provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, PemError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(certificate_pem).collect::<Result<_, _>>().map_err(PemError::NotPem)?;
    if chain.is_empty() {
        return Err(PemError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(PemError::NoKey)?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(PemError::Mismatch)?;
    Ok(Arc::new(certified))
}

/// Makes a self-signed certificate for `names` and writes it and its key,
/// the key readable by its owner only.
fn generate(certificate: &Path, key: &Path, names: &[String]) -> Result<(), CertificateError> {
    let (certificate_pem, key_pem) = self_signed(names)?;
    write_new(key, &key_pem, 0o600)?;
    write_new(certificate, &certificate_pem, 0o644)
}

/// A self-signed certificate for `names`, and its key, both as PEM.
fn self_signed(names: &[String]) -> Result<(String, String), CertificateError> {
    let generated = rcgen::generate_simple_self_signed(names).map_err(CertificateError::Generate)?;
    Ok((generated.cert.pem(), generated.signing_key.serialize_pem()))
}

/// Writes a file that must not exist yet.
fn write_new(path: &Path, contents: &str, mode: u32) -> Result<(), CertificateError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|source| CertificateError::Create { path: path.to_path_buf(), source })?;
    file.write_all(contents.as_bytes()).map_err(|source| CertificateError::Write { path: path.to_path_buf(), source })
}

/// The names a generated certificate is for: localhost, and each address
/// the encrypted transports and HTTPS redirection listen on that a client
/// could name.
fn subject_names(settings: &Settings) -> Vec<String> {
    let tls = &settings.tls;
    let listeners = tls.listen.iter().chain(&tls.https_listen).chain(&tls.quic_listen).chain(&settings.http.https_listen);
    let mut addresses: Vec<IpAddr> = listeners.map(|address| address.ip()).collect();
    addresses.retain(|address| !address.is_unspecified());
    addresses.sort_unstable();
    addresses.dedup();
    std::iter::once("localhost".to_string()).chain(addresses.iter().map(IpAddr::to_string)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> CryptoProvider {
        rustls::crypto::ring::default_provider()
    }

    fn config_in(directory: &Path) -> Settings {
        let mut config = Settings { state_directory: Some(directory.to_path_buf()), ..Settings::default() };
        config.tls.listen = vec!["127.0.0.1:853".parse().unwrap(), "0.0.0.0:853".parse().unwrap()];
        config.http.https_listen = vec!["[::1]:443".parse().unwrap(), "127.0.0.1:443".parse().unwrap()];
        config
    }

    #[test]
    fn a_generated_certificate_is_kept_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_in(dir.path());
        assert_eq!(subject_names(&config), ["localhost", "127.0.0.1", "::1"]);
        let first = load(&config, &provider()).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dir.path().join(GENERATED_KEY)).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        let again = load(&config, &provider()).unwrap();
        assert_eq!(first.cert, again.cert);
    }

    #[test]
    fn half_a_generated_pair_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_in(dir.path());
        load(&config, &provider()).unwrap();
        std::fs::remove_file(dir.path().join(GENERATED_KEY)).unwrap();
        let error = load(&config, &provider()).unwrap_err().to_string();
        assert!(error.contains(GENERATED_CERTIFICATE) && error.contains("is not"), "{error}");
    }

    #[test]
    fn bad_files_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = (self_signed(&["a.test".into()]).unwrap(), self_signed(&["b.test".into()]).unwrap());
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (certificate, key, other_key, garbage) =
            (write("c.pem", &one.0), write("k.pem", &one.1), write("o.pem", &other.1), write("g.pem", "hello"));
        read(&certificate, &key, &provider()).unwrap();
        let missing = dir.path().join("missing.pem");
        for (certificate, key, expected) in [
            (&missing, &key, "cannot read tls.certificate"),
            (&garbage, &key, "holds no certificate"),
            (&certificate, &garbage, "no PEM private key"),
            (&certificate, &other_key, "not the certificate's"),
        ] {
            let error = pharos_wire::causes(&read(certificate, key, &provider()).unwrap_err());
            assert!(error.contains(expected) && error.contains(&certificate.display().to_string()), "{error}");
        }
    }
}
