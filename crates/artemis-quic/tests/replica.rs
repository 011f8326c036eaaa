//! The replica through a real quinn client on loopback: the handshake
//! carries the replica's preferred address and service_ttl, and the
//! greeting names the replica.

use std::net::SocketAddr;
use std::time::Duration;

use pharos_artemis_quic::params;
use pharos_artemis_quic::replica::{ALPN, Replica, ReplicaConfig};
use pharos_artemis_quic::tls::{HandshakeData, client_config};

const NAME: &str = "svc.example.test";

fn config(replica_id: u16, ttl: Duration) -> ReplicaConfig {
    ReplicaConfig {
        replica_id,
        service_address: "127.0.0.10".parse().unwrap(),
        preferred_address: "127.0.0.11:0".parse().unwrap(),
        service_ttl: ttl,
        server_name: NAME.into(),
    }
}

async fn greet(connection: &quinn::Connection, request: &[u8]) -> Vec<u8> {
    let (mut send, mut receive) = connection.open_bi().await.unwrap();
    send.write_all(request).await.unwrap();
    send.finish().unwrap();
    receive.read_to_end(4096).await.unwrap()
}

#[tokio::test]
async fn a_client_reads_the_preferred_address_and_service_ttl_and_is_greeted() {
    let replica = Replica::bind(&config(7, Duration::from_secs(300))).unwrap();
    let port = replica.local_addr().unwrap().port();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(replica.certificate().clone()).unwrap();
    tokio::spawn(replica.serve());

    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    client.set_default_client_config(client_config(roots, ALPN));
    let service: SocketAddr = SocketAddr::new("127.0.0.10".parse().unwrap(), port);
    let connection = client.connect(service, NAME).unwrap().await.unwrap();

    let handshake = connection.handshake_data().unwrap().downcast::<HandshakeData>().unwrap();
    assert_eq!(handshake.alpn.as_deref(), Some(ALPN));
    let learned = params::parse(&handshake.peer_transport_parameters).unwrap();
    assert_eq!(learned.service_ttl, Some(Duration::from_secs(300)));
    assert_eq!(learned.preferred_v4, Some(format!("127.0.0.11:{port}").parse().unwrap()));
    assert_eq!(learned.preferred_v6, None);

    assert_eq!(greet(&connection, b"ping").await, b"hello from replica 7\nping");
    assert_eq!(connection.remote_address(), service);
}

#[tokio::test]
async fn refuses_a_service_address_equal_to_or_of_another_family_than_its_own() {
    let mut same = config(1, Duration::from_secs(1));
    same.service_address = "127.0.0.11".parse().unwrap();
    let mut other_family = config(1, Duration::from_secs(1));
    other_family.service_address = "::1".parse().unwrap();
    for bad in [same, other_family] {
        let error = Replica::bind(&bad).err().unwrap().to_string();
        assert!(error.contains("must differ and be of one family"), "{error}");
    }
}
