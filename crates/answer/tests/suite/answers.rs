//! The query path end to end, without sockets: raw query bytes in, raw
//! response bytes out, read back with the `domain` crate's parser.

use std::net::{IpAddr, Ipv4Addr};

use domain::base::iana::{Opcode, Rcode, Rtype};
use domain::base::{Message, ParsedName};
use domain::rdata::AllRecordData;
use domain::rdata::tsig::Time48;
use pharos_answer::{
    Client, CookieReply, ResponseOptions, Sent, Settings, Snapshot, TransferAcl, Transport, TsigAlgorithm, TsigKey, is_transfer, respond,
    respond_transfer, respond_with,
};
use pharos_zone::{ZoneSet, parse_zone_text};
use rand::SeedableRng;

const ZONE: &str = r#"
$TTL 3600
@        IN SOA ns1 hostmaster 1 7200 3600 1209600 300
         NS  ns1
         NS  ns2.elsewhere.example.
         MX  10 mail
ns1      A   192.0.2.53
mail     A   192.0.2.25
mail     AAAA 2001:db8::25
www      CNAME web
web      CNAME host
host     A   192.0.2.80
out      CNAME www.elsewhere.example.
loop1    CNAME loop2
loop2    CNAME loop1
*.wild   A   192.0.2.81
*.wild   MX  5 mail
*.cw     CNAME host
ent.x.deep A 192.0.2.82
*.deep   A   192.0.2.83
sub      NS  ns.sub
sub      DS  12345 8 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
ns.sub   A   192.0.2.99
old      DNAME new.example.test.
x.new    A   192.0.2.84
big      TXT "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
big      TXT "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
big      TXT "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
big      TXT "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
big      TXT "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
big      TXT "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
"#;

fn snapshot() -> Snapshot {
    let zone = parse_zone_text("example.test", ZONE, "test.zone").expect("test zone loads");
    Snapshot {
        zones: ZoneSet::new(vec![zone]).unwrap().into(),
        routes: Default::default(),
        settings: Settings { nsid: Some((*b"node-7").into()), ..Settings::default() },
    }
}

fn wire_name(text: &str) -> Vec<u8> {
    let mut wire = Vec::new();
    for label in text.trim_end_matches('.').split('.') {
        wire.push(label.len() as u8);
        wire.extend(label.as_bytes());
    }
    wire.push(0);
    wire
}

/// A query with RD set and, if `edns` is given, an OPT record with that
/// payload size, version and options.
fn query(name: &str, qtype: u16, edns: Option<(u16, u8, &[u8])>) -> Vec<u8> {
    let mut packet = vec![0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())];
    packet.extend(wire_name(name));
    packet.extend(qtype.to_be_bytes());
    packet.extend([0, 1]);
    if let Some((payload, version, options)) = edns {
        packet.extend([0, 0, 41]);
        packet.extend(payload.to_be_bytes());
        packet.extend([0, version, 0, 0]);
        packet.extend((options.len() as u16).to_be_bytes());
        packet.extend(options);
    }
    packet
}

fn ask(packet: &[u8], transport: Transport) -> Option<Vec<u8>> {
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport };
    let mut out = Vec::new();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let snapshot = snapshot();
    let answered = respond(packet, &client, &snapshot, &mut rng, &mut out)?;
    let summary = (answered.rcode, answered.smallest_ttl, answered.len);
    assert_eq!(summary, read_back(&out), "the summary says what the response says");
    Some(out)
}

/// What a response says (RCODE, smallest TTL, length), read back from its bytes.
fn read_back(response: &[u8]) -> (u16, Option<u32>, usize) {
    let rcode = Message::from_octets(response).unwrap().opt_rcode().to_int();
    (rcode, pharos_wire::response::smallest_ttl(response), response.len())
}

fn udp(name: &str, qtype: Rtype) -> Message<Vec<u8>> {
    Message::from_octets(ask(&query(name, qtype.to_int(), Some((1232, 0, &[]))), Transport::Udp).unwrap()).unwrap()
}

/// Each record of a section as "owner TYPE data", lowercased owners.
fn section(message: &Message<Vec<u8>>, index: usize) -> Vec<String> {
    let section = match index {
        0 => message.answer().unwrap(),
        1 => message.authority().unwrap(),
        _ => message.additional().unwrap(),
    };
    section
        .limit_to::<AllRecordData<_, ParsedName<_>>>()
        .map(|record| record.unwrap())
        .filter(|record| record.rtype() != Rtype::OPT)
        .map(|record| {
            format!("{} {} {} {}", record.owner().to_string().to_lowercase(), record.ttl().as_secs(), record.rtype(), record.data())
        })
        .collect()
}

#[test]
fn positive_answer_is_authoritative_with_additional_addresses() {
    let response = udp("example.test", Rtype::MX);
    assert_eq!(response.header().rcode(), Rcode::NOERROR);
    assert!(response.header().aa() && response.header().rd() && !response.header().ra());
    assert_eq!(section(&response, 0), ["example.test 3600 MX 10 mail.example.test."]);
    assert_eq!(section(&response, 2), ["mail.example.test 3600 A 192.0.2.25", "mail.example.test 3600 AAAA 2001:db8::25"]);
}

#[test]
fn negative_answers_carry_soa_with_the_negative_ttl() {
    let nxdomain = udp("nope.example.test", Rtype::A);
    assert_eq!(nxdomain.header().rcode(), Rcode::NXDOMAIN);
    assert_eq!(section(&nxdomain, 1), ["example.test 300 SOA ns1.example.test. hostmaster.example.test. 1 7200 3600 1209600 300"]);
    let nodata = udp("host.example.test", Rtype::AAAA);
    assert_eq!(nodata.header().rcode(), Rcode::NOERROR);
    assert!(section(&nodata, 0).is_empty());
    assert_eq!(section(&nodata, 1).len(), 1);
    let empty_non_terminal = udp("deep.example.test", Rtype::A);
    assert_eq!((empty_non_terminal.header().rcode(), section(&empty_non_terminal, 0).len()), (Rcode::NOERROR, 0));
}

