//! One server of a service, and the address family a question asks for:
//! what the policies choose among, below the services that hold them.

use std::net::IpAddr;
use std::sync::Arc;

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
    /// Why it is down, in words, for explanations.
    pub down_because: Option<Arc<str>>,
    /// The host the URLs of HTTP redirects to it name, instead of its address.
    pub redirect_host: Option<Box<str>>,
    /// For a second-tier redirector (two-tier redirection, as NetAirt's):
    /// the name in its zone that clients are sent to by CNAME (lowercase
    /// wire form); `address` is then the redirector's own.
    pub cname: Option<Box<[u8]>>,
}

/// Which address family a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4 = 0,
    V6 = 1,
}

impl Family {
    pub fn holds(self, address: IpAddr) -> bool {
        matches!((self, address), (Family::V4, IpAddr::V4(_)) | (Family::V6, IpAddr::V6(_)))
    }
}

impl Replica {
    /// An enabled, serving replica of weight and priority 1, in no data center.
    pub fn new(id: impl Into<String>, address: IpAddr) -> Replica {
        Replica {
            id: id.into(),
            address,
            datacenter: None,
            weight: 1,
            priority: 1,
            enabled: true,
            health: Health::Up,
            down_because: None,
            redirect_host: None,
            cname: None,
        }
    }

    /// Whether it may be answered at all: enabled and not known to be down.
    pub fn is_serving(&self) -> bool {
        self.enabled && self.health == Health::Up
    }
}
