//! Initials for the tests: real ones from quinn and aioquic, and
//! hand-sealed ones (with the client's Initial keys from rustls) for the
//! malformed cases no real client sends.

#![allow(dead_code)] // each test file uses a part

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pharos_artemis::client_hello::{ClientHelloTable, Decoded, Limits};
use pharos_artemis::initial::QuicVersion;
pub use pharos_artemis::seal::{Sealed, crypto_frame};

pub const SERVER_NAME: &str = "svc.example.test";

/// The datagrams of quinn's first flight to a socket that never answers,
/// until they hold a whole ClientHello. `alpn_count` protocols of 24 bytes
/// each make the ClientHello as large as a post-quantum one.
pub fn quinn_initials(alpn_count: usize) -> Vec<Vec<u8>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let capture = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut crypto = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        crypto.alpn_protocols = (0..alpn_count).map(|i| format!("artemis-test-protocol-{i:03}").into_bytes()).collect();
        let config = quinn::ClientConfig::new(Arc::new(quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap()));
        let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let connecting = endpoint.connect_with(config, capture.local_addr().unwrap(), SERVER_NAME).unwrap();
        let _driver = tokio::spawn(connecting);
        let mut table = ClientHelloTable::new(Limits::default());
        let mut buffer = vec![0; 65536];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (len, from) = tokio::time::timeout_at(deadline, capture.recv_from(&mut buffer))
                .await
                .expect("quinn's Initials complete a ClientHello within 10 s")
                .unwrap();
            if let Decoded::Complete { datagrams, .. } = table.receive(from, &buffer[..len], Instant::now()).unwrap() {
                return datagrams;
            }
        }
    })
}

/// aioquic's first flight (see fixtures/aioquic_initials.py), or None
/// when aioquic is missing and cannot be installed: said loudly, and a
/// failure under CI=true.
pub fn aioquic_initials(version: QuicVersion, big: bool) -> Option<Vec<Vec<u8>>> {
    if !python_has_aioquic() {
        let installed = Command::new("pip").args(["install", "--quiet", "aioquic"]).status().is_ok_and(|s| s.success());
        if !installed || !python_has_aioquic() {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "aioquic is required under CI");
            eprintln!("SKIPPED: aioquic is not installed and `pip install aioquic` failed");
            return None;
        }
    }
    let out = tempdir();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aioquic_initials.py");
    let version = match version {
        QuicVersion::V1 => "1",
        QuicVersion::V2 => "2",
    };
    let status = Command::new("python3")
        .arg(&script)
        .args([out.to_str().unwrap(), SERVER_NAME, version, if big { "1" } else { "0" }])
        .status()
        .unwrap();
    assert!(status.success(), "{} failed", script.display());
    let mut datagrams = Vec::new();
    while let Ok(datagram) = std::fs::read(out.join(format!("{}.bin", datagrams.len()))) {
        datagrams.push(datagram);
    }
    std::fs::remove_dir_all(&out).unwrap();
    Some(datagrams)
}

fn python_has_aioquic() -> bool {
    Command::new("python3").args(["-c", "import aioquic"]).status().is_ok_and(|status| status.success())
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("artemis-aioquic-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn client() -> SocketAddr {
    "198.51.100.7:50000".parse().unwrap()
}
