//! TSIG on every query (RFC 8945), without sockets: queries signed by the
//! `domain` crate's TSIG, an implementation independent of Pharos's, and
//! the responses checked by it. A valid signature gets a signed answer,
//! whatever the RCODE, over UDP (truncated with room for the record) and
//! streams; an unknown key, a wrong MAC, a MAC cut too short and a time
//! outside the fudge are NOTAUTH with their TSIG error; a record that
//! cannot be read is FORMERR.

use std::net::{IpAddr, Ipv4Addr};

use domain::base::iana::{Rcode, Rtype};
use domain::base::message_builder::AdditionalBuilder;
use domain::base::{Message, MessageBuilder, Name, ParsedName};
use domain::rdata::tsig::{Time48, Tsig};
use domain::tsig::{Algorithm, ClientTransaction, Key};
use pharos_answer::{Client, ResponseOptions, Settings, Snapshot, Transport, Tsig as Said, TsigAlgorithm, TsigKey, respond_with};
use pharos_zone::{ZoneSet, parse_zone_text};
use rand::SeedableRng;

/// A zone with an answer too large for 512 octets.
const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n\
                    big TXT \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n\
                    big TXT \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n\
                    big TXT \"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"\n\
                    big TXT \"dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\"\n\
                    big TXT \"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\"\n";
const SECRET: &[u8] = b"a secret of thirty-two octets!!!";
/// When the queries are answered (Unix seconds).
const NOW: u64 = 1_800_000_000;

/// The algorithms both Pharos and `domain` offer (`domain` has no SHA-224).
const ALGORITHMS: [(TsigAlgorithm, Algorithm); 4] = [
    (TsigAlgorithm::HmacSha1, Algorithm::Sha1),
    (TsigAlgorithm::HmacSha256, Algorithm::Sha256),
    (TsigAlgorithm::HmacSha384, Algorithm::Sha384),
    (TsigAlgorithm::HmacSha512, Algorithm::Sha512),
];

fn wire_name(text: &str) -> Box<[u8]> {
    Name::<Vec<u8>>::vec_from_str(text).unwrap().into_octets().into()
}

/// example.test, with a key named `<algorithm>-key` for each algorithm.
fn snapshot() -> Snapshot {
    let zone = parse_zone_text("example.test", ZONE, "test.zone").unwrap();
    let tsig_keys = TsigAlgorithm::ALL
        .into_iter()
        .map(|algorithm| TsigKey::new(wire_name(&format!("{}-key", algorithm.name())), algorithm, SECRET.into()))
        .collect();
    Snapshot {
        zones: ZoneSet::new(vec![zone]).unwrap().into(),
        routes: Default::default(),
        settings: Settings { tsig_keys, ..Settings::default() },
    }
}

/// A client key of `domain`'s, taking and making MACs cut to `mac_len` if given.
fn client_key(name: &str, algorithm: Algorithm, secret: &[u8], mac_len: Option<usize>) -> Key {
    Key::new(algorithm, secret, name.parse().unwrap(), mac_len, mac_len).unwrap()
}

fn sha256_key() -> Key {
    client_key("hmac-sha256-key", Algorithm::Sha256, SECRET, None)
}

/// A query for `name` and `qtype`, with an OPT record if `edns` gives
/// its payload size, ready for its additional records.
fn query(name: &str, qtype: Rtype, edns: Option<u16>) -> AdditionalBuilder<Vec<u8>> {
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(0x7357);
    let mut question = builder.question();
    question.push((Name::<Vec<u8>>::vec_from_str(name).unwrap(), qtype)).unwrap();
    let mut additional = question.additional();
    if let Some(payload) = edns {
        additional
            .opt(|opt| {
                opt.set_udp_payload_size(payload);
                Ok(())
            })
            .unwrap();
    }
    additional
}

/// That query signed by `key` at `signed_at`, and the client's side of
/// the exchange.
fn signed_query<'k>(name: &str, qtype: Rtype, edns: Option<u16>, key: &'k Key, signed_at: u64) -> (Vec<u8>, ClientTransaction<&'k Key>) {
    let mut additional = query(name, qtype, edns);
    let transaction = ClientTransaction::request(key, &mut additional, Time48::from_u64(signed_at)).unwrap();
    (additional.finish(), transaction)
}

/// Pharos's response to `packet` over `transport` at `now`, checked to
/// say its own length and TSIG outcome.
fn ask(packet: &[u8], transport: Transport, now: u64) -> (Message<Vec<u8>>, Option<Said>) {
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport };
    let options = ResponseOptions { now, ..ResponseOptions::default() };
    let mut out = b"before".to_vec();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let snapshot = snapshot();
    let answered = respond_with(packet, &client, &options, &snapshot, &mut rng, &mut out).unwrap();
    assert_eq!(answered.len, out.len() - 6, "the summary counts the TSIG record");
    (Message::from_octets(out.split_off(6)).unwrap(), answered.tsig)
}

/// The response's TSIG record: its error and MAC length.
fn tsig_of(message: &Message<Vec<u8>>) -> Option<(u16, usize)> {
    let additional = message.additional().unwrap().limit_to::<Tsig<_, ParsedName<_>>>();
    let record = additional.map(Result::unwrap).last()?;
    Some((record.data().error().to_int(), record.data().mac().as_ref().len()))
}

