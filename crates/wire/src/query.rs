//! Reading a query: header, the one question, and the OPT record.

use crate::edns::Edns;
use crate::name;
use crate::{HEADER_LEN, flags, rcode, read_u16, read_u32, types};

/// The question of a query. The name stays in the packet, as the client
/// wrote it, at offset 12.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Question {
    pub name_len: usize,
    pub qtype: u16,
    pub qclass: u16,
}

impl Question {
    /// Offset just past the question section.
    pub fn end(&self) -> usize {
        HEADER_LEN + self.name_len + 4
    }
}

/// A query as far as it could be read.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub packet: &'a [u8],
    pub id: u16,
    /// The second header word as sent: opcode, RD, CD and the rest.
    pub flags: u16,
    pub question: Option<Question>,
    pub edns: Option<Edns>,
    /// Where the TSIG record starts (RFC 8945), if the query is signed:
    /// the last record, in the additional section. (An offset in a message
    /// fits 16 bits, and keeps the query small.)
    pub tsig_at: Option<u16>,
}

/// What to do with a packet that is not a well-formed query.
#[derive(Debug, Clone, Copy)]
pub enum Reject<'a> {
    /// Not worth an answer: too short for a header, or itself a response.
    Drop,
    /// Answer with this RCODE and whatever of the query could be read.
    Respond { query: Query<'a>, rcode: u16 },
    /// A standard query with no question and nothing else wrong: FORMERR
    /// (RFC 1035 section 4.1.1), unless it carries a COOKIE option to a
    /// server that makes cookies, when it asks for a server cookie alone
    /// (RFC 7873 section 5.4).
    NoQuestion { query: Query<'a> },
}

impl<'a> Query<'a> {
    pub fn opcode(&self) -> u8 {
        ((self.flags & flags::OPCODE_MASK) >> 11) as u8
    }

    /// The question name exactly as the client wrote it.
    pub fn qname(&self) -> &'a [u8] {
        let len = self.question.map_or(0, |question| question.name_len);
        &self.packet[HEADER_LEN..HEADER_LEN + len]
    }

    /// The question section exactly as the client wrote it (empty if none).
    pub fn question_bytes(&self) -> &'a [u8] {
        let end = self.question.map_or(HEADER_LEN, |question| question.end());
        &self.packet[HEADER_LEN..end]
    }
}

/// The query as far as it was read, when the packet gets a response at
/// all: a well-formed query, or one answered with an error.
pub fn query_read<'q, 'p>(parsed: &'p Result<Query<'q>, Reject<'q>>) -> Option<&'p Query<'q>> {
    match parsed {
        Ok(query) | Err(Reject::Respond { query, .. } | Reject::NoQuestion { query }) => Some(query),
        Err(Reject::Drop) => None,
    }
}

/// The opcode of a standard query.
pub const OPCODE_QUERY: u8 = 0;
/// The opcode of a NOTIFY (RFC 1996 section 3.1).
pub const OPCODE_NOTIFY: u8 = 4;

/// Parses a query packet. Succeeds only for a well-formed standard query
/// or NOTIFY with one question and, at most, one OPT record of version 0.
pub fn parse_query(packet: &[u8]) -> Result<Query<'_>, Reject<'_>> {
    let Some(header) = packet.get(..HEADER_LEN) else {
        return Err(Reject::Drop);
    };
    let flags_word = read_u16(header, 2).unwrap_or(0);
    if flags_word & flags::QR != 0 {
        return Err(Reject::Drop);
    }
    let mut query = Query { packet, id: read_u16(header, 0).unwrap_or(0), flags: flags_word, question: None, edns: None, tsig_at: None };
    let counts = [4, 6, 8, 10].map(|at| read_u16(header, at).unwrap_or(0));
    let body = match counts[0] {
        1 => parse_question(packet).and_then(|question| {
            query.question = Some(question);
            parse_records(packet, question.end(), &mut query, counts)
        }),
        // No question, or more than one (RFC 9619 section 4: FORMERR): still
        // read the OPT, so that the error can carry one (RFC 6891 section 7).
        questions => skip_questions(packet, questions).and_then(|end| parse_records(packet, end, &mut query, counts)),
    };
    let rcode = if !matches!(query.opcode(), OPCODE_QUERY | OPCODE_NOTIFY) {
        rcode::NOTIMP
    } else if body.is_ok() && counts[0] == 0 {
        return Err(Reject::NoQuestion { query });
    } else if body.is_err() || counts[0] != 1 {
        rcode::FORMERR
    } else if query.edns.is_some_and(|edns| edns.version > 0) {
        rcode::BADVERS
    } else {
        return Ok(query);
    };
    Err(Reject::Respond { query, rcode })
}

fn parse_question(packet: &[u8]) -> Result<Question, ()> {
    let name_len = name::uncompressed_len(packet, HEADER_LEN).map_err(drop)?;
    let at = HEADER_LEN + name_len;
    let qtype = read_u16(packet, at).ok_or(())?;
    let qclass = read_u16(packet, at + 2).ok_or(())?;
    Ok(Question { name_len, qtype, qclass })
}

