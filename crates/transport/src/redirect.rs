//! HTTP redirection, NetAirt's HTTP mechanism (section 4.1): a request for
//! a service's host name is answered with a redirect to the same URL on the
//! replica the routing core picks for the client, the same decision a DNS
//! answer for that client carries (`pharos ctl explain` shows it).
//!
//! - The URL keeps its scheme, port (if the request named one), path and
//!   query; the host becomes the replica's `redirect_host`, else its
//!   address (an IPv6 address in brackets).
//! - GET and HEAD get 302 Found. Other methods get 307 Temporary Redirect,
//!   which, unlike 302, forbids the client to change the method (RFC 9110
//!   section 15.4), so a POST is sent again, body and all, to the replica.
//! - The redirect may be cached, by the client only (it depends on who
//!   asks), for the decision's TTL: `Cache-Control: private, max-age=TTL`.
//! - The replica is of the client's address family when the service has
//!   one, else of the other.
//! - The client is the connection's peer or, when the peer is a trusted
//!   proxy, the client the proxy names ([`Connection::client`]).
//!
//! A request for a host that is not a service gets 404, one that is not
//! HTTP or names no host 400, one for a service with no replica to answer
//! 503, each with a line saying why.

use std::fmt::Write;
use std::future::ready;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, BytesMut};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, HOST, HeaderMap, HeaderValue, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use pharos_answer::{SharedSnapshot, Snapshot};
use pharos_route::prefix::{ListedPrefixError, PrefixMap};
use pharos_route::{Asker, Family, Replica, Routes, Service, route};
use pharos_wire::name::{self, MAX_NAME_LEN};
use rand::Rng;
use rand::rngs::SmallRng;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::config::Settings;
use crate::metrics::Secured;
use crate::proxy;
use crate::registry::{Admission, Registry};
use crate::tcp::BindError;
use crate::tls::{Tls, TlsError};
use crate::{http, tcp, tls};

/// Worker numbers of the listeners' random sources (see
/// [`Settings::worker_rng`]), clear of those of DNS (see [`crate::start`]).
const REDIRECT_WORKERS: u64 = 4 << 60;
const BAD_HOST: &str = "the Host is not a host name or address, with or without a port";
/// Room for a redirect's header values beside its target: "https://", a
/// replica (an IPv6 address, or a host name most often), a port, and
/// "private, max-age=" and a TTL.
const HEADER_VALUES_LEN: usize = 8 + 64 + 6 + 27;

/// Why HTTP redirection cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RedirectionError {
    #[error(transparent)]
    TrustedProxies(#[from] ListedPrefixError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Listen(#[from] BindError),
}

/// Binds every HTTP and HTTPS listener of `[http]` and serves each in its
/// own task. HTTPS presents the certificate of `[tls]`, which `tls` holds
/// when there is an HTTPS listener.
pub async fn start(
    config: &Settings,
    tls: Option<&Tls>,
    snapshot: &SharedSnapshot,
    registry: &Arc<Registry>,
) -> Result<(), RedirectionError> {
    let settings = &config.http;
    if settings.listen.is_empty() && settings.https_listen.is_empty() {
        return Ok(());
    }
    let redirector = Arc::new(Redirector {
        snapshot: snapshot.clone(),
        trusted_proxies: settings.trusted_proxies()?,
        proxy_protocol: settings.proxy_protocol,
    });
    let tls = match (settings.https_listen.is_empty(), tls) {
        (false, Some(tls)) => Some(tls.https_acceptor()?),
        _ => None,
    };
    let plain = settings.listen.iter().map(|address| (address, None));
    let encrypted = settings.https_listen.iter().map(|address| (address, tls.clone()));
    for (index, (&address, tls)) in (0..).zip(plain.chain(encrypted)) {
        let site = Site { redirector: redirector.clone(), tls };
        let listener = tcp::bind(address, site.mechanism()).await?;
        tokio::spawn(site.serve(listener, registry.clone(), config.worker_rng(REDIRECT_WORKERS + index)));
    }
    Ok(())
}

/// What every listener shares.
struct Redirector {
    snapshot: SharedSnapshot,
    trusted_proxies: PrefixMap<()>,
    proxy_protocol: bool,
}

/// One listener: plain HTTP, or HTTPS with its TLS acceptor.
#[derive(Clone)]
struct Site {
    redirector: Arc<Redirector>,
    tls: Option<TlsAcceptor>,
}

