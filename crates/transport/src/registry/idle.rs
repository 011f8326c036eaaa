//! Connections in the order of their last activity, longest idle first, so
//! that shedding one, or closing all those idle past the timeout, looks at
//! the few at the front rather than at every open connection.
//!
//! A query moves nothing here: it only sets its connection's clock, an
//! atomic, with no lock taken. The order catches up lazily. Each open
//! connection has one entry, keyed by its clock as it was when the entry
//! was made, which is never later than the clock now (clocks only go
//! forward). An entry that reaches the front with an old key goes back in
//! with the clock's current value; so the first entry found with a current
//! key is the longest idle of all. Each such put-back follows at least one
//! query, so the index costs O(log n) amortized per query and per look.
//! Entries of closed connections are dropped when they reach the front, or
//! all at once when they come to outnumber the open connections.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Closed connections' entries allowed beyond the open ones' count before
/// they are swept out, so that a small index is not swept at every close.
const CLOSED_ENTRIES_ALLOWED: usize = 64;

#[derive(Default)]
pub struct IdleIndex {
    heap: BinaryHeap<Reverse<Entry>>,
}

/// Ordered by last activity, then by connection ID: of two connections
/// last active in the same microsecond, the older is the idler.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Entry {
    last_active: u64,
    id: u64,
}

impl IdleIndex {
    /// Adds connection `id`, last active at `last_active`.
    pub fn insert(&mut self, id: u64, last_active: u64) {
        self.heap.push(Reverse(Entry { last_active, id }));
    }

    /// Takes out the longest-idle connection if it has been idle since
    /// `idle_since` or earlier. `clock_of` reads a connection's clock now,
    /// or gives `None` for a connection that has closed.
    pub fn take_idle_since(&mut self, idle_since: u64, clock_of: impl Fn(u64) -> Option<u64>) -> Option<u64> {
        while let Some(&Reverse(entry)) = self.heap.peek()
            && entry.last_active <= idle_since
        {
            self.heap.pop();
            match clock_of(entry.id) {
                None => {}
                Some(last_active) if last_active > entry.last_active => self.insert(entry.id, last_active),
                Some(_) => return Some(entry.id),
            }
        }
        None
    }

    /// Takes out the longest-idle connection, however recently active.
    pub fn take_longest_idle(&mut self, clock_of: impl Fn(u64) -> Option<u64>) -> Option<u64> {
        self.take_idle_since(u64::MAX, clock_of)
    }

    /// Drops the entries of closed connections once they outnumber the
    /// `open` ones: sweeping n entries after n closes is O(1) per close.
    pub fn forget_closed(&mut self, open: usize, is_open: impl Fn(u64) -> bool) {
        if self.heap.len() > 2 * open + CLOSED_ENTRIES_ALLOWED {
            self.heap.retain(|Reverse(entry)| is_open(entry.id));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Connections by ID and their clocks, beside the index under test.
    #[derive(Default)]
    struct Connections {
        clocks: HashMap<u64, u64>,
        index: IdleIndex,
    }

    impl Connections {
        /// Connections opened with these IDs and clocks, in this order.
        fn with_clocks(clocks: impl IntoIterator<Item = (u64, u64)>) -> Connections {
            let mut connections = Connections::default();
            for (id, last_active) in clocks {
                connections.open(id, last_active);
            }
            connections
        }

        fn open(&mut self, id: u64, last_active: u64) {
            self.clocks.insert(id, last_active);
            self.index.insert(id, last_active);
        }

        fn touch(&mut self, id: u64, now: u64) {
            self.clocks.insert(id, now);
        }

        fn close(&mut self, id: u64) {
            self.clocks.remove(&id);
            self.index.forget_closed(self.clocks.len(), |id| self.clocks.contains_key(&id));
        }

        fn shed(&mut self) -> Option<u64> {
            let id = self.index.take_longest_idle(|id| self.clocks.get(&id).copied())?;
            self.clocks.remove(&id);
            Some(id)
        }

        fn shed_all(&mut self) -> Vec<u64> {
            std::iter::from_fn(|| self.shed()).collect()
        }

        fn close_idle_since(&mut self, idle_since: u64) -> Vec<u64> {
            let clocks = &self.clocks;
            let idle: Vec<u64> = std::iter::from_fn(|| self.index.take_idle_since(idle_since, |id| clocks.get(&id).copied())).collect();
            self.clocks.retain(|id, _| !idle.contains(id));
            idle
        }
    }

    #[test]
    fn sheds_in_order_of_last_activity_and_ties_go_to_the_older() {
        let mut connections = Connections::with_clocks([(1, 30), (2, 10), (3, 20), (4, 10)]);
        assert_eq!(connections.shed_all(), [2, 4, 3, 1]);
    }

    #[test]
    fn a_connection_active_since_it_was_indexed_goes_behind_the_others() {
        let mut connections = Connections::with_clocks([(1, 10), (2, 20), (3, 30)]);
        connections.touch(1, 100);
        connections.touch(2, 90);
        assert_eq!(connections.shed(), Some(3));
        connections.touch(3, 200); // gone: its clock no longer matters
        connections.open(4, 95);
        assert_eq!(connections.shed_all(), [2, 4, 1]);
    }

    #[test]
    fn closed_connections_are_never_shed() {
        let mut connections = Connections::with_clocks((1..=4).map(|id| (id, id)));
        connections.close(1);
        connections.close(3);
        assert_eq!(connections.shed_all(), [2, 4]);
    }

    #[test]
    fn only_those_idle_since_the_cutoff_are_taken() {
        let mut connections = Connections::with_clocks((1..=5).map(|id| (id, id * 10)));
        connections.touch(2, 70);
        assert_eq!(connections.close_idle_since(40), [1, 3, 4]);
        assert_eq!(connections.close_idle_since(40), [] as [u64; 0], "nothing more is that idle");
        assert_eq!(connections.close_idle_since(70), [5, 2]);
        assert!(connections.clocks.is_empty());
    }

    #[test]
    fn closed_connections_entries_do_not_pile_up() {
        let mut connections = Connections::with_clocks([(0, 0)]);
        for id in 1..10_000 {
            connections.open(id, id);
            connections.close(id);
            assert!(connections.index.len() <= 2 + CLOSED_ENTRIES_ALLOWED + 1, "{} entries for 1 open", connections.index.len());
        }
        assert_eq!(connections.shed(), Some(0));
    }
}
