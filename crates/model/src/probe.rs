//! How a service's replicas are probed, as an operator declares it with
//! the service; what probing does with it is `pharos_control::probe`'s.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

/// What a probe does to decide that a replica serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// A TCP connection is accepted.
    Tcp,
    /// An HTTP GET answers `expect_status` (and contains `body`, if given).
    Http,
    /// The same over TLS (the certificate is not checked: the probe asks
    /// whether the replica serves, not who it is).
    Https,
    /// A DNS query for `dns_name` over UDP answers NOERROR.
    Dns,
}

/// How a service's replicas are probed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    pub kind: ProbeKind,
    /// Port probed; by default 80 (http), 443 (https) or 53 (dns). A TCP
    /// probe must name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// HTTP(S): the path asked for.
    #[serde(default = "default_path")]
    pub path: String,
    /// HTTP(S): the status that means "serving".
    #[serde(default = "default_status")]
    pub expect_status: u16,
    /// HTTP(S): text the body must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// HTTP(S): the Host header; DNS: the name asked for (A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    /// How long a probe may take; by default 2 s, or the interval if that
    /// is shorter (see [`ProbeSpec::timeout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Consecutive successes that bring a down replica up.
    #[serde(default = "default_rise")]
    pub rise: u32,
    /// Consecutive failures that take an up replica down.
    #[serde(default = "default_fall")]
    pub fall: u32,
    /// Whether replicas count as down until their first probes pass (by
    /// default they count as up, so a restart causes no outage).
    #[serde(default)]
    pub start_down: bool,
}

fn default_path() -> String {
    "/".into()
}
fn default_status() -> u16 {
    200
}
fn default_interval() -> u64 {
    10_000
}
/// The longest a probe waits when its spec sets no timeout.
const DEFAULT_TIMEOUT_MS: u64 = 2_000;
fn default_rise() -> u32 {
    2
}
fn default_fall() -> u32 {
    3
}

impl ProbeSpec {
    /// Checks the numbers and fields that go with the kind; `field` names
    /// the spec in errors.
    pub fn check(&self, field: &str) -> Result<(), SpecError> {
        let invalid = |name: &str, message: &str| Err(SpecError { field: format!("{field}.{name}"), message: message.into() });
        if self.interval_ms < 100 {
            return invalid("interval_ms", "probe at most every 100 ms");
        }
        match self.timeout_ms {
            Some(0) => return invalid("timeout_ms", "must be more than 0"),
            Some(timeout) if timeout > self.interval_ms => {
                let message =
                    format!("{timeout} ms is longer than interval_ms ({} ms): a probe must end before the next", self.interval_ms);
                return invalid("timeout_ms", &message);
            }
            _ => {}
        }
        if self.rise == 0 || self.fall == 0 {
            return invalid(if self.rise == 0 { "rise" } else { "fall" }, "must be 1 or more");
        }
        match self.kind {
            ProbeKind::Tcp if self.port.is_none() => invalid("port", "a TCP probe needs a port"),
            ProbeKind::Http | ProbeKind::Https if !self.path.starts_with('/') => invalid("path", "must start with /"),
            ProbeKind::Http | ProbeKind::Https if !(100..=599).contains(&self.expect_status) => {
                invalid("expect_status", "is not an HTTP status (100 to 599)")
            }
            ProbeKind::Dns if self.name.is_none() => invalid("name", "a DNS probe needs a name to ask for"),
            _ => Ok(()),
        }
    }

    /// How long a probe may take: as set, else 2 s or the interval if
    /// that is shorter, so a short interval needs no timeout of its own.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS.min(self.interval_ms)))
    }

    /// The port probed.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.kind {
            ProbeKind::Tcp | ProbeKind::Http => 80,
            ProbeKind::Https => 443,
            ProbeKind::Dns => 53,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str) -> ProbeSpec {
        serde_json::from_value(serde_json::json!({ "kind": kind, "port": 8080, "rise": 2, "fall": 3 })).unwrap()
    }

    #[test]
    fn probe_specs_are_checked_field_by_field() {
        let field = |mut edit: Box<dyn FnMut(&mut ProbeSpec)>| {
            let mut probe = spec("http");
            edit(&mut probe);
            probe.check("service[s].health").map_err(|error| error.field)
        };
        assert_eq!(field(Box::new(|_| {})), Ok(()));
        assert_eq!(field(Box::new(|probe| probe.timeout_ms = Some(probe.interval_ms + 1))).unwrap_err(), "service[s].health.timeout_ms");
        assert_eq!(field(Box::new(|probe| probe.timeout_ms = Some(0))).unwrap_err(), "service[s].health.timeout_ms");
        assert_eq!(field(Box::new(|probe| probe.timeout_ms = Some(probe.interval_ms))), Ok(()), "as long as the interval");
        assert_eq!(field(Box::new(|probe| probe.interval_ms = 10)).unwrap_err(), "service[s].health.interval_ms");
        assert_eq!(field(Box::new(|probe| probe.fall = 0)).unwrap_err(), "service[s].health.fall");
        assert_eq!(field(Box::new(|probe| probe.path = "x".into())).unwrap_err(), "service[s].health.path");
        assert_eq!(field(Box::new(|probe| probe.kind = ProbeKind::Dns)).unwrap_err(), "service[s].health.name");
        assert_eq!(field(Box::new(|probe| (probe.kind, probe.port) = (ProbeKind::Tcp, None))).unwrap_err(), "service[s].health.port");
        assert_eq!(spec("https").port, Some(8080));
        assert_eq!(ProbeSpec { port: None, ..spec("https") }.port(), 443);
    }

    #[test]
    fn the_default_timeout_follows_a_short_interval() {
        let every = |interval_ms| ProbeSpec { interval_ms, ..spec("tcp") };
        assert_eq!(every(10_000).timeout(), Duration::from_secs(2));
        assert_eq!(every(500).timeout(), Duration::from_millis(500));
        assert_eq!(every(500).check("health"), Ok(()), "a short interval needs no timeout of its own");
        assert_eq!(ProbeSpec { timeout_ms: Some(300), ..every(500) }.timeout(), Duration::from_millis(300));
    }
}
