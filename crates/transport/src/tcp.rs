//! DNS over TCP (RFC 7766): two-octet length framing, many queries per
//! connection, answered as soon as each is read (pipelining), under the
//! idle timeout and connection caps of the [`Registry`]. DNS over TLS is
//! the same conversation inside TLS, so the connection loop here serves
//! any byte stream; the accept loop here serves every stream listener.
//!
//! Zone transfers (AXFR, and IXFR answered in full) are answered here,
//! over TCP and TLS only: [`pharos_answer::respond_transfer`] makes the
//! messages, each framed in turn.
//!
//! Each connection is its own task: a client that stalls, reads slowly or
//! sends half a message holds only its own task, never another's.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use pharos_answer::{
    Answered, Client, Query, Reject, ResponseOptions, SharedSnapshot, Snapshot, Transferred, Transport, is_transfer, parse_query,
    query_read, respond_parsed, respond_transfer,
};
use pharos_wire::framing::{close_frame, open_frame, push_framed, split_frame};
use pharos_wire::{name, types};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::Observation;
use crate::cookies::CookieSecret;
use crate::dnstap;
use crate::dnstap::QueryLog;
use crate::metrics::{Counting, Mechanism};
use crate::proxy::{ProxySources, Rewound};
use crate::registry::{Admission, Registry};
use crate::updates::{UpdateRequest, Updates, is_update};

/// Room a connection waits for its next query with: one query, padded or
/// not, fits in one read. Idle connections are most of a busy server's,
/// so this is all the buffer an idle one holds.
const QUERY_ROOM: usize = 512;
/// Room added when a burst of pipelined queries fills what there is.
const READ_CHUNK: usize = 16 * 1024;
/// The pause after a failed accept, doubled at each failure in a row up to
/// the longest: a listener out of descriptors stays readable, and retrying
/// at once would spin.
const FIRST_ACCEPT_PAUSE: Duration = Duration::from_millis(1);
const LONGEST_ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Failed accepts are logged at most once per this interval, with a count.
const ACCEPT_FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Why a TCP listener cannot be had; `transport` names what was to be
/// served, e.g. "DNS over TLS".
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for {transport} on TCP {address}")]
pub struct BindError {
    transport: &'static str,
    address: SocketAddr,
    source: io::Error,
}

/// A TCP listener on `address` for `transport`, logged.
pub(crate) async fn bind(address: SocketAddr, transport: &'static str) -> Result<TcpListener, BindError> {
    let listener = TcpListener::bind(address).await.map_err(|source| BindError { transport, address, source })?;
    tracing::info!(%address, "serving {transport}");
    Ok(listener)
}

/// What every DNS stream listener (TCP, TLS, HTTPS) serves with: the
/// live snapshot, the registry its connections count in, the secret of
/// DNS cookies and the proxies whose PROXY headers it takes, where those
/// are configured.
#[derive(Clone)]
pub(crate) struct Serving {
    pub snapshot: SharedSnapshot,
    pub registry: Arc<Registry>,
    pub cookies: Option<Arc<CookieSecret>>,
    pub proxies: Option<Arc<ProxySources>>,
    /// Whoever applies DNS UPDATEs, where they are taken.
    pub updates: Option<Arc<dyn Updates>>,
}

impl Serving {
    /// Opens a DNS connection from `peer`, through the proxies where they
    /// are configured (see [`ProxySources::open_stream`]): the client it is
    /// from, and the stream to read its queries from. `None`: refused, or
    /// shed or closed first.
    pub(crate) async fn open<Stream: AsyncRead + Unpin>(
        &self,
        stream: Stream,
        peer: SocketAddr,
        admission: &Admission,
        mechanism: Mechanism,
    ) -> Option<(SocketAddr, Rewound<Stream>)> {
        match self.proxies.as_deref() {
            Some(proxies) => {
                let counters = &admission.observation().counters;
                let (client, stream) = admission.unless_shed(proxies.open_stream(stream, peer, counters, mechanism)).await??;
                admission.reassign(client.ip());
                Some((client, stream))
            }
            None => Some((peer, Rewound::new(Bytes::new(), stream))),
        }
    }
}

