//! DNS cookies (`[cookies]`, RFC 7873 with RFC 9018 server cookies) with
//! real clients: dig (BIND) and kdig (Knot) learn a server cookie, echo it
//! and are answered; a made-up one gets BADCOOKIE, after which dig retries
//! with the fresh cookie, as Knot DNS's cookies module does; a cookie
//! outlives a restart, its secret being in the store; and a client that echoes a good cookie is exempt from
//! response rate limiting in a network that is over its limit.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{free_port, start_at};

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
    let mut packet = common::query_bytes(1, "www.example.test", domain::base::iana::Rtype::A);
    packet[11] = 1;
    packet.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
    packet.extend(((4 + cookie.len()) as u16).to_be_bytes());
    packet.extend([0, 10]);
    packet.extend((cookie.len() as u16).to_be_bytes());
    packet.extend(cookie);
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
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(&query_with_cookie(cookie), server).unwrap();
    let mut buffer = [0u8; 4096];
    let len = socket.recv(&mut buffer).expect("a response");
    let message = domain::base::Message::from_octets(buffer[..len].to_vec()).unwrap();
    let opt = message.opt().expect("an OPT record");
    let option = opt.opt().iter::<domain::base::opt::UnknownOptData<_>>().map(Result::unwrap).find(|option| option.code().to_int() == 10);
    (message.opt_rcode().to_int(), option.map(|option| option.as_slice().to_vec()).unwrap_or_default())
}

/// Knot DNS with its cookies module, beside Pharos: the same answers to a
/// client cookie alone (a 24-octet reply with an RFC 9018 server cookie;
/// RFC 7873 section 5.2.3 leaves the RCODE to policy: Knot says BADCOOKIE,
/// Pharos answers, as BIND does), to the server cookie each made
/// (answered), and to a made-up one (BADCOOKIE with a fresh cookie).
#[test]
fn pharos_answers_cookies_as_knot_does() {
    let Some(knotd) = ["/usr/sbin/knotd", "/usr/bin/knotd"].into_iter().map(std::path::Path::new).find(|path| path.exists()) else {
        let message = "`knotd` is not installed (Debian package `knot`)";
        assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
        eprintln!("\n*** SKIP: {message}. ***\n");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(dir.path().join("example.test.zone"), common::ZONE).unwrap();
    let d = dir.path().display();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\ndatabase:\n  storage: \"{d}/db\"\n\
         mod-cookies:\n  - id: default\n    badcookie-slip: 1\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    global-module: mod-cookies/default\n\
         zone:\n  - domain: example.test\n    file: example.test.zone\n"
    );
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    let mut knot =
        Command::new(knotd).arg("-c").arg(dir.path().join("knot.conf")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let knot_address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    common::wait_until("knotd answers", || common::udp_query(knot_address, "www.example.test", domain::base::iana::Rtype::A).is_some());
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
    }
    let _ = knot.kill();
    let _ = knot.wait();
}
