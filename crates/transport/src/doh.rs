//! DNS over HTTPS (RFC 8484): a query at `/dns-query`, either in the body
//! of a POST or base64url-encoded in the `dns` parameter of a GET, answered
//! as `application/dns-message`. HTTP/2 or HTTP/1.1, as ALPN chooses; over
//! HTTP/2 the requests of one connection are answered concurrently, each as
//! soon as it is ready.
//!
//! Every answer comes from the query path all transports share; HTTP adds
//! only a cache lifetime no longer than the answer's smallest TTL (RFC 8484
//! section 5.1). A request that carries no query gets an HTTP error whose
//! body says what was wrong.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use base64::Engine;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use pharos_answer::{Client, ResponseOptions, SharedSnapshot, Transport, respond_with};
use pharos_wire::MAX_STREAM_MESSAGE;
use rand::rngs::SmallRng;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::dnstap;
use crate::metrics::{Mechanism, Secured};
use crate::registry::Admission;
use crate::{http, tcp, tls};

/// Where queries go: the path RFC 8484 uses in its examples, and the one
/// clients (kdig, curl's --doh-url users, browsers) default to.
const PATH: &str = "/dns-query";
const DNS_MESSAGE: &str = "application/dns-message";
/// Responses to padded queries are padded; HTTP has no use for the TCP
/// keepalive option, managing its connections itself.
const OPTIONS: ResponseOptions = ResponseOptions { keepalive: None, pad: true, cookie: None, now: 0 };
/// base64url without padding (RFC 8484 section 4.1), though padding is
/// forgiven.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_encode_padding(false).with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Serves DNS over HTTPS on `listener` forever, one task per connection
/// (cookies are not HTTP's: `serving`'s are not used).
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, serving: tcp::Serving, rng: SmallRng) {
    tcp::accept_each(listener, serving.registry.clone(), rng, move |stream, peer, admission, rng| {
        let (acceptor, serving) = (acceptor.clone(), serving.clone());
        async move {
            let server = tcp::local_address(&stream);
            // A proxy's header comes before the handshake, as dnsdist sends it.
            let Some((peer, stream)) = serving.open(stream, peer, &admission, Mechanism::Https).await else { return };
            let snapshot = serving.snapshot;
            let Some(stream) = tls::handshake(&acceptor, stream, &admission, Secured::Https).await else { return };
            let client = Client { address: peer.ip(), transport: Transport::Stream };
            let connection = Arc::new(Connection { client, peer, server, snapshot, rng: Mutex::new(rng), admission });
            let answerer = connection.clone();
            http::serve_connection(stream, &connection.admission, "DNS over HTTPS", move |request| {
                let answerer = answerer.clone();
                async move { answerer.answer(request).await }
            })
            .await
        }
    })
    .await
}

/// One HTTPS connection: who is on it, and what answers its requests.
struct Connection {
    client: Client,
    /// Both ends, for the query log.
    peer: SocketAddr,
    server: SocketAddr,
    snapshot: SharedSnapshot,
    /// Shared by the connection's concurrent requests, each holding it only
    /// for the moment of answering.
    rng: Mutex<SmallRng>,
    admission: Admission,
}

impl Connection {
    async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let version = request.version();
        let answered = match query_of(request).await {
            Ok(query) => self.respond(&query, version),
            Err(rejection) => Err(rejection),
        };
        answered.unwrap_or_else(Rejection::into_response)
    }

    /// Answers `query` and counts it; its latency runs from the request
    /// read to the answer ready to send.
    fn respond(&self, query: &[u8], version: hyper::Version) -> Result<Response<Full<Bytes>>, Rejection> {
        let observation = self.admission.observation();
        let counting = observation.counters.counting(Mechanism::Https);
        let received = SystemTime::now();
        let mut message = Vec::new();
        let current = self.snapshot.load();
        let answered = {
            let mut rng = self.rng.lock().expect("rng lock");
            let options = ResponseOptions { now: crate::unix_seconds(received), ..OPTIONS };
            respond_with(query, &self.client, &options, &current, &mut *rng, &mut message)
        };
        if let Some(counting) = counting {
            counting.exchange(answered.as_ref(), self.client.address);
        }
        let Some(answered) = answered else {
            return Err(Rejection::new(StatusCode::BAD_REQUEST, "the message is not a DNS query"));
        };
        observation.query_log.log(&dnstap::Exchange {
            mechanism: Mechanism::Https,
            client: self.peer,
            server: self.server,
            query,
            response: &message,
            received,
            routed: answered.routed,
            http: Some(version),
        });
        self.admission.touch();
        Ok(dns_response(message, answered.smallest_ttl))
    }
}

/// A 200 response carrying a DNS message whose records' smallest TTL is
/// `smallest_ttl`, cacheable for no longer than that.
fn dns_response(message: Vec<u8>, smallest_ttl: Option<u32>) -> Response<Full<Bytes>> {
    let max_age = smallest_ttl.unwrap_or(0);
    Response::builder()
        .header(CONTENT_TYPE, DNS_MESSAGE)
        .header(CACHE_CONTROL, format!("max-age={max_age}"))
        .body(Full::new(Bytes::from(message)))
        .expect("the response headers are valid")
}

