//! What the service manager (systemd, through `$NOTIFY_SOCKET`) is told,
//! and only the truth: ready once every listener is bound and the first
//! snapshot is published; reloading, then ready again with the outcome as
//! the status; a watchdog heartbeat only while both the query path and the
//! control plane turn; stopping. Without `$NOTIFY_SOCKET` (not started by
//! systemd) nothing is sent.

use std::time::{Duration, Instant};

use pharos_transport::Heartbeats;
use sd_notify::NotifyState;

use crate::driver::thread::ControlThread;

/// Serving: every listener bound, the first snapshot published.
pub fn ready(status: &str) {
    tell(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload begins (ready follows, with the outcome).
pub fn reloading() {
    // The time lets systemd tell this reload's READY=1 from an earlier one.
    let now = NotifyState::monotonic_usec_now().ok();
    let states: Vec<NotifyState> = [NotifyState::Reloading, NotifyState::Status("reloading")].into_iter().chain(now).collect();
    tell(&states);
}

/// The drain begins: no new connections, in-flight queries answered.
pub fn stopping() {
    tell(&[NotifyState::Stopping, NotifyState::Status("stopping: answering what is in flight")]);
}

fn tell(states: &[NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::warn!("cannot tell the service manager ({states:?}): {error}");
    }
}

/// The watchdog period the service manager asks for (`WatchdogSec=`), if
/// any.
pub fn watchdog_period() -> Option<Duration> {
    sd_notify::watchdog_enabled()
}

/// Sends `WATCHDOG=1` twice per `period` for as long as the control thread
/// answers a ping within half a period and no UDP worker is stuck; once
/// either stops, so do the heartbeats, and the service manager restarts
/// the server. The status says why.
pub async fn watchdog(control: ControlThread, mut heartbeats: Heartbeats, period: Duration) {
    let half = period / 2;
    let mut ticks = tokio::time::interval(half);
    let mut was_stuck = false;
    loop {
        ticks.tick().await;
        let control_turns = tokio::time::timeout(half, control.ping()).await.is_ok_and(|pinged| pinged.is_ok());
        let stuck_workers = heartbeats.stuck(Instant::now());
        let stuck = match (control_turns, stuck_workers) {
            (true, 0) => None,
            (false, _) => Some("the control plane has not answered for half a watchdog period".to_string()),
            (true, workers) => Some(format!("{workers} UDP worker(s) have not turned for {:?}", pharos_transport::STUCK_AFTER)),
        };
        match &stuck {
            None => tell(&[NotifyState::Watchdog]),
            Some(why) if !was_stuck => {
                tracing::error!("watchdog heartbeats stop: {why}");
                tell(&[NotifyState::Status(&format!("stuck: {why}"))]);
            }
            Some(_) => {}
        }
        was_stuck = stuck.is_some();
    }
}
