//! Every prerequisite, every kind of change and every refusal of
//! `apply`, on the records of a loaded zone.

use crate::common::*;
use pharos_update::{Applied, Refusal, apply, parse};
use pharos_wire::{rcode, types};
use pharos_zone::journal::{Record, soa_serial};

fn run_on(records: &[Record], prerequisites: &[Rr], updates: &[Rr]) -> Result<Applied, Refusal> {
    let update = parse(&message(ORIGIN, prerequisites, updates)).expect("a well-formed update");
    apply(&name(ORIGIN), records, &update, |_, _| Ok(()))
}

fn run(prerequisites: &[Rr], updates: &[Rr]) -> Result<Applied, Refusal> {
    run_on(&zone_records(ORIGIN, ZONE), prerequisites, updates)
}

fn rcode_of(prerequisites: &[Rr], updates: &[Rr]) -> u16 {
    run(prerequisites, updates).map_or_else(|refusal| refusal.rcode, |_| rcode::NOERROR)
}

/// The data of the `rtype` records at `owner`, sorted, with their TTLs.
fn rrset(records: &[Record], owner: &str, rtype: u16) -> Vec<(Vec<u8>, u32)> {
    let owner = name(owner);
    records
        .iter()
        .filter(|record| *record.owner == *owner && record.rtype == rtype)
        .map(|record| (record.rdata.to_vec(), record.ttl))
        .collect()
}

fn serial(records: &[Record]) -> u32 {
    let soa = records.iter().find(|record| record.rtype == types::SOA).expect("an SOA");
    soa_serial(&soa.rdata).expect("a serial")
}

/// The zone's records with the SOA serial set to `serial`.
fn with_serial(records: &[Record], serial: u32) -> Vec<Record> {
    let soa_at = records.iter().position(|record| record.rtype == types::SOA).expect("an SOA");
    let mut records = records.to_vec();
    records[soa_at].rdata = pharos_zone::journal::with_serial(&records[soa_at].rdata, serial);
    records
}

#[test]
fn each_prerequisite_holds_or_gives_its_rcode() {
    let exists = |owner: &str, rtype| rr(owner, rtype, ANY, 0, &[]);
    let absent = |owner: &str, rtype| rr(owner, rtype, NONE, 0, &[]);
    let present = |owner: &str, address: [u8; 4]| add_a(owner, 0, address);
    assert_eq!(rcode_of(&[exists("www.example.test", types::A)], &[]), rcode::NOERROR, "RRset exists");
    assert_eq!(rcode_of(&[exists("www.example.test", types::AAAA)], &[]), rcode::NXRRSET);
    assert_eq!(rcode_of(&[present("www.example.test", [192, 0, 2, 2]), present("www.example.test", [192, 0, 2, 1])], &[]), rcode::NOERROR);
    assert_eq!(rcode_of(&[present("www.example.test", [192, 0, 2, 1])], &[]), rcode::NXRRSET, "only part of the RRset");
    let more = [
        present("www.example.test", [192, 0, 2, 1]),
        present("www.example.test", [192, 0, 2, 2]),
        present("www.example.test", [192, 0, 2, 3]),
    ];
    assert_eq!(rcode_of(&more, &[]), rcode::NXRRSET, "more than the RRset");
    assert_eq!(rcode_of(&[present("nope.example.test", [192, 0, 2, 1])], &[]), rcode::NXRRSET, "no RRset at all");
    assert_eq!(rcode_of(&[absent("www.example.test", types::AAAA)], &[]), rcode::NOERROR, "RRset does not exist");
    assert_eq!(rcode_of(&[absent("www.example.test", types::A)], &[]), rcode::YXRRSET);
    assert_eq!(rcode_of(&[exists("www.example.test", types::ANY)], &[]), rcode::NOERROR, "name in use");
    assert_eq!(rcode_of(&[exists("nope.example.test", types::ANY)], &[]), rcode::NXDOMAIN);
    assert_eq!(rcode_of(&[exists("b.c.example.test", types::ANY)], &[]), rcode::NXDOMAIN, "an empty non-terminal owns nothing");
    assert_eq!(rcode_of(&[absent("nope.example.test", types::ANY)], &[]), rcode::NOERROR, "name not in use");
    assert_eq!(rcode_of(&[absent("www.example.test", types::ANY)], &[]), rcode::YXDOMAIN);
    assert_eq!(rcode_of(&[exists("www.example.org", types::A)], &[]), rcode::NOTZONE);
}

