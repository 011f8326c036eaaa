//! A transfer's response messages, taken one at a time, checked and
//! assembled into the zone's new records.
//!
//! Every message must answer the request: its ID, QR, opcode QUERY, not
//! truncated, RCODE NOERROR, a question (if it repeats one) the
//! request's, records of class IN owned inside the zone. With a key, the
//! first message must be signed and every later one either signed over
//! the ones before or unsigned, at most 99 in a row, the last signed
//! (RFC 8945 section 5.3.1, checked by the `domain` crate's client
//! sequence): a transfer without a signature, or with a wrong one, is
//! refused.
//!
//! The answer records of all messages form one stream:
//! - AXFR (RFC 5936 section 2.2): the SOA, the zone's other records, the
//!   same SOA again, which ends it.
//! - IXFR (RFC 1995 section 4): the new SOA, then for each version from
//!   ours to the new one the SOA it starts from and the records it
//!   removed, the SOA it ends at and the records it added; the new SOA
//!   again ends it. Each difference must start where the one before
//!   ended, the first at our serial, and may remove only records the zone
//!   has. A reply of the new SOA alone, no newer than ours, says the zone
//!   is up to date (section 4). A reply that goes on as an AXFR would is
//!   the whole zone (section 4 allows it).

use std::collections::BTreeSet;
use std::sync::Arc;

use domain::base::iana::{Class, Opcode, Rcode};
use domain::base::{Message, ParsedName, ToName};
use domain::rdata::ZoneRecordData;
use domain::tsig::ValidationError;
use pharos_wire::{name, types};
use pharos_zone::journal::{Record, newer, soa_serial};

use crate::request::{Kind, Request};

/// Why a transfer is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("a message shorter than a DNS header, or unreadable ({0})")]
    Malformed(String),
    #[error("message ID {got} answers no request (ours: {expected})")]
    WrongId { expected: u16, got: u16 },
    #[error("the message is not a response to a query")]
    NotAResponse,
    #[error("the response is truncated")]
    Truncated,
    #[error("the primary answered with RCODE {0}")]
    Rcode(String),
    #[error("the response's question is not the request's")]
    WrongQuestion,
    #[error("TSIG: {0}")]
    Tsig(String),
    #[error("{0} is outside the zone")]
    OutsideZone(String),
    #[error("{owner} has class {class}, not IN")]
    WrongClass { owner: String, class: String },
    #[error("{owner} has a record of type {rtype}, which a zone cannot hold")]
    MetaType { owner: String, rtype: u16 },
    #[error("the answer has no SOA record for the zone")]
    NoSoa,
    #[error("the transfer does not start with the zone's SOA")]
    SoaNotFirst,
    #[error("SOA serial {found} where {expected} was due")]
    Serials { expected: u32, found: u32 },
    #[error("the difference removes {0}, which the zone does not have")]
    NotInZone(String),
    #[error("records after the transfer's last SOA")]
    AfterTheEnd,
}

/// What a finished exchange gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assembled {
    /// The primary's serial (a SOA query's answer).
    Serial(u32),
    /// The zone has not changed (an IXFR answered with its SOA alone).
    UpToDate,
    /// The zone's records, its SOA among them, sorted, without
    /// duplicates.
    Zone(Vec<Record>),
}

/// What one more message made of the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// More messages are due.
    More,
    Done(Assembled),
}

/// Where in the stream of answer records a transfer is.
#[derive(Debug)]
enum Stream {
    /// No record read yet.
    Start,
    /// An IXFR's first record, the new SOA: the next says which form the
    /// reply takes.
    First {
        last: Record,
    },
    /// The whole zone, until `last` comes again.
    Whole {
        last: Record,
        records: Vec<Record>,
    },
    /// A difference's removals, from the version at serial `from`.
    Removing {
        last: Record,
        from: u32,
        zone: BTreeSet<Record>,
    },
    /// A difference's additions, up to the version at serial `to`.
    Adding {
        last: Record,
        to: u32,
        zone: BTreeSet<Record>,
    },
    Done(Assembled),
}

