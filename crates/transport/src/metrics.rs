//! Counting what the DNS mechanisms receive and answer, at a cost the
//! query path does not notice. Each server owns its [`Counters`], which
//! its transports share. Each thread that answers queries (a UDP worker; a
//! tokio worker running TCP, TLS, HTTPS and QUIC tasks) counts into a
//! shard of its own for that server, found through a thread-local list:
//! plain relaxed loads and stores on the thread's own cache lines, no
//! read-modify-write and no sharing, since only that thread ever writes
//! them. [`Counters::totals`] merges the shards when a scraper asks, and
//! only then. Counting can be turned off ([`Counters::new`]): a batch then
//! finds no shard and reads no clock for it.
//!
//! What is counted: queries received and responses sent per mechanism,
//! responses by RCODE and question type class, answer latency per
//! mechanism (server side), and the routing core's decisions by service,
//! first replica and region, and signed requests by what their TSIG said
//! (RFC 8945); and, by the connection registry as it admits
//! and sheds, the stream connections ([`Counters::connections`]); and TLS
//! handshakes, full or resumed, per secured mechanism
//! ([`Counters::handshakes`]). Every label is fixed here or defined by the
//! operator (services, replicas, regions): nothing is keyed by client.
//! Apart from the labels, and only when asked, each thread also tallies
//! routed answers per resolver in a fixed array of slots, for the control
//! plane to drain ([`Counters::drain_resolvers`], [`resolvers`]): how
//! resolvers' caches skew the split.

pub mod resolvers;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use pharos_answer::{Answered, RoutedTo, Tsig};
use pharos_route::RegionId;
use pharos_wire::types;
use rustc_hash::FxHashMap;

use self::resolvers::{ResolverSlots, Resolvers};

/// How a query arrived: the `transport` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Udp,
    Tcp,
    Tls,
    Https,
    Quic,
}

impl Mechanism {
    pub const ALL: [Mechanism; 5] = [Mechanism::Udp, Mechanism::Tcp, Mechanism::Tls, Mechanism::Https, Mechanism::Quic];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Udp => "udp",
            Mechanism::Tcp => "tcp",
            Mechanism::Tls => "tls",
            Mechanism::Https => "https",
            Mechanism::Quic => "quic",
        }
    }
}

/// The mechanisms a proxy relays with a PROXY protocol header: not QUIC,
/// where the protocol defines no place for one.
pub const PROXIED: [Mechanism; 4] = [Mechanism::Udp, Mechanism::Tcp, Mechanism::Tls, Mechanism::Https];

/// Why a datagram or connection was refused: the `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It starts with a header, from a source not allowed to send one.
    Unexpected,
    /// It does not start with a header, from a source that must send one.
    Missing,
    /// Its header is malformed, or too long.
    Malformed,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [Refusal::Unexpected, Refusal::Missing, Refusal::Malformed];

    pub fn name(self) -> &'static str {
        match self {
            Refusal::Unexpected => "unexpected",
            Refusal::Missing => "missing",
            Refusal::Malformed => "malformed",
        }
    }
}

/// The `rcode` label of each counted RCODE, by value; extended RCODEs
/// (from 16 up) share the last.
pub const RCODE_NAMES: [&str; 17] = [
    "NOERROR",
    "FORMERR",
    "SERVFAIL",
    "NXDOMAIN",
    "NOTIMP",
    "REFUSED",
    "YXDOMAIN",
    "YXRRSET",
    "NXRRSET",
    "NOTAUTH",
    "NOTZONE",
    "DSOTYPENI",
    "RCODE12",
    "RCODE13",
    "RCODE14",
    "RCODE15",
    "EXTENDED",
];

