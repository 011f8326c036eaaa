//! Reading an UPDATE message (RFC 2136 section 2): the zone section, the
//! prerequisites and the changes, each record read into what its class
//! says it means (sections 2.4 and 2.5), with the format checks of
//! sections 3.2 and 3.4.1.2 (a wrong TTL, RDLENGTH or class for a record's
//! meaning is FORMERR). Which zone it is, whether the prerequisites hold
//! and what the changes do are `crate::apply`'s business.

use domain::base::ParsedName;
use domain::base::iana::Rtype;
use domain::base::rdata::{ComposeRecordData, ParseRecordData};
use domain::dep::octseq::Parser;
use domain::rdata::ZoneRecordData;
use pharos_wire::name::{self, NameError};
use pharos_wire::{HEADER_LEN, flags, types};
use pharos_zone::journal::Record;

/// The UPDATE opcode (RFC 2136 section 1.3).
pub const OPCODE_UPDATE: u8 = 5;

/// An UPDATE message as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub id: u16,
    /// The zone section's name: lowercase wire form.
    pub zone: Box<[u8]>,
    pub zone_class: u16,
    /// In the order sent.
    pub prerequisites: Vec<Prerequisite>,
    /// In the order sent, which is the order they are applied in.
    pub changes: Vec<Change>,
    /// Where the TSIG record starts, if the message is signed: the
    /// message before it is what the signature covers (RFC 8945).
    pub tsig_at: Option<usize>,
}

/// One record of the prerequisite section, by what its class means
/// (RFC 2136 section 2.4). Owners are lowercase wire names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prerequisite {
    /// Class ANY, a type: an RRset of that type exists at the name,
    /// whatever its records (2.4.1).
    RrsetExists { owner: Box<[u8]>, rtype: u16 },
    /// The zone's class: this record is in the zone; the records of one
    /// name and type together must be exactly its RRset (2.4.2).
    RecordPresent { owner: Box<[u8]>, rtype: u16, rdata: Box<[u8]> },
    /// Class NONE, a type: no RRset of that type at the name (2.4.3).
    RrsetAbsent { owner: Box<[u8]>, rtype: u16 },
    /// Class ANY, type ANY: the name owns at least one record (2.4.4).
    NameInUse { owner: Box<[u8]> },
    /// Class NONE, type ANY: the name owns no record (2.4.5).
    NameNotInUse { owner: Box<[u8]> },
}

impl Prerequisite {
    pub fn owner(&self) -> &[u8] {
        match self {
            Prerequisite::RrsetExists { owner, .. }
            | Prerequisite::RecordPresent { owner, .. }
            | Prerequisite::RrsetAbsent { owner, .. }
            | Prerequisite::NameInUse { owner }
            | Prerequisite::NameNotInUse { owner } => owner,
        }
    }
}

/// One record of the update section, by what its class means (RFC 2136
/// section 2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The zone's class: add this record (2.5.1).
    Add(Record),
    /// Class ANY, a type: delete the RRset of that type (2.5.2).
    DeleteRrset { owner: Box<[u8]>, rtype: u16 },
    /// Class ANY, type ANY: delete every RRset of the name (2.5.3).
    DeleteName { owner: Box<[u8]> },
    /// Class NONE: delete this record (2.5.4).
    DeleteRecord { owner: Box<[u8]>, rtype: u16, rdata: Box<[u8]> },
}

impl Change {
    pub fn owner(&self) -> &[u8] {
        match self {
            Change::Add(record) => &record.owner,
            Change::DeleteRrset { owner, .. } | Change::DeleteName { owner } | Change::DeleteRecord { owner, .. } => owner,
        }
    }

    /// The type it changes; ANY for [`Change::DeleteName`].
    pub fn rtype(&self) -> u16 {
        match self {
            Change::Add(record) => record.rtype,
            Change::DeleteRrset { rtype, .. } | Change::DeleteRecord { rtype, .. } => *rtype,
            Change::DeleteName { .. } => types::ANY,
        }
    }
}

/// Why a message is not a well-formed UPDATE: answered FORMERR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed UPDATE: {reason}")]
pub struct Malformed {
    pub reason: String,
}

fn malformed(reason: impl Into<String>) -> Malformed {
    Malformed { reason: reason.into() }
}

/// One resource record as the message carries it, its owner read.
struct Raw {
    owner: Vec<u8>,
    rtype: u16,
    class: u16,
    ttl: u32,
    /// Where its RDATA starts in the message, and its length.
    rdata_at: usize,
    rdlength: usize,
    /// Where the record starts.
    at: usize,
}

/// The message's sections, by name in RFC 2136 section 2.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Prerequisite,
    Update,
    Additional,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Section::Prerequisite => "prerequisite",
            Section::Update => "update",
            Section::Additional => "additional",
        }
    }
}

