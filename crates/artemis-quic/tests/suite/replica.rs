//! The replica through a real quinn client on loopback: the handshake
//! carries the replica's preferred address and service_ttl, and the
//! greeting names the replica; an HTTP/3 client (h3) gets the page that
//! names it, and the replica reports the connection.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Buf;
use pharos_artemis_quic::replica::{ALPN, H3_ALPN, Replica, ReplicaConfig};
use pharos_artemis_quic::tls::{HandshakeData, client_config};
use pharos_artemis_quic::{http3, params};

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
    tokio::spawn(replica.serve(|_| {}));

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
async fn an_http3_client_gets_the_page_naming_the_replica_which_reports_the_connection() {
    let replica = Replica::bind(&config(3, Duration::from_secs(60))).unwrap();
    let port = replica.local_addr().unwrap().port();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(replica.certificate().clone()).unwrap();
    let (connected_tx, mut connected_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(replica.serve(move |connected| connected_tx.send(connected.clone()).unwrap()));

    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    client.set_default_client_config(client_config(roots, H3_ALPN));
    let service: SocketAddr = SocketAddr::new("127.0.0.10".parse().unwrap(), port);
    let connection = client.connect(service, NAME).unwrap().await.unwrap();
    let (mut driver, mut requests) = h3::client::new(h3_quinn::Connection::new(connection)).await.unwrap();
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let mut stream = requests.send_request(http::Request::get(format!("https://{NAME}/")).body(()).unwrap()).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.status(), http::StatusCode::OK);
    assert_eq!(response.headers()[http::header::CONTENT_TYPE], "text/html; charset=utf-8");
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    assert_eq!(String::from_utf8(body).unwrap(), http3::page(3));
    assert!(http3::page(3).contains("hello from replica 3"));

    let connected = connected_rx.recv().await.unwrap();
    assert_eq!(connected.alpn, H3_ALPN);
    assert_eq!(connected.local, Some(service.ip()));
    assert_eq!(connected.client, client.local_addr().unwrap());
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
