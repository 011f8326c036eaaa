//! When a secondary zone looks at its primaries again (RFC 1034 section
//! 4.3.5, RFC 1996), as a state machine: the time comes in (Unix ms),
//! the next [`Action`] and the next wakeup come out.
//!
//! A check asks the first primary for the zone's SOA; a newer serial (RFC
//! 1982 arithmetic) is fetched from it by IXFR (AXFR when there is no
//! copy yet, or when the IXFR failed), an equal one means the copy is
//! current. A primary that fails is followed by the next; when all have
//! failed, the check is made again after the SOA's retry time, else
//! after its refresh time (each clamped to the zone's bounds). A NOTIFY
//! asks for a check now (after the one under way, if any). A copy no
//! primary confirmed for the SOA's expire time is expired: the server
//! answers SERVFAIL for the zone until a transfer succeeds.

use pharos_zone::journal::newer;

/// The SOA's timers (seconds), from its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoaTimers {
    pub serial: u32,
    pub refresh: u32,
    pub retry: u32,
    pub expire: u32,
}

impl SoaTimers {
    /// The timers of uncompressed SOA data; `None` if it is not one.
    pub fn of(soa: &[u8]) -> Option<SoaTimers> {
        let mut at = pharos_wire::name::skip(soa, 0).ok()?;
        at = pharos_wire::name::skip(soa, at).ok()?;
        let field = |index: usize| Some(u32::from_be_bytes(soa.get(at + 4 * index..at + 4 * index + 4)?.try_into().ok()?));
        Some(SoaTimers { serial: field(0)?, refresh: field(1)?, retry: field(2)?, expire: field(3)? })
    }
}

/// The bounds the SOA's refresh and retry times are held to (seconds):
/// a primary cannot make its secondaries poll it every second, nor wait
/// for a week.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clamps {
    pub min: u32,
    pub max: u32,
}

impl Default for Clamps {
    /// Knot DNS's defaults (`refresh-min-interval`, `refresh-max-interval`).
    fn default() -> Clamps {
        Clamps { min: 2, max: 86_400 }
    }
}

impl Clamps {
    fn ms(self, seconds: u32) -> u64 {
        u64::from(seconds.clamp(self.min, self.max.max(self.min))) * 1000
    }
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Ask the primary at this index of the list for the zone's SOA.
    QuerySoa { primary: usize },
    /// Fetch the zone from the primary: the difference (IXFR) or whole.
    Transfer { primary: usize, incremental: bool },
    /// The copy has expired: stop serving it.
    Expire,
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting until the time given.
    Waiting { until: u64 },
    /// The action given is under way.
    Busy(Action),
}

/// One zone's refresh timers.
#[derive(Debug, Clone)]
pub struct Refresh {
    primaries: usize,
    clamps: Clamps,
    /// The copy's SOA timers, if there is a copy.
    timers: Option<SoaTimers>,
    phase: Phase,
    /// When the copy expires (Unix ms), if it has not yet.
    expires_at: Option<u64>,
    expired: bool,
    /// A NOTIFY came while busy: check again once done.
    notified: bool,
    /// When the copy was last confirmed or fetched (Unix ms).
    pub last_refresh: Option<u64>,
    pub last_error: Option<String>,
}

impl Refresh {
    /// The timers of a zone with `primaries` (at least one), whose copy
    /// (if any) has `timers` and was last confirmed at `refreshed` (Unix
    /// ms): the first check is made at once.
    pub fn new(primaries: usize, clamps: Clamps, copy: Option<(SoaTimers, u64)>, now: u64) -> Refresh {
        assert!(primaries > 0, "a secondary zone has a primary");
        let expires_at = copy.map(|(timers, refreshed)| refreshed + u64::from(timers.expire) * 1000);
        Refresh {
            primaries,
            clamps,
            timers: copy.map(|(timers, _)| timers),
            phase: Phase::Waiting { until: now },
            expires_at,
            expired: copy.is_none(),
            notified: false,
            last_refresh: copy.map(|(_, refreshed)| refreshed),
            last_error: None,
        }
    }

    /// The serial of the copy, if there is one.
    pub fn serial(&self) -> Option<u32> {
        self.timers.map(|timers| timers.serial)
    }

    /// True when there is no copy to serve, or it expired.
    pub fn expired(&self) -> bool {
        self.expired
    }