/// The DNS query a request carries, or why it carries none.
async fn query_of(request: Request<Incoming>) -> Result<Vec<u8>, Rejection> {
    if request.uri().path() != PATH {
        return Err(Rejection::new(StatusCode::NOT_FOUND, "DNS queries go to /dns-query"));
    }
    match *request.method() {
        Method::GET => query_of_get(request.uri().query()),
        Method::POST => {
            let (head, body) = request.into_parts();
            // Read first, even a body of the wrong type: some clients take
            // an answer before the end of what they send for a stream error.
            let body = read_body(body).await?;
            require_dns_message(&head.headers)?;
            Ok(body)
        }
        _ => Err(Rejection::new(StatusCode::METHOD_NOT_ALLOWED, "DNS queries are sent with GET or POST")),
    }
}

/// The query in the `dns` parameter of a GET request's query string.
fn query_of_get(query_string: Option<&str>) -> Result<Vec<u8>, Rejection> {
    let encoded = query_string
        .into_iter()
        .flat_map(|query_string| query_string.split('&'))
        .find_map(|parameter| parameter.strip_prefix("dns="))
        .ok_or(Rejection::new(StatusCode::BAD_REQUEST, "a GET request carries its query in the dns parameter"))?;
    let query = BASE64URL
        .decode(encoded)
        .map_err(|_| Rejection::new(StatusCode::BAD_REQUEST, "the dns parameter is not base64url (RFC 4648 section 5)"))?;
    if query.len() > MAX_STREAM_MESSAGE {
        return Err(too_large());
    }
    Ok(query)
}

/// A POST must say its body is a DNS message.
fn require_dns_message(headers: &HeaderMap) -> Result<(), Rejection> {
    let media_type = headers.get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).and_then(|value| value.split(';').next());
    match media_type {
        Some(media_type) if media_type.trim().eq_ignore_ascii_case(DNS_MESSAGE) => Ok(()),
        _ => Err(Rejection::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "a POST body must be of type application/dns-message")),
    }
}

/// Reads a POST body, refusing one longer than any DNS message can be.
async fn read_body(body: Incoming) -> Result<Vec<u8>, Rejection> {
    match Limited::new(body, MAX_STREAM_MESSAGE).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(_) => Err(Rejection::new(StatusCode::BAD_REQUEST, "the request body could not be read")),
    }
}

fn too_large() -> Rejection {
    Rejection::new(StatusCode::PAYLOAD_TOO_LARGE, "a DNS query is at most 65535 octets")
}

/// An HTTP error, with a line of text that says what to fix.
#[derive(Debug, PartialEq, Eq)]
struct Rejection {
    status: StatusCode,
    reason: &'static str,
}

impl Rejection {
    fn new(status: StatusCode, reason: &'static str) -> Rejection {
        Rejection { status, reason }
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        let mut response = http::text_response(self.status, self.reason);
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, POST"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_query_is_base64url_with_or_without_padding() {
        let query = [0xAB, 0xCD, 1, 0, 0, 1, 0xFF, 0xFE];
        let unpadded = BASE64URL.encode(query);
        assert!(!unpadded.contains('=') && unpadded.contains('_'), "{unpadded}");
        assert_eq!(query_of_get(Some(&format!("ct=x&dns={unpadded}"))), Ok(query.to_vec()));
        assert_eq!(query_of_get(Some("dns=AAA=")), Ok(vec![0, 0]), "padding is forgiven");
        assert_eq!(query_of_get(Some("dns=A+/")).unwrap_err().status, StatusCode::BAD_REQUEST, "base64, not base64url");
        assert_eq!(query_of_get(Some("name=example")).unwrap_err().status, StatusCode::BAD_REQUEST);
        assert_eq!(query_of_get(None).unwrap_err().status, StatusCode::BAD_REQUEST);
        let huge = BASE64URL.encode(vec![0; MAX_STREAM_MESSAGE + 1]);
        assert_eq!(query_of_get(Some(&format!("dns={huge}"))).unwrap_err().status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn a_post_body_must_be_a_dns_message() {
        let with_type = |value: &'static str| HeaderMap::from_iter([(CONTENT_TYPE, HeaderValue::from_static(value))]);
        assert!(require_dns_message(&with_type("application/dns-message")).is_ok());
        assert!(require_dns_message(&with_type("Application/DNS-Message; x=y")).is_ok());
        let wrong = require_dns_message(&with_type("application/x-www-form-urlencoded")).unwrap_err();
        assert_eq!(wrong.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(require_dns_message(&HeaderMap::new()).is_err());
    }

    #[test]
    fn answers_may_be_cached_for_their_smallest_ttl() {
        let mut message = vec![0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        message.extend([0, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        let response = dns_response(message, Some(60));
        assert_eq!(response.headers()[CACHE_CONTROL], "max-age=60");
        assert_eq!(response.headers()[CONTENT_TYPE], DNS_MESSAGE);
        let refused = dns_response(vec![0, 0, 0x80, 5, 0, 0, 0, 0, 0, 0, 0, 0], None);
        assert_eq!(refused.headers()[CACHE_CONTROL], "max-age=0", "no records: no caching");
        let not_allowed = Rejection::new(StatusCode::METHOD_NOT_ALLOWED, "no").into_response();
        assert_eq!(not_allowed.headers()[ALLOW], "GET, POST");
    }
}
