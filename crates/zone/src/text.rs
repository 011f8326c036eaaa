//! Records written as master-file text (RFC 1035 section 5), one a line,
//! that [`crate::parse_zone_text`] reads back: how a secondary zone's last
//! transfer is kept in the store. Record data is written by the `domain`
//! crate's presentation format; a type it does not know in RFC 3597's
//! generic form (`TYPE65534 \# 3 0a0b0c`).

use std::fmt::Write;

use domain::base::iana::Rtype;
use domain::base::rdata::ParseRecordData;
use domain::base::{ParsedName, iana::Class};
use domain::dep::octseq::Parser;
use domain::rdata::ZoneRecordData;
use pharos_wire::name;

use crate::journal::Record;

/// `records` as master-file text. Names are relative to the root
/// (`$ORIGIN .`): `domain` writes some data's names (SRV's target)
/// without their final dot.
pub fn records_to_text(records: &[Record]) -> String {
    let mut text = String::from("$ORIGIN .\n");
    for record in records {
        let owner = name::Display(&record.owner);
        write!(text, "{owner} {} {} ", record.ttl, Class::IN).expect("a String takes any text");
        write_data(&mut text, record.rtype, &record.rdata);
        text.push('\n');
    }
    text
}

/// The record's type and data, as `domain` presents them if it knows
/// the type and reads the data whole, else in the generic form.
fn write_data(text: &mut String, rtype: u16, rdata: &[u8]) {
    let mut parser = Parser::from_ref(rdata);
    let parsed = ZoneRecordData::<&[u8], ParsedName<&[u8]>>::parse_rdata(Rtype::from_int(rtype), &mut parser);
    match parsed {
        Ok(Some(data)) if parser.remaining() == 0 && !matches!(data, ZoneRecordData::Unknown(_)) => {
            write!(text, "{} {data}", Rtype::from_int(rtype)).expect("a String takes any text")
        }
        _ => {
            write!(text, "TYPE{rtype} \\# {}", rdata.len()).expect("a String takes any text");
            if !rdata.is_empty() {
                text.push(' ');
                rdata.iter().for_each(|octet| write!(text, "{octet:02x}").expect("a String takes any text"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::file_records;
    use crate::{load_zone_file, parse_zone_text, zone_from_records};

    #[test]
    fn a_zone_written_as_text_reads_back_the_same() {
        // Every type the conformance tests serve (its $INCLUDE'd file).
        let zone = load_zone_file("example.com", std::path::Path::new("../../tests/zones/example.com.zone")).unwrap();
        let soa = Record { owner: zone.origin.clone(), rtype: 6, rdata: zone.soa().rdatas[0].clone(), ttl: zone.soa().ttl };
        let mut records: Vec<Record> = file_records(&zone).to_vec();
        records.push(soa);
        records.push(Record { owner: zone.origin.clone(), rtype: 65534, rdata: Box::new([10, 11, 12]), ttl: 60 });
        records.push(Record { owner: zone.origin.clone(), rtype: 65535, rdata: Box::new([]), ttl: 60 });
        records.sort();
        let text = records_to_text(&records);
        assert!(text.contains("TYPE65534 \\# 3 0a0b0c\n"), "{text}");
        let read = parse_zone_text("example.com", &text, "text").unwrap_or_else(|error| panic!("{error}\n{text}"));
        let mut read_back = file_records(&read).to_vec();
        read_back.push(Record { owner: read.origin.clone(), rtype: 6, rdata: read.soa().rdatas[0].clone(), ttl: read.soa().ttl });
        read_back.sort();
        let (lost, gained) = crate::journal::changes(&records, &read_back);
        let shown = |records: &[Record]| records_to_text(records);
        assert!(lost.is_empty() && gained.is_empty(), "lost:\n{}gained:\n{}", shown(&lost), shown(&gained));
        let built = zone_from_records(&zone.origin, &records, "transfer").unwrap();
        assert_eq!(file_records(&built), file_records(&read));
    }
}
