//! Health by quorum, for nodes that share a store: each node publishes its
//! own probes' verdict on each replica (when it changes), and serves the
//! verdict of the majority of the live nodes that probe it (or of the
//! share the operator sets), so one node with a broken path to a replica
//! cannot take it down for everyone. A node
//! counts as live while its last report is younger than the staleness
//! window; a node that cannot reach the store for that long serves its own
//! view again.
//!
//! A node reads from the store only the verdicts that changed since its
//! last read, and gathers them ([`FleetVerdicts`]) into the fleet's whole
//! view.

use std::collections::{BTreeMap, HashMap};

pub use pharos_model::fleet::FleetView;
use pharos_model::fleet::{FleetReports, NodeVerdict};

/// The fleet's whole view as one node has gathered it, read after read.
#[derive(Debug, Clone, Default)]
pub struct FleetVerdicts {
    /// When each node last reported (Unix ms, its clock).
    reported: HashMap<String, u64>,
    /// By service and replica, then by node.
    verdicts: HashMap<(String, String), BTreeMap<String, NodeVerdict>>,
    stamp: u64,
}

impl FleetVerdicts {
    /// The stamp to read the verdicts changed after.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// Takes what a read brought: each verdict replaces the one its node
    /// gave before on the same replica.
    pub fn take(&mut self, reports: FleetReports) {
        self.reported = reports.reported;
        for verdict in reports.verdicts {
            let by_node = self.verdicts.entry((verdict.service.clone(), verdict.replica.clone())).or_default();
            by_node.insert(verdict.node.clone(), verdict);
        }
        self.stamp = reports.stamp;
    }

    /// Every node's verdict on `service`/`replica`.
    fn on(&self, service: &str, replica: &str) -> impl Iterator<Item = &NodeVerdict> {
        self.verdicts.get(&(service.to_owned(), replica.to_owned())).into_iter().flat_map(BTreeMap::values)
    }
}

/// Who this node is in the fleet, when others count as gone, and how
/// many must see a replica down.
#[derive(Debug, Clone, PartialEq)]
pub struct Quorum {
    pub node: String,
    /// A node whose last report is older than this (ms) is not counted.
    pub stale_after_ms: u64,
    /// A replica is down when more than this share (0 to 1, excluded) of
    /// the live nodes probing it see it down: 0.5 is a majority.
    pub down_share: f64,
}

/// The share of live nodes that takes a replica down: a majority.
pub const MAJORITY: f64 = 0.5;

impl Quorum {
    /// The verdict on `service`/`replica` from this node's own view
    /// (`own_up`, because of `own_reason`) and the live nodes' verdicts at
    /// `now`: down only if more than [`Quorum::down_share`] of the nodes
    /// that report on it see it down.
    pub fn weigh(&self, service: &str, replica: &str, (own_up, own_reason): (bool, &str), fleet: &FleetVerdicts, now: u64) -> FleetView {
        let live = |node: &str| fleet.reported.get(node).is_some_and(|&at| at.saturating_add(self.stale_after_ms) >= now);
        let others = fleet.on(service, replica).filter(|verdict| verdict.node != self.node && live(&verdict.node));
        let mut votes: Vec<(&str, bool, &str)> =
            others.map(|verdict| (verdict.node.as_str(), verdict.up, verdict.reason.as_str())).collect();
        votes.push((&self.node, own_up, own_reason));
        votes.sort();
        let names = |up: bool| votes.iter().filter(|vote| vote.1 == up).map(|vote| vote.0.to_owned()).collect::<Vec<_>>();
        let (nodes_up, nodes_down) = (names(true), names(false));
        let up = nodes_down.len() as f64 <= self.down_share * votes.len() as f64;
        let dissent: Vec<String> = votes.iter().filter(|vote| vote.1 != up).map(|(node, _, reason)| format!("{node}: {reason}")).collect();
        let total = votes.len();
        let why = match (up, dissent.is_empty()) {
            (true, true) => format!("up: all {total} live nodes probing it see it up"),
            (false, true) => format!("down: all {total} live nodes probing it see it down ({})", reasons(&votes)),
            (true, false) => format!(
                "up: {} of {total} live nodes see it up; no {} sees it down ({})",
                nodes_up.len(),
                self.quorum_name(),
                dissent.join("; ")
            ),
            (false, false) => format!(
                "down: {} of {total} live nodes see it down, a {} ({})",
                nodes_down.len(),
                self.quorum_name(),
                reasons(&votes.iter().filter(|vote| !vote.1).copied().collect::<Vec<_>>())
            ),
        };
        FleetView { up, nodes_up, nodes_down, why }
    }

