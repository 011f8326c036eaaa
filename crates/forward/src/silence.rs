//! Whether a connection to an upstream still shows signs of life. A query
//! unanswered after its retransmission timeout says little: TCP may be
//! repairing a lost segment that the answer waits behind, and QUIC a lost
//! packet, which takes at least one of their own timeouts (on Linux TCP
//! 200 ms plus the RTT, doubled for each lost retransmission). Only a
//! connection that has owed an answer for longer than such repairs take,
//! and received none meanwhile, is taken for dead. No clock here: times are
//! passed in.

use std::time::{Duration, Instant};

use crate::rtt::{INITIAL_RTO, TCP_MIN_RTO};

/// Timeouts of TCP's own from a segment's first sending to the answer it
/// asks for: seven (1 + 2 + 4, doubling) for a segment lost three times in
/// a row, and one more for the answer.
const TRANSPORT_TIMEOUTS: u32 = 8;

/// How long a connection on a path of round-trip time `srtt` may owe an
/// answer with nothing received before it is taken for dead.
pub fn silence_limit(srtt: Option<Duration>) -> Duration {
    (TCP_MIN_RTO + srtt.unwrap_or(INITIAL_RTO)) * TRANSPORT_TIMEOUTS
}

/// What one connection has answered, and what it owes.
#[derive(Debug, Clone, Default)]
pub struct Silence {
    last_answer: Option<Instant>,
    /// When the oldest query reported unanswered since the last answer was
    /// sent.
    owed_since: Option<Instant>,
}

impl Silence {
    /// The connection answered a query at `now`: it is alive.
    pub fn on_answer(&mut self, now: Instant) {
        self.last_answer = Some(now);
        self.owed_since = None;
    }

    /// A query sent on the connection at `sent_at` is still unanswered at
    /// `now`. True if the connection has owed answers for `limit` without
    /// answering any since: it is dead, and its successor starts afresh.
    pub fn is_dead(&mut self, sent_at: Instant, now: Instant, limit: Duration) -> bool {
        if self.last_answer.is_some_and(|answered| answered >= sent_at) {
            return false;
        }
        let owed_since = self.owed_since.map_or(sent_at, |owed_since| owed_since.min(sent_at));
        self.owed_since = Some(owed_since);
        let dead = now.saturating_duration_since(owed_since) >= limit;
        if dead {
            *self = Silence::default();
        }
        dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(3);

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn the_limit_outlasts_tcp_repairing_a_segment_lost_three_times() {
        assert_eq!(silence_limit(Some(ms(200))), ms(3200));
        assert_eq!(silence_limit(Some(ms(20))), ms(1760));
        assert_eq!(silence_limit(None), ms(9600), "before any round trip, from the initial RTO");
    }

    #[test]
    fn a_connection_owing_an_answer_for_the_limit_is_dead_and_then_starts_afresh() {
        let start = Instant::now();
        let mut silence = Silence::default();
        assert!(!silence.is_dead(start, start + ms(200), LIMIT), "a timeout is no proof");
        assert!(!silence.is_dead(start + ms(100), start + ms(2999), LIMIT), "owed since the first, not yet for the limit");
        assert!(silence.is_dead(start + ms(500), start + LIMIT, LIMIT), "owed since the first for the limit");
        assert!(!silence.is_dead(start + ms(500), start + LIMIT, LIMIT), "a new connection owes nothing yet");
    }

    #[test]
    fn an_answer_after_a_query_was_sent_shows_the_connection_alive() {
        let start = Instant::now();
        let mut silence = Silence::default();
        assert!(!silence.is_dead(start, start + ms(200), LIMIT));
        silence.on_answer(start + ms(300));
        assert!(!silence.is_dead(start, start + ms(5000), LIMIT), "the connection answered after this query left");
        assert!(!silence.is_dead(start + ms(400), start + ms(3000), LIMIT), "owed since the answer for less than the limit");
        assert!(silence.is_dead(start + ms(400), start + ms(3400), LIMIT));
    }
}