/// The INFO-CODE of the response's Extended DNS Error.
fn extended_error(message: &Message<Vec<u8>>) -> Option<u16> {
    let opt = message.opt()?;
    let mut options = opt.opt().iter::<domain::base::opt::AllOptData<_, _>>();
    options.find_map(|option| match option.unwrap() {
        domain::base::opt::AllOptData::ExtendedError(error) => Some(error.code().to_int()),
        _ => None,
    })
}

#[test]
fn a_signed_query_gets_a_response_signed_with_its_algorithm_over_udp_and_streams() {
    for (ours, theirs) in ALGORITHMS {
        let key = client_key(&format!("{}-key", ours.name()), theirs, SECRET, None);
        for transport in [Transport::Udp, Transport::Stream] {
            let (packet, transaction) = signed_query("ns.example.test", Rtype::A, Some(1232), &key, NOW - 10);
            let (mut response, tsig) = ask(&packet, transport, NOW);
            assert_eq!((response.header().rcode(), tsig), (Rcode::NOERROR, Some(Said::Verified)), "{ours:?}");
            transaction.answer(&mut response, Time48::from_u64(NOW)).unwrap_or_else(|error| panic!("{ours:?}: {error}"));
            assert_eq!(response.answer().unwrap().count(), 1, "{ours:?}: the answer is kept");
        }
    }
}

#[test]
fn a_signed_query_refused_for_another_reason_is_still_signed() {
    let key = sha256_key();
    let (packet, transaction) = signed_query("example.org", Rtype::A, Some(1232), &key, NOW);
    let (mut refused, _) = ask(&packet, Transport::Udp, NOW);
    assert_eq!((refused.header().rcode(), extended_error(&refused)), (Rcode::REFUSED, Some(20)));
    transaction.answer(&mut refused, Time48::from_u64(NOW)).expect("the REFUSED is signed");
    let (packet, transaction) = signed_query("big.example.test", Rtype::AXFR, None, &key, NOW);
    let (mut notimp, _) = ask(&packet, Transport::Udp, NOW);
    assert_eq!(notimp.header().rcode(), Rcode::NOTIMP);
    transaction.answer(&mut notimp, Time48::from_u64(NOW)).expect("the NOTIMP is signed");
}

#[test]
fn a_truncated_udp_answer_keeps_room_for_its_tsig_record_and_is_signed() {
    let key = sha256_key();
    for edns in [None, Some(600)] {
        let (packet, transaction) = signed_query("big.example.test", Rtype::TXT, edns, &key, NOW);
        let (mut response, _) = ask(&packet, Transport::Udp, NOW);
        let limit = edns.map_or(512, usize::from);
        assert!(response.header().tc() && response.as_slice().len() <= limit, "{} octets", response.as_slice().len());
        let records = response.answer().unwrap().count();
        // The same question unsigned fits no more records, and no fewer
        // than the TSIG record's room leaves.
        let unsigned = unsigned_answer_count(edns, limit);
        assert!(records <= unsigned && records + 1 >= unsigned, "{records} signed, {unsigned} unsigned");
        transaction.answer(&mut response, Time48::from_u64(NOW)).expect("the truncated answer is signed");
    }
    let (packet, transaction) = signed_query("big.example.test", Rtype::TXT, None, &key, NOW);
    let (mut whole, _) = ask(&packet, Transport::Stream, NOW);
    assert!(!whole.header().tc() && whole.answer().unwrap().count() == 5, "a stream takes it all");
    transaction.answer(&mut whole, Time48::from_u64(NOW)).unwrap();
}

/// How many TXT records an unsigned query for big.example.test gets
/// over UDP with `edns` (`limit` octets).
fn unsigned_answer_count(edns: Option<u16>, limit: usize) -> usize {
    let (response, tsig) = ask(&query("big.example.test", Rtype::TXT, edns).finish(), Transport::Udp, 0);
    assert!(tsig.is_none() && response.as_slice().len() <= limit);
    response.answer().unwrap().count()
}

#[test]
fn each_tsig_refusal_is_notauth_with_its_error_unsigned_but_badtime() {
    let refusal = |key: &Key, signed_at: u64| {
        let (packet, _) = signed_query("ns.example.test", Rtype::A, Some(1232), key, signed_at);
        let (response, tsig) = ask(&packet, Transport::Udp, NOW);
        (response.header().rcode(), tsig_of(&response), extended_error(&response), tsig)
    };
    let unknown = client_key("other-key", Algorithm::Sha256, SECRET, None);
    assert_eq!(refusal(&unknown, NOW), (Rcode::NOTAUTH, Some((17, 0)), Some(18), Some(Said::BadKey)), "BADKEY");
    let other_algorithm = client_key("hmac-sha256-key", Algorithm::Sha384, SECRET, None);
    assert_eq!(refusal(&other_algorithm, NOW).1, Some((17, 0)), "a key is its name and algorithm: BADKEY");
    let wrong = client_key("hmac-sha256-key", Algorithm::Sha256, b"not the secret", None);
    assert_eq!(refusal(&wrong, NOW), (Rcode::NOTAUTH, Some((16, 0)), Some(18), Some(Said::BadSig)), "BADSIG");
    assert_eq!(refusal(&sha256_key(), NOW - 301), (Rcode::NOTAUTH, Some((18, 32)), Some(18), Some(Said::BadTime)), "BADTIME, signed");
    assert_eq!(refusal(&sha256_key(), NOW + 300).0, Rcode::NOERROR, "within the fudge");
}