    /// "majority", or the share set, in words.
    fn quorum_name(&self) -> String {
        if self.down_share == MAJORITY { "majority".into() } else { format!("quorum (over {:.0} %)", self.down_share * 100.0) }
    }
}

/// "node: reason; node: reason".
fn reasons(votes: &[(&str, bool, &str)]) -> String {
    votes.iter().map(|(node, _, reason)| format!("{node}: {reason}")).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(node: &str, up: bool) -> NodeVerdict {
        let reason = if up { "probe passed" } else { "probe failed: refused" };
        NodeVerdict { node: node.into(), service: "s".into(), replica: "a".into(), up, reason: reason.into(), since: 0 }
    }

    fn reports(verdicts: &[NodeVerdict], reported_at: u64) -> FleetVerdicts {
        let reported = verdicts.iter().map(|verdict| (verdict.node.clone(), reported_at)).collect();
        let mut fleet = FleetVerdicts::default();
        fleet.take(FleetReports { reported, verdicts: verdicts.to_vec(), stamp: 1 });
        fleet
    }

    fn quorum() -> Quorum {
        Quorum { node: "n1".into(), stale_after_ms: 5000, down_share: MAJORITY }
    }

    #[test]
    fn one_node_alone_cannot_take_a_replica_down_and_a_majority_can() {
        let others_up = reports(&[verdict("n2", true), verdict("n3", true)], 10_000);
        let lone = quorum().weigh("s", "a", (false, "probe failed: refused"), &others_up, 10_000);
        assert!(lone.up, "{lone:?}");
        assert_eq!((lone.nodes_up, lone.nodes_down), (vec!["n2".to_owned(), "n3".into()], vec!["n1".to_owned()]));
        assert!(lone.why.starts_with("up: 2 of 3 live nodes see it up") && lone.why.contains("n1: probe failed"), "{}", lone.why);
        let two_down = reports(&[verdict("n2", false), verdict("n3", true)], 10_000);
        let majority = quorum().weigh("s", "a", (false, "probe failed: refused"), &two_down, 10_000);
        assert!(!majority.up && majority.why.starts_with("down: 2 of 3 live nodes see it down, a majority"), "{}", majority.why);
        let all_up = quorum().weigh("s", "a", (true, "probe passed"), &others_up, 10_000);
        assert_eq!(all_up.why, "up: all 3 live nodes probing it see it up");
        let wary = Quorum { down_share: 0.3, ..quorum() };
        let one_is_enough = wary.weigh("s", "a", (false, "probe failed: refused"), &others_up, 10_000);
        assert!(
            !one_is_enough.up && one_is_enough.why.starts_with("down: 1 of 3 live nodes see it down, a quorum (over 30 %)"),
            "{one_is_enough:?}"
        );
    }

    #[test]
    fn stale_nodes_and_other_replicas_do_not_count() {
        let mut old = reports(&[verdict("n2", false), verdict("n3", false)], 1_000);
        let alone = quorum().weigh("s", "a", (true, "probe passed"), &old, 10_000);
        assert!(alone.up && alone.nodes_down.is_empty(), "both reported 9 s ago, past the 5 s window: {alone:?}");
        old.reported.insert("n2".into(), 6_000);
        let tie = quorum().weigh("s", "a", (true, "probe passed"), &old, 10_000);
        assert!(tie.up, "one of two is no majority: {tie:?}");
        let elsewhere = quorum().weigh("s", "b", (true, "probe passed"), &reports(&[verdict("n2", false)], 10_000), 10_000);
        assert_eq!(elsewhere.nodes_up, ["n1"], "n2 spoke of replica a only");
    }

    #[test]
    fn verdicts_read_after_a_stamp_replace_only_their_nodes_ones() {
        let mut fleet = reports(&[verdict("n2", true), verdict("n3", true)], 10_000);
        let lone = quorum().weigh("s", "a", (false, "probe failed: refused"), &fleet, 10_000);
        assert!(lone.up, "{lone:?}");
        // Only n2's turn is read; n3's verdict, read before, still counts.
        let reported = [("n2".to_owned(), 11_000), ("n3".to_owned(), 11_000)].into();
        fleet.take(FleetReports { reported, verdicts: vec![verdict("n2", false)], stamp: 2 });
        assert_eq!(fleet.stamp(), 2);
        let majority = quorum().weigh("s", "a", (false, "probe failed: refused"), &fleet, 11_000);
        assert_eq!(
            (majority.up, majority.nodes_up, majority.nodes_down),
            (false, vec!["n3".to_owned()], vec!["n1".to_owned(), "n2".into()])
        );
    }
}
