//! netem's delay and loss, in user space: every packet the kernel queues
//! (here: every IPv4 packet arriving on one side of the link) is held for a
//! fixed delay and then accepted, in arrival order, or dropped on arrival
//! with a fixed probability from a seeded generator. With a constant delay
//! and no rate limit this is what `tc qdisc ... netem delay D loss P` does
//! to the packets of one direction.
//!
//! A second kind of loss, for the head-of-line experiment: the first data
//! packet of a flow after it was idle (a burst's first query or answer) is
//! dropped, in one burst out of `every`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::nfqueue::{Packet, Queue};

/// What to do to the packets of one direction.
#[derive(Debug, Clone)]
pub struct Shaping {
    /// How long each packet is held.
    pub delay: Duration,
    /// The probability that a packet is dropped, while armed.
    pub loss: f64,
    pub seed: u64,
    /// Targeted drops, while armed.
    pub target: Option<Target>,
}

/// Drops the first data packet of a flow after it was idle for `idle`, in
/// one such burst out of `every` (the first, then every `every`-th).
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub idle: Duration,
    pub every: u32,
    /// UDP datagrams shorter than this carry no query or answer (QUIC
    /// acknowledgements, pings): not data.
    pub min_udp_payload: usize,
}

/// A dropped packet.
#[derive(Debug, Clone)]
pub struct Dropped {
    pub at: Instant,
    pub targeted: bool,
    pub flow: Flow,
    /// Transport payload octets (TCP segment data, UDP datagram data).
    pub payload: usize,
}

/// IPv4 protocol, addresses and ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    pub protocol: u8,
    pub source: ([u8; 4], u16),
    pub destination: ([u8; 4], u16),
}

/// Counters of one run of [`run`].
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub packets: u64,
    pub dropped_random: u64,
    pub dropped_targeted: u64,
    /// The most packets held at once.
    pub most_held: usize,
    /// How late the latest verdict came after its due time.
    pub latest: Duration,
    /// Held packets that were released late by more than a millisecond.
    pub late_over_1ms: u64,
}

/// The flow and transport payload length of an IPv4 TCP or UDP packet.
pub fn parse(data: &[u8]) -> Option<(Flow, usize)> {
    if data.len() < 20 || data[0] >> 4 != 4 {
        return None;
    }
    let header = usize::from(data[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let protocol = data[9];
    let transport = data.get(header..)?;
    if transport.len() < 4 {
        return None;
    }
    let ports = (u16::from_be_bytes([transport[0], transport[1]]), u16::from_be_bytes([transport[2], transport[3]]));
    let payload = match protocol {
        6 => total.checked_sub(header + usize::from(transport.get(12)? >> 4) * 4)?,
        17 => total.checked_sub(header + 8)?,
        _ => return None,
    };
    let address = |at: usize| -> [u8; 4] { data[at..at + 4].try_into().unwrap() };
    Some((Flow { protocol, source: (address(12), ports.0), destination: (address(16), ports.1) }, payload))
}

/// splitmix64: small, seeded, good enough for Bernoulli draws.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct FlowState {
    last_data: Option<Instant>,
    bursts: u32,
}

/// Shapes the packets of `queue` until `stop`; loss (random and targeted)
/// only while `armed`. Every drop is appended to `log`. At the end every
/// packet still held is accepted.
pub fn run(queue: &mut Queue, shaping: &Shaping, armed: &AtomicBool, stop: &AtomicBool, log: &Mutex<Vec<Dropped>>) -> io::Result<Counters> {
    let mut random = Random::new(shaping.seed);
    let mut counters = Counters::default();
    let mut held: VecDeque<(u32, Instant)> = VecDeque::new();
    let mut flows: HashMap<Flow, FlowState> = HashMap::new();
    let mut arrived: Vec<Packet> = Vec::new();
    loop {
        let now = Instant::now();
        while let Some(&(id, due)) = held.front() {
            if due > now {
                break;
            }
            queue.verdict(id, true)?;
            held.pop_front();
            let late = now - due;
            counters.latest = counters.latest.max(late);
            counters.late_over_1ms += u64::from(late > Duration::from_millis(1));
        }
        if stop.load(Ordering::Relaxed) {
            for (id, _) in held.drain(..) {
                queue.verdict(id, true)?;
            }
            return Ok(counters);
        }
        let wait = held.front().map_or(Duration::from_millis(20), |&(_, due)| due.saturating_duration_since(now));
        queue.wait(wait.min(Duration::from_millis(20)))?;
        arrived.clear();
        queue.receive(&mut arrived)?;
        for packet in &arrived {
            let now = Instant::now();
            counters.packets += 1;
            let parsed = parse(&packet.data);
            let is_armed = armed.load(Ordering::Relaxed);
            let mut targeted = false;
            if let (Some(target), Some((flow, payload))) = (shaping.target, parsed) {
                let data = if flow.protocol == 6 { payload > 0 } else { payload >= target.min_udp_payload };
                if data {
                    let state = flows.entry(flow).or_insert(FlowState { last_data: None, bursts: 0 });
                    // A new flow's first data (a TLS ClientHello, a QUIC
                    // Initial) is no burst's query.
                    let after_idle = state.last_data.is_some_and(|last| now - last >= target.idle);
                    if after_idle && is_armed {
                        targeted = state.bursts.is_multiple_of(target.every.max(1));
                        state.bursts += 1;
                    }
                    state.last_data = Some(now);
                }
            }
            let random_drop = is_armed && shaping.loss > 0.0 && random.next_f64() < shaping.loss;
            if targeted || random_drop {
                queue.verdict(packet.id, false)?;
                if targeted {
                    counters.dropped_targeted += 1;
                } else {
                    counters.dropped_random += 1;
                }
                if let Some((flow, payload)) = parsed {
                    log.lock().unwrap().push(Dropped { at: now, targeted, flow, payload });
                }
            } else {
                held.push_back((packet.id, now + shaping.delay));
                counters.most_held = counters.most_held.max(held.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_udp_payload_lengths() {
        let mut tcp = vec![0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2];
        tcp.extend([0x9c, 0x40, 0x03, 0x55, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x18]);
        let (flow, payload) = parse(&tcp).unwrap();
        assert_eq!((flow.protocol, flow.source, flow.destination, payload), (6, ([10, 77, 0, 1], 40000), ([10, 77, 0, 2], 853), 20));
        let mut udp = vec![0x45, 0, 0, 100, 0, 0, 0, 0, 64, 17, 0, 0, 10, 77, 0, 2, 10, 77, 0, 1];
        udp.extend([0, 53, 0x9c, 0x40]);
        assert_eq!(parse(&udp).unwrap().1, 72);
    }

    #[test]
    fn random_draws_are_seeded_and_fair() {
        let mut random = Random::new(7);
        let draws: Vec<f64> = (0..100_000).map(|_| random.next_f64()).collect();
        assert_eq!(Random::new(7).next_f64(), draws[0]);
        let below = draws.iter().filter(|&&draw| draw < 0.02).count();
        assert!((1_800..2_200).contains(&below), "{below}");
    }
}
