//! What the forwarder is told: where to listen, its upstreams in order of
//! preference, whom to trust, and the bounds of its timers. Every value is
//! checked here, so that a bad one stops the start with a message saying
//! what to fix.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::rtt::{RtoBounds, TCP_MIN_RTO};

/// The port of DNS over TLS (RFC 7858) and of DNS over QUIC (RFC 9250).
const DEFAULT_PORT: u16 = 853;

/// The encrypted transport to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// DNS over TLS, RFC 7858: one TLS connection, pipelined, IDs matched.
    Tls,
    /// DNS over QUIC, RFC 9250: one stream per query.
    Quic,
}

impl Protocol {
    /// Round trips from the first packet to the first query: TCP's, then
    /// TLS 1.3's; QUIC's handshake is its transport's.
    pub fn handshake_round_trips(self) -> u32 {
        match self {
            Protocol::Tls => 2,
            Protocol::Quic => 1,
        }
    }

    fn scheme(self) -> &'static str {
        match self {
            Protocol::Tls => "tls",
            Protocol::Quic => "quic",
        }
    }
}

/// One upstream server, as `tls://ADDRESS[:PORT][#NAME]` or
/// `quic://ADDRESS[:PORT][#NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSpec {
    pub protocol: Protocol,
    pub address: SocketAddr,
    /// The name its certificate must be valid for, if given in the spec.
    pub server_name: Option<String>,
}

/// Why a text is not an upstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamSpecError {
    #[error("{0:?} has no scheme: write tls://ADDRESS or quic://ADDRESS")]
    NoScheme(String),
    #[error("{text:?}: unknown scheme {scheme:?}, expected tls or quic")]
    UnknownScheme { text: String, scheme: String },
    #[error("{0:?}: nothing after '#', where the certificate's name goes")]
    NoName(String),
    #[error(
        "{text:?}: {address:?} is not an IP address with an optional port (like 192.0.2.1, 192.0.2.1:8853 or [2001:db8::1]:853); \
         a forwarder cannot look names up to find its upstream, so give the name after '#' for the certificate"
    )]
    NotAnAddress { text: String, address: String },
}

impl FromStr for UpstreamSpec {
    type Err = UpstreamSpecError;

    fn from_str(text: &str) -> Result<UpstreamSpec, UpstreamSpecError> {
        let (scheme, rest) = text.split_once("://").ok_or_else(|| UpstreamSpecError::NoScheme(text.into()))?;
        let protocol = match scheme {
            "tls" => Protocol::Tls,
            "quic" => Protocol::Quic,
            _ => return Err(UpstreamSpecError::UnknownScheme { text: text.into(), scheme: scheme.into() }),
        };
        let (address, server_name) = match rest.split_once('#') {
            Some((_, "")) => return Err(UpstreamSpecError::NoName(text.into())),
            Some((address, name)) => (address, Some(name.to_owned())),
            None => (rest, None),
        };
        let address =
            parse_address(address).ok_or_else(|| UpstreamSpecError::NotAnAddress { text: text.into(), address: address.into() })?;
        Ok(UpstreamSpec { protocol, address, server_name })
    }
}

/// `192.0.2.1`, `192.0.2.1:853`, `2001:db8::1`, `[2001:db8::1]` or
/// `[2001:db8::1]:853`; without a port, port 853.
fn parse_address(text: &str) -> Option<SocketAddr> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Some(address);
    }
    let bare = text.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')).unwrap_or(text);
    Some(SocketAddr::new(bare.parse::<IpAddr>().ok()?, DEFAULT_PORT))
}

impl fmt::Display for UpstreamSpec {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}://{}", self.protocol.scheme(), self.address)?;
        match &self.server_name {
            Some(name) => write!(formatter, "#{name}"),
            None => Ok(()),
        }
    }
}

