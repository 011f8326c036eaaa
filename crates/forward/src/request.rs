//! A query's try as a connection slot carries it: the message handed
//! over, and the way its answer (or its failure) gets back to the try.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Queries a slot may have waiting. A try finding the queue full goes
/// elsewhere at once.
pub const QUEUE: usize = 1024;
/// An answer, and how long after the query left it came.
#[derive(Debug)]
pub struct Answered {
    pub message: Vec<u8>,
    pub rtt: Duration,
}

/// One try of a query, handed to a slot: the message and the way back to
/// the try. A request dropped unanswered tells the try it failed.
pub struct Request {
    /// The client's message; the transport sets the ID it goes under.
    pub message: Vec<u8>,
    sent: Option<oneshot::Sender<Instant>>,
    sent_at: Option<Instant>,
    answer: oneshot::Sender<Answered>,
}

/// The try's side of a request.
pub struct Pending {
    /// When the query left: its retransmission timer starts then.
    pub sent: oneshot::Receiver<Instant>,
    pub answer: oneshot::Receiver<Answered>,
}

impl Request {
    pub fn new(message: Vec<u8>) -> (Request, Pending) {
        let (sent, sent_receiver) = oneshot::channel();
        let (answer, answer_receiver) = oneshot::channel();
        (Request { message, sent: Some(sent), sent_at: None, answer }, Pending { sent: sent_receiver, answer: answer_receiver })
    }

    /// The query is leaving on a connection now.
    pub fn mark_sent(&mut self) {
        let now = Instant::now();
        self.sent_at = Some(now);
        if let Some(sent) = self.sent.take() {
            let _ = sent.send(now);
        }
    }

    /// Hands `message` to the try (if it still waits), and returns the
    /// round trip it took.
    pub fn answer(self, message: Vec<u8>) -> Duration {
        let rtt = self.sent_at.map_or(Duration::ZERO, |sent_at| sent_at.elapsed());
        let _ = self.answer.send(Answered { message, rtt });
        rtt
    }

    /// True once no one waits for the answer: another try was answered
    /// first, or the query was given up.
    pub fn is_abandoned(&self) -> bool {
        self.answer.is_closed()
    }

    /// Runs `work` to its end, unless no one waits for the answer first.
    pub async fn unless_abandoned<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            output = work => Some(output),
            () = self.answer.closed() => None,
        }
    }
}
