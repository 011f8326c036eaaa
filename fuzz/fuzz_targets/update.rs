//! Input as an UPDATE message through `pharos_update::parse`, `apply` (on
//! the records of the fuzzing zone example.test, with a guard refusing
//! names whose first label is `svc`) and `response`. Invariants: no
//! panic; the reply is readable by `domain`, with the request's ID and
//! at most the one zone; a refusal of a message that parsed has an RCODE
//! RFC 2136 gives after the format checks; an applied update leaves the
//! records sorted and distinct, inside the zone, one SOA at the apex and
//! its NS, no CNAME beside other data, unchanged if it says so and with a
//! newer serial if not.
#![no_main]

use std::sync::OnceLock;

use domain::base::Message;
use pharos_fuzz::ZONES;
use pharos_update::{Refusal, apply, parse, response};
use pharos_wire::name::{self, is_at_or_below};
use pharos_wire::{rcode, types};
use pharos_zone::journal::{Record, newer, soa_serial};
use pharos_zone::parse_zone_text;
use pharos_zone::versions::file_records;

/// The records of example.test and its origin, loaded once.
fn zone() -> &'static (Vec<u8>, Vec<Record>) {
    static ZONE: OnceLock<(Vec<u8>, Vec<Record>)> = OnceLock::new();
    ZONE.get_or_init(|| {
        let (origin, text) = ZONES[0];
        let zone = parse_zone_text(origin, text, "fuzz").expect("the fuzzing zone loads");
        let soa = zone.soa();
        let mut records = file_records(&zone).to_vec();
        records.push(Record { owner: zone.origin.clone(), rtype: types::SOA, rdata: soa.rdatas[0].clone(), ttl: soa.ttl });
        records.sort_unstable();
        (zone.origin.to_vec(), records)
    })
}

fn serial(origin: &[u8], records: &[Record]) -> u32 {
    let soas: Vec<&Record> = records.iter().filter(|record| record.rtype == types::SOA).collect();
    assert!(soas.len() == 1 && *soas[0].owner == *origin, "not one SOA, at the apex: {soas:?}");
    soa_serial(&soas[0].rdata).expect("an SOA with a serial")
}

fn check_applied(origin: &[u8], before: &[Record], after: &[Record], changed: bool) {
    assert!(
        after.windows(2).all(|pair| (&pair[0].owner, pair[0].rtype, &pair[0].rdata) < (&pair[1].owner, pair[1].rtype, &pair[1].rdata)),
        "not sorted and distinct"
    );
    assert!(after.iter().all(|record| is_at_or_below(&record.owner, origin)), "a record outside the zone");
    assert!(after.iter().any(|record| *record.owner == *origin && record.rtype == types::NS), "the apex lost its NS");
    for cname in after.iter().filter(|record| record.rtype == types::CNAME) {
        let beside = after.iter().filter(|record| record.owner == cname.owner).count();
        assert_eq!(beside, 1, "a CNAME beside other data at {}", name::Display(&cname.owner));
    }
    let (old, new) = (serial(origin, before), serial(origin, after));
    if changed {
        assert!(newer(new, old), "changed, yet serial {old} -> {new}");
    } else {
        assert_eq!(before, after, "unchanged, yet different");
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (origin, records) = zone();
    let refusal = match parse(data) {
        Err(malformed) => Refusal::malformed(&malformed),
        Ok(update) => {
            let guard = |owner: &[u8], _| match owner.get(..4) {
                Some(b"\x03svc") => Err(Refusal::refused("a service")),
                _ => Ok(()),
            };
            match apply(origin, records, &update, guard) {
                Ok(applied) => {
                    check_applied(origin, records, &applied.records, applied.changed);
                    // Once more on what came out: it is a zone like the first.
                    if let Ok(again) = apply(origin, &applied.records, &update, guard) {
                        check_applied(origin, &applied.records, &again.records, again.changed);
                    }
                    Refusal::new(rcode::NOERROR, "")
                }
                Err(refusal) => {
                    let after_format =
                        [rcode::NOTAUTH, rcode::NOTZONE, rcode::NXDOMAIN, rcode::YXDOMAIN, rcode::NXRRSET, rcode::YXRRSET, rcode::REFUSED];
                    assert!(after_format.contains(&refusal.rcode), "{refusal:?} for a message that parsed");
                    refusal
                }
            }
        }
    };
    let Some(reply) = response(data, refusal.rcode, refusal.extended()) else {
        assert!(data.len() < 12 || data[2] & 0x80 != 0, "no reply to a request");
        return;
    };
    let message = Message::from_octets(reply).expect("the reply reads");
    assert_eq!(message.header().id(), u16::from_be_bytes([data[0], data[1]]));
    assert!(message.header_counts().qdcount() <= 1);
    for question in message.question() {
        question.expect("the echoed zone reads");
    }
    if let Some(opt) = message.opt() {
        assert_eq!(opt.opt().extended_error().map(|error| error.code().to_int()), refusal.extended_error);
    }
});
