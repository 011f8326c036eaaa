//! The forwarder's core: one client query, its tries across the upstreams'
//! connections, each retransmitted when its upstream's RTO passes without
//! an answer, and the first answer from any try.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use futures_util::future::FusedFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::oneshot;

use crate::config::ForwardConfig;
use crate::message::{ClientQuery, set_id};
use crate::slot::Answered;
use crate::stats::Stats;
use crate::tries::{SlotId, Tries};
use crate::trust::Trust;
use crate::upstream::Upstream;

pub struct Forwarder {
    /// In order of preference.
    upstreams: Vec<Arc<Upstream>>,
    tries: u32,
    pool_size: usize,
    /// Spreads first tries over each pool's connections.
    rotation: AtomicUsize,
    stats: Arc<Stats>,
}

/// How one try ended.
enum TryEnd {
    /// This try or an earlier one was answered, by the upstream at `upstream`.
    Answered { answered: Answered, upstream: usize },
    /// Its connection failed or could not be made.
    Failed,
    /// No answer within its time; `sent_at` is `None` if it never left.
    TimedOut { sent_at: Option<Instant> },
}

/// What a try's answer future yields: the try's number, its upstream, and
/// the answer or the news that none will come.
type TryAnswer = (u32, usize, Result<Answered, oneshot::error::RecvError>);

impl Forwarder {
    /// Starts the pools of every upstream in `config`. Connections are made
    /// at the first query.
    pub fn start(config: &ForwardConfig, stats: Arc<Stats>) -> anyhow::Result<Forwarder> {
        let trust = Trust::load(config.ca.as_deref())?;
        let upstreams =
            config.upstreams.iter().map(|spec| Upstream::start(spec.clone(), config, &trust, stats.clone())).collect::<Result<_, _>>()?;
        Ok(Forwarder { upstreams, tries: config.tries, pool_size: config.connections, rotation: AtomicUsize::new(0), stats })
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The answer to a client's query, under the client's ID: an
    /// upstream's, or SERVFAIL if none answered within the tries.
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
        let mut tries = Tries::new(self.tries, self.rotation.fetch_add(1, Ordering::Relaxed));
        // The answers of every try so far: a late one is as good as any.
        let mut answers = FuturesUnordered::new();
        loop {
            let Some(slot) = self.next_try(&mut tries) else {
                tracing::debug!(id = query.id(), tries = tries.made(), elapsed = ?started.elapsed(), "no answer: SERVFAIL");
                return None;
            };
            let upstream = &self.upstreams[slot.upstream];
            // A slot with a full queue fails the try at once.
            let Some(pending) = upstream.submit(slot.connection, query.message()) else { continue };
            let number = tries.made();
            answers.push(pending.answer.map(move |answer| (number, slot.upstream, answer)));
            match wait_for_try(upstream, number, pending.sent, &mut answers).await {
                TryEnd::Answered { answered, upstream } => {
                    let upstream = &self.upstreams[upstream].spec;
                    let (rtt, tries, elapsed) = (answered.rtt, tries.made(), started.elapsed());
                    tracing::debug!(id = query.id(), %upstream, ?rtt, tries, ?elapsed, "answered");
                    return Some(answered.message);
                }
                TryEnd::Failed => tracing::debug!(id = query.id(), upstream = %upstream.spec, "try failed"),
                TryEnd::TimedOut { sent_at } => {
                    Stats::count(&self.stats.timeouts);
                    tracing::debug!(id = query.id(), upstream = %upstream.spec, rto = ?upstream.rto(), sent = sent_at.is_some(), "no answer in time");
                    if let Some(sent_at) = sent_at {
                        upstream.on_timeout(sent_at, Instant::now());
                    }
                }
            }
        }
    }

    /// Where the next try goes, among the upstreams available now.
    fn next_try(&self, tries: &mut Tries) -> Option<SlotId> {
        let now = Instant::now();
        let available: Vec<bool> = self.upstreams.iter().map(|upstream| upstream.is_available(now)).collect();
        let slot = tries.next(&available, self.pool_size)?;
        if tries.made() > 1 {
            Stats::count(&self.stats.retransmissions);
        }
        Some(slot)
    }
}

/// Waits until try `number` on `upstream` is answered, fails, or runs out
/// of time: the upstream's RTO from when it was sent, and before that the
/// time a handshake may take. An earlier try's answer is taken meanwhile.
async fn wait_for_try<F>(upstream: &Upstream, number: u32, sent: oneshot::Receiver<Instant>, answers: &mut FuturesUnordered<F>) -> TryEnd
where
    F: Future<Output = TryAnswer>,
{
    let mut sent = sent.fuse();
    let mut sent_at = None;
    let mut deadline = Instant::now() + upstream.connect_timeout();
    loop {
        tokio::select! {
            Some((try_number, upstream, answer)) = answers.next() => match answer {
                Ok(answered) => return TryEnd::Answered { answered, upstream },
                Err(_) if try_number == number => return TryEnd::Failed,
                // An earlier try failed; this one still has time.
                Err(_) => {}
            },
            at = &mut sent, if !sent.is_terminated() => if let Ok(at) = at {
                sent_at = Some(at);
                deadline = at + upstream.rto();
            },
            () = tokio::time::sleep_until(deadline.into()) => return TryEnd::TimedOut { sent_at },
        }
    }
}
