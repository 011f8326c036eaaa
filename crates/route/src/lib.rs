//! The routing core of Pharos (docs/architecture.md, "One routing core"):
//! who is asking ([`locate`]), and which replicas of a
//! service answer them, in what order, for how long ([`decide`]); for a
//! service of second-tier redirectors, which one the client is sent on to
//! ([`Service::redirectors_family`]).
//!
//! Everything here is a plain function of an immutable [`Routes`] table,
//! the asker and a random source: no sockets, clocks or locks. Every
//! mechanism (DNS, HTTP redirects, the QUIC dispatcher) and the explain
//! API ask through one door, [`route`], which can write down why it chose
//! what it chose; a mechanism that answers without asking per query (the
//! kernel fast path) learns every answer in advance through the same door
//! ([`route_variants`], [`client_blocks`]).

pub mod as_paths;
pub mod decide;
pub mod door;
pub mod explain;
pub mod external;
pub mod geo;
pub mod latency;
pub mod locate;
pub mod model;
pub mod policy;
pub mod prefix;
pub mod prepared;
pub mod proximity;
pub mod replica;
pub mod routes;
pub mod sources;

pub use decide::{Decision, PerQuery, Variant, Variants};
pub use door::{Routed, client_blocks, route, route_variants};
pub use explain::Explanation;
pub use locate::{Asker, Block, Location, Regions};
pub use model::Service;
pub use policy::{Policy, ProbabilityTable, RegionRow};
pub use replica::{Family, Health, Replica};
pub use routes::Routes;

/// Region 0: clients no region claims (MyXDNS's "undefined region").
pub const UNCLASSIFIED: RegionId = 0;

/// A region's number, as the control API hands it out.
pub type RegionId = u32;
