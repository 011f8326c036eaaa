//! `pharos replica` through the binary on loopback, with a quinn client
//! built from pharos-artemis-quic.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pharos_artemis_quic::params;
use pharos_artemis_quic::replica::ALPN;
use pharos_artemis_quic::tls::{HandshakeData, client_config};

/// A running `pharos replica`, killed when dropped.
struct ReplicaProcess {
    child: Child,
    port: u16,
    certificate: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl ReplicaProcess {
    fn start(listen: &str, service_address: &str, replica_id: u16, ttl: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.der");
        let mut child = Command::new(env!("CARGO_BIN_EXE_pharos"))
            .args(["replica", "--listen", listen, "--service-address", service_address, "--name", "svc.example.test"])
            .args(["--replica-id", &replica_id.to_string(), "--ttl", &ttl.to_string()])
            .arg("--cert-out")
            .arg(&cert)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("pharos replica printed {line:?}"));
        Self { child, port, certificate: std::fs::read(&cert).unwrap(), _dir: dir }
    }
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

#[tokio::test]
async fn pharos_replica_advertises_its_address_and_ttl_and_greets() {
    let replica = ReplicaProcess::start("127.0.0.21:0", "127.0.0.20", 3, 60);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(replica.certificate.clone().into()).unwrap();
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    client.set_default_client_config(client_config(roots, ALPN));
    let service = SocketAddr::new("127.0.0.20".parse().unwrap(), replica.port);
    let connection = client.connect(service, "svc.example.test").unwrap().await.unwrap();

    let handshake = connection.handshake_data().unwrap().downcast::<HandshakeData>().unwrap();
    let learned = params::parse(&handshake.peer_transport_parameters).unwrap();
    assert_eq!(learned.service_ttl, Some(Duration::from_secs(60)));
    assert_eq!(learned.preferred_v4, Some(format!("127.0.0.21:{}", replica.port).parse().unwrap()));
    let (mut send, mut receive) = connection.open_bi().await.unwrap();
    send.write_all(b"hi").await.unwrap();
    send.finish().unwrap();
    assert_eq!(receive.read_to_end(100).await.unwrap(), b"hello from replica 3\nhi");
}

#[test]
fn pharos_replica_refuses_a_service_address_equal_to_its_own() {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["replica", "--listen", "127.0.0.21:0", "--service-address", "127.0.0.21", "--replica-id", "1", "--ttl", "1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8(output.stderr).unwrap();
    assert!(error.contains("must differ and be of one family"), "{error}");
}

#[test]
fn pharos_connect_moves_to_the_replica_then_comes_straight_back() {
    let replica = ReplicaProcess::start("127.0.0.23:0", "127.0.0.22", 4, 60);
    let dir = tempfile::tempdir().unwrap();
    let (ca, conflicts) = (dir.path().join("ca.der"), dir.path().join("conflicts"));
    std::fs::write(&ca, &replica.certificate).unwrap();
    std::fs::write(&conflicts, "svc.example.test 127.0.0.22\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["connect", "svc.example.test", "--prefix", "127.0.0.0/8", "--repeat", "2"])
        .args(["--port", &replica.port.to_string()])
        .arg("--conflicts")
        .arg(&conflicts)
        .arg("--ca")
        .arg(&ca)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let port = replica.port;
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!(
            "via 127.0.0.22:{port} moved to 127.0.0.23:{port} ttl 60: hello from replica 4\n\
             straight to 127.0.0.23:{port}: hello from replica 4\n"
        )
    );
}
