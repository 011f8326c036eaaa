//! The client against a replica on loopback (the service address and the
//! preferred address distinct 127.0.0.x, both local): it learns the
//! preferred address and service_ttl, talks to the replica after moving,
//! comes straight back while the ttl lasts and through the service
//! address after. The replica counts where each datagram arrived.

use std::time::{Duration, Instant};

use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap};
use pharos_artemis_quic::client::{ArtemisClient, ClientError, Route};
use pharos_artemis_quic::replica::{ALPN, Replica, ReplicaConfig};
use pharos_artemis_quic::socket::ArrivalCounts;
use pharos_artemis_quic::tls::client_config;

const NAME: &str = "svc.example.test";
const TTL: Duration = Duration::from_secs(30);

async fn greet(connection: &quinn::Connection) -> Vec<u8> {
    let (mut send, mut receive) = connection.open_bi().await.unwrap();
    send.write_all(b"ping").await.unwrap();
    send.finish().unwrap();
    receive.read_to_end(4096).await.unwrap()
}

fn counts(arrivals: &ArrivalCounts) -> (u64, u64) {
    (arrivals.at_service_address(), arrivals.elsewhere())
}

fn start_replica() -> (Replica, rustls::RootCertStore, u16) {
    let replica = Replica::bind(&ReplicaConfig {
        replica_id: 9,
        service_address: "127.0.0.40".parse().unwrap(),
        preferred_address: "127.0.0.41:0".parse().unwrap(),
        service_ttl: TTL,
        server_name: NAME.into(),
    })
    .unwrap();
    let port = replica.local_addr().unwrap().port();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(replica.certificate().clone()).unwrap();
    (replica, roots, port)
}

fn addresses() -> ServiceIdMap {
    // The conflict list pins the name's service address on loopback.
    let conflicts = ConflictList::parse(&format!("{NAME} 127.0.0.40\n"), &"127.0.0.0/8".parse().unwrap()).unwrap();
    ServiceIdMap::new("127.0.0.0/8".parse().unwrap(), conflicts)
}

#[tokio::test]
async fn moves_to_the_replica_and_comes_straight_back_while_the_ttl_lasts() {
    let name = CanonicalName::new(NAME).unwrap();
    let (replica, roots, port) = start_replica();
    let preferred = format!("127.0.0.41:{port}").parse().unwrap();
    let arrivals = replica.arrivals();
    tokio::spawn(replica.serve(|_| {}));
    let mut client = ArtemisClient::new(addresses(), port, client_config(roots, ALPN));
    let start = Instant::now();

    let mut first = client.connect(&name, start).await.unwrap();
    let service = format!("127.0.0.40:{port}").parse().unwrap();
    assert_eq!(first.route, Route::Service { service, replica: Some(preferred), service_ttl: Some(TTL) });
    assert!(counts(&arrivals).0 > 0, "the handshake came through the service address");
    // The first greeting leaves before the move, on the service address.
    assert_eq!(greet(&first.connection).await, b"hello from replica 9\nping");
    assert_eq!(first.settled().await.unwrap(), Some(preferred), "then the connection moved to the replica");
    // The replica reads its one socket in order, so once it has answered a
    // greeting it has counted every datagram sent before the move.
    assert_eq!(greet(&first.connection).await, b"hello from replica 9\nping");
    let before = counts(&arrivals);
    assert_eq!(greet(&first.connection).await, b"hello from replica 9\nping");
    let after = counts(&arrivals);
    assert_eq!(after.0, before.0, "nothing more at the service address after the move");
    assert!(after.1 > before.1, "the greeting went to the preferred address");
    first.connection.close(0u32.into(), b"done");

    let mut second = client.connect(&name, start + TTL - Duration::from_secs(1)).await.unwrap();
    assert_eq!(second.route, Route::Cached { replica: preferred });
    assert_eq!(second.settled().await.unwrap(), None, "already at the replica: no move");
    assert_eq!(greet(&second.connection).await, b"hello from replica 9\nping");
    assert_eq!(counts(&arrivals).0, before.0, "within the ttl the service address sees nothing");
    second.connection.close(0u32.into(), b"done");

    let third = client.connect(&name, start + TTL).await.unwrap();
    assert!(matches!(third.route, Route::Service { .. }), "{:?}", third.route);
    assert!(counts(&arrivals).0 > before.0, "after the ttl the handshake goes to the service address again");
    assert_eq!(greet(&third.connection).await, b"hello from replica 9\nping");
}

#[tokio::test]
async fn a_config_without_our_crypto_glue_is_refused_clearly() {
    let (replica, roots, port) = start_replica();
    tokio::spawn(replica.serve(|_| {}));
    let mut tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let quinn_own = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let config = quinn::ClientConfig::new(std::sync::Arc::new(quinn_own));
    let mut client = ArtemisClient::new(addresses(), port, config);
    let error = client.connect(&CanonicalName::new(NAME).unwrap(), Instant::now()).await.err().unwrap();
    assert!(matches!(error, ClientError::NotArtemisCrypto), "{error}");
}