/// Assembles the answers to one request.
#[derive(Debug)]
pub struct Assembler {
    request: Request,
    /// The zone as we serve it (for IXFR), sorted, its SOA among them.
    current: Option<Arc<[Record]>>,
    stream: Stream,
    messages: usize,
}

impl Assembler {
    /// An assembler of the answers to `request`, for a zone whose records
    /// now are `current` (none yet: an AXFR or SOA query).
    pub fn new(request: Request, current: Option<Arc<[Record]>>) -> Assembler {
        Assembler { request, current, stream: Stream::Start, messages: 0 }
    }

    /// The request the answers are for.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Takes the next response message (without a stream's length
    /// prefix), received at `now` (Unix seconds).
    pub fn push(&mut self, message: &[u8], now: u64) -> Result<Progress, TransferError> {
        if matches!(self.stream, Stream::Done(_)) {
            return Err(TransferError::AfterTheEnd);
        }
        let mut message = Message::from_octets(message.to_vec()).map_err(|error| TransferError::Malformed(error.to_string()))?;
        self.check_header(&message)?;
        if let Some(signing) = self.request.signing.as_mut() {
            let now = domain::rdata::tsig::Time48::from_u64(now);
            signing.answer(&mut message, now).map_err(tsig_error)?;
        }
        let rcode = message.header().rcode();
        if rcode != Rcode::NOERROR {
            return Err(TransferError::Rcode(rcode.to_string()));
        }
        self.check_question(&message)?;
        self.messages += 1;
        let records = self.answer_records(&message)?;
        let single = records.len() == 1 && self.messages == 1;
        for record in records {
            self.take(record)?;
        }
        self.after_message(single)
    }

    fn check_header(&self, message: &Message<Vec<u8>>) -> Result<(), TransferError> {
        let header = message.header();
        if header.id() != self.request.id {
            return Err(TransferError::WrongId { expected: self.request.id, got: header.id() });
        }
        if !header.qr() || header.opcode() != Opcode::QUERY {
            return Err(TransferError::NotAResponse);
        }
        if header.tc() {
            return Err(TransferError::Truncated);
        }
        Ok(())
    }

    /// A message may repeat the question (RFC 5936 section 2.2.1): if it
    /// does, it must be the request's.
    fn check_question(&self, message: &Message<Vec<u8>>) -> Result<(), TransferError> {
        let origin = domain::base::Name::from_octets(&self.request.origin[..]).expect("a zone's origin is a name");
        for question in message.question() {
            let question = question.map_err(|error| TransferError::Malformed(error.to_string()))?;
            let asked = question.qname().name_eq(&origin) && question.qtype() == self.request.kind.qtype();
            if !asked || question.qclass() != Class::IN {
                return Err(TransferError::WrongQuestion);
            }
        }
        Ok(())
    }

    /// The message's answer records, each checked and read into the
    /// form a zone holds: owner lowercase, data uncompressed.
    fn answer_records(&self, message: &Message<Vec<u8>>) -> Result<Vec<Record>, TransferError> {
        let malformed = |error: &dyn std::fmt::Display| TransferError::Malformed(error.to_string());
        let section = message.answer().map_err(|error| malformed(&error))?;
        let mut records = Vec::new();
        for parsed in section {
            let parsed = parsed.map_err(|error| malformed(&error))?;
            let record = parsed.to_record::<ZoneRecordData<_, ParsedName<_>>>().map_err(|error| malformed(&error))?;
            let record = record.ok_or_else(|| TransferError::Malformed("a record of no known form".into()))?;
            let mut owner = Vec::with_capacity(64);
            record.owner().compose(&mut owner).map_err(|error| malformed(&error))?;
            owner.make_ascii_lowercase();
            let rtype = record.rtype().to_int();
            let owner_text = || name::Display(&owner).to_string();
            if record.class() != Class::IN {
                return Err(TransferError::WrongClass { owner: owner_text(), class: record.class().to_string() });
            }
            if !name::is_at_or_below(&owner, &self.request.origin) {
                return Err(TransferError::OutsideZone(owner_text()));
            }
            if types::is_meta(rtype) {
                return Err(TransferError::MetaType { owner: owner_text(), rtype });
            }
            let mut rdata = Vec::new();
            domain::base::rdata::ComposeRecordData::compose_rdata(record.data(), &mut rdata).map_err(|error| malformed(&error))?;
            records.push(Record { owner: owner.into(), rtype, rdata: rdata.into(), ttl: record.ttl().as_secs() });
        }
        Ok(records)
    }