#[test]
fn cname_chains_are_followed_inside_the_zone_only() {
    let chain = udp("www.example.test", Rtype::A);
    assert_eq!(
        section(&chain, 0),
        [
            "www.example.test 3600 CNAME web.example.test.",
            "web.example.test 3600 CNAME host.example.test.",
            "host.example.test 3600 A 192.0.2.80"
        ]
    );
    let out = udp("out.example.test", Rtype::A);
    assert_eq!((out.header().rcode(), section(&out, 0).len(), section(&out, 1).len()), (Rcode::NOERROR, 1, 0));
    let looped = udp("loop1.example.test", Rtype::A);
    assert_eq!(section(&looped, 0).len(), 2, "a loop stops where it closes");
    let cname_itself = udp("www.example.test", Rtype::CNAME);
    assert_eq!(section(&cname_itself, 0), ["www.example.test 3600 CNAME web.example.test."]);
}

#[test]
fn wildcards_follow_rfc_4592() {
    let synthesized = udp("a.b.wild.example.test", Rtype::A);
    assert_eq!(section(&synthesized, 0), ["a.b.wild.example.test 3600 A 192.0.2.81"]);
    let wildcard_mx = udp("z.wild.example.test", Rtype::MX);
    assert_eq!(section(&wildcard_mx, 2).len(), 2, "additional addresses for a synthesized MX");
    let wildcard_nodata = udp("z.wild.example.test", Rtype::TXT);
    assert_eq!((wildcard_nodata.header().rcode(), section(&wildcard_nodata, 1).len()), (Rcode::NOERROR, 1));
    let literal = udp("*.wild.example.test", Rtype::A);
    assert_eq!(section(&literal, 0), ["*.wild.example.test 3600 A 192.0.2.81"]);
    // The closest encloser is *.wild itself, whose source of synthesis *.*.wild does not exist.
    let below_star = udp("q.*.wild.example.test", Rtype::A);
    assert_eq!(below_star.header().rcode(), Rcode::NXDOMAIN);
    let wildcard_cname = udp("any.cw.example.test", Rtype::A);
    assert_eq!(section(&wildcard_cname, 0), ["any.cw.example.test 3600 CNAME host.example.test.", "host.example.test 3600 A 192.0.2.80"]);
    // x.deep exists as an empty non-terminal, so *.deep does not cover names below it.
    let blocked = udp("other.x.deep.example.test", Rtype::A);
    assert_eq!(blocked.header().rcode(), Rcode::NXDOMAIN);
    let covered = udp("other.deep.example.test", Rtype::A);
    assert_eq!(section(&covered, 0), ["other.deep.example.test 3600 A 192.0.2.83"]);
}

#[test]
fn delegations_are_referrals_with_glue() {
    for name in ["sub.example.test", "a.b.sub.example.test", "ns.sub.example.test"] {
        let referral = udp(name, Rtype::A);
        assert!(!referral.header().aa(), "{name}");
        assert_eq!(referral.header().rcode(), Rcode::NOERROR);
        assert!(section(&referral, 0).is_empty());
        assert_eq!(section(&referral, 1), ["sub.example.test 3600 NS ns.sub.example.test."]);
        assert_eq!(section(&referral, 2), ["ns.sub.example.test 3600 A 192.0.2.99"]);
    }
    let ds = udp("sub.example.test", Rtype::DS);
    assert!(ds.header().aa(), "DS is answered by the parent");
    assert_eq!(section(&ds, 0).len(), 1);
}

#[test]
fn dname_substitutes_and_synthesizes_a_cname() {
    let response = udp("x.old.example.test", Rtype::A);
    assert_eq!(
        section(&response, 0),
        [
            "old.example.test 3600 DNAME new.example.test.",
            "x.old.example.test 3600 CNAME x.new.example.test.",
            "x.new.example.test 3600 A 192.0.2.84"
        ]
    );
}

#[test]
fn question_is_echoed_as_asked_and_names_are_matched_without_case() {
    let packet = query("HoSt.ExAmPlE.TeSt", 1, None);
    let response = ask(&packet, Transport::Udp).unwrap();
    assert_eq!(&response[12..12 + 19], &packet[12..12 + 19]);
    assert_eq!(Message::from_octets(response).unwrap().header_counts().ancount(), 1);
}

#[test]
fn names_outside_every_zone_are_refused() {
    let response = udp("example.org", Rtype::A);
    assert_eq!(response.header().rcode(), Rcode::REFUSED);
    assert!(!response.header().aa());
}

#[test]
fn any_gets_one_rrset() {
    let response = udp("example.test", Rtype::ANY);
    let types: std::collections::BTreeSet<_> =
        section(&response, 0).iter().map(|record| record.split(' ').nth(2).unwrap().to_string()).collect();
    assert_eq!(types.len(), 1, "{types:?}");
}

