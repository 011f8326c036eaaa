//! The forwarder's core: one client query, its tries across the upstreams'
//! connections, and the first answer from any of them. A try that goes
//! unanswered for its upstream's RTO stays in flight (TCP and QUIC deliver
//! it, or its connection fails) while a hedge goes to a connection that
//! does not have the query yet, if there is one; the client gets SERVFAIL
//! only when no try is left in flight, or at the deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::oneshot;

use crate::config::ForwardConfig;
use crate::error::ForwardError;
use crate::health::rest_after_silence;
use crate::message::{ClientQuery, set_id};
use crate::pool;
use crate::request::{Answered, Pending};
use crate::stats::Stats;
use crate::tries::{SlotId, Tries};
use crate::trust::Trust;
use crate::upstream::Upstream;

pub struct Forwarder {
    /// In order of preference.
    upstreams: Vec<Arc<Upstream>>,
    tries: u32,
    deadline: Duration,
    pool_size: usize,
    /// Spreads first tries over each pool's connections.
    rotation: AtomicUsize,
    stats: Arc<Stats>,
}

/// A try's answer, or the news that none will come: by try number.
type TryAnswer = (usize, Result<Answered, oneshot::error::RecvError>);
/// A try that waited its RTO, by number, and when it was sent (`None` if it
/// waited for its connection's handshake instead).
type TryTimeout = (usize, Option<Instant>);

/// One try of a query, as the query sees it.
struct Try {
    slot: SlotId,
    /// Known once its RTO has passed.
    sent_at: Option<Instant>,
    failed: bool,
}

/// The tries of one query in flight.
struct QueryTries<'a> {
    /// Where they went, and where the next may go.
    placement: Tries,
    made: Vec<Try>,
    answers: FuturesUnordered<BoxFuture<'a, TryAnswer>>,
    timeouts: FuturesUnordered<BoxFuture<'a, TryTimeout>>,
}

impl Forwarder {
    /// Starts the pools of every upstream in `config`. Connections are made
    /// at the first query.
    pub fn start(config: &ForwardConfig, stats: Arc<Stats>) -> Result<Forwarder, ForwardError> {
        let trust = Trust::load(config.ca.as_deref())?;
        let upstreams =
            config.upstreams.iter().map(|spec| pool::start(spec.clone(), config, &trust, stats.clone())).collect::<Result<_, _>>()?;
        Ok(Forwarder {
            upstreams,
            tries: config.tries,
            deadline: config.deadline,
            pool_size: config.connections,
            rotation: AtomicUsize::new(0),
            stats,
        })
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The answer to a client's query, under the client's ID: an
    /// upstream's, or SERVFAIL if none answered in time.
    pub async fn answer(&self, query: &ClientQuery) -> Vec<u8> {
        Stats::count(&self.stats.queries);
        match self.ask_upstreams(query).await {
            Some(mut answer) => {
                Stats::count(&self.stats.answered);
                set_id(&mut answer, query.id());
                answer
            }
            None => {
                Stats::count(&self.stats.servfail);
                query.servfail()
            }
        }
    }

    async fn ask_upstreams(&self, query: &ClientQuery) -> Option<Vec<u8>> {
        let started = Instant::now();
        let deadline = tokio::time::sleep_until((started + self.deadline).into());
        tokio::pin!(deadline);
        let mut tries = QueryTries::new(Tries::new(self.tries, self.rotation.fetch_add(1, Ordering::Relaxed)));
        let mut hedge = true;
        loop {
            if hedge {
                self.send_next_try(query, &mut tries);
            }
            if tries.answers.is_empty() {
                tracing::debug!(id = query.id(), tries = tries.placement.made(), elapsed = ?started.elapsed(), "no upstream left to try: SERVFAIL");
                return None;
            }
            tokio::select! {
                Some((number, answer)) = tries.answers.next() => match answer {
                    Ok(answered) => return Some(self.take_answer(query, &tries, number, answered, started)),
                    Err(_) => {
                        self.on_try_failed(query, &mut tries, number);
                        hedge = true;
                    }
                },
                Some((number, sent_at)) = tries.timeouts.next() => hedge = self.on_try_timeout(query, &mut tries, number, sent_at),
                () = &mut deadline => {
                    self.give_up(query, &tries, started);
                    return None;
                }
            }
        }
    }

    /// Sends the query on the next connection that does not have it, if the
    /// tries allow one and an upstream is available. A connection whose
    /// queue is full is passed over for this query.
    fn send_next_try<'a>(&'a self, query: &ClientQuery, tries: &mut QueryTries<'a>) {
        let available = self.available(Instant::now());
        while let Some(slot) = tries.placement.next(&available, self.pool_size) {
            let upstream = &self.upstreams[slot.upstream];
            if let Some(pending) = upstream.submit(slot.connection, query.message()) {
                if tries.placement.made() > 1 {
                    Stats::count(&self.stats.retransmissions);
                }
                tries.add(slot, upstream, pending);
                return;
            }
        }
    }