impl Site {
    fn mechanism(&self) -> &'static str {
        if self.tls.is_some() { "HTTPS redirection" } else { "HTTP redirection" }
    }

    /// Accepts connections on `listener` forever, one task each.
    async fn serve(self, listener: TcpListener, registry: Arc<Registry>, rng: SmallRng) {
        tcp::accept_each(listener, registry, rng, move |stream, peer, admission, rng| self.clone().serve_tcp(stream, peer, admission, rng))
            .await
    }

    /// Serves one connection: its PROXY header first, if the listener
    /// takes one, then TLS, if HTTPS, then HTTP.
    async fn serve_tcp(self, mut stream: TcpStream, peer: SocketAddr, admission: Admission, rng: SmallRng) {
        let peer = peer.ip().to_canonical();
        if !self.redirector.proxy_protocol {
            let connection = self.connection(peer, None, rng, admission);
            return self.serve_stream(stream, connection).await;
        }
        match admission.unless_shed(proxy::read_header(&mut stream)).await {
            Some(Ok((proxied, ahead))) => {
                let connection = self.connection(peer, proxied.map(|source| source.ip()), rng, admission);
                self.serve_stream(proxy::Rewound::new(ahead, stream), connection).await
            }
            Some(Err(error)) => tracing::debug!(%error, %peer, "PROXY protocol header refused"),
            None => {}
        }
    }

    fn connection(&self, peer: IpAddr, proxied: Option<IpAddr>, rng: SmallRng, admission: Admission) -> Connection {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Connection { redirector: self.redirector.clone(), scheme, peer, proxied, rng: Mutex::new(rng), admission }
    }

    /// Serves HTTP on `stream`, inside TLS for HTTPS.
    async fn serve_stream(&self, stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static, connection: Connection) {
        let connection = Arc::new(connection);
        let answerer = connection.clone();
        let answer = move |request: Request<Incoming>| ready(answerer.redirect(&request));
        match &self.tls {
            Some(acceptor) => {
                let Some(stream) = tls::handshake(acceptor, stream, &connection.admission, Secured::Redirect).await else { return };
                http::serve_connection(stream, &connection.admission, self.mechanism(), answer).await
            }
            None => http::serve_connection(stream, &connection.admission, self.mechanism(), answer).await,
        }
    }
}

/// One connection: who is on it, and what answers its requests.
struct Connection {
    redirector: Arc<Redirector>,
    scheme: &'static str,
    /// The connection's peer, and the client its PROXY header named.
    peer: IpAddr,
    proxied: Option<IpAddr>,
    /// Held by one request at a time, for the moment of deciding.
    rng: Mutex<SmallRng>,
    admission: Admission,
}

impl Connection {
    /// The redirect for `request`, or the reason there is none.
    fn redirect(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        self.admission.touch();
        let Some(target) = request.uri().path_and_query().map(|target| target.as_str()).filter(|target| target.starts_with('/')) else {
            return http::text_response(StatusCode::BAD_REQUEST, "the request target is not a path");
        };
        let (host, port) = match host_of(request) {
            Ok(host_and_port) => host_and_port,
            Err(reason) => return http::text_response(StatusCode::BAD_REQUEST, reason),
        };
        let snapshot = self.redirector.snapshot.load();
        let mut wire = [0; MAX_NAME_LEN];
        let Some(service) = name::dotted_into(host, &mut wire).ok().and_then(|wire| snapshot.routes.service(wire)) else {
            return http::text_response(StatusCode::NOT_FOUND, format_args!("{host} is not a service of this server"));
        };
        let Some((replica, ttl)) = self.choose(service, &snapshot, self.client(request.headers())) else {
            return http::text_response(StatusCode::SERVICE_UNAVAILABLE, format_args!("no replica of {host} is serving"));
        };
        let status = match *request.method() {
            Method::GET | Method::HEAD => StatusCode::FOUND,
            _ => StatusCode::TEMPORARY_REDIRECT,
        };
        // Both header values in one allocation.
        let mut text = BytesMut::with_capacity(HEADER_VALUES_LEN + target.len());
        write_url(&mut text, self.scheme, replica, port, target);
        let location = text.split().freeze();
        text.put_slice(b"private, max-age=");
        write_decimal(&mut text, ttl);
        let mut response = Response::new(Full::default());
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers
            .insert(LOCATION, HeaderValue::from_maybe_shared(location).expect("a URL of an address or checked name and a parsed target"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_maybe_shared(text.freeze()).expect("text and digits"));
        response
    }

    /// Who the request is from. The connection's peer, unless it is a
    /// trusted proxy: then the client the proxy names, in its PROXY header
    /// or else as the last X-Forwarded-For entry, and so on through every
    /// trusted proxy, right to left: the client is the first address not
    /// trusted, or, when all are, the last one named. An entry that is not
    /// an address ends the search at the proxy that wrote it.
    fn client(&self, headers: &HeaderMap) -> IpAddr {
        let trusted = |address| self.redirector.trusted_proxies.lookup(address).value.is_some();
        if !trusted(self.peer) {
            return self.peer;
        }
        let forwarded = headers.get_all("x-forwarded-for").iter().rev().flat_map(|value| value.to_str().unwrap_or("").rsplit(','));
        let mut client = self.peer;
        for hop in self.proxied.map(Some).into_iter().chain(forwarded.map(forwarded_address)) {
            match hop {
                Some(address) if trusted(client) => client = address,
                _ => break,
            }
        }
        client
    }

    fn choose<'s>(&self, service: &'s Service, snapshot: &Snapshot, client: IpAddr) -> Option<(&'s Replica, u32)> {
        redirect_target(&snapshot.routes, service, client, &mut *self.rng.lock().expect("rng lock"))
    }
}