#[test]
fn edns_is_echoed_with_our_payload_and_nsid_on_request() {
    let response =
        Message::from_octets(ask(&query("host.example.test", 1, Some((4096, 0, &[0, 3, 0, 0]))), Transport::Udp).unwrap()).unwrap();
    let opt = response.opt().unwrap();
    assert_eq!((opt.udp_payload_size(), opt.version()), (1232, 0));
    let nsid: Vec<_> = opt.opt().iter::<domain::base::opt::AllOptData<_, _>>().map(|option| format!("{:?}", option.unwrap())).collect();
    assert!(nsid[0].contains("node-7") || nsid[0].contains("6e6f64652d37"), "{nsid:?}");
    let no_edns = Message::from_octets(ask(&query("host.example.test", 1, None), Transport::Udp).unwrap()).unwrap();
    assert!(no_edns.opt().is_none());
}

#[test]
fn edns_errors_are_badvers_and_formerr() {
    let badvers = Message::from_octets(ask(&query("host.example.test", 1, Some((1232, 1, &[]))), Transport::Udp).unwrap()).unwrap();
    assert_eq!(badvers.opt_rcode(), domain::base::iana::OptRcode::BADVERS);
    assert_eq!(badvers.opt().unwrap().version(), 0);
    let mut two_opts = query("host.example.test", 1, Some((1232, 0, &[])));
    let opt = two_opts[two_opts.len() - 11..].to_vec();
    two_opts.extend_from_slice(&opt);
    two_opts[11] = 2;
    assert_eq!(Message::from_octets(ask(&two_opts, Transport::Udp).unwrap()).unwrap().header().rcode(), Rcode::FORMERR);
    let bad_subnet = [0, 8, 0, 7, 0, 1, 24, 0, 192, 0, 2, 1];
    let formerr =
        Message::from_octets(ask(&query("host.example.test", 1, Some((1232, 0, &bad_subnet[..]))), Transport::Udp).unwrap()).unwrap();
    assert_eq!(formerr.header().rcode(), Rcode::FORMERR);
}

#[test]
fn big_answers_truncate_over_udp_without_partial_rrsets_and_fit_over_tcp() {
    let truncated = Message::from_octets(ask(&query("big.example.test", 16, None), Transport::Udp).unwrap()).unwrap();
    assert!(truncated.header().tc());
    assert_eq!(truncated.header_counts().ancount(), 0, "the one RRset does not fit, so none of it is sent");
    assert!(truncated.as_slice().len() <= 512);
    let whole = Message::from_octets(ask(&query("big.example.test", 16, None), Transport::Stream).unwrap()).unwrap();
    assert!(!whole.header().tc());
    assert_eq!(whole.header_counts().ancount(), 6);
}

#[test]
fn malformed_queries_get_the_right_error_or_none() {
    let mut response_packet = query("host.example.test", 1, None);
    response_packet[2] |= 0x80;
    assert!(ask(&response_packet, Transport::Udp).is_none(), "QR=1 is dropped");
    assert!(ask(&[1, 2, 3], Transport::Udp).is_none(), "no header is dropped");
    let mut status = query("host.example.test", 1, None);
    status[2] |= 2 << 3;
    let notimp = Message::from_octets(ask(&status, Transport::Udp).unwrap()).unwrap();
    assert_eq!((notimp.header().rcode(), notimp.header().opcode()), (Rcode::NOTIMP, Opcode::STATUS));
    let mut two_questions = query("host.example.test", 1, None);
    two_questions[5] = 2;
    assert_eq!(Message::from_octets(ask(&two_questions, Transport::Udp).unwrap()).unwrap().header().rcode(), Rcode::FORMERR);
    let cut_short = &query("host.example.test", 1, None)[..20];
    assert_eq!(Message::from_octets(ask(cut_short, Transport::Udp).unwrap()).unwrap().header().rcode(), Rcode::FORMERR);
    let oversized = pharos_answer::respond_oversized(&query("host.example.test", 1, None), &mut Vec::new());
    assert!(oversized.is_some());
}

#[test]
fn transfers_take_tcp_and_meta_types_have_no_data() {
    let over_udp = udp("example.test", Rtype::AXFR);
    assert_eq!(over_udp.header().rcode(), Rcode::NOTIMP, "AXFR over UDP: NOTIMP, as Knot DNS says");
    assert_eq!(udp("example.test", Rtype::IXFR).header().rcode(), Rcode::REFUSED);
    // Only an apex names a zone to transfer, over UDP as over TCP: NOTAUTH
    // elsewhere, as Knot DNS and NSD say.
    for not_a_zone in ["host.example.test", "nowhere.test"] {
        let ixfr = udp(not_a_zone, Rtype::IXFR);
        assert_eq!((ixfr.header().rcode(), extended_error(&ixfr)), (Rcode::NOTAUTH, Some(20)), "{not_a_zone}");
    }
    // HTTPS and QUIC answer through respond: a transfer is not theirs to give.
    let over_https = ask(&query("example.test", Rtype::AXFR.to_int(), None), Transport::Stream).unwrap();
    assert_eq!(Message::from_octets(over_https).unwrap().header().rcode(), Rcode::REFUSED);
    let maila = udp("example.test", Rtype::MAILA);
    assert_eq!((maila.header().rcode(), section(&maila, 1).len()), (Rcode::NOERROR, 1));
}

/// The messages of a transfer of `name` asked by 127.0.0.1 over a stream
/// from `snapshot`; checks that the summary counts their octets.
fn transfer(snapshot: &Snapshot, name: &str, qtype: Rtype) -> Vec<Message<Vec<u8>>> {
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Stream };
    let packet = query(name, qtype.to_int(), Some((1232, 0, &[])));
    let parsed = pharos_answer::parse_query(&packet).unwrap();
    assert!(parsed.question.as_ref().is_some_and(is_transfer));
    let mut messages = Vec::new();
    let transferred = respond_transfer(&parsed, &client, &at(NOW), snapshot, |message| messages.push(message.to_vec()));
    assert_eq!(transferred.answered.len, messages.iter().map(Vec::len).sum::<usize>());
    messages.into_iter().map(|message| Message::from_octets(message).unwrap()).collect()
}

