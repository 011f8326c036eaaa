//! Data centers, regions and services as an operator declares them (in the
//! config file or through the control API): plain data, read and written
//! by serde. Their checked conversion into the routing core's `Routes` is
//! `pharos_control::build`'s.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use pharos_route::RegionId;
use pharos_route::model::{AllDown, DEFAULT_TTL};
use pharos_route::policy::PolicyKind;
use pharos_wire::name;
use serde::{Deserialize, Serialize};

use crate::load_control::LoadControlSpec;
use crate::probabilities::{ProbabilitySpec, default_ttl};
use crate::probe::ProbeSpec;
use crate::zone::ZoneSpec;

/// A named class of client addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionSpec {
    /// 1 or more; 0 is reserved for unclassified clients.
    pub id: RegionId,
    pub name: String,
    /// CIDR prefixes, IPv4 or IPv6 ("192.0.2.0/24").
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// Origin AS numbers, resolved through the IP-to-AS table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<u32>,
    /// ISO 3166-1 alpha-2 country codes ("DE"), through the MaxMind DB.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    /// Continent codes (AF AN AS EU NA OC SA), through the MaxMind DB.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continents: Vec<String>,
}

/// A data center: where replicas run, for proximity policies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataCenterSpec {
    pub id: String,
    /// Degrees, -90 to 90.
    pub latitude: f64,
    /// Degrees, -180 to 180.
    pub longitude: f64,
    /// The AS the data center's addresses are announced from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
}

/// A service: a name answered by policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    pub name: String,
    #[serde(default = "default_policy")]
    pub policy: String,
    #[serde(default = "default_ttl")]
    pub ttl: u32,
    /// At most this many addresses per answer (0: all).
    #[serde(default)]
    pub max_answers: usize,
    #[serde(default, rename = "replica")]
    pub replicas: Vec<ReplicaSpec>,
    /// For `region-probabilities`: table name ("default" or a region's
    /// name) -> replica id -> probability and TTL.
    #[serde(default)]
    pub probabilities: BTreeMap<String, BTreeMap<String, ProbabilitySpec>>,
    /// For proximity policies: the policy for clients they have no data
    /// on (default `weighted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// How the replicas are probed; none: only operators mark them down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ProbeSpec>,
    /// What to answer when no replica is serving.
    #[serde(default, skip_serializing_if = "is_default")]
    pub when_all_down: AllDown,
    /// Cap answer TTLs at the time until probes could next change a
    /// replica's state (as gdnsd does), so resolvers drop a failing replica
    /// soon.
    #[serde(default, skip_serializing_if = "is_default")]
    pub shrink_ttl: bool,
    /// Where replicas report their load (an HTTP GET answering a number),
    /// if they do not push it to the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_probe: Option<ProbeSpec>,
    /// Recompute the region probabilities from load (MyXDNS algorithms I
    /// and II) in a control loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_control: Option<LoadControlSpec>,
}

impl ServiceSpec {
    /// A service with every optional field at its default.
    pub fn new(name: impl Into<String>, policy: impl Into<String>, replicas: Vec<ReplicaSpec>) -> ServiceSpec {
        ServiceSpec {
            name: name.into(),
            policy: policy.into(),
            ttl: DEFAULT_TTL,
            max_answers: 0,
            replicas,
            probabilities: BTreeMap::new(),
            fallback: None,
            health: None,
            when_all_down: AllDown::default(),
            shrink_ttl: false,
            load_probe: None,
            load_control: None,
        }
    }
}

impl ReplicaSpec {
    /// An enabled replica of weight and priority 1, in no data center.
    pub fn new(id: impl Into<String>, address: IpAddr) -> ReplicaSpec {
        ReplicaSpec {
            id: id.into(),
            address,
            datacenter: None,
            weight: 1,
            priority: 1,
            enabled: true,
            down: false,
            probe_address: None,
            redirect_host: None,
            delegate: None,
        }
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    pub id: String,
    pub address: IpAddr,
    #[serde(default)]
    pub datacenter: Option<String>,
    #[serde(default = "one")]
    pub weight: u32,
    #[serde(default = "one")]
    pub priority: u32,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Marked down by an operator (passive health): not answered until
    /// marked up again.
    #[serde(default)]
    pub down: bool,
    /// Where health probes go, if not to `address` (an internal address
    /// behind a public one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_address: Option<IpAddr>,
    /// The host the URLs of HTTP redirects to this replica name
    /// ("fra.cdn.example"), instead of its address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_host: Option<String>,
    /// Makes the replica a second-tier redirector (two-tier redirection):
    /// clients sent to it get a CNAME to this name, in a zone it serves
    /// ("svc.eu.example.com"); `address` is the redirector's, probed and
    /// routed on. A service's replicas all delegate, or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<String>,
}

fn default_policy() -> String {
    PolicyKind::Static.name().into()
}
fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}

/// Everything an operator declares, as one borrowed view.
#[derive(Debug, Clone, Copy, Default)]
pub struct Declared<'a> {
    pub datacenters: &'a [DataCenterSpec],
    pub regions: &'a [RegionSpec],
    pub services: &'a [Arc<ServiceSpec>],
    /// The zones kept in the store, served beside the files' zones.
    pub zones: &'a [Arc<ZoneSpec>],
}

/// Lowercase wire form of a service name given in text.
pub fn service_name(text: &str) -> Result<Box<[u8]>, NotADomainName> {
    name::from_dotted(text).map(Box::from).map_err(|reason| NotADomainName { text: text.into(), reason })
}

/// A name given in text that is not a domain name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a domain name ({reason:?})")]
pub struct NotADomainName {
    pub text: String,
    pub reason: name::NameError,
}
