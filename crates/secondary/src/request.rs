//! The requests a secondary sends its primary: the SOA query that tells
//! whether the zone changed, then the IXFR (RFC 1995 section 3: the
//! secondary's SOA in the authority section says which version it has)
//! or the AXFR (RFC 5936) that fetches it. With a key, each is signed
//! (RFC 8945 section 5.1) and the signing is kept to check the answers
//! with ([`crate::Assembler`]).

use std::sync::Arc;

use domain::base::iana::{Class, Opcode, Rtype};
use domain::base::{MessageBuilder, Name, Record as WireRecord, Ttl, UnknownRecordData};
use domain::tsig::{ClientSequence, Key};
use pharos_zone::journal::Record;

/// A TSIG key, shared by the zone's requests.
pub type TsigKey = Arc<Key>;

/// What a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The zone's SOA: its serial, to compare with ours.
    Soa,
    /// The differences from our version (RFC 1995).
    Ixfr,
    /// The whole zone (RFC 5936).
    Axfr,
}

impl Kind {
    pub fn qtype(self) -> Rtype {
        match self {
            Kind::Soa => Rtype::SOA,
            Kind::Ixfr => Rtype::IXFR,
            Kind::Axfr => Rtype::AXFR,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Soa => "SOA query",
            Kind::Ixfr => "IXFR",
            Kind::Axfr => "AXFR",
        })
    }
}

/// A request as sent (without a stream's length prefix), and what
/// checking its answers needs.
#[derive(Debug)]
pub struct Request {
    pub message: Vec<u8>,
    pub id: u16,
    pub kind: Kind,
    /// The zone's origin, lowercase wire form.
    pub origin: Box<[u8]>,
    /// The signing of the request, which each signed answer continues.
    pub(crate) signing: Option<ClientSequence<TsigKey>>,
}

impl Request {
    /// The SOA query for the zone at `origin` (lowercase wire form) with
    /// message ID `id`, signed by `key` at `now` (Unix seconds) if given.
    pub fn soa(id: u16, origin: &[u8], key: Option<&TsigKey>, now: u64) -> Request {
        Request::new(id, origin, Kind::Soa, None, key, now)
    }

    /// The IXFR request for the zone at `origin` from the version whose
    /// SOA is `current` (its record, as the zone holds it).
    pub fn ixfr(id: u16, origin: &[u8], current: &Record, key: Option<&TsigKey>, now: u64) -> Request {
        Request::new(id, origin, Kind::Ixfr, Some(current), key, now)
    }

    /// The AXFR request for the zone at `origin`.
    pub fn axfr(id: u16, origin: &[u8], key: Option<&TsigKey>, now: u64) -> Request {
        Request::new(id, origin, Kind::Axfr, None, key, now)
    }

    fn new(id: u16, origin: &[u8], kind: Kind, current: Option<&Record>, key: Option<&TsigKey>, now: u64) -> Request {
        let name = Name::from_octets(origin.to_vec()).expect("a zone's origin is a name");
        let mut builder = MessageBuilder::new_vec();
        builder.header_mut().set_id(id);
        builder.header_mut().set_opcode(Opcode::QUERY);
        let mut question = builder.question();
        question.push((&name, kind.qtype(), Class::IN)).expect("a question fits a message");
        let mut authority = question.authority();
        if let Some(soa) = current {
            let data = UnknownRecordData::from_octets(Rtype::SOA, soa.rdata.to_vec()).expect("SOA data fits a record");
            let record = WireRecord::new(&name, Class::IN, Ttl::from_secs(soa.ttl), data);
            authority.push(record).expect("a SOA fits a message");
        }
        let mut additional = authority.additional();
        let signing = key.map(|key| {
            let now = domain::rdata::tsig::Time48::from_u64(now);
            ClientSequence::request(key.clone(), &mut additional, now).expect("a TSIG record fits a message")
        });
        let message = additional.finish();
        Request { message, id, kind, origin: origin.into(), signing }
    }
}