/// The forwarder's settings, checked.
#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// Where clients are served, over UDP and TCP.
    pub listen: Vec<SocketAddr>,
    /// In order of preference.
    pub upstreams: Vec<UpstreamSpec>,
    /// PEM certificates to trust; `None` for the system's.
    pub ca: Option<PathBuf>,
    /// The certificate name for upstreams whose spec gives none; those
    /// without either are checked against their IP address.
    pub server_name: Option<String>,
    /// Connections kept to each upstream.
    pub connections: usize,
    /// Tries per query, the first included, each on a connection that does
    /// not have the query yet.
    pub tries: u32,
    pub rto: RtoBounds,
    /// How long a query waits for an answer before SERVFAIL.
    pub deadline: Duration,
}

/// Limits on the settings, and their defaults.
pub const MAX_CONNECTIONS: usize = 16;
pub const MAX_TRIES: u32 = 10;
pub const DEFAULT_CONNECTIONS: usize = 2;
pub const DEFAULT_TRIES: u32 = 3;
/// Linux TCP's minimum RTO: RFC 6298's 1 s is far too long for DNS, and
/// much shorter would send hedges for queries a busy upstream is still
/// answering.
pub const DEFAULT_MIN_RTO: Duration = TCP_MIN_RTO;
/// A hedge waits no longer than this, so that it still comes well within
/// the deadline.
pub const DEFAULT_MAX_RTO: Duration = Duration::from_secs(2);
/// An answer is awaited this long before the client gets SERVFAIL: past the
/// time TCP and QUIC take to repair a packet lost three times in a row on
/// paths up to 300 ms, and by when a stub has asked again (glibc's waits
/// 5 s, Windows's 1 s).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);
const LONGEST_RTO: Duration = Duration::from_secs(60);
const LONGEST_DEADLINE: Duration = Duration::from_secs(60);

/// Which setting is wrong, named by its flag and config key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("no address to listen on: give --listen (forward.listen)")]
    NoListen,
    #[error("no upstream: give --upstream tls://ADDRESS or quic://ADDRESS (forward.upstreams)")]
    NoUpstream,
    #[error("--connections (forward.connections) must be from 1 to {}, not {}", MAX_CONNECTIONS, .0)]
    Connections(usize),
    #[error("--tries (forward.tries) must be from 1 to {}, not {}", MAX_TRIES, .0)]
    Tries(u32),
    #[error("--min-rto-ms (forward.min_rto_ms) must be at least 1")]
    ZeroMinRto,
    /// The bounds given, in milliseconds.
    #[error(
        "the RTO bounds must satisfy min <= max <= {} ms, not {min} ms and {max} ms (--min-rto-ms, --max-rto-ms)",
        LONGEST_RTO.as_millis()
    )]
    RtoBounds { min: u128, max: u128 },
    /// The deadline given, in milliseconds.
    #[error("--deadline-ms (forward.deadline_ms) must be from 1 to {}, not {}", LONGEST_DEADLINE.as_millis(), .0)]
    Deadline(u128),
    #[error("{0:?} is not a valid server name for a certificate to be checked against")]
    ServerName(String),
}

