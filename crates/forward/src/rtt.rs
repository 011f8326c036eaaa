//! The round-trip time of one upstream and the retransmission timeout
//! derived from it, computed as TCP does (RFC 6298), from the time each
//! query takes to be answered. No clock here: times are passed in.
//!
//! Because every try of a query goes out under a message ID (DNS over TLS)
//! or stream (DNS over QUIC) of its own, an answer always says which try it
//! answers, so every answer is a clean sample and Karn's rule, which keeps
//! TCP from sampling retransmitted segments, is not needed.

use std::time::{Duration, Instant};

/// RFC 6298 section 2.1: the timeout before any round trip was measured.
pub const INITIAL_RTO: Duration = Duration::from_secs(1);
/// Linux TCP's minimum retransmission timeout (TCP_RTO_MIN).
pub const TCP_MIN_RTO: Duration = Duration::from_millis(200);
/// The clock granularity G of RFC 6298 section 2: tokio's timers tick in
/// milliseconds.
const GRANULARITY: Duration = Duration::from_millis(1);
/// Doublings beyond this cannot matter: the timeout is capped long before.
const MAX_BACKOFF_SHIFT: u32 = 16;

/// The range the retransmission timeout is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtoBounds {
    pub min: Duration,
    pub max: Duration,
}

/// SRTT and RTTVAR, once there is a sample.
#[derive(Debug, Clone, Copy)]
struct Smoothed {
    srtt: Duration,
    rttvar: Duration,
}

/// RFC 6298's estimator, with its exponential backoff (section 5.5).
#[derive(Debug, Clone)]
pub struct RttEstimator {
    bounds: RtoBounds,
    smoothed: Option<Smoothed>,
    /// Doublings of the timeout since the last sample.
    backoff_shift: u32,
    /// When the timeout was last doubled.
    backed_off_at: Option<Instant>,
}

impl RttEstimator {
    pub fn new(bounds: RtoBounds) -> RttEstimator {
        RttEstimator { bounds, smoothed: None, backoff_shift: 0, backed_off_at: None }
    }

    /// Takes in the time a query took to be answered (RFC 6298 sections
    /// 2.2 and 2.3), which also ends any backoff (section 5.7).
    pub fn on_sample(&mut self, rtt: Duration) {
        self.smoothed = Some(match self.smoothed {
            None => Smoothed { srtt: rtt, rttvar: rtt / 2 },
            // RTTVAR first, from the old SRTT; alpha = 1/8, beta = 1/4.
            Some(Smoothed { srtt, rttvar }) => {
                Smoothed { rttvar: rttvar - rttvar / 4 + srtt.abs_diff(rtt) / 4, srtt: srtt - srtt / 8 + rtt / 8 }
            }
        });
        self.backoff_shift = 0;
        self.backed_off_at = None;
    }

    /// Takes in the round trip a connection's handshake measured, as TCP
    /// takes in its SYN's: only while no query has been timed, so that the
    /// first query already runs on a timer fitted to the path.
    pub fn on_handshake(&mut self, rtt: Duration) {
        if self.smoothed.is_none() {
            self.on_sample(rtt);
        }
    }

    /// A query sent at `sent_at` went unanswered for the timeout: doubles it
    /// (section 5.5). Queries sent before the last doubling were already
    /// under a shorter timeout and do not double it again, so a burst lost
    /// at once backs off once, as TCP's single timer would.
    pub fn on_timeout(&mut self, sent_at: Instant, now: Instant) {
        if self.backed_off_at.is_some_and(|doubled_at| sent_at < doubled_at) {
            return;
        }
        self.backoff_shift = (self.backoff_shift + 1).min(MAX_BACKOFF_SHIFT);
        self.backed_off_at = Some(now);
    }

    /// The retransmission timeout: SRTT + max(G, 4 RTTVAR) within the
    /// bounds, then doubled for each backoff up to the upper bound.
    pub fn rto(&self) -> Duration {
        let base = match self.smoothed {
            None => INITIAL_RTO,
            Some(Smoothed { srtt, rttvar }) => srtt + GRANULARITY.max(4 * rttvar),
        };
        let RtoBounds { min, max } = self.bounds;
        base.clamp(min, max).saturating_mul(1 << self.backoff_shift).min(max)
    }

    /// The smoothed round-trip time, once there is one.
    pub fn srtt(&self) -> Option<Duration> {
        self.smoothed.map(|smoothed| smoothed.srtt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDE: RtoBounds = RtoBounds { min: Duration::from_millis(1), max: Duration::from_secs(60) };

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn starts_at_one_second_then_follows_rfc_6298() {
        let mut estimator = RttEstimator::new(WIDE);
        assert_eq!(estimator.rto(), INITIAL_RTO);
        estimator.on_sample(ms(100));
        // SRTT = 100, RTTVAR = 50: RTO = 100 + 4 * 50.
        assert_eq!((estimator.srtt(), estimator.rto()), (Some(ms(100)), ms(300)));
        estimator.on_sample(ms(200));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5.
        assert_eq!(estimator.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(estimator.rto(), Duration::from_micros(112_500 + 4 * 62_500));
    }

    #[test]
    fn a_steady_path_converges_to_its_rtt_plus_the_granularity() {
        let mut estimator = RttEstimator::new(WIDE);
        for _ in 0..200 {
            estimator.on_sample(ms(20));
        }
        assert_eq!(estimator.srtt(), Some(ms(20)));
        assert!(estimator.rto() >= ms(21) && estimator.rto() < ms(22), "{:?}", estimator.rto());
    }

    #[test]
    fn stays_within_its_bounds() {
        let bounds = RtoBounds { min: ms(200), max: ms(2000) };
        let mut estimator = RttEstimator::new(bounds);
        estimator.on_sample(Duration::from_micros(50));
        assert_eq!(estimator.rto(), ms(200), "a loopback RTT is held up to the minimum");
        let start = Instant::now();
        estimator.on_timeout(start, start);
        assert_eq!(estimator.rto(), ms(400), "the backoff doubles the held-up timeout");
        estimator.on_sample(ms(5000));
        assert_eq!(estimator.rto(), ms(2000), "a slow answer is held down to the maximum");
        estimator.on_timeout(start, start);
        assert_eq!(estimator.rto(), ms(2000), "and so is the backoff");
    }

    #[test]
    fn a_timeout_doubles_once_per_burst_and_a_sample_ends_the_backoff() {
        let mut estimator = RttEstimator::new(WIDE);
        estimator.on_sample(ms(100));
        let start = Instant::now();
        estimator.on_timeout(start, start + ms(300));
        assert_eq!(estimator.rto(), ms(600));
        // Sent with the first, lost with it: no second doubling.
        estimator.on_timeout(start + ms(1), start + ms(301));
        assert_eq!(estimator.rto(), ms(600));
        // Sent under the doubled timeout, and lost too.
        estimator.on_timeout(start + ms(310), start + ms(910));
        assert_eq!(estimator.rto(), ms(1200));
        estimator.on_sample(ms(100));
        assert!(estimator.rto() < ms(600), "{:?}", estimator.rto());
    }

    #[test]
    fn the_handshake_seeds_the_estimate_only_before_any_answer() {
        let mut estimator = RttEstimator::new(WIDE);
        estimator.on_handshake(ms(10));
        assert_eq!(estimator.srtt(), Some(ms(10)));
        estimator.on_sample(ms(10));
        estimator.on_handshake(ms(900));
        assert_eq!(estimator.srtt(), Some(ms(10)));
    }
}
