//! The little of a DNS message the forwarder reads or writes: a client's
//! query (its ID, its UDP size limit, the options that concern only the hop
//! it came by), message IDs, truncation for UDP, and SERVFAIL. Judging the
//! query is the upstream's business, so nothing else is checked or changed.
//! No I/O here.

use std::ops::Range;

use pharos_wire::edns::OPTION_KEEPALIVE;
use pharos_wire::{HEADER_LEN, MIN_UDP_PAYLOAD, MessageWriter, flags, name, parse_query, query_read, rcode, types};

/// The UDP payload size the forwarder offers in the OPT records it writes
/// (the DNS Flag Day 2020 value, as pharos-server's).
const OWN_UDP_PAYLOAD: u16 = 1232;
/// The EDNS option for Extended DNS Errors (RFC 8914), and the error that
/// says no upstream answered: "No Reachable Authority".
const OPTION_EXTENDED_ERROR: u16 = 15;
const NO_REACHABLE_AUTHORITY: u16 = 22;
/// The DO bit in the OPT record's TTL field.
const DNSSEC_OK: u32 = 0x8000;

/// A client's query, as the forwarder sends it upstream.
#[derive(Debug, Clone)]
pub struct ClientQuery {
    /// The client's message, less the EDNS TCP keepalive option: that
    /// speaks of the client's connection to the forwarder (RFC 7828), and
    /// DNS over QUIC forbids it (RFC 9250 section 5.5.2).
    message: Vec<u8>,
    id: u16,
    /// The header's second word as the client sent it.
    flags: u16,
    /// Octets of the question section (0 if it could not be read).
    question_len: usize,
    /// Whether the client sent EDNS, and with the DO bit or not.
    dnssec_ok: Option<bool>,
    /// The largest answer the client takes over UDP (RFC 6891 section 6.2.5).
    udp_limit: usize,
}

impl ClientQuery {
    /// Reads a client's message; `None` if it is no query at all (too short
    /// for a header, or a response), which gets no answer.
    pub fn read(packet: &[u8]) -> Option<ClientQuery> {
        let parsed = parse_query(packet);
        let query = *query_read(&parsed)?;
        let message = match query.edns {
            Some(edns) if edns.wants_keepalive => without_option(packet, OPTION_KEEPALIVE),
            _ => packet.to_vec(),
        };
        Some(ClientQuery {
            message,
            id: query.id,
            flags: query.flags,
            question_len: query.question_bytes().len(),
            dnssec_ok: query.edns.map(|edns| edns.dnssec_ok),
            udp_limit: query.edns.map_or(MIN_UDP_PAYLOAD, |edns| edns.udp_payload.max(MIN_UDP_PAYLOAD)) as usize,
        })
    }

    /// The message to send upstream, under the client's ID.
    pub fn message(&self) -> &[u8] {
        &self.message
    }

    pub fn id(&self) -> u16 {
        self.id
    }

    pub fn udp_limit(&self) -> usize {
        self.udp_limit
    }

    /// A SERVFAIL for this query, for when no upstream answered it: the
    /// question echoed, and with EDNS, the extended error "No Reachable
    /// Authority" (RFC 8914).
    pub fn servfail(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.question_len + 17);
        let mut writer = MessageWriter::new(&mut out);
        writer.set_id(self.id);
        writer.set_flags(flags::QR | (self.flags & (flags::OPCODE_MASK | flags::RD | flags::CD)) | rcode::SERVFAIL);
        writer.raw(&self.message[HEADER_LEN..HEADER_LEN + self.question_len]);
        if let Some(dnssec_ok) = self.dnssec_ok {
            writer.raw(&[0]);
            writer.u16(types::OPT);
            writer.u16(OWN_UDP_PAYLOAD);
            writer.u32(if dnssec_ok { DNSSEC_OK } else { 0 });
            writer.length_prefixed(|writer| {
                writer.u16(OPTION_EXTENDED_ERROR);
                writer.u16(2);
                writer.u16(NO_REACHABLE_AUTHORITY);
            });
        }
        writer.set_counts([u16::from(self.question_len > 0), 0, 0, u16::from(self.dnssec_ok.is_some())]);
        out
    }
}

