//! Outstanding-query table of one socket or connection, keyed by DNS ID.

use std::collections::VecDeque;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// Send time in ns since the run's epoch, plus one; 0 = free.
    sent: u64,
    /// Index of the query in the query list (to check the echoed question).
    qidx: u32,
}

/// Up to 65536 queries in flight, with a send-ordered queue for timeouts.
pub struct Inflight {
    slots: Box<[Slot]>,
    /// (id, sent) in send order; entries whose slot no longer carries the
    /// same `sent` were answered and are dropped lazily.
    order: VecDeque<(u16, u64)>,
    next_id: u16,
    count: usize,
}

impl Inflight {
    pub fn new() -> Inflight {
        Inflight { slots: vec![Slot::default(); 65536].into_boxed_slice(), order: VecDeque::with_capacity(4096), next_id: 0, count: 0 }
    }

    /// Number of queries in flight.
    #[inline]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Reserves a free ID for a query sent at `now_ns`, or None if all
    /// 65536 IDs are in flight. IDs are handed out round-robin so that an
    /// ID is reused as late as possible.
    #[inline]
    pub fn insert(&mut self, qidx: u32, now_ns: u64) -> Option<u16> {
        if self.count >= self.slots.len() {
            return None;
        }
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            let slot = &mut self.slots[id as usize];
            if slot.sent == 0 {
                slot.sent = now_ns + 1;
                slot.qidx = qidx;
                self.count += 1;
                self.order.push_back((id, now_ns + 1));
                return Some(id);
            }
        }
    }

    /// Forgets a query that was reserved but could not be sent.
    #[inline]
    pub fn cancel(&mut self, id: u16) {
        let slot = &mut self.slots[id as usize];
        if slot.sent != 0 {
            slot.sent = 0;
            self.count -= 1;
        }
    }

    /// The query index and send time (ns) of an in-flight ID.
    #[inline]
    pub fn get(&self, id: u16) -> Option<(u32, u64)> {
        let s = self.slots[id as usize];
        (s.sent != 0).then(|| (s.qidx, s.sent - 1))
    }

    /// Marks an in-flight ID as answered.
    #[inline]
    pub fn remove(&mut self, id: u16) {
        self.cancel(id);
    }

    /// Drops queries sent more than `timeout_ns` before `now_ns`; returns
    /// how many were dropped (lost).
    pub fn expire(&mut self, now_ns: u64, timeout_ns: u64) -> u64 {
        let mut lost = 0;
        while let Some(&(id, sent)) = self.order.front() {
            let slot = &mut self.slots[id as usize];
            if slot.sent != sent {
                self.order.pop_front(); // answered or cancelled
                continue;
            }
            if now_ns + 1 < sent + timeout_ns {
                break;
            }
            slot.sent = 0;
            self.count -= 1;
            lost += 1;
            self.order.pop_front();
        }
        lost
    }

    /// Drops everything in flight (connection lost, end of run); returns
    /// how many there were.
    pub fn clear(&mut self) -> u64 {
        let n = self.count as u64;
        for &(id, _) in &self.order {
            self.slots[id as usize].sent = 0;
        }
        self.order.clear();
        self.count = 0;
        n
    }

    /// Send time (ns) of the oldest query in flight.
    pub fn oldest(&mut self) -> Option<u64> {
        while let Some(&(id, sent)) = self.order.front() {
            if self.slots[id as usize].sent == sent {
                return Some(sent - 1);
            }
            self.order.pop_front();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_expire() {
        let mut t = Inflight::new();
        let a = t.insert(5, 100).unwrap();
        let b = t.insert(6, 200).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.get(a), Some((5, 100)));
        assert_eq!(t.len(), 2);
        t.remove(a);
        assert_eq!(t.get(a), None);
        assert_eq!(t.oldest(), Some(200));
        assert_eq!(t.expire(1000, 1000), 0);
        assert_eq!(t.expire(1200, 1000), 1);
        assert_eq!(t.len(), 0);
        let c = t.insert(7, 300).unwrap();
        t.cancel(c);
        assert_eq!(t.len(), 0);
        assert_eq!(t.expire(10_000, 1), 0);
    }

    #[test]
    fn ids_skip_in_flight_and_fill_up() {
        let mut t = Inflight::new();
        for i in 0..65536u32 {
            assert!(t.insert(i, 1).is_some());
        }
        assert!(t.insert(0, 1).is_none());
        t.remove(1234);
        assert_eq!(t.insert(9, 2), Some(1234));
        assert_eq!(t.clear(), 65536);
        assert_eq!(t.len(), 0);
    }
}
