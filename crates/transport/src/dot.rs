//! DNS over TLS (RFC 7858): TCP's conversation inside TLS, with the same
//! framing, pipelining and connection caps, from [`crate::tcp`].

use pharos_answer::ResponseOptions;
use rand::rngs::SmallRng;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::metrics::{Mechanism, Secured};
use crate::{tcp, tls};

/// Serves DNS over TLS on `listener` forever, one task per connection.
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, serving: tcp::Serving, rng: SmallRng) {
    // Padding only for those that pad their queries, and the keepalive
    // only for those that ask: see `pharos_answer::ResponseOptions`.
    let keepalive = Some(serving.registry.limits().keepalive_timeout());
    let options = ResponseOptions { keepalive, pad: true, ..ResponseOptions::default() };
    tcp::accept_each(listener, serving.registry.clone(), rng, move |stream, peer, admission, rng| {
        let (acceptor, serving) = (acceptor.clone(), serving.clone());
        async move {
            let server = tcp::local_address(&stream);
            // A proxy's header comes before the handshake, as dnsdist sends it.
            let Some((client, stream)) = serving.open(stream, peer, &admission, Mechanism::Tls).await else { return };
            let connection = tcp::Stream::new(client, server, options, &serving, Mechanism::Tls);
            let Some(stream) = tls::handshake(&acceptor, stream, &admission, Secured::Tls).await else { return };
            tcp::serve_connection(stream, connection, serving.snapshot, admission, rng).await;
        }
    })
    .await
}
