//! DNS over UDP: one socket per worker thread on the same address
//! (SO_REUSEPORT, so the kernel spreads clients across workers), each
//! reading and writing batches of datagrams with recvmmsg and sendmmsg.
//!
//! This loop is the hot path, so it talks to the kernel through `libc`
//! directly: one system call moves up to [`BATCH`] datagrams each way, and
//! every buffer is allocated once, when the worker starts.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use pharos_answer::{
    Answered, Client, Query, Reject, ResponseOptions, SharedSnapshot, Transport, parse_query, prefetch_batch, query_read,
    respond_oversized, respond_parsed,
};
use pharos_rrl::Verdict;
use rand::rngs::SmallRng;
use socket2::{Domain, Protocol, Socket, Type};

use crate::Observation;
use crate::cookies::CookieSecret;
use crate::dnstap;
use crate::dnstap::QueryLog;
use crate::limit::SourceLimiter;
use crate::metrics::Mechanism;
use crate::proxy::ProxySources;
use crate::rrl::{self, ResponseLimit, Sent};
use crate::updates::{UpdateRequest, Updates, is_update};

/// Datagrams moved per system call.
const BATCH: usize = 32;
/// Largest query read; a longer datagram is answered FORMERR.
const MAX_QUERY: usize = 4096;
/// Room reserved per response: the default payload limit and then some.
/// A larger response grows its buffer once, and the buffer keeps the room.
const RESPONSE_CAPACITY: usize = 2048;
/// How often an idle worker looks up to see whether it should stop.
pub const STOP_CHECK: Duration = Duration::from_millis(200);

/// Opens a UDP socket that other workers can share (SO_REUSEPORT).
pub fn bind_socket(address: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(address), Type::DGRAM, Some(Protocol::UDP))?;
    if address.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_port(true)?;
    socket.set_reuse_address(true)?;
    // A larger receive buffer absorbs bursts while a worker is busy.
    let _ = socket.set_recv_buffer_size(4 << 20);
    socket.bind(&address.into())?;
    socket.set_read_timeout(Some(STOP_CHECK))?;
    Ok(socket)
}

/// Per-worker buffers for one batch, reused for every batch.
struct Batch {
    queries: Vec<[u8; MAX_QUERY]>,
    responses: Vec<Vec<u8>>,
    /// Where each datagram came from, and where its response goes.
    peers: [libc::sockaddr_storage; BATCH],
    /// The client each datagram is from: its peer, or the client a PROXY
    /// header before its query names; and where that query starts.
    clients: [SocketAddr; BATCH],
    query_starts: [usize; BATCH],
    read_iov: [libc::iovec; BATCH],
    read_headers: [libc::mmsghdr; BATCH],
    write_iov: [libc::iovec; BATCH],
    write_headers: [libc::mmsghdr; BATCH],
}

/// What the responses of a batch say, on the stack: the first `ready`
/// are set.
struct Answers<'s> {
    said: [Option<Answered<'s>>; BATCH],
    /// The datagram each response answers, by its index in the batch.
    datagram: [usize; BATCH],
    ready: usize,
}

/// A received datagram, as the worker answers it.
enum Datagram<'a> {
    /// Longer than the receive buffer: answered from its header alone.
    Oversized(&'a [u8]),
    Parsed(Result<Query<'a>, Reject<'a>>),
}

impl Batch {
    fn new() -> Box<Batch> {
        // SAFETY: the libc structs are plain data for which all-zero is a
        // valid (empty) value; every pointer in them is set before use.
        let mut batch = Box::new(Batch {
            queries: vec![[0u8; MAX_QUERY]; BATCH],
            responses: (0..BATCH).map(|_| Vec::with_capacity(RESPONSE_CAPACITY)).collect(),
            peers: unsafe { zeroed() },
            clients: [SocketAddr::from(([0, 0, 0, 0], 0)); BATCH],
            query_starts: [0; BATCH],
            read_iov: unsafe { zeroed() },
            read_headers: unsafe { zeroed() },
            write_iov: unsafe { zeroed() },
            write_headers: unsafe { zeroed() },
        });
        for index in 0..BATCH {
            batch.read_iov[index] = libc::iovec { iov_base: batch.queries[index].as_mut_ptr().cast(), iov_len: MAX_QUERY };
        }
        batch
    }

