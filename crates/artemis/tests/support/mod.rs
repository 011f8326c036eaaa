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
use rustls::Side;
use rustls::quic::{Keys, Version};

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

/// How a hand-sealed Initial is built; the defaults are a valid one.
#[derive(Clone)]
pub struct Sealed {
    pub version: u32,
    pub first_byte: u8,
    pub dcid: Vec<u8>,
    pub scid: Vec<u8>,
    pub packet_number: u32,
    pub frames: Vec<u8>,
    /// The datagram is padded with PADDING frames up to this size.
    pub datagram_size: usize,
}

impl Sealed {
    pub fn new(frames: Vec<u8>) -> Self {
        Self {
            version: 1,
            first_byte: 0xc3, // long header, fixed bit, Initial (v1), 4-byte packet number
            dcid: vec![0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08],
            scid: vec![0xaa; 8],
            packet_number: 0,
            frames,
            datagram_size: 1200,
        }
    }

    /// The protected packet, encrypted with the client's Initial keys.
    pub fn seal(&self) -> Vec<u8> {
        let version = QuicVersion::from_wire(self.version).expect("sealing needs v1 or v2");
        let mut header = vec![self.first_byte];
        header.extend_from_slice(&self.version.to_be_bytes());
        for id in [&self.dcid, &self.scid] {
            header.push(id.len() as u8);
            header.extend_from_slice(id);
        }
        header.push(0); // no token
        let overhead = header.len() + 2 + 4 + 16;
        let mut payload = self.frames.clone();
        payload.resize(payload.len().max(self.datagram_size.saturating_sub(overhead)), 0);
        let length = 4 + payload.len() + 16;
        header.extend_from_slice(&(0x4000 | length as u16).to_be_bytes());
        let number_offset = header.len();
        header.extend_from_slice(&self.packet_number.to_be_bytes());
        let keys = client_keys(version, &self.dcid);
        let tag = keys.packet.encrypt_in_place(self.packet_number.into(), &header, &mut payload).unwrap();
        let mut packet = header;
        packet.extend_from_slice(&payload);
        packet.extend_from_slice(tag.as_ref());
        let sample: [u8; 16] = packet[number_offset + 4..number_offset + 20].try_into().unwrap();
        let (first, rest) = packet.split_at_mut(number_offset);
        keys.header.encrypt_in_place(&sample, &mut first[0], &mut rest[..4]).unwrap();
        packet
    }
}

fn client_keys(version: QuicVersion, dcid: &[u8]) -> rustls::quic::DirectionalKeys {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256.tls13().unwrap().quic_suite().unwrap();
    let version = match version {
        QuicVersion::V1 => Version::V1,
        QuicVersion::V2 => Version::V2,
    };
    Keys::initial(version, suite.suite, suite.quic, dcid, Side::Client).local
}

/// A CRYPTO frame carrying `data` at `offset` (8-byte varints, always valid).
pub fn crypto_frame(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x06];
    frame.extend_from_slice(&(0xc000_0000_0000_0000 | offset).to_be_bytes());
    frame.extend_from_slice(&(0xc000_0000_0000_0000 | data.len() as u64).to_be_bytes());
    frame.extend_from_slice(data);
    frame
}

pub fn client() -> SocketAddr {
    "198.51.100.7:50000".parse().unwrap()
}
