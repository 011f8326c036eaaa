//! The response rate limiting class of what the kernel answers, as
//! user space's `pharos_rrl::Class` counts it: an answer by its name and
//! type, a referral by its zone (and, should an entry ever be one, an
//! NXDOMAIN by its zone, an error by its source alone). The program keys
//! its buckets by the class's hash, which user space computes once per
//! entry.

use pharos_answer::Snapshot;
use pharos_wire::{flags, rcode};

use crate::maps::{Answer, AnswerKey};

/// The class tags, as `pharos_rrl` numbers them.
const ANSWER: u8 = 0;
const REFERRAL: u8 = 1;
const NXDOMAIN: u8 = 2;
const ERROR: u8 = 3;

/// The class of the replies `reply` (`None`: routed, an answer) gives to
/// `question` in `snapshot`, hashed (FNV-1a, low word first).
pub fn response_class(snapshot: &Snapshot, question: &AnswerKey, reply: Option<&Answer>) -> [u32; 2] {
    let qname = question.wire_name();
    let zone = || snapshot.zones.zone_for(qname).map_or(&[][..], |zone| &zone.origin[..]);
    let rcode = reply.map_or(rcode::NOERROR, |reply| reply.flags & 0xF);
    let hash = match rcode {
        rcode::NXDOMAIN => class_hash(NXDOMAIN, zone(), &[]),
        rcode::NOERROR if reply.is_some_and(is_referral) => class_hash(REFERRAL, zone(), &[]),
        rcode::NOERROR => class_hash(ANSWER, qname, &question.qtype),
        _ => class_hash(ERROR, &[], &[]),
    };
    [hash as u32, (hash >> 32) as u32]
}

/// Not authoritative, no answer, an authority section: a delegation.
fn is_referral(reply: &Answer) -> bool {
    reply.flags & flags::AA == 0 && reply.counts[0] == 0 && reply.counts[1] > 0
}

fn class_hash(tag: u8, name: &[u8], qtype: &[u8]) -> u64 {
    let bytes = [tag].into_iter().chain(name.iter().copied()).chain(qtype.iter().copied());
    bytes.fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pharos_zone::{ZoneSet, parse_zone_text};

    const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nsub NS ns.sub\nns.sub A 192.0.2.3\n";

    fn snapshot() -> Snapshot {
        let zone = parse_zone_text("example.test", ZONE, "test.zone").unwrap();
        Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Default::default() }
    }

    fn question(name: &[u8], qtype: u16) -> AnswerKey {
        AnswerKey::new(name, qtype, 1).unwrap()
    }

    #[test]
    fn answers_are_classed_by_name_and_type_referrals_by_zone() {
        let snapshot = snapshot();
        let answer = Answer::new(flags::AA, [1, 0, 0], &[1]).unwrap();
        let referral = Answer::new(0, [0, 1, 1], &[1]).unwrap();
        let www = question(b"\x03www\x07example\x04test\x00", 1);
        let classes = [
            response_class(&snapshot, &www, Some(&answer)),
            response_class(&snapshot, &question(b"\x03www\x07example\x04test\x00", 28), Some(&answer)),
            response_class(&snapshot, &question(b"\x02ns\x07example\x04test\x00", 1), Some(&answer)),
            response_class(&snapshot, &question(b"\x03sub\x07example\x04test\x00", 1), Some(&referral)),
        ];
        for (i, class) in classes.iter().enumerate() {
            assert!(!classes[..i].contains(class), "class {i} is its own");
        }
        assert_eq!(response_class(&snapshot, &www, None), classes[0], "a routed answer is an answer");
        let deeper = question(b"\x01x\x03sub\x07example\x04test\x00", 1);
        assert_eq!(response_class(&snapshot, &deeper, Some(&referral)), classes[3], "referrals out of one zone share a class");
        let hash = class_hash(ANSWER, www.wire_name(), &[0, 1]);
        assert_eq!(classes[0], [hash as u32, (hash >> 32) as u32]);
    }
}