/// Accepts connections on `listener` forever, one task each, with a
/// random source drawn from `rng`.
pub async fn serve(listener: TcpListener, serving: Serving, rng: SmallRng) {
    let keepalive = Some(serving.registry.limits().keepalive_timeout());
    let options = ResponseOptions { keepalive, pad: false, ..ResponseOptions::default() };
    accept_each(listener, serving.registry.clone(), rng, move |stream, peer, admission, rng| {
        let serving = serving.clone();
        async move {
            let server = local_address(&stream);
            let Some((client, stream)) = serving.open(stream, peer, &admission, Mechanism::Tcp).await else { return };
            let connection = Stream::new(client, server, options, &serving, Mechanism::Tcp);
            serve_connection(stream, connection, serving.snapshot, admission, rng).await
        }
    })
    .await
}

/// The address `stream` was accepted on.
pub(crate) fn local_address(stream: &TcpStream) -> SocketAddr {
    // Unknown only for a socket already gone, whose queries are moot.
    stream.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// Accepts connections on `listener` until the registry drains (then the
/// listener closes). Each is admitted to the registry, then served by
/// `serve` in a task of its own, with a random source drawn from `rng`.
pub(crate) async fn accept_each<Serve, Served>(listener: TcpListener, registry: Arc<Registry>, mut rng: SmallRng, serve: Serve)
where
    Serve: Fn(TcpStream, SocketAddr, Admission, SmallRng) -> Served,
    Served: Future<Output = ()> + Send + 'static,
{
    let address = listener.local_addr().map(|address| address.to_string()).unwrap_or_default();
    let mut failures = AcceptFailures { listener: address, ..AcceptFailures::default() };
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = registry.drained() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                failures.accepted();
                let _ = stream.set_nodelay(true);
                let admission = registry.admit(peer.ip());
                tokio::spawn(serve(stream, peer, admission, SmallRng::from_rng(&mut rng)));
            }
            Err(error) => failures.pause_after(&error, &registry).await,
        }
    }
}

/// The failed accepts of one listener: how many in a row, for the pause
/// before the next try, and what the log has yet to say. A line per
/// failure would be a line per retry; one per interval, with a count, says
/// as much.
#[derive(Default)]
struct AcceptFailures {
    /// The listener's address, for the log.
    listener: String,
    in_a_row: u32,
    unlogged: u64,
    /// The log's last word is that accepts fail.
    logged_failing: bool,
    last_logged: Option<Instant>,
}

impl AcceptFailures {
    /// Frees a descriptor if that is what accept lacked, logs if a line is
    /// due, and pauses: longer after each failure in a row.
    async fn pause_after(&mut self, error: &io::Error, registry: &Registry) {
        let out_of_resources = is_out_of_resources(error);
        if out_of_resources {
            // The idlest connection's descriptor goes to a new one; those
            // at work keep theirs.
            registry.shed_longest_idle();
        }
        self.unlogged += 1;
        if self.log_is_due() {
            let (listener, failed, open) = (&self.listener, self.unlogged, registry.open_connections());
            tracing::warn!(%listener, %error, failed, open, shedding_idle = out_of_resources, "cannot accept connections, pausing accepts");
            self.logged(true);
        }
        let pause = FIRST_ACCEPT_PAUSE.saturating_mul(1 << self.in_a_row.min(16)).min(LONGEST_ACCEPT_PAUSE);
        self.in_a_row = self.in_a_row.saturating_add(1);
        tokio::time::sleep(pause).await;
    }

    /// An accept succeeded: the pause starts short again, and the log says
    /// so once a line is due, with the failures it has not told yet.
    fn accepted(&mut self) {
        self.in_a_row = 0;
        if (self.logged_failing || self.unlogged > 0) && self.log_is_due() {
            tracing::info!(listener = %self.listener, failed = self.unlogged, "accepting connections again");
            self.logged(false);
        }
    }

    fn log_is_due(&self) -> bool {
        self.last_logged.is_none_or(|at| at.elapsed() >= ACCEPT_FAILURE_LOG_INTERVAL)
    }

    fn logged(&mut self, failing: bool) {
        self.unlogged = 0;
        self.logged_failing = failing;
        self.last_logged = Some(Instant::now());
    }
}