/// The replica `service` sends `client` to, and for how long: the first
/// the routing core answers, of the client's family if the service has
/// one serving, else of the other.
pub fn redirect_target<'s>(routes: &Routes, service: &'s Service, client: IpAddr, rng: &mut impl Rng) -> Option<(&'s Replica, u32)> {
    let families = if client.is_ipv4() { [Family::V4, Family::V6] } else { [Family::V6, Family::V4] };
    let family = families.into_iter().find(|&family| !service.candidates(family).indexes.is_empty())?;
    let decision = route(routes, service, family, &Asker::from_source(client), rng, None).decision;
    Some((&service.replicas[*decision.replicas.first()?], decision.ttl))
}

/// One X-Forwarded-For entry: an address, bare or, as some proxies write
/// it, with a port ("192.0.2.1:4711", "[2001:db8::1]:4711").
fn forwarded_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    let bracketed = || entry.strip_prefix('[')?.strip_suffix(']')?.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    let with_port = || entry.parse::<SocketAddr>().ok().map(|address| address.ip());
    entry.parse().ok().or_else(bracketed).or_else(with_port).map(|address: IpAddr| address.to_canonical())
}

/// The host and port a request is for: its target's authority (HTTP/2,
/// or an absolute URL), else its one Host header (RFC 9112 section 3.2).
fn host_of(request: &Request<Incoming>) -> Result<(&str, Option<u16>), &'static str> {
    if let Some(authority) = request.uri().authority() {
        return Ok((authority.host(), authority.port_u16()));
    }
    let mut hosts = request.headers().get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(host), None) => split_host(host.to_str().map_err(|_| BAD_HOST)?),
        (None, _) => Err("the request names no host: it needs a Host header"),
        (Some(_), Some(_)) => Err("the request has more than one Host header"),
    }
}

/// Splits a Host header into the host (a name, an IPv4 address or an IPv6
/// address in brackets) and the port, if any.
fn split_host(host_and_port: &str) -> Result<(&str, Option<u16>), &'static str> {
    let port_at = match host_and_port.starts_with('[') {
        true => host_and_port.find(']').ok_or(BAD_HOST)? + 1,
        false => host_and_port.rfind(':').unwrap_or(host_and_port.len()),
    };
    let (host, port) = host_and_port.split_at(port_at);
    let is_name = |host: &str| !host.is_empty() && host.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._".contains(&byte));
    let is_literal =
        |host: &str| host.strip_prefix('[').and_then(|host| host.strip_suffix(']')).is_some_and(|v6| v6.parse::<Ipv6Addr>().is_ok());
    if !is_name(host) && !is_literal(host) {
        return Err(BAD_HOST);
    }
    let port = match port.strip_prefix(':') {
        None if port.is_empty() => None,
        // RFC 3986: an empty port is as if there were none.
        Some("") => None,
        Some(digits) if digits.bytes().all(|byte| byte.is_ascii_digit()) => Some(digits.parse().map_err(|_| BAD_HOST)?),
        _ => return Err(BAD_HOST),
    };
    Ok((host, port))
}

