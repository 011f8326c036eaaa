//! The transports' settings: the `[tcp]`, `[tls]` and `[http]` sections of
//! the configuration file, which the server's configuration embeds, and
//! [`Settings`], everything the transports need to start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pharos_route::prefix::{ListedPrefixError, PrefixMap, prefix_set};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Deserialize;

use crate::cookies::CookieSecret;
use crate::limit::SourceLimiter;
use crate::proxy::ProxySources;
use crate::rrl::ResponseLimit;
use crate::updates::Updates;

/// Everything the transports need to start, taken from the server's
/// configuration.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Addresses to serve DNS on, over both UDP and TCP.
    pub listen: Vec<SocketAddr>,
    /// UDP worker threads per address.
    pub udp_threads: usize,
    pub tcp: TcpConfig,
    pub tls: TlsConfig,
    pub http: HttpConfig,
    /// Where a generated certificate is kept; `None`: it is made for this
    /// run only.
    pub state_directory: Option<PathBuf>,
    /// Seed for the random choices of routing policies, for reproducible
    /// tests; unset, each worker seeds itself from the operating system.
    pub random_seed: Option<u64>,
    /// Sockets the rest of the process listens on (the control API): their
    /// descriptors are not the connections'.
    pub other_listeners: usize,
    /// The per-source limit on DNS over UDP, if one is configured; shared
    /// with whoever reports how many queries it refused.
    pub udp_rate_limit: Option<Arc<SourceLimiter>>,
    /// Response rate limiting of DNS over UDP, if configured; shared with
    /// whoever reports what it limited.
    pub response_rate_limit: Option<Arc<ResponseLimit>>,
    /// DNS cookies on DNS over UDP, TCP and TLS, if configured: the secret
    /// every node shares.
    pub cookies: Option<Arc<CookieSecret>>,
    /// The sources whose PROXY protocol headers the DNS listeners (UDP,
    /// TCP, TLS, HTTPS) take, and require; `None`: no source's.
    pub proxy_protocol_from: Option<Arc<ProxySources>>,
    /// Whoever applies the DNS UPDATEs the listeners (UDP, TCP, TLS)
    /// receive; `None`: UPDATE is answered NOTIMP.
    pub updates: Option<Arc<dyn Updates>>,
}

impl Settings {
    /// A random source for one worker: from the configured seed (mixed with
    /// `worker`, so workers differ) or from the operating system.
    pub fn worker_rng(&self, worker: u64) -> SmallRng {
        match self.random_seed {
            Some(seed) => SmallRng::seed_from_u64(seed ^ worker.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            None => SmallRng::from_os_rng(),
        }
    }

    /// Sockets the process listens on: on each DNS address a UDP socket per
    /// worker thread and a TCP listener, one on every other address, and
    /// the others'.
    pub fn listening_sockets(&self) -> usize {
        let (tls, http) = (&self.tls, &self.http);
        let others = [&tls.listen, &tls.https_listen, &tls.quic_listen, &http.listen, &http.https_listen].map(Vec::len);
        self.listen.len() * (self.udp_threads + 1) + others.iter().sum::<usize>() + self.other_listeners
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// Close a connection that has sent no complete query for this long
    /// (RFC 7766 section 6.2.3).
    pub idle_timeout_ms: u64,
    /// Give up on a client that does not read its answers for this long.
    pub write_timeout_ms: u64,
    /// Connections of every stream kind (TCP, TLS, HTTPS, QUIC) open at
    /// once at most; one more sheds the longest-idle. Lowered at start to
    /// what RLIMIT_NOFILE leaves room for.
    pub max_connections: usize,
    /// Connections from one client address at most; one more sheds that
    /// client's longest-idle.
    pub max_connections_per_client: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig { idle_timeout_ms: 10_000, write_timeout_ms: 10_000, max_connections: 10_000, max_connections_per_client: 64 }
    }
}

impl TcpConfig {
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// The idle timeout as the edns-tcp-keepalive option carries it, in
    /// units of 100 ms (RFC 7828 section 3.1).
    pub fn keepalive_timeout(&self) -> u16 {
        (self.idle_timeout_ms / 100).try_into().unwrap_or(u16::MAX)
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }
}

/// DNS over TLS, HTTPS and QUIC: where to serve them and the certificate
/// they present. Each list may be empty, which turns that transport off.
/// The `[tcp]` limits apply to TLS and HTTPS connections too, and to QUIC
/// connections: one pool of connections, one set of caps.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// DNS over TLS (RFC 7858), TCP addresses; the standard port is 853.
    pub listen: Vec<SocketAddr>,
    /// DNS over HTTPS (RFC 8484), TCP addresses; queries go to /dns-query.
    pub https_listen: Vec<SocketAddr>,
    /// DNS over QUIC (RFC 9250), UDP addresses; the standard port is 853.
    pub quic_listen: Vec<SocketAddr>,
    /// PEM certificate chain, the server's own certificate first. Unset
    /// (with `key`), a self-signed one is made at first start and kept
    /// beside the store file, or else beside the configuration file.
    pub certificate: Option<PathBuf>,
    /// PEM private key of the certificate (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

impl TlsConfig {
    /// True when any encrypted transport is to be served.
    pub fn is_enabled(&self) -> bool {
        !(self.listen.is_empty() && self.https_listen.is_empty() && self.quic_listen.is_empty())
    }
}

/// HTTP redirection (NetAirt's HTTP mechanism): a request for a service's
/// name is answered with a redirect to the replica the routing core picks
/// for the client. Read at start only.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Plain HTTP, TCP addresses; the standard port is 80.
    pub listen: Vec<SocketAddr>,
    /// HTTPS, TCP addresses, with the certificate of `[tls]`; the standard
    /// port is 443.
    pub https_listen: Vec<SocketAddr>,
    /// Proxies (CIDR prefixes) whose word on the client is believed: the
    /// X-Forwarded-For header and the PROXY protocol header they send.
    pub trusted_proxies: Vec<String>,
    /// Every connection to these listeners starts with a PROXY protocol
    /// header (version 1 or 2), as HAProxy and load balancers send it.
    pub proxy_protocol: bool,
}

impl HttpConfig {
    /// The trusted proxies as a map to look peers up in.
    pub fn trusted_proxies(&self) -> Result<PrefixMap<()>, ListedPrefixError> {
        prefix_set("http.trusted_proxies", &self.trusted_proxies)
    }

    /// Checks what cannot be checked field by field.
    pub fn validate(&self) -> Result<(), HttpConfigError> {
        self.trusted_proxies()?;
        if self.proxy_protocol && self.trusted_proxies.is_empty() {
            return Err(HttpConfigError::ProxyProtocolWithoutProxies);
        }
        if (self.proxy_protocol || !self.trusted_proxies.is_empty()) && self.listen.is_empty() && self.https_listen.is_empty() {
            return Err(HttpConfigError::ProxiesWithoutListener);
        }
        Ok(())
    }
}

/// What is wrong with `[http]` as a whole.
#[derive(Debug, thiserror::Error)]
pub enum HttpConfigError {
    #[error(transparent)]
    TrustedProxies(#[from] ListedPrefixError),
    #[error("http.proxy_protocol needs http.trusted_proxies: the proxies whose PROXY headers are believed")]
    ProxyProtocolWithoutProxies,
    #[error("http.trusted_proxies and http.proxy_protocol need http.listen or http.https_listen")]
    ProxiesWithoutListener,
}
