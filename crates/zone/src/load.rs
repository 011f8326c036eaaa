//! Loading a zone from an RFC 1035 master file.
//!
//! The `domain` crate scans the text (directives, relative names, escapes,
//! parentheses, RFC 3597 generic data); this module follows `$INCLUDE`,
//! turns LOC records into generic data (the parser has no LOC scanner), and
//! checks the result as an authoritative server must before serving it.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use domain::base::iana::Class;
use domain::base::rdata::{ComposeRecordData, ParseRecordData};
use domain::base::{Name, ToName};
use domain::zonefile::inplace::{Entry, Zonefile};
use pharos_wire::{name, types};
use rustc_hash::FxHashMap;

use crate::journal::{DEFAULT_JOURNAL_VERSIONS, Journal, Record};
use crate::presentation;
use crate::zone::{Node, Rrset, Zone, add_empty_ancestors};

/// How deep `$INCLUDE` may nest before we call it a loop.
const MAX_INCLUDE_DEPTH: usize = 8;

/// A zone that cannot be served, with the place that says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct LoadError {
    /// `file:line`, or just `file` when no line is to blame.
    pub location: String,
    pub message: String,
}

impl LoadError {
    fn at(file: &str, line: Option<usize>, message: impl Into<String>) -> Self {
        let location = match line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_string(),
        };
        LoadError { location, message: message.into() }
    }
}

/// One record as read, with where it was read from.
struct ReadRecord {
    owner: Box<[u8]>,
    rtype: u16,
    ttl: u32,
    rdata: Box<[u8]>,
    file: String,
    line: usize,
}

/// Reads and checks the zone `origin` from the master file at `path`.
pub fn load_zone_file(origin: &str, path: &Path) -> Result<Zone, LoadError> {
    let mut records = Vec::new();
    let origin_name = parse_origin(origin, &path.display().to_string())?;
    read_file(path, &origin_name, 0, &mut records)?;
    build_zone(&origin_name, records, &path.display().to_string())
}

/// Reads and checks a zone from text; `source` names it in errors. Text
/// that is not a file may not `$INCLUDE` one: it comes from the control
/// API or the store, whose writers must not read the server's files.
pub fn parse_zone_text(origin: &str, text: &str, source: &str) -> Result<Zone, LoadError> {
    let mut records = Vec::new();
    let origin_name = parse_origin(origin, source)?;
    read_text(text, source, None, &origin_name, 0, &mut records)?;
    build_zone(&origin_name, records, source)
}

/// Builds and checks the zone at `origin` (lowercase wire form) from
/// `records` as a transfer gave them (its SOA among them); `source` names
/// it in errors, which give a record's place in `records` as its line.
pub fn zone_from_records(origin: &[u8], records: &[Record], source: &str) -> Result<Zone, LoadError> {
    let origin_name = Name::from_octets(Bytes::copy_from_slice(origin))
        .map_err(|error| LoadError::at(source, None, format!("the zone's name is not a domain name: {error}")))?;
    let read = records.iter().enumerate().map(|(index, record)| {
        let line = index + 1;
        let rtype = domain::base::iana::Rtype::from_int(record.rtype);
        check_rdata_reads_back(rtype, &record.rdata).map_err(|message| LoadError::at(source, Some(line), message))?;
        let (owner, rdata) = (record.owner.clone(), record.rdata.clone());
        Ok(ReadRecord { owner, rtype: record.rtype, ttl: record.ttl, rdata, file: source.to_string(), line })
    });
    build_zone(&origin_name, read.collect::<Result<_, LoadError>>()?, source)
}

/// Reads records from text relative to `origin`, without the checks a
/// whole zone gets (a SOA, NS at the apex, ...): the records a change
/// brings, checked with the zone they go into.
pub fn parse_records(origin: &str, text: &str, source: &str) -> Result<Vec<Record>, LoadError> {
    let mut records = Vec::new();
    let origin_name = parse_origin(origin, source)?;
    read_text(text, source, None, &origin_name, 0, &mut records)?;
    Ok(records.into_iter().map(|read| Record { owner: read.owner, rtype: read.rtype, rdata: read.rdata, ttl: read.ttl }).collect())
}