/// Writes the URL of a redirect, `scheme://replica[:port]target`, with the
/// replica's `redirect_host`, else its address. Numbers are written by hand:
/// through `core::fmt`, an IPv4 address alone cost a redirect a tenth of
/// its CPU time.
fn write_url(text: &mut BytesMut, scheme: &str, replica: &Replica, port: Option<u16>, target: &str) {
    text.put_slice(scheme.as_bytes());
    text.put_slice(b"://");
    match (&replica.redirect_host, replica.address) {
        (Some(host), _) => text.put_slice(host.as_bytes()),
        (None, IpAddr::V4(address)) => {
            let [first, rest @ ..] = address.octets();
            write_decimal(text, first.into());
            for octet in rest {
                text.put_u8(b'.');
                write_decimal(text, octet.into());
            }
        }
        (None, IpAddr::V6(address)) => write!(text, "[{address}]").expect("writing to memory"),
    }
    if let Some(port) = port {
        text.put_u8(b':');
        write_decimal(text, port.into());
    }
    text.put_slice(target.as_bytes());
}

/// Writes `number` in decimal.
fn write_decimal(text: &mut BytesMut, number: u32) {
    let mut digits = [0; 10];
    let mut start = digits.len();
    let mut rest = number;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    text.put_slice(&digits[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_header_is_a_host_and_maybe_a_port() {
        assert_eq!(split_host("svc.example.test"), Ok(("svc.example.test", None)));
        assert_eq!(split_host("SVC.example.test.:8080"), Ok(("SVC.example.test.", Some(8080))));
        assert_eq!(split_host("svc.example.test:"), Ok(("svc.example.test", None)));
        assert_eq!(split_host("192.0.2.1:80"), Ok(("192.0.2.1", Some(80))));
        assert_eq!(split_host("[2001:db8::1]:443"), Ok(("[2001:db8::1]", Some(443))));
        assert_eq!(split_host("[2001:db8::1]"), Ok(("[2001:db8::1]", None)));
        for bad in ["", ":80", "svc:+80", "svc:65536", "svc:8o", "a b", "svc/x", "[2001:db8::1", "[2001:db8::1]80", "[x]:80", "2001:db8::1"]
        {
            assert_eq!(split_host(bad), Err(BAD_HOST), "{bad:?}");
        }
    }

    #[test]
    fn forwarded_addresses_may_carry_a_port() {
        for (entry, address) in [
            (" 198.51.100.7", "198.51.100.7"),
            ("198.51.100.7:4711", "198.51.100.7"),
            ("2001:db8::7 ", "2001:db8::7"),
            ("[2001:db8::7]", "2001:db8::7"),
            ("[2001:db8::7]:4711", "2001:db8::7"),
            ("::ffff:198.51.100.7", "198.51.100.7"),
        ] {
            assert_eq!(forwarded_address(entry), Some(address.parse().unwrap()), "{entry:?}");
        }
        for bad in ["unknown", "_hidden", "", "198.51.100"] {
            assert_eq!(forwarded_address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_url_names_the_replica_and_keeps_the_port() {
        let url = |replica: &Replica, port| {
            let mut text = BytesMut::new();
            write_url(&mut text, "http", replica, port, "/p?q");
            String::from_utf8(text.to_vec()).unwrap()
        };
        let mut replica = Replica::new("a", "2001:db8::1".parse().unwrap());
        assert_eq!(url(&replica, None), "http://[2001:db8::1]/p?q");
        assert_eq!(url(&replica, Some(8080)), "http://[2001:db8::1]:8080/p?q");
        replica.redirect_host = Some("fra.cdn.example".into());
        assert_eq!(url(&replica, Some(65535)), "http://fra.cdn.example:65535/p?q");
        for address in ["192.0.2.1", "0.0.0.0", "255.10.100.9"] {
            assert_eq!(url(&Replica::new("b", address.parse().unwrap()), Some(0)), format!("http://{address}:0/p?q"));
        }
        let mut text = BytesMut::new();
        write_decimal(&mut text, u32::MAX);
        assert_eq!(&text[..], u32::MAX.to_string().as_bytes());
    }
}
