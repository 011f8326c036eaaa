//! The load loops: one thread drives several UDP sockets (sendmmsg /
//! recvmmsg, non-blocking, ppoll when idle) or several pipelined TCP
//! connections. Closed loop keeps `outstanding` queries in flight per
//! socket/connection; open loop (`rate`) paces sends by the clock.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::frame::FrameReader;
use crate::inflight::Inflight;
use crate::stats::Stats;
use dnsload::query::{MAX_QUERY_LEN, Query};

/// Messages per sendmmsg / recvmmsg call.
const BATCH: usize = 64;
/// Receive buffer per message; answers longer than this are still counted
/// (only the header and question are looked at).
const RECV_BUF: usize = 2048;
/// Longest sleep in ppoll, so that stop conditions are noticed promptly.
const MAX_WAIT_NS: u64 = 10_000_000;

/// Settings shared by all worker threads.
pub struct Shared<'a> {
    pub queries: &'a [Query],
    pub ecs: &'a [Vec<u8>],
    pub epoch: Instant,
    /// Stop sending this many ns after the epoch.
    pub duration_ns: u64,
    pub timeout_ns: u64,
    /// Max in flight per socket / connection.
    pub outstanding: usize,
}

impl Shared<'_> {
    #[inline]
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// What one thread is asked to do.
pub struct Job {
    /// Queries this thread may send (u64::MAX = unbounded).
    pub budget: u64,
    /// Queries per second for this thread (open loop), None = closed loop.
    pub rate: Option<f64>,
    /// Query sequence numbers of this thread: first, first + step, ...
    pub seq_first: u64,
    pub seq_step: u64,
}

/// Result of one thread.
pub struct Outcome {
    pub stats: Stats,
    /// When sending stopped (ns after the epoch).
    pub stop_ns: u64,
    /// Open loop: scheduled queries skipped because the sender fell behind.
    pub rate_skipped: u64,
}

/// Maps sequence numbers to (query, ECS option): query i uses query
/// i mod #queries and subnet i mod #subnets.
struct Sequence<'a> {
    next: u64,
    step: u64,
    queries: &'a [Query],
    ecs: &'a [Vec<u8>],
}

impl<'a> Sequence<'a> {
    #[inline]
    fn next(&mut self) -> (u32, Option<&'a [u8]>) {
        let i = self.next;
        self.next += self.step;
        let q = (i % self.queries.len() as u64) as u32;
        let e = if self.ecs.is_empty() { None } else { Some(self.ecs[(i % self.ecs.len() as u64) as usize].as_slice()) };
        (q, e)
    }

    /// Gives back the last `n` sequence numbers (queries not sent).
    #[inline]
    fn unget(&mut self, n: u64) {
        self.next -= n * self.step;
    }
}

/// Open-loop pacing: how many queries are due, and when the next one is.
///
/// Query k of the schedule is due at k / rate. When the sender falls
/// behind (descheduled, or the rate is beyond what it can do), at most
/// `max_backlog` (1 ms worth, at least 64) are sent at once and the rest of
/// the schedule is skipped and counted, rather than hitting the server with
/// a burst that the target rate never asked for.
struct Pacer {
    rate: f64,
    /// Schedule slots used: sent or skipped.
    scheduled: u64,
    skipped: u64,
    max_backlog: u64,
}

impl Pacer {
    fn new(rate: f64) -> Pacer {
        Pacer { rate, scheduled: 0, skipped: 0, max_backlog: ((rate / 1000.0) as u64).max(64) }
    }

    fn due(&mut self, now_ns: u64) -> u64 {
        let target = (self.rate * now_ns as f64 / 1e9) as u64 + 1;
        let due = target.saturating_sub(self.scheduled);
        if due > self.max_backlog {
            let skip = due - self.max_backlog;
            self.skipped += skip;
            self.scheduled += skip;
            return self.max_backlog;
        }
        due
    }

    fn next_due_ns(&self) -> u64 {
        ((self.scheduled as f64) * 1e9 / self.rate) as u64
    }
}

/// Send/stop bookkeeping common to UDP and TCP loops.
struct Control {
    budget: u64,
    pacer: Option<Pacer>,
    sending: bool,
    stop_ns: u64,
}

impl Control {
    fn new(job: &Job) -> Control {
        Control { budget: job.budget, pacer: job.rate.map(Pacer::new), sending: true, stop_ns: 0 }
    }