/// Reads an UPDATE message. Every input gives a result, never a panic.
pub fn parse(message: &[u8]) -> Result<Update, Malformed> {
    let header = message.get(..HEADER_LEN).ok_or_else(|| malformed("shorter than a DNS header"))?;
    let word = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    let flag_bits = word(2);
    if flag_bits & flags::QR != 0 {
        return Err(malformed("a response, not a request"));
    }
    let opcode = ((flag_bits & flags::OPCODE_MASK) >> 11) as u8;
    if opcode != OPCODE_UPDATE {
        return Err(malformed(format!("opcode {opcode}, not UPDATE ({OPCODE_UPDATE})")));
    }
    let [zones, prerequisites, updates, additionals] = [4, 6, 8, 10].map(word);
    // Section 3.1.1: exactly one zone, named with type SOA.
    if zones != 1 {
        return Err(malformed(format!("{zones} entries in the zone section; exactly one is allowed")));
    }
    let (zone, mut pos) = read_name(message, HEADER_LEN, "the zone section")?;
    let zone_type = read_u16(message, pos).ok_or_else(|| malformed("the zone section ends early"))?;
    let zone_class = read_u16(message, pos + 2).ok_or_else(|| malformed("the zone section ends early"))?;
    pos += 4;
    if zone_type != types::SOA {
        return Err(malformed(format!("the zone section's type is {}, not SOA", Rtype::from_int(zone_type))));
    }
    if [types::CLASS_ANY, types::CLASS_NONE].contains(&zone_class) {
        return Err(malformed(format!("the zone section's class is {zone_class}, which names no zone")));
    }
    let mut update = Update { id: word(0), zone: zone.into(), zone_class, prerequisites: Vec::new(), changes: Vec::new(), tsig_at: None };
    let sections = [(Section::Prerequisite, prerequisites), (Section::Update, updates), (Section::Additional, additionals)];
    let total: usize = sections.iter().map(|&(_, count)| usize::from(count)).sum();
    let mut read = 0;
    for (section, count) in sections {
        for _ in 0..count {
            let raw = read_record(message, pos, section)?;
            pos = raw.rdata_at + raw.rdlength;
            read += 1;
            match section {
                Section::Prerequisite => update.prerequisites.push(prerequisite(message, &raw, zone_class)?),
                Section::Update => update.changes.push(change(message, raw, zone_class)?),
                // RFC 8945 section 5.1: a TSIG record is the last record.
                Section::Additional if raw.rtype == types::TSIG && read != total => {
                    return Err(malformed("a TSIG record that is not the message's last"));
                }
                Section::Additional if raw.rtype == types::TSIG => update.tsig_at = Some(raw.at),
                Section::Additional => {}
            }
        }
    }
    Ok(update)
}

