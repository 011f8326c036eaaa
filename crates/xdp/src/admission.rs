//! Which static answers the kernel holds when a snapshot has more than it
//! has room for: the most asked ones (Santa's admission by frequency).
//! While the live snapshot is above capacity the program counts every
//! question it parses, answered or not, in its per-CPU `asked` map; at
//! each sync user space halves what it counted before, adds what the
//! program counted since (clearing the map), and installs the snapshot's
//! answers in order of those counts, ties in [`fill`](crate::fill::fill)
//! order. Halving at every sync lets the choice follow demand as it moves.

use std::collections::{HashMap, HashSet};
use std::io;

use aya::maps::{MapData, MapError, PerCpuHashMap};
use aya::sys::SyscallError;

use crate::maps::{Answer, AnswerKey, QuestionKey};

/// The `asked` map's room for a capacity: twice the answers installed,
/// so that the questions just below the threshold are counted too, and
/// at least 1024, at most 65,536.
pub(crate) fn asked_room(capacity: u32) -> u32 {
    capacity.saturating_mul(2).clamp(1024, 65_536)
}

/// The static answers to install, and what the choice left out.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub(crate) entries: Vec<(AnswerKey, Answer)>,
    pub(crate) left_out: usize,
    /// With answers left out: the count of the least asked answer
    /// installed (no answer left out was asked more often); else 0.
    pub(crate) threshold: u64,
}

/// The questions' counts, decayed, as the program and earlier syncs saw them.
pub(crate) struct Demand {
    asked: PerCpuHashMap<MapData, QuestionKey, u64>,
    /// Per question, in generation 0. Questions whose names share a hash
    /// share a count.
    counts: HashMap<QuestionKey, u64>,
}

impl Demand {
    pub(crate) fn new(asked: PerCpuHashMap<MapData, QuestionKey, u64>) -> Demand {
        Demand { asked, counts: HashMap::new() }
    }

    /// Halves the counts so far and adds what the program counted since
    /// the last gathering, clearing its map. A question counted between
    /// the read and the clearing is lost: counts are estimates.
    pub(crate) fn gather(&mut self) -> Result<(), MapError> {
        for count in self.counts.values_mut() {
            *count /= 2;
        }
        let mut read = Vec::new();
        for entry in self.asked.iter() {
            let (question, per_cpu) = entry?;
            *self.counts.entry(question).or_default() += per_cpu.iter().sum::<u64>();
            read.push(question);
        }
        for question in read {
            match self.asked.remove(&question) {
                // The LRU evicted it meanwhile.
                Err(MapError::SyscallError(SyscallError { io_error, .. })) if io_error.kind() == io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// The `capacity` most asked of `entries`, forgetting the counts of
    /// questions `entries` does not hold, so memory follows the snapshot.
    pub(crate) fn admit(&mut self, entries: Vec<(AnswerKey, Answer)>, capacity: usize) -> Admitted {
        let in_snapshot: HashSet<QuestionKey> = entries.iter().map(|(key, _)| key.in_generation(0)).collect();
        self.counts.retain(|question, count| *count > 0 && in_snapshot.contains(question));
        most_asked(entries, &self.counts, capacity)
    }
}

/// The `capacity` entries with the highest counts, ties in their order
/// in `entries`.
fn most_asked(mut entries: Vec<(AnswerKey, Answer)>, counts: &HashMap<QuestionKey, u64>, capacity: usize) -> Admitted {
    let count_of = |key: &AnswerKey| counts.get(&key.in_generation(0)).copied().unwrap_or(0);
    let left_out = entries.len().saturating_sub(capacity);
    if left_out == 0 {
        return Admitted { entries, left_out, threshold: 0 };
    }
    // Stable: equal counts keep their order.
    entries.sort_by_cached_key(|(key, _)| std::cmp::Reverse(count_of(key)));
    entries.truncate(capacity);
    let threshold = entries.last().map_or(0, |(key, _)| count_of(key));
    Admitted { entries, left_out, threshold }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: u8) -> (AnswerKey, Answer) {
        (AnswerKey::new(&[1, name, 0], 1, 1).unwrap(), Answer::new(0x0400, [1, 0, 0], &[name]).unwrap())
    }

    fn names(admitted: &Admitted) -> Vec<u8> {
        admitted.entries.iter().map(|(key, _)| key.name[1]).collect()
    }

    #[test]
    fn installs_the_most_asked_ties_in_fill_order() {
        let entries: Vec<_> = (b'a'..=b'f').map(entry).collect();
        let counted = |name, count| (entry(name).0.in_generation(0), count);
        let counts = HashMap::from([counted(b'e', 9), counted(b'c', 4), counted(b'd', 4), counted(b'b', 1)]);
        let admitted = most_asked(entries, &counts, 3);
        assert_eq!(names(&admitted), b"ecd");
        assert_eq!((admitted.left_out, admitted.threshold), (3, 4));
    }

    #[test]
    fn within_capacity_installs_everything_in_fill_order() {
        let entries: Vec<_> = (b'a'..=b'c').map(entry).collect();
        let admitted = most_asked(entries, &HashMap::from([(entry(b'c').0.in_generation(0), 5)]), 3);
        assert_eq!(names(&admitted), b"abc");
        assert_eq!((admitted.left_out, admitted.threshold), (0, 0));
    }

    #[test]
    fn the_asked_map_has_room_for_twice_the_capacity_within_bounds() {
        assert_eq!((asked_room(2), asked_room(4096), asked_room(1 << 20)), (1024, 8192, 65_536));
    }
}
