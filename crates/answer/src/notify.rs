//! NOTIFY (RFC 1996), the messages only. Out: the NOTIFY a primary sends
//! its secondaries when a zone's serial moves ([`notify_message`]: opcode
//! NOTIFY, AA, the zone's SOA as the question and its new SOA in the
//! answer section as a hint, section 3.7; signed with TSIG if a key is
//! given), and whether a datagram is the reply to one ([`notify_reply`]).
//! Sending, retrying and giving up belong to the server.
//!
//! In: a NOTIFY for one of Pharos's secondary zones from an address its
//! [`NotifyAcl`] lists is answered NOERROR with AA and the question
//! (section 4.7), and its transport hands the zone to the server, which
//! checks the primary's SOA at once; from anyone else, or for another
//! zone, REFUSED with an Extended DNS Error saying why.

use std::net::IpAddr;

use pharos_route::prefix::PrefixMap;
use pharos_wire::edns::ExtendedError;
use pharos_wire::query::Question;
use pharos_wire::{HEADER_LEN, MessageWriter, Query, flags, name, rcode, types};

use crate::Client;
use crate::tsig::{self, TsigKey};

/// Who may NOTIFY Pharos of a change to one secondary zone.
#[derive(Debug, Clone)]
pub struct NotifyAcl {
    /// The zone's origin, lowercase wire form.
    pub zone: Box<[u8]>,
    /// The addresses (prefixes) NOTIFYs for it are taken from.
    pub allowed: PrefixMap<()>,
}

/// RFC 8914 section 4.19, as for a transfer not allowed.
const NOTIFY_NOT_ALLOWED: ExtendedError = ExtendedError { info_code: 18, extra_text: "NOTIFY not allowed from this address" };
/// RFC 8914 section 4.21: no secondary zone of that name here.
const NOT_A_SECONDARY_ZONE: ExtendedError = ExtendedError { info_code: 20, extra_text: "not a secondary zone here" };

/// The header flags, RCODE and reason of the answer to a NOTIFY.
pub(crate) fn taken(
    query: &Query<'_>,
    question: &Question,
    client: &Client,
    settings: &crate::Settings,
) -> (u16, u16, Option<ExtendedError>) {
    if question.qtype != types::SOA {
        return (0, rcode::FORMERR, None);
    }
    match notified_zone(query, client.address, &settings.notify_acls) {
        Ok(_) => (flags::AA, rcode::NOERROR, None),
        Err(extended) => (0, rcode::REFUSED, Some(extended)),
    }
}

/// The secondary zone a NOTIFY `query` from `client` names, if it may
/// (the transport hands it on when the answer is NOERROR).
pub fn notified_zone<'a>(query: &Query<'_>, client: IpAddr, acls: &'a [NotifyAcl]) -> Result<&'a [u8], ExtendedError> {
    let acl = acls.iter().find(|acl| acl.zone.eq_ignore_ascii_case(query.qname())).ok_or(NOT_A_SECONDARY_ZONE)?;
    match acl.allowed.lookup(client).value {
        Some(_) => Ok(&acl.zone),
        None => Err(NOTIFY_NOT_ALLOWED),
    }
}

/// The NOTIFY opcode (RFC 1996 section 3.1), in the header's flags.
const OPCODE_NOTIFY: u16 = 4 << 11;

/// A NOTIFY for the zone at `origin` (lowercase wire form) with message
/// ID `id`, carrying its SOA (`soa` data, uncompressed, at `ttl`); signed
/// by `key` at `now` (Unix seconds) if given.
pub fn notify_message(id: u16, origin: &[u8], soa: &[u8], ttl: u32, key: Option<&TsigKey>, now: u64) -> Vec<u8> {
    let mut message = Vec::with_capacity(HEADER_LEN + 2 * origin.len() + soa.len() + 64);
    let mut writer = MessageWriter::new(&mut message);
    writer.set_id(id);
    writer.set_flags(OPCODE_NOTIFY | flags::AA);
    writer.set_counts([1, 1, 0, 0]);
    writer.name(origin);
    writer.u16(types::SOA);
    writer.u16(types::CLASS_IN);
    writer.record(origin, types::SOA, types::CLASS_IN, ttl, soa);
    if let Some(key) = key {
        tsig::sign_request(key, &mut message, now);
    }
    message
}

/// The RCODE of `reply` if it is the reply to the NOTIFY `sent` (the
/// same ID, QR and opcode NOTIFY, the same zone asked); `None` for any
/// other datagram, which the sender ignores.
pub fn notify_reply(sent: &[u8], reply: &[u8]) -> Option<u16> {
    if reply.len() < HEADER_LEN || sent.len() < HEADER_LEN || reply[..2] != sent[..2] {
        return None;
    }
    let reply_flags = u16::from_be_bytes([reply[2], reply[3]]);
    if reply_flags & flags::QR == 0 || reply_flags & flags::OPCODE_MASK != OPCODE_NOTIFY {
        return None;
    }
    // A reply may leave the question out (RFC 1996 section 4.7 does not
    // require it); if it has one, it must be the zone's.
    if reply[4..6] != [0, 0] {
        let zone_len = name::uncompressed_len(sent, HEADER_LEN).ok()?;
        let asked = reply.get(HEADER_LEN..HEADER_LEN + zone_len + 4)?;
        if !asked.eq_ignore_ascii_case(&sent[HEADER_LEN..HEADER_LEN + zone_len + 4]) {
            return None;
        }
    }
    Some(reply_flags & 0x000F)
}

