//! Sending many packets at once: over UDP pipelined on one socket per
//! server, up to `WINDOW` datagrams in flight and replies matched by
//! message ID, so that a silence costs one timeout however many others
//! share it; over TCP on `CONNECTIONS` connections per server, kept open
//! from query to query (no connection per query to open, and none to leave
//! in TIME_WAIT).
//!
//! Not pipelined over TCP: Knot closes the connection on a message it will
//! not answer, which would take the queries behind it down too. One query
//! at a time, a close is that query's answer, or (on a connection reused
//! after the server closed it) nobody's: a query that gets no reply is
//! asked once more on a new connection.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pharos_wire::framing::{framed, split_frame};

use crate::support::wire::{Reply, Transport};

/// How long a reply may take. Replies on loopback take milliseconds; a
/// silence is confirmed again, apart from the stream, before it is reported.
pub const TIMEOUT: Duration = Duration::from_millis(300);
/// Datagrams in flight per UDP socket: few, so that a server that stalls
/// a moment (NSD writing its log under load) loses none (32 in flight left
/// half again as many silences to confirm).
const WINDOW: usize = 8;
/// TCP connections per server, each carrying one query at a time.
const CONNECTIONS: usize = 8;

/// One packet to send. Packets sent to the same server over the same
/// transport in one `run_all` carry distinct IDs (their first two octets).
pub struct Job {
    pub server: SocketAddr,
    pub transport: Transport,
    pub packet: Vec<u8>,
}

/// A packet's message ID.
fn id_of(packet: &[u8]) -> u16 {
    assert!(packet.len() >= 2, "a packet of {} octets has no ID to match its reply by", packet.len());
    u16::from_be_bytes([packet[0], packet[1]])
}