fn parse_origin(origin: &str, source: &str) -> Result<Name<Bytes>, LoadError> {
    let absolute = if origin.ends_with('.') { origin.to_string() } else { format!("{origin}.") };
    Name::from_str(&absolute).map_err(|err| LoadError::at(source, None, format!("zone name {origin:?} is not a domain name: {err}")))
}

fn read_file(path: &Path, origin: &Name<Bytes>, depth: usize, records: &mut Vec<ReadRecord>) -> Result<(), LoadError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| LoadError::at(&file, None, format!("cannot read zone file: {err}")))?;
    let directory = path.parent().map(Path::to_path_buf).unwrap_or_default();
    read_text(&text, &file, Some(&directory), origin, depth, records)
}

fn read_text(
    text: &str,
    file: &str,
    directory: Option<&Path>,
    origin: &Name<Bytes>,
    depth: usize,
    records: &mut Vec<ReadRecord>,
) -> Result<(), LoadError> {
    let rewritten =
        presentation::rewrite(text, &presentation_name(origin)).map_err(|(line, message)| LoadError::at(file, Some(line), message))?;
    let mut zonefile = Zonefile::from(rewritten.text.as_str());
    let mut entry_lines = rewritten.entry_lines.iter().copied();
    let mut line = 1;
    zonefile.set_origin(origin.clone());
    zonefile.set_default_class(Class::IN);
    loop {
        // Past the last entry the pass found, the parser can only report
        // the end or an error: the last line is as near as it gets.
        line = entry_lines.next().unwrap_or(line);
        // The parser has panicked on some malformed input (found by fuzzing
        // domain 0.12.3: a TXT string at the end of an open record); a bad
        // zone file must be an error, never a crash.
        let scanned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| zonefile.next_entry()));
        let entry = match scanned {
            Ok(Ok(Some(entry))) => entry,
            Ok(Ok(None)) => return Ok(()),
            Ok(Err(error)) => return Err(parser_error(file, line, &error)),
            Err(_) => return Err(LoadError::at(file, Some(line), "malformed record (the zone-file parser could not read it)")),
        };
        match entry {
            Entry::Record(record) => records.push(convert_record(&record, file, line)?),
            Entry::Include { path, origin: include_origin } => {
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(LoadError::at(file, Some(line), "$INCLUDE nested too deeply (a loop?)"));
                }
                let Some(directory) = directory else {
                    return Err(LoadError::at(file, Some(line), "$INCLUDE is refused in zone text that is not a file"));
                };
                let include_path = resolve_include(directory, path.as_ref());
                let include_origin = include_origin.or_else(|| zonefile.origin().ok()).unwrap_or_else(|| origin.clone());
                read_file(&include_path, &include_origin, depth + 1, records)
                    .map_err(|err| LoadError::at(file, Some(line), format!("in $INCLUDE {}: {err}", include_path.display())))?;
            }
        }
    }
}

/// An absolute name in presentation format, with its final dot.
fn presentation_name(name: &Name<Bytes>) -> String {
    let text = name.to_string();
    if text.ends_with('.') { text } else { format!("{text}.") }
}

/// `domain` reports "line:col: message", where the position is often past
/// the bad token (even on the next line); report the line the entry starts
/// on instead, with its message.
fn parser_error(file: &str, line: usize, error: &domain::zonefile::inplace::Error) -> LoadError {
    let text = error.to_string();
    let message = text.splitn(3, ':').nth(2).map_or(text.as_str(), str::trim);
    LoadError::at(file, Some(line), message)
}

fn resolve_include(directory: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() { path.to_path_buf() } else { directory.join(path) }
}