/// The question types counted apart (the `qtype` label); every other type
/// is "other", and a response to a query without a readable question "none".
const COUNTED_QTYPES: [(u16, &str); 12] = [
    (types::A, "A"),
    (types::AAAA, "AAAA"),
    (types::ANY, "ANY"),
    (types::CNAME, "CNAME"),
    (65, "HTTPS"),
    (types::MX, "MX"),
    (types::NS, "NS"),
    (types::PTR, "PTR"),
    (types::SOA, "SOA"),
    (types::SRV, "SRV"),
    (64, "SVCB"),
    (types::TXT, "TXT"),
];
const OTHER_QTYPE: usize = COUNTED_QTYPES.len();
const NO_QTYPE: usize = OTHER_QTYPE + 1;
const QTYPE_CLASSES: usize = NO_QTYPE + 1;

/// The `qtype` label of each class, by index.
pub fn qtype_class_name(class: usize) -> &'static str {
    match class {
        OTHER_QTYPE => "other",
        NO_QTYPE => "none",
        counted => COUNTED_QTYPES[counted].1,
    }
}

/// Upper bounds of the latency histogram's buckets, in nanoseconds: from
/// what a UDP batch takes to what only a stalled thread takes. Above the
/// last is the `+Inf` bucket.
pub const LATENCY_BOUNDS_NS: [u64; 14] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
];
const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

/// A counter that only its owning thread writes: a relaxed load and store
/// (no locked instruction), which a scraper on another thread reads whole.
#[derive(Default)]
struct OwnCounter(AtomicU64);

impl OwnCounter {
    fn add(&self, amount: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(amount), Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Answers routed, by service, first replica and region.
type Decisions = FxHashMap<Box<str>, FxHashMap<Box<str>, FxHashMap<RegionId, u64>>>;

/// One thread's counts.
#[derive(Default)]
struct Shard {
    received: [OwnCounter; 5],
    /// By mechanism, RCODE and question type class.
    responses: [[[OwnCounter; QTYPE_CLASSES]; RCODE_NAMES.len()]; 5],
    latency: [[OwnCounter; LATENCY_BUCKETS]; 5],
    latency_sum_ns: [OwnCounter; 5],
    /// Signed requests, by what their TSIG said (as [`Tsig::ALL`]).
    tsig: [OwnCounter; Tsig::ALL.len()],
    /// Behind a lock that only a scrape contends for; keyed by operator
    /// names, so a map rather than fixed cells. Lookups borrow the names:
    /// only the first decision of a kind allocates.
    decisions: Mutex<Decisions>,
    /// Only a drain contends for it, and only while resolvers are tallied.
    resolvers: Mutex<ResolverSlots>,
}

/// One server's counts: what its transports received and answered, in a
/// shard per thread that answered for it; the stream connections its
/// registry admitted and shed, and the TLS handshakes it made. Owned by
/// the server, so that two servers in one process count apart.
pub struct Counters {
    /// Tells this server's shards from another's in a thread's list.
    id: u64,
    /// Whether the transports count what they answer (`[metrics] counting`).
    counting: bool,
    /// Whether routed answers are tallied per resolver (`[metrics]
    /// resolver_view`).
    tallying_resolvers: bool,
    /// Every shard there has been: a thread's counts outlive the thread.
    shards: Mutex<Vec<Arc<Shard>>>,
    /// Counted by the registry under its own lock: once per connection,
    /// not per query.
    open_connections: AtomicU64,
    shed_connections: AtomicU64,
    /// Handshakes completed, by [`Secured::ALL`] index: full, then
    /// resumed. Once per connection, so shared atomics cost nothing
    /// measurable.
    handshakes: [[AtomicU64; 2]; 4],
    /// Datagrams and connections refused for their PROXY header or its
    /// absence, by [`Mechanism::ALL`] index and [`Refusal::ALL`] index.
    /// Rare but for an attack, so shared atomics.
    proxy_refusals: [[AtomicU64; 3]; 5],
}

/// The ids of the process's [`Counters`], never reused: a thread's list
/// may still name a server that is gone.
static NEXT_COUNTERS_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's shard of each server it answered for, by
    /// [`Counters::id`]: one, in a process that runs one server.
    static SHARDS_HERE: RefCell<Vec<(u64, Arc<Shard>)>> = const { RefCell::new(Vec::new()) };
}

/// Counting goes on after a thread panicked holding a lock: counts are
/// never left half-written.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Counters {
    /// Counts that count what the transports answer if `counting` (off,
    /// the query families of [`Counters::totals`] stay empty), and tally
    /// routed answers per resolver if `tallying_resolvers` as well.
    pub fn new(counting: bool, tallying_resolvers: bool) -> Counters {
        Counters {
            id: NEXT_COUNTERS_ID.fetch_add(1, Ordering::Relaxed),
            counting,
            tallying_resolvers,
            shards: Mutex::default(),
            open_connections: AtomicU64::new(0),
            shed_connections: AtomicU64::new(0),
            handshakes: Default::default(),
            proxy_refusals: Default::default(),
        }
    }

