//! Secondary zones on the network: one task per zone runs its refresh
//! timers (`pharos_secondary::Refresh`) against the clock, asks its
//! primaries over TCP (the SOA query, then IXFR or AXFR, each exchange
//! bounded in time and size, assembled and checked by
//! `pharos_secondary::Assembler`), and tells the control thread what came
//! of it ([`News`]): a new copy to serve and keep in the store, a copy
//! confirmed, or a copy expired. A NOTIFY the transports took for the
//! zone (`pharos_transport::NotifyInbox`) or `ctl zone refresh` makes it
//! ask at once. What each zone's timers stand at is published for the API.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pharos_model::status::SecondaryStatus;
use pharos_secondary::{Action, Assembled, Assembler, Clamps, Kind, Progress, Refresh, Request, SoaTimers, TsigKey};
use pharos_wire::{name, types};
use pharos_zone::journal::Record;
use pharos_zone::{Zone, zone_from_records};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::data::unix_millis;

/// The longest one exchange with a primary may take, connection included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most a transfer may carry, in octets of messages.
const MAX_TRANSFER_OCTETS: usize = 1 << 30;
/// How many NOTIFYs or refresh requests may wait for a zone's task.
const POKES: usize = 16;

/// A primary: where it answers, and the key its transfers are signed with.
#[derive(Debug, Clone)]
pub struct Primary {
    pub address: SocketAddr,
    pub key: Option<TsigKey>,
}

/// One secondary zone, as its task starts.
#[derive(Debug, Clone)]
pub struct SecondaryZone {
    /// Lowercase wire form.
    pub origin: Box<[u8]>,
    pub primaries: Vec<Primary>,
    pub clamps: Clamps,
    /// The copy served at start (the store's): its records, the SOA among
    /// them, and when a primary last gave or confirmed it (Unix ms).
    pub copy: Option<(Arc<[Record]>, u64)>,
}

/// What a zone's task tells the control thread.
#[derive(Debug)]
pub enum News {
    /// A transfer gave the zone these records (the SOA among them), at
    /// `at` (Unix ms): serve it, and keep it in the store.
    Copied { zone: Zone, records: Arc<[Record]>, at: u64 },
    /// A primary confirmed the copy at `at` (Unix ms).
    Confirmed { origin: Box<[u8]>, at: u64 },
    /// No primary confirmed the copy within its SOA's expire time.
    Expired { origin: Box<[u8]> },
}

/// The zones' tasks, to ask one to refresh now.
#[derive(Clone, Default)]
pub struct Secondaries {
    pokes: Arc<BTreeMap<Box<[u8]>, mpsc::Sender<()>>>,
    statuses: Arc<Mutex<BTreeMap<Box<[u8]>, SecondaryStatus>>>,
}

impl Secondaries {
    /// Asks the zone at `origin` (lowercase wire form) to check its
    /// primaries at once; false if it is no secondary zone here.
    pub fn refresh(&self, origin: &[u8]) -> bool {
        let Some(poke) = self.pokes.get(origin) else { return false };
        // A full queue already holds a request to check.
        poke.try_send(()).ok();
        true
    }

    /// What each zone's timers stand at, by origin.
    pub fn statuses(&self) -> Vec<SecondaryStatus> {
        self.statuses.lock().expect("no writer panics holding it").values().cloned().collect()
    }
}

/// Starts a task per zone, and one that hands each NOTIFY from `notified`
/// to its zone's; `news` is told what comes of them.
pub fn start(zones: Vec<SecondaryZone>, mut notified: mpsc::Receiver<Box<[u8]>>, news: Arc<dyn Fn(News) + Send + Sync>) -> Secondaries {
    let statuses = Arc::new(Mutex::new(BTreeMap::new()));
    let mut pokes = BTreeMap::new();
    for zone in zones {
        let (poke, poked) = mpsc::channel(POKES);
        pokes.insert(zone.origin.clone(), poke);
        tokio::spawn(ZoneTask::new(zone, news.clone(), statuses.clone()).run(poked));
    }
    let secondaries = Secondaries { pokes: Arc::new(pokes), statuses };
    let handed = secondaries.clone();
    tokio::spawn(async move {
        while let Some(origin) = notified.recv().await {
            tracing::info!(zone = %name::Display(&origin), "NOTIFY taken: checking the primaries");
            handed.refresh(&origin);
        }
    });
    secondaries
}

