//! Response rate limiting on DNS over UDP ([`pharos_rrl`]), once the
//! answer is known: what class a response is in, the clock the shared
//! buckets run on, and the truncated response a slipped one becomes.
//! Streams are exempt: their client's address is proven by the handshake,
//! so they cannot be aimed at anyone else.
//!
//! It sits beside the per-source query limit ([`crate::limit`]), which
//! the kernel fast path mirrors: that one bounds the work any one address
//! can cause, before a query is even parsed; this one bounds what any one
//! network is sent of alike responses, and slips, so that a resolver
//! sharing a prefix with forged sources still gets through over TCP.

use std::net::IpAddr;
use std::time::Instant;

use pharos_answer::{Answered, Snapshot};
use pharos_rrl::{Class, Counters, Limiter, Verdict};
use pharos_wire::name::{MAX_NAME_LEN, lowercase_into};
use pharos_wire::{HEADER_LEN, Query, flags, rcode};

/// The limiter every UDP worker shares, and the clock its buckets run on.
#[derive(Debug)]
pub struct ResponseLimit {
    limiter: Limiter,
    started: Instant,
}

impl ResponseLimit {
    pub fn new(limiter: Limiter) -> ResponseLimit {
        ResponseLimit { limiter, started: Instant::now() }
    }

    /// What was limited so far.
    pub fn counters(&self) -> Counters {
        self.limiter.counters()
    }

    /// Counts `response` against its bucket and says whether it goes out.
    pub(crate) fn check(&self, sent: &Sent<'_, '_, '_>, response: &[u8], snapshot: &Snapshot) -> Verdict {
        let mut lowercase = [0u8; MAX_NAME_LEN];
        let qname = sent.query.map_or(&[][..], |query| {
            let name = query.qname();
            lowercase_into(name, &mut lowercase[..name.len()]);
            &lowercase[..name.len()]
        });
        let class = classify(qname, &sent.answered, response, snapshot);
        let since_start = u64::try_from(sent.at.saturating_duration_since(self.started).as_nanos()).unwrap_or(u64::MAX);
        self.limiter.check(sent.to, class, since_start)
    }
}

/// A response about to be sent: when (the time its batch arrived: one
/// clock read per batch), to whom, and answering what.
pub(crate) struct Sent<'q, 'p, 's> {
    pub at: Instant,
    pub to: IpAddr,
    /// `None` when the query could not be read.
    pub query: Option<&'q Query<'p>>,
    pub answered: Answered<'s>,
}

/// The class of a response to a question for `qname` (lowercase; empty
/// when the query had none): NXDOMAIN and referrals are counted by their
/// zone, so that random names under one zone fill one bucket.
fn classify<'a>(qname: &'a [u8], answered: &Answered<'_>, response: &[u8], snapshot: &'a Snapshot) -> Class<'a> {
    let zone = snapshot.zones.zone_for(qname).map(|zone| &zone.origin[..]);
    match (answered.rcode, answered.qtype, zone) {
        (rcode::NXDOMAIN, _, Some(zone)) => Class::NxDomain { zone },
        (rcode::NOERROR, _, Some(zone)) if is_referral(response) => Class::Referral { zone },
        (rcode::NOERROR, Some(qtype), _) => Class::Answer { qname, qtype },
        _ => Class::Error,
    }
}

/// A NOERROR response that is not authoritative and has no answer but
/// an authority section: a delegation.
fn is_referral(response: &[u8]) -> bool {
    let word = |at: usize| response.get(at..at + 2).map_or(0, |bytes| u16::from_be_bytes([bytes[0], bytes[1]]));
    word(2) & flags::AA == 0 && word(6) == 0 && word(8) > 0
}

/// Turns `response` into what a slipped response is: its header and
/// question with TC set and nothing else, so that a real client retries
/// over TCP and a forged one's victim gets no more than the query's size.
pub(crate) fn slip(response: &mut Vec<u8>, query: Option<&Query<'_>>) {
    let question_end = query.and_then(|query| query.question).map_or(HEADER_LEN, |question| question.end());
    response.truncate(question_end);
    let question_count = u16::from(question_end > HEADER_LEN);
    response[2] |= (flags::TC >> 8) as u8;
    response[4..HEADER_LEN].copy_from_slice(&[0, question_count as u8, 0, 0, 0, 0, 0, 0]);
}