    pub fn counting_queries(&self) -> bool {
        self.counting
    }

    pub fn tallying_resolvers(&self) -> bool {
        self.tallying_resolvers
    }

    /// This thread's counts over `mechanism`, with the batch's start read
    /// from the clock now; `None` when counting is off, without either.
    pub fn counting(&self, mechanism: Mechanism) -> Option<Counting> {
        if !self.counting {
            return None;
        }
        let shard = self.shard_here();
        let tallying_resolvers = self.tallying_resolvers;
        Some(Counting { shard, mechanism: mechanism as usize, started: Instant::now(), tallying_resolvers, this_thread: PhantomData })
    }

    /// This thread's shard, made when the thread first counts for this
    /// server. The thread's list is searched once per batch, and holds one
    /// shard per server the thread answered for.
    fn shard_here(&self) -> Arc<Shard> {
        SHARDS_HERE.with_borrow_mut(|shards| {
            if let Some((_, shard)) = shards.iter().find(|(id, _)| *id == self.id) {
                return shard.clone();
            }
            // A server that is gone holds its shards no more: the list
            // forgets them once the thread counts for another.
            shards.retain(|(_, shard)| Arc::strong_count(shard) > 1);
            let shard = Arc::new(Shard::default());
            lock(&self.shards).push(shard.clone());
            shards.push((self.id, shard.clone()));
            shard
        })
    }
}

/// This thread's counts over one mechanism, found once for a batch of
/// queries (a UDP batch, a read of pipelined TCP queries) rather than
/// once per response: at the cheapest path's 0.2 us per query, the
/// thread-local lookup per response was a measurable part of counting.
/// It also holds when the batch started, for its latency.
pub struct Counting {
    shard: Arc<Shard>,
    mechanism: usize,
    started: Instant,
    /// Whether routed answers are tallied per resolver.
    tallying_resolvers: bool,
    /// Only this thread writes its shard (see [`OwnCounter`]): a task that
    /// moved to another thread must not take its counts along.
    this_thread: PhantomData<*const ()>,
}

impl Counting {
    /// Counts `queries` received, answered or not.
    pub fn received(&self, queries: u64) {
        self.shard.received[self.mechanism].add(queries);
    }