impl ForwardConfig {
    /// Checks every setting, naming the flag (and config key) of a bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() {
            return Err(ConfigError::NoListen);
        }
        if self.upstreams.is_empty() {
            return Err(ConfigError::NoUpstream);
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return Err(ConfigError::Connections(self.connections));
        }
        if !(1..=MAX_TRIES).contains(&self.tries) {
            return Err(ConfigError::Tries(self.tries));
        }
        let RtoBounds { min, max } = self.rto;
        if min.is_zero() {
            return Err(ConfigError::ZeroMinRto);
        }
        if !(min <= max && max <= LONGEST_RTO) {
            return Err(ConfigError::RtoBounds { min: min.as_millis(), max: max.as_millis() });
        }
        if self.deadline.is_zero() || self.deadline > LONGEST_DEADLINE {
            return Err(ConfigError::Deadline(self.deadline.as_millis()));
        }
        for name in self.upstreams.iter().filter_map(|upstream| upstream.server_name.as_ref()).chain(&self.server_name) {
            if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
                return Err(ConfigError::ServerName(name.clone()));
            }
        }
        Ok(())
    }

    /// The name `upstream`'s certificate must be valid for.
    pub fn server_name_of(&self, upstream: &UpstreamSpec) -> String {
        upstream.server_name.clone().or_else(|| self.server_name.clone()).unwrap_or_else(|| upstream.address.ip().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<UpstreamSpec, UpstreamSpecError> {
        text.parse()
    }

    #[test]
    fn upstreams_are_a_scheme_an_ip_address_an_optional_port_and_name() {
        let tls = parsed("tls://127.0.0.1:8853").unwrap();
        assert_eq!((tls.protocol, tls.address, tls.server_name), (Protocol::Tls, "127.0.0.1:8853".parse().unwrap(), None));
        let quic = parsed("quic://[::1]#dns.example").unwrap();
        assert_eq!((quic.protocol, quic.address.port(), quic.server_name.as_deref()), (Protocol::Quic, 853, Some("dns.example")));
        assert_eq!(parsed("tls://2001:db8::1").unwrap().address, "[2001:db8::1]:853".parse().unwrap());
        assert_eq!(parsed("quic://192.0.2.1:53#a.example").unwrap().to_string(), "quic://192.0.2.1:53#a.example");
    }

    #[test]
    fn a_bad_upstream_is_refused_with_what_to_write() {
        let cases = [
            ("127.0.0.1:853", "has no scheme"),
            ("https://127.0.0.1", "unknown scheme \"https\""),
            ("tls://dns.example", "cannot look names up"),
            ("tls://127.0.0.1:99999", "not an IP address"),
            ("tls://127.0.0.1#", "nothing after '#'"),
        ];
        for (text, expected) in cases {
            let error = parsed(text).unwrap_err();
            assert!(error.to_string().contains(expected), "{text}: {error}");
        }
    }

    fn config() -> ForwardConfig {
        ForwardConfig {
            listen: vec!["127.0.0.1:5353".parse().unwrap()],
            upstreams: vec![parsed("tls://127.0.0.1").unwrap()],
            ca: None,
            server_name: None,
            connections: DEFAULT_CONNECTIONS,
            tries: DEFAULT_TRIES,
            rto: RtoBounds { min: DEFAULT_MIN_RTO, max: DEFAULT_MAX_RTO },
            deadline: DEFAULT_DEADLINE,
        }
    }

    #[test]
    fn bad_settings_are_refused_naming_the_flag() {
        config().validate().unwrap();
        type Spoil = fn(&mut ForwardConfig);
        let cases: [(Spoil, &str); 8] = [
            (|config| config.upstreams.clear(), "--upstream"),
            (|config| config.listen.clear(), "--listen"),
            (|config| config.connections = 0, "--connections"),
            (|config| config.tries = 11, "--tries"),
            (|config| config.rto.min = Duration::ZERO, "--min-rto-ms"),
            (|config| config.rto = RtoBounds { min: Duration::from_millis(500), max: Duration::from_millis(100) }, "min <= max"),
            (|config| config.deadline = Duration::ZERO, "--deadline-ms"),
            (|config| config.server_name = Some("not a name!".into()), "not a valid server name"),
        ];
        for (spoil, expected) in cases {
            let mut config = config();
            spoil(&mut config);
            let error = config.validate().unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn the_certificate_name_is_the_specs_else_the_flags_else_the_address() {
        let mut config = config();
        let named = parsed("tls://192.0.2.1#a.example").unwrap();
        let unnamed = parsed("tls://192.0.2.2").unwrap();
        assert_eq!(config.server_name_of(&unnamed), "192.0.2.2");
        config.server_name = Some("b.example".into());
        assert_eq!((config.server_name_of(&named), config.server_name_of(&unnamed)), ("a.example".into(), "b.example".into()));
    }
}
