//! A zone's records written back as master-file text (RFC 1035 section 5),
//! for zones the store keeps: what the store holds reads as a zone file
//! does, and reads back into the same records.
//!
//! Record data is written in its type's presentation form by the `domain`
//! crate; data it cannot write so that its own parser reads the same
//! octets back (found by reading the whole text back) is written in the
//! generic form of RFC 3597 (`\# length hex`) instead, which reads back
//! whatever the type.

use std::collections::HashSet;
use std::fmt::Write;

use domain::base::iana::Rtype;
use domain::base::rdata::ParseRecordData;
use domain::rdata::ZoneRecordData;
use pharos_wire::{name, types};

use crate::journal::Record;
use crate::load::parse_zone_text;
use crate::zone::Zone;

/// Every record of `zone`, its SOA included, sorted.
pub fn records_of(zone: &Zone) -> Vec<Record> {
    let mut records: Vec<Record> = zone
        .nodes
        .iter()
        .flat_map(|(owner, node)| node.rrsets.iter().map(move |rrset| (owner, rrset)))
        .flat_map(|(owner, rrset)| {
            rrset.rdatas.iter().map(|rdata| Record { owner: owner.clone(), rtype: rrset.rtype, rdata: rdata.clone(), ttl: rrset.ttl })
        })
        .collect();
    records.sort_unstable();
    records
}

/// The master-file text of a zone `origin` (wire form) holding `records`:
/// the SOA first, one record per line, absolute names.
pub fn zone_text(origin: &[u8], records: &[Record]) -> String {
    let presented = write_lines(records, |_| false);
    let origin_text = name::Display(origin).to_string();
    let read_back: HashSet<Record> = match parse_zone_text(&origin_text, &presented, "zone text") {
        Ok(zone) => records_of(&zone).into_iter().collect(),
        Err(_) => HashSet::new(),
    };
    if records.iter().all(|record| read_back.contains(record)) {
        return presented;
    }
    write_lines(records, |record| !read_back.contains(record))
}

/// One line per record, the SOA first; `generic` says which records'
/// data is written in RFC 3597 form.
fn write_lines(records: &[Record], generic: impl Fn(&Record) -> bool) -> String {
    let mut text = String::new();
    for record in in_reading_order(records) {
        let data = if generic(record) { generic_data(&record.rdata) } else { rdata_text(record.rtype, &record.rdata) };
        let _ = writeln!(text, "{} {} IN {} {}", name::Display(&record.owner), record.ttl, Rtype::from_int(record.rtype), data);
    }
    text
}

/// `records` as people read a zone: the SOA first, then by owner from the
/// root down, each owner's records by type.
pub fn in_reading_order(records: &[Record]) -> Vec<&Record> {
    let mut ordered: Vec<&Record> = records.iter().collect();
    ordered.sort_by_cached_key(|record| (record.rtype != types::SOA, labels_from_the_root(&record.owner), record.rtype));
    ordered
}

/// The labels of a wire-form `owner`, the top one first.
fn labels_from_the_root(owner: &[u8]) -> Vec<&[u8]> {
    let mut labels: Vec<&[u8]> = name::label_offsets(owner).map(|at| &owner[at + 1..at + 1 + owner[at] as usize]).collect();
    labels.reverse();
    labels
}

/// `rdata` of type `rtype` in presentation form, or in RFC 3597 form if
/// `domain` does not read it.
pub fn rdata_text(rtype: u16, rdata: &[u8]) -> String {
    if rtype == types::SRV {
        // `domain` writes the target without its final dot, which its own
        // parser then reads as relative to the origin.
        if let Some(text) = srv_text(rdata) {
            return text;
        }
    }
    let mut parser = domain::dep::octseq::Parser::from_ref(rdata);
    match ZoneRecordData::<&[u8], domain::base::ParsedName<&[u8]>>::parse_rdata(Rtype::from_int(rtype), &mut parser) {
        Ok(Some(data)) if parser.remaining() == 0 => data.to_string(),
        _ => generic_data(rdata),
    }
}

/// SRV data (RFC 2782): priority, weight, port and the absolute target.
fn srv_text(rdata: &[u8]) -> Option<String> {
    let field = |at: usize| Some(u16::from_be_bytes(rdata.get(at..at + 2)?.try_into().ok()?));
    let target = rdata.get(6..)?;
    if name::uncompressed_len(target, 0) != Ok(target.len()) {
        return None;
    }
    Some(format!("{} {} {} {}", field(0)?, field(2)?, field(4)?, name::Display(target)))
}

/// RFC 3597 section 5: `\# length hex`.
fn generic_data(rdata: &[u8]) -> String {
    let mut text = format!("\\# {}", rdata.len());
    if !rdata.is_empty() {
        text.push(' ');
        for byte in rdata {
            let _ = write!(text, "{byte:02x}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = "$TTL 300\n\
        @ SOA ns hostmaster 2024010101 3600 600 86400 300\n\
        @ NS ns\n\
        @ MX 10 mail\n\
        @ TXT \"v=spf1 -all\" \"two; strings\"\n\
        @ CAA 0 issue \"letsencrypt.org\"\n\
        ns A 192.0.2.53\n\
        www AAAA 2001:db8::1\n\
        _sip._tcp SRV 10 5 5060 sip\n\
        alias CNAME www\n\
        loc LOC 52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m\n\
        svc HTTPS 1 . alpn=h3,h2 ipv4hint=192.0.2.1\n\
        odd TYPE65280 \\# 3 010203\n";

    #[test]
    fn a_zone_written_as_text_reads_back_to_the_same_records() {
        let zone = parse_zone_text("example.test.", ZONE, "test").unwrap();
        let records = records_of(&zone);
        let text = zone_text(&zone.origin, &records);
        assert!(text.starts_with("example.test. 300 IN SOA "), "{text}");
        let again = parse_zone_text("example.test.", &text, "again").unwrap();
        assert_eq!(records_of(&again), records, "{text}");
    }

    #[test]
    fn data_is_written_in_its_presentation_form_where_it_reads_back() {
        let zone = parse_zone_text("example.test.", ZONE, "test").unwrap();
        let text = zone_text(&zone.origin, &records_of(&zone));
        assert!(text.contains("www.example.test. 300 IN AAAA 2001:db8::1\n"), "{text}");
        assert!(text.contains("example.test. 300 IN MX 10 mail.example.test.\n"), "{text}");
        assert!(text.contains("odd.example.test. 300 IN TYPE65280 \\# 3 01 02 03\n"), "{text}");
        assert!(text.contains("_sip._tcp.example.test. 300 IN SRV 10 5 5060 sip.example.test.\n"), "{text}");
    }
}