#[cfg(test)]
mod tests {
    use pharos_answer::{Client, Transport, respond};
    use pharos_wire::parse_query;
    use pharos_zone::{ZoneSet, parse_zone_text};
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;

    const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nsub NS ns.sub\nns.sub A 192.0.2.3\n";
    const EXAMPLE: &[u8] = b"\x07example\x04test\x00";

    fn snapshot() -> Snapshot {
        let zone = parse_zone_text("example.test", ZONE, "test.zone").unwrap();
        Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Default::default() }
    }

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut packet = vec![0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
        packet.extend(pharos_wire::name::from_dotted(name).unwrap());
        packet.extend(qtype.to_be_bytes());
        packet.extend([0, 1]);
        // An OPT record: the slipped response must not keep it.
        packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
        packet
    }

    /// The class of the response `snapshot` gives to `packet`, with the
    /// names it holds as owned bytes.
    fn class_of(packet: &[u8], snapshot: &Snapshot) -> (u8, Vec<u8>, Option<u16>) {
        let mut response = Vec::new();
        let client = Client { address: "192.0.2.9".parse().unwrap(), transport: Transport::Udp };
        let answered = respond(packet, &client, snapshot, &mut SmallRng::seed_from_u64(1), &mut response).unwrap();
        let query = parse_query(packet).unwrap();
        let mut lowercase = [0u8; MAX_NAME_LEN];
        let qname = &mut lowercase[..query.qname().len()];
        lowercase_into(query.qname(), qname);
        match classify(qname, &answered, &response, snapshot) {
            Class::Answer { qname, qtype } => (0, qname.to_vec(), Some(qtype)),
            Class::Referral { zone } => (1, zone.to_vec(), None),
            Class::NxDomain { zone } => (2, zone.to_vec(), None),
            Class::Error => (3, Vec::new(), None),
        }
    }

    #[test]
    fn responses_are_classed_as_knot_and_bind_count_them() {
        let snapshot = snapshot();
        let www = b"\x03www\x07example\x04test\x00".to_vec();
        assert_eq!(class_of(&query("WwW.Example.TEST", 1), &snapshot), (0, www.clone(), Some(1)), "answers by lowercase name");
        assert_eq!(class_of(&query("www.example.test", 28), &snapshot), (0, www, Some(28)), "NODATA as an answer");
        assert_eq!(class_of(&query("random-1.example.test", 1), &snapshot), (2, EXAMPLE.to_vec(), None), "NXDOMAIN by zone");
        assert_eq!(class_of(&query("a.b.sub.example.test", 1), &snapshot), (1, EXAMPLE.to_vec(), None), "referral by zone");
        assert_eq!(class_of(&query("elsewhere.invalid", 1), &snapshot), (3, Vec::new(), None), "REFUSED as an error");
    }

    #[test]
    fn a_slipped_response_is_the_header_and_question_with_tc() {
        let packet = query("www.example.test", 1);
        let parsed = parse_query(&packet).unwrap();
        let mut response = Vec::new();
        let client = Client { address: "192.0.2.9".parse().unwrap(), transport: Transport::Udp };
        respond(&packet, &client, &snapshot(), &mut SmallRng::seed_from_u64(1), &mut response).unwrap();
        slip(&mut response, Some(&parsed));
        let question_end = parsed.question.unwrap().end();
        assert_eq!(response.len(), question_end);
        assert_eq!(&response[..2], &[0xAB, 0xCD], "same id");
        assert_eq!(response[2] & 0x86, 0x86, "QR, AA and TC");
        assert_eq!(&response[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&response[12..], &packet[12..question_end]);

        let mut header_only = response[..HEADER_LEN].to_vec();
        header_only[5] = 0;
        slip(&mut header_only, None);
        assert_eq!(header_only.len(), HEADER_LEN);
        assert_eq!(&header_only[4..12], &[0; 8], "no question to keep");
    }
}