    fn take_answer(&self, query: &ClientQuery, tries: &QueryTries, number: usize, answered: Answered, started: Instant) -> Vec<u8> {
        let upstream = &self.upstreams[tries.made[number].slot.upstream].spec;
        let (rtt, tries, elapsed) = (answered.rtt, tries.placement.made(), started.elapsed());
        tracing::debug!(id = query.id(), %upstream, ?rtt, tries, ?elapsed, "answered");
        answered.message
    }

    /// Try `number`'s connection failed or could not be made: the slot's
    /// next connection may have the query.
    fn on_try_failed(&self, query: &ClientQuery, tries: &mut QueryTries, number: usize) {
        let attempt = &mut tries.made[number];
        attempt.failed = true;
        tries.placement.failed(attempt.slot);
        tracing::debug!(id = query.id(), upstream = %self.upstreams[attempt.slot.upstream].spec, "try failed");
    }

    /// Try `number` waited its RTO (or its handshake) unanswered: the
    /// upstream's timer backs off, its connection is dropped if it has gone
    /// silent, and a hedge goes out. Returns whether to hedge.
    fn on_try_timeout(&self, query: &ClientQuery, tries: &mut QueryTries, number: usize, sent_at: Option<Instant>) -> bool {
        let attempt = &mut tries.made[number];
        if attempt.failed {
            return false;
        }
        attempt.sent_at = sent_at;
        let upstream = &self.upstreams[attempt.slot.upstream];
        Stats::count(&self.stats.timeouts);
        tracing::debug!(id = query.id(), upstream = %upstream.spec, rto = ?upstream.rto(), sent = sent_at.is_some(), "no answer in time");
        if let Some(sent_at) = sent_at {
            let now = Instant::now();
            upstream.on_timeout(sent_at, now);
            self.judge_silence(attempt.slot, sent_at, now);
        }
        true
    }

    /// The deadline passed: the connections still owing this query's
    /// answer are judged once more.
    fn give_up(&self, query: &ClientQuery, tries: &QueryTries, started: Instant) {
        let now = Instant::now();
        for attempt in tries.made.iter().filter(|attempt| !attempt.failed) {
            if let Some(sent_at) = attempt.sent_at {
                self.judge_silence(attempt.slot, sent_at, now);
            }
        }
        tracing::debug!(id = query.id(), tries = tries.placement.made(), elapsed = ?started.elapsed(), "no answer by the deadline: SERVFAIL");
    }

    /// A try sent on `slot` at `sent_at` is still unanswered at `now`: if
    /// that shows its connection silent, the connection is dropped, and its
    /// upstream may rest.
    fn judge_silence(&self, slot: SlotId, sent_at: Instant, now: Instant) {
        let upstream = &self.upstreams[slot.upstream];
        if upstream.drop_if_silent(slot.connection, sent_at, now) && rest_after_silence(slot.upstream, &self.available(now)) {
            upstream.rest(now);
        }
    }

    /// Which upstreams are not resting at `now`, in order of preference.
    fn available(&self, now: Instant) -> Vec<bool> {
        self.upstreams.iter().map(|upstream| upstream.is_available(now)).collect()
    }
}

impl<'a> QueryTries<'a> {
    fn new(placement: Tries) -> QueryTries<'a> {
        QueryTries { placement, made: Vec::new(), answers: FuturesUnordered::new(), timeouts: FuturesUnordered::new() }
    }

    /// Follows a try just handed to `slot` of `upstream`: its answer, and
    /// its RTO from when it leaves, or before that the time a handshake may
    /// take.
    fn add(&mut self, slot: SlotId, upstream: &'a Upstream, pending: Pending) {
        let number = self.made.len();
        self.made.push(Try { slot, sent_at: None, failed: false });
        self.answers.push(pending.answer.map(move |answer| (number, answer)).boxed());
        let handshake_limit = Instant::now() + upstream.connect_timeout();
        let timeout = async move {
            match tokio::time::timeout_at(handshake_limit.into(), pending.sent).await {
                Ok(Ok(sent_at)) => {
                    tokio::time::sleep_until((sent_at + upstream.rto()).into()).await;
                    (number, Some(sent_at))
                }
                // Dropped unsent: the answer's side tells of the failure.
                Ok(Err(_)) => std::future::pending().await,
                Err(_) => (number, None),
            }
        };
        self.timeouts.push(timeout.boxed());
    }
}