    /// Receives up to BATCH datagrams; blocks until at least one arrives or
    /// the stop-check timeout passes.
    fn receive(&mut self, fd: i32) -> io::Result<usize> {
        for index in 0..BATCH {
            let header = &mut self.read_headers[index].msg_hdr;
            header.msg_name = (&mut self.peers[index] as *mut libc::sockaddr_storage).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as u32;
            header.msg_iov = &mut self.read_iov[index];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
        }
        // SAFETY: every header points at buffers owned by `self` that
        // outlive the call, with their true lengths.
        let received =
            unsafe { libc::recvmmsg(fd, self.read_headers.as_mut_ptr(), BATCH as u32, libc::MSG_WAITFORONE, std::ptr::null_mut()) };
        if received < 0 { Err(io::Error::last_os_error()) } else { Ok(received as usize) }
    }

    /// Answers each received datagram into its response buffer; returns
    /// what the responses say, as many as there are, in the order they are
    /// queued at the front of the write headers. Datagrams refused for
    /// their PROXY header (or its absence), counted in `counters`, and
    /// datagrams from a client over its query limit get no response; the
    /// rest are answered as from their client. Cookies are checked and
    /// given; and responses over their response limit (counted as of
    /// `now`, once for the batch) are dropped or slipped, unless their
    /// query proved its source with a good server cookie.
    fn answer<'s>(
        &mut self,
        received: usize,
        snapshot: &'s pharos_answer::Snapshot,
        rng: &mut SmallRng,
        defences: &Defences,
        observation: &Observation,
        now: BatchTime,
    ) -> Answers<'s> {
        let counters = &observation.counters;
        // Each datagram is parsed once, for the prefetch and the answer.
        let datagrams: [Option<(Client, Datagram<'_>)>; BATCH] = std::array::from_fn(|index| {
            if index >= received {
                return None;
            }
            let peer = peer_address(&self.peers[index])?;
            let header = &self.read_headers[index];
            let octets = &self.queries[index][..(header.msg_len as usize).min(MAX_QUERY)];
            let (client, query_start) = match defences.proxies.as_deref() {
                Some(proxies) => proxies.open_datagram(peer, octets, counters)?,
                None => (peer, 0),
            };
            (self.clients[index], self.query_starts[index]) = (client, query_start);
            let address = client.ip();
            if defences.queries.as_deref().is_some_and(|limiter| !limiter.allows(address)) {
                return None;
            }
            let packet = &octets[query_start..];
            if let Some(updates) = defences.updates.as_ref().filter(|_| is_update(packet)) {
                updates.hand_over(packet, client, peer);
                return None;
            }
            let datagram = if header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                Datagram::Oversized(packet)
            } else {
                Datagram::Parsed(parse_query(packet))
            };
            Some((Client { address, transport: Transport::Udp }, datagram))
        });
        let queries = datagrams.iter().flatten().filter_map(|(client, datagram)| match datagram {
            Datagram::Parsed(Ok(query)) => Some((query, client)),
            _ => None,
        });
        prefetch_batch(queries, snapshot);
        let mut answers = Answers { said: [None; BATCH], datagram: [0; BATCH], ready: 0 };
        for (index, decoded) in datagrams.into_iter().enumerate() {
            let Some((client, datagram)) = decoded else { continue };
            let response = &mut self.responses[index];
            response.clear();
            let (answered, query, proven) = match datagram {
                Datagram::Oversized(packet) => (respond_oversized(packet, response), None, false),
                Datagram::Parsed(parsed) => {
                    let query = parsed.ok();
                    let cookie = query_read(&parsed).and_then(|query| query.edns?.cookie);
                    let checked = defences
                        .cookies
                        .as_deref()
                        .zip(cookie)
                        .map(|(secret, cookie)| secret.check(&cookie, client.address, now.unix_seconds));
                    let now = crate::tsig_time(&parsed);
                    let options = ResponseOptions { cookie: checked.map(|checked| checked.reply), now, ..ResponseOptions::default() };
                    let answered = respond_parsed(parsed, &client, &options, snapshot, rng, response);
                    if let (Some(query), Some(answered)) = (&query, &answered) {
                        observation.notify_inbox.take(query, answered, client.address, snapshot);
                    }
                    (answered, query, checked.is_some_and(|checked| checked.proven))
                }
            };
            let answered = match (answered, defences.responses.as_deref()) {
                (Some(answered), Some(limit)) if !proven => {
                    let sent = Sent { at: now.arrived, to: client.address, query: query.as_ref(), answered };
                    limit_response(limit, &sent, response, snapshot)
                }
                (answered, _) => answered,
            };
            if let Some(answered) = answered {
                let ready = answers.ready;
                answers.said[ready] = Some(answered);
                answers.datagram[ready] = index;
                self.write_iov[ready] = libc::iovec { iov_base: response.as_mut_ptr().cast(), iov_len: response.len() };
                let write = &mut self.write_headers[ready].msg_hdr;
                write.msg_name = (&mut self.peers[index] as *mut libc::sockaddr_storage).cast();
                write.msg_namelen = self.read_headers[index].msg_hdr.msg_namelen;
                write.msg_iov = &mut self.write_iov[ready];
                write.msg_iovlen = 1;
                answers.ready += 1;
            }
        }
        answers
    }

    /// Sends the first `ready` responses, retrying the remainder of a
    /// partial send. A datagram the kernel refuses is dropped, as UDP may.
    fn send(&mut self, fd: i32, ready: usize) {
        let mut sent = 0;
        while sent < ready {
            // SAFETY: headers [sent, ready) point at live response buffers and peers.
            let result = unsafe { libc::sendmmsg(fd, self.write_headers[sent..].as_mut_ptr(), (ready - sent) as u32, 0) };
            if result <= 0 {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::debug!(%error, "sendmmsg dropped a datagram");
                sent += 1;
            } else {
                sent += result as usize;
            }
        }
    }

    /// Offers the batch's exchanges to the dnstap log, which picks its
    /// sample and never blocks.
    fn log(&self, query_log: &QueryLog, answers: &Answers<'_>, server: SocketAddr, received: SystemTime) {
        for (answered, &index) in answers.said.iter().zip(&answers.datagram).take(answers.ready) {
            let datagram = &self.queries[index][..(self.read_headers[index].msg_len as usize).min(MAX_QUERY)];
            query_log.log(&dnstap::Exchange {
                mechanism: Mechanism::Udp,
                client: self.clients[index],
                server,
                query: &datagram[self.query_starts[index]..],
                response: &self.responses[index],
                received,
                routed: answered.and_then(|answered| answered.routed),
                http: None,
            });
        }
    }
}

