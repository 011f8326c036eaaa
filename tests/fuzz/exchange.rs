//! Sending many packets at once: for each server and transport a pool of
//! threads, each exchanging one packet at a time (wire::exchange, a fresh
//! socket or connection per packet), so that many queries are in flight per
//! server and a silent one holds up only its thread.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::wire::{Reply, Transport, exchange};

/// How long a reply may take. Replies on loopback take milliseconds; a
/// silence is confirmed again, alone, before it is reported.
pub const TIMEOUT: Duration = Duration::from_millis(300);
/// Packets in flight per server over UDP, and TCP connections per server.
const UDP_WIDTH: usize = 24;
const TCP_WIDTH: usize = 8;

/// One packet to send.
pub struct Job {
    pub server: SocketAddr,
    pub transport: Transport,
    pub packet: Vec<u8>,
}

/// Every job's reply, in the jobs' order.
pub fn run_all(jobs: &[Job]) -> Vec<Reply> {
    let results: Mutex<Vec<Option<Reply>>> = Mutex::new(vec![None; jobs.len()]);
    let mut groups: Vec<((SocketAddr, Transport), Vec<usize>)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let key = (job.server, job.transport);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let counters: Vec<AtomicUsize> = groups.iter().map(|_| AtomicUsize::new(0)).collect();
    std::thread::scope(|s| {
        for (((_, transport), members), next) in groups.iter().zip(&counters) {
            let width = if *transport == Transport::Udp { UDP_WIDTH } else { TCP_WIDTH };
            let results = &results;
            for _ in 0..width.min(members.len()) {
                s.spawn(move || {
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&i) = members.get(at) else { break };
                        let job = &jobs[i];
                        let reply = exchange(job.server, job.transport, &job.packet, TIMEOUT);
                        results.lock().unwrap()[i] = Some(reply);
                    }
                });
            }
        }
    });
    results.into_inner().unwrap().into_iter().map(|r| r.expect("every job ran")).collect()
}