/// One zone's task: its timers and its copy.
struct ZoneTask {
    zone: SecondaryZone,
    /// For the log.
    name: String,
    refresh: Refresh,
    news: Arc<dyn Fn(News) + Send + Sync>,
    statuses: Arc<Mutex<BTreeMap<Box<[u8]>, SecondaryStatus>>>,
}

impl ZoneTask {
    fn new(
        zone: SecondaryZone,
        news: Arc<dyn Fn(News) + Send + Sync>,
        statuses: Arc<Mutex<BTreeMap<Box<[u8]>, SecondaryStatus>>>,
    ) -> ZoneTask {
        let copy = zone.copy.as_ref().and_then(|(records, at)| Some((timers_of(records)?, *at)));
        let refresh = Refresh::new(zone.primaries.len(), zone.clamps, copy, unix_millis());
        let name = name::Display(&zone.origin).to_string();
        ZoneTask { zone, name, refresh, news, statuses }
    }

    /// Does what is due, waits for the next timer or a poke, and again,
    /// until the server stops.
    async fn run(mut self, mut poked: mpsc::Receiver<()>) {
        loop {
            let mut next = self.refresh.poll(unix_millis());
            while let Some(action) = next {
                next = self.act(action).await;
            }
            self.publish();
            let now = unix_millis();
            let at = self.refresh.next_wakeup().expect("waiting once nothing is due");
            let wait = Duration::from_millis(at.saturating_sub(now));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                poke = poked.recv() => match poke {
                    Some(()) => self.refresh.notified(unix_millis()),
                    None => return,
                },
            }
        }
    }

    /// Does `action`; returns what follows at once, if anything.
    async fn act(&mut self, action: Action) -> Option<Action> {
        match action {
            Action::Expire => {
                tracing::warn!(zone = %self.name, "secondary zone expired: no primary confirmed it in time; answering SERVFAIL");
                (self.news)(News::Expired { origin: self.zone.origin.clone() });
                None
            }
            Action::QuerySoa { primary } => {
                let request = Request::soa(random_id(), &self.zone.origin, self.key(primary), unix_seconds());
                match self.exchange(primary, request, None).await {
                    Ok(Assembled::Serial(serial)) => self.refresh.soa_answered(serial, unix_millis()),
                    Ok(_) => unreachable!("a SOA query is answered with a serial"),
                    Err(error) => self.failed(primary, "SOA query", error),
                }
            }
            Action::Transfer { primary, incremental } => self.transfer(primary, incremental).await,
        }
    }

    async fn transfer(&mut self, primary: usize, incremental: bool) -> Option<Action> {
        let (id, origin, key, now) = (random_id(), &self.zone.origin, self.key(primary), unix_seconds());
        let current = self.zone.copy.as_ref().map(|(records, _)| records.clone()).filter(|_| incremental);
        let soa = current.as_ref().and_then(|records| records.iter().find(|record| record.rtype == types::SOA));
        let request = match soa {
            Some(soa) => Request::ixfr(id, origin, soa, key, now),
            None => Request::axfr(id, origin, key, now),
        };
        let kind = request.kind;
        match self.exchange(primary, request, current).await {
            Ok(Assembled::Zone(records)) => self.copied(primary, kind, records),
            Ok(_) => {
                let timers = self.zone.copy.as_ref().and_then(|(records, _)| timers_of(records)).expect("an IXFR has a copy");
                self.confirmed(timers);
                None
            }
            Err(error) => self.failed(primary, &kind.to_string(), error),
        }
    }

    /// A transfer gave `records`: checked as a zone, they are the copy.
    fn copied(&mut self, primary: usize, kind: Kind, records: Vec<Record>) -> Option<Action> {
        let source = format!("the transfer of {} from {}", self.name, self.zone.primaries[primary].address);
        let zone = match zone_from_records(&self.zone.origin, &records, &source) {
            Ok(zone) => zone,
            Err(error) => return self.failed(primary, "transfer", error.to_string()),
        };
        let timers = timers_of(&records).expect("a checked zone has its SOA");
        let at = unix_millis();
        let records: Arc<[Record]> = records.into();
        let address = self.zone.primaries[primary].address;
        tracing::info!(zone = %self.name, serial = timers.serial, primary = %address, by = %kind, records = records.len(), "secondary zone transferred");
        self.zone.copy = Some((records.clone(), at));
        (self.news)(News::Copied { zone, records, at });
        self.refresh.transferred(timers, at);
        None
    }

    fn confirmed(&mut self, timers: SoaTimers) {
        let at = unix_millis();
        if let Some((_, confirmed)) = &mut self.zone.copy {
            *confirmed = at;
        }
        (self.news)(News::Confirmed { origin: self.zone.origin.clone(), at });
        self.refresh.transferred(timers, at);
    }

    fn failed(&mut self, primary: usize, what: &str, error: String) -> Option<Action> {
        let address = self.zone.primaries[primary].address;
        tracing::warn!(zone = %self.name, primary = %address, "{what} failed: {error}");
        self.refresh.failed(format!("{what} from {address}: {error}"), unix_millis())
    }

    fn key(&self, primary: usize) -> Option<&TsigKey> {
        self.zone.primaries[primary].key.as_ref()
    }

    /// Sends `request` to the primary and assembles its answers.
    async fn exchange(&self, primary: usize, request: Request, current: Option<Arc<[Record]>>) -> Result<Assembled, String> {
        let address = self.zone.primaries[primary].address;
        let exchanged = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange(address, request, current)).await;
        exchanged.unwrap_or_else(|_| Err(format!("no answer within {} s", EXCHANGE_TIMEOUT.as_secs())))
    }

    fn publish(&self) {
        let copy = self.zone.copy.as_ref();
        let status = SecondaryStatus {
            zone: self.name.clone(),
            serial: self.refresh.serial().filter(|_| copy.is_some()),
            last_refresh: self.refresh.last_refresh,
            next_check: self.refresh.next_wakeup(),
            expired: self.refresh.expired(),
            last_error: self.refresh.last_error.clone(),
        };
        self.statuses.lock().expect("no writer panics holding it").insert(self.zone.origin.clone(), status);
    }
}

