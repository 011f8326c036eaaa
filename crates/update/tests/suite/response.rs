//! The reply to an UPDATE, read back by an independent parser.

use crate::common::*;
use domain::base::Message;
use domain::base::iana::{Opcode, Rcode, Rtype};
use pharos_update::response;
use pharos_wire::rcode;

const OPT: &[u8] = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00";

#[test]
fn the_reply_echoes_the_zone_and_says_why_to_edns_clients() {
    let request = message_with("Example.Test", &[], &[add_a("www.example.test", 60, [192, 0, 2, 1])], OPT, 1);
    let reply = Message::from_octets(response(&request, rcode::REFUSED, Some((18, "no update rule"))).unwrap()).unwrap();
    let header = reply.header();
    assert_eq!((header.id(), header.qr(), header.opcode(), header.rcode()), (0x2136, true, Opcode::UPDATE, Rcode::REFUSED));
    let counts = reply.header_counts();
    assert_eq!((counts.qdcount(), counts.ancount(), counts.nscount(), counts.arcount()), (1, 0, 0, 1));
    let zone = reply.first_question().unwrap();
    assert_eq!((zone.qname().to_string(), zone.qtype()), ("example.test".to_string(), Rtype::SOA));
    let opt = reply.opt().expect("an OPT record");
    let error = opt.opt().extended_error().expect("an Extended DNS Error");
    assert_eq!((error.code().to_int(), error.text_slice()), (18, Some(&b"no update rule"[..])));
}

#[test]
fn without_edns_the_reply_is_the_header_and_zone_alone() {
    let request = message("example.test", &[], &[]);
    let reply = response(&request, rcode::NOERROR, Some((0, "ignored"))).unwrap();
    assert_eq!(reply.len(), request.len(), "the zone section echoed, nothing else");
    assert_eq!(&reply[12..], &request[12..]);
    assert_eq!(reply[2] & 0x80, 0x80);
}

#[test]
fn what_cannot_be_replied_to_gets_nothing_and_the_rest_a_header() {
    assert_eq!(response(&[0; 11], rcode::FORMERR, None), None, "no header");
    let mut reply_to_reply = message("example.test", &[], &[]);
    reply_to_reply[2] |= 0x80;
    assert_eq!(response(&reply_to_reply, rcode::FORMERR, None), None, "a response");
    let mut garbled = message("example.test", &[], &[]);
    garbled.truncate(14);
    let reply = Message::from_octets(response(&garbled, rcode::FORMERR, None).unwrap()).unwrap();
    assert_eq!((reply.header().rcode(), reply.header_counts().qdcount()), (Rcode::FORMERR, 0), "no zone section to echo");
}