/// `snapshot` with 127.0.0.0/8 allowed to transfer `zone`.
fn allowing_transfer(mut snapshot: Snapshot, zone: &str) -> Snapshot {
    let allowed = pharos_route::prefix::prefix_set("allow_transfer", &["127.0.0.0/8".to_string()]).unwrap();
    snapshot.settings.transfer_acls.push(TransferAcl { zone: wire_name(zone).into(), allowed, keys: Vec::new() });
    snapshot
}

/// The Extended DNS Error's INFO-CODE of a response, if it has one.
fn extended_error(message: &Message<Vec<u8>>) -> Option<u16> {
    edns_options(message).into_iter().find(|(code, _)| *code == 15).map(|(_, data)| u16::from_be_bytes([data[0], data[1]]))
}

#[test]
fn transfers_are_refused_unless_listed_and_only_for_a_zone_apex() {
    let refused = transfer(&snapshot(), "example.test", Rtype::AXFR);
    assert_eq!(refused.len(), 1);
    assert_eq!((refused[0].header().rcode(), extended_error(&refused[0])), (Rcode::REFUSED, Some(18)), "nobody unless listed");
    let elsewhere = snapshot();
    let listed_elsewhere = allowing_transfer(elsewhere, "other.test");
    assert_eq!(transfer(&listed_elsewhere, "example.test", Rtype::AXFR)[0].header().rcode(), Rcode::REFUSED);
    let allowed = allowing_transfer(snapshot(), "example.test");
    for not_a_zone in ["www.example.test", "nowhere.test"] {
        let answer = &transfer(&allowed, not_a_zone, Rtype::AXFR)[0];
        assert_eq!((answer.header().rcode(), extended_error(answer)), (Rcode::NOTAUTH, Some(20)), "{not_a_zone}");
    }
}

/// Every record of a message's answer section as "owner ttl TYPE data".
fn records(message: &Message<Vec<u8>>) -> Vec<String> {
    section(message, 0)
}

#[test]
fn a_transfer_sends_every_record_soa_first_and_last_in_messages_up_to_64_kib() {
    let zone = big_zone();
    let snapshot = || {
        let zone = parse_zone_text("big.test", &zone, "big.zone").unwrap();
        let snapshot =
            Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Settings::default() };
        allowing_transfer(snapshot, "big.test")
    };
    for qtype in [Rtype::AXFR, Rtype::IXFR] {
        let messages = transfer(&snapshot(), "big.test", qtype);
        assert!(messages.len() > 4, "{} messages", messages.len());
        let mut all = Vec::new();
        for (index, message) in messages.iter().enumerate() {
            assert!(message.as_slice().len() <= 65535);
            let header = message.header();
            assert!(header.qr() && header.aa() && header.rcode() == Rcode::NOERROR && header.id() == 0xABCD);
            assert_eq!(message.header_counts().qdcount(), u16::from(index == 0), "the question in the first message only");
            all.extend(records(message));
        }
        let soa = "big.test 60 SOA ns.big.test. hostmaster.big.test. 7 7200 3600 1209600 60";
        assert_eq!((all[0].as_str(), all[all.len() - 1].as_str()), (soa, soa));
        assert_eq!(all.len(), 2 + 2 + 2 * 3000);
        assert!(all.contains(&"t2999.big.test 60 MX 10 ns.big.test.".to_string()));
        // Compression: 6,000 owners and MX targets would take ~100 KiB more written out.
        assert!(messages.iter().map(|message| message.as_slice().len()).sum::<usize>() < 3000 * (110 + 30 + 12));
    }
}
/// Asks over a stream connection whose responses carry `options`.
fn ask_with(packet: &[u8], options: ResponseOptions) -> Message<Vec<u8>> {
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Stream };
    let mut out = Vec::new();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    assert!(respond_with(packet, &client, &options, &snapshot(), &mut rng, &mut out).is_some());
    Message::from_octets(out).unwrap()
}

/// The options of the response's OPT record as (code, data).
fn edns_options(message: &Message<Vec<u8>>) -> Vec<(u16, Vec<u8>)> {
    let opt = message.opt().expect("an OPT record");
    let options = opt.opt().iter::<domain::base::opt::UnknownOptData<_>>();
    options.map(|option| option.unwrap()).map(|option| (option.code().to_int(), option.as_slice().to_vec())).collect()
}

const KEEPALIVE_QUERY: &[u8] = &[0, 11, 0, 0];
const PADDING_QUERY: &[u8] = &[0, 12, 0, 4, 0, 0, 0, 0];

#[test]
fn the_keepalive_timeout_goes_to_queries_that_ask_on_connections_that_offer_it() {
    let offers = ResponseOptions { keepalive: Some(100), pad: false, ..ResponseOptions::default() };
    let asks = query("host.example.test", 1, Some((1232, 0, KEEPALIVE_QUERY)));
    assert_eq!(edns_options(&ask_with(&asks, offers)), [(11, vec![0, 100])]);
    assert_eq!(edns_options(&ask_with(&asks, ResponseOptions::default())), []);
    let does_not_ask = query("host.example.test", 1, Some((1232, 0, &[])));
    assert_eq!(edns_options(&ask_with(&does_not_ask, offers)), []);
}

