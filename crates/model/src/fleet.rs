//! What the nodes of a fleet tell each other through the store they share:
//! each node's verdicts on replicas and when it last reported. How a node
//! weighs them is `pharos_control::quorum`'s.

use std::collections::HashMap;

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