#[test]
fn prerequisites_are_read_in_order_and_the_first_failure_answers() {
    let failing = [rr("www.example.test", types::ANY, NONE, 0, &[]), rr("nope.example.test", types::ANY, ANY, 0, &[])];
    assert_eq!(rcode_of(&failing, &[add_a("new.example.test", 60, [192, 0, 2, 7])]), rcode::YXDOMAIN);
}

#[test]
fn records_are_added_and_duplicates_update_only_the_ttl() {
    let applied = run(&[], &[add_a("new.example.test", 60, [192, 0, 2, 7]), add_a("www.example.test", 300, [192, 0, 2, 3])]).unwrap();
    assert!(applied.changed);
    assert_eq!(rrset(&applied.records, "new.example.test", types::A), [(vec![192, 0, 2, 7], 60)]);
    assert_eq!(rrset(&applied.records, "www.example.test", types::A).len(), 3);
    let applied = run(&[], &[add_a("www.example.test", 300, [192, 0, 2, 1])]).unwrap();
    assert!(!applied.changed, "the record is there already");
    assert_eq!(applied.records, zone_records(ORIGIN, ZONE));
    let applied = run(&[], &[add_a("www.example.test", 60, [192, 0, 2, 1])]).unwrap();
    assert!(applied.changed);
    assert_eq!(
        rrset(&applied.records, "www.example.test", types::A),
        [(vec![192, 0, 2, 1], 60), (vec![192, 0, 2, 2], 60)],
        "one TTL per RRset"
    );
}

#[test]
fn deletions_of_an_rrset_a_name_and_a_record() {
    let applied = run(&[], &[rr("www.example.test", types::A, ANY, 0, &[])]).unwrap();
    assert!(rrset(&applied.records, "www.example.test", types::A).is_empty());
    assert_eq!(rrset(&applied.records, "www.example.test", types::TXT).len(), 1, "the other RRsets stay");
    let applied = run(&[], &[rr("www.example.test", types::ANY, ANY, 0, &[])]).unwrap();
    assert!(applied.records.iter().all(|record| *record.owner != *name("www.example.test")));
    let applied = run(&[], &[rr("www.example.test", types::A, NONE, 0, &[192, 0, 2, 1])]).unwrap();
    assert_eq!(rrset(&applied.records, "www.example.test", types::A), [(vec![192, 0, 2, 2], 300)]);
    let applied = run(&[], &[rr("mail.example.test", types::A, NONE, 0, &[192, 0, 2, 25])]).unwrap();
    assert!(rrset(&applied.records, "mail.example.test", types::A).is_empty(), "its last record: the RRset goes");
    let nothing =
        run(&[], &[rr("www.example.test", types::A, NONE, 0, &[192, 0, 2, 77]), rr("nope.example.test", types::ANY, ANY, 0, &[])]).unwrap();
    assert!(!nothing.changed, "deleting what is not there changes nothing");
}

