//! DNS over TLS (RFC 7858): TCP's conversation inside TLS, with the same
//! framing, pipelining and connection caps, from [`crate::tcp`].

use std::sync::Arc;

use pharos_answer::{ResponseOptions, SharedSnapshot};
use rand::rngs::SmallRng;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::cookies::CookieSecret;
use crate::metrics::{Mechanism, Secured};
use crate::proxy::ProxySources;
use crate::registry::Registry;
use crate::{tcp, tls};

/// Serves DNS over TLS on `listener` forever, one task per connection.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    snapshot: SharedSnapshot,
    registry: Arc<Registry>,
    rng: SmallRng,
    cookies: Option<Arc<CookieSecret>>,
    proxies: Option<Arc<ProxySources>>,
) {
    // Padding only for those that pad their queries, and the keepalive
    // only for those that ask: see `pharos_answer::ResponseOptions`.
    let options = ResponseOptions { keepalive: Some(registry.limits().keepalive_timeout()), pad: true, ..ResponseOptions::default() };
    tcp::accept_each(listener, registry, rng, move |stream, peer, admission, rng| {
        let (acceptor, snapshot, cookies, proxies) = (acceptor.clone(), snapshot.clone(), cookies.clone(), proxies.clone());
        async move {
            let server = tcp::local_address(&stream);
            // A proxy's header comes before the handshake, as dnsdist sends it.
            let Some((client, stream)) = tcp::open(proxies.as_deref(), stream, peer, &admission, Mechanism::Tls).await else {
                return;
            };
            let connection = tcp::Stream::new(client, server, options, cookies, Mechanism::Tls);
            let Some(stream) = tls::handshake(&acceptor, stream, &admission, Secured::Tls).await else { return };
            tcp::serve_connection(stream, connection, snapshot, admission, rng).await;
        }
    })
    .await
}