    /// What is due at `now`, if anything: the machine is then busy with
    /// it until its outcome is told. An expiry is told once.
    pub fn poll(&mut self, now: u64) -> Option<Action> {
        if let Some(at) = self.expires_at.filter(|&at| now >= at) {
            debug_assert!(at <= now);
            self.expires_at = None;
            self.expired = true;
            return Some(Action::Expire);
        }
        match self.phase {
            Phase::Waiting { until } if now >= until => {
                let action = Action::QuerySoa { primary: 0 };
                self.phase = Phase::Busy(action);
                Some(action)
            }
            _ => None,
        }
    }

    /// When something is next due (Unix ms); `None` while busy.
    pub fn next_wakeup(&self) -> Option<u64> {
        let Phase::Waiting { until } = self.phase else { return None };
        Some(self.expires_at.map_or(until, |at| at.min(until)))
    }

    /// A NOTIFY for the zone: check now, or as soon as the check under way
    /// is done.
    pub fn notified(&mut self, now: u64) {
        match self.phase {
            Phase::Waiting { .. } => self.phase = Phase::Waiting { until: now },
            Phase::Busy(_) => self.notified = true,
        }
    }

    /// The SOA query gave the primary's `serial`: fetch the zone if it is
    /// newer than the copy's or the copy expired; else the copy is
    /// confirmed.
    pub fn soa_answered(&mut self, serial: u32, now: u64) -> Option<Action> {
        let Phase::Busy(Action::QuerySoa { primary }) = self.phase else { return None };
        match self.timers {
            // An expired copy is fetched whole again, as Knot DNS does.
            Some(timers) if !newer(serial, timers.serial) && !self.expired => {
                self.confirmed(timers, now);
                None
            }
            copy => {
                let action = Action::Transfer { primary, incremental: copy.is_some() && !self.expired };
                self.phase = Phase::Busy(action);
                Some(action)
            }
        }
    }

    /// The transfer under way gave a copy with `timers` (or found the
    /// copy current).
    pub fn transferred(&mut self, timers: SoaTimers, now: u64) {
        self.confirmed(timers, now);
    }

    /// The action under way failed with `error`: an IXFR is tried again
    /// as AXFR from the same primary, anything else moves on to the next
    /// primary, and after the last the check waits for the retry time.
    pub fn failed(&mut self, error: String, now: u64) -> Option<Action> {
        self.last_error = Some(error);
        let next = match self.phase {
            Phase::Busy(Action::Transfer { primary, incremental: true }) => Some(Action::Transfer { primary, incremental: false }),
            Phase::Busy(Action::QuerySoa { primary } | Action::Transfer { primary, .. }) if primary + 1 < self.primaries => {
                Some(Action::QuerySoa { primary: primary + 1 })
            }
            _ => None,
        };
        match next {
            Some(action) => self.phase = Phase::Busy(action),
            None => self.wait(self.timers.map_or(self.clamps.min, |timers| timers.retry), now),
        }
        next
    }

    fn confirmed(&mut self, timers: SoaTimers, now: u64) {
        self.timers = Some(timers);
        self.expired = false;
        self.expires_at = Some(now + u64::from(timers.expire) * 1000);
        self.last_refresh = Some(now);
        self.last_error = None;
        self.wait(timers.refresh, now);
    }

