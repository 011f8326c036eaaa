//! Whether an upstream is worth trying now. One that refuses a connection,
//! or whose connection goes silent (see [`crate::silence`]), is given a
//! rest that doubles with each failure until it answers again. A query
//! merely waiting past its retransmission timeout is no failure: over TCP
//! and QUIC it most often waits for the transport to repair a lost packet.
//! No clock here: times are passed in.

use std::time::{Duration, Instant};

/// The first rest after a failure, and the longest.
const FIRST_REST: Duration = Duration::from_millis(250);
const LONGEST_REST: Duration = Duration::from_secs(30);

/// The standing of one upstream.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// Failures since the upstream last answered.
    failures: u32,
    resting_until: Option<Instant>,
}

impl Health {
    /// True unless the upstream is resting at `now`.
    pub fn is_available(&self, now: Instant) -> bool {
        self.resting_until.is_none_or(|until| now >= until)
    }

    /// The upstream answered a query: it is in good standing again.
    pub fn on_answer(&mut self) {
        *self = Health::default();
    }

    /// A connection to the upstream could not be made, or went silent:
    /// rests it, and returns for how long.
    pub fn on_failure(&mut self, now: Instant) -> Duration {
        let rest = FIRST_REST.saturating_mul(1 << self.failures.min(16)).min(LONGEST_REST);
        self.failures += 1;
        self.resting_until = Some(now + rest);
        rest
    }
}

/// Whether upstream `index`, whose connection went silent, is to rest,
/// given which upstreams are available: only if another one is. Resting
/// the last would not spare its clients a wait; it would only turn the
/// answers its connection may still bring into SERVFAILs.
pub fn rest_after_silence(index: usize, available: &[bool]) -> bool {
    available.iter().enumerate().any(|(other, &available)| other != index && available)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_doubles_the_rest_up_to_the_longest() {
        let now = Instant::now();
        let mut health = Health::default();
        let rests: Vec<Duration> = (0..10).map(|_| health.on_failure(now)).collect();
        assert_eq!(rests[..4], [250, 500, 1000, 2000].map(Duration::from_millis));
        assert_eq!(rests[9], LONGEST_REST);
    }

    #[test]
    fn a_resting_upstream_is_available_again_when_its_rest_ends() {
        let now = Instant::now();
        let mut health = Health::default();
        assert!(health.is_available(now));
        let rest = health.on_failure(now);
        assert!(!health.is_available(now + rest - Duration::from_millis(1)));
        assert!(health.is_available(now + rest));
    }

    #[test]
    fn an_answer_restores_good_standing() {
        let now = Instant::now();
        let mut health = Health::default();
        health.on_failure(now);
        health.on_answer();
        assert!(health.is_available(now));
        assert_eq!(health.on_failure(now), FIRST_REST);
    }

    #[test]
    fn a_silent_upstream_rests_only_while_another_can_take_its_queries() {
        assert!(rest_after_silence(0, &[true, true]));
        assert!(rest_after_silence(1, &[true, true]));
        assert!(!rest_after_silence(0, &[true]), "the only upstream");
        assert!(!rest_after_silence(0, &[true, false]), "the other one is resting");
    }
}
