//! Whether an upstream is worth trying now. One that refuses a connection,
//! or lets several tries in a row go unanswered, is given a rest that
//! doubles with each failure until it answers again. No clock here: times
//! are passed in.

use std::time::{Duration, Instant};

/// The first rest after a failure, and the longest.
const FIRST_REST: Duration = Duration::from_millis(250);
const LONGEST_REST: Duration = Duration::from_secs(30);
/// Tries in a row that may go unanswered before an upstream that had been
/// answering is rested: one lost query is the path's doing, three in a row
/// with nothing answered in between look like the upstream's.
const SILENT_TRIES_BEFORE_REST: u32 = 3;

/// The standing of one upstream.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// Failures since the upstream last answered.
    failures: u32,
    /// Tries that timed out since the upstream last answered or was rested.
    silent_tries: u32,
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

    /// A connection to the upstream could not be made: rests it, and
    /// returns for how long.
    pub fn on_connect_failure(&mut self, now: Instant) -> Duration {
        self.rest(now)
    }

    /// A try went unanswered for its timeout. Rests the upstream, and
    /// returns for how long, if that makes too many in a row; an upstream
    /// that has failed before and not answered since gets no second chance.
    pub fn on_timeout(&mut self, now: Instant) -> Option<Duration> {
        self.silent_tries += 1;
        let allowed = if self.failures == 0 { SILENT_TRIES_BEFORE_REST } else { 1 };
        (self.silent_tries >= allowed).then(|| self.rest(now))
    }

    fn rest(&mut self, now: Instant) -> Duration {
        let rest = FIRST_REST.saturating_mul(1 << self.failures.min(16)).min(LONGEST_REST);
        self.failures += 1;
        self.silent_tries = 0;
        self.resting_until = Some(now + rest);
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_doubles_the_rest_up_to_the_longest() {
        let now = Instant::now();
        let mut health = Health::default();
        let rests: Vec<Duration> = (0..10).map(|_| health.on_connect_failure(now)).collect();
        assert_eq!(rests[..4], [250, 500, 1000, 2000].map(Duration::from_millis));
        assert_eq!(rests[9], LONGEST_REST);
    }

    #[test]
    fn a_resting_upstream_is_available_again_when_its_rest_ends() {
        let now = Instant::now();
        let mut health = Health::default();
        assert!(health.is_available(now));
        let rest = health.on_connect_failure(now);
        assert!(!health.is_available(now + rest - Duration::from_millis(1)));
        assert!(health.is_available(now + rest));
    }

    #[test]
    fn three_silent_tries_rest_an_upstream_then_one_is_enough() {
        let now = Instant::now();
        let mut health = Health::default();
        assert_eq!(health.on_timeout(now), None);
        assert_eq!(health.on_timeout(now), None);
        assert_eq!(health.on_timeout(now), Some(FIRST_REST));
        assert_eq!(health.on_timeout(now + FIRST_REST), Some(2 * FIRST_REST), "not answered since it was rested");
    }

    #[test]
    fn an_answer_restores_good_standing() {
        let now = Instant::now();
        let mut health = Health::default();
        health.on_connect_failure(now);
        health.on_answer();
        assert!(health.is_available(now));
        assert_eq!(health.on_timeout(now), None, "three silent tries allowed again");
        assert_eq!(health.on_connect_failure(now), FIRST_REST);
    }
}