/// One exchange over TCP: the request, then its answers, each framed by
/// its length (RFC 1035 section 4.2.2), until the assembler is done.
async fn exchange(address: SocketAddr, request: Request, current: Option<Arc<[Record]>>) -> Result<Assembled, String> {
    let mut stream = TcpStream::connect(address).await.map_err(|error| format!("cannot connect: {error}"))?;
    let mut framed = (request.message.len() as u16).to_be_bytes().to_vec();
    framed.extend(&request.message);
    stream.write_all(&framed).await.map_err(|error| format!("cannot send: {error}"))?;
    let mut assembler = Assembler::new(request, current);
    let mut octets = 0;
    let mut message = Vec::new();
    loop {
        let len = stream.read_u16().await.map_err(|error| format!("the answer ended early: {error}"))?;
        octets += usize::from(len);
        if octets > MAX_TRANSFER_OCTETS {
            return Err(format!("the transfer exceeds {MAX_TRANSFER_OCTETS} octets"));
        }
        message.resize(usize::from(len), 0);
        stream.read_exact(&mut message).await.map_err(|error| format!("the answer ended early: {error}"))?;
        match assembler.push(&message, unix_seconds()).map_err(|error| error.to_string())? {
            Progress::More => continue,
            Progress::Done(assembled) => return Ok(assembled),
        }
    }
}

/// The SOA timers of a zone's records.
fn timers_of(records: &[Record]) -> Option<SoaTimers> {
    SoaTimers::of(&records.iter().find(|record| record.rtype == types::SOA)?.rdata)
}

/// Unguessable: a forged answer must guess it (with the port).
fn random_id() -> u16 {
    rand::Rng::random(&mut <rand::rngs::SmallRng as rand::SeedableRng>::from_os_rng())
}

fn unix_seconds() -> u64 {
    unix_millis() / 1000
}