/// Every job's reply, in the jobs' order.
pub fn run_all(jobs: &[Job]) -> Vec<Reply> {
    let mut groups: Vec<((SocketAddr, Transport), Vec<usize>)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let key = (job.server, job.transport);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let mut replies: Vec<Option<Reply>> = vec![None; jobs.len()];
    let answered: Vec<Vec<(usize, Reply)>> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .iter()
            .map(|((server, transport), members)| {
                let packets: Vec<&[u8]> = members.iter().map(|&i| jobs[i].packet.as_slice()).collect();
                s.spawn(move || {
                    let replies = match transport {
                        Transport::Udp => udp_pipelined(*server, &packets),
                        Transport::Tcp => tcp_shared(*server, &packets),
                    };
                    members.iter().copied().zip(replies).collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a sender thread panicked")).collect()
    });
    for (i, reply) in answered.into_iter().flatten() {
        replies[i] = Some(reply);
    }
    replies.into_iter().map(|r| r.expect("every job ran")).collect()
}

/// Sends each packet twice over UDP without waiting for the replies (they
/// go to a socket closed at once): to use up rate limits.
pub fn send_twice(server: SocketAddr, packets: &[Vec<u8>]) {
    let Ok(socket) = UdpSocket::bind("127.0.0.1:0") else { return };
    for packet in packets.iter().chain(packets) {
        let _ = socket.send_to(packet, server);
    }
}

/// Queries in flight on one UDP socket: ID -> (index, deadline).
#[derive(Default)]
struct InFlight(HashMap<u16, (usize, Instant)>);

impl InFlight {
    fn add(&mut self, packet: &[u8], index: usize) {
        let previous = self.0.insert(id_of(packet), (index, Instant::now() + TIMEOUT));
        assert!(previous.is_none(), "two packets in flight with ID {:#06x}", id_of(packet));
    }

    /// The index of the query a reply answers, if it is in flight.
    fn take(&mut self, reply: &[u8]) -> Option<usize> {
        (reply.len() >= 2).then(|| self.0.remove(&id_of(reply)).map(|(i, _)| i)).flatten()
    }

    /// How long until the first deadline (zero if one has passed).
    fn wait(&self) -> Option<Duration> {
        self.0.values().map(|(_, d)| d.saturating_duration_since(Instant::now())).min()
    }

    /// The queries whose deadline has passed, taken out.
    fn expired(&mut self) -> Vec<usize> {
        let now = Instant::now();
        let late: Vec<u16> = self.0.iter().filter(|(_, (_, d))| *d <= now).map(|(id, _)| *id).collect();
        late.into_iter().map(|id| self.0.remove(&id).unwrap().0).collect()
    }

    fn drain(&mut self) -> Vec<usize> {
        self.0.drain().map(|(_, (i, _))| i).collect()
    }
}

/// Whether a read error is a timeout.
fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Every packet sent to `server` over one UDP socket, `WINDOW` at a time.
fn udp_pipelined(server: SocketAddr, packets: &[&[u8]]) -> Vec<Reply> {
    let mut replies: Vec<Option<Reply>> = vec![None; packets.len()];
    let socket = match UdpSocket::bind("127.0.0.1:0").and_then(|s| s.connect(server).map(|()| s)) {
        Ok(s) => s,
        Err(e) => return packets.iter().map(|_| Reply::Error(format!("socket: {e}"))).collect(),
    };
    let mut in_flight = InFlight::default();
    let mut next = 0;
    let mut buf = vec![0u8; 65535];
    loop {
        while in_flight.0.len() < WINDOW && next < packets.len() {
            match socket.send(packets[next]) {
                Ok(_) => in_flight.add(packets[next], next),
                Err(e) => replies[next] = Some(Reply::Error(format!("send: {e}"))),
            }
            next += 1;
        }
        let Some(wait) = in_flight.wait() else { break };
        socket.set_read_timeout(Some(wait.max(Duration::from_millis(1)))).unwrap();
        match socket.recv(&mut buf) {
            Ok(n) => {
                // A reply to nothing in flight (a stray, or late) is dropped.
                if let Some(i) = in_flight.take(&buf[..n]) {
                    replies[i] = Some(Reply::Message(buf[..n].to_vec()));
                }
            }
            Err(e) if timed_out(&e) => {}
            // ICMP port unreachable: the server is gone.
            Err(e) => {
                for i in in_flight.drain() {
                    replies[i] = Some(Reply::Error(format!("recv: {e}")));
                }
            }
        }
        for i in in_flight.expired() {
            replies[i] = Some(Reply::Silence);
        }
    }
    replies.into_iter().map(|r| r.expect("every datagram was answered or timed out")).collect()
}

/// Every packet sent to `server` over `CONNECTIONS` TCP connections.
fn tcp_shared(server: SocketAddr, packets: &[&[u8]]) -> Vec<Reply> {
    let queue = Queue { next: AtomicUsize::new(0), total: packets.len(), again: Mutex::new(Vec::new()) };
    let mut replies: Vec<Option<Reply>> = vec![None; packets.len()];
    let answered: Vec<Vec<(usize, Reply)>> = std::thread::scope(|s| {
        let handles: Vec<_> =
            (0..CONNECTIONS.min(packets.len())).map(|_| s.spawn(|| Connection::new(server).run(packets, &queue))).collect();
        handles.into_iter().map(|h| h.join().expect("a TCP sender thread panicked")).collect()
    });
    for (i, reply) in answered.into_iter().flatten() {
        replies[i] = Some(reply);
    }
    replies.into_iter().map(|r| r.expect("every query was asked")).collect()
}

/// The queries for one server's TCP connections: each asked once, in
/// order, and once more if it got no reply.
struct Queue {
    next: AtomicUsize,
    total: usize,
    /// Queries to ask again.
    again: Mutex<Vec<usize>>,
}

impl Queue {
    /// The next query to ask, and whether this is its last try.
    fn claim(&self) -> Option<(usize, bool)> {
        if let Some(i) = self.again.lock().unwrap().pop() {
            return Some((i, true));
        }
        Some(self.next.fetch_add(1, Ordering::Relaxed)).filter(|&i| i < self.total).map(|i| (i, false))
    }

    fn put_back(&self, i: usize) {
        self.again.lock().unwrap().push(i);
    }
}

/// A TCP connection to a server kept open from query to query, opened
/// again when the server has closed it.
struct Connection {
    server: SocketAddr,
    stream: Option<TcpStream>,
}

impl Connection {
    fn new(server: SocketAddr) -> Self {
        Connection { server, stream: None }
    }

    /// Asks the queries it claims from `queue` (shared with the other
    /// connections to the server) one at a time; their replies. A query
    /// that gets none is put back once, to be asked again on a new
    /// connection: the one it went on may have been closed by the server
    /// after the query before.
    fn run(mut self, packets: &[&[u8]], queue: &Queue) -> Vec<(usize, Reply)> {
        let mut replies = Vec::new();
        while let Some((i, last_try)) = queue.claim() {
            match self.ask(packets[i]) {
                Reply::Silence if !last_try => queue.put_back(i),
                reply => replies.push((i, reply)),
            }
        }
        replies
    }

    /// One query and its reply; the connection is dropped unless the reply
    /// came whole.
    fn ask(&mut self, packet: &[u8]) -> Reply {
        let reply = self.exchange(packet);
        if !matches!(reply, Reply::Message(_)) {
            self.stream = None;
        }
        reply
    }

    fn exchange(&mut self, packet: &[u8]) -> Reply {
        if self.stream.is_none() {
            match TcpStream::connect_timeout(&self.server, TIMEOUT) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    self.stream = Some(stream);
                }
                Err(e) => return Reply::Error(format!("connect: {e}")),
            }
        }
        let stream = self.stream.as_mut().unwrap();
        if stream.write_all(&framed(packet)).is_err() {
            return Reply::Silence;
        }
        let deadline = Instant::now() + TIMEOUT;
        let mut frame = Vec::new();
        let mut buf = [0u8; 16384];
        loop {
            match split_frame(&frame) {
                Ok((message, _)) => return Reply::Message(message.to_vec()),
                Err(_) => {
                    let wait = deadline.saturating_duration_since(Instant::now());
                    if wait.is_zero() {
                        return Reply::Silence;
                    }
                    stream.set_read_timeout(Some(wait)).unwrap();
                    match stream.read(&mut buf) {
                        Ok(0) => return Reply::Silence,
                        Ok(n) => frame.extend_from_slice(&buf[..n]),
                        Err(e) if timed_out(&e) || e.kind() == ErrorKind::ConnectionReset => return Reply::Silence,
                        Err(e) => return Reply::Error(format!("read: {e}")),
                    }
                }
            }
        }
    }
}