fn convert_record(record: &domain::zonefile::inplace::ScannedRecord, file: &str, line: usize) -> Result<ReadRecord, LoadError> {
    if record.class() != Class::IN {
        return Err(LoadError::at(file, Some(line), format!("class {} is not served; only IN", record.class())));
    }
    let mut owner = Vec::with_capacity(64);
    record.owner().compose(&mut owner).map_err(|_| LoadError::at(file, Some(line), "owner name too long"))?;
    owner.make_ascii_lowercase();
    if name::uncompressed_len(&owner, 0) != Ok(owner.len()) {
        return Err(LoadError::at(file, Some(line), "malformed owner name (an empty label?)"));
    }
    let mut rdata = Vec::with_capacity(64);
    record.data().compose_rdata(&mut rdata).map_err(|_| LoadError::at(file, Some(line), "record data too long"))?;
    if rdata.len() > u16::MAX as usize {
        return Err(LoadError::at(file, Some(line), "record data longer than 65535 octets"));
    }
    check_rdata_reads_back(record.rtype(), &rdata).map_err(|message| LoadError::at(file, Some(line), message))?;
    Ok(ReadRecord {
        owner: owner.into(),
        rtype: record.rtype().to_int(),
        ttl: record.ttl().as_secs(),
        rdata: rdata.into(),
        file: file.to_string(),
        line,
    })
}

/// Reads composed record data back with `domain`'s wire parser: the
/// scanner accepts some malformed text (an empty label, as in `a..b`) and
/// composes it into data that no resolver could read.
fn check_rdata_reads_back(rtype: domain::base::iana::Rtype, rdata: &[u8]) -> Result<(), String> {
    let mut parser = domain::dep::octseq::Parser::from_ref(rdata);
    let parsed = domain::rdata::ZoneRecordData::<&[u8], domain::base::ParsedName<&[u8]>>::parse_rdata(rtype, &mut parser);
    match parsed {
        Ok(_) if parser.remaining() == 0 => Ok(()),
        Ok(_) => Err("malformed record data (an empty label in a name?)".into()),
        Err(error) => Err(format!("malformed record data: {error}")),
    }
}

/// Groups records into RRsets and nodes, then checks the zone as a whole.
fn build_zone(origin: &Name<Bytes>, records: Vec<ReadRecord>, source: &str) -> Result<Zone, LoadError> {
    let mut origin_wire = Vec::new();
    origin.compose(&mut origin_wire).expect("a parsed name fits");
    origin_wire.make_ascii_lowercase();
    let mut nodes: FxHashMap<Box<[u8]>, Node> = FxHashMap::default();
    nodes.insert(origin_wire.clone().into(), Node::default());
    let mut first_seen: FxHashMap<Box<[u8]>, (String, usize)> = FxHashMap::default();
    for record in records {
        first_seen.entry(record.owner.clone()).or_insert_with(|| (record.file.clone(), record.line));
        add_record(&mut nodes, &origin_wire, record)?;
    }
    check_nothing_below_dnames(&nodes, &origin_wire, &first_seen)?;
    let zone_text = name::Display(&origin_wire).to_string();
    let apex = &nodes[&origin_wire[..]];
    let soa = apex.get(types::SOA).ok_or_else(|| LoadError::at(source, None, format!("zone {zone_text} has no SOA record at its apex")))?;
    if soa.rdatas.len() != 1 {
        return Err(LoadError::at(source, None, format!("zone {zone_text} has {} SOA records; exactly one is allowed", soa.rdatas.len())));
    }
    if !apex.has(types::NS) {
        return Err(LoadError::at(source, None, format!("zone {zone_text} has no NS records at its apex")));
    }
    let soa_minimum = soa.rdatas[0]
        .len()
        .checked_sub(4)
        .and_then(|at| soa.rdatas[0].get(at..))
        .map(|bytes| u32::from_be_bytes(bytes.try_into().unwrap()));
    let negative_ttl = soa.ttl.min(soa_minimum.unwrap_or(0));
    for node in nodes.values_mut() {
        node.rrsets.sort_by_key(|rrset| rrset.rtype);
    }
    let journal = Arc::new(Journal::new(DEFAULT_JOURNAL_VERSIONS));
    Ok(Zone { origin: origin_wire.into(), nodes, negative_ttl, signer: None, journal, expired: false })
}