#[test]
fn a_cookie_is_answered_with_the_server_cookie_made_for_it_and_a_bad_one_with_badcookie() {
    let client_cookie = [1, 2, 3, 4, 5, 6, 7, 8];
    let cookie_option = [&[0, 10, 0, 8][..], &client_cookie].concat();
    let server = [9; 16];
    let good = ResponseOptions { cookie: Some(CookieReply { server, bad: false }), ..ResponseOptions::default() };
    let answered = ask_with(&query("host.example.test", 1, Some((1232, 0, &cookie_option))), good);
    assert_eq!((answered.header().rcode(), answered.header_counts().ancount()), (Rcode::NOERROR, 1));
    assert_eq!(edns_options(&answered), [(10, [&client_cookie[..], &server].concat())], "client cookie, then server cookie");
    let bad = ResponseOptions { cookie: Some(CookieReply { server, bad: true }), ..ResponseOptions::default() };
    let refused = ask_with(&query("host.example.test", 1, Some((1232, 0, &cookie_option))), bad);
    assert_eq!(refused.opt_rcode(), domain::base::iana::OptRcode::BADCOOKIE);
    assert_eq!((refused.header_counts().qdcount(), refused.header_counts().ancount()), (1, 0), "the question, no answer");
    let mut why = vec![0, 0];
    why.extend(b"bad or expired server cookie");
    assert_eq!(edns_options(&refused), [(15, why), (10, [&client_cookie[..], &server].concat())], "why, and a fresh server cookie");
    let no_cookie_asked = ask_with(&query("host.example.test", 1, Some((1232, 0, &[]))), good);
    assert_eq!(edns_options(&no_cookie_asked), [], "only a query with a COOKIE option gets one");
}

#[test]
fn padded_queries_get_responses_padded_to_whole_blocks() {
    let pads = ResponseOptions { keepalive: Some(100), pad: true, ..ResponseOptions::default() };
    // example.org is in no served zone: its refusal says so (EDE, 15) first.
    for (name, qtype, options) in
        [("host.example.test", 1, &[11, 12][..]), ("big.example.test", 16, &[11, 12]), ("example.org", 1, &[15, 11, 12])]
    {
        let both = [KEEPALIVE_QUERY, PADDING_QUERY].concat();
        let response = ask_with(&query(name, qtype, Some((1232, 0, &both))), pads);
        assert_eq!(response.as_slice().len() % 468, 0, "{name}: {} octets", response.as_slice().len());
        let codes: Vec<u16> = edns_options(&response).iter().map(|(code, _)| *code).collect();
        assert_eq!(codes, options, "{name}: the padding comes last");
    }
    let unpadded = ask_with(&query("host.example.test", 1, Some((1232, 0, &[]))), pads);
    assert_eq!(edns_options(&unpadded), [], "a query that was not padded");
    let in_the_clear = ask_with(&query("host.example.test", 1, Some((1232, 0, PADDING_QUERY))), ResponseOptions::default());
    assert_eq!(edns_options(&in_the_clear), [], "a connection that does not pad");
}

/// EDNS options as (code, data).
type Options = Vec<(u16, Vec<u8>)>;

/// The Extended DNS Error options of `name`/`qtype` asked over UDP with
/// `class`, or None when the response has no OPT record.
fn extended_errors(name: &str, qtype: Rtype, class: u16, edns: bool) -> (Rcode, Option<Options>) {
    let mut packet = query(name, qtype.to_int(), edns.then_some((1232, 0, &[][..])));
    let class_at = 12 + wire_name(name).len() + 2;
    packet[class_at..class_at + 2].copy_from_slice(&class.to_be_bytes());
    let response = Message::from_octets(ask(&packet, Transport::Udp).unwrap()).unwrap();
    let extended = response.opt().map(|_| edns_options(&response).into_iter().filter(|(code, _)| *code == 15).collect());
    (response.header().rcode(), extended)
}

#[test]
fn refusals_say_why_in_an_extended_dns_error() {
    const IN: u16 = 1;
    let ede = |code: u16| Some(vec![(15, code.to_be_bytes().to_vec())]);
    assert_eq!(extended_errors("example.net", Rtype::A, IN, true), (Rcode::REFUSED, ede(20)), "not authoritative");
    let needs_tcp = Some(vec![(15, [&21u16.to_be_bytes()[..], b"zone transfers are answered over TCP and TLS"].concat())]);
    assert_eq!(extended_errors("example.test", Rtype::AXFR, IN, true), (Rcode::NOTIMP, Some(vec![])), "as Knot DNS says");
    assert_eq!(extended_errors("example.test", Rtype::IXFR, IN, true), (Rcode::REFUSED, needs_tcp), "transfers take TCP");
    assert_eq!(extended_errors("example.test", Rtype::A, 3, true), (Rcode::REFUSED, ede(21)), "class CH is not supported");
    for transfer in [Rtype::AXFR, Rtype::IXFR] {
        assert_eq!(extended_errors("example.test", transfer, 3, true), (Rcode::REFUSED, ede(21)), "{transfer} in class CH");
    }
    assert_eq!(extended_errors("host.example.test", Rtype::A, IN, true), (Rcode::NOERROR, Some(vec![])), "answers carry none");
    assert_eq!(extended_errors("example.net", Rtype::A, IN, false), (Rcode::REFUSED, None), "no OPT asked, none sent");
}

/// `snapshot()`'s zone signed with a fresh Ed25519 key.
fn signed_snapshot() -> Snapshot {
    use pharos_dnssec::{Algorithm, Role, Signer, Window, ZoneKey, ZoneKeys};
    let mut zone = parse_zone_text("example.test", ZONE, "test.zone").unwrap();
    let keys = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::Ed25519, Role::Csk, &ring::rand::SystemRandom::new()).unwrap()] };
    zone.signer = Some(Signer::new(&zone.origin, keys, Window::from_now(NOW, 86_400), NOW).unwrap().into());
    Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Settings::default() }
}