/// True when accept failed for want of descriptors or kernel memory, not
/// for a fault of the connection at hand.
fn is_out_of_resources(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

/// Who a stream connection serves, and how.
pub(crate) struct Stream {
    pub client: Client,
    /// What the answers' OPT records carry.
    pub options: ResponseOptions,
    /// Makes the server cookie of a query's COOKIE option, where cookies
    /// are configured.
    pub cookies: Option<Arc<CookieSecret>>,
    /// What the answers count as: TCP or TLS.
    pub mechanism: Mechanism,
    /// Both ends, for the query log: the client (the peer, or the client
    /// its proxy named) and the server's address.
    pub peer: SocketAddr,
    pub server: SocketAddr,
    updates: Option<Arc<dyn Updates>>,
}

impl Stream {
    pub(crate) fn new(peer: SocketAddr, server: SocketAddr, options: ResponseOptions, serving: &Serving, mechanism: Mechanism) -> Stream {
        let client = Client { address: peer.ip(), transport: Transport::Stream };
        let (cookies, updates) = (serving.cookies.clone(), serving.updates.clone());
        Stream { client, options, cookies, mechanism, peer, server, updates }
    }

    /// True when `message` is a DNS UPDATE this connection hands over.
    fn takes_update(&self, message: &[u8]) -> bool {
        self.updates.is_some() && is_update(message)
    }

    /// Hands `update` to the applier and waits for its reply (`None`: it
    /// sent none, or the connection was shed first).
    async fn update(&self, update: Vec<u8>, admission: &Admission) -> Option<Vec<u8>> {
        let updates = self.updates.as_ref()?;
        let (replied, reply) = tokio::sync::oneshot::channel();
        let request = UpdateRequest { message: update, client: self.peer, transport: self.mechanism.name() };
        updates.submit(request, Box::new(move |bytes| drop(replied.send(bytes))));
        admission.unless_shed(reply).await?.ok()
    }

    /// What the answer to `parsed` carries: the connection's options,
    /// the time a signed query is checked at, and a server cookie for a
    /// query's COOKIE option (never bad over a stream: see `cookies`).
    /// Without cookies configured, or a clock to read, that is one branch.
    fn options_for(&self, parsed: &Result<Query<'_>, Reject<'_>>) -> ResponseOptions {
        let cookie = self.cookies.as_deref().zip(query_read(parsed).and_then(|query| query.edns?.cookie));
        let cookie = cookie.map(|(secret, cookie)| secret.over_stream(&cookie, self.client.address));
        ResponseOptions { now: crate::tsig_time(parsed), cookie, ..self.options }
    }
}

/// Reads framed queries from `stream` and writes framed answers until the
/// client closes, goes idle, stops reading, or is shed.
pub(crate) async fn serve_connection(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    connection: Stream,
    snapshot: SharedSnapshot,
    admission: Admission,
    mut rng: SmallRng,
) {
    let mut input: Vec<u8> = Vec::with_capacity(QUERY_ROOM);
    let mut output: Vec<u8> = Vec::new();
    let mut updates: Vec<Vec<u8>> = Vec::new();
    loop {
        // A partial message means more is on its way, maybe a burst.
        if input.capacity() - input.len() < QUERY_ROOM {
            input.reserve(READ_CHUNK);
        }
        // Idle connections are closed by the registry's sweeper through
        // the shed signal, so no read needs a timer of its own.
        let Some(Ok(1..)) = admission.unless_shed(stream.read_buf(&mut input)).await else { return };
        let consumed = answer_frames(&input, &connection, &snapshot, admission.observation(), &mut rng, &mut output, &mut updates);
        input.drain(..consumed);
        // Updates are answered after the queries read with them, each
        // once it is applied (RFC 7766 lets answers come in any order).
        for update in updates.drain(..) {
            if let Some(reply) = connection.update(update, &admission).await {
                push_framed(&mut output, &reply);
            }
        }
        if consumed > 0 {
            admission.touch();
        }
        if !output.is_empty() {
            if !write_answers(&mut stream, &output, admission.limits().write_timeout()).await {
                return;
            }
            output.clear();
        }
        if input.is_empty() {
            release_burst_room(&mut input, &mut output);
        }
    }
}

/// Gives back what a burst took beyond the room for one query: with all
/// read answered, the client may now say nothing for long.
fn release_burst_room(input: &mut Vec<u8>, output: &mut Vec<u8>) {
    if input.capacity() > QUERY_ROOM {
        *input = Vec::with_capacity(QUERY_ROOM);
    }
    if output.capacity() > QUERY_ROOM {
        *output = Vec::new();
    }
}

/// Writes `output`, waiting up to `timeout` for a client that reads
/// slowly. False if the connection should close.
async fn write_answers(stream: &mut (impl AsyncWrite + Unpin), output: &[u8], timeout: Duration) -> bool {
    let written = async {
        stream.write_all(output).await?;
        // TLS holds records back until flushed; for TCP this does nothing.
        stream.flush().await
    };
    matches!(tokio::time::timeout(timeout, written).await, Ok(Ok(())))
}

/// Answers every complete frame at the start of `input`, appending framed
/// responses to `output`, and counts them; returns how many input octets
/// were used. A stream's latency runs from the read to the answers ready to
/// write (the whole read's, as for a UDP batch): how long the write then
/// takes is the client's reading. DNS UPDATEs are not answered here but
/// put in `updates`, for the applier.
fn answer_frames(
    input: &[u8],
    connection: &Stream,
    snapshot: &SharedSnapshot,
    observation: &Observation,
    rng: &mut SmallRng,
    output: &mut Vec<u8>,
    updates: &mut Vec<Vec<u8>>,
) -> usize {
    let mut read = ReadAccount {
        counting: observation.counters.counting(connection.mechanism),
        // Whether the query log runs, asked once per read: without it, a
        // query reads no wall clock and builds nothing for it.
        logged_at: observation.query_log.logging().then(SystemTime::now),
        query_log: &observation.query_log,
        connection,
        queries: 0,
        answers: 0,
    };
    let current = snapshot.load();
    let mut unread = input;
    while let Ok((message, rest)) = split_frame(unread) {
        let start = output.len();
        read.queries += 1;
        // Each branch accounts for its answer where it was made: an
        // `Option<Answered>` merged from both and read back after was
        // copied per query, most of what counting cost pipelined TCP.
        if connection.takes_update(message) {
            updates.push(message.to_vec());
            unread = rest;
            continue;
        }
        match parse_query(message) {
            // A zone transfer is many messages, framed one by one.
            parsed @ Ok(query) if query.question.as_ref().is_some_and(is_transfer) => {
                let answered = transfer(&query, connection, &connection.options_for(&parsed), &current, output);
                read.answered(&answered, message, &output[start..]);
            }
            parsed => {
                let frame = open_frame(output);
                let options = connection.options_for(&parsed);
                let query = query_read(&parsed).copied();
                let answered = respond_parsed(parsed, &connection.client, &options, &current, rng, output);
                close_frame(output, frame, answered.is_some());
                if let Some(answered) = &answered {
                    read.answered(answered, message, &output[start..]);
                    if let Some(query) = &query {
                        observation.notify_inbox.take(query, answered, connection.client.address, &current);
                    }
                }
            }
        }
        unread = rest;
    }
    read.finish();
    input.len() - unread.len()
}

/// What one read's answers are counted and logged with, and how many
/// queries it held and answered.
struct ReadAccount<'c> {
    counting: Option<Counting>,
    logged_at: Option<SystemTime>,
    query_log: &'c QueryLog,
    connection: &'c Stream,
    queries: u64,
    answers: u64,
}