/// What a worker defends with, each where it is configured: the sources
/// whose PROXY headers it takes (and no other's), a limit on queries per
/// client address, DNS cookies, and a limit on alike responses per client
/// network.
#[derive(Debug, Clone, Default)]
pub struct Defences {
    pub proxies: Option<Arc<ProxySources>>,
    pub queries: Option<Arc<SourceLimiter>>,
    pub cookies: Option<Arc<CookieSecret>>,
    pub responses: Option<Arc<ResponseLimit>>,
    pub updates: Option<UdpUpdates>,
}

/// Where a UDP worker hands DNS UPDATEs, and the socket their replies
/// leave by (the worker's own, shared).
#[derive(Debug, Clone)]
pub struct UdpUpdates {
    pub applier: Arc<dyn Updates>,
    pub replies: Arc<std::net::UdpSocket>,
}

impl UdpUpdates {
    /// Hands `update` from `client` to the applier; its reply goes to
    /// `peer` (the client, or the proxy that relayed it).
    fn hand_over(&self, update: &[u8], client: SocketAddr, peer: SocketAddr) {
        let replies = self.replies.clone();
        let request = UpdateRequest { message: update.to_vec(), client, transport: "udp" };
        // A reply the kernel refuses is lost, as a UDP answer may be.
        self.applier.submit(request, Box::new(move |reply| drop(replies.send_to(&reply, peer))));
    }
}