    /// Counts a response sent, and the decision behind it if it was
    /// routed: for `resolver` (asked only then, and only while resolvers
    /// are tallied), the client that will cache it. Its latency is
    /// counted apart, with [`Counting::latency`].
    ///
    /// Inlined into the query loops: a call per response, its frame and
    /// the response copied to memory for it, were most of what counting
    /// cost pipelined TCP (a profile's self shares).
    #[inline]
    pub fn answered(&self, answered: &Answered<'_>, resolver: impl FnOnce() -> Option<IpAddr>) {
        // The responder has just stored the RCODE, two octets. Left to
        // itself the compiler reads four (for the comparison below); a
        // load wider than the store waits for it to reach the cache
        // instead of taking it from the store buffer: on pipelined TCP
        // that stall was most of what counting cost (a profile's
        // annotation). A volatile read is as wide as the field.
        // SAFETY: `answered.rcode` is a reference, valid and aligned.
        let rcode = unsafe { std::ptr::read_volatile(&answered.rcode) };
        let rcode = usize::from(rcode).min(RCODE_NAMES.len() - 1);
        self.shard.responses[self.mechanism][rcode][qtype_class(answered.qtype)].add(1);
        if let Some(tsig) = answered.tsig {
            self.signed(tsig);
        }
        if let Some(routed) = answered.routed {
            let resolver = if self.tallying_resolvers { resolver() } else { None };
            self.routed(routed, resolver, answered.smallest_ttl.unwrap_or(0));
        }
    }

    /// Counts a signed request's TSIG outcome: out of line, as a signed
    /// request is rare.
    #[inline(never)]
    fn signed(&self, tsig: Tsig) {
        self.shard.tsig[tsig as usize].add(1);
    }

    /// Counts a routed answer's decision, and tallies it for `resolver`
    /// if given: out of line, as most responses are not routed.
    #[inline(never)]
    fn routed(&self, routed: RoutedTo<'_>, resolver: Option<IpAddr>, ttl: u32) {
        let replica = &routed.service.replicas[routed.first_replica].id;
        count_decision(&mut lock(&self.shard.decisions), &routed.service.name, replica, routed.region);
        if let Some(resolver) = resolver {
            lock(&self.shard.resolvers).tally((routed.service.name.as_str(), routed.region), resolver, replica, ttl);
        }
    }

    /// Counts `answers` responses, each as long after its query was
    /// received as the batch has taken until now: one clock read per
    /// batch, so a stream of pipelined queries reads the clock once per
    /// read, not once per query (measured: a clock read per query cost
    /// pipelined TCP a third of its rate).
    pub fn latency(&self, answers: u64) {
        if answers == 0 {
            return;
        }
        let elapsed_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.count_latency(answers, elapsed_ns);
    }

    fn count_latency(&self, answers: u64, elapsed_ns: u64) {
        let bucket = LATENCY_BOUNDS_NS.iter().position(|&bound| elapsed_ns <= bound).unwrap_or(LATENCY_BOUNDS_NS.len());
        self.shard.latency[self.mechanism][bucket].add(answers);
        self.shard.latency_sum_ns[self.mechanism].add(elapsed_ns.saturating_mul(answers));
    }

    /// Counts one query received, answered (or not) and timed: for the
    /// mechanisms that answer a query at a time (DoH, DoQ).
    pub fn exchange(&self, answered: Option<&Answered<'_>>, client: IpAddr) {
        self.received(1);
        if let Some(answered) = answered {
            self.answered(answered, || Some(client));
            self.latency(1);
        }
    }
}

fn count_decision(decisions: &mut Decisions, service: &str, replica: &str, region: RegionId) {
    let replicas = match decisions.get_mut(service) {
        Some(replicas) => replicas,
        None => decisions.entry(service.into()).or_default(),
    };
    let regions = match replicas.get_mut(replica) {
        Some(regions) => regions,
        None => replicas.entry(replica.into()).or_default(),
    };
    *regions.entry(region).or_default() += 1;
}

/// The class of each question type below 256, where every counted type
/// is: one indexed load per response instead of a search.
const QTYPE_CLASS_BELOW_256: [u8; 256] = {
    let mut classes = [OTHER_QTYPE as u8; 256];
    let mut counted = 0;
    while counted < COUNTED_QTYPES.len() {
        assert!(COUNTED_QTYPES[counted].0 < 256, "a counted type at 256 or above needs another lookup");
        classes[COUNTED_QTYPES[counted].0 as usize] = counted as u8;
        counted += 1;
    }
    classes
};

