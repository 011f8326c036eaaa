//! Services and their replicas, as the routing core sees them.

use std::net::IpAddr;

use crate::policy::Policy;

/// TTL for answers when neither the policy nor the service sets one
/// (MyXDNS's default).
pub const DEFAULT_TTL: u32 = 360;

/// Whether probes (or an operator) last saw the replica serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Health {
    /// Up, or not yet probed: a replica counts as up until shown otherwise.
    #[default]
    Up,
    Down,
}

/// One server of a service.
#[derive(Debug, Clone, PartialEq)]
pub struct Replica {
    /// The operator's name for it, unique within the service ("fra-1").
    pub id: String,
    pub address: IpAddr,
    /// The data center it runs in, if known.
    pub datacenter: Option<String>,
    /// Relative share for weighted choices; 0 means "only if nothing else".
    pub weight: u32,
    /// For failover: lower numbers are tried first.
    pub priority: u32,
    /// An operator's switch: a disabled replica is never answered.
    pub enabled: bool,
    pub health: Health,
}

/// Which address family a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn holds(self, address: IpAddr) -> bool {
        matches!((self, address), (Family::V4, IpAddr::V4(_)) | (Family::V6, IpAddr::V6(_)))
    }
}

/// A name inside a served zone whose addresses are chosen by policy.
#[derive(Debug)]
pub struct Service {
    /// Presentation form, lowercase, with the final dot ("www.example.test.").
    pub name: String,
    pub replicas: Vec<Replica>,
    pub policy: Policy,
    /// TTL of answers whose policy does not set one.
    pub ttl: u32,
    /// At most this many addresses per answer (0: no cap).
    pub max_answers: usize,
}

impl Replica {
    /// Whether it may be answered at all: enabled and not known to be down.
    pub fn is_serving(&self) -> bool {
        self.enabled && self.health == Health::Up
    }
}
