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
/// when the query had none): NXDOMAIN (compact denials' NOERROR too) and
/// referrals are counted by their zone, so that random names under one
/// zone fill one bucket, signed or not.
fn classify<'a>(qname: &'a [u8], answered: &Answered<'_>, response: &[u8], snapshot: &'a Snapshot) -> Class<'a> {
    let zone = snapshot.zones.zone_for(qname).map(|zone| &zone.origin[..]);
    match (answered.rcode, answered.qtype, zone) {
        (_, _, Some(zone)) if answered.nonexistent => Class::NxDomain { zone },
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

/// Turns `response` into what a slipped response is: its header, question
/// and OPT record (`opt_at`, where the answer wrote it), with TC set and
/// nothing else, so that a real client retries over TCP and a forged
/// one's victim gets little more than the query's size.
///
/// The OPT record stays because RFC 6891 section 7 makes it part of every
/// reply to an EDNS query: without it, the upper bits of an extended
/// RCODE are lost (a slipped BADCOOKIE would read as YXRRSET) and a
/// client cannot learn the server cookie that would exempt its next
/// query. Knot DNS's mod-rrl keeps the whole OPT record of the answer as
/// well. Over UDP it holds the payload size, DO, the extended RCODE and,
/// each only when the query had or asked for it, the client subnet
/// echoed at its own length, the cookie (the client's 8 octets echoed
/// with 16 of the server's), NSID and, on an error, its Extended DNS
/// Error: a slip is at most its query's size plus 16 octets of server
/// cookie, plus the operator's NSID (4 octets and its own) when asked
/// for, plus an Extended DNS Error (6 octets and one short sentence, under
/// 60 in all) on an error.
/// Returns where the OPT record now starts.
pub fn slip(response: &mut Vec<u8>, query: Option<&Query<'_>>, opt_at: Option<usize>) -> Option<usize> {
    let question_end = query.and_then(|query| query.question).map_or(HEADER_LEN, |question| question.end());
    let kept_opt = opt_at.map(|opt_at| {
        let options_len = u16::from_be_bytes([response[opt_at + 9], response[opt_at + 10]]);
        let opt = opt_at..opt_at + OPT_HEADER_LEN + usize::from(options_len);
        response.copy_within(opt.clone(), question_end);
        opt.len()
    });
    response.truncate(question_end + kept_opt.unwrap_or(0));
    let question_count = u8::from(question_end > HEADER_LEN);
    let additional_count = u8::from(kept_opt.is_some());
    response[2] |= (flags::TC >> 8) as u8;
    response[4..HEADER_LEN].copy_from_slice(&[0, question_count, 0, 0, 0, 0, 0, additional_count]);
    kept_opt.map(|_| question_end)
}

/// An OPT record's fixed part: root owner, type, payload size, extended
/// RCODE and flags, options' length.
const OPT_HEADER_LEN: usize = 11;

#[cfg(test)]
mod tests {
    use pharos_answer::{Client, CookieReply, ResponseOptions, Transport, respond, respond_with};
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
        // An OPT record, DO set: a slipped response keeps it.
        packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0x80, 0, 0, 0]);
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
    fn compact_denials_of_a_signed_zone_are_classed_as_nxdomain_by_zone() {
        use pharos_dnssec::{Algorithm, Role, Signer, Window, ZoneKey, ZoneKeys};
        let mut zone = parse_zone_text("example.test", ZONE, "test.zone").unwrap();
        let keys = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::Ed25519, Role::Csk, &ring::rand::SystemRandom::new()).unwrap()] };
        zone.signer = Some(Signer::new(&zone.origin, keys, Window::from_now(1_800_000_000, 86_400), 1_800_000_000).unwrap().into());
        let signed = Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Default::default() };
        // DO=1 (as `query` asks): NOERROR with an NSEC listing NXNAME, yet
        // one bucket per zone.
        for name in ["random-1.example.test", "random-2.example.test"] {
            assert_eq!(class_of(&query(name, 1), &signed), (2, EXAMPLE.to_vec(), None), "{name}");
        }
        assert_eq!(class_of(&query("www.example.test", 1), &signed).0, 0, "an answer by its name");
    }

    #[test]
    fn a_slipped_response_is_the_header_question_and_opt_record_with_tc() {
        let packet = query("www.example.test", 1);
        let parsed = parse_query(&packet).unwrap();
        let mut response = Vec::new();
        let client = Client { address: "192.0.2.9".parse().unwrap(), transport: Transport::Udp };
        let snapshot = snapshot();
        let answered = respond(&packet, &client, &snapshot, &mut SmallRng::seed_from_u64(1), &mut response).unwrap();
        let opt = response[answered.opt_at.unwrap()..].to_vec();
        assert_eq!(slip(&mut response, Some(&parsed), answered.opt_at), Some(parsed.question.unwrap().end()));
        let question_end = parsed.question.unwrap().end();
        assert_eq!(&response[..2], &[0xAB, 0xCD], "same id");
        assert_eq!(response[2] & 0x86, 0x86, "QR, AA and TC");
        assert_eq!(&response[4..12], &[0, 1, 0, 0, 0, 0, 0, 1], "the question and the OPT record");
        assert_eq!(&response[12..question_end], &packet[12..question_end]);
        assert_eq!(response[question_end..], opt, "the answer's OPT record, whole");
        assert_eq!(opt, [0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0], "payload size and DO");

        let mut header_only = response[..HEADER_LEN].to_vec();
        header_only[5] = 0;
        assert_eq!(slip(&mut header_only, None, None), None);
        assert_eq!(header_only.len(), HEADER_LEN);
        assert_eq!(&header_only[4..12], &[0; 8], "no question to keep");
    }

    #[test]
    fn a_slipped_badcookie_keeps_its_extended_rcode_and_the_fresh_cookie() {
        let mut packet = query("www.example.test", 1);
        let cookie = [[0, 10, 0, 24].as_slice(), &[7; 8], &[9; 16]].concat();
        let options_len = packet.len() - 2;
        packet[options_len..].copy_from_slice(&(cookie.len() as u16).to_be_bytes());
        packet.extend(&cookie);
        let parsed = parse_query(&packet).unwrap();
        let client = Client { address: "192.0.2.9".parse().unwrap(), transport: Transport::Udp };
        let server = [5; pharos_answer::SERVER_COOKIE_LEN];
        let options = ResponseOptions { cookie: Some(CookieReply { server, bad: true }), ..ResponseOptions::default() };
        let mut response = Vec::new();
        let snapshot = snapshot();
        let answered = respond_with(&packet, &client, &options, &snapshot, &mut SmallRng::seed_from_u64(1), &mut response).unwrap();
        assert_eq!(answered.rcode, 23);
        let opt_at = slip(&mut response, Some(&parsed), answered.opt_at).unwrap();
        assert_eq!(response[3] & 0xF, 23 & 0xF);
        assert_eq!(response[opt_at + 5], 23 >> 4, "the upper RCODE bits: BADCOOKIE, not YXRRSET");
        let fresh = [[0, 10, 0, 24].as_slice(), &[7; 8], &server].concat();
        assert!(response.windows(fresh.len()).any(|window| window == fresh), "the client learns the server cookie");
        assert!(response.len() <= packet.len() + 60, "{} octets for a query of {}", response.len(), packet.len());
    }
}