    fn wait(&mut self, seconds: u32, now: u64) {
        let until = if std::mem::take(&mut self.notified) { now } else { now + self.clamps.ms(seconds) };
        self.phase = Phase::Waiting { until };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMERS: SoaTimers = SoaTimers { serial: 10, refresh: 60, retry: 20, expire: 300 };
    const START: u64 = 1_800_000_000_000;

    #[test]
    fn a_copy_is_checked_at_start_then_after_refresh_and_fetched_when_newer() {
        let mut refresh = Refresh::new(1, Clamps::default(), Some((TIMERS, START - 1000)), START);
        assert!(!refresh.expired());
        assert_eq!(refresh.poll(START), Some(Action::QuerySoa { primary: 0 }));
        assert_eq!(refresh.next_wakeup(), None, "busy");
        assert_eq!(refresh.soa_answered(10, START + 5), None, "the same serial: current");
        assert_eq!(refresh.next_wakeup(), Some(START + 5 + 60_000));
        assert_eq!(refresh.poll(START + 60_000), None, "not yet");
        assert_eq!(refresh.poll(START + 60_005), Some(Action::QuerySoa { primary: 0 }));
        let newer = refresh.soa_answered(11, START + 60_010);
        assert_eq!(newer, Some(Action::Transfer { primary: 0, incremental: true }));
        refresh.transferred(SoaTimers { serial: 11, ..TIMERS }, START + 60_020);
        assert_eq!((refresh.serial(), refresh.last_refresh), (Some(11), Some(START + 60_020)));
        refresh.notified(START + 60_030);
        assert_eq!(refresh.poll(START + 60_030), Some(Action::QuerySoa { primary: 0 }), "a NOTIFY: at once");
        assert_eq!(refresh.soa_answered(u32::MAX, START + 60_040), None, "older by RFC 1982: no transfer");
    }

    #[test]
    fn failures_move_to_axfr_then_to_the_next_primary_then_wait_for_retry() {
        let mut refresh = Refresh::new(2, Clamps::default(), Some((TIMERS, START)), START);
        refresh.poll(START);
        assert_eq!(refresh.soa_answered(11, START), Some(Action::Transfer { primary: 0, incremental: true }));
        refresh.notified(START);
        assert_eq!(refresh.failed("corrupt".into(), START), Some(Action::Transfer { primary: 0, incremental: false }));
        assert_eq!(refresh.failed("corrupt".into(), START), Some(Action::QuerySoa { primary: 1 }));
        assert_eq!(refresh.failed("timed out".into(), START), None);
        assert_eq!(refresh.last_error.as_deref(), Some("timed out"));
        assert_eq!(refresh.next_wakeup(), Some(START), "the NOTIFY that came while busy: again at once");
        refresh.poll(START);
        refresh.failed("timed out".into(), START);
        refresh.failed("timed out".into(), START);
        assert_eq!(refresh.next_wakeup(), Some(START + 20_000), "retry");
    }

    #[test]
    fn a_copy_nobody_confirms_expires_and_a_transfer_revives_it() {
        let mut refresh = Refresh::new(1, Clamps { min: 1, max: 30 }, Some((TIMERS, START)), START);
        let mut now = START;
        let mut expired_at = None;
        for _ in 0..100 {
            match refresh.poll(now) {
                Some(Action::QuerySoa { .. }) => assert_eq!(refresh.failed("down".into(), now), None),
                Some(Action::Expire) => expired_at = Some(now),
                other => assert_eq!(other, None),
            }
            if expired_at.is_some() {
                break;
            }
            now = refresh.next_wakeup().unwrap();
        }
        assert_eq!(expired_at, Some(START + 300_000), "the SOA's expire after the last refresh");
        assert!(refresh.expired());
        assert_eq!(refresh.poll(now), Some(Action::QuerySoa { primary: 0 }), "expired once, checks go on");
        assert_eq!(refresh.soa_answered(10, now), Some(Action::Transfer { primary: 0, incremental: false }), "fetched whole");
        refresh.transferred(TIMERS, now);
        assert!(!refresh.expired());
    }

    #[test]
    fn without_a_copy_the_zone_is_expired_until_fetched_and_timers_are_clamped() {
        let mut refresh = Refresh::new(1, Clamps { min: 30, max: 40 }, None, START);
        assert!(refresh.expired());
        refresh.poll(START);
        assert_eq!(refresh.soa_answered(1, START), Some(Action::Transfer { primary: 0, incremental: false }));
        refresh.transferred(SoaTimers { refresh: 5, ..TIMERS }, START);
        assert_eq!(refresh.next_wakeup(), Some(START + 30_000), "refresh 5 raised to the minimum 30");
        refresh.poll(START + 30_000);
        refresh.soa_answered(TIMERS.serial, START + 30_000);
        assert_eq!(refresh.next_wakeup(), Some(START + 30_000 + 30_000));
        refresh.transferred(SoaTimers { refresh: 100_000, ..TIMERS }, START);
        assert_eq!(refresh.next_wakeup(), Some(START + 40_000), "lowered to the maximum 40");
    }

    #[test]
    fn the_soa_timers_are_read_from_its_data() {
        let mut soa = b"\x02ns\x04test\x00\x0ahostmaster\x04test\x00".to_vec();
        for field in [7u32, 3600, 600, 86400, 300] {
            soa.extend(field.to_be_bytes());
        }
        assert_eq!(SoaTimers::of(&soa), Some(SoaTimers { serial: 7, refresh: 3600, retry: 600, expire: 86400 }));
        assert_eq!(SoaTimers::of(&soa[..20]), None);
    }
}