    /// Moves the stream on by one record.
    fn take(&mut self, record: Record) -> Result<(), TransferError> {
        let is_soa = record.rtype == types::SOA;
        let serial = if is_soa { soa_serial(&record.rdata).ok_or_else(|| TransferError::Malformed("SOA data".into()))? } else { 0 };
        if is_soa && *record.owner != *self.request.origin {
            return Err(TransferError::OutsideZone(format!("a SOA at {}", name::Display(&record.owner))));
        }
        self.stream = match std::mem::replace(&mut self.stream, Stream::Start) {
            Stream::Start if self.request.kind == Kind::Soa => match is_soa {
                true => Stream::Done(Assembled::Serial(serial)),
                false => Stream::Start,
            },
            Stream::Start if !is_soa => return Err(TransferError::SoaNotFirst),
            Stream::Start if self.request.kind == Kind::Ixfr => Stream::First { last: record },
            Stream::Start => Stream::Whole { last: record, records: Vec::new() },
            Stream::First { last } if is_soa && Some(serial) == self.current_serial() => {
                let zone = self.current.iter().flat_map(|records| records.iter()).filter(|record| record.rtype != types::SOA);
                Stream::Removing { last, from: serial, zone: zone.cloned().collect() }
            }
            Stream::First { last } => Stream::Whole { last, records: Vec::new() }.then(record)?,
            whole @ Stream::Whole { .. } => whole.then(record)?,
            Stream::Removing { last, from, zone } if is_soa => {
                if !newer(serial, from) {
                    return Err(TransferError::Serials { expected: from.wrapping_add(1), found: serial });
                }
                Stream::Adding { last, to: serial, zone }
            }
            Stream::Removing { last, from, mut zone } => {
                if !zone.remove(&record) {
                    return Err(TransferError::NotInZone(describe(&record)));
                }
                Stream::Removing { last, from, zone }
            }
            Stream::Adding { last, to, zone } if is_soa => {
                let last_serial = soa_serial(&last.rdata).expect("read when it came");
                match (serial == to, to == last_serial) {
                    (true, true) => {
                        let mut zone = zone;
                        zone.insert(last);
                        Stream::Done(Assembled::Zone(zone.into_iter().collect()))
                    }
                    (true, false) => Stream::Removing { last, from: to, zone },
                    (false, _) => return Err(TransferError::Serials { expected: to, found: serial }),
                }
            }
            Stream::Adding { last, to, mut zone } => {
                zone.insert(record);
                Stream::Adding { last, to, zone }
            }
            Stream::Done(_) => return Err(TransferError::AfterTheEnd),
        };
        Ok(())
    }

    /// The stream at the end of a message: finished or not. A first
    /// message of an IXFR's SOA alone, no newer than ours, says we are
    /// up to date.
    fn after_message(&mut self, single: bool) -> Result<Progress, TransferError> {
        let up_to_date = match (&self.stream, self.current_serial()) {
            (Stream::First { last }, Some(ours)) if single => !newer(soa_serial(&last.rdata).expect("read when it came"), ours),
            _ => false,
        };
        if up_to_date {
            self.stream = Stream::Done(Assembled::UpToDate);
        }
        match &self.stream {
            Stream::Start if self.request.kind == Kind::Soa => Err(TransferError::NoSoa),
            Stream::Done(assembled) => {
                if let Some(signing) = self.request.signing.take() {
                    signing.done().map_err(tsig_error)?;
                }
                Ok(Progress::Done(assembled.clone()))
            }
            _ => Ok(Progress::More),
        }
    }

