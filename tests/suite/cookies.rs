//! DNS cookies (`[cookies]`, RFC 7873 with RFC 9018 server cookies) with
//! real clients: dig (BIND) and kdig (Knot) learn a server cookie, echo it
//! and are answered; a made-up one gets BADCOOKIE, after which dig retries
//! with the fresh cookie, as Knot DNS's cookies module does; over TCP the
//! cookie is given and a made-up one answered; a cookie
//! outlives a restart, its secret being in the store; a client that
//! echoes a good cookie is exempt from response rate limiting in a network
//! that is over its limit, and one with a bad cookie gets its BADCOOKIE
//! slipped whole, OPT record and fresh cookie included; errors carry a
//! cookie and an empty question asks for one alone; and beside Knot
//! DNS's mod-cookies and mod-rrl, the same cookies are accepted and the
//! same bursts limited and slipped alike.

use crate::common;

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{free_port, start_at};
use domain::base::Message;
use domain::base::iana::Rtype;

/// The cookie and status dig or kdig printed: `(cookie in hex, status)`.
fn cookie_and_status(output: &str) -> (String, String) {
    let field =
        |prefix: &str| output.lines().find_map(|line| line.trim_start_matches(';').trim_start().strip_prefix(prefix).map(str::to_string));
    let cookie = field("COOKIE: ").unwrap_or_default().split_whitespace().next().unwrap_or_default().to_lowercase();
    let header = output.lines().find(|line| line.contains("->>HEADER<<-")).unwrap_or_default();
    let status = header.split("status: ").nth(1).unwrap_or_default().split([',', ';']).next().unwrap_or_default().to_string();
    (cookie, status)
}

/// Runs a DNS client against `server`, one try and a 5 s timeout as it
/// spells them (`limits`); `None` (a loud skip) if it is not installed.
fn client(program: &str, package: &str, limits: [&str; 2], server: SocketAddr, args: &[&str]) -> Option<String> {
    if Command::new(program).arg("-v").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        let message = format!("`{program}` is not installed (Debian package `{package}`)");
        assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
        eprintln!("\n*** SKIP: {message}. ***\n");
        return None;
    }
    let port = server.port().to_string();
    let output = Command::new(program).args(["@127.0.0.1", "-p", &port]).args(limits).args(args).output().unwrap();
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn dig(server: SocketAddr, args: &[&str]) -> Option<String> {
    client("dig", "bind9-dnsutils", ["+tries=1", "+time=5"], server, args)
}

fn kdig(server: SocketAddr, args: &[&str]) -> Option<String> {
    client("kdig", "knot-dnsutils", ["+retry=0", "+timeout=5"], server, args)
}

fn start(extra: &str) -> common::Pharos {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    start_at(address, &format!("[store]\npath = \"state.sqlite\"\n[cookies]\n{extra}"), common::ZONE)
}

