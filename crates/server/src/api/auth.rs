//! Who may ask the control API for what: each request's bearer token is
//! found by its SHA-256 among the named tokens of the state (or is the
//! bootstrap token, an admin), its scope is checked against the route,
//! and every change asked for is logged with the token's name. A source
//! that keeps presenting wrong or revoked tokens is refused unread for a
//! while ([`Failures`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pharos_model::token::{BOOTSTRAP, Scope};

use crate::api::listen::Peer;
use crate::api::{Api, ApiError};

/// The SHA-256 of a secret, as the store keeps it (lowercase hex).
pub(crate) fn sha256_hex(secret: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    digest.as_ref().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Who asks for the changes a request makes: "token NAME", the token it
/// was made with. Every route behind [`require_token`] finds it in
/// the request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct Author(pub String);

/// The token a request was made with, once it is known good.
#[derive(Debug)]
struct Caller {
    pub name: String,
    pub scope: Scope,
}

/// Why a request's token was refused (the label of
/// `pharos_api_auth_failures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Missing,
    Wrong,
    Revoked,
}

impl Refusal {
    fn reason(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Wrong => "wrong",
            Refusal::Revoked => "revoked",
        }
    }
}

/// The caller a presented secret names, if any. The bootstrap token is
/// compared by hash in constant time; named tokens are found by their
/// hash, which tells a guesser nothing about the secret.
fn identify(api: &Api, presented: Option<&str>) -> Result<Caller, Refusal> {
    let secret = presented.ok_or(Refusal::Missing)?;
    let hash = sha256_hex(secret);
    if constant_time_eq(hash.as_bytes(), api.bootstrap_sha256.as_bytes()) {
        return Ok(Caller { name: BOOTSTRAP.into(), scope: Scope::Admin });
    }
    let state = api.control.state();
    let token = state.tokens.iter().find(|token| token.sha256 == hash).ok_or(Refusal::Wrong)?;
    if token.revoked {
        return Err(Refusal::Revoked);
    }
    Ok(Caller { name: token.name.clone(), scope: token.scope.clone() })
}

/// Compares without stopping at the first difference, so timing does not
/// tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `scope` may make the request `method` `path`: reading is
/// every scope's, managing tokens only an admin's, and a write scope
/// changes only services and zones it names (their routes are
/// `/v1/services/{name}...` and `/v1/zones/{name}/...`).
fn permits(scope: &Scope, method: &Method, path: &str) -> bool {
    let reading = matches!(*method, Method::GET | Method::HEAD);
    let mut segments = path.trim_start_matches('/').split('/');
    let (version, collection, target) = (segments.next(), segments.next(), segments.next());
    if version == Some("v1") && collection == Some("tokens") {
        return *scope == Scope::Admin;
    }
    if reading {
        return true;
    }
    match (version, collection, target) {
        (Some("v1"), Some("services"), Some(name)) => scope.writes_service(name),
        (Some("v1"), Some("zones"), Some(name)) => scope.writes_zone(name),
        _ => *scope == Scope::Admin,
    }
}

/// The middleware around every route that needs a token: refuses a
/// throttled source (429), a bad token (401), a scope that does not reach
/// the route (403); logs every request to change something with the
/// token's name and the answer.
pub(crate) async fn require_token(
    State(api): State<Api>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    mut request: Request,
    next: Next,
) -> Response {
    let source = source_of(peer.ip());
    if let Some(wait) = api.failures.refused_until(source, Instant::now()) {
        api.control.activity().auth_throttled();
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let error = ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: format!("too many failed authentications from {source}; try again in {seconds} s"),
            field: None,
        };
        return (error.status, [(header::RETRY_AFTER, seconds.to_string())], error).into_response();
    }
    let presented =
        request.headers().get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(|value| value.strip_prefix("Bearer "));
    let caller = match identify(&api, presented) {
        Ok(caller) => caller,
        Err(refusal) => {
            api.control.activity().auth_failed(refusal.reason());
            // Only a token presented can be a guess: a client that sends
            // none (a scraper not yet given one) is refused, not slowed.
            if refusal != Refusal::Missing {
                api.failures.failed(source, Instant::now());
            }
            let message = match refusal {
                Refusal::Missing => "missing bearer token",
                Refusal::Wrong => "wrong bearer token",
                Refusal::Revoked => "this token has been revoked",
            };
            let error = ApiError { status: StatusCode::UNAUTHORIZED, message: message.into(), field: Some("Authorization".into()) };
            return (error.status, [(header::WWW_AUTHENTICATE, "Bearer")], error).into_response();
        }
    };
    api.failures.succeeded(source);
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let changes = !matches!(method, Method::GET | Method::HEAD);
    let response = if permits(&caller.scope, &method, &path) {
        request.extensions_mut().insert(Author(format!("token {}", caller.name)));
        next.run(request).await
    } else {
        let message = format!("token {:?} (scope {}) may not {method} {path}", caller.name, caller.scope);
        ApiError { status: StatusCode::FORBIDDEN, message, field: Some("Authorization".into()) }.into_response()
    };
    if changes {
        api.control.audit(&caller.name, &format!("{method} {path}"), response.status().as_u16());
    }
    response
}