    fn current_serial(&self) -> Option<u32> {
        let soa = self.current.as_ref()?.iter().find(|record| record.rtype == types::SOA)?;
        soa_serial(&soa.rdata)
    }
}

impl Stream {
    /// The whole zone's stream with `record` read: the zone, ended by the
    /// SOA it started with.
    fn then(self, record: Record) -> Result<Stream, TransferError> {
        let Stream::Whole { last, mut records } = self else { unreachable!("called on a whole zone's stream") };
        if record.rtype != types::SOA {
            records.push(record);
            return Ok(Stream::Whole { last, records });
        }
        let (expected, found) = (soa_serial(&last.rdata), soa_serial(&record.rdata));
        if expected != found {
            let serial = |soa: Option<u32>| soa.expect("read when it came");
            return Err(TransferError::Serials { expected: serial(expected), found: serial(found) });
        }
        records.push(last);
        records.sort_unstable();
        records.dedup();
        Ok(Stream::Done(Assembled::Zone(records)))
    }
}

fn tsig_error(error: ValidationError) -> TransferError {
    TransferError::Tsig(error.to_string())
}

/// A record as an error names it: its owner and type.
fn describe(record: &Record) -> String {
    format!("a record of type {} at {}", record.rtype, name::Display(&record.owner))
}

#[cfg(test)]
mod tests {
    use domain::base::iana::Rtype;
    use domain::base::{MessageBuilder, Name, Record as WireRecord, Ttl, UnknownRecordData};
    use domain::tsig::{Algorithm, Key, ServerSequence};

    use super::*;
    use crate::request::TsigKey;

    const ORIGIN: &[u8] = b"\x07example\x04test\x00";
    const NOW: u64 = 1_800_000_000;

    fn record(owner: &str, rtype: u16, rdata: &[u8]) -> Record {
        let owner = pharos_wire::name::from_dotted(owner).unwrap().into();
        Record { owner, rtype, rdata: rdata.into(), ttl: 300 }
    }

    fn soa(serial: u32) -> Record {
        let mut rdata = b"\x02ns\x07example\x04test\x00\x0ahostmaster\x07example\x04test\x00".to_vec();
        for field in [serial, 3600, 600, 86400, 300] {
            rdata.extend(field.to_be_bytes());
        }
        record("example.test", types::SOA, &rdata)
    }

    fn address(owner: &str, last: u8) -> Record {
        record(owner, types::A, &[192, 0, 2, last])
    }

    fn ns() -> Record {
        record("example.test", types::NS, b"\x02ns\x07example\x04test\x00")
    }

    /// The zone at serial 1: its SOA, NS, www and mail.
    fn version_one() -> Arc<[Record]> {
        let mut records = vec![soa(1), ns(), address("www.example.test", 1), address("mail.example.test", 2)];
        records.sort();
        records.into()
    }

    /// A response to `request` carrying `records`, with `id`, `rcode`,
    /// signed by `signer` if given.
    fn response(request: &Request, id: u16, rcode: Rcode, records: &[Record], signer: Option<&mut ServerSequence<TsigKey>>) -> Vec<u8> {
        let mut builder = MessageBuilder::new_vec();
        builder.header_mut().set_id(id);
        builder.header_mut().set_qr(true);
        builder.header_mut().set_rcode(rcode);
        let mut question = builder.question();
        let origin = Name::from_octets(request.origin.to_vec()).unwrap();
        question.push((&origin, request.kind.qtype(), Class::IN)).unwrap();
        let mut answer = question.answer();
        for record in records {
            let owner = Name::from_octets(record.owner.to_vec()).unwrap();
            let data = UnknownRecordData::from_octets(Rtype::from_int(record.rtype), record.rdata.to_vec()).unwrap();
            answer.push(WireRecord::new(owner, Class::IN, Ttl::from_secs(record.ttl), data)).unwrap();
        }
        let mut additional = answer.additional();
        if let Some(signer) = signer {
            signer.answer(&mut additional, domain::rdata::tsig::Time48::from_u64(NOW)).unwrap();
        }
        additional.finish()
    }