/// RFC 9824 section 3.5: a query for NXNAME (128) is FORMERR, with
/// Extended DNS Error 30 (Invalid Query Type), from a signed zone or not,
/// for a name that exists or not, with DNSSEC asked for or not.
#[test]
fn an_explicit_nxname_query_is_formerr_signed_zone_or_not() {
    const NXNAME: u16 = 128;
    let ede = Some(vec![(15, 30u16.to_be_bytes().to_vec())]);
    for snapshot in [snapshot(), signed_snapshot()] {
        for name in ["host.example.test", "nowhere.example.test"] {
            for dnssec_ok in [0, 0x80] {
                let mut packet = query(name, NXNAME, Some((1232, 0, &[])));
                // The OPT record's flags, DO first, come 4 octets before its end.
                let flags_at = packet.len() - 4;
                packet[flags_at] = dnssec_ok;
                let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Udp };
                let mut out = Vec::new();
                let answered = respond(&packet, &client, &snapshot, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut out).unwrap();
                let response = Message::from_octets(out).unwrap();
                assert_eq!((answered.rcode, response.header().rcode()), (1, Rcode::FORMERR), "{name} DO={dnssec_ok}");
                assert_eq!(response.header_counts().ancount() + response.header_counts().nscount(), 0, "no records");
                let extended = edns_options(&response).into_iter().filter(|(code, _)| *code == 15).collect::<Vec<_>>();
                assert_eq!(Some(extended), ede);
            }
        }
    }
}

/// RFC 9824 section 5: a DO=1 query with Compact Answers OK (CO) gets CO
/// back and, for a name that does not exist, NXDOMAIN beside the same
/// compact proof; without CO, NOERROR. CO is echoed whatever the answer.
#[test]
fn compact_answers_ok_restores_nxdomain_and_is_echoed() {
    const DO: u8 = 0x80;
    const CO: u8 = 0x40;
    let signed = signed_snapshot();
    let asked = |name: &str, edns_flags: u8| {
        let mut packet = query(name, Rtype::A.to_int(), Some((1232, 0, &[])));
        let flags_at = packet.len() - 4;
        packet[flags_at] = edns_flags;
        let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Udp };
        let mut out = Vec::new();
        let answered = respond(&packet, &client, &signed, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut out).unwrap();
        let response = Message::from_octets(out).unwrap();
        assert_eq!(answered.rcode, response.opt_rcode().to_int());
        let authority: Vec<Rtype> = response.authority().unwrap().map(|record| record.unwrap().rtype()).collect();
        let opt = response.opt().unwrap();
        let opt_flags = (opt.dnssec_ok(), opt.as_record().ttl().as_secs() & 0x4000 != 0);
        (response.header().rcode(), authority, opt_flags)
    };
    let proof = vec![Rtype::SOA, Rtype::RRSIG, Rtype::NSEC, Rtype::RRSIG];
    assert_eq!(asked("nowhere.example.test", DO | CO), (Rcode::NXDOMAIN, proof.clone(), (true, true)));
    assert_eq!(asked("nowhere.example.test", DO), (Rcode::NOERROR, proof, (true, false)));
    assert_eq!(asked("nowhere.example.test", CO), (Rcode::NXDOMAIN, vec![Rtype::SOA], (false, true)), "unsigned: NXDOMAIN anyway");
    assert_eq!(asked("host.example.test", DO | CO).0, Rcode::NOERROR);
    assert_eq!(asked("host.example.test", DO | CO).2, (true, true));
}

/// The zone of the transfer tests: ~330 KiB, six messages or so.
fn big_zone() -> String {
    let mut zone = String::from("$TTL 60\n@ SOA ns hostmaster 7 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n");
    let filler = "x".repeat(100);
    for index in 0..3000 {
        zone.push_str(&format!("t{index} TXT \"{filler}\"\nt{index} MX 10 ns\n"));
    }
    zone
}

const TSIG_SECRET: &[u8] = b"a secret of thirty-two octets!!!";
/// When the transfers below happen (Unix seconds).
const NOW: u64 = 1_800_000_000;

/// The options of a stream answering at `now` (Unix seconds).
fn at(now: u64) -> ResponseOptions {
    ResponseOptions { now, ..ResponseOptions::default() }
}

/// big.test allowed to 127.0.0.0/8 with a request signed by `xfr-key`,
/// the server's only key.
fn tsig_snapshot() -> Snapshot {
    let zone = parse_zone_text("big.test", &big_zone(), "big.zone").unwrap();
    let mut snapshot =
        Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Settings::default() };
    snapshot.settings.tsig_keys.push(TsigKey::new(wire_name("xfr-key").into(), TsigAlgorithm::HmacSha256, TSIG_SECRET.into()));
    let mut snapshot = allowing_transfer(snapshot, "big.test");
    snapshot.settings.transfer_acls[0].keys.push(wire_name("xfr-key").into());
    snapshot
}

/// A key of domain's own TSIG implementation, the client's.
fn client_key(name: &str, secret: &[u8]) -> domain::tsig::Key {
    domain::tsig::Key::new(domain::tsig::Algorithm::Sha256, secret, name.parse().unwrap(), None, None).unwrap()
}