fn read_u16(message: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(message.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(message: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(message.get(at..at + 4)?.try_into().ok()?))
}

fn read_name(message: &[u8], at: usize, place: &str) -> Result<(Vec<u8>, usize), Malformed> {
    name::read_lowercase(message, at).map_err(|error| {
        let why = match error {
            NameError::Truncated => "the message ends inside it",
            NameError::BadLabelType => "a label type that is neither a label nor a pointer",
            NameError::TooLong => "longer than 255 octets",
            NameError::BadPointer | NameError::UnexpectedPointer => "a compression pointer that does not point back",
        };
        malformed(format!("a name in {place} cannot be read: {why}"))
    })
}

fn read_record(message: &[u8], at: usize, section: Section) -> Result<Raw, Malformed> {
    let place = format!("the {} section", section.name());
    let (owner, pos) = read_name(message, at, &place)?;
    let short = || malformed(format!("a record of {place} ends early"));
    let rtype = read_u16(message, pos).ok_or_else(short)?;
    let class = read_u16(message, pos + 2).ok_or_else(short)?;
    let ttl = read_u32(message, pos + 4).ok_or_else(short)?;
    let rdlength = usize::from(read_u16(message, pos + 8).ok_or_else(short)?);
    let rdata_at = pos + 10;
    if message.len() < rdata_at + rdlength {
        return Err(short());
    }
    Ok(Raw { owner, rtype, class, ttl, rdata_at, rdlength, at })
}

/// Section 3.2 (and its pseudocode, 3.2.5): a prerequisite's TTL is 0;
/// class ANY and NONE carry no data; any other class than those and the
/// zone's is an error.
fn prerequisite(message: &[u8], raw: &Raw, zone_class: u16) -> Result<Prerequisite, Malformed> {
    let described = describe(raw);
    if raw.ttl != 0 {
        return Err(malformed(format!("prerequisite {described} has TTL {}; it must be 0", raw.ttl)));
    }
    let owner: Box<[u8]> = raw.owner.clone().into();
    let rtype = raw.rtype;
    if raw.class == types::CLASS_ANY || raw.class == types::CLASS_NONE {
        if raw.rdlength != 0 {
            return Err(malformed(format!("prerequisite {described} carries data; class ANY and NONE carry none")));
        }
        return Ok(match (raw.class == types::CLASS_ANY, rtype == types::ANY) {
            (true, true) => Prerequisite::NameInUse { owner },
            (true, false) => Prerequisite::RrsetExists { owner, rtype },
            (false, true) => Prerequisite::NameNotInUse { owner },
            (false, false) => Prerequisite::RrsetAbsent { owner, rtype },
        });
    }
    if raw.class != zone_class {
        return Err(malformed(format!("prerequisite {described} is of class {}, not the zone's ({zone_class})", raw.class)));
    }
    let rdata = read_rdata(message, raw).map_err(|why| malformed(format!("prerequisite {described}: {why}")))?;
    Ok(Prerequisite::RecordPresent { owner, rtype, rdata })
}

/// Section 3.4.1.2 (and its pseudocode): an added record is of no meta
/// type; a deletion of class ANY has TTL 0, no data and a type that is
/// not a meta type but ANY; one of class NONE has TTL 0 and no meta type.
fn change(message: &[u8], raw: Raw, zone_class: u16) -> Result<Change, Malformed> {
    let described = describe(&raw);
    let refuse = |why: &str| Err(malformed(format!("update {described} {why}")));
    let meta = types::is_meta(raw.rtype);
    if raw.class == types::CLASS_ANY {
        if raw.ttl != 0 || raw.rdlength != 0 {
            return refuse("deletes with class ANY, so must have TTL 0 and no data");
        }
        return match raw.rtype {
            types::ANY => Ok(Change::DeleteName { owner: raw.owner.into() }),
            _ if meta => refuse("names a meta type, which has no RRset to delete"),
            rtype => Ok(Change::DeleteRrset { owner: raw.owner.into(), rtype }),
        };
    }
    if raw.class != types::CLASS_NONE && raw.class != zone_class {
        return refuse(&format!("is of class {}, neither the zone's ({zone_class}) nor ANY or NONE", raw.class));
    }
    if meta {
        return refuse("names a meta type, which is never stored");
    }
    let rdata = read_rdata(message, &raw).map_err(|why| malformed(format!("update {described}: {why}")))?;
    if raw.class == zone_class {
        return Ok(Change::Add(Record { owner: raw.owner.into(), rtype: raw.rtype, rdata, ttl: raw.ttl }));
    }
    if raw.ttl != 0 {
        return refuse("deletes a record with class NONE, so must have TTL 0");
    }
    Ok(Change::DeleteRecord { owner: raw.owner.into(), rtype: raw.rtype, rdata })
}

/// A record's owner, class and type, for messages.
fn describe(raw: &Raw) -> String {
    format!("{} class {} {}", name::Display(&raw.owner), raw.class, Rtype::from_int(raw.rtype))
}

/// A record's data read as its type says (every type `domain` knows is
/// checked; others are taken as they are), in canonical form (RFC 4034
/// section 6.2): the names in it decompressed and, for the types that
/// section lists, lowercased, as Knot DNS stores what an update adds.
fn read_rdata(message: &[u8], raw: &Raw) -> Result<Box<[u8]>, String> {
    let mut parser = Parser::from_ref(message);
    parser.advance(raw.rdata_at).map_err(|_| "the record data is cut short")?;
    let data = parser.parse_parser(raw.rdlength).map_err(|_| "the record data is cut short")?;
    canonical_from(data, raw.rtype)
}

/// Uncompressed record data of type `rtype` (a zone's) in canonical form,
/// as [`read_rdata`] gives an update's: so the two compare as RFC 2136
/// section 1.1.1 compares records. Data that cannot be read is its own
/// canonical form.
pub(crate) fn canonical_rdata(rtype: u16, rdata: &[u8]) -> Box<[u8]> {
    canonical_from(Parser::from_ref(rdata), rtype).unwrap_or_else(|_| rdata.into())
}

fn canonical_from(mut data: Parser<'_, [u8]>, rtype: u16) -> Result<Box<[u8]>, String> {
    let rtype = Rtype::from_int(rtype);
    let parsed = ZoneRecordData::<&[u8], ParsedName<&[u8]>>::parse_rdata(rtype, &mut data)
        .map_err(|error| format!("malformed record data: {error}"))?
        .ok_or_else(|| format!("record data of type {rtype} cannot be read"))?;
    if data.remaining() != 0 {
        return Err(format!("{} octets after the record data's end", data.remaining()));
    }
    let mut rdata = Vec::with_capacity(64);
    let too_long = "the record data is too long once its names are decompressed";
    parsed.compose_canonical_rdata(&mut rdata).map_err(|_| too_long)?;
    if rdata.len() > usize::from(u16::MAX) {
        return Err(too_long.into());
    }
    Ok(rdata.into())
}