    /// Feeds `messages` of records (unsigned, right ID) to an assembler of
    /// `request`'s answers.
    fn assemble(request: Request, current: Option<Arc<[Record]>>, messages: &[&[Record]]) -> Result<Progress, TransferError> {
        let bytes: Vec<Vec<u8>> = messages.iter().map(|records| response(&request, request.id, Rcode::NOERROR, records, None)).collect();
        let mut assembler = Assembler::new(request, current);
        let mut progress = Progress::More;
        for message in bytes {
            progress = assembler.push(&message, NOW)?;
        }
        Ok(progress)
    }

    fn zone(records: &[Record]) -> Progress {
        let mut records = records.to_vec();
        records.sort();
        Progress::Done(Assembled::Zone(records))
    }

    #[test]
    fn an_axfr_is_the_records_between_the_two_soas() {
        let axfr = || Request::axfr(7, ORIGIN, None, NOW);
        let www = address("www.example.test", 1);
        let first: &[Record] = &[soa(5), ns(), www.clone()];
        assert_eq!(assemble(axfr(), None, &[first]), Ok(Progress::More), "no closing SOA yet");
        assert_eq!(assemble(axfr(), None, &[first, &[www.clone(), soa(5)]]), Ok(zone(&[soa(5), ns(), www.clone()])), "a duplicate once");
        assert_eq!(assemble(axfr(), None, &[&[ns()]]), Err(TransferError::SoaNotFirst));
        assert_eq!(assemble(axfr(), None, &[first, &[soa(6)]]), Err(TransferError::Serials { expected: 5, found: 6 }));
        assert_eq!(assemble(axfr(), None, &[&[soa(5), ns(), soa(5), ns()]]), Err(TransferError::AfterTheEnd));
        let outside = address("www.example.org", 1);
        assert_eq!(assemble(axfr(), None, &[&[soa(5), outside]]), Err(TransferError::OutsideZone("www.example.org.".into())));
    }

    #[test]
    fn an_ixfr_applies_each_difference_in_turn() {
        let ixfr = || Request::ixfr(7, ORIGIN, &soa(1), None, NOW);
        let (www, mail, api) = (address("www.example.test", 1), address("mail.example.test", 2), address("api.example.test", 3));
        // 1 -> 2: www removed, api added; 2 -> 3: mail removed, www added back.
        let stream = [soa(3), soa(1), www.clone(), soa(2), api.clone(), soa(2), mail.clone(), soa(3), www.clone(), soa(3)];
        let expected = zone(&[soa(3), ns(), www.clone(), api.clone()]);
        assert_eq!(assemble(ixfr(), Some(version_one()), &[&stream]), Ok(expected.clone()));
        assert_eq!(assemble(ixfr(), Some(version_one()), &[&stream[..4], &stream[4..7], &stream[7..]]), Ok(expected), "split anywhere");
        let skipped = [soa(3), soa(1), www.clone(), soa(2), soa(4), soa(3)];
        assert_eq!(assemble(ixfr(), Some(version_one()), &[&skipped]), Err(TransferError::Serials { expected: 2, found: 4 }));
        let absent = [soa(2), soa(1), api.clone(), soa(2), soa(2)];
        assert!(matches!(assemble(ixfr(), Some(version_one()), &[&absent]), Err(TransferError::NotInZone(_))));
        let backwards = [soa(2), soa(1), soa(1), soa(2)];
        assert!(matches!(assemble(ixfr(), Some(version_one()), &[&backwards]), Err(TransferError::Serials { .. })));
    }

    #[test]
    fn an_ixfr_answered_with_the_soa_alone_or_the_whole_zone() {
        let ixfr = || Request::ixfr(7, ORIGIN, &soa(1), None, NOW);
        assert_eq!(assemble(ixfr(), Some(version_one()), &[&[soa(1)]]), Ok(Progress::Done(Assembled::UpToDate)));
        assert_eq!(assemble(ixfr(), Some(version_one()), &[&[soa(2)]]), Ok(Progress::More), "newer: the rest may follow");
        let whole = [soa(2), ns(), address("www.example.test", 9), soa(2)];
        assert_eq!(assemble(ixfr(), Some(version_one()), &[&whole]), Ok(zone(&whole[..3])), "AXFR-style");
    }