/// Sets the message ID (the first two octets) of a message at least a
/// header long.
pub fn set_id(message: &mut [u8], id: u16) {
    message[..2].copy_from_slice(&id.to_be_bytes());
}

/// The message ID, if `message` is a response (a header with QR set).
pub fn response_id(message: &[u8]) -> Option<u16> {
    let header = message.get(..HEADER_LEN)?;
    (u16::from_be_bytes([header[2], header[3]]) & flags::QR != 0).then(|| u16::from_be_bytes([header[0], header[1]]))
}

/// `answer` if it fits in `limit` octets; else the same answer truncated
/// as RFC 2181 section 9 and RFC 6891 section 7 ask: TC set, the question
/// kept, no records but the OPT record (which carries the extended RCODE),
/// so that the client asks again over TCP.
pub fn fit_for_udp(answer: Vec<u8>, limit: usize) -> Vec<u8> {
    if answer.len() <= limit {
        return answer;
    }
    let question_end = question_end(&answer).unwrap_or(HEADER_LEN);
    let opt = opt_record(&answer).filter(|opt| question_end + opt.len() <= limit);
    let mut out = Vec::with_capacity(limit);
    let mut writer = MessageWriter::new(&mut out);
    writer.raw(&answer[HEADER_LEN..question_end]);
    if let Some(opt) = &opt {
        writer.raw(&answer[opt.clone()]);
    }
    writer.set_id(u16::from_be_bytes([answer[0], answer[1]]));
    writer.set_flags(u16::from_be_bytes([answer[2], answer[3]]) | flags::TC);
    let questions = if question_end > HEADER_LEN { u16::from_be_bytes([answer[4], answer[5]]) } else { 0 };
    writer.set_counts([questions, 0, 0, u16::from(opt.is_some())]);
    out
}

fn read_u16(message: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(message.get(at..at + 2)?.try_into().ok()?))
}

/// The offset just past the question section.
fn question_end(message: &[u8]) -> Option<usize> {
    let mut pos = HEADER_LEN;
    for _ in 0..read_u16(message, 4)? {
        pos = name::skip(message, pos).ok()? + 4;
    }
    (pos <= message.len()).then_some(pos)
}

/// Where the OPT record of `message` lies, from its owner name to the end
/// of its data; `None` if it has none or cannot be read.
fn opt_record(message: &[u8]) -> Option<Range<usize>> {
    let records: usize = [6, 8, 10].into_iter().map(|at| read_u16(message, at).map(usize::from)).sum::<Option<usize>>()?;
    let mut pos = question_end(message)?;
    for _ in 0..records {
        let start = pos;
        let fixed = name::skip(message, pos).ok()?;
        let end = fixed + 10 + usize::from(read_u16(message, fixed + 8)?);
        if end > message.len() {
            return None;
        }
        if read_u16(message, fixed)? == types::OPT {
            return Some(start..end);
        }
        pos = end;
    }
    None
}

