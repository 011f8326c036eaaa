//! What the nodes of a fleet tell each other through the store they share:
//! each node's verdicts on replicas and when it last reported. How a node
//! weighs them is `pharos_control::quorum`'s.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One node's verdict on one replica, as the fleet shares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVerdict {
    pub node: String,
    pub service: String,
    pub replica: String,
    pub up: bool,
    /// The probe result behind it, in words.
    pub reason: String,
    /// When the node's view last changed (Unix ms, the node's clock).
    pub since: u64,
}

/// What the fleet's nodes have reported, as read from the store: when
/// each last reported, and the verdicts that changed after a stamp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetReports {
    /// When each node last reported (Unix ms, its clock).
    pub reported: HashMap<String, u64>,
    pub verdicts: Vec<NodeVerdict>,
    /// The stamp to read the verdicts changed after next time.
    pub stamp: u64,
}

/// A replica's health as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplicaHealth {
    pub service: String,
    pub replica: String,
    pub probe: String,
    /// The state served: the fleet's verdict if there is one, else this
    /// node's probes'.
    pub up: bool,
    /// This node's probes: results in a row against their current state.
    pub streak: u32,
    pub last: String,
    pub since: u64,
    /// Which live nodes see it up and down, and why the verdict is what it
    /// is (nodes sharing a store only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetView>,
}

/// The fleet's verdict on one replica, and who said what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetView {
    pub up: bool,
    /// The live nodes whose probes see it up, and down (this node included).
    pub nodes_up: Vec<String>,
    pub nodes_down: Vec<String>,
    /// Why the verdict is what it is, in words.
    pub why: String,
}
