//! Health probes on the network: one task per planned probe, on the tokio
//! runtime, each reporting every result to the control plane. Tasks follow
//! the plan: a probe whose replica or service is deleted is aborted the
//! moment the new plan arrives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use pharos_control::probe::{ProbeTarget, Purpose};
use pharos_model::probe::{ProbeKind, ProbeSpec};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use pharos_control::health::ProbeResult;

/// The most of an HTTP body a probe reads to look for its text.
const BODY_LIMIT: usize = 64 * 1024;

/// Runs the probes `plan` lists, forever, handing each result to `report`.
pub async fn run(mut plan: watch::Receiver<Arc<Vec<ProbeTarget>>>, report: Arc<dyn Fn(ProbeResult) + Send + Sync>) {
    let mut running: HashMap<ProbeTarget, AbortHandle> = HashMap::new();
    loop {
        let targets = plan.borrow_and_update().clone();
        running.retain(|target, task| {
            let keep = targets.contains(target);
            if !keep {
                task.abort();
            }
            keep
        });
        for target in targets.iter() {
            if !running.contains_key(target) {
                let task = tokio::spawn(probe_forever(target.clone(), report.clone()));
                running.insert(target.clone(), task.abort_handle());
            }
        }
        if plan.changed().await.is_err() {
            running.values().for_each(AbortHandle::abort);
            return;
        }
    }
}

/// How often a probe that this host cannot run says so in the log.
const LOCAL_FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

async fn probe_forever(target: ProbeTarget, report: Arc<dyn Fn(ProbeResult) + Send + Sync>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(target.spec.interval_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_logged: Option<tokio::time::Instant> = None;
    loop {
        ticks.tick().await;
        let outcome = match tokio::time::timeout(target.spec.timeout(), probe(&target)).await {
            Ok(Ok(load)) => Ok(load),
            Ok(Err(Failure::Replica(why))) => Err(why),
            Ok(Err(Failure::Local(error))) => {
                if last_logged.is_none_or(|at| at.elapsed() >= LOCAL_FAILURE_LOG_EVERY) {
                    last_logged = Some(tokio::time::Instant::now());
                    tracing::warn!(service = %target.service, replica = %target.replica, %error,
                        "cannot probe from this host; the replica keeps its state until a probe runs");
                }
                continue;
            }
            Err(_) => Err(format!("no answer within {} ms", target.spec.timeout().as_millis())),
        };
        report(ProbeResult { target: target.clone(), outcome });
    }
}

/// Why a probe did not pass.
#[derive(Debug)]
enum Failure {
    /// The replica did not serve as the probe asks, in words.
    Replica(String),
    /// This host could not probe at all: out of descriptors, memory or
    /// local ports. That says nothing of the replica.
    Local(std::io::Error),
}

impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure::Replica(why)
    }
}

impl From<std::io::Error> for Failure {
    /// Errors of opening a socket are this host's; others the replica's.
    fn from(error: std::io::Error) -> Failure {
        let local = [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM, libc::EADDRNOTAVAIL];
        match error.raw_os_error() {
            Some(code) if local.contains(&code) => Failure::Local(error),
            _ => Failure::Replica(error.to_string()),
        }
    }
}

/// One probe: `Ok` if the replica serves, with the number its answer
/// holds for a load probe.
async fn probe(target: &ProbeTarget) -> Result<Option<f64>, Failure> {
    let at = SocketAddr::new(target.address, target.spec.port());
    let body = match target.spec.kind {
        ProbeKind::Tcp => return connect(at).await.map(|_| None),
        ProbeKind::Dns => return dns_query(at, target.spec.name.as_deref().unwrap_or(".")).await.map(|()| None),
        ProbeKind::Http => http_get(connect(at).await?, &target.spec, at).await?,
        ProbeKind::Https => {
            let stream = connect(at).await?;
            let server_name = rustls::pki_types::ServerName::from(target.address);
            let tls = tls_connector().connect(server_name, stream).await.map_err(|error| format!("TLS: {error}"))?;
            http_get(tls, &target.spec, at).await?
        }
    };
    match target.purpose {
        Purpose::Health => Ok(None),
        Purpose::Load => {
            let text = String::from_utf8_lossy(&body);
            let load = text.trim().parse::<f64>().ok().filter(|load| load.is_finite() && *load >= 0.0);
            Ok(Some(load.ok_or_else(|| format!("the answer {:?} is not a load (a number, 0 or more)", text.trim()))?))
        }
    }
}

