//! A stub resolver's view of DNS latency: queries sent over UDP on a
//! schedule fixed in advance (open loop: a slow answer never delays the next
//! query), each resent unchanged after a fixed timeout up to a number of
//! tries, as glibc's and Bionic's stubs do, and timed from its first
//! sending to the first answer.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::delayer::Random;

/// When each query is sent, and where in a burst it is.
#[derive(Debug, Clone, Copy)]
pub struct Planned {
    pub at: Duration,
    /// (burst, place in the burst), for burst schedules.
    pub burst: Option<(u32, u32)>,
}

/// Queries `count` times with gaps drawn uniformly from [min, max].
pub fn uniform(count: usize, min: Duration, max: Duration, seed: u64) -> Vec<Planned> {
    let mut random = Random::new(seed);
    let mut at = Duration::ZERO;
    (0..count)
        .map(|_| {
            let planned = Planned { at, burst: None };
            at += min + (max - min).mul_f64(random.next_f64());
            planned
        })
        .collect()
}

/// `bursts` bursts of `size` queries `spacing` apart, a burst every `period`.
pub fn bursts(bursts: u32, size: u32, spacing: Duration, period: Duration) -> Vec<Planned> {
    (0..bursts)
        .flat_map(|burst| (0..size).map(move |place| Planned { at: period * burst + spacing * place, burst: Some((burst, place)) }))
        .collect()
}

/// How the stub retries.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub timeout: Duration,
    pub tries: u32,
}

/// What became of one query.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub planned: Planned,
    pub sent_at: Instant,
    /// From the first sending to the first answer; `None`: no answer.
    pub latency: Option<Duration>,
    /// Times it was sent.
    pub sent: u32,
    /// The answer's RCODE.
    pub rcode: Option<u8>,
}

impl Outcome {
    /// Answered with NOERROR.
    pub fn answered(&self) -> bool {
        self.rcode == Some(0) && self.latency.is_some()
    }
}

