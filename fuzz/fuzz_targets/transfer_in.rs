//! The input as a primary's answers to a secondary's request, through
//! `pharos_secondary::Assembler`: the first octet picks the request (SOA
//! query, IXFR from the fuzzing zone at serial 1, AXFR; signed with a key
//! or not) and whether each message's ID is set to the request's (so that
//! the fuzzer reaches past the ID check); the rest is messages, each
//! behind its length as over TCP. Invariants: no panic; a SOA query ends
//! in a serial, an IXFR may end up to date, and a transfer in records
//! sorted and distinct, owned inside the zone, no meta type among them,
//! with one SOA, at the apex; nothing is taken after the end.
#![no_main]

use std::sync::Arc;

use pharos_secondary::{Assembled, Assembler, Progress, Request, TransferError, TsigKey};
use pharos_wire::{name, types};
use pharos_zone::journal::Record;

const ORIGIN: &[u8] = b"\x07example\x04test\x00";
const NOW: u64 = 1_800_000_000;
const ID: u16 = 0x5ec0;

/// The copy an IXFR starts from: the SOA at serial 1, NS and an address.
fn current() -> Arc<[Record]> {
    let record = |owner: &[u8], rtype, rdata: &[u8]| Record { owner: owner.into(), rtype, rdata: rdata.into(), ttl: 300 };
    let mut soa = b"\x02ns\x07example\x04test\x00\x0ahostmaster\x07example\x04test\x00".to_vec();
    for field in [1u32, 3600, 600, 86400, 300] {
        soa.extend(field.to_be_bytes());
    }
    let mut records = vec![
        record(ORIGIN, types::SOA, &soa),
        record(ORIGIN, types::NS, b"\x02ns\x07example\x04test\x00"),
        record(b"\x03www\x07example\x04test\x00", types::A, &[192, 0, 2, 1]),
    ];
    records.sort();
    records.into()
}

fn key() -> TsigKey {
    let name = "xfr-key".parse().expect("a key name");
    Arc::new(domain::tsig::Key::new(domain::tsig::Algorithm::Sha256, b"fuzzing secret", name, None, None).expect("a key"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&choice, mut rest)) = data.split_first() else { return };
    let key = (choice & 4 != 0).then(key);
    let request = match choice % 4 {
        0 => Request::soa(ID, ORIGIN, key.as_ref(), NOW),
        1 | 2 => Request::ixfr(ID, ORIGIN, &current()[0], key.as_ref(), NOW),
        _ => Request::axfr(ID, ORIGIN, key.as_ref(), NOW),
    };
    let kind = request.kind;
    let mut assembler = Assembler::new(request, Some(current()));
    // Bounded by the input: each message takes at least its length.
    while let [high, low, after @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(after.len());
        let mut message = after[..len].to_vec();
        rest = &after[len..];
        if choice & 8 != 0 && message.len() >= 2 {
            message[..2].copy_from_slice(&ID.to_be_bytes());
        }
        match assembler.push(&message, NOW) {
            Ok(Progress::More) => continue,
            Ok(Progress::Done(assembled)) => {
                check(kind, &assembled);
                assert_eq!(assembler.push(&message, NOW), Err(TransferError::AfterTheEnd), "taken after the end");
                return;
            }
            Err(_) => return,
        }
    }
});

fn check(kind: pharos_secondary::Kind, assembled: &Assembled) {
    use pharos_secondary::Kind;
    match (kind, assembled) {
        (Kind::Soa, Assembled::Serial(_)) | (Kind::Ixfr, Assembled::UpToDate) => {}
        (Kind::Ixfr | Kind::Axfr, Assembled::Zone(records)) => {
            assert!(records.windows(2).all(|pair| pair[0] < pair[1]), "sorted and distinct");
            for record in records {
                assert!(name::is_at_or_below(&record.owner, ORIGIN), "{record:?} outside the zone");
                assert!(!types::is_meta(record.rtype), "{record:?} of a meta type");
            }
            let soas: Vec<&Record> = records.iter().filter(|record| record.rtype == types::SOA).collect();
            assert_eq!(soas.len(), 1, "one SOA");
            assert_eq!(&*soas[0].owner, ORIGIN, "the SOA at the apex");
        }
        (kind, assembled) => panic!("{kind} ended in {assembled:?}"),
    }
}
