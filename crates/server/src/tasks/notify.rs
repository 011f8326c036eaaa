//! NOTIFY out (RFC 1996): a task of its own, off the query path, that
//! tells each zone's configured secondaries (`notify = ["addr:port"]`)
//! whenever the serial the zone serves moves, and once at start. Each
//! secondary is sent the NOTIFY (`pharos_answer::notify_message`, signed
//! with the zone's first transfer key if it lists any) over UDP, again
//! after 1, 2, 4 and 8 seconds until its reply comes, and given up after
//! the fifth try; each outcome is logged and counted (`pharos_notifies`,
//! by zone and outcome). A newer serial replaces a NOTIFY
//! still being retried for the same secondary.
//!
//! The control thread hands the task a [`Plan`] after each publication
//! that froze the zones again (every serial change does) or reloaded the
//! config.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pharos_answer::{Snapshot, TsigKey, notify_message, notify_reply};
use pharos_model::zone::ZoneSpec;
use pharos_wire::name;
use pharos_zone::Zone;
use pharos_zone::journal::soa_serial;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::config::Config;
use crate::data::unix_millis;
use crate::published::Published;

/// How many times a NOTIFY is sent before the secondary is given up on.
const TRIES: u32 = 5;
/// How long the first try waits for the reply; each next one twice as long.
const FIRST_WAIT: Duration = Duration::from_secs(1);

/// The secondaries of one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSecondaries {
    /// Lowercase wire form.
    pub origin: Box<[u8]>,
    pub secondaries: Vec<SocketAddr>,
}

/// What the notifier works from: the zones as published, and whom to tell.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub snapshot: Option<Arc<Snapshot>>,
    pub secondaries: Arc<[ZoneSecondaries]>,
}

/// Every zone's `notify` list (the zone's origin is checked when it
/// loads): the configured zones', `[store_zones]`' for each of the
/// zones `stored`, and the catalog's.
pub fn secondaries(config: &Config, stored: &[Arc<ZoneSpec>]) -> Arc<[ZoneSecondaries]> {
    let configured = config.all_zones().map(|zone| (zone.origin.as_str(), &zone.notify));
    let kept = stored.iter().map(|zone| (zone.name.as_str(), &config.store_zones.notify));
    let catalog = config.catalog.iter().map(|catalog| (catalog.zone.as_str(), &catalog.notify));
    let listing = configured.chain(kept).chain(catalog).filter(|(_, notify)| !notify.is_empty());
    let read = listing.filter_map(|(origin, notify)| Some((name::from_dotted(origin).ok()?, notify.clone())));
    read.map(|(origin, secondaries)| ZoneSecondaries { origin: origin.into(), secondaries }).collect()
}

impl Plan {
    /// True when `snapshot` froze the zones again since this plan's.
    pub fn zones_changed(&self, snapshot: &Snapshot) -> bool {
        self.snapshot.as_ref().is_none_or(|planned| !Arc::ptr_eq(&planned.zones, &snapshot.zones))
    }
}

/// One NOTIFY to send: the zone's SOA as served, to whom, signed how.
#[derive(Clone)]
struct Notice {
    zone: String,
    origin: Box<[u8]>,
    soa: Box<[u8]>,
    ttl: u32,
    serial: u32,
    key: Option<TsigKey>,
}

/// The serial last sent to a secondary, and the task sending it.
type Sending = (u32, AbortHandle);

/// Runs until the plan's sender is dropped: notifies each secondary of
/// every serial it has not been notified of yet.
pub async fn run(mut plans: watch::Receiver<Plan>, published: Arc<Published>) {
    let mut sent: HashMap<(Box<[u8]>, SocketAddr), Sending> = HashMap::new();
    loop {
        let plan = plans.borrow_and_update().clone();
        if let Some(snapshot) = &plan.snapshot {
            for zone in plan.secondaries.iter() {
                let Some(notice) = notice_of(snapshot, &zone.origin) else { continue };
                for &secondary in &zone.secondaries {
                    let key = (zone.origin.clone(), secondary);
                    if sent.get(&key).is_some_and(|(serial, _)| *serial == notice.serial) {
                        continue;
                    }
                    if let Some((_, older)) = sent.remove(&key) {
                        older.abort();
                    }
                    let task = tokio::spawn(notify(notice.clone(), secondary, published.clone()));
                    sent.insert(key, (notice.serial, task.abort_handle()));
                }
            }
        }
        if plans.changed().await.is_err() {
            return;
        }
    }
}

