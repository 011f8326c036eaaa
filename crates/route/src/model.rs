//! Services and their replicas, as the routing core sees them.

use crate::policy::Policy;
use crate::prepared::Prepared;
use crate::replica::{Family, Replica};

/// TTL for answers when neither the policy nor the service sets one
/// (MyXDNS's default).
pub const DEFAULT_TTL: u32 = 360;

/// What a service answers when none of its replicas is serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllDown {
    /// Every enabled replica: a guess beats no answer.
    #[default]
    FailOpen,
    /// No address (NODATA): clients fail fast and try elsewhere.
    Nodata,
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
    /// No answer's TTL exceeds this: the time until probes could next
    /// change a replica's state, if the service asks for it.
    pub ttl_cap: Option<u32>,
    /// Who may be answered, per family, worked out once: replicas change
    /// only by building a new snapshot.
    candidates: [Candidates; 2],
    /// The answer orders the policy can give, per family, where they can
    /// be enumerated.
    prepared: [Prepared; 2],
}

/// The replicas of one family a policy chooses among.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    pub indexes: Vec<usize>,
    /// True when none is serving, so these are every enabled replica
    /// (fail open) rather than nothing.
    pub failing_open: bool,
}

/// How a service answers, beside its replicas and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answering {
    pub ttl: u32,
    pub max_answers: usize,
    pub when_all_down: AllDown,
    pub ttl_cap: Option<u32>,
}

impl Answering {
    /// `ttl` and `max_answers`, failing open, no TTL cap.
    pub fn plain(ttl: u32, max_answers: usize) -> Answering {
        Answering { ttl, max_answers, when_all_down: AllDown::FailOpen, ttl_cap: None }
    }
}

impl Service {
    pub fn new(name: String, replicas: Vec<Replica>, policy: Policy, answering: Answering) -> Service {
        let Answering { ttl, max_answers, when_all_down, ttl_cap } = answering;
        let candidates = [Family::V4, Family::V6].map(|family| candidates_of(&replicas, family, when_all_down));
        let prepared =
            [Family::V4, Family::V6].map(|family| Prepared::new(&policy, &replicas, &candidates[family as usize].indexes, max_answers));
        Service { name, replicas, policy, ttl, max_answers, ttl_cap, candidates, prepared }
    }

    pub fn candidates(&self, family: Family) -> &Candidates {
        &self.candidates[family as usize]
    }

    /// For a service whose replicas are second-tier redirectors (all of
    /// its replicas are, or none), answered by CNAME whatever the type
    /// asked: the family of their own addresses, which it routes on.
    pub fn redirectors_family(&self) -> Option<Family> {
        let redirector = self.replicas.first().filter(|replica| replica.cname.is_some())?;
        Some(if redirector.address.is_ipv4() { Family::V4 } else { Family::V6 })
    }

    pub fn prepared(&self, family: Family) -> &Prepared {
        &self.prepared[family as usize]
    }
}

/// Serving replicas of `family`; if there are none, every enabled one
/// (failing open) or none.
fn candidates_of(replicas: &[Replica], family: Family, when_all_down: AllDown) -> Candidates {
    let of_family = || (0..replicas.len()).filter(|&index| family.holds(replicas[index].address));
    let serving: Vec<usize> = of_family().filter(|&index| replicas[index].is_serving()).collect();
    match when_all_down {
        _ if !serving.is_empty() => Candidates { indexes: serving, failing_open: false },
        AllDown::FailOpen => Candidates { indexes: of_family().filter(|&index| replicas[index].enabled).collect(), failing_open: true },
        AllDown::Nodata => Candidates { indexes: Vec::new(), failing_open: false },
    }
}