fn qtype_class(qtype: Option<u16>) -> usize {
    match qtype {
        None => NO_QTYPE,
        Some(qtype) => QTYPE_CLASS_BELOW_256.get(usize::from(qtype)).map_or(OTHER_QTYPE, |&class| usize::from(class)),
    }
}

impl Counters {
    /// Every thread's per-resolver tally since the last drain, merged;
    /// each thread starts afresh.
    pub fn drain_resolvers(&self) -> Resolvers {
        let mut drained = Resolvers::default();
        for shard in lock(&self.shards).iter() {
            lock(&shard.resolvers).drain_into(&mut drained);
        }
        drained
    }

    /// Merges every thread's counts.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for shard in lock(&self.shards).iter() {
            shard.add_to(&mut totals);
        }
        totals
    }

    /// The stream connections open now, and how many were shed.
    pub fn connections(&self) -> Connections {
        Connections { open: self.open_connections.load(Ordering::Relaxed), shed: self.shed_connections.load(Ordering::Relaxed) }
    }

    pub(crate) fn connection_opened(&self) {
        self.open_connections.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.open_connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_shed(&self) {
        self.shed_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Each secured mechanism's handshakes so far.
    pub fn handshakes(&self) -> [Handshakes; 4] {
        Secured::ALL.map(|over| {
            let [completed, resumed] = self.handshakes[over as usize].each_ref().map(|count| count.load(Ordering::Relaxed));
            // QUIC counts its resumptions apart from its handshakes (see
            // count_quic_resumption): every completed one is in `completed`.
            let full = if over == Secured::Quic { completed.saturating_sub(resumed) } else { completed };
            Handshakes { over, full, resumed }
        })
    }

    /// A TLS handshake over TCP completed, of the kind rustls reports.
    pub(crate) fn count_handshake(&self, over: Secured, resumed: bool) {
        self.handshakes[over as usize][usize::from(resumed)].fetch_add(1, Ordering::Relaxed);
    }

    /// A QUIC handshake completed. quinn does not tell whether it resumed
    /// a session: its resumptions are counted as the ticket key accepts a
    /// ticket ([`Counters::count_quic_resumption`]).
    pub(crate) fn count_quic_handshake(&self) {
        self.handshakes[Secured::Quic as usize][0].fetch_add(1, Ordering::Relaxed);
    }

    /// A QUIC client presented a session ticket the ticket key decrypted.
    /// A handshake that then fails anyway would still count as resumed:
    /// rare, since the client's address is proven before the ticket is
    /// read.
    pub(crate) fn count_quic_resumption(&self) {
        self.handshakes[Secured::Quic as usize][1].fetch_add(1, Ordering::Relaxed);
    }
}

impl Counters {
    /// The datagrams and connections refused for their PROXY header or its
    /// absence, by mechanism (those a proxy may relay) and reason.
    pub fn proxy_refusals(&self) -> Vec<(Mechanism, Refusal, u64)> {
        let counted = PROXIED.into_iter().flat_map(|mechanism| Refusal::ALL.map(|refusal| (mechanism, refusal)));
        let count =
            |mechanism: Mechanism, refusal: Refusal| self.proxy_refusals[mechanism as usize][refusal as usize].load(Ordering::Relaxed);
        counted.map(|(mechanism, refusal)| (mechanism, refusal, count(mechanism, refusal))).collect()
    }

    pub(crate) fn count_proxy_refusal(&self, mechanism: Mechanism, refusal: Refusal) {
        self.proxy_refusals[mechanism as usize][refusal as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// The counts of every thread, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Queries received, by mechanism (indexed as [`Mechanism::ALL`]).
    pub received: [u64; 5],
    /// Responses sent, by mechanism, RCODE (as [`RCODE_NAMES`]) and
    /// question type class (see [`qtype_class_name`]); only those sent.
    pub responses: BTreeMap<(usize, usize, usize), u64>,
    pub latency: [Latency; 5],
    /// Signed requests, by what their TSIG said (as [`Tsig::ALL`]).
    pub tsig: [u64; Tsig::ALL.len()],
    /// Answers routed, by service, first replica and region.
    pub decisions: BTreeMap<(String, String, RegionId), u64>,
}

/// One mechanism's answer latency histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Responses per bucket (not cumulative), the last one above every
    /// bound of [`LATENCY_BOUNDS_NS`].
    pub buckets: [u64; LATENCY_BUCKETS],
    pub sum_ns: u64,
}

impl Shard {
    fn add_to(&self, totals: &mut Totals) {
        for mechanism in 0..Mechanism::ALL.len() {
            totals.received[mechanism] += self.received[mechanism].get();
            for (rcode, classes) in self.responses[mechanism].iter().enumerate() {
                for (class, counter) in classes.iter().enumerate().filter(|(_, counter)| counter.get() > 0) {
                    *totals.responses.entry((mechanism, rcode, class)).or_default() += counter.get();
                }
            }
            let latency = &mut totals.latency[mechanism];
            for (bucket, counter) in self.latency[mechanism].iter().enumerate() {
                latency.buckets[bucket] += counter.get();
            }
            latency.sum_ns += self.latency_sum_ns[mechanism].get();
        }
        for (total, counter) in totals.tsig.iter_mut().zip(&self.tsig) {
            *total += counter.get();
        }
        for (service, replicas) in lock(&self.decisions).iter() {
            for (replica, regions) in replicas {
                for (&region, &count) in regions {
                    *totals.decisions.entry((service.to_string(), replica.to_string(), region)).or_default() += count;
                }
            }
        }
    }
}

/// The stream connections (TCP, TLS, HTTPS, QUIC) open now, and how many
/// were shed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connections {
    pub open: u64,
    /// Closed by the server: crowded out by newer ones, or idle.
    pub shed: u64,
}

/// Where a TLS handshake is made: the DNS mechanisms over TLS, and HTTP
/// redirection over HTTPS (the `transport` label of handshakes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secured {
    Tls,
    Https,
    Quic,
    Redirect,
}

