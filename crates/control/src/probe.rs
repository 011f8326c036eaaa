//! Health checks as the control plane reasons about them: the hysteresis
//! that turns probe results into up and down, and the probed state a
//! snapshot is built with (how replicas are probed is declared with the
//! service: `pharos_model::probe`).
//!
//! Probing itself (sockets, timers) happens in the server; everything here
//! is plain data and arithmetic.

use std::net::IpAddr;
use std::sync::Arc;

use pharos_model::probe::ProbeSpec;
use rustc_hash::FxHashMap;

/// What a probe's result is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// Up or down.
    Health,
    /// The replica's load: the body of an HTTP answer, as a number.
    Load,
}

/// One replica's probe to run: the service and replica it speaks for, and
/// where and how to probe.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProbeTarget {
    pub service: String,
    pub replica: String,
    pub address: IpAddr,
    pub spec: ProbeSpec,
    pub purpose: Purpose,
}

/// Consecutive results turned into a state that does not flap: `fall`
/// failures in a row take a replica down, `rise` successes bring it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    pub up: bool,
    /// Results in a row that disagree with `up`.
    pub streak: u32,
    rise: u32,
    fall: u32,
}

impl Hysteresis {
    pub fn new(spec: &ProbeSpec) -> Hysteresis {
        Hysteresis { up: !spec.start_down, streak: 0, rise: spec.rise, fall: spec.fall }
    }

    /// Takes one probe result; returns whether the state flipped.
    pub fn record(&mut self, passed: bool) -> bool {
        if passed == self.up {
            self.streak = 0;
            return false;
        }
        self.streak += 1;
        let needed = if self.up { self.fall } else { self.rise };
        if self.streak < needed {
            return false;
        }
        self.up = passed;
        self.streak = 0;
        true
    }

    /// How many more probes could flip the state at the soonest.
    pub fn probes_to_flip(&self) -> u32 {
        (if self.up { self.fall } else { self.rise }).saturating_sub(self.streak).max(1)
    }
}

/// What probes say of one replica, as a snapshot is built with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    pub up: bool,
    /// Why, in words: the last result that mattered.
    pub reason: Arc<str>,
    /// Seconds until probes could change the state at the soonest.
    pub stable_for: u32,
}

/// Probed state by (service name, replica id).
pub type ProbedHealth = FxHashMap<(String, String), Probed>;

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str) -> ProbeSpec {
        serde_json::from_value(serde_json::json!({ "kind": kind, "port": 8080, "rise": 2, "fall": 3 })).unwrap()
    }

    #[test]
    fn one_lost_probe_does_not_flip_a_replica() {
        let mut state = Hysteresis::new(&spec("tcp"));
        let flips: Vec<bool> =
            [false, false, true, false, false, false, true, false, true, true].iter().map(|&ok| state.record(ok)).collect();
        // down after the third failure in a row, up after the second success in a row
        assert_eq!(flips, [false, false, false, false, false, true, false, false, false, true]);
        assert!(state.up);
        state.record(false);
        assert_eq!(state.probes_to_flip(), 2);
    }
}
