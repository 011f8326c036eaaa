//! How the fast path is set up: what [`FastPath::load`](crate::FastPath::load)
//! and [`FastPath::attach`](crate::FastPath::attach) take and say.

use std::fmt;
use std::net::IpAddr;

use crate::maps::{Limit, RrlSettings};

/// Settings the program cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("no port given: the kernel would answer nothing")]
    NoPort,
    #[error("max_entries is 0: the kernel could answer nothing")]
    NoEntries,
    #[error("max_entries {entries} is above {most}")]
    TooManyEntries { entries: u32, most: u32 },
    #[error("rate limit {per_second} per second, burst {burst}: both must be at least 1, the rate at most 10^9")]
    RateLimit { per_second: u32, burst: u32 },
    #[error("response rate limit {rate} per second in {table_size} buckets: both must be at least 1")]
    ResponseLimit { rate: u32, table_size: u32 },
    /// An interface name no system call can take.
    #[error("interface {0:?} has a NUL")]
    InterfaceNul(String),
}

/// What the program answers, and how much it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// UDP destination ports it answers on.
    pub ports: Vec<u16>,
    /// Pre-built replies per snapshot; the map holds twice as many, as
    /// the next snapshot is filled in beside the live one.
    pub max_entries: u32,
    /// A per-source token bucket in front of the kernel's answers.
    pub rate_limit: Option<RateLimit>,
    /// Response rate limiting of the kernel's answers, as user space's
    /// `[rrl]` limits its own.
    pub response_limit: Option<ResponseLimit>,
}

/// Alike responses per second to one network (an IPv4 /24, an IPv6 /56),
/// every `slip`th limited one sent truncated (0: none), in a table of
/// `table_size` buckets; sources in `whitelist` (address, prefix length)
/// never limited. User space's `pharos_rrl::Limits`, in the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseLimit {
    pub rate: u32,
    pub slip: u32,
    pub table_size: u32,
    pub whitelist: Vec<(IpAddr, u8)>,
}

impl ResponseLimit {
    /// The program's form of it; an error for a rate or table of 0.
    pub(crate) fn settings(&self) -> Result<RrlSettings, SettingsError> {
        if self.rate == 0 || self.table_size == 0 {
            return Err(SettingsError::ResponseLimit { rate: self.rate, table_size: self.table_size });
        }
        let interval_ns = (1_000_000_000 / u64::from(self.rate)).max(1);
        let whitelist = u32::from(!self.whitelist.is_empty());
        Ok(RrlSettings { interval_ns, depth_ns: interval_ns * u64::from(self.rate), slip: self.slip, enabled: 1, whitelist, unused: 0 })
    }
}

/// Answers per second a source (an IPv4 address, an IPv6 /64) may get from
/// the kernel, with bursts up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
    pub over_limit: OverLimit,
}

impl RateLimit {
    /// The bucket as the program holds it; an error for a rate or burst
    /// of 0, or a rate above one answer per nanosecond.
    pub(crate) fn bucket(&self) -> Result<Limit, SettingsError> {
        const SECOND_NS: u64 = 1_000_000_000;
        if self.per_second == 0 || u64::from(self.per_second) > SECOND_NS || self.burst == 0 {
            return Err(SettingsError::RateLimit { per_second: self.per_second, burst: self.burst });
        }
        let emission_ns = SECOND_NS / u64::from(self.per_second);
        let drop = u32::from(self.over_limit == OverLimit::Drop);
        Ok(Limit { emission_ns, capacity_ns: emission_ns * u64::from(self.burst), enabled: 1, drop })
    }
}

/// What becomes of a query over its source's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverLimit {
    /// Handed to user space, whose own limits then apply.
    Pass,
    Drop,
}

/// How the program is attached to an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In the driver, before any socket buffer exists (veth, most NICs).
    Native,
    /// After the kernel built a socket buffer: works everywhere (e.g. `lo`).
    Generic,
    /// Native where the driver supports it, else generic.
    Auto,
}

/// Where the program was attached, and how ([`Mode::Native`] or
/// [`Mode::Generic`], never [`Mode::Auto`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    pub interface: String,
    pub mode: Mode,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Native => "native",
            Mode::Generic => "generic",
            Mode::Auto => "auto",
        })
    }
}