impl Secured {
    pub const ALL: [Secured; 4] = [Secured::Tls, Secured::Https, Secured::Quic, Secured::Redirect];

    pub fn name(self) -> &'static str {
        match self {
            Secured::Redirect => "https-redirect",
            Secured::Tls => Mechanism::Tls.name(),
            Secured::Https => Mechanism::Https.name(),
            Secured::Quic => Mechanism::Quic.name(),
        }
    }
}

/// One secured mechanism's handshakes so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshakes {
    pub over: Secured,
    pub full: u64,
    /// From a session ticket or (TLS 1.2) a session ID.
    pub resumed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's counts over `mechanism`, for `counters` that count.
    fn counting_here(counters: &Counters, mechanism: Mechanism) -> Counting {
        counters.counting(mechanism).expect("these counters count")
    }

    fn counted(rcode: u16, qtype: Option<u16>) -> Answered<'static> {
        Answered { rcode, smallest_ttl: None, len: 12, qtype, routed: None, opt_at: None, nonexistent: false, tsig: None }
    }

    #[test]
    fn every_thread_counts_apart_and_the_totals_merge_them() {
        let counters = Counters::new(true, false);
        let signed = Answered { tsig: Some(Tsig::BadKey), ..counted(9, Some(types::SOA)) };
        std::thread::scope(|threads| {
            for _ in 0..3 {
                threads.spawn(|| {
                    let counting = counting_here(&counters, Mechanism::Tls);
                    counting.received(2);
                    counting.answered(&counted(3, Some(types::AAAA)), || None);
                    counting.answered(&signed, || None);
                    counting.count_latency(1, 30_000);
                    let exchange = counting_here(&counters, Mechanism::Tls);
                    exchange.exchange(Some(&counted(23, None)), IpAddr::from([192, 0, 2, 1]));
                    exchange.count_latency(1, 2_000_000_000);
                });
            }
        });
        let totals = counters.totals();
        let tls = Mechanism::Tls as usize;
        assert_eq!(totals.received, [0, 0, 9, 0, 0]);
        let responses = |rcode, class| totals.responses.get(&(tls, rcode, class)).copied().unwrap_or(0);
        assert_eq!(responses(3, 1), 3, "NXDOMAIN to AAAA");
        assert_eq!(totals.tsig[Tsig::BadKey as usize], 3, "a signed query refused");
        assert_eq!(responses(16, NO_QTYPE), 3, "an extended RCODE, no question");
        assert_eq!(totals.latency[tls].buckets[2], 3, "30 us falls at or under 50 us");
        assert_eq!(totals.latency[tls].buckets[LATENCY_BUCKETS - 1], 3, "2 s is past every bound");
        assert_eq!(totals.latency[tls].buckets.iter().sum::<u64>(), 9, "the exchanges' own latencies, and the counted ones");
    }

    #[test]
    fn two_servers_on_one_thread_count_apart_and_one_gone_is_forgotten() {
        let (first, second) = (Counters::new(true, false), Counters::new(true, false));
        counting_here(&first, Mechanism::Udp).received(2);
        counting_here(&second, Mechanism::Udp).received(5);
        counting_here(&first, Mechanism::Udp).received(1);
        assert_eq!((first.totals().received[0], second.totals().received[0]), (3, 5));
        assert_eq!(SHARDS_HERE.with_borrow(Vec::len), 2, "one shard each on this thread");
        drop(second);
        let third = Counters::new(true, false);
        counting_here(&third, Mechanism::Udp).received(7);
        assert_eq!(third.totals().received[0], 7);
        assert_eq!(SHARDS_HERE.with_borrow(Vec::len), 2, "the shard of the server gone is forgotten");
        assert!(Counters::new(false, true).counting(Mechanism::Udp).is_none(), "counting off: no shard");
    }

    #[test]
    fn a_batch_counts_its_latency_once_for_every_answer_and_an_empty_batch_nothing() {
        let counters = Counters::new(true, false);
        let counting = counting_here(&counters, Mechanism::Https);
        counting.count_latency(4, 100_000);
        counting.latency(0);
        let latency = &counters.totals().latency[Mechanism::Https as usize];
        assert_eq!(latency.buckets.iter().sum::<u64>(), 4);
        assert_eq!(latency.buckets[3], 4, "100 us falls at or under 100 us");
        assert_eq!(latency.sum_ns, 4 * 100_000);
    }

    #[test]
    fn question_types_fall_in_their_class() {
        assert_eq!(qtype_class_name(qtype_class(Some(types::A))), "A");
        assert_eq!(qtype_class_name(qtype_class(Some(65))), "HTTPS");
        assert_eq!(qtype_class_name(qtype_class(Some(types::DNAME))), "other");
        assert_eq!(qtype_class_name(qtype_class(Some(0))), "other");
        assert_eq!(qtype_class_name(qtype_class(Some(65535))), "other");
        for (qtype, name) in COUNTED_QTYPES {
            assert_eq!(qtype_class_name(qtype_class(Some(qtype))), name);
        }
        assert_eq!(qtype_class_name(qtype_class(None)), "none");
    }

    #[test]
    fn decisions_are_counted_by_service_replica_and_region() {
        let mut decisions = Decisions::default();
        for (service, replica, region) in [("a.", "fra", 1), ("a.", "fra", 1), ("a.", "fra", 2), ("a.", "ams", 1), ("b.", "fra", 1)] {
            count_decision(&mut decisions, service, replica, region);
        }
        assert_eq!(decisions["a."]["fra"][&1], 2);
        assert_eq!(decisions["a."]["fra"][&2], 1);
        assert_eq!(decisions["a."]["ams"][&1], 1);
        assert_eq!(decisions["b."].len(), 1);
    }
}
