//! The message IDs of the queries outstanding on one DNS over TLS
//! connection. Clients choose their IDs on their own, so two may well use
//! the same at once; on the wire each query gets an ID no other outstanding
//! query on its connection has, and the client's is put back in its answer.
//! No I/O here.

use std::collections::HashMap;

/// Every ID a message can have.
const IDS: usize = 1 << 16;
/// The table is cleared of abandoned entries once it reaches this size,
/// then whenever it doubles from what was left: each entry is looked at a
/// bounded number of times on average.
const FIRST_SWEEP: usize = 64;

#[derive(Debug)]
pub struct IdTable<T> {
    entries: HashMap<u16, T>,
    next: u16,
    sweep_at: usize,
}

impl<T> IdTable<T> {
    pub fn new() -> IdTable<T> {
        IdTable { entries: HashMap::new(), next: 0, sweep_at: FIRST_SWEEP }
    }

    /// Gives `entry` an ID no other entry has, first forgetting the entries
    /// that are `abandoned` (their query was answered by another try, or
    /// given up) if the table has grown or is full; `None` if every ID is
    /// taken even so.
    pub fn insert(&mut self, entry: T, abandoned: impl Fn(&T) -> bool) -> Option<u16> {
        if self.entries.len() >= self.sweep_at.min(IDS) {
            self.entries.retain(|_, entry| !abandoned(entry));
            self.sweep_at = (2 * self.entries.len()).max(FIRST_SWEEP);
        }
        if self.entries.len() == IDS {
            return None;
        }
        let mut id = self.next;
        while self.entries.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.entries.insert(id, entry);
        self.next = id.wrapping_add(1);
        Some(id)
    }

    /// The entry under `id`, which is then free again.
    pub fn take(&mut self, id: u16) -> Option<T> {
        self.entries.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_among_outstanding_entries_and_freed_by_answers() {
        let mut table = IdTable::new();
        let first = table.insert("a", |_| false).unwrap();
        let second = table.insert("b", |_| false).unwrap();
        assert_ne!(first, second);
        assert_eq!(table.take(first), Some("a"));
        assert_eq!(table.take(first), None, "answered once");
        assert_eq!(table.take(second), Some("b"));
    }

    #[test]
    fn a_full_table_refuses_until_abandoned_entries_are_swept() {
        let mut table = IdTable::new();
        for index in 0..IDS {
            assert!(table.insert(index, |_| false).is_some());
        }
        assert_eq!(table.insert(0, |_| false), None, "every ID taken");
        let id = table.insert(0, |&index| index % 2 == 0).expect("half were abandoned");
        assert!(table.take(id).is_some());
        assert_eq!(table.entries.len(), IDS / 2);
    }

    #[test]
    fn ids_skip_those_still_outstanding_when_they_wrap() {
        let mut table = IdTable::new();
        let kept = table.insert(0, |_| false).unwrap();
        table.next = kept;
        assert_eq!(table.insert(1, |_| false), Some(kept.wrapping_add(1)));
    }
}