#[test]
fn a_mac_cut_as_rfc_8945_allows_is_taken_and_answered_as_cut_and_a_shorter_one_is_badtrunc() {
    let cut = client_key("hmac-sha256-key", Algorithm::Sha256, SECRET, Some(16));
    let (packet, transaction) = signed_query("ns.example.test", Rtype::A, None, &cut, NOW);
    let (mut response, _) = ask(&packet, Transport::Udp, NOW);
    assert_eq!((response.header().rcode(), tsig_of(&response)), (Rcode::NOERROR, Some((0, 16))), "signed, cut as the query");
    transaction.answer(&mut response, Time48::from_u64(NOW)).expect("domain checks the cut MAC");
    // The whole MAC of a query cut to 10 octets: below half of SHA-256's.
    let (mut packet, _) = signed_query("ns.example.test", Rtype::A, None, &sha256_key(), NOW);
    cut_mac(&mut packet, 10);
    let (response, tsig) = ask(&packet, Transport::Udp, NOW);
    assert_eq!((response.header().rcode(), tsig_of(&response), tsig), (Rcode::NOTAUTH, Some((22, 0)), Some(Said::BadTrunc)));
    let (mut packet, _) = signed_query("ns.example.test", Rtype::A, None, &sha256_key(), NOW);
    grow_mac(&mut packet);
    let (response, tsig) = ask(&packet, Transport::Udp, NOW);
    assert_eq!((response.header().rcode(), tsig_of(&response), tsig), (Rcode::FORMERR, None, Some(Said::Malformed)));
}

/// The offset of the MAC Size field of the (last, only) TSIG record of a
/// query for ns.example.test with no OPT record, signed by hmac-sha256-key.
fn mac_size_at() -> usize {
    12 + "\x02ns\x07example\x04test\x00".len() + 4 + "\x0fhmac-sha256-key\x00".len() + 10 + "\x0bhmac-sha256\x00".len() + 8
}

/// Cuts the MAC of such a query to `len` octets, fixing the lengths.
fn cut_mac(packet: &mut Vec<u8>, len: usize) {
    let at = mac_size_at();
    let whole = usize::from(u16::from_be_bytes([packet[at], packet[at + 1]]));
    packet.drain(at + 2 + len..at + 2 + whole);
    packet[at..at + 2].copy_from_slice(&(len as u16).to_be_bytes());
    let rdata_len_at = at - 8 - "\x0bhmac-sha256\x00".len() - 2;
    let rdata_len = u16::from_be_bytes([packet[rdata_len_at], packet[rdata_len_at + 1]]) - (whole - len) as u16;
    packet[rdata_len_at..rdata_len_at + 2].copy_from_slice(&rdata_len.to_be_bytes());
}

/// Makes the MAC of such a query an octet longer than SHA-256's.
fn grow_mac(packet: &mut Vec<u8>) {
    let at = mac_size_at();
    packet.insert(at + 2, 0);
    packet[at..at + 2].copy_from_slice(&33u16.to_be_bytes());
    let rdata_len_at = at - 8 - "\x0bhmac-sha256\x00".len() - 2;
    let rdata_len = u16::from_be_bytes([packet[rdata_len_at], packet[rdata_len_at + 1]]) + 1;
    packet[rdata_len_at..rdata_len_at + 2].copy_from_slice(&rdata_len.to_be_bytes());
}

#[test]
fn a_signed_message_without_a_question_is_formerr_unsigned_as_the_references_answer() {
    let (packet, _) = signed_query("ns.example.test", Rtype::A, Some(1232), &sha256_key(), NOW);
    let question_end = 12 + wire_name("ns.example.test").len() + 4;
    let mut no_question = [&packet[..12], &packet[question_end..]].concat();
    no_question[5] = 0;
    let (response, tsig) = ask(&no_question, Transport::Udp, NOW);
    assert_eq!((response.header().rcode(), tsig_of(&response), tsig), (Rcode::FORMERR, None, None));
}

#[test]
fn a_tsig_record_that_cannot_be_read_is_formerr_unsigned_with_why() {
    let (mut packet, _) = signed_query("ns.example.test", Rtype::A, Some(1232), &sha256_key(), NOW);
    // Other Len says two octets follow where none do.
    let other_len_at = packet.len() - 2;
    packet[other_len_at + 1] = 2;
    let (response, tsig) = ask(&packet, Transport::Udp, NOW);
    assert_eq!((response.header().rcode(), tsig_of(&response), extended_error(&response)), (Rcode::FORMERR, None, Some(0)));
    assert_eq!(tsig, Some(Said::Malformed));
}