#[test]
fn dig_and_kdig_learn_a_server_cookie_echo_it_and_a_made_up_one_gets_badcookie() {
    let pharos = start("");
    let Some(first) = dig(pharos.address, &["+cookie", "www.example.test", "A"]) else { return };
    let (cookie, status) = cookie_and_status(&first);
    assert_eq!(status, "NOERROR", "{first}");
    assert_eq!(cookie.len(), 48, "8 octets of client cookie and 16 of server cookie: {first}");
    assert_eq!(&cookie[16..24], "01000000", "RFC 9018: version 1, reserved zero");
    assert!(first.contains("(good)"), "dig found its client cookie echoed: {first}");

    let echoed = dig(pharos.address, &[&format!("+cookie={cookie}"), "www.example.test", "A"]).unwrap();
    assert_eq!(cookie_and_status(&echoed).1, "NOERROR", "{echoed}");
    assert!(echoed.contains("192.0.2.2"), "{echoed}");
    let by_kdig = kdig(pharos.address, &[&format!("+cookie={cookie}"), "www.example.test", "A"]).unwrap();
    assert_eq!(cookie_and_status(&by_kdig).1, "NOERROR", "kdig echoing dig's cookie from the same address: {by_kdig}");

    let made_up = format!("{}01000000{}", &cookie[..16], "0".repeat(24));
    let refused = dig(pharos.address, &[&format!("+cookie={made_up}"), "+nobadcookie", "www.example.test", "A"]).unwrap();
    let (fresh, status) = cookie_and_status(&refused);
    assert_eq!(status, "BADCOOKIE", "{refused}");
    assert!(!refused.contains("192.0.2.2"), "no answer with BADCOOKIE: {refused}");
    assert_eq!(fresh.len(), 48, "BADCOOKIE carries a fresh server cookie: {refused}");
    let retried = dig(pharos.address, &[&format!("+cookie={made_up}"), "+badcookie", "www.example.test", "A"]).unwrap();
    assert!(retried.contains("BADCOOKIE, retrying"), "{retried}");
    assert_eq!(cookie_and_status(&retried).1, "NOERROR", "{retried}");
    assert!(retried.contains("192.0.2.2"), "{retried}");

    // The secret is the store's: a cookie made before a restart is good after it.
    let pharos = pharos.kill_and_restart();
    let after_restart = dig(pharos.address, &[&format!("+cookie={cookie}"), "www.example.test", "A"]).unwrap();
    assert_eq!(cookie_and_status(&after_restart).1, "NOERROR", "{after_restart}");
}

/// Over TCP the handshake has shown the client's address: dig and kdig
/// get a server cookie there too, and a made-up one is answered, with a
/// fresh cookie, not refused (as Knot DNS and NSD answer over TCP).
#[test]
fn over_tcp_a_query_gets_a_server_cookie_and_a_made_up_one_is_answered() {
    let pharos = start("");
    let Some(first) = dig(pharos.address, &["+tcp", "+cookie", "www.example.test", "A"]) else { return };
    let (cookie, status) = cookie_and_status(&first);
    assert_eq!((status.as_str(), cookie.len()), ("NOERROR", 48), "a client and a server cookie: {first}");
    assert!(first.contains("(good)"), "dig found its client cookie echoed: {first}");
    let echoed = dig(pharos.address, &[&format!("+cookie={cookie}"), "www.example.test", "A"]).unwrap();
    assert_eq!(cookie_and_status(&echoed).1, "NOERROR", "learnt over TCP, good over UDP: {echoed}");
    let made_up = format!("{}01000000{}", &cookie[..16], "0".repeat(24));
    let Some(answered) = kdig(pharos.address, &["+tcp", &format!("+cookie={made_up}"), "+nobadcookie", "www.example.test", "A"]) else {
        return;
    };
    let (fresh, status) = cookie_and_status(&answered);
    assert_eq!(status, "NOERROR", "{answered}");
    assert!(answered.contains("192.0.2.2"), "{answered}");
    assert!(fresh.len() == 48 && fresh != made_up, "a fresh server cookie: {answered}");
}

/// kdig's header flags and its ADDITIONAL count, from its `;; Flags:` line.
fn flags_and_additional(output: &str) -> (String, String) {
    let line = output.lines().find(|line| line.starts_with(";; Flags:")).unwrap_or_default();
    let flags = line.trim_start_matches(";; Flags:").split(';').next().unwrap_or_default().trim().to_string();
    let additional = line.split("ADDITIONAL: ").nth(1).unwrap_or_default().trim().to_string();
    (flags, additional)
}