impl ReadAccount<'_> {
    /// Counts and logs the answer to `query`, whose framed messages are
    /// `framed`.
    fn answered(&mut self, answered: &Answered<'_>, query: &[u8], framed: &[u8]) {
        self.answers += 1;
        let connection = self.connection;
        if let Some(counting) = &self.counting {
            counting.answered(answered, || Some(connection.peer.ip()));
        }
        if let Some(received) = self.logged_at {
            self.query_log.log(&dnstap::Exchange {
                mechanism: connection.mechanism,
                client: connection.peer,
                server: connection.server,
                query,
                // The first message of a transfer stands for it.
                response: split_frame(framed).map_or(&[][..], |(first, _)| first),
                received,
                routed: answered.routed,
                http: None,
            });
        }
    }

    /// Counts the read's queries and its answers' latency.
    fn finish(self) {
        if let Some(counting) = self.counting {
            counting.received(self.queries);
            counting.latency(self.answers);
        }
    }
}

/// Answers a zone transfer query, appending its framed messages to
/// `output`, and logs it: transfers are rare, and an operator wants to
/// know who copied which zone, or was refused.
fn transfer<'s>(
    query: &Query<'_>,
    connection: &Stream,
    options: &ResponseOptions,
    snapshot: &'s Snapshot,
    output: &mut Vec<u8>,
) -> Answered<'s> {
    let Transferred { answered, sent } =
        respond_transfer(query, &connection.client, options, snapshot, |response| push_framed(output, response));
    let (client, zone, octets) = (connection.peer, name::Display(query.qname()), answered.len);
    if let Some(sent) = sent {
        let qtype = if query.question.is_some_and(|question| question.qtype == types::IXFR) { "IXFR" } else { "AXFR" };
        tracing::info!(%client, %zone, octets, signed = query.tsig_at.is_some(), %sent, "zone transferred ({qtype})");
    } else {
        tracing::info!(%client, %zone, rcode = answered.rcode, signed = query.tsig_at.is_some(), "zone transfer refused");
    }
    answered
}