/// The NOTIFY for the zone at `origin` as `snapshot` serves it; `None`
/// if it serves no such zone.
fn notice_of(snapshot: &Snapshot, origin: &[u8]) -> Option<Notice> {
    // An expired secondary zone has nothing to tell of.
    let zone: &Zone = snapshot.zones.zone_for(origin).filter(|zone| *zone.origin == *origin && !zone.expired)?;
    let soa = zone.soa();
    let settings = &snapshot.settings;
    let acl = settings.transfer_acls.iter().find(|acl| *acl.zone == *origin);
    let key_name = acl.and_then(|acl| acl.keys.first());
    let key = key_name.and_then(|wanted| settings.tsig_keys.iter().find(|key| key.name.eq_ignore_ascii_case(wanted))).cloned();
    Some(Notice {
        zone: name::Display(origin).to_string(),
        origin: origin.into(),
        soa: soa.rdatas[0].clone(),
        ttl: soa.ttl,
        serial: soa_serial(&soa.rdatas[0])?,
        key,
    })
}

/// Sends `notice` to `secondary` until it replies or the tries run out,
/// counting each message sent and the outcome in `published`'s activity.
async fn notify(notice: Notice, secondary: SocketAddr, published: Arc<Published>) {
    let count = |outcome| published.activity.notify(&notice.zone, outcome);
    let (zone, serial) = (&notice.zone, notice.serial);
    let local: SocketAddr = if secondary.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let socket = match UdpSocket::bind(local).await {
        Ok(socket) => socket,
        Err(error) => return tracing::warn!(%zone, %secondary, "cannot send NOTIFY: {error}"),
    };
    // Unguessable: a forged reply would stop the retries.
    let id: u16 = rand::Rng::random(&mut <rand::rngs::SmallRng as rand::SeedableRng>::from_os_rng());
    let mut wait = FIRST_WAIT;
    for attempt in 1..=TRIES {
        let message = notify_message(id, &notice.origin, &notice.soa, notice.ttl, notice.key.as_ref(), unix_millis() / 1000);
        match socket.send_to(&message, secondary).await {
            Ok(_) => count("sent"),
            Err(error) => tracing::debug!(%zone, %secondary, attempt, "NOTIFY not sent: {error}"),
        }
        if let Ok(rcode) = tokio::time::timeout(wait, reply(&socket, secondary, &message)).await {
            let signed = notice.key.is_some();
            if rcode == 0 {
                count("acknowledged");
                tracing::info!(%zone, %secondary, serial, attempt, signed, "NOTIFY acknowledged");
            } else {
                count("refused");
                tracing::warn!(%zone, %secondary, serial, rcode, signed, "NOTIFY refused");
            }
            return;
        }
        wait *= 2;
    }
    count("given_up");
    tracing::warn!(%zone, %secondary, serial, tries = TRIES, "NOTIFY given up: no reply");
}

/// The RCODE of the first datagram from `secondary` that replies to
/// `sent`; others are read and dropped.
async fn reply(socket: &UdpSocket, secondary: SocketAddr, sent: &[u8]) -> u16 {
    let mut buffer = [0u8; 512];
    loop {
        let Ok((len, from)) = socket.recv_from(&mut buffer).await else {
            // A socket that cannot read waits out the try's timeout.
            return std::future::pending().await;
        };
        if from == secondary
            && let Some(rcode) = notify_reply(sent, &buffer[..len])
        {
            return rcode;
        }
    }
}