async fn connect(at: SocketAddr) -> Result<TcpStream, Failure> {
    Ok(TcpStream::connect(at).await?)
}

/// GETs the probe's path over `stream`; passes on the expected status and,
/// if asked, a body holding the expected text. Returns the body (its
/// first [`BODY_LIMIT`] octets).
async fn http_get(stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static, spec: &ProbeSpec, at: SocketAddr) -> Result<Bytes, String> {
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| format!("HTTP: {error}"))?;
    tokio::spawn(connection);
    let host = spec.name.clone().unwrap_or_else(|| at.to_string());
    let request = hyper::Request::get(spec.path.as_str())
        .header(hyper::header::HOST, host)
        .header(hyper::header::USER_AGENT, "pharos-probe")
        .body(Empty::<Bytes>::new())
        .map_err(|error| format!("HTTP: {error}"))?;
    let response = sender.send_request(request).await.map_err(|error| format!("HTTP: {error}"))?;
    let status = response.status().as_u16();
    if status != spec.expect_status {
        return Err(format!("HTTP status {status}, expected {}", spec.expect_status));
    }
    let body = Limited::new(response.into_body(), BODY_LIMIT).collect().await.map_err(|error| format!("HTTP body: {error}"))?.to_bytes();
    match &spec.body {
        Some(expected) if !String::from_utf8_lossy(&body).contains(expected.as_str()) => {
            Err(format!("the body (first {} octets) does not contain {expected:?}", body.len()))
        }
        _ => Ok(body),
    }
}

/// Asks `at` for `name` A over UDP; passes on a NOERROR answer to it.
async fn dns_query(at: SocketAddr, name: &str) -> Result<(), Failure> {
    let local: SocketAddr = if at.is_ipv4() { "0.0.0.0:0".parse().expect("literal") } else { "[::]:0".parse().expect("literal") };
    let socket = UdpSocket::bind(local).await?;
    let id: u16 = rand::Rng::random(&mut <rand::rngs::SmallRng as rand::SeedableRng>::from_os_rng());
    let query = dns_query_bytes(id, name)?;
    socket.send_to(&query, at).await?;
    let mut reply = [0u8; 1500];
    loop {
        let (length, from) = socket.recv_from(&mut reply).await?;
        // Anything not from the replica, or not our answer, is ignored.
        if from != at || length < 12 || reply[..2] != id.to_be_bytes() || reply[2] & 0x80 == 0 {
            continue;
        }
        return match reply[3] & 0x0f {
            0 => Ok(()),
            rcode => Err(format!("DNS answered RCODE {rcode}").into()),
        };
    }
}

/// A recursion-not-desired query for `name` A IN.
fn dns_query_bytes(id: u16, name: &str) -> Result<Vec<u8>, String> {
    let wire = pharos_wire::name::from_dotted(name).map_err(|error| format!("{name:?} is not a domain name ({error:?})"))?;
    let mut query = Vec::with_capacity(12 + wire.len() + 4);
    query.extend(id.to_be_bytes());
    query.extend([0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    query.extend(wire);
    query.extend([0, 1, 0, 1]);
    Ok(query)
}

/// A TLS client that takes any certificate: an HTTPS probe asks whether
/// the replica serves, not whether it is who it says (replicas are often
/// probed at internal addresses their certificates do not name).
fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONNECTOR: std::sync::OnceLock<tokio_rustls::TlsConnector> = std::sync::OnceLock::new();
    CONNECTOR
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            tokio_rustls::TlsConnector::from(Arc::new(config))
        })
        .clone()
}

#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &rustls::pki_types::CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &rustls::pki_types::CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_probe_queries_are_well_formed_and_bad_names_are_refused() {
        let query = dns_query_bytes(0x1234, "www.example.test").unwrap();
        assert_eq!(&query[..12], [0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&query[12..], b"\x03www\x07example\x04test\x00\x00\x01\x00\x01");
        assert!(dns_query_bytes(1, &format!("{}.test", "x".repeat(64))).is_err(), "a label over 63 octets");
    }
}