/// `message` without the EDNS option `code`, its OPT record's length set
/// to match. Options that cannot be read are left as they are.
fn without_option(message: &[u8], code: u16) -> Vec<u8> {
    let Some(opt) = opt_record(message) else { return message.to_vec() };
    let Ok(fixed) = name::skip(message, opt.start) else { return message.to_vec() };
    let mut kept = Vec::new();
    let mut options = &message[fixed + 10..opt.end];
    while let (Some(option_code), Some(length)) = (read_u16(options, 0), read_u16(options, 2)) {
        let Some(option) = options.get(..4 + usize::from(length)) else { return message.to_vec() };
        if option_code != code {
            kept.extend_from_slice(option);
        }
        options = &options[option.len()..];
    }
    [&message[..fixed + 8], &(kept.len() as u16).to_be_bytes(), &kept, &message[opt.end..]].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUESTION: &[u8] = b"\x03www\x07example\x04test\x00\x00\x01\x00\x01";
    const KEEPALIVE: &[u8] = &[0, 11, 0, 0];
    const COOKIE: &[u8] = &[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];

    /// A message with this ID and flags, the question, these answer
    /// records, and an OPT record with `payload` and `options` if given.
    fn message(id: u16, flags: u16, answers: &[&[u8]], opt: Option<(u16, &[u8])>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut writer = MessageWriter::new(&mut out);
        writer.set_id(id);
        writer.set_flags(flags);
        writer.question(QUESTION);
        for answer in answers {
            writer.raw(answer);
        }
        if let Some((payload, options)) = opt {
            writer.raw(&[0, 0, 41]);
            writer.u16(payload);
            writer.u32(0);
            writer.u16(options.len() as u16);
            writer.raw(options);
        }
        writer.set_counts([1, answers.len() as u16, 0, u16::from(opt.is_some())]);
        out
    }

    /// An A record for the question's name (a pointer to offset 12).
    fn address_record() -> Vec<u8> {
        vec![0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]
    }

    #[test]
    fn reads_the_id_and_the_udp_limit() {
        let plain = ClientQuery::read(&message(7, flags::RD, &[], None)).unwrap();
        assert_eq!((plain.id(), plain.udp_limit()), (7, 512));
        let large = ClientQuery::read(&message(8, 0, &[], Some((4096, &[])))).unwrap();
        assert_eq!(large.udp_limit(), 4096);
        let small = ClientQuery::read(&message(9, 0, &[], Some((100, &[])))).unwrap();
        assert_eq!(small.udp_limit(), 512, "below 512 counts as 512");
    }

    #[test]
    fn what_is_not_a_query_is_not_read() {
        assert!(ClientQuery::read(&[0; 11]).is_none());
        assert!(ClientQuery::read(&message(1, flags::QR, &[], None)).is_none());
        let malformed = &message(1, 0, &[], None)[..20];
        assert!(ClientQuery::read(malformed).is_some(), "a malformed query is the upstream's to judge");
    }

    #[test]
    fn the_keepalive_option_is_removed_and_the_others_kept() {
        let options = [COOKIE, KEEPALIVE].concat();
        let query = ClientQuery::read(&message(1, 0, &[], Some((1232, &options)))).unwrap();
        assert_eq!(query.message(), message(1, 0, &[], Some((1232, COOKIE))));
        let without = message(1, 0, &[], Some((1232, COOKIE)));
        assert_eq!(ClientQuery::read(&without).unwrap().message(), without, "nothing to remove");
    }

    #[test]
    fn servfail_echoes_the_question_and_tells_why_with_edns() {
        let query = ClientQuery::read(&message(0x1234, flags::RD | flags::CD, &[], None)).unwrap();
        let expected = message(0x1234, flags::QR | flags::RD | flags::CD | rcode::SERVFAIL, &[], None);
        assert_eq!(query.servfail(), expected);
        let with_edns = ClientQuery::read(&message(5, 0, &[], Some((4096, &[])))).unwrap();
        let expected = message(5, flags::QR | rcode::SERVFAIL, &[], Some((1232, &[0, 15, 0, 2, 0, 22])));
        assert_eq!(with_edns.servfail(), expected);
    }

    #[test]
    fn a_long_udp_answer_is_truncated_to_its_question_and_opt_record() {
        let records: Vec<Vec<u8>> = (0..40).map(|_| address_record()).collect();
        let records: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let answer = message(3, flags::QR | flags::AA, &records, Some((1232, &[])));
        assert_eq!(fit_for_udp(answer.clone(), answer.len()), answer, "fits exactly");
        let truncated = fit_for_udp(answer, 512);
        assert_eq!(truncated, message(3, flags::QR | flags::AA | flags::TC, &[], Some((1232, &[]))));
        let without_edns = message(3, flags::QR, &records, None);
        assert_eq!(fit_for_udp(without_edns, 512), message(3, flags::QR | flags::TC, &[], None));
    }

    #[test]
    fn response_ids_are_read_only_from_responses() {
        let mut answer = message(3, flags::QR, &[], None);
        set_id(&mut answer, 0xbeef);
        assert_eq!(response_id(&answer), Some(0xbeef));
        assert_eq!(response_id(&message(3, 0, &[], None)), None, "a query");
        assert_eq!(response_id(&answer[..11]), None, "shorter than a header");
    }
}