#[test]
fn the_apex_keeps_its_soa_and_ns() {
    let apex = "example.test";
    let unchanged = [rr(apex, types::SOA, ANY, 0, &[]), rr(apex, types::NS, ANY, 0, &[]), rr(apex, types::SOA, NONE, 0, &soa(2024010101))];
    for change in unchanged {
        assert!(!run(&[], std::slice::from_ref(&change)).unwrap().changed, "{change:?}");
    }
    let applied = run(&[], &[rr(apex, types::ANY, ANY, 0, &[])]).unwrap();
    assert!(rrset(&applied.records, apex, types::MX).is_empty());
    assert_eq!((rrset(&applied.records, apex, types::NS).len(), rrset(&applied.records, apex, types::SOA).len()), (2, 1));
    let ns = |host: &str| rr(apex, types::NS, NONE, 0, &name(host));
    let applied = run(&[], &[ns("ns1.example.test"), ns("ns2.example.test")]).unwrap();
    assert_eq!(rrset(&applied.records, apex, types::NS), [(name("ns2.example.test"), 300)], "the last NS stays");
    let applied = run(&[], &[rr("sub.example.test", types::NS, NONE, 0, &name("ns.sub.example.test"))]).unwrap();
    assert!(rrset(&applied.records, "sub.example.test", types::NS).is_empty(), "below the apex, the last NS goes");
}

#[test]
fn a_cname_stands_alone() {
    let cname = |owner: &str, target: &str| rr(owner, types::CNAME, CLASS_IN, 300, &name(target));
    let ignored = run(&[], &[cname("www.example.test", "mail.example.test")]).unwrap();
    assert!(!ignored.changed, "a CNAME where other data is");
    let ignored = run(&[], &[add_a("alias.example.test", 300, [192, 0, 2, 8])]).unwrap();
    assert!(!ignored.changed, "other data where a CNAME is");
    let replaced = run(&[], &[cname("alias.example.test", "mail.example.test")]).unwrap();
    assert_eq!(
        rrset(&replaced.records, "alias.example.test", types::CNAME),
        [(name("mail.example.test"), 300)],
        "a CNAME replaces a CNAME"
    );
    let added = run(&[], &[cname("fresh.example.test", "www.example.test")]).unwrap();
    assert_eq!(rrset(&added.records, "fresh.example.test", types::CNAME).len(), 1);
    let in_turn =
        run(&[], &[rr("alias.example.test", types::CNAME, ANY, 0, &[]), add_a("alias.example.test", 60, [192, 0, 2, 8])]).unwrap();
    assert_eq!(rrset(&in_turn.records, "alias.example.test", types::A).len(), 1, "changes apply in order");
}

#[test]
fn nothing_is_added_below_a_dname_and_a_dname_replaces_one() {
    let below = run(&[], &[add_a("x.old.example.test", 300, [192, 0, 2, 8])]).unwrap();
    assert!(!below.changed, "below a DNAME");
    let dname = |owner: &str, target: &str| rr(owner, types::DNAME, CLASS_IN, 300, &name(target));
    let replaced = run(&[], &[dname("old.example.test", "newer.example.test")]).unwrap();
    assert_eq!(rrset(&replaced.records, "old.example.test", types::DNAME), [(name("newer.example.test"), 300)]);
    assert!(!run(&[], &[dname("b.c.example.test", "x.example.test")]).unwrap().changed, "names below it");
    assert!(!run(&[], &[dname("alias.example.test", "x.example.test")]).unwrap().changed, "beside a CNAME");
    assert!(run(&[], &[dname("www.example.test", "x.example.test")]).unwrap().changed, "beside other data");
}

