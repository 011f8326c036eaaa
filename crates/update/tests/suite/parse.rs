//! Reading UPDATE messages: each record's meaning by its class, names
//! decompressed, and FORMERR for what RFC 2136 calls malformed.

use crate::common::*;
use pharos_update::{Change, Prerequisite, parse};
use pharos_wire::types;
use pharos_zone::journal::Record;

fn reason(message: &[u8]) -> String {
    parse(message).expect_err("malformed").reason
}

#[test]
fn records_mean_what_their_class_says() {
    let prerequisites = [
        rr("A.example.test", types::A, ANY, 0, &[]),
        rr("b.example.test", types::A, CLASS_IN, 0, &[192, 0, 2, 1]),
        rr("c.example.test", types::A, NONE, 0, &[]),
        rr("d.example.test", types::ANY, ANY, 0, &[]),
        rr("e.example.test", types::ANY, NONE, 0, &[]),
    ];
    let updates = [
        add_a("F.Example.Test", 60, [192, 0, 2, 2]),
        rr("g.example.test", types::TXT, ANY, 0, &[]),
        rr("h.example.test", types::ANY, ANY, 0, &[]),
        rr("i.example.test", types::A, NONE, 0, &[192, 0, 2, 3]),
    ];
    let update = parse(&message(ORIGIN, &prerequisites, &updates)).unwrap();
    let owner = |text: &str| name(text).into_boxed_slice();
    assert_eq!((update.id, &*update.zone, update.zone_class, update.tsig_at), (0x2136, &name(ORIGIN)[..], CLASS_IN, None));
    assert_eq!(
        update.prerequisites,
        [
            Prerequisite::RrsetExists { owner: owner("a.example.test"), rtype: types::A },
            Prerequisite::RecordPresent { owner: owner("b.example.test"), rtype: types::A, rdata: [192, 0, 2, 1].into() },
            Prerequisite::RrsetAbsent { owner: owner("c.example.test"), rtype: types::A },
            Prerequisite::NameInUse { owner: owner("d.example.test") },
            Prerequisite::NameNotInUse { owner: owner("e.example.test") },
        ],
        "owners lowercased"
    );
    assert_eq!(
        update.changes,
        [
            Change::Add(Record { owner: owner("f.example.test"), rtype: types::A, rdata: [192, 0, 2, 2].into(), ttl: 60 }),
            Change::DeleteRrset { owner: owner("g.example.test"), rtype: types::TXT },
            Change::DeleteName { owner: owner("h.example.test") },
            Change::DeleteRecord { owner: owner("i.example.test"), rtype: types::A, rdata: [192, 0, 2, 3].into() },
        ]
    );
    assert_eq!(update.changes[2].rtype(), types::ANY);
}

#[test]
fn names_are_decompressed_and_lowercased_in_owners_and_record_data() {
    // The owner is written compressed against the zone's name; the CNAME's
    // data points at the zone's name (offset 12) after a label "WWW".
    let mut message = message(ORIGIN, &[], &[rr("alias.example.test", types::CNAME, CLASS_IN, 300, b"\x03WWW\xC0\x0C")]);
    let label_at = message.windows(6).position(|window| window == b"\x05alias").expect("the owner's label");
    message[label_at + 1..label_at + 6].copy_from_slice(b"ALIAS");
    let update = parse(&message).unwrap();
    let Change::Add(record) = &update.changes[0] else { panic!("not an addition: {:?}", update.changes) };
    assert_eq!(&*record.owner, &name("alias.example.test")[..]);
    assert_eq!(&*record.rdata, b"\x03www\x07example\x04test\x00", "canonical form (RFC 4034 section 6.2)");
}

#[test]
fn what_rfc_2136_calls_malformed_is_formerr() {
    let a = [192, 0, 2, 1];
    let with_prerequisite = |record: Rr| message(ORIGIN, &[record], &[]);
    let with_update = |record: Rr| message(ORIGIN, &[], &[record]);
    assert!(reason(&with_prerequisite(rr("www.example.test", types::A, ANY, 300, &[]))).contains("TTL 300"));
    assert!(reason(&with_prerequisite(rr("www.example.test", types::A, NONE, 0, &a))).contains("carries data"));
    assert!(reason(&with_prerequisite(rr("www.example.test", types::A, 3, 0, &[]))).contains("class 3"));
    assert!(reason(&with_update(rr("www.example.test", types::A, ANY, 0, &a))).contains("class ANY"));
    assert!(reason(&with_update(rr("www.example.test", types::A, ANY, 60, &[]))).contains("class ANY"));
    assert!(reason(&with_update(rr("www.example.test", types::AXFR, ANY, 0, &[]))).contains("meta type"));
    assert!(reason(&with_update(rr("www.example.test", types::ANY, CLASS_IN, 0, &[]))).contains("meta type"));
    assert!(reason(&with_update(rr("www.example.test", types::A, NONE, 60, &a))).contains("TTL 0"));
    assert!(reason(&with_update(rr("www.example.test", types::A, 4, 60, &a))).contains("class 4"));
    assert!(reason(&with_update(rr("www.example.test", types::A, CLASS_IN, 60, &a[..3]))).contains("record data"));
    assert!(reason(&with_update(rr("www.example.test", types::CNAME, CLASS_IN, 60, b"\x03www"))).contains("record data"));
    let update = message(ORIGIN, &[], &[add_a("www.example.test", 60, a)]);
    for cut in 0..update.len() {
        assert!(parse(&update[..cut]).is_err(), "cut to {cut} octets");
    }
    let mut response = update.clone();
    response[2] |= 0x80;
    assert!(reason(&response).contains("response"));
    let mut query = update.clone();
    query[2] = 0;
    assert!(reason(&query).contains("opcode 0"));
    let mut no_zone = update.clone();
    no_zone[5] = 0;
    assert!(reason(&no_zone).contains("0 entries"));
    let mut zone_of_type_a = update.clone();
    zone_of_type_a[12 + name(ORIGIN).len() + 1] = types::A as u8;
    assert!(reason(&zone_of_type_a).contains("not SOA"));
}

#[test]
fn a_tsig_record_is_found_only_last() {
    const TSIG: &[u8] = b"\x01k\x00\x00\xfa\x00\xff\x00\x00\x00\x00\x00\x02\xab\xcd";
    const OPT: &[u8] = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00";
    let changes = [add_a("www.example.test", 60, [192, 0, 2, 1])];
    let signed = message_with(ORIGIN, &[], &changes, &[OPT, TSIG].concat(), 2);
    assert_eq!(parse(&signed).unwrap().tsig_at, Some(signed.len() - TSIG.len()));
    let misplaced = message_with(ORIGIN, &[], &changes, &[TSIG, OPT].concat(), 2);
    assert!(reason(&misplaced).contains("TSIG"));
}