fn add_record(nodes: &mut FxHashMap<Box<[u8]>, Node>, origin: &[u8], record: ReadRecord) -> Result<(), LoadError> {
    let fail = |message: String| LoadError::at(&record.file, Some(record.line), message);
    let owner_text = name::Display(&record.owner).to_string();
    if !name::is_at_or_below(&record.owner, origin) {
        return Err(fail(format!("{owner_text} is outside the zone {}", name::Display(origin))));
    }
    if record.rtype == types::SOA && *record.owner != *origin {
        return Err(fail(format!("SOA record at {owner_text}, which is not the zone apex")));
    }
    if types::is_meta(record.rtype) {
        return Err(fail(format!("record type {} cannot be stored in a zone", record.rtype)));
    }
    add_empty_ancestors(nodes, &record.owner, origin);
    let node = nodes.entry(record.owner.clone()).or_default();
    check_coexistence(node, record.rtype).map_err(|message| fail(format!("{owner_text}: {message}")))?;
    match node.rrsets.iter_mut().find(|rrset| rrset.rtype == record.rtype) {
        Some(rrset) if rrset.ttl != record.ttl => {
            return Err(fail(format!(
                "{owner_text}: TTL {} differs from {} of the other records of this type (RFC 2181 section 5.2)",
                record.ttl, rrset.ttl
            )));
        }
        // RFC 2181 section 5: a duplicate record is the same record.
        Some(rrset) if rrset.rdatas.contains(&record.rdata) => {}
        Some(rrset) => rrset.rdatas.push(record.rdata),
        None => node.rrsets.push(Rrset { rtype: record.rtype, ttl: record.ttl, rdatas: vec![record.rdata], rrsigs: Vec::new() }),
    }
    Ok(())
}

/// RFC 6672 section 2.4: no data may exist below a DNAME's owner.
fn check_nothing_below_dnames(
    nodes: &FxHashMap<Box<[u8]>, Node>,
    origin: &[u8],
    first_seen: &FxHashMap<Box<[u8]>, (String, usize)>,
) -> Result<(), LoadError> {
    for (owner, (file, line)) in first_seen {
        let mut ancestor = name::parent(owner);
        while let Some(above) = ancestor.filter(|above| above.len() >= origin.len()) {
            if nodes.get(above).is_some_and(|node| node.has(types::DNAME)) {
                let message = format!("{} is below the DNAME at {} (RFC 6672 section 2.4)", name::Display(owner), name::Display(above));
                return Err(LoadError::at(file, Some(*line), message));
            }
            ancestor = name::parent(above);
        }
    }
    Ok(())
}

