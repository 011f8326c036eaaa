//! The control API's requests and replies that are not declarations or
//! status: what the server reads and writes, and `pharos ctl` writes and
//! reads back.

use std::collections::BTreeMap;
use std::net::IpAddr;

pub use pharos_route::latency::MeasurementSpec;
use serde::{Deserialize, Serialize};

use crate::fleet::ReplicaHealth;
use crate::probabilities::ProbabilitySpec;

/// Why a request was refused (with a status of 400 or more).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: String,
    /// The field of the request that is wrong, when one is.
    pub field: Option<String>,
}

/// MyXDNS's Add_Region: a region without an id (the next free one is
/// given).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewRegion {
    pub name: String,
    #[serde(default)]
    pub prefixes: Vec<String>,
    #[serde(default)]
    pub asns: Vec<u32>,
    #[serde(default)]
    pub countries: Vec<String>,
    #[serde(default)]
    pub continents: Vec<String>,
}

/// The reply to [`NewRegion`]: the id the region was given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegionAdded {
    pub id: Option<u32>,
}

/// Operator switches on one replica; fields left out stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
}

/// A probability table: table name -> replica id -> entry.
pub type Probabilities = BTreeMap<String, BTreeMap<String, ProbabilitySpec>>;

/// The reply to a batch of latency measurements: how many were kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasurementsKept {
    pub accepted: usize,
}

/// Why a client gets what it gets, and which path answers it (`GET
/// /v1/explain`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExplainReply {
    #[serde(flatten)]
    pub explained: Explained,
    /// Whether the kernel fast path answers the question, and if not why.
    pub fast_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artemis: Option<DispatcherPick>,
    /// What the probes (of every live node, in a fleet) see of the
    /// service's replicas, and why each verdict is what it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<ReplicaHealth>,
}

/// Why a client gets what it gets, as the routing core decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explained {
    pub service: String,
    pub region: u32,
    pub scope: u8,
    pub ttl: u32,
    /// Replica ids and addresses, in answer order.
    pub answer: Vec<(String, String)>,
    pub steps: Vec<String>,
    /// For a service of second-tier redirectors: the one the client is
    /// sent to, and the name its CNAME points to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_to: Option<Delegated>,
}

/// The second-tier redirector a client is sent to (two-tier redirection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delegated {
    pub redirector: String,
    pub address: String,
    /// The name the tier-1 answer's CNAME points to, in the redirector's zone.
    pub cname: String,
}

/// What the Artemis dispatcher would do with the client's handshake: the
/// first replica of the routing core's decision, as the dispatcher takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DispatcherPick {
    pub service_address: IpAddr,
    pub service: String,
    /// None: the routing core chose no replica, and the dispatcher drops.
    pub replica: Option<String>,
    pub replica_address: Option<String>,
    pub datacenter: Option<String>,
}

/// `GET /v1/artemis`: every service address, and what the Address
/// Manager says to fix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddressView {
    pub prefix: String,
    pub services: Vec<ServiceAddress>,
    /// Collisions, reserved addresses and bad names, with the
    /// conflict-list lines that end them.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceAddress {
    pub name: String,
    pub address: IpAddr,
    /// Whether the conflict list gave the address, not the hash.
    pub from_conflict_list: bool,
}
