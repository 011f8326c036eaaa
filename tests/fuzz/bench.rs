//! The servers under comparison as the fuzzer drives them: a batch of
//! queries sent to all of them over UDP and TCP, queries sent again apart
//! from the stream, and a difference made as small as it goes.

use std::net::SocketAddr;

use super::exchange::{Job, run_all, send_twice};
use super::query::{CLIENT_COOKIE, FuzzQuery, OPT_COOKIE, Opt, Target};
use super::verdict::{Finding, Side, judge};
use crate::support::compare::Observed;
use crate::support::norm::raw_option;
use crate::support::servers::{Extras, Server};
use crate::support::wire::{Reply, Transport, exchange};

/// Most simpler queries tried for one difference.
const MAX_CANDIDATES: usize = 200;
/// The first message ID of queries sent apart from the stream.
const APART_ID: u16 = 0x5152;

pub struct Bench<'s> {
    pub servers: Vec<&'s Server>,
    /// Origins served, lower case with the trailing dot.
    pub zones: Vec<&'static str>,
    /// Rate limiting is on: a query sent again apart from the stream is
    /// sent three times over UDP and the last reply kept, so that it meets
    /// a limited bucket as it did in the stream.
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

    /// Every server's whole reply to `packet` over UDP and TCP, for triage
    /// (`PHAROS_FUZZ_REPLAY`).
    pub fn replay(&self, packet: &[u8]) -> String {
        let mut out = String::new();
        for server in &self.servers {
            for transport in [Transport::Udp, Transport::Tcp] {
                let shown = match self.observe(exchange(server.addr, transport, packet, super::exchange::TIMEOUT)) {
                    Observed::Message(m) => m.dump(),
                    Observed::Silence => "    silence\n".into(),
                    Observed::Error(e) => format!("    error: {e}\n"),
                };
                out.push_str(&format!("  {} [{transport}]\n{shown}", server.name));
            }
        }
        out
    }

    /// Queries sent again, apart from the stream they came in (see `rrl`);
    /// what differs about each.
    pub fn judge_apart(&self, queries: &[FuzzQuery]) -> Vec<Vec<Finding>> {
        if self.rrl {
            for server in 0..self.servers.len() {
                let packets: Vec<Vec<u8>> =
                    queries.iter().enumerate().map(|(i, q)| self.packet(q, server, APART_ID.wrapping_add(i as u16))).collect();
                send_twice(self.servers[server].addr, &packets);
            }
        }
        let replies = self.send(queries, APART_ID);
        queries.iter().zip(replies).map(|(q, sides)| judge(q, &sides, &self.zones)).collect()
    }

    /// Makes `q` as small as it goes while it still shows a finding of the
    /// same kind as `finding`: of the queries one step simpler (all sent
    /// at once), the first that still shows it is kept, and so on from
    /// it. None when the query sent again does not show it (a difference
    /// of timing, not of behaviour).
    pub fn shrink(&self, q: &FuzzQuery, finding: &Finding) -> Option<(FuzzQuery, Finding)> {
        let same_kind = |findings: Vec<Finding>| findings.into_iter().find(|f| f.same_kind(finding));
        // The query itself goes with its first simplifications.
        let mut round: Vec<FuzzQuery> = std::iter::once(q.clone()).chain(q.simpler()).collect();
        let mut verdicts = self.judge_apart(&round).into_iter();
        let mut best = (round.remove(0), same_kind(verdicts.next().unwrap())?);
        let mut sent = round.len();
        while let Some(simpler) = round.into_iter().zip(verdicts).find_map(|(c, v)| same_kind(v).map(|f| (c, f))) {
            best = simpler;
            round = best.0.simpler();
            round.truncate(MAX_CANDIDATES.saturating_sub(sent));
            sent += round.len();
            verdicts = self.judge_apart(&round).into_iter();
        }
        Some(best)
    }
}