/// kdig with a made-up server cookie, 15 at once from one network over a
/// response limit of 5 a second: the slipped BADCOOKIEs still read
/// BADCOOKIE (its upper RCODE bits are in the OPT record, which the slip
/// keeps; without it, BADCOOKIE, 23, reads as YXRRSET, 7) and carry the
/// fresh cookie that would get the client through, as Knot DNS's mod-rrl
/// slips them.
#[test]
fn kdig_with_a_bad_cookie_in_a_limited_network_gets_badcookie_slipped_with_its_opt() {
    let pharos = start("[rrl]\nrate = 5\nslip = 2\n");
    let made_up = format!("{}01000000{}", "0123456789abcdef", "0".repeat(24));
    let cookie = format!("+cookie={made_up}");
    let args = ["-b", "127.66.5.1", &cookie, "+nobadcookie", "+ignore", "www.example.test", "A"];
    let Some(first) = kdig(pharos.address, &args) else { return };
    assert_eq!(cookie_and_status(&first).1, "BADCOOKIE", "{first}");
    // The bucket holds five and refills five a second: of 15 at once, some
    // are limited and every other limited one slips; the dropped ones
    // wait out kdig's timeout. Another burst only if none slipped (the
    // machine too slow to send them within the bucket's second).
    let port = pharos.address.port().to_string();
    let burst = || -> Vec<String> {
        let kdigs: Vec<_> = (0..15)
            .map(|_| {
                Command::new("kdig")
                    .args(["@127.0.0.1", "-p", &port, "+retry=0", "+timeout=1"])
                    .args(args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        kdigs.into_iter().map(|kdig| String::from_utf8_lossy(&kdig.wait_with_output().unwrap().stdout).into_owned()).collect()
    };
    let slipped = (0..5)
        .find_map(|_| {
            let outputs = burst();
            let answered: Vec<&String> = outputs.iter().filter(|output| output.contains("->>HEADER<<-")).collect();
            for output in &answered {
                assert_eq!(cookie_and_status(output).1, "BADCOOKIE", "whole or slipped, BADCOOKIE: {output}");
            }
            answered.into_iter().find(|output| flags_and_additional(output).0.contains("tc")).cloned()
        })
        .expect("a BADCOOKIE response slipped");
    // AA as the answer had it: a BADCOOKIE is no authoritative answer
    // (Knot's slips set AA whatever they answer).
    assert_eq!(flags_and_additional(&slipped), ("qr tc rd".to_string(), "1".to_string()), "{slipped}");
    let (fresh, _) = cookie_and_status(&slipped);
    assert_eq!((fresh.len(), &fresh[..16]), (48, "0123456789abcdef"), "the client's cookie echoed with a fresh one: {slipped}");
}

/// Reads one response; whether it came truncated (TC=1), and its length.
fn receive(socket: &UdpSocket) -> (bool, usize) {
    let mut buffer = [0u8; 4096];
    let len = socket.recv(&mut buffer).expect("a response");
    (buffer[2] & 0x02 != 0, len)
}

/// A query for www.example.test A with a COOKIE option of `cookie`.
fn query_with_cookie(cookie: &[u8]) -> Vec<u8> {
    query_with_options(&[(10, cookie)])
}

/// A query for www.example.test A whose OPT record has `options` (code,
/// data) in this order.
fn query_with_options(options: &[(u16, &[u8])]) -> Vec<u8> {
    asking_with_options("www.example.test", Rtype::A, options)
}

/// A query for `name` `rtype` whose OPT record has `options`.
fn asking_with_options(name: &str, rtype: Rtype, options: &[(u16, &[u8])]) -> Vec<u8> {
    let mut packet = common::query_bytes(1, name, rtype);
    packet[11] = 1;
    let rdata: Vec<u8> =
        options.iter().flat_map(|(code, data)| [&code.to_be_bytes()[..], &(data.len() as u16).to_be_bytes(), data].concat()).collect();
    packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
    packet.extend((rdata.len() as u16).to_be_bytes());
    packet.extend(rdata);
    packet
}

#[test]
fn a_client_that_echoes_a_good_cookie_is_not_rate_limited() {
    let pharos = start("[rrl]\nrate = 1\nslip = 1\n");
    let socket = UdpSocket::bind("127.66.3.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let client_cookie = *b"pharos!!";
    socket.send_to(&query_with_cookie(&client_cookie), pharos.address).unwrap();
    let mut buffer = [0u8; 4096];
    let len = socket.recv(&mut buffer).unwrap();
    // The COOKIE option ends the response: client cookie, then server cookie.
    let server_cookie = buffer[len - 16..len].to_vec();
    assert_eq!(&buffer[len - 24..len - 16], &client_cookie);
    let good = [&client_cookie[..], &server_cookie].concat();
    for round in 0..20 {
        socket.send_to(&query_with_cookie(&good), pharos.address).unwrap();
        assert!(!receive(&socket).0, "query {round} with a good cookie was limited");
    }
    // Without it, the same network is over its limit of one a second:
    // of three queries in a row, one at least slips.
    let plain = common::query_bytes(2, "www.example.test", domain::base::iana::Rtype::A);
    let truncated = (0..3)
        .filter(|_| {
            socket.send_to(&plain, pharos.address).unwrap();
            receive(&socket).0
        })
        .count();
    assert!(truncated >= 1, "no query without a cookie was limited");
}

/// What a server says to a UDP query for www.example.test A carrying
/// `cookie`: its extended RCODE, and the COOKIE option of its response.
fn cookie_exchange(server: SocketAddr, cookie: &[u8]) -> (u16, Vec<u8>) {
    let (rcode, options) = options_exchange(server, &[(10, cookie)]);
    (rcode, options.into_iter().find(|(code, _)| *code == 10).map(|(_, data)| data).unwrap_or_default())
}

/// The extended RCODE and the OPT record's options (code, data) of a
/// server's reply to a query with `options`.
fn options_exchange(server: SocketAddr, options: &[(u16, &[u8])]) -> (u16, Vec<(u16, Vec<u8>)>) {
    options_of(&udp_exchange(server, &query_with_options(options)))
}

fn udp_exchange(server: SocketAddr, packet: &[u8]) -> Message<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(packet, server).unwrap();
    let mut buffer = [0u8; 4096];
    let len = socket.recv(&mut buffer).expect("a response");
    Message::from_octets(buffer[..len].to_vec()).unwrap()
}

fn tcp_exchange(server: SocketAddr, packet: &[u8]) -> Message<Vec<u8>> {
    let mut stream = std::net::TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    stream.write_all(&[&(packet.len() as u16).to_be_bytes()[..], packet].concat()).unwrap();
    common::read_frame(&mut stream).expect("a response")
}

/// The extended RCODE of `message` and its OPT record's options.
fn options_of(message: &Message<Vec<u8>>) -> (u16, Vec<(u16, Vec<u8>)>) {
    let opt = message.opt().expect("an OPT record");
    let options = opt.opt().iter::<domain::base::opt::UnknownOptData<_>>().map(Result::unwrap);
    (message.opt_rcode().to_int(), options.map(|option| (option.code().to_int(), option.as_slice().to_vec())).collect())
}

/// Knot DNS with its cookies module, beside Pharos: the same answers to a
/// client cookie alone (a 24-octet reply with an RFC 9018 server cookie;
/// RFC 7873 section 5.2.3 leaves the RCODE to policy: Knot says BADCOOKIE,
/// Pharos answers, as BIND does), to the server cookie each made
/// (answered), and to a made-up one (BADCOOKIE with a fresh cookie).
#[test]
fn pharos_answers_cookies_as_knot_does() {
    let Some(knot) = start_knot("", "mod-cookies/default") else { return };
    let knot_address = knot.address;
    let pharos = start("");

    let client_cookie = *b"compare!";
    for (server, rcode_to_client_cookie_alone) in [(knot_address, 23), (pharos.address, 0)] {
        let (rcode, first) = cookie_exchange(server, &client_cookie);
        assert_eq!((rcode, first.len()), (rcode_to_client_cookie_alone, 24), "{server}: client + server cookie");
        assert_eq!((&first[..8], &first[8..12]), (&client_cookie[..], &[1, 0, 0, 0][..]), "{server}: RFC 9018 version 1");
        assert_eq!(cookie_exchange(server, &first).0, 0, "{server}: its own cookie echoed is good");
        let made_up = [&client_cookie[..], &[1, 0, 0, 0], &first[12..16], &[0; 8]].concat();
        let (rcode, fresh) = cookie_exchange(server, &made_up);
        assert_eq!((rcode, fresh.len()), (23, 24), "{server}: BADCOOKIE with a fresh cookie");
        // RFC 7873 section 5.2.2: a COOKIE option of a length no cookie has.
        assert_eq!(malformed_cookie_rcode(server, &client_cookie[..5]), 1, "{server}: FORMERR");
    }
}

/// RFC 7873: a reply to a query with a COOKIE option carries one, errors
/// included (FORMERR to two questions over UDP, a refused transfer over
/// TCP, as NSD's do); and a query with no question and a COOKIE asks for a
/// server cookie alone (section 5.4: NOERROR, as NSD answers; the
/// differential fuzzer compares them).
#[test]
fn errors_carry_a_cookie_and_an_empty_question_gets_one() {
    let pharos = start("");
    let client_cookie: &[u8] = b"errors!!";
    let cookie_echoed = |message: &Message<Vec<u8>>| {
        let (rcode, options) = options_of(message);
        let cookie = options.into_iter().find(|(code, _)| *code == 10).map(|(_, data)| data).unwrap_or_default();
        (rcode, cookie.len(), cookie.starts_with(client_cookie))
    };
    let one_question = query_with_options(&[(10, client_cookie)]);
    let question_len = common::query_bytes(1, "www.example.test", Rtype::A).len() - 12;
    let mut two_questions = one_question.clone();
    two_questions.splice(12..12, one_question[12..12 + question_len].to_vec());
    two_questions[5] = 2;
    assert_eq!(cookie_echoed(&udp_exchange(pharos.address, &two_questions)), (1, 24, true), "FORMERR with a cookie");
    let mut no_question = one_question.clone();
    no_question.drain(12..12 + question_len);
    no_question[5] = 0;
    assert_eq!(cookie_echoed(&udp_exchange(pharos.address, &no_question)), (0, 24, true), "NOERROR with a cookie");
    assert_eq!(cookie_echoed(&tcp_exchange(pharos.address, &no_question)), (0, 24, true), "the same over TCP");
    let transfer = asking_with_options("example.test", Rtype::AXFR, &[(10, client_cookie)]);
    assert_eq!(cookie_echoed(&tcp_exchange(pharos.address, &transfer)), (5, 24, true), "REFUSED with a cookie");
}

/// Beside Knot DNS, what RFC 7873 leaves open: of two COOKIE options the
/// last counts (its client cookie is the one echoed), and the FORMERR to a
/// malformed one still answers the NSID the query asked for (RFC 5001).
#[test]
fn two_cookies_and_a_malformed_one_are_read_as_knot_reads_them() {
    let Some(knot) = start_knot("", "mod-cookies/default") else { return };
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let pharos = start_at(address, "nsid = \"pharos\"\n[store]\npath = \"state.sqlite\"\n[cookies]\n", common::ZONE);
    for server in [knot.address, pharos.address] {
        let (_, options) = options_exchange(server, &[(10, b"first!!!"), (10, b"second!!")]);
        let echoed: Vec<&[u8]> = options.iter().filter(|(code, _)| *code == 10).map(|(_, data)| &data[..8]).collect();
        assert_eq!(echoed, [b"second!!"], "{server}: one cookie echoed, the last one's");
        let (rcode, options) = options_exchange(server, &[(3, b""), (10, b"short")]);
        assert_eq!(rcode, 1, "{server}: FORMERR to a 5-octet cookie");
        assert!(options.iter().any(|(code, data)| *code == 3 && !data.is_empty()), "{server}: NSID answered: {options:?}");
    }
}

/// The RCODE a server gives to a query whose COOKIE option is `body`.
fn malformed_cookie_rcode(server: SocketAddr, body: &[u8]) -> u8 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(&query_with_cookie(body), server).unwrap();
    let mut buffer = [0u8; 4096];
    socket.recv(&mut buffer).expect("a response");
    buffer[3] & 0xF
}

/// A running knotd serving `common::ZONE`, killed when dropped.
struct Knot {
    child: std::process::Child,
    address: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts knotd on `common::ZONE` with the module sections `modules` and
/// the global modules `global`; None (a loud skip) if it is not installed.
fn start_knot(modules: &str, global: &str) -> Option<Knot> {
    let Some(knotd) = ["/usr/sbin/knotd", "/usr/bin/knotd"].into_iter().map(std::path::Path::new).find(|path| path.exists()) else {
        let message = "`knotd` is not installed (Debian package `knot`)";
        assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
        eprintln!("\n*** SKIP: {message}. ***\n");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(dir.path().join("example.test.zone"), common::ZONE).unwrap();
    let d = dir.path().display();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  nsid: knot\ndatabase:\n  storage: \"{d}/db\"\n\
         mod-cookies:\n  - id: default\n    badcookie-slip: 1\n{modules}\
         template:\n  - id: default\n    storage: \"{d}\"\n    global-module: [{global}]\n\
         zone:\n  - domain: example.test\n    file: example.test.zone\n"
    );
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    let child =
        Command::new(knotd).arg("-c").arg(dir.path().join("knot.conf")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let knot = Knot { child, address, _dir: dir };
    common::wait_until("knotd answers", || common::udp_query(address, "www.example.test", domain::base::iana::Rtype::A).is_some());
    Some(knot)
}

/// What a burst of queries from one address got back: the whole answers
/// and the slips, in the order they came; the rest were dropped.
struct Burst {
    whole: Vec<Vec<u8>>,
    slipped: Vec<Vec<u8>>,
}

/// Sends `queries` to `server` from `source` as fast as the socket takes
/// them, and reads what comes back until nothing has for two seconds (a
/// server starved of the CPU by a loaded machine may answer late: only
/// what it never sends may count as dropped).
fn burst(server: SocketAddr, source: &str, queries: &[Vec<u8>]) -> Burst {
    let socket = UdpSocket::bind((source, 0)).unwrap();
    for query in queries {
        socket.send_to(query, server).unwrap();
    }
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut replies = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(len) = socket.recv(&mut buffer) {
        replies.push(buffer[..len].to_vec());
    }
    assert!(replies.len() <= queries.len());
    let (slipped, whole) = replies.into_iter().partition(|reply| reply[2] & 0x02 != 0);
    Burst { whole, slipped }
}

/// A query for `name` A with an OPT record, DO set, and `options`.
fn edns_query(id: u16, name: &str, options: &[u8]) -> Vec<u8> {
    let mut packet = common::query_bytes(id, name, domain::base::iana::Rtype::A);
    packet[11] = 1;
    packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0x80, 0]);
    packet.extend((options.len() as u16).to_be_bytes());
    packet.extend(options);
    packet
}

/// A slip as two servers may agree on it: the header's flags and RCODE,
/// its counts, and its OPT record with the server cookie's 16 octets (its
/// time and hash) zeroed; not its ID or question.
fn slip_shape(slip: &[u8]) -> ([u8; 2], [u8; 8], Vec<u8>) {
    let mut question_end = 12;
    while slip[question_end] != 0 {
        question_end += 1 + usize::from(slip[question_end]);
    }
    let mut opt = slip[question_end + 5..].to_vec();
    if let Some(at) = opt.windows(4).position(|window| window == [0, 10, 0, 24]) {
        opt[at + 12..at + 28].fill(0);
    }
    ([slip[2], slip[3]], slip[4..12].try_into().unwrap(), opt)
}

const KNOT_RRL: &str = "mod-rrl:\n  - id: default\n    rate-limit: 5\n    slip: 2\n";

/// Knot DNS with mod-rrl and mod-cookies beside Pharos with `[rrl]` and
/// `[cookies]`, the same rate (5 a second) and slip (2), the same zone and
/// the same bursts of 40 from one address: an answer, NXDOMAINs for 40
/// different names (one class, the zone's, in both), and a made-up server
/// cookie (BADCOOKIE). Both limit each burst as one class, slip about
/// every other limited response and drop the rest; the slips are the
/// same bytes, but for what is said below.
///
/// Where they differ by design, and so the counts have a tolerance:
/// - Knot's bucket holds 4 seconds' worth (its RRL_CAPACITY) and is
///   refilled per whole second; Pharos's holds one second's worth,
///   refilled continuously: a burst gets 4 times the rate whole from Knot
///   (once more the rate if it straddles a second), the rate from Pharos.
/// - Knot slips each limited response with a chance of 1 in `slip`;
///   Pharos slips every `slip`th, so its count is exact.
/// - Knot sets AA in every slip; Pharos keeps the answer's flags, and a
///   BADCOOKIE is no authoritative answer.
/// - Pharos's BADCOOKIE says why in an Extended DNS Error (before the
///   cookie); Knot's says nothing.
#[test]
fn bursts_are_limited_and_slipped_as_knot_limits_and_slips_them() {
    let Some(knot) = start_knot(KNOT_RRL, "mod-cookies/default, mod-rrl/default") else { return };
    let pharos = start("[rrl]\nrate = 5\nslip = 2\n");
    const QUERIES: u16 = 40;
    let made_up = [&b"burst!!!"[..], &[1, 0, 0, 0], &[0; 12]].concat();
    let cookie_option = [&[0, 10, 0, made_up.len() as u8][..], &made_up].concat();
    let bursts: [(&str, Vec<Vec<u8>>); 3] = [
        ("an answer", (0..QUERIES).map(|id| edns_query(id, "www.example.test", &[])).collect()),
        ("NXDOMAIN", (0..QUERIES).map(|id| edns_query(id, &format!("nx-{id}.example.test"), &[])).collect()),
        ("BADCOOKIE", (0..QUERIES).map(|id| edns_query(id, "www.example.test", &cookie_option)).collect()),
    ];
    // Each burst from a source of its own: no bucket, or collision in the
    // table of buckets, is shared between bursts.
    for (index, (what, queries)) in bursts.iter().enumerate() {
        let source = format!("127.66.9.{}", index + 1);
        let knots = burst(knot.address, &source, queries);
        let ours = burst(pharos.address, &source, queries);
        let (knot_whole, our_whole) = (knots.whole.len(), ours.whole.len());
        assert!((20..=25).contains(&knot_whole), "{what}: Knot answers its 4 seconds' worth whole: {knot_whole}");
        assert!((5..=7).contains(&our_whole), "{what}: Pharos its one second's worth: {our_whole}");
        let our_limited = usize::from(QUERIES) - our_whole;
        assert_eq!(ours.slipped.len(), our_limited / 2, "{what}: Pharos slips every other limited one");
        // Binomial, 1 in 2 of 15 to 20: within 4 standard deviations.
        let knot_limited = usize::from(QUERIES) - knot_whole;
        assert!(knots.slipped.len().abs_diff(knot_limited / 2) <= 9, "{what}: Knot slipped {} of {knot_limited}", knots.slipped.len());

        let (knot_slip, our_slip) = (slip_shape(&knots.slipped[0]), slip_shape(&ours.slipped[0]));
        assert!(ours.slipped.iter().chain(&knots.slipped).all(|slip| slip_shape(slip).1 == our_slip.1), "{what}: slips alike");
        let ([knot_flags, knot_rcode], [our_flags, our_rcode]) = (knot_slip.0, our_slip.0);
        const AA: u8 = 0x04;
        assert_eq!((our_flags & !AA, our_rcode), (knot_flags & !AA, knot_rcode), "{what}: QR, TC, RD and the RCODE");
        assert_eq!(our_flags & AA == 0, *what == "BADCOOKIE", "{what}: AA as the answer has it");
        assert_eq!(knot_flags & AA, AA, "{what}: Knot sets AA in every slip");
        assert_eq!(our_slip.1, [0, 1, 0, 0, 0, 0, 0, 1], "{what}: one question, one OPT record");
        assert_eq!(our_slip.1, knot_slip.1);
        let (knot_opt, our_opt) = (&knot_slip.2, &our_slip.2);
        assert_eq!(our_opt[..9], knot_opt[..9], "{what}: payload size, extended RCODE, version and DO");
        if *what == "BADCOOKIE" {
            assert_eq!(our_opt[5], 1, "the upper bits of BADCOOKIE");
            let ede_len = 4 + 2 + "bad or expired server cookie".len();
            assert_eq!(our_opt[11..13], [0, 15], "Pharos: the Extended DNS Error first");
            assert_eq!(our_opt[11 + ede_len..], knot_opt[11..], "the cookie: the client's echoed, the server's 16 octets");
        } else {
            assert_eq!(our_opt, knot_opt, "{what}: the whole OPT record");
        }
    }
}