/// A query for `name` (type A, no recursion asked for) with ID `id`.
pub fn query(id: u16, name: &str) -> Vec<u8> {
    let mut packet = id.to_be_bytes().to_vec();
    packet.extend([0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        packet.push(label.len() as u8);
        packet.extend(label.as_bytes());
    }
    packet.extend([0, 0, 1, 0, 1]);
    packet
}

/// The longest the stub sleeps at once. The kernel lets a sleep in ppoll
/// end late by 0.1% of its length, 0.5% in a niced process (its
/// `select_estimate_accuracy`): after the 1.4 s between two bursts that
/// sent a burst's first query up to 7 ms late, together with its second.
/// Sleeping at most this long keeps every query within 0.1 ms of its plan.
const LONGEST_SLEEP: Duration = Duration::from_millis(20);

/// Waits until `socket` has a datagram or `timeout` passes.
fn wait_readable(socket: &UdpSocket, timeout: Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let timeout = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    if unsafe { libc::ppoll(&raw mut poll, 1, &raw const timeout, std::ptr::null()) } < 0 {
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    Ok(())
}

struct Pending {
    query: Vec<u8>,
    first: Instant,
    next: Instant,
    sent: u32,
}

/// Sends the queries of `plan` (names `NAME_PREFIX-N.tail.test`, IDs from
/// `first_id`) to `server` from one socket, resending each after
/// `retry.timeout`, and returns what became of each, in plan order. Uses
/// the calling thread's network namespace.
pub fn run(server: SocketAddr, plan: &[Planned], retry: Retry, name_prefix: &str, first_id: u16) -> std::io::Result<Vec<Outcome>> {
    let bind: SocketAddr = if server.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let socket = UdpSocket::bind(bind)?;
    socket.set_nonblocking(true)?;
    let start = Instant::now() + Duration::from_millis(5);
    let mut outcomes: Vec<Option<Outcome>> = vec![None; plan.len()];
    let mut pending: std::collections::HashMap<u16, (usize, Pending)> = std::collections::HashMap::new();
    let mut next_planned = 0;
    let mut buffer = [0u8; 4096];
    while next_planned < plan.len() || !pending.is_empty() {
        let now = Instant::now();
        // Send what is due: new queries, then retransmissions.
        while next_planned < plan.len() && start + plan[next_planned].at <= now {
            let index = next_planned;
            let id = first_id.wrapping_add(index as u16);
            let packet = query(id, &format!("{name_prefix}-{index}.tail.test"));
            let sent_at = Instant::now();
            socket.send_to(&packet, server)?;
            let entry = Pending { query: packet, first: sent_at, next: sent_at + retry.timeout, sent: 1 };
            if let Some((stale, old)) = pending.insert(id, (index, entry)) {
                // The ID came round again while a query still had it.
                outcomes[stale] = Some(Outcome { planned: plan[stale], sent_at: old.first, latency: None, sent: old.sent, rcode: None });
            }
            next_planned += 1;
        }
        let mut given_up = Vec::new();
        for (&id, (index, entry)) in pending.iter_mut() {
            if entry.next <= now {
                if entry.sent >= retry.tries {
                    given_up.push(id);
                    outcomes[*index] =
                        Some(Outcome { planned: plan[*index], sent_at: entry.first, latency: None, sent: entry.sent, rcode: None });
                } else {
                    socket.send_to(&entry.query, server)?;
                    entry.sent += 1;
                    entry.next += retry.timeout;
                }
            }
        }
        for id in given_up {
            pending.remove(&id);
        }
        // Wait for an answer until the next thing to do.
        let mut wake = pending.values().map(|(_, entry)| entry.next).min();
        if next_planned < plan.len() {
            let planned = start + plan[next_planned].at;
            wake = Some(wake.map_or(planned, |wake| wake.min(planned)));
        }
        let Some(wake) = wake else { break };
        // ppoll's timeout is a high-resolution timer; SO_RCVTIMEO's counts
        // in jiffies, which would bunch queries planned a few ms apart.
        wait_readable(&socket, wake.saturating_duration_since(Instant::now()).min(LONGEST_SLEEP))?;
        let length = match socket.recv(&mut buffer) {
            Ok(length) => length,
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => continue,
            Err(error) => return Err(error),
        };
        let received = Instant::now();
        let answer = &buffer[..length];
        if length < 12 || answer[2] & 0x80 == 0 {
            continue;
        }
        let id = u16::from_be_bytes([answer[0], answer[1]]);
        // The same question as asked, or it is not this query's answer.
        let matches = pending.get(&id).is_some_and(|(_, entry)| {
            let question = &entry.query[12..];
            answer.len() >= 12 + question.len() && answer[12..12 + question.len()].eq_ignore_ascii_case(question)
        });
        if !matches {
            continue;
        }
        let (index, entry) = pending.remove(&id).unwrap();
        let latency = received - entry.first;
        outcomes[index] = Some(Outcome {
            planned: plan[index],
            sent_at: entry.first,
            latency: Some(latency),
            sent: entry.sent,
            rcode: Some(answer[3] & 0xf),
        });
    }
    Ok(outcomes.into_iter().map(|outcome| outcome.expect("every planned query has an outcome")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_gaps_stay_in_their_range_and_depend_on_the_seed() {
        let plan = uniform(1000, Duration::from_millis(50), Duration::from_millis(300), 1);
        let gaps: Vec<Duration> = plan.windows(2).map(|pair| pair[1].at - pair[0].at).collect();
        assert!(gaps.iter().all(|gap| (Duration::from_millis(50)..=Duration::from_millis(300)).contains(gap)));
        let mean = gaps.iter().sum::<Duration>() / gaps.len() as u32;
        assert!((Duration::from_millis(165)..Duration::from_millis(185)).contains(&mean), "{mean:?}");
        assert_ne!(uniform(3, Duration::ZERO, Duration::from_secs(1), 2)[1].at, plan[1].at);
    }

    #[test]
    fn bursts_are_spaced_within_and_between() {
        let plan = bursts(2, 3, Duration::from_millis(5), Duration::from_secs(1));
        let at: Vec<u128> = plan.iter().map(|planned| planned.at.as_millis()).collect();
        assert_eq!(at, [0, 5, 10, 1000, 1005, 1010]);
        assert_eq!(plan[4].burst, Some((1, 1)));
    }

    #[test]
    fn a_query_is_answered_or_given_up_after_its_tries() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let address = server.local_addr().unwrap();
        // Drops the first sending of query 1 (ID 2), answers the rest.
        std::thread::spawn(move || {
            let mut buffer = [0u8; 512];
            let mut dropped = false;
            loop {
                let Ok((length, from)) = server.recv_from(&mut buffer) else { return };
                if buffer[..2] != [0, 2] || std::mem::replace(&mut dropped, true) {
                    buffer[2] |= 0x80;
                    let _ = server.send_to(&buffer[..length], from);
                }
            }
        });
        let plan = uniform(3, Duration::from_millis(1), Duration::from_millis(2), 3);
        let retry = Retry { timeout: Duration::from_millis(100), tries: 2 };
        let outcomes = run(address, &plan, retry, "t", 1).unwrap();
        assert!(outcomes[0].latency.unwrap() < Duration::from_millis(100));
        assert_eq!((outcomes[1].sent, outcomes[1].rcode), (2, Some(0)));
        assert_eq!((outcomes[2].sent, outcomes[2].rcode), (1, Some(0)));
        assert!(outcomes[1].latency.unwrap() >= Duration::from_millis(100));
    }
}
