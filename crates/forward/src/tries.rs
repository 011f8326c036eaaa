//! Where each try of one query goes: to the first upstream in order of
//! preference that is not resting, on one of its pool of connections; a
//! hedge (a further try while the earlier ones still wait) goes to a
//! connection that does not have the query yet, the same upstream's other
//! connections first, then the next upstream's. No I/O here.
//!
//! A query is never sent twice on one connection: TCP and QUIC repair a
//! lost packet themselves, so a copy written behind the original would only
//! wait for the same repair. Once a try fails, its connection is gone, and
//! the slot's next one may carry the query again (RFC 7766 section 6.2.4:
//! clients retry what a closed connection left unanswered).

/// One connection of an upstream's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotId {
    /// The upstream's place in the order of preference.
    pub upstream: usize,
    /// The connection's place in the upstream's pool.
    pub connection: usize,
}

/// The tries of one query.
#[derive(Debug, Clone)]
pub struct Tries {
    limit: u32,
    made: u32,
    /// Where in a pool first tries start, so that queries spread over it.
    rotation: usize,
    /// The slots whose connection has the query now.
    holding: Vec<SlotId>,
}

impl Tries {
    /// At most `limit` tries, the first on connection `rotation` (modulo
    /// the pool's size) of the first available upstream.
    pub fn new(limit: u32, rotation: usize) -> Tries {
        Tries { limit, made: 0, rotation, holding: Vec::new() }
    }

    /// Tries made so far.
    pub fn made(&self) -> u32 {
        self.made
    }

    /// The connection for the next try, given which upstreams are available
    /// (in order of preference) and the size of each one's pool; `None` if
    /// the tries are used up or every available connection has the query.
    pub fn next(&mut self, available: &[bool], pool_size: usize) -> Option<SlotId> {
        if self.made >= self.limit {
            return None;
        }
        let slot = self.first_without_the_query(available, pool_size)?;
        self.made += 1;
        self.holding.push(slot);
        Some(slot)
    }

    /// The try on `slot` failed: its connection is closed, and the one the
    /// slot makes next does not have the query.
    pub fn failed(&mut self, slot: SlotId) {
        self.holding.retain(|&holding| holding != slot);
    }

    fn first_without_the_query(&self, available: &[bool], pool_size: usize) -> Option<SlotId> {
        let upstreams = available.iter().enumerate().filter(|&(_, &available)| available).map(|(upstream, _)| upstream);
        upstreams
            .flat_map(|upstream| (0..pool_size).map(move |offset| SlotId { upstream, connection: (self.rotation + offset) % pool_size }))
            .find(|slot| !self.holding.contains(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(upstream: usize, connection: usize) -> SlotId {
        SlotId { upstream, connection }
    }

    fn all_tries(tries: &mut Tries, available: &[bool], pool_size: usize) -> Vec<SlotId> {
        std::iter::from_fn(|| tries.next(available, pool_size)).collect()
    }

    #[test]
    fn hedges_go_to_the_other_connections_then_the_next_upstream() {
        let mut tries = Tries::new(5, 1);
        let order = all_tries(&mut tries, &[true, true], 2);
        assert_eq!(order, [slot(0, 1), slot(0, 0), slot(1, 1), slot(1, 0)], "each connection once, though a fifth try is allowed");
        assert_eq!(tries.made(), 4);
    }

    #[test]
    fn resting_upstreams_are_skipped() {
        let mut tries = Tries::new(3, 0);
        assert_eq!(tries.next(&[false, true], 1), Some(slot(1, 0)));
        assert_eq!(tries.next(&[true, true], 1), Some(slot(0, 0)), "back once rested");
        assert_eq!(tries.next(&[false, false], 1), None, "none available");
    }

    #[test]
    fn a_single_connection_is_never_sent_the_query_twice() {
        let mut tries = Tries::new(3, 7);
        assert_eq!(tries.next(&[true], 1), Some(slot(0, 0)));
        assert_eq!(tries.next(&[true], 1), None, "the connection repairs its own losses");
    }

    #[test]
    fn a_failed_try_frees_its_slot_for_the_next_connection_up_to_the_limit() {
        let mut tries = Tries::new(2, 0);
        let first = tries.next(&[true], 1).unwrap();
        tries.failed(first);
        assert_eq!(tries.next(&[true], 1), Some(first), "a new connection of the same slot");
        tries.failed(first);
        assert_eq!(tries.next(&[true], 1), None, "the tries are used up");
    }
}