/// An AXFR query for big.test (with EDNS) signed by `key` at
/// `signed_at` with domain's TSIG, and the client's side of the exchange.
fn signed_axfr(key: &domain::tsig::Key, signed_at: u64) -> (Vec<u8>, domain::tsig::ClientSequence<&domain::tsig::Key>) {
    let mut builder = domain::base::MessageBuilder::new_vec();
    builder.header_mut().set_id(0x5151);
    let mut question = builder.question();
    question.push((domain::base::Name::<Vec<u8>>::vec_from_str("big.test").unwrap(), Rtype::AXFR)).unwrap();
    let mut additional = question.additional();
    // An OPT record, so that refusals say why.
    additional.opt(|_| Ok(())).unwrap();
    let sequence = domain::tsig::ClientSequence::request(key, &mut additional, Time48::from_u64(signed_at)).unwrap();
    (additional.finish(), sequence)
}

/// The responses to `packet` at `now`, as their bytes.
fn transfer_bytes(snapshot: &Snapshot, packet: &[u8], now: u64) -> Vec<Vec<u8>> {
    let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Stream };
    let mut messages = Vec::new();
    respond_transfer(&pharos_answer::parse_query(packet).unwrap(), &client, &at(now), snapshot, |message| messages.push(message.to_vec()));
    messages
}

/// The TSIG error of a response's TSIG record.
fn tsig_error(message: &Message<Vec<u8>>) -> Option<u16> {
    let additional = message.additional().unwrap().limit_to::<domain::rdata::tsig::Tsig<_, ParsedName<_>>>();
    additional.map(Result::unwrap).last().map(|record| record.data().error().to_int())
}

#[test]
fn a_signed_transfer_is_signed_in_every_message_as_domains_tsig_checks() {
    let snapshot = tsig_snapshot();
    let key = client_key("xfr-key", TSIG_SECRET);
    let (packet, mut sequence) = signed_axfr(&key, NOW);
    let messages = transfer_bytes(&snapshot, &packet, NOW + 10);
    assert!(messages.len() > 4);
    for message in messages {
        let mut message = Message::from_octets(message).unwrap();
        assert_eq!(message.header().rcode(), Rcode::NOERROR);
        sequence.answer(&mut message, Time48::from_u64(NOW + 10)).expect("a message signed rightly");
    }
    sequence.done().expect("the sequence ends signed");
    let unsigned = query("big.test", Rtype::AXFR.to_int(), None);
    let refused = Message::from_octets(transfer_bytes(&snapshot, &unsigned, NOW).remove(0)).unwrap();
    assert_eq!(refused.header().rcode(), Rcode::REFUSED, "the zone asks for the key");
}

#[test]
fn tsig_refusals_are_notauth_with_badkey_badsig_or_badtime() {
    let snapshot = tsig_snapshot();
    let refusal = |key: &domain::tsig::Key, signed_at: u64| {
        let (packet, _) = signed_axfr(key, signed_at);
        let messages = transfer_bytes(&snapshot, &packet, NOW);
        let first = Message::from_octets(messages[0].clone()).unwrap();
        (messages.len(), first.header().rcode(), tsig_error(&first), extended_error(&first))
    };
    assert_eq!(refusal(&client_key("other-key", TSIG_SECRET), NOW), (1, Rcode::NOTAUTH, Some(17), Some(18)), "BADKEY");
    assert_eq!(refusal(&client_key("xfr-key", b"not the secret"), NOW), (1, Rcode::NOTAUTH, Some(16), Some(18)), "BADSIG");
    assert_eq!(refusal(&client_key("xfr-key", TSIG_SECRET), NOW - 301), (1, Rcode::NOTAUTH, Some(18), Some(18)), "BADTIME");
    assert_eq!(refusal(&client_key("xfr-key", TSIG_SECRET), NOW + 300).1, Rcode::NOERROR, "within the fudge");
    // BADTIME is signed, with the request's time signed and the server's
    // time in Other Data, so that the client can tell. Its MAC is not
    // checked with domain's TSIG: domain 0.12 covers Other Data as 8
    // octets where RFC 8945 section 4.3.3 and the record have 6.
    let (packet, _) = signed_axfr(&client_key("xfr-key", TSIG_SECRET), NOW - 1000);
    let late = Message::from_octets(transfer_bytes(&snapshot, &packet, NOW).remove(0)).unwrap();
    let additional = late.additional().unwrap().limit_to::<domain::rdata::tsig::Tsig<_, ParsedName<_>>>();
    let tsig = additional.map(Result::unwrap).last().unwrap();
    let data = tsig.data();
    assert_eq!(
        (data.time_signed(), data.other_time(), data.mac().as_ref().len()),
        (Time48::from_u64(NOW - 1000), Some(Time48::from_u64(NOW)), 32)
    );
}

#[test]
fn a_signed_zone_is_transferred_with_a_signed_nsec_chain_and_a_malformed_tsig_is_formerr() {
    let messages = transfer(&allowing_transfer(signed_snapshot(), "example.test"), "example.test", Rtype::AXFR);
    assert_eq!(messages[0].header().rcode(), Rcode::NOERROR);
    let records: Vec<_> = messages.iter().flat_map(|message| message.answer().unwrap().map(Result::unwrap)).collect();
    let owners_of = |rtype: Rtype| -> Vec<String> {
        records.iter().filter(|record| record.rtype() == rtype).map(|record| record.owner().to_string()).collect()
    };
    let signed_nsec = |owner: &String| records.iter().any(|record| record.rtype() == Rtype::RRSIG && record.owner().to_string() == *owner);
    let nsecs = owners_of(Rtype::NSEC);
    assert!(nsecs.contains(&"ent.x.deep.example.test".to_string()) && !nsecs.contains(&"x.deep.example.test".to_string()), "{nsecs:?}");
    assert!(nsecs.iter().all(signed_nsec) && owners_of(Rtype::DNSKEY).len() == 1, "{nsecs:?}");
    // A TSIG record whose data stops after two octets.
    let mut packet = query("example.test", Rtype::AXFR.to_int(), Some((1232, 0, &[])));
    packet[11] = 2;
    packet.extend(b"\x07xfr-key\x00\x00\xfa\x00\xff\x00\x00\x00\x00\x00\x02\xab\xcd");
    let malformed = Message::from_octets(transfer_bytes(&allowing_transfer(snapshot(), "example.test"), &packet, NOW).remove(0)).unwrap();
    assert_eq!((malformed.header().rcode(), extended_error(&malformed)), (Rcode::FORMERR, Some(0)));
}