/// The source a failure is counted against: an IPv4 address, or the /64
/// an IPv6 address is in (one host is commonly given a whole /64, and
/// could otherwise take a fresh address for every guess).
fn source_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
    }
}

/// Failures a source may make in a row before it is slowed down.
const FREE_FAILURES: u32 = 3;
/// How long a source is refused after its first failure beyond the free
/// ones; each further failure doubles it, up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(2);
const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// Sources remembered at most: beyond, those no longer refused are
/// forgotten (a flood from many sources cannot grow the table unbounded).
const MOST_SOURCES: usize = 4096;

/// Failed authentications in a row, per source address, and until when
/// each source is refused without reading its token. A refusal, not a
/// delay: a held connection would cost the server as much as the guesser.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    sources: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl Failures {
    /// How long `source` is still refused at `now`, if it is.
    fn refused_until(&self, source: IpAddr, now: Instant) -> Option<Duration> {
        let sources = self.sources.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let &(_, until) = sources.get(&source)?;
        until.checked_duration_since(now).filter(|wait| !wait.is_zero())
    }

    /// `source` failed once more at `now`.
    fn failed(&self, source: IpAddr, now: Instant) {
        let mut sources = self.sources.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if sources.len() >= MOST_SOURCES && !sources.contains_key(&source) {
            sources.retain(|_, (_, until)| *until > now);
            if sources.len() >= MOST_SOURCES {
                sources.clear();
            }
        }
        let (failures, until) = sources.entry(source).or_insert((0, now));
        *failures += 1;
        if let Some(beyond) = failures.checked_sub(FREE_FAILURES + 1) {
            *until = now + FIRST_WAIT.saturating_mul(1 << beyond.min(16)).min(LONGEST_WAIT);
        }
    }

    /// `source` authenticated: its failures are forgiven.
    fn succeeded(&self, source: IpAddr) {
        self.sources.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_refused_after_its_free_failures_for_longer_each_time() {
        let failures = Failures::default();
        let (source, other): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let start = Instant::now();
        for _ in 0..FREE_FAILURES {
            failures.failed(source, start);
            assert_eq!(failures.refused_until(source, start), None);
        }
        failures.failed(source, start);
        assert_eq!(failures.refused_until(source, start), Some(FIRST_WAIT));
        assert_eq!(failures.refused_until(other, start), None, "per source");
        assert_eq!(failures.refused_until(source, start + FIRST_WAIT), None, "over once waited out");
        failures.failed(source, start + FIRST_WAIT);
        assert_eq!(failures.refused_until(source, start + FIRST_WAIT), Some(2 * FIRST_WAIT));
        for _ in 0..40 {
            failures.failed(source, start);
        }
        assert_eq!(failures.refused_until(source, start), Some(LONGEST_WAIT), "bounded");
        failures.succeeded(source);
        assert_eq!(failures.refused_until(source, start), None, "forgiven");
    }

    #[test]
    fn an_ipv6_source_is_its_64() {
        let source = |text: &str| source_of(text.parse().unwrap());
        assert_eq!(source("2001:db8:1:2:aaaa::1"), source("2001:db8:1:2:bbbb::2"));
        assert_ne!(source("2001:db8:1:2::1"), source("2001:db8:1:3::1"));
        assert_ne!(source("192.0.2.1"), source("192.0.2.2"));
    }

    #[test]
    fn scopes_reach_their_routes_only() {
        let write: Scope = "write:service=app.example.test.,zone=example.test.".parse().unwrap();
        let (get, put, post, delete) = (Method::GET, Method::PUT, Method::POST, Method::DELETE);
        assert!(permits(&Scope::Read, &get, "/v1/services"));
        assert!(!permits(&Scope::Read, &put, "/v1/services/app.example.test."));
        assert!(!permits(&Scope::Read, &get, "/v1/tokens"), "tokens are an admin's");
        assert!(permits(&write, &put, "/v1/services/app.example.test./probabilities"));
        assert!(!permits(&write, &put, "/v1/services/other.example.test."));
        assert!(permits(&write, &post, "/v1/zones/example.test./keys"));
        assert!(!permits(&write, &post, "/v1/zones/other.test./keys"));
        assert!(!permits(&write, &post, "/v1/reload"), "not a named target");
        assert!(!permits(&write, &delete, "/v1/tokens/ci"));
        assert!(permits(&Scope::Admin, &delete, "/v1/tokens/ci"));
        assert!(permits(&Scope::Admin, &post, "/v1/reload"));
    }
}
