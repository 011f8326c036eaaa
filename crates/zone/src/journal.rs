//! The differences between the last few versions of a zone, for IXFR
//! (RFC 1995), and the records and serials they are made of.
//!
//! A version's difference to the one before (records removed, records
//! added, the SOA before and after) goes into the zone's [`Journal`],
//! which keeps the last `capacity` of them in memory: a secondary whose
//! serial has left the journal, or that asks a node that restarted
//! since, gets the whole zone, as RFC 1995 section 4 allows. Which
//! versions there are is `crate::versions`' business.

use std::collections::VecDeque;
use std::sync::Arc;

use pharos_wire::name;

/// How many differences a zone's journal keeps unless configured.
pub const DEFAULT_JOURNAL_VERSIONS: usize = 64;

/// One record as a transfer carries it; ordered by owner, type and data,
/// so sorted lists of them can be compared as sets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Record {
    /// Lowercase wire form.
    pub owner: Box<[u8]>,
    pub rtype: u16,
    /// Uncompressed.
    pub rdata: Box<[u8]>,
    pub ttl: u32,
}

/// The change from one version of a zone to the next (or, condensed, over
/// several): the SOA data before and after, what went and what came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub from_soa: Box<[u8]>,
    pub to_soa: Box<[u8]>,
    /// Sorted.
    pub removed: Vec<Record>,
    /// Sorted.
    pub added: Vec<Record>,
}

/// The last differences of a zone, oldest first, the last one ending at
/// the version served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journal {
    capacity: usize,
    differences: VecDeque<Arc<Difference>>,
}

impl Journal {
    /// An empty journal that will keep `capacity` differences (0: none,
    /// every IXFR is answered with the whole zone).
    pub fn new(capacity: usize) -> Journal {
        Journal { capacity, differences: VecDeque::new() }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The differences kept, oldest first.
    pub fn differences(&self) -> impl ExactSizeIterator<Item = &Difference> {
        self.differences.iter().map(|difference| &**difference)
    }

    /// This journal with `difference` appended and the oldest dropped
    /// beyond `capacity` (the zone's, which a reload may have changed).
    pub(crate) fn recorded(&self, difference: Difference, capacity: usize) -> Journal {
        let mut differences = self.differences.clone();
        differences.push_back(Arc::new(difference));
        while differences.len() > capacity {
            differences.pop_front();
        }
        Journal { capacity, differences }
    }

    /// The one difference from the version with `serial` to the one
    /// served, condensed: a record removed and added back again is in
    /// neither list. `None` when no kept version has that serial.
    pub fn since(&self, serial: u32) -> Option<Difference> {
        let start = self.differences.iter().position(|difference| soa_serial(&difference.from_soa) == Some(serial))?;
        let mut removed = std::collections::BTreeSet::new();
        let mut added = std::collections::BTreeSet::new();
        for difference in self.differences.range(start..) {
            for record in &difference.removed {
                if !added.remove(record) {
                    removed.insert(record.clone());
                }
            }
            for record in &difference.added {
                if !removed.remove(record) {
                    added.insert(record.clone());
                }
            }
        }
        Some(Difference {
            from_soa: self.differences[start].from_soa.clone(),
            to_soa: self.differences.back().expect("start is an index").to_soa.clone(),
            removed: removed.into_iter().collect(),
            added: added.into_iter().collect(),
        })
    }
}

/// What is in `old` and not in `new`, and what is in `new` and not in
/// `old`; both sorted, as the results are.
pub(crate) fn changes(old: &[Record], new: &[Record]) -> (Vec<Record>, Vec<Record>) {
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut old, mut new) = (old.iter().peekable(), new.iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (Some(gone), Some(came)) if gone < came => removed.push(old.next().cloned().expect("peeked")),
            (Some(gone), Some(came)) if gone > came => added.push(new.next().cloned().expect("peeked")),
            (Some(_), Some(_)) => {
                old.next();
                new.next();
            }
            (Some(_), None) => removed.push(old.next().cloned().expect("peeked")),
            (None, Some(_)) => added.push(new.next().cloned().expect("peeked")),
            (None, None) => return (removed, added),
        }
    }
}

/// True when serial `a` is newer than `b` (RFC 1982 section 3.2; the
/// pair exactly 2^31 apart is undefined there, and not newer here).
pub fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Where the serial starts in uncompressed SOA data: past the two names.
fn serial_at(soa: &[u8]) -> Option<usize> {
    let at = name::skip(soa, name::skip(soa, 0).ok()?).ok()?;
    (soa.len() >= at + 4).then_some(at)
}

/// The serial of uncompressed SOA data.
pub fn soa_serial(soa: &[u8]) -> Option<u32> {
    let at = serial_at(soa)?;
    Some(u32::from_be_bytes(soa[at..at + 4].try_into().expect("four octets")))
}

/// Uncompressed SOA data with its serial replaced.
pub fn with_serial(soa: &[u8], serial: u32) -> Box<[u8]> {
    let at = serial_at(soa).expect("SOA data has a serial");
    let mut data = soa.to_vec();
    data[at..at + 4].copy_from_slice(&serial.to_be_bytes());
    data.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_compare_as_rfc_1982_says() {
        assert!(newer(2, 1) && !newer(1, 2) && !newer(7, 7));
        assert!(newer(0, u32::MAX), "wrapped around");
        assert!(newer(5, u32::MAX - 5) && !newer(u32::MAX - 5, 5));
        assert!(!newer(1 << 31, 0) && !newer(0, 1 << 31), "undefined: neither");
    }
}
