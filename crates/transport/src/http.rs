//! What the HTTP mechanisms share: DNS over HTTPS ([`crate::doh`]) and
//! HTTP redirection ([`crate::redirect`]). Both serve HTTP/2 and HTTP/1.1
//! with hyper, one task per connection, under the connection registry of
//! [`crate::tcp`]; both explain a refusal in one line of text.

use std::convert::Infallible;
use std::fmt::Display;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::registry::Admission;

/// The protocols offered in the TLS handshake, preferred first.
pub const ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// Serves HTTP on one connection (HTTP/2 when the client opens with its
/// preface or chose it by ALPN, else HTTP/1.1 with keep-alive), answering
/// each request with `answer`, until the client closes or the connection
/// is shed. `mechanism` names the server in the log.
pub async fn serve_connection<Io, Answer, Answered>(io: Io, admission: &Admission, mechanism: &str, answer: Answer)
where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    Answer: Fn(Request<Incoming>) -> Answered + Send + 'static,
    Answered: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let service = service_fn(move |request| {
        let answered = answer(request);
        async move { Ok::<_, Infallible>(answered.await) }
    });
    let http = auto::Builder::new(TokioExecutor::new());
    if let Some(Err(error)) = admission.unless_shed(http.serve_connection(TokioIo::new(io), service)).await {
        tracing::debug!(%error, "{mechanism} connection failed");
    }
}

/// A response whose body is one line of text, saying what went wrong.
pub fn text_response(status: StatusCode, line: impl Display) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{line}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}
