//! Counters and latency histograms shared by the tasks of one command.
//! The runtime is single-threaded, so the mutexes are never contended.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};

/// Distinct error messages kept per command; the rest are counted as "other".
const MAX_ERROR_KINDS: usize = 16;

pub fn histogram() -> Histogram<u64> {
    // 1 µs .. 10 min, 3 significant digits.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

/// p50 / p90 / p99 / p99.9 / max / mean of a histogram of microseconds.
pub fn summary(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!(null);
    }
    json!({
        "n": h.len(),
        "p50_us": h.value_at_quantile(0.50),
        "p90_us": h.value_at_quantile(0.90),
        "p99_us": h.value_at_quantile(0.99),
        "p999_us": h.value_at_quantile(0.999),
        "max_us": h.max(),
        "mean_us": (h.mean() * 10.0).round() / 10.0,
    })
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 600_000_000)
}

/// Error messages, counted by kind.
#[derive(Default)]
pub struct Errors {
    kinds: BTreeMap<String, u64>,
    total: u64,
}

impl Errors {
    pub fn add(&mut self, error: &anyhow::Error) {
        self.total += 1;
        let mut text = format!("{error:#}");
        text.truncate(120);
        if self.kinds.len() < MAX_ERROR_KINDS || self.kinds.contains_key(&text) {
            *self.kinds.entry(text).or_default() += 1;
        } else {
            *self.kinds.entry("other".into()).or_default() += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn json(&self) -> Value {
        json!(self.kinds)
    }
}

/// Answers of a query run: latency, rcodes, and how many arrived before
/// the end of the measuring window.
pub struct Answers {
    inner: Mutex<AnswersInner>,
    window_end: Option<Instant>,
}

struct AnswersInner {
    latency: Histogram<u64>,
    answered: u64,
    in_window: u64,
    rcodes: [u64; 16],
    errors: Errors,
}

impl Answers {
    pub fn new(window_end: Option<Instant>) -> Answers {
        Answers {
            inner: Mutex::new(AnswersInner { latency: histogram(), answered: 0, in_window: 0, rcodes: [0; 16], errors: Errors::default() }),
            window_end,
        }
    }

    pub fn answer(&self, latency: Duration, rcode: u8) {
        let in_window = self.window_end.is_none_or(|end| Instant::now() <= end);
        let mut inner = self.inner.lock().expect("stats lock");
        inner.latency.saturating_record(micros(latency));
        inner.answered += 1;
        inner.in_window += u64::from(in_window);
        inner.rcodes[usize::from(rcode & 0x0f)] += 1;
    }

    pub fn error(&self, error: &anyhow::Error) {
        self.inner.lock().expect("stats lock").errors.add(error);
    }

    pub fn json(&self) -> Value {
        let inner = self.inner.lock().expect("stats lock");
        const NAMES: [&str; 16] = [
            "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE",
            "RCODE11", "RCODE12", "RCODE13", "RCODE14", "RCODE15",
        ];
        let rcodes: BTreeMap<&str, u64> =
            NAMES.iter().zip(inner.rcodes).filter(|&(_, count)| count > 0).map(|(&name, count)| (name, count)).collect();
        json!({
            "answered": inner.answered,
            "answered_in_window": inner.in_window,
            "latency": summary(&inner.latency),
            "rcodes": rcodes,
            "errors": inner.errors.total(),
            "error_kinds": inner.errors.json(),
        })
    }
}

/// Results of a loop of connections: how long the handshakes took, how
/// many resumed a session.
pub struct Handshakes {
    inner: Mutex<HandshakesInner>,
}

struct HandshakesInner {
    handshake: Histogram<u64>,
    total: Histogram<u64>,
    done: u64,
    resumed: u64,
    errors: Errors,
}

impl Handshakes {
    pub fn new() -> Handshakes {
        Handshakes {
            inner: Mutex::new(HandshakesInner {
                handshake: histogram(),
                total: histogram(),
                done: 0,
                resumed: 0,
                errors: Errors::default(),
            }),
        }
    }

    /// One connection: `handshake` from connect to TLS established,
    /// `total` to the end of its work (an answer, or the HTTP/2 setup).
    pub fn done(&self, handshake: Duration, total: Duration, resumed: bool) {
        let mut inner = self.inner.lock().expect("stats lock");
        inner.handshake.saturating_record(micros(handshake));
        inner.total.saturating_record(micros(total));
        inner.done += 1;
        inner.resumed += u64::from(resumed);
    }

    pub fn error(&self, error: &anyhow::Error) {
        self.inner.lock().expect("stats lock").errors.add(error);
    }

    pub fn json(&self) -> Value {
        let inner = self.inner.lock().expect("stats lock");
        json!({
            "done": inner.done,
            "resumed": inner.resumed,
            "failed": inner.errors.total(),
            "error_kinds": inner.errors.json(),
            "handshake": summary(&inner.handshake),
            "total": summary(&inner.total),
        })
    }
}