    /// Updates the stop condition; returns how many may be sent now.
    fn allowance(&mut self, sh: &Shared, now: u64) -> u64 {
        if self.sending && (now >= sh.duration_ns || self.budget == 0) {
            self.sending = false;
            self.stop_ns = now;
        }
        if !self.sending {
            return 0;
        }
        match &mut self.pacer {
            Some(p) => p.due(now).min(self.budget),
            None => self.budget,
        }
    }

    fn sent(&mut self, n: u64) {
        self.budget -= n;
        if let Some(p) = &mut self.pacer {
            p.scheduled += n;
        }
    }

    /// How long to sleep when nothing happened.
    fn wait_ns(&self, sh: &Shared, now: u64, oldest: Option<u64>) -> u64 {
        let mut until = now + MAX_WAIT_NS;
        if self.sending {
            until = until.min(sh.duration_ns);
            if let Some(p) = &self.pacer {
                until = until.min(p.next_due_ns());
            }
        } else {
            until = until.min(self.stop_ns + sh.timeout_ns);
        }
        if let Some(o) = oldest {
            until = until.min(o + sh.timeout_ns);
        }
        until.saturating_sub(now)
    }

    /// True once sending stopped and everything is answered or timed out.
    fn finished(&self, sh: &Shared, now: u64, in_flight: usize) -> bool {
        !self.sending && (in_flight == 0 || now >= self.stop_ns + sh.timeout_ns)
    }
}