/// RFC 1034 section 3.6.2 and RFC 6672 section 2.4: a CNAME stands alone,
/// there is one CNAME and one DNAME at most, and no CNAME beside a DNAME.
fn check_coexistence(node: &Node, rtype: u16) -> Result<(), String> {
    let has_cname = node.has(types::CNAME);
    match rtype {
        types::CNAME if has_cname => Err("more than one CNAME record".into()),
        types::CNAME if !node.rrsets.is_empty() => Err("CNAME record beside other data".into()),
        types::DNAME if node.has(types::DNAME) => Err("more than one DNAME record".into()),
        _ if has_cname => Err("other data beside a CNAME record".into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = "$TTL 300\n@ IN SOA ns hostmaster 1 7200 3600 1209600 60\n  NS ns\nns A 192.0.2.1\n";

    #[test]
    fn loads_a_small_zone() {
        let zone = parse_zone_text("example.test", &format!("{ZONE}a.b.c 600 AAAA 2001:db8::1\n"), "inline").unwrap();
        assert_eq!(zone.negative_ttl, 60);
        assert!(zone.node(&name::from_dotted("b.c.example.test").unwrap()).unwrap().rrsets.is_empty());
        assert_eq!(zone.node(&name::from_dotted("a.b.c.example.test").unwrap()).unwrap().rrsets[0].ttl, 600);
    }

    #[test]
    fn reports_file_and_line_for_bad_records() {
        let err = parse_zone_text("example.test", &format!("{ZONE}\n; note\nwww A 300.1.2.3\n"), "z.zone").unwrap_err();
        assert_eq!(err.location, "z.zone:7", "{err}");
        let err = parse_zone_text("example.test", &format!("{ZONE}www CNAME ns\nwww A 192.0.2.2\n"), "z.zone").unwrap_err();
        assert_eq!(err.to_string(), "z.zone:6: www.example.test.: other data beside a CNAME record");
        let err = parse_zone_text("example.test", &format!("{ZONE}out.example.org. A 192.0.2.2\n"), "z.zone").unwrap_err();
        assert_eq!(err.location, "z.zone:5");
        let err = parse_zone_text("example.test", &format!("{ZONE}old DNAME new.example.\nx.old A 192.0.2.3\n"), "z.zone").unwrap_err();
        assert_eq!(err.to_string(), "z.zone:6: x.old.example.test. is below the DNAME at old.example.test. (RFC 6672 section 2.4)");
        // The parser's own offset still points into the SOA's line here.
        let err = parse_zone_text("example.test", "$TTL 300\n@ SOA ns h 1 2 3 4 5\nwww A 192.0.2.300\n", "z.zone").unwrap_err();
        assert_eq!(err.location, "z.zone:3", "{err}");
        let err = parse_zone_text("example.test", "@ 300 IN NS ns\n", "z.zone").unwrap_err();
        assert!(err.message.contains("no SOA"), "{err}");
    }

    #[test]
    fn rejects_ttl_mismatch_and_keeps_duplicates_once() {
        let err = parse_zone_text("example.test", &format!("{ZONE}ns 60 A 192.0.2.9\n"), "z").unwrap_err();
        assert!(err.message.contains("RFC 2181"), "{err}");
        let zone = parse_zone_text("example.test", &format!("{ZONE}ns A 192.0.2.1\n"), "z").unwrap();
        assert_eq!(zone.node(&name::from_dotted("ns.example.test").unwrap()).unwrap().rrsets[0].rdatas.len(), 1);
    }

    #[test]
    fn follows_include_relative_to_the_including_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("parts")).unwrap();
        std::fs::write(dir.path().join("parts/hosts.inc"), "$TTL 120\nhost A 192.0.2.7\n").unwrap();
        std::fs::write(dir.path().join("parts/lab.inc"), "$TTL 120\n@ TXT \"lab\"\nbad A not-an-address\n").unwrap();
        let main = dir.path().join("main.zone");
        std::fs::write(&main, format!("{ZONE}$INCLUDE parts/hosts.inc\n$INCLUDE parts/hosts.inc sub.example.test.\n")).unwrap();
        let zone = load_zone_file("example.test", &main).unwrap();
        assert_eq!(zone.node(&name::from_dotted("host.example.test").unwrap()).unwrap().rrsets[0].ttl, 120);
        assert!(zone.node(&name::from_dotted("host.sub.example.test").unwrap()).is_some(), "origin given to $INCLUDE");
        std::fs::write(&main, format!("{ZONE}$INCLUDE parts/lab.inc lab.example.test.\n")).unwrap();
        let error = load_zone_file("example.test", &main).unwrap_err().to_string();
        assert!(error.contains("main.zone:5") && error.contains("lab.inc:3"), "{error}");
        std::fs::write(&main, format!("{ZONE}$INCLUDE main.zone\n")).unwrap();
        assert!(load_zone_file("example.test", &main).unwrap_err().to_string().contains("nested too deeply"));
    }

    #[test]
    fn refuses_what_fuzzing_found() {
        // A TXT string at the end of an open record made the parser panic:
        // with no final line break (valid: read as if there were one) ...
        let zone = parse_zone_text("example.test", &format!("{ZONE}t TXT \"\""), "z").unwrap();
        assert_eq!(zone.node(&name::from_dotted("t.example.test").unwrap()).unwrap().rrsets[0].rdatas[0][..], [0]);
        // ... or inside a '(' never closed (refused).
        let err = parse_zone_text("example.test", &format!("{ZONE}@ TXT(s\n"), "z").unwrap_err();
        assert_eq!(err.to_string(), "z:5: a '(' is never closed");
        // An empty label composed into record data no resolver can read.
        for record in ["w CNAME a..b", "w NS a..", "w MX 10 a..b"] {
            let err = parse_zone_text("example.test", &format!("{ZONE}{record}\n"), "z").unwrap_err();
            assert!(err.message.contains("malformed"), "{record}: {err}");
        }
    }
}