    #[test]
    fn a_soa_query_gives_the_serial() {
        assert_eq!(assemble(Request::soa(7, ORIGIN, None, NOW), None, &[&[soa(42)]]), Ok(Progress::Done(Assembled::Serial(42))));
        assert_eq!(assemble(Request::soa(7, ORIGIN, None, NOW), None, &[&[ns()]]), Err(TransferError::NoSoa));
    }

    #[test]
    fn answers_to_another_request_or_refusals_are_refused() {
        let request = Request::axfr(7, ORIGIN, None, NOW);
        let wrong_id = response(&request, 8, Rcode::NOERROR, &[soa(1)], None);
        let refused = response(&request, 7, Rcode::REFUSED, &[], None);
        let mut assembler = Assembler::new(request, None);
        assert_eq!(assembler.push(&wrong_id, NOW), Err(TransferError::WrongId { expected: 7, got: 8 }));
        assert_eq!(assembler.push(&refused, NOW), Err(TransferError::Rcode("REFUSED".into())));
        assert!(matches!(assembler.push(&[0; 5], NOW), Err(TransferError::Malformed(_))));
        let query = Request::axfr(7, ORIGIN, None, NOW).message;
        assert_eq!(assembler.push(&query, NOW), Err(TransferError::NotAResponse));
    }

    fn key(secret: &[u8]) -> TsigKey {
        Arc::new(Key::new(Algorithm::Sha256, secret, "xfr-key".parse().unwrap(), None, None).unwrap())
    }

    /// The primary's side of a signed transfer: its signing of the answers
    /// to `request`, as a server checks it.
    fn primary(request: &Request, key: &TsigKey) -> ServerSequence<TsigKey> {
        let mut message = Message::from_octets(request.message.clone()).unwrap();
        ServerSequence::request(key, &mut message, domain::rdata::tsig::Time48::from_u64(NOW)).unwrap().unwrap()
    }

    #[test]
    fn a_signed_transfer_is_checked_message_by_message() {
        let ours = key(b"thirty-two octets of a tsig key!");
        let www = address("www.example.test", 1);
        let signed = |signed_messages: &[bool], key: &TsigKey| {
            let request = Request::axfr(7, ORIGIN, Some(&ours), NOW);
            // The primary checks a request signed with its key.
            let mut signer = primary(&Request::axfr(7, ORIGIN, Some(key), NOW), key);
            let last = signed_messages.len() - 1;
            let messages: Vec<Vec<u8>> = signed_messages
                .iter()
                .enumerate()
                .map(|(index, &signed)| {
                    let records = match index {
                        0 => vec![soa(1), ns()],
                        _ if index == last => vec![soa(1)],
                        _ => vec![www.clone()],
                    };
                    response(&request, 7, Rcode::NOERROR, &records, signed.then_some(&mut signer))
                })
                .collect();
            let mut assembler = Assembler::new(request, None);
            messages.iter().try_fold(Progress::More, |_, message| assembler.push(message, NOW))
        };
        assert_eq!(signed(&[true, true, true], &ours), Ok(zone(&[soa(1), ns(), www.clone()])));
        let too_many = Err(TransferError::Tsig("too many unsigned messages".into()));
        assert_eq!(signed(&[true, true, false], &ours), too_many, "the last message unsigned");
        let mut sparse = vec![false; 101];
        sparse[0] = true;
        assert_eq!(signed(&sparse, &ours), too_many, "100 unsigned in a row");
        assert!(matches!(signed(&[false, true], &ours), Err(TransferError::Tsig(_))), "the first unsigned");
        let theirs = key(b"another secret of thirty-two!!!!");
        assert!(matches!(signed(&[true, true], &theirs), Err(TransferError::Tsig(_))), "signed with another secret");
    }
}