fn ppoll(fds: &mut [libc::pollfd], wait_ns: u64) {
    let ts = libc::timespec { tv_sec: (wait_ns / 1_000_000_000) as libc::time_t, tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long };
    // SAFETY: fds is a valid slice of pollfd; ts outlives the call.
    unsafe {
        libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null());
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Creates a non-blocking UDP socket bound to an ephemeral port (of
/// `source` when given) and connected to `server`.
pub fn udp_socket(server: SocketAddr, source: Option<IpAddr>) -> io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(server), Type::DGRAM, Some(Protocol::UDP))?;
    // Large buffers absorb bursts of answers; failures here are harmless.
    let _ = s.set_recv_buffer_size(4 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    let any: IpAddr = if server.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    s.bind(&SocketAddr::new(source.unwrap_or(any), 0).into())?;
    s.connect(&server.into())?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// sendmmsg / recvmmsg vectors, allocated once per thread. Boxed so that
/// the self-referencing pointers stay valid.
struct MmsgBufs {
    send_data: Box<[[u8; MAX_QUERY_LEN]; BATCH]>,
    send_iov: [libc::iovec; BATCH],
    send_hdr: [libc::mmsghdr; BATCH],
    send_ids: [u16; BATCH],
    recv_data: Box<[[u8; RECV_BUF]; BATCH]>,
    recv_iov: [libc::iovec; BATCH],
    recv_hdr: [libc::mmsghdr; BATCH],
}

impl MmsgBufs {
    fn new() -> Box<MmsgBufs> {
        // SAFETY: iovec and mmsghdr are plain C structs for which all-zero
        // is a valid value; the pointers are filled in below.
        let mut b: Box<MmsgBufs> = Box::new(MmsgBufs {
            send_data: Box::new([[0; MAX_QUERY_LEN]; BATCH]),
            send_iov: unsafe { std::mem::zeroed() },
            send_hdr: unsafe { std::mem::zeroed() },
            send_ids: [0; BATCH],
            recv_data: Box::new([[0; RECV_BUF]; BATCH]),
            recv_iov: unsafe { std::mem::zeroed() },
            recv_hdr: unsafe { std::mem::zeroed() },
        });
        for i in 0..BATCH {
            b.send_iov[i].iov_base = b.send_data[i].as_mut_ptr().cast();
            b.send_iov[i].iov_len = 0;
            b.send_hdr[i].msg_hdr.msg_iov = &mut b.send_iov[i];
            b.send_hdr[i].msg_hdr.msg_iovlen = 1;
            b.recv_iov[i].iov_base = b.recv_data[i].as_mut_ptr().cast();
            b.recv_iov[i].iov_len = RECV_BUF;
            b.recv_hdr[i].msg_hdr.msg_iov = &mut b.recv_iov[i];
            b.recv_hdr[i].msg_hdr.msg_iovlen = 1;
        }
        b
    }
}

struct UdpEndpoint {
    sock: UdpSocket,
    inflight: Inflight,
}

/// Smallest closed-loop send batch: a socket waits until this many of its
/// slots are free, so that a saturated server is not answered with one
/// sendmmsg per answer.
fn min_send(sh: &Shared, job: &Job) -> usize {
    if job.rate.is_some() { 1 } else { (sh.outstanding / 8).clamp(1, 16) }
}

/// Runs the UDP loop on this thread over `socks`.
///
/// Each round: ppoll (without sleeping if something can be sent), drain the
/// readable sockets with recvmmsg, refill each socket with one sendmmsg,
/// expire timeouts.
pub fn run_udp(sh: &Shared, job: &Job, socks: Vec<UdpSocket>) -> Outcome {
    let mut eps: Vec<UdpEndpoint> = socks.into_iter().map(|sock| UdpEndpoint { sock, inflight: Inflight::new() }).collect();
    let mut pollfds: Vec<libc::pollfd> =
        eps.iter().map(|e| libc::pollfd { fd: e.sock.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    let mut b = MmsgBufs::new();
    let mut stats = Stats::new();
    let mut ctl = Control::new(job);
    let mut seq = Sequence { next: job.seq_first, step: job.seq_step, queries: sh.queries, ecs: sh.ecs };
    let min_send = min_send(sh, job);
    let mut oldest: Option<u64> = None;
    let mut rr = 0usize; // rotating first socket, so paced sends spread out

    loop {
        let now = sh.now();
        let mut allowance = ctl.allowance(sh, now);
        let can_send =
            allowance > 0 && eps.iter().any(|e| sh.outstanding.saturating_sub(e.inflight.len()) >= min_send.min(allowance as usize));
        let wait = if can_send { 0 } else { ctl.wait_ns(sh, now, oldest) };
        ppoll(&mut pollfds, wait);

        let n_eps = eps.len();
        for k in 0..n_eps {
            let i = (rr + k) % n_eps;
            let ep = &mut eps[i];
            let fd = ep.sock.as_raw_fd();

            // Receive everything that is waiting.
            if pollfds[i].revents != 0 {
                loop {
                    // SAFETY: recv_hdr holds BATCH valid headers pointing
                    // into recv_data; the socket is connected, so no name.
                    let n = unsafe { libc::recvmmsg(fd, b.recv_hdr.as_mut_ptr(), BATCH as u32, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
                    if n < 0 {
                        match errno() {
                            libc::EAGAIN | libc::EINTR => {}
                            _ => stats.recv_errors += 1, // e.g. ECONNREFUSED
                        }
                        break;
                    }
                    let t = sh.now();
                    for j in 0..n as usize {
                        let len = (b.recv_hdr[j].msg_len as usize).min(RECV_BUF);
                        stats.on_response(&b.recv_data[j][..len], &mut ep.inflight, sh.queries, t);
                    }
                    if (n as usize) < BATCH {
                        break;
                    }
                }
            }

            // Send a batch.
            let room = sh.outstanding.saturating_sub(ep.inflight.len());
            let n = room.min(BATCH).min(allowance.min(BATCH as u64) as usize);
            if n == 0 || n < min_send.min(allowance as usize) {
                continue;
            }
            let t = sh.now();
            let mut prepared = 0;
            while prepared < n {
                let (qidx, opt) = seq.next();
                let Some(id) = ep.inflight.insert(qidx, t) else {
                    seq.unget(1);
                    break;
                };
                let len = sh.queries[qidx as usize].encode_into(&mut b.send_data[prepared], id, opt);
                b.send_iov[prepared].iov_len = len;
                b.send_ids[prepared] = id;
                prepared += 1;
            }
            // SAFETY: the first `prepared` headers point at filled buffers;
            // connected socket, so no destination address.
            let r = unsafe { libc::sendmmsg(fd, b.send_hdr.as_mut_ptr(), prepared as u32, 0) };
            let sent = if r < 0 {
                match errno() {
                    libc::EAGAIN | libc::EINTR | libc::ENOBUFS => {}
                    _ => stats.send_errors += 1,
                }
                0
            } else {
                r as usize
            };
            for &id in &b.send_ids[sent..prepared] {
                ep.inflight.cancel(id);
            }
            seq.unget((prepared - sent) as u64);
            stats.sent += sent as u64;
            ctl.sent(sent as u64);
            allowance -= sent as u64;
        }
        rr = rr.wrapping_add(1);

        let now = sh.now();
        let mut in_flight = 0;
        oldest = None;
        for ep in &mut eps {
            stats.lost += ep.inflight.expire(now, sh.timeout_ns);
            in_flight += ep.inflight.len();
            if let Some(o) = ep.inflight.oldest() {
                oldest = Some(oldest.map_or(o, |x| x.min(o)));
            }
        }
        if ctl.finished(sh, now, in_flight) {
            for ep in &mut eps {
                stats.lost += ep.inflight.clear();
            }
            break;
        }
    }
    Outcome { stats, stop_ns: ctl.stop_ns, rate_skipped: ctl.pacer.map_or(0, |p| p.skipped) }
}

struct TcpConn {
    stream: Option<TcpStream>,
    inflight: Inflight,
    reader: FrameReader,
    wbuf: Vec<u8>,
    wpos: usize,
    next_connect_ns: u64,
    /// Index in the poll set of this round, if polled.
    poll_idx: Option<usize>,
}

/// Opens a TCP connection for the load loop.
pub fn tcp_connect(server: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&server, Duration::from_secs(1))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Runs the TCP loop on this thread over `streams` (already connected; a
/// connection that fails is re-opened while sending continues).
///
/// Each round: ppoll, read and match complete frames on readable
/// connections, queue up to the free slots as one buffer per connection
/// once the previous one is written out, write, expire timeouts.
pub fn run_tcp(sh: &Shared, job: &Job, server: SocketAddr, streams: Vec<TcpStream>) -> Outcome {
    let wcap = sh.outstanding.min(4096) * (2 + MAX_QUERY_LEN);
    let mut conns: Vec<TcpConn> = streams
        .into_iter()
        .map(|s| TcpConn {
            stream: Some(s),
            inflight: Inflight::new(),
            reader: FrameReader::new(256 * 1024),
            wbuf: Vec::with_capacity(wcap),
            wpos: 0,
            next_connect_ns: 0,
            poll_idx: None,
        })
        .collect();
    let mut pollfds: Vec<libc::pollfd> = Vec::with_capacity(conns.len());
    let mut stats = Stats::new();
    let mut ctl = Control::new(job);
    let mut seq = Sequence { next: job.seq_first, step: job.seq_step, queries: sh.queries, ecs: sh.ecs };
    let min_send = min_send(sh, job);
    let mut qbuf = [0u8; MAX_QUERY_LEN];
    let mut oldest: Option<u64> = None;
    let mut rr = 0usize;

    loop {
        let now = sh.now();
        let mut allowance = ctl.allowance(sh, now);

        // Reconnect broken connections while sending.
        for c in &mut conns {
            if c.stream.is_none() && ctl.sending && now >= c.next_connect_ns {
                match tcp_connect(server) {
                    Ok(s) => c.stream = Some(s),
                    Err(_) => {
                        stats.conn_failures += 1;
                        c.next_connect_ns = sh.now() + 100_000_000;
                    }
                }
            }
        }

        let mut can_send = false;
        pollfds.clear();
        for c in &mut conns {
            c.poll_idx = None;
            if let Some(s) = &c.stream {
                let mut events = libc::POLLIN;
                if c.wpos < c.wbuf.len() {
                    events |= libc::POLLOUT;
                } else if allowance > 0 && sh.outstanding.saturating_sub(c.inflight.len()) >= min_send.min(allowance as usize) {
                    can_send = true;
                }
                c.poll_idx = Some(pollfds.len());
                pollfds.push(libc::pollfd { fd: s.as_raw_fd(), events, revents: 0 });
            }
        }
        let mut wait = if can_send { 0 } else { ctl.wait_ns(sh, now, oldest) };
        if ctl.sending && conns.iter().any(|c| c.stream.is_none()) {
            wait = wait.min(100_000_000);
        }
        ppoll(&mut pollfds, wait);

        let n_conns = conns.len();
        for k in 0..n_conns {
            let c = &mut conns[(rr + k) % n_conns];
            let (Some(stream), Some(pi)) = (c.stream.as_mut(), c.poll_idx) else { continue };
            let revents = pollfds[pi].revents;
            let mut broken = false;

            // Read and match complete frames.
            if revents != 0 {
                loop {
                    let spare = c.reader.spare();
                    let want = spare.len();
                    match stream.read(spare) {
                        Ok(0) => {
                            broken = true;
                            break;
                        }
                        Ok(n) => {
                            c.reader.filled(n);
                            let t = sh.now();
                            while let Some(msg) = c.reader.next_frame() {
                                stats.on_response(msg, &mut c.inflight, sh.queries, t);
                            }
                            if n < want {
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            stats.recv_errors += 1;
                            broken = true;
                            break;
                        }
                    }
                }
            }

            // Queue more queries once the previous batch is written out.
            if !broken && c.wpos == c.wbuf.len() {
                c.wbuf.clear();
                c.wpos = 0;
                let room = sh.outstanding.saturating_sub(c.inflight.len()) as u64;
                let n = room.min(allowance);
                if n > 0 && n >= min_send.min(allowance as usize) as u64 {
                    let t = sh.now();
                    let mut queued = 0;
                    while queued < n {
                        let (qidx, opt) = seq.next();
                        let Some(id) = c.inflight.insert(qidx, t) else {
                            seq.unget(1);
                            break;
                        };
                        let len = sh.queries[qidx as usize].encode_into(&mut qbuf, id, opt);
                        pharos_wire::framing::push_framed(&mut c.wbuf, &qbuf[..len]);
                        queued += 1;
                    }
                    stats.sent += queued;
                    ctl.sent(queued);
                    allowance -= queued;
                }
            }

            // Write what is pending.
            while !broken && c.wpos < c.wbuf.len() {
                match stream.write(&c.wbuf[c.wpos..]) {
                    Ok(0) => broken = true,
                    Ok(n) => c.wpos += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        stats.send_errors += 1;
                        broken = true;
                    }
                }
            }

            if broken {
                // Everything still in flight on this connection is lost.
                stats.lost += c.inflight.clear();
                if ctl.sending {
                    stats.conn_failures += 1;
                }
                c.stream = None;
                c.reader.clear();
                c.wbuf.clear();
                c.wpos = 0;
            }
        }
        rr = rr.wrapping_add(1);

        let now = sh.now();
        let mut in_flight = 0;
        oldest = None;
        for c in &mut conns {
            stats.lost += c.inflight.expire(now, sh.timeout_ns);
            in_flight += c.inflight.len();
            if let Some(o) = c.inflight.oldest() {
                oldest = Some(oldest.map_or(o, |x| x.min(o)));
            }
        }
        if ctl.finished(sh, now, in_flight) {
            for c in &mut conns {
                stats.lost += c.inflight.clear();
            }
            break;
        }
    }
    Outcome { stats, stop_ns: ctl.stop_ns, rate_skipped: ctl.pacer.map_or(0, |p| p.skipped) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_counts_due_queries() {
        let mut p = Pacer::new(1000.0);
        assert_eq!(p.due(0), 1);
        assert_eq!(p.due(10_000_000), 11);
        p.scheduled = 11;
        assert_eq!(p.due(10_000_000), 0);
        assert_eq!(p.next_due_ns(), 11_000_000);
        // 1 s behind: only max_backlog (64) now, the rest skipped.
        assert_eq!(p.due(1_010_000_000), 64);
        assert_eq!(p.skipped, 1011 - 11 - 64);
        p.scheduled += 64;
        assert_eq!(p.due(1_010_000_000), 0);
    }

    #[test]
    fn udp_socket_sends_from_the_source_asked() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        let client = udp_socket(server.local_addr().unwrap(), Some(source)).unwrap();
        client.send(b"q").unwrap();
        let mut buf = [0u8; 4];
        let (_, from) = server.recv_from(&mut buf).unwrap();
        assert_eq!(from, client.local_addr().unwrap());
        assert_eq!(from.ip(), source);
    }

    #[test]
    fn sequence_cycles_queries_and_subnets() {
        let qs = vec![Query::new("a", 1).unwrap(), Query::new("b", 1).unwrap(), Query::new("c", 1).unwrap()];
        let ecs = vec![vec![1u8], vec![2u8]];
        let mut s = Sequence { next: 1, step: 2, queries: &qs, ecs: &ecs };
        let got: Vec<(u32, u8)> = (0..4).map(|_| s.next()).map(|(q, e)| (q, e.unwrap()[0])).collect();
        // i = 1, 3, 5, 7
        assert_eq!(got, vec![(1, 2), (0, 2), (2, 2), (1, 2)]);
        s.unget(2);
        assert_eq!(s.next().0, 2);
    }
}