/// An IXFR query for big.test from a client whose SOA has `serial`.
fn ixfr(serial: u32) -> Vec<u8> {
    let mut packet = query("big.test", Rtype::IXFR.to_int(), None);
    packet[9] = 1;
    // Owner: the question's name; names in the data: the root.
    packet.extend([0xC0, 12, 0, 6, 0, 1, 0, 0, 0, 0, 0, 22, 0, 0]);
    packet.extend(serial.to_be_bytes());
    packet.extend([0; 16]);
    packet
}

#[test]
fn ixfr_gets_the_soa_alone_when_the_client_is_current_else_the_whole_zone() {
    let zone = parse_zone_text("big.test", &big_zone(), "big.zone").unwrap();
    let snapshot = Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Settings::default() };
    let snapshot = allowing_transfer(snapshot, "big.test");
    // The zone's serial is 7; 2^31 - 1 past it is still later (RFC 1982).
    for (serial, messages, record_count) in [(7, 1, 1), (8, 1, 1), (6, 7, 6004), (7u32.wrapping_add((1 << 31) - 1), 1, 1)] {
        let answers: Vec<Message<Vec<u8>>> =
            transfer_bytes(&snapshot, &ixfr(serial), NOW).into_iter().map(|message| Message::from_octets(message).unwrap()).collect();
        let count: usize = answers.iter().map(|message| records(message).len()).sum();
        assert_eq!((answers.len(), count), (messages, record_count), "client serial {serial}");
        assert!(records(&answers[0])[0].contains(" SOA ") && answers[0].header().rcode() == Rcode::NOERROR);
    }
}

/// big.test at serial 9, reached from 7 through two versions: 8 added
/// new.big.test A 192.0.2.8, 9 removed it and t0's TXT, and added new's
/// AAAA.
fn big_zone_at_serial_9() -> Snapshot {
    use pharos_zone::journal::Record;
    use pharos_zone::versions::{Served, file_records};
    let loaded = parse_zone_text("big.test", &big_zone(), "big.zone").unwrap();
    let records = file_records(&loaded);
    let new = |rtype: Rtype, rdata: &[u8]| Record {
        owner: wire_name("new.big.test").into(),
        rtype: rtype.to_int(),
        rdata: rdata.into(),
        ttl: 60,
    };
    let at_7 = Served::first(&loaded, records.clone(), Vec::new());
    let at_8 = at_7.next(&loaded, &records, vec![new(Rtype::A, &[192, 0, 2, 8])]).unwrap();
    let edited = parse_zone_text("big.test", &big_zone().replacen("t0 TXT", "; t0 TXT", 1), "big.zone").unwrap();
    let at_9 = at_8
        .next(&edited, &file_records(&edited), vec![new(Rtype::AAAA, &[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8])])
        .unwrap();
    let mut zone = edited.clone();
    at_9.apply_to(&mut zone);
    let snapshot = Snapshot { zones: ZoneSet::new(vec![zone]).unwrap().into(), routes: Default::default(), settings: Settings::default() };
    allowing_transfer(snapshot, "big.test")
}

/// Every record of the responses to an IXFR from `serial`, in order.
fn ixfr_records(snapshot: &Snapshot, serial: u32) -> Vec<String> {
    let messages = transfer_bytes(snapshot, &ixfr(serial), NOW);
    messages.iter().flat_map(|message| records(&Message::from_octets(message.clone()).unwrap())).collect()
}

#[test]
fn ixfr_from_a_journaled_serial_gets_the_condensed_difference() {
    let snapshot = big_zone_at_serial_9();
    let soa = |serial: u32| format!("big.test 60 SOA ns.big.test. hostmaster.big.test. {serial} 7200 3600 1209600 60");
    let from_7 = ixfr_records(&snapshot, 7);
    let t0 = format!("t0.big.test 60 TXT \"{}\"", "x".repeat(100));
    let expected = [soa(9), soa(7), t0.clone(), soa(9), "new.big.test 60 AAAA 2001:db8::8".into(), soa(9)];
    assert_eq!(from_7, expected, "8's A came and went: in neither list");
    let from_8 = ixfr_records(&snapshot, 8);
    assert_eq!(from_8.len(), 7, "{from_8:?}");
    assert_eq!(from_8[1..5], [soa(8), t0, "new.big.test 60 A 192.0.2.8".into(), soa(9)], "removed in wire order");
    assert_eq!(ixfr_records(&snapshot, 9), [soa(9)], "current");
    assert_eq!(ixfr_records(&snapshot, 6).len(), 6003, "a serial the journal never held: the whole zone");
    let transferred = |serial| {
        let client = Client { address: IpAddr::V4(Ipv4Addr::LOCALHOST), transport: Transport::Stream };
        respond_transfer(&pharos_answer::parse_query(&ixfr(serial)).unwrap(), &client, &at(NOW), &snapshot, |_| {}).sent.unwrap()
    };
    assert_eq!(transferred(7), Sent::Difference { from: 7, to: 9 });
    assert_eq!(transferred(9), Sent::Current { serial: 9 });
    assert_eq!(transferred(6), Sent::Whole { serial: 9 });
}