#[cfg(test)]
mod tests {
    use domain::base::iana::{Opcode, Rcode, Rtype};
    use domain::base::{Message, MessageBuilder, Name};
    use domain::rdata::Soa;
    use domain::tsig::{Algorithm, Key, ServerTransaction};

    use super::*;

    const SOA: &[u8] =
        b"\x02ns\x04test\x00\x0ahostmaster\x04test\x00\x00\x00\x00\x2a\x00\x00\x0e\x10\x00\x00\x0e\x10\x00\x00\x0e\x10\x00\x00\x00\x3c";
    const ORIGIN: &[u8] = b"\x04test\x00";

    #[test]
    fn a_notify_asks_for_the_zones_soa_and_carries_the_new_one() {
        let message = Message::from_octets(notify_message(0x1234, ORIGIN, SOA, 300, None, 0)).unwrap();
        let header = message.header();
        assert_eq!((header.id(), header.opcode(), header.qr(), header.aa()), (0x1234, Opcode::NOTIFY, false, true));
        let question = message.first_question().unwrap();
        assert_eq!((question.qname().to_string(), question.qtype()), ("test".to_string(), Rtype::SOA));
        let soa = message.answer().unwrap().limit_to::<Soa<_>>().next().unwrap().unwrap();
        assert_eq!((soa.ttl().as_secs(), soa.data().serial().into_int()), (300, 42));
    }

    #[test]
    fn a_signed_notify_verifies_with_the_key() {
        let secret = b"thirty-two octets of a tsig key!";
        let key = TsigKey::new(b"\x07xfr-key\x00".as_slice().into(), tsig::Algorithm::HmacSha256, secret.as_slice().into());
        let now = 1_800_000_000;
        let signed = notify_message(7, ORIGIN, SOA, 300, Some(&key), now);
        let theirs = Key::new(Algorithm::Sha256, secret, "xfr-key".parse().unwrap(), None, None).unwrap();
        let mut message = Message::from_octets(signed.clone()).unwrap();
        let checked = ServerTransaction::request(&&theirs, &mut message, domain::rdata::tsig::Time48::from_u64(now));
        assert!(matches!(checked, Ok(Some(_))), "domain accepts the signature");
        let wrong = Key::new(Algorithm::Sha256, b"another secret of thirty-two!!!!", "xfr-key".parse().unwrap(), None, None).unwrap();
        let mut message = Message::from_octets(signed).unwrap();
        assert!(ServerTransaction::request(&&wrong, &mut message, domain::rdata::tsig::Time48::from_u64(now)).is_err());
    }

    /// A reply to a NOTIFY for `zone`, with `id`, `opcode` and `rcode`.
    fn reply(id: u16, zone: &str, opcode: Opcode, rcode: Rcode) -> Vec<u8> {
        let mut builder = MessageBuilder::new_vec();
        builder.header_mut().set_id(id);
        builder.header_mut().set_qr(true);
        builder.header_mut().set_opcode(opcode);
        builder.header_mut().set_rcode(rcode);
        let mut question = builder.question();
        question.push((Name::<Vec<u8>>::vec_from_str(zone).unwrap(), Rtype::SOA)).unwrap();
        question.finish()
    }

    #[test]
    fn only_the_reply_to_the_notify_sent_counts() {
        let sent = notify_message(9, ORIGIN, SOA, 300, None, 0);
        assert_eq!(notify_reply(&sent, &reply(9, "TEST", Opcode::NOTIFY, Rcode::NOERROR)), Some(0), "case does not matter");
        assert_eq!(notify_reply(&sent, &reply(9, "test", Opcode::NOTIFY, Rcode::REFUSED)), Some(5), "a refusal is a reply");
        assert_eq!(notify_reply(&sent, &reply(8, "test", Opcode::NOTIFY, Rcode::NOERROR)), None, "another ID");
        assert_eq!(notify_reply(&sent, &reply(9, "other", Opcode::NOTIFY, Rcode::NOERROR)), None, "another zone");
        assert_eq!(notify_reply(&sent, &reply(9, "test", Opcode::QUERY, Rcode::NOERROR)), None, "not a NOTIFY");
        assert_eq!(notify_reply(&sent, &sent), None, "not a reply");
        let mut bare = reply(9, "test", Opcode::NOTIFY, Rcode::NOERROR);
        bare.truncate(HEADER_LEN);
        bare[4..6].copy_from_slice(&[0, 0]);
        assert_eq!(notify_reply(&sent, &bare), Some(0), "no question");
        assert_eq!(notify_reply(&sent, &bare[..5]), None, "too short");
    }
}