#[test]
fn the_serial_moves_forward_once_per_changing_update() {
    let zone = zone_records(ORIGIN, ZONE);
    let applied = run(&[], &[add_a("new.example.test", 60, [192, 0, 2, 7])]).unwrap();
    assert_eq!(serial(&applied.records), 2024010102);
    let unchanged = run(&[], &[add_a("www.example.test", 300, [192, 0, 2, 1])]).unwrap();
    assert_eq!(serial(&unchanged.records), 2024010101, "no change, no new serial");
    let set = run(&[], &[rr(ORIGIN, types::SOA, CLASS_IN, 300, &soa(2024020200)), add_a("new.example.test", 60, [192, 0, 2, 7])]).unwrap();
    assert_eq!(serial(&set.records), 2024020200, "the update's own serial");
    let older = run(&[], &[rr(ORIGIN, types::SOA, CLASS_IN, 300, &soa(2024010100))]).unwrap();
    assert!(!older.changed, "an older serial is ignored");
    let elsewhere = run(&[], &[rr("www.example.test", types::SOA, CLASS_IN, 300, &soa(2024020200))]).unwrap();
    assert!(!elsewhere.changed, "an SOA below the apex is ignored");
    let wrapping = with_serial(&zone, u32::MAX);
    let applied = run_on(&wrapping, &[], &[add_a("new.example.test", 60, [192, 0, 2, 7])]).unwrap();
    assert_eq!(serial(&applied.records), 0, "RFC 1982: past the largest serial comes 0");
    let past_wrap = run_on(&wrapping, &[], &[rr(ORIGIN, types::SOA, CLASS_IN, 300, &soa(5))]).unwrap();
    assert_eq!(serial(&past_wrap.records), 5, "5 is newer than 2^32 - 1");
}

#[test]
fn refusals_change_nothing_and_say_why() {
    let records = zone_records(ORIGIN, ZONE);
    let update =
        parse(&message(ORIGIN, &[], &[add_a("ok.example.test", 60, [192, 0, 2, 7]), add_a("svc.example.test", 60, [192, 0, 2, 8])]))
            .unwrap();
    let mut asked = Vec::new();
    let refusal = apply(&name(ORIGIN), &records, &update, |owner, rtype| {
        asked.push((owner.to_vec(), rtype));
        if owner == name("svc.example.test") {
            Err(Refusal::refused("svc.example.test. is a service: use the control API"))
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert_eq!((refusal.rcode, refusal.extended_error), (rcode::REFUSED, Some(18)));
    assert!(refusal.reason.contains("control API"), "{refusal}");
    assert_eq!(asked.len(), 2, "the guard is asked about every change");
    let outside =
        parse(&message(ORIGIN, &[], &[add_a("ok.example.test", 60, [192, 0, 2, 7]), add_a("www.example.org", 60, [192, 0, 2, 8])]))
            .unwrap();
    let refusal = apply(&name(ORIGIN), &records, &outside, |_, _| Ok(())).unwrap_err();
    assert_eq!(refusal.rcode, rcode::NOTZONE, "{refusal}");
    let other_zone = parse(&message("example.org", &[], &[])).unwrap();
    assert_eq!(apply(&name(ORIGIN), &records, &other_zone, |_, _| Ok(())).unwrap_err().rcode, rcode::NOTAUTH);
    assert_eq!(Refusal::not_authoritative(&name("example.org")).extended(), Some((20, "not authoritative for the zone example.org.")));
    assert_eq!(records, zone_records(ORIGIN, ZONE));
}

#[test]
fn names_in_record_data_compare_ignoring_case() {
    let records = zone_records(ORIGIN, &format!("{ZONE}caps CNAME WWW.Example.Test.\n"));
    let written = rrset(&records, "caps.example.test", types::CNAME);
    assert_eq!(written[0].0, b"\x03WWW\x07Example\x04Test\x00", "the zone keeps the case written");
    let target = name("www.example.test");
    let present = rr("caps.example.test", types::CNAME, CLASS_IN, 0, &target);
    assert!(run_on(&records, &[present], &[]).is_ok(), "the prerequisite holds");
    let deleted = run_on(&records, &[], &[rr("caps.example.test", types::CNAME, NONE, 0, &target)]).unwrap();
    assert!(rrset(&deleted.records, "caps.example.test", types::CNAME).is_empty());
    let again = run_on(&records, &[], &[rr("caps.example.test", types::CNAME, CLASS_IN, 300, &target)]).unwrap();
    assert!(!again.changed, "the record is there already");
}
