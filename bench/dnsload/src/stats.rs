//! Counters, response classification and the latency histogram.

use hdrhistogram::Histogram;

use crate::inflight::Inflight;
use dnsload::query::Query;

pub const RCODE_NAMES: [&str; 6] = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "REFUSED", "other"];

pub struct Stats {
    pub sent: u64,
    pub answered: u64,
    pub lost: u64,
    pub unexpected: u64,
    pub truncated: u64,
    /// NOERROR, FORMERR, SERVFAIL, NXDOMAIN, REFUSED, other.
    pub rcodes: [u64; 6],
    pub send_errors: u64,
    pub recv_errors: u64,
    /// TCP connections that failed or were closed by the server mid-run.
    pub conn_failures: u64,
    /// Receive time (ns since epoch) of the last matched answer.
    pub last_answer_ns: u64,
    /// Latency in nanoseconds.
    pub hist: Histogram<u64>,
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            sent: 0,
            answered: 0,
            lost: 0,
            unexpected: 0,
            truncated: 0,
            rcodes: [0; 6],
            send_errors: 0,
            recv_errors: 0,
            conn_failures: 0,
            last_answer_ns: 0,
            // 1 ns .. 1 hour, 3 significant digits.
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("histogram bounds"),
        }
    }

    /// Matches one response against the in-flight table and counts it.
    #[inline]
    pub fn on_response(&mut self, msg: &[u8], inflight: &mut Inflight, queries: &[Query], now_ns: u64) {
        if msg.len() < 12 || msg[2] & 0x80 == 0 {
            self.unexpected += 1; // runt or not a response
            return;
        }
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        let Some((qidx, sent)) = inflight.get(id) else {
            self.unexpected += 1;
            return;
        };
        // A late answer to an earlier use of this ID carries another
        // question; responses without a question (e.g. FORMERR) are
        // matched on the ID alone.
        let qdcount = u16::from_be_bytes([msg[4], msg[5]]);
        if qdcount != 0 {
            let q = queries[qidx as usize].question();
            if msg.get(12..12 + q.len()) != Some(q) {
                self.unexpected += 1;
                return;
            }
        }
        inflight.remove(id);
        self.answered += 1;
        if msg[2] & 0x02 != 0 {
            self.truncated += 1;
        }
        let rcode = match msg[3] & 0x0f {
            0 => 0,
            1 => 1,
            2 => 2,
            3 => 3,
            5 => 4,
            _ => 5,
        };
        self.rcodes[rcode] += 1;
        self.hist.saturating_record(now_ns.saturating_sub(sent).max(1));
        self.last_answer_ns = self.last_answer_ns.max(now_ns);
    }

    pub fn merge(&mut self, o: &Stats) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.lost += o.lost;
        self.unexpected += o.unexpected;
        self.truncated += o.truncated;
        for (a, b) in self.rcodes.iter_mut().zip(o.rcodes) {
            *a += b;
        }
        self.send_errors += o.send_errors;
        self.recv_errors += o.recv_errors;
        self.conn_failures += o.conn_failures;
        self.last_answer_ns = self.last_answer_ns.max(o.last_answer_ns);
        self.hist.add(&o.hist).expect("histograms have the same bounds");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(q: &Query, id: u16, flags: [u8; 2]) -> Vec<u8> {
        let mut r = q.wire.clone();
        r[0..2].copy_from_slice(&id.to_be_bytes());
        r[2] = 0x80 | flags[0];
        r[3] = flags[1];
        r
    }

    #[test]
    fn classifies_responses() {
        let qs = vec![Query::new("a.test", 1).unwrap(), Query::new("b.test", 1).unwrap()];
        let mut t = Inflight::new();
        let mut s = Stats::new();
        let id0 = t.insert(0, 1000).unwrap();
        let id1 = t.insert(1, 1000).unwrap();
        let id2 = t.insert(1, 1000).unwrap();
        // Wrong question for id0: unexpected, still outstanding.
        s.on_response(&response(&qs[1], id0, [0, 0]), &mut t, &qs, 5000);
        assert_eq!((s.answered, s.unexpected, t.len()), (0, 1, 3));
        s.on_response(&response(&qs[0], id0, [0, 3]), &mut t, &qs, 5000);
        s.on_response(&response(&qs[1], id1, [0x02, 5]), &mut t, &qs, 7000);
        // Duplicate answer: unexpected.
        s.on_response(&response(&qs[1], id1, [0, 0]), &mut t, &qs, 7000);
        // Not a response (QR clear).
        let mut r = response(&qs[1], id2, [0, 0]);
        r[2] = 0;
        s.on_response(&r, &mut t, &qs, 7000);
        // No question section: matched by ID.
        let mut r = response(&qs[1], id2, [0, 1]);
        r[4..6].copy_from_slice(&[0, 0]);
        s.on_response(&r[..12], &mut t, &qs, 9000);
        assert_eq!(s.answered, 3);
        assert_eq!(s.unexpected, 3);
        assert_eq!(s.truncated, 1);
        assert_eq!(s.rcodes, [0, 1, 0, 1, 1, 0]);
        assert_eq!(t.len(), 0);
        assert_eq!(s.hist.max(), s.hist.highest_equivalent(8000));
        assert_eq!(s.last_answer_ns, 9000);
    }
}
