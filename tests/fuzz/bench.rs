//! The servers under comparison as the fuzzer drives them: a batch of
//! queries sent to all of them over UDP and TCP, one query sent again
//! alone, and a difference made as small as it goes.

use std::net::SocketAddr;

use super::exchange::{Job, run_all};
use super::query::{CLIENT_COOKIE, FuzzQuery, OPT_COOKIE, Opt, Target};
use super::verdict::{Finding, Side, judge};
use crate::support::compare::Observed;
use crate::support::norm::raw_option;
use crate::support::servers::{Extras, Server};
use crate::support::wire::{Reply, Transport, exchange};

/// Most simplification steps for one difference.
const MAX_STEPS: usize = 200;

pub struct Bench<'s> {
    pub servers: Vec<&'s Server>,
    /// Origins served, lower case with the trailing dot.
    pub zones: Vec<&'static str>,
    /// Rate limiting is on: a query sent again alone is sent three times
    /// over UDP and the last reply kept, so that it meets a limited bucket
    /// as it did in the stream.
    pub rrl: bool,
    /// Each server's good cookie (cookies configurations), renewed per batch.
    pub cookies: bool,
    good_cookies: Vec<Option<Vec<u8>>>,
    /// The servers sign with keys of their own: signatures, keys and
    /// denial records are left out of every reply.
    pub signed: bool,
}

impl<'s> Bench<'s> {
    pub fn new(servers: Vec<&'s Server>, zones: Vec<&'static str>, extras: &Extras) -> Self {
        let good_cookies = vec![None; servers.len()];
        Bench { servers, zones, rrl: extras.rrl.is_some(), cookies: extras.cookies, good_cookies, signed: extras.signed }
    }

    fn observe(&self, reply: Reply) -> Observed {
        let mut observed = Observed::from_reply(reply);
        if let (true, Observed::Message(m)) = (self.signed, &mut observed) {
            m.strip_signatures();
        }
        observed
    }

    pub fn addr(&self, name: &str) -> SocketAddr {
        self.servers.iter().find(|s| s.name == name).unwrap().addr
    }

    /// Asks every server for a server cookie for `CLIENT_COOKIE` (over TCP:
    /// never rate-limited).
    pub fn renew_cookies(&mut self) {
        if !self.cookies {
            return;
        }
        let mut q = FuzzQuery::plain(vec![], 6);
        q.opt = Some(Opt { options: vec![super::query::EdnsOption::Raw(OPT_COOKIE, CLIENT_COOKIE.to_vec())], ..Opt::default() });
        let packet = q.encode(&Target { id: 0xc00c, good_cookie: None });
        for (server, cookie) in self.servers.iter().zip(&mut self.good_cookies) {
            if let Reply::Message(m) = exchange(server.addr, Transport::Tcp, &packet, super::exchange::TIMEOUT) {
                *cookie = raw_option(&m, OPT_COOKIE).filter(|c| c.len() > 8);
            }
        }
    }

    fn packet(&self, q: &FuzzQuery, server: usize, id: u16) -> Vec<u8> {
        q.encode(&Target { id, good_cookie: self.good_cookies[server].clone() })
    }

    /// Sends every query to every server over both transports; each
    /// query's sides, in order.
    pub fn send(&self, queries: &[FuzzQuery], first_id: u16) -> Vec<Vec<Side>> {
        let mut jobs = Vec::new();
        let mut packets = Vec::new();
        for (i, q) in queries.iter().enumerate() {
            let id = first_id.wrapping_add(i as u16);
            let per_server: Vec<Vec<u8>> = (0..self.servers.len()).map(|s| self.packet(q, s, id)).collect();
            for (s, packet) in per_server.iter().enumerate() {
                for transport in [Transport::Udp, Transport::Tcp] {
                    jobs.push(Job { server: self.servers[s].addr, transport, packet: packet.clone() });
                }
            }
            packets.push(per_server);
        }
        let mut replies = run_all(&jobs).into_iter();
        packets
            .into_iter()
            .map(|per_server| {
                per_server
                    .into_iter()
                    .enumerate()
                    .map(|(s, packet)| {
                        let udp = self.observe(replies.next().unwrap());
                        let tcp = self.observe(replies.next().unwrap());
                        Side { name: self.servers[s].name, packet, udp, tcp }
                    })
                    .collect()
            })
            .collect()
    }

    /// One query sent again alone (see `rrl`); what differs.
    pub fn judge_alone(&self, q: &FuzzQuery) -> (Vec<Side>, Vec<Finding>) {
        if self.rrl {
            for _ in 0..2 {
                let warm: Vec<Job> = (0..self.servers.len())
                    .map(|s| Job { server: self.servers[s].addr, transport: Transport::Udp, packet: self.packet(q, s, 0x5151) })
                    .collect();
                run_all(&warm);
            }
        }
        let sides = self.send(std::slice::from_ref(q), 0x5152).pop().unwrap();
        let findings = judge(q, &sides, &self.zones);
        (sides, findings)
    }

    /// Makes `q` as small as it goes while it still shows a finding of the
    /// same kind as `finding`. None when the query alone does not show it
    /// (a difference of timing, not of behaviour).
    pub fn shrink(&self, q: &FuzzQuery, finding: &Finding) -> Option<(FuzzQuery, Finding)> {
        let reproduces = |candidate: &FuzzQuery| -> Option<Finding> {
            let (_, findings) = self.judge_alone(candidate);
            findings.into_iter().find(|f| f.same_kind(finding))
        };
        let mut best = (q.clone(), reproduces(q)?);
        let mut steps = 0;
        'simplify: while steps < MAX_STEPS {
            for candidate in best.0.simpler() {
                steps += 1;
                if let Some(found) = reproduces(&candidate) {
                    best = (candidate, found);
                    continue 'simplify;
                }
                if steps >= MAX_STEPS {
                    break;
                }
            }
            break;
        }
        Some(best)
    }
}