/// Where the question section of `count` questions ends.
fn skip_questions(packet: &[u8], count: u16) -> Result<usize, ()> {
    (0..count).try_fold(HEADER_LEN, |pos, _| {
        let end = name::skip(packet, pos).map_err(drop)? + 4;
        if end <= packet.len() { Ok(end) } else { Err(()) }
    })
}

/// Walks the answer, authority and additional sections from `pos`,
/// picking out the OPT record and finding the TSIG record. Other records
/// are skipped (a query has no use for them), but they must be well formed.
fn parse_records(packet: &[u8], mut pos: usize, query: &mut Query<'_>, counts: [u16; 4]) -> Result<(), ()> {
    let record_count = counts[1] as usize + counts[2] as usize + counts[3] as usize;
    for index in 0..record_count {
        let in_additional = index >= counts[1] as usize + counts[2] as usize;
        let owner_at = pos;
        pos = name::skip(packet, pos).map_err(drop)?;
        let rtype = read_u16(packet, pos).ok_or(())?;
        let class = read_u16(packet, pos + 2).ok_or(())?;
        let ttl = read_u32(packet, pos + 4).ok_or(())?;
        let rdlen = read_u16(packet, pos + 8).ok_or(())? as usize;
        let rdata = packet.get(pos + 10..pos + 10 + rdlen).ok_or(())?;
        pos += 10 + rdlen;
        if rtype == types::OPT {
            // RFC 6891 section 6.1.1: one OPT, in the additional section, owned by the root.
            if !in_additional || query.edns.is_some() || !name::is_root_at(packet, owner_at) {
                // Which OPT would the answer echo? Neither (as Knot DNS and NSD do).
                query.edns = None;
                return Err(());
            }
            // RFC 6891 section 7: an OPT record that cannot be processed
            // (a malformed option) makes the query FORMERR, and the
            // response carries an OPT record all the same.
            match Edns::parse(class, ttl, rdata) {
                Ok(edns) => query.edns = Some(edns),
                Err(malformed) => {
                    query.edns = Some(malformed.readable);
                    return Err(());
                }
            }
        }
        if rtype == types::TSIG {
            // RFC 8945 section 5.1: the last record, or the query is malformed.
            if index + 1 != record_count || !in_additional {
                return Err(());
            }
            query.tsig_at = Some(u16::try_from(owner_at).map_err(drop)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(flags: u16, counts: [u16; 4], body: &[u8]) -> Vec<u8> {
        let mut packet = vec![0x12, 0x34];
        packet.extend(flags.to_be_bytes());
        for count in counts {
            packet.extend(count.to_be_bytes());
        }
        packet.extend(body);
        packet
    }

    const QUESTION: &[u8] = b"\x03WwW\x07example\x00\x00\x01\x00\x01";
    const OPT: &[u8] = b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00";

    fn rcode_of(packet: &[u8]) -> Option<u16> {
        match parse_query(packet) {
            Ok(_) => Some(0),
            Err(Reject::Respond { rcode, .. }) => Some(rcode),
            // FORMERR, unless it asks for a server cookie.
            Err(Reject::NoQuestion { .. }) => Some(rcode::FORMERR),
            Err(Reject::Drop) => None,
        }
    }

    #[test]
    fn parses_a_plain_query_keeping_case() {
        let packet = query(0x0100, [1, 0, 0, 0], QUESTION);
        let parsed = parse_query(&packet).unwrap();
        assert_eq!(parsed.id, 0x1234);
        assert_eq!(parsed.qname(), b"\x03WwW\x07example\x00");
        assert_eq!(parsed.question.unwrap().qtype, 1);
        assert!(parsed.edns.is_none());
    }

    #[test]
    fn parses_edns() {
        let packet = query(0, [1, 0, 0, 1], &[QUESTION, OPT].concat());
        let edns = parse_query(&packet).unwrap().edns.unwrap();
        assert_eq!((edns.udp_payload, edns.dnssec_ok), (1232, true));
    }

    #[test]
    fn rejects_what_rfc_1035_and_6891_call_malformed() {
        assert_eq!(rcode_of(&[0; 11]), None, "no header");
        assert_eq!(rcode_of(&query(0x8000, [1, 0, 0, 0], QUESTION)), None, "a response");
        assert_eq!(rcode_of(&query(0, [0, 0, 0, 0], b"")), Some(rcode::FORMERR));
        let edns_kept = |packet: &[u8]| match parse_query(packet) {
            Err(Reject::Respond { query, .. } | Reject::NoQuestion { query }) => query.edns.is_some(),
            _ => panic!("accepted"),
        };
        assert!(edns_kept(&query(0, [0, 0, 0, 1], OPT)), "a FORMERR for a missing question keeps the OPT");
        assert!(!edns_kept(&query(0, [1, 0, 0, 2], &[QUESTION, OPT, OPT].concat())), "a FORMERR for two OPTs echoes neither");
        assert!(edns_kept(&query(0, [2, 0, 0, 1], &[QUESTION, QUESTION, OPT].concat())), "two questions: FORMERR with the OPT");
        assert!(edns_kept(&query(0x5000, [2, 0, 0, 1], &[QUESTION, QUESTION, OPT].concat())), "NOTIMP with the OPT");
        // An empty COOKIE option: RFC 6891 section 7 has FORMERR with an OPT.
        let bad_cookie = [&OPT[..9], &[0, 4, 0, 10, 0, 0]].concat();
        assert_eq!(rcode_of(&query(0, [1, 0, 0, 1], &[QUESTION, &bad_cookie].concat())), Some(rcode::FORMERR));
        assert!(edns_kept(&query(0, [1, 0, 0, 1], &[QUESTION, &bad_cookie].concat())), "a malformed option: FORMERR with an OPT");
        assert_eq!(rcode_of(&query(0, [2, 0, 0, 0], &[QUESTION, QUESTION].concat())), Some(rcode::FORMERR));
        assert_eq!(rcode_of(&query(0, [1, 0, 0, 0], &QUESTION[..8])), Some(rcode::FORMERR));
        assert_eq!(rcode_of(&query(0, [1, 0, 0, 2], &[QUESTION, OPT, OPT].concat())), Some(rcode::FORMERR));
        assert_eq!(rcode_of(&query(0, [1, 0, 0, 1], QUESTION)), Some(rcode::FORMERR), "missing record");
        assert_eq!(rcode_of(&query(0x1000, [1, 0, 0, 0], QUESTION)), Some(rcode::NOTIMP), "STATUS");
        let version_one = [&OPT[..5], &[0, 1], &OPT[7..]].concat();
        assert_eq!(rcode_of(&query(0, [1, 0, 0, 1], &[QUESTION, &version_one].concat())), Some(rcode::BADVERS));
        let nsid_and_cookie = [&version_one[..9], &[0, 16, 0, 3, 0, 0, 0, 10, 0, 8], b"cookie!!"].concat();
        match parse_query(&query(0, [1, 0, 0, 1], &[QUESTION, &nsid_and_cookie].concat())) {
            Err(Reject::Respond { query, rcode: rcode::BADVERS }) => {
                let edns = query.edns.unwrap();
                assert!(edns.cookie.is_none() && !edns.wants_nsid, "the options of version 1 are not read: {edns:?}");
            }
            other => panic!("not BADVERS: {other:?}"),
        }
    }

    #[test]
    fn a_query_without_a_question_is_told_apart_only_when_nothing_else_is_wrong() {
        let no_question = |packet: &[u8]| matches!(parse_query(packet), Err(Reject::NoQuestion { .. }));
        assert!(no_question(&query(0, [0, 0, 0, 0], b"")));
        assert!(no_question(&query(0, [0, 0, 0, 1], OPT)));
        assert!(!no_question(&query(0, [0, 0, 0, 2], &[OPT, OPT].concat())), "two OPTs");
        assert!(!no_question(&query(0, [0, 0, 0, 1], b"")), "a missing record");
        assert!(!no_question(&query(0x1000, [0, 0, 0, 0], b"")), "another opcode");
        assert!(!no_question(&query(0, [2, 0, 0, 0], &[QUESTION, QUESTION].concat())), "two questions");
    }

    #[test]
    fn finds_a_tsig_record_only_where_rfc_8945_puts_it() {
        // Owner "k", type TSIG, class ANY, TTL 0, two octets of data.
        const TSIG: &[u8] = b"\x01k\x00\x00\xfa\x00\xff\x00\x00\x00\x00\x00\x02\xab\xcd";
        let signed = query(0, [1, 0, 0, 2], &[QUESTION, OPT, TSIG].concat());
        assert_eq!(parse_query(&signed).unwrap().tsig_at, Some((QUESTION.len() + OPT.len() + HEADER_LEN) as u16));
        assert_eq!(parse_query(&query(0, [1, 0, 0, 1], &[QUESTION, OPT].concat())).unwrap().tsig_at, None);
        assert_eq!(rcode_of(&query(0, [1, 0, 0, 2], &[QUESTION, TSIG, OPT].concat())), Some(rcode::FORMERR), "not last");
        assert_eq!(rcode_of(&query(0, [1, 0, 1, 1], &[QUESTION, TSIG, OPT].concat())), Some(rcode::FORMERR), "in authority");
    }

    #[test]
    fn a_notimp_answer_still_carries_the_question() {
        let packet = query(0x2800, [1, 0, 0, 0], QUESTION);
        let Err(Reject::Respond { query, rcode }) = parse_query(&packet) else { panic!("accepted") };
        assert_eq!(rcode, rcode::NOTIMP);
        assert_eq!(query.question_bytes(), QUESTION);
    }

    #[test]
    fn a_notify_is_read_as_a_query_is() {
        let notify = parse_query(&query(0x2000, [1, 0, 0, 0], QUESTION)).ok().map(|notify| notify.opcode());
        assert_eq!(notify, Some(OPCODE_NOTIFY));
    }
}
