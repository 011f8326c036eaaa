//! What happened lately, for the dashboard: queries received per minute
//! over the last hour ([`QueryHistory`], `GET /v1/queries`), and the last
//! health transitions and control changes ([`EventLog`], `GET /v1/events`).
//! Both are small rings, bounded whatever the traffic or the churn.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use pharos_model::Change;
use serde::Serialize;

use crate::data::unix_millis;

/// Minutes of query counts kept: the dashboard's hour.
const MINUTES: usize = 60;
/// Events kept, newest last.
const EVENTS: usize = 100;

/// The queries received so far, counted at the start of each minute.
#[derive(Debug, Default)]
pub struct QueryHistory {
    /// (Unix second a minute started, queries received by then), oldest
    /// first; one more than [`MINUTES`], so each kept minute has an end.
    marks: Mutex<VecDeque<(u64, u64)>>,
}

/// Queries received in one minute (the last one still under way).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct MinuteCount {
    /// Unix second the minute started.
    pub start: u64,
    pub queries: u64,
}

impl QueryHistory {
    /// Notes that `received` queries had come in by `unix_second`.
    pub fn mark(&self, unix_second: u64, received: u64) {
        let mut marks = lock(&self.marks);
        if marks.len() > MINUTES {
            marks.pop_front();
        }
        marks.push_back((unix_second, received));
    }

    /// The queries of each minute marked, and of the one under way: those
    /// since the last mark, with `received` counted by now.
    pub fn per_minute(&self, received: u64) -> Vec<MinuteCount> {
        let marks = lock(&self.marks);
        let ends = marks.iter().skip(1).map(|&(_, count)| count).chain([received]);
        // A count below the one before means the counters were reset: none.
        marks.iter().zip(ends).map(|(&(start, before), after)| MinuteCount { start, queries: after.saturating_sub(before) }).collect()
    }

    /// A history whose first minute starts now, with `received` queries.
    pub fn starting_now(received: u64) -> QueryHistory {
        let history = QueryHistory::default();
        history.mark(unix_millis() / 1000, received);
        history
    }

    /// Marks the count at every whole minute of the wall clock, forever.
    pub async fn mark_every_minute(&self, received: impl Fn() -> u64) {
        loop {
            let now = unix_millis();
            let next_minute = (now / 60_000 + 1) * 60_000;
            tokio::time::sleep(Duration::from_millis(next_minute - now)).await;
            self.mark(next_minute / 1000, received());
        }
    }
}

/// One thing that happened to the routing state.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    /// Unix ms.
    pub at: u64,
    pub kind: EventKind,
    pub text: String,
}

/// What kind of thing happened (the dashboard styles each its way).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// A replica went up or down.
    Health,
    /// A data center, region or service was put or deleted, by the API,
    /// the file or the load-control loop, or a token made or revoked.
    Change,
    /// A change asked for through the control API (by `pharos ctl`, the
    /// dashboard or any client), naming the token that asked.
    Audit,
}

/// The last [`EVENTS`] events.
#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<VecDeque<Event>>,
}

impl EventLog {
    /// A replica of `service` went up or down at `at` (Unix ms), for `why`.
    pub fn health(&self, at: u64, service: &str, replica: &str, up: bool, why: &str) {
        let state = if up { "up" } else { "down" };
        self.push(Event { at, kind: EventKind::Health, text: format!("{service} replica {replica} {state}: {why}") });
    }

    /// `changes`, asked for by `authors` ("token ops", "UPDATE signed
    /// with key acme"; none: by the configuration, or logged before the
    /// change log kept who asked), were committed at `at` (Unix ms).
    pub fn changed(&self, at: u64, changes: &[Change], authors: &[String]) {
        let by = match authors {
            [] => String::new(),
            authors => format!(" by {}", authors.join(", ")),
        };
        for change in changes {
            let (table, name) = change.key();
            let kind = table.trim_end_matches('s');
            let verb = match change {
                Change::PutToken(token) if token.revoked => "revoked",
                Change::PutToken(_) => "made",
                Change::DeleteDataCenter(_) | Change::DeleteRegion(_) | Change::DeleteService(_) | Change::DeleteZone(_) => "deleted",
                Change::PutDataCenter(_) | Change::PutRegion(_) | Change::PutService(_) | Change::PutZone(_) => "put",
            };
            self.push(Event { at, kind: EventKind::Change, text: format!("{kind} {name} {verb}{by}") });
        }
    }

    /// The token `token` asked for `what` (a method and a path) at `at`
    /// (Unix ms), and was answered `status`.
    pub fn audit(&self, at: u64, token: &str, what: &str, status: u16) {
        self.push(Event { at, kind: EventKind::Audit, text: format!("token {token}: {what} -> {status}") });
    }

    /// Every event kept, oldest first.
    pub fn recent(&self) -> Vec<Event> {
        lock(&self.events).iter().cloned().collect()
    }

    fn push(&self, event: Event) {
        let mut events = lock(&self.events);
        if events.len() == EVENTS {
            events.pop_front();
        }
        events.push_back(event);
    }
}

/// A ring stays usable after a panic elsewhere: each push is whole.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_minute_counts_the_queries_between_its_mark_and_the_next() {
        let history = QueryHistory::default();
        history.mark(60, 10);
        history.mark(120, 25);
        let counts: Vec<(u64, u64)> = history.per_minute(31).iter().map(|minute| (minute.start, minute.queries)).collect();
        assert_eq!(counts, [(60, 15), (120, 6)]);
        assert_eq!(QueryHistory::default().per_minute(5), [], "nothing marked yet");
    }

    #[test]
    fn an_hour_is_kept_and_no_more() {
        let history = QueryHistory::default();
        for minute in 0..(2 * MINUTES as u64) {
            history.mark(minute * 60, minute * 100);
        }
        let counts = history.per_minute(2 * MINUTES as u64 * 100);
        assert_eq!(counts.len(), MINUTES + 1, "an hour and the minute under way");
        assert_eq!(counts[0].start, (MINUTES as u64 - 1) * 60);
        assert!(counts.iter().all(|minute| minute.queries == 100));
    }

    #[test]
    fn a_change_names_who_asked_for_it() {
        let log = EventLog::default();
        log.changed(1, &[Change::DeleteRegion("europe".into())], &["token ci".into()]);
        log.changed(2, &[Change::DeleteService("svc".into())], &["token ci".into(), "UPDATE signed with key acme".into()]);
        let texts: Vec<String> = log.recent().into_iter().map(|event| event.text).collect();
        assert_eq!(texts, ["region europe deleted by token ci", "service svc deleted by token ci, UPDATE signed with key acme"]);
    }

    #[test]
    fn events_name_what_changed_and_the_oldest_go_first() {
        let log = EventLog::default();
        log.changed(1, &[Change::DeleteRegion("europe".into())], &[]);
        log.health(2, "app.example.test", "fra", false, "connection refused");
        let texts: Vec<(u64, EventKind, String)> = log.recent().into_iter().map(|event| (event.at, event.kind, event.text)).collect();
        assert_eq!(
            texts,
            [
                (1, EventKind::Change, "region europe deleted".into()),
                (2, EventKind::Health, "app.example.test replica fra down: connection refused".into())
            ]
        );
        for at in 0..EVENTS as u64 {
            log.changed(at + 10, &[Change::DeleteService("svc".into())], &[]);
        }
        let recent = log.recent();
        assert_eq!(recent.len(), EVENTS);
        assert_eq!(recent[0].at, 10, "the first two were pushed out");
    }
}