/// The time a batch arrived, on the clocks its answers need.
#[derive(Clone, Copy)]
struct BatchTime {
    /// For the response rate limit's buckets.
    arrived: Instant,
    /// For cookies' timestamps; read only when cookies are on.
    unix_seconds: u32,
}

/// A response as the response limit lets it go out: whole, slipped (then
/// `response` is cut down to a truncated one) or not at all.
fn limit_response<'s>(
    limit: &ResponseLimit,
    sent: &Sent<'_, '_, 's>,
    response: &mut Vec<u8>,
    snapshot: &pharos_answer::Snapshot,
) -> Option<Answered<'s>> {
    match limit.check(sent, response, snapshot) {
        Verdict::Send => Some(sent.answered),
        Verdict::Slip => {
            let opt_at = rrl::slip(response, sent.query, sent.answered.opt_at);
            // A signed query's slip is signed too, or its client would
            // take the TC for a forgery and not retry over TCP. It is not
            // exempt from the limit, as Knot DNS's mod-rrl does not exempt
            // it (only a good cookie proves the source): a signed query
            // seen once can be replayed from forged sources within its fudge.
            if let Some(signed) = sent.query.filter(|query| query.tsig_at.is_some()) {
                pharos_answer::append_tsig(signed, snapshot, crate::unix_seconds(SystemTime::now()), response);
            }
            Some(Answered { smallest_ttl: None, len: response.len(), routed: None, opt_at, ..sent.answered })
        }
        Verdict::Drop => None,
    }
}

/// Reads the peer address the kernel wrote into a `sockaddr_storage`.
fn peer_address(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let v4 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))), u16::from_be(v4.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let v6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)), u16::from_be(v6.sin6_port)))
        }
        _ => None,
    }
}

/// What a worker shares with whoever started it: the flag that stops it,
/// and the count of its loop's turns, by which a watchdog tells a stuck
/// worker from an idle one (an idle one turns every [`STOP_CHECK`]).
#[derive(Clone, Default)]
pub struct Lifeline {
    pub stop: Arc<AtomicBool>,
    pub turns: Arc<AtomicU64>,
}

/// Serves DNS on `socket` until `lifeline` says stop, with the `defences`
/// that are configured, counting and logging into `observation`.
pub fn serve(
    socket: Socket,
    snapshot: SharedSnapshot,
    observation: Arc<Observation>,
    mut rng: SmallRng,
    defences: Defences,
    lifeline: Lifeline,
) {
    let fd = socket.as_raw_fd();
    let server = socket.local_addr().ok().and_then(|address| address.as_socket()).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    let mut batch = Batch::new();
    while !lifeline.stop.load(Ordering::Relaxed) {
        lifeline.turns.fetch_add(1, Ordering::Relaxed);
        let received = match batch.receive(fd) {
            Ok(received) => received,
            Err(error) if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => {
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, "recvmmsg failed");
                continue;
            }
        };
        let counting = observation.counters.counting(Mechanism::Udp);
        let arrived = Instant::now();
        let received_at = observation.query_log.logging().then(SystemTime::now);
        let current = snapshot.load();
        let unix_seconds = defences.cookies.as_ref().map_or(0, |_| crate::cookies::unix_seconds());
        let now = BatchTime { arrived, unix_seconds };
        let answers = batch.answer(received, &current, &mut rng, &defences, &observation, now);
        batch.send(fd, answers.ready);
        if let Some(counting) = counting {
            counting.received(received as u64);
            // The first `ready` responses are all set.
            for (answered, &index) in answers.said.iter().flatten().zip(&answers.datagram) {
                counting.answered(answered, || Some(batch.clients[index].ip()));
            }
            // Every query of the batch waited for the whole batch.
            counting.latency(answers.ready as u64);
        }
        if let Some(received_at) = received_at {
            batch.log(&observation.query_log, &answers, server, received_at);
        }
    }
}
