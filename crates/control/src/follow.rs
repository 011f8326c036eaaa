//! How a node of a fleet follows the store's change log. The store logs
//! every committed batch under a sequence number, one after another; a
//! node's state holds every batch up to the last one it applied. When the
//! store's follower hears that a batch was logged, the node catches up:
//! with the batches the notifications carried if none between is missing,
//! else by reading the log after the last one applied (a gap: a
//! notification lost, or sent without its changes).
//!
//! The batches here are `(sequence, changes)` pairs, in the order logged;
//! what a batch holds does not matter to the rules. Latency measurements
//! are logged the same way, under stamps.

/// What a catch-up is asked for when any batch may be new: the follower
/// (re)connected, or looks now and then in case it missed a notification.
pub const ANYTHING_NEW: u64 = u64::MAX;

/// Batches kept from notifications for one catch-up at most; past them
/// (a control thread long busy) the catch-up reads the store instead.
pub const MAX_NOTIFIED_BATCHES: usize = 1000;

/// What a catch-up to `wanted` does.
#[derive(Debug, PartialEq, Eq)]
pub enum CatchUp<T> {
    /// The state holds `wanted` already (a batch this node logged,
    /// notified back to it).
    Nothing,
    /// Applies these batches, carried by notifications: every one after
    /// the last applied up to `wanted`, none missing.
    Apply(Vec<(u64, T)>),
    /// Reads what the store logged after the last batch applied.
    Read,
}

/// How a node whose state holds the batches up to `applied` catches up
/// to `wanted` ([`ANYTHING_NEW`]: whatever is there), given the batches
/// that notifications carried.
pub fn catch_up<T>(applied: u64, wanted: u64, notified: Vec<(u64, T)>) -> CatchUp<T> {
    if wanted <= applied {
        return CatchUp::Nothing;
    }
    let unapplied: Vec<(u64, T)> = notified.into_iter().filter(|(sequence, _)| *sequence > applied).collect();
    let gapless = unapplied.iter().zip(applied + 1..).all(|((sequence, _), expected)| *sequence == expected);
    match unapplied.last() {
        Some((last, _)) if gapless && *last == wanted => CatchUp::Apply(unapplied),
        _ => CatchUp::Read,
    }
}

/// The last batch of measurements read, once this node has recorded the
/// batch `recorded` after having read up to `read`. Measurements are
/// logged by stamps without gaps, so a batch right after the last one
/// read need not be read back; after a gap, the next catch-up reads those
/// between, and this one with them.
pub fn read_with_own(read: u64, recorded: u64) -> u64 {
    if recorded == read + 1 { recorded } else { read }
}

/// What the follower heard while a catch-up waits to be served: up to
/// which sequence to catch up (0: nothing is waiting), and the batches
/// the notifications carried, in the order logged. One catch-up waits at
/// a time and takes all of it.
#[derive(Debug)]
pub struct Notified<T> {
    wanted: u64,
    batches: Vec<(u64, T)>,
}

impl<T> Default for Notified<T> {
    fn default() -> Self {
        Notified { wanted: 0, batches: Vec::new() }
    }
}

impl<T> Notified<T> {
    /// Notes that the batch `sequence` was logged, with its changes if the
    /// notification carried them (a sequence of 0 names none: anything
    /// may be new). Returns whether a catch-up must be queued: none waits
    /// yet.
    pub fn logged(&mut self, sequence: u64, changes: Option<T>) -> bool {
        if sequence == 0 {
            return self.look();
        }
        let must_queue = self.note(sequence);
        if let Some(changes) = changes.filter(|_| self.batches.len() < MAX_NOTIFIED_BATCHES) {
            self.batches.push((sequence, changes));
        }
        must_queue
    }

    /// Notes that anything may be new (the follower connected, or looks in
    /// case it missed a notification). Returns whether a catch-up must be
    /// queued.
    pub fn look(&mut self) -> bool {
        self.note(ANYTHING_NEW)
    }

    fn note(&mut self, wanted: u64) -> bool {
        let must_queue = self.wanted == 0;
        self.wanted = self.wanted.max(wanted);
        must_queue
    }

    /// Takes what the waiting catch-up is to do: the sequence to catch up
    /// to and the batches carried. From now on, news queues another.
    pub fn take(&mut self) -> (u64, Vec<(u64, T)>) {
        let Notified { wanted, batches } = std::mem::take(self);
        (wanted, batches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches `sequences`, each holding its own sequence as its changes.
    fn batches(sequences: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
        sequences.into_iter().map(|sequence| (sequence, sequence)).collect()
    }

    #[test]
    fn carried_batches_that_continue_the_state_are_applied_without_a_read() {
        assert_eq!(catch_up(2, 4, batches([3, 4])), CatchUp::Apply(batches([3, 4])));
        assert_eq!(catch_up(2, 4, batches([1, 2, 3, 4])), CatchUp::Apply(batches([3, 4])), "those applied already are dropped");
    }

    #[test]
    fn a_gap_before_between_or_after_the_carried_batches_is_read() {
        assert_eq!(catch_up(2, 4, batches([4])), CatchUp::Read, "3 is missing");
        assert_eq!(catch_up(2, 5, batches([3, 5])), CatchUp::Read, "4 is missing");
        assert_eq!(catch_up(2, 5, batches([3, 4])), CatchUp::Read, "5 was not carried");
        assert_eq!(catch_up(2, 4, batches([])), CatchUp::Read, "none was carried");
        assert_eq!(catch_up(2, ANYTHING_NEW, batches([3, 4])), CatchUp::Read, "more than the carried may be new");
    }

    #[test]
    fn a_batch_the_state_holds_already_is_not_caught_up_with() {
        assert_eq!(catch_up(4, 4, batches([4])), CatchUp::Nothing, "this node's own batch, notified back");
        assert_eq!(catch_up(4, 3, batches([])), CatchUp::Nothing);
    }

    #[test]
    fn measurements_this_node_records_right_after_those_read_are_not_read_back() {
        assert_eq!(read_with_own(6, 7), 7);
        assert_eq!(read_with_own(6, 9), 6, "7 and 8 are other nodes': read them, and 9 with them");
    }

    #[test]
    fn one_catch_up_waits_at_a_time_and_takes_everything_heard_meanwhile() {
        let mut notified = Notified::default();
        assert!(notified.logged(3, Some(3)), "the first news queues a catch-up");
        assert!(!notified.logged(5, None), "later news joins the one waiting");
        assert!(!notified.logged(4, Some(4)));
        assert_eq!(notified.take(), (5, batches([3, 4])));
        assert!(notified.logged(6, Some(6)), "taken: the next news queues another");
        assert!(!notified.look());
        assert_eq!(notified.take(), (ANYTHING_NEW, batches([6])));
        assert!(notified.logged(0, Some(0)), "a notification naming no batch is a look");
        assert_eq!(notified.take(), (ANYTHING_NEW, batches([])));
    }

    #[test]
    fn batches_carried_past_the_bound_are_left_for_the_read() {
        let mut notified = Notified::default();
        for sequence in 1..=MAX_NOTIFIED_BATCHES as u64 + 1 {
            notified.logged(sequence, Some(sequence));
        }
        let (wanted, kept) = notified.take();
        assert_eq!((wanted, kept.len()), (MAX_NOTIFIED_BATCHES as u64 + 1, MAX_NOTIFIED_BATCHES));
        assert_eq!(catch_up(0, wanted, kept), CatchUp::Read, "the last batch is missing");
    }
}
