//! TSIG on every query (RFC 8945), through the binary with real clients:
//! dig and kdig sign queries over UDP, TCP, and kdig over TLS, HTTPS and
//! QUIC too; an unknown key is NOTAUTH with BADKEY, a wrong secret BADSIG,
//! a MAC cut too short BADTRUNC (all unsigned), a clock moved past the
//! fudge (kdig under libfaketime) BADTIME, signed; a good key gets an
//! answer the client verifies, with each algorithm, cut MACs, a truncated
//! UDP answer and every query of one TCP connection included. Knot DNS
//! and NSD, given the same keys, refuse as Pharos does, and NSD signs a
//! REFUSED as Pharos does. The counts are in `/metrics`.
//!
//! Without dig, kdig, knotd, nsd or faketime the tests that need them print
//! SKIP and pass, unless CI is set, where they fail.

use crate::common;

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Pharos, free_port, read_frame, request, require, start_at, udp_query, wait_until};
use domain::base::iana::{Rcode, Rtype};
use domain::base::{Message, MessageBuilder, Name};
use domain::rdata::tsig::Time48;
use domain::tsig::{Algorithm, ClientTransaction, Key};
use pharos_wire::framing::framed;

const SECRET: &str = "c2VjcmV0IG9mIHRoZSB0c2lnIHRlc3RzIGlzIGhlcmUhIQ==";
const WRONG_SECRET: &str = "bm90IHRoZSBzZWNyZXQgUGhhcm9zIGhvbGRzISEhISE=";
const ALGORITHMS: [&str; 5] = ["hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"];
/// The zone both servers serve: a TXT RRset too large for 512 octets.
const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n\
                    big TXT \"big-01 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\"\n\
                    big TXT \"big-02 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\"\n\
                    big TXT \"big-03 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\"\n\
                    big TXT \"big-04 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\"\n\
                    big TXT \"big-05 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\"\n\
                    big TXT \"big-06 the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz\"\n";
const TOKEN: &str = "tsig-test-token";

/// The key for `algorithm`, named after it.
fn key_name(algorithm: &str) -> String {
    format!("{algorithm}-key")
}

/// Pharos with a key per algorithm, DNS over TLS, HTTPS and QUIC beside
/// UDP and TCP, and its control API (for `/metrics`).
struct Signed {
    pharos: Pharos,
    api: String,
    encrypted: SocketAddr,
    https: SocketAddr,
}

fn start() -> Signed {
    let keys: String = ALGORITHMS
        .iter()
        .map(|algorithm| format!("[[tsig_key]]\nname = \"{}\"\nalgorithm = \"{algorithm}\"\nsecret = \"{SECRET}\"\n", key_name(algorithm)))
        .collect();
    let encrypted: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let https: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let api = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "[control]\nlisten = \"{api}\"\ntoken = \"{TOKEN}\"\n\
         [tls]\nlisten = [\"{encrypted}\"]\nhttps_listen = [\"{https}\"]\nquic_listen = [\"{encrypted}\"]\n{keys}"
    );
    let pharos = start_at(format!("127.0.0.1:{}", free_port()).parse().unwrap(), &config, ZONE);
    Signed { pharos, api: format!("http://{api}"), encrypted, https }
}

/// What a client printed about one signed exchange.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    /// As the client names it (kdig names a TSIG error in its place).
    status: String,
    /// The response's TSIG record: its error and MAC length; `None`
    /// when the response had none.
    tsig: Option<(String, usize)>,
    /// The client found the response's signature wrong, or missing.
    complained: bool,
}

/// Reads dig's or kdig's output of one query.
fn said(output: &str) -> Said {
    let header = output.lines().find(|line| line.contains("->>HEADER<<-")).unwrap_or_default();
    let status = header.split("status: ").nth(1).map(|rest| rest.split([',', ';']).next().unwrap().to_string()).unwrap_or_default();
    let tsig = output.lines().skip_while(|line| !line.contains("TSIG PSEUDOSECTION")).nth(1).map(|line| {
        // TSIG, the algorithm, time, fudge, MAC size, the MAC (which dig
        // may print in pieces), the ID, the error.
        let mut fields = line.split_whitespace().skip_while(|field| *field != "TSIG").skip(4);
        let mac_len: usize = fields.next().unwrap().parse().unwrap();
        let errors = ["NOERROR", "BADSIG", "BADKEY", "BADTIME", "BADTRUNC"];
        let error = fields.find(|field| errors.contains(field)).unwrap_or("none");
        (error.to_string(), mac_len)
    });
    let complaints = ["Couldn't verify", "could not be validated", "tsig verify failure", "reply verification", "failed to verify"];
    Said { status, tsig, complained: complaints.iter().any(|complaint| output.contains(complaint)) }
}

/// What `client` (dig or kdig) printed for its query with `arguments`
/// to `server`, signed with `key` (`algorithm:name:secret`).
fn ask(client: &Path, server: SocketAddr, key: &str, arguments: &[&str]) -> String {
    run(Command::new(client), server, key, arguments)
}

fn run(mut command: Command, server: SocketAddr, key: &str, arguments: &[&str]) -> String {
    let output = command
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), "+timeout=5", "+retry=0", "-y", key])
        .args(arguments)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

fn good_key(algorithm: &str) -> String {
    format!("{algorithm}:{}:{SECRET}", key_name(algorithm))
}

/// A client's view of a signed answer it verified.
fn verified(status: &str, mac_len: usize) -> Said {
    Said { status: status.into(), tsig: Some(("NOERROR".into(), mac_len)), complained: false }
}

/// A client's view of an unsigned refusal with `error`, as dig names the
/// RCODE (NOTAUTH) or kdig (the TSIG error).
fn refused(status: &str, error: &str) -> Said {
    Said { status: status.into(), tsig: Some((error.into(), 0)), complained: true }
}

#[test]
fn dig_and_kdig_get_badkey_badsig_badtrunc_and_verified_answers_over_udp_and_tcp() {
    let (Some(dig), Some(kdig)) = (require("dig", "bind9-dnsutils"), require("kdig", "knot-dnsutils")) else { return };
    let signed = start();
    let server = signed.pharos.address;
    let unknown = format!("hmac-sha256:unknown-key:{SECRET}");
    let wrong = format!("hmac-sha256:hmac-sha256-key:{WRONG_SECRET}");
    for (client, notauth) in [(&dig, "NOTAUTH"), (&kdig, "")] {
        for transport in ["+notcp", "+tcp"] {
            let said = |key: &str| said(&ask(client, server, key, &[transport, "www.example.test", "A"]));
            let what = format!("{} {transport}", client.display());
            let status = |error: &'static str| if notauth.is_empty() { error } else { notauth };
            assert_eq!(said(&unknown), refused(status("BADKEY"), "BADKEY"), "{what}: an unknown key");
            assert_eq!(said(&wrong), refused(status("BADSIG"), "BADSIG"), "{what}: a wrong secret");
            assert_eq!(said(&good_key("hmac-sha256")), verified("NOERROR", 32), "{what}: the key");
        }
    }
    // dig cuts MACs as BIND keys name it: 128 bits is half of SHA-256's,
    // as short as RFC 8945 section 5.2.2.1 allows; 80 bits is shorter.
    let cut = |bits: u32| said(&ask(&dig, server, &format!("hmac-sha256-{bits}:hmac-sha256-key:{SECRET}"), &["www.example.test", "A"]));
    assert_eq!(cut(128), verified("NOERROR", 16), "answered with the MAC cut as the query's");
    assert_eq!(cut(80).tsig, Some(("BADTRUNC".into(), 0)));
    let metrics = request("GET", &format!("{}/metrics", signed.api), Some(TOKEN), None).1;
    let metrics = metrics.as_str().unwrap();
    for (outcome, count) in [("BADKEY", 4), ("BADSIG", 4), ("BADTRUNC", 1), ("verified", 5)] {
        assert!(metrics.contains(&format!("pharos_tsig_requests_total{{outcome=\"{outcome}\"}} {count}\n")), "{outcome}: {metrics}");
    }
}

#[test]
fn every_algorithm_signs_answers_that_dig_and_kdig_verify() {
    let (Some(dig), Some(kdig)) = (require("dig", "bind9-dnsutils"), require("kdig", "knot-dnsutils")) else { return };
    let signed = start();
    let mac_lens = [20, 28, 32, 48, 64];
    for (algorithm, mac_len) in ALGORITHMS.into_iter().zip(mac_lens) {
        for client in [&dig, &kdig] {
            let output = ask(client, signed.pharos.address, &good_key(algorithm), &["www.example.test", "A"]);
            assert_eq!(said(&output), verified("NOERROR", mac_len), "{algorithm}, {}: {output}", client.display());
        }
    }
}

#[test]
fn kdig_gets_signed_answers_over_tls_https_and_quic_and_one_kept_open_connection() {
    let Some(kdig) = require("kdig", "knot-dnsutils") else { return };
    let signed = start();
    let key = good_key("hmac-sha256");
    let kept_open = ["www.example.test", "A", "ns.example.test", "A", "example.test", "SOA"];
    for (server, transport) in [(signed.pharos.address, "+tcp"), (signed.encrypted, "+tls"), (signed.encrypted, "+quic")] {
        let output = ask(&kdig, server, &key, &[&[transport, "+keepopen"][..], &kept_open].concat());
        assert_eq!(output.matches("status: NOERROR").count(), 3, "{transport}: {output}");
        assert!(!said(&output).complained && output.matches("hmac-sha256. ").count() == 3, "{transport}, each signed: {output}");
    }
    let output = ask(&kdig, signed.https, &key, &["+https", "www.example.test", "A"]);
    assert_eq!(said(&output), verified("NOERROR", 32), "{output}");
    let unknown = ask(&kdig, signed.encrypted, &format!("hmac-sha256:unknown-key:{SECRET}"), &["+tls", "www.example.test", "A"]);
    assert_eq!(said(&unknown).tsig, Some(("BADKEY".into(), 0)), "{unknown}");
}

#[test]
fn a_truncated_udp_answer_is_signed_and_so_is_a_refusal_for_another_reason() {
    let (Some(dig), Some(kdig)) = (require("dig", "bind9-dnsutils"), require("kdig", "knot-dnsutils")) else { return };
    let signed = start();
    let key = good_key("hmac-sha256");
    let truncated = ask(&dig, signed.pharos.address, &key, &["+ignore", "+bufsize=600", "big.example.test", "TXT"]);
    assert!(truncated.contains(" tc") && truncated.contains("MSG SIZE  rcvd:"), "{truncated}");
    assert_eq!(said(&truncated), verified("NOERROR", 32), "{truncated}");
    let truncated = ask(&kdig, signed.pharos.address, &key, &["+ignore", "+noedns", "big.example.test", "TXT"]);
    assert!(truncated.contains(" tc"), "{truncated}");
    assert_eq!(said(&truncated), verified("NOERROR", 32), "{truncated}");
    // RFC 8945 section 5.3: a response to a request whose TSIG checked out is signed, whatever it says.
    let elsewhere = ask(&dig, signed.pharos.address, &key, &["nowhere.example.org", "A"]);
    assert_eq!(said(&elsewhere), verified("REFUSED", 32), "{elsewhere}");
}

#[test]
fn kdig_with_its_clock_moved_past_the_fudge_gets_badtime_signed() {
    let (Some(kdig), Some(faketime)) = (require("kdig", "knot-dnsutils"), require("faketime", "faketime")) else { return };
    let signed = start();
    let shifted = |shift: &str| {
        let mut command = Command::new(&faketime);
        command.args(["-f", shift]).arg(&kdig);
        said(&run(command, signed.pharos.address, &good_key("hmac-sha256"), &["www.example.test", "A"]))
    };
    let late = shifted("-1000s");
    assert_eq!(late.tsig, Some(("BADTIME".into(), 32)), "signed, with the server's time: {late:?}");
    assert_eq!(shifted("-200s"), verified("NOERROR", 32), "within the fudge");
}

#[test]
fn every_query_on_one_tcp_connection_gets_its_own_signed_answer() {
    let signed = start();
    let key = sha256_key();
    let now = Time48::now();
    let mut stream = TcpStream::connect(signed.pharos.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let names = ["www.example.test", "ns.example.test", "example.test"];
    let mut transactions = Vec::new();
    let mut pipelined = Vec::new();
    for (id, name) in names.into_iter().enumerate() {
        let (query, transaction) = signed_query(id as u16 + 1, name, &key, now);
        transactions.push(transaction);
        pipelined.extend(framed(&query));
    }
    std::io::Write::write_all(&mut stream, &pipelined).unwrap();
    for (index, transaction) in transactions.iter().enumerate() {
        let mut response = read_frame(&mut stream).unwrap();
        assert_eq!((response.header().id(), response.header().rcode()), (index as u16 + 1, Rcode::NOERROR));
        transaction.answer(&mut response, Time48::now()).unwrap_or_else(|error| panic!("answer {index}: {error}"));
    }
}

/// A query signed rightly whose TSIG record is then put where RFC 8945
/// section 5.1 forbids it: before an OPT record, or in the authority section.
fn misplaced_tsig_records() -> [(Vec<u8>, &'static str); 2] {
    let (query, _) = signed_query(1, "www.example.test", &sha256_key(), Time48::now());
    let mut before_opt = query.clone();
    before_opt.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
    before_opt[11] += 1;
    let mut in_authority = query;
    in_authority[8..12].copy_from_slice(&[0, 1, 0, 0]);
    [(before_opt, "a TSIG record before the OPT record"), (in_authority, "a TSIG record in the authority section")]
}

fn sha256_key() -> Key {
    Key::new(Algorithm::Sha256, &base64_secret(), "hmac-sha256-key".parse().unwrap(), None, None).unwrap()
}

/// A query for `name`'s A records with `id`, signed by `key` at `now`
/// with domain's TSIG, and the client's side of the exchange.
fn signed_query<'k>(id: u16, name: &str, key: &'k Key, now: Time48) -> (Vec<u8>, ClientTransaction<&'k Key>) {
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(id);
    let mut question = builder.question();
    question.push((Name::<Vec<u8>>::vec_from_str(name).unwrap(), Rtype::A)).unwrap();
    let mut additional = question.additional();
    let transaction = ClientTransaction::request(key, &mut additional, now).unwrap();
    (additional.finish(), transaction)
}

#[test]
fn a_signed_query_over_the_response_limit_is_slipped_signed_and_dig_retries_over_tcp() {
    let Some(dig) = require("dig", "bind9-dnsutils") else { return };
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let key_table = format!("[[tsig_key]]\nname = \"hmac-sha256-key\"\nsecret = \"{SECRET}\"\n");
    let _pharos = start_at(address, &format!("{key_table}[rrl]\nrate = 1\nslip = 1\n"), ZONE);
    let forged = UdpSocket::bind("127.66.3.1:0").unwrap();
    forged.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let key = sha256_key();
    let mut buffer = [0u8; 4096];
    // The bucket holds one response and refills in a second: a round in
    // which that second passed before dig asked proves nothing, so there
    // are a few rounds, and one must show the retry.
    let retried = (0..5).any(|_| {
        for id in 1..=3 {
            let (query, transaction) = signed_query(id, "www.example.test", &key, Time48::now());
            forged.send_to(&query, address).unwrap();
            let len = forged.recv(&mut buffer).expect("a response or a slip");
            let mut response = Message::from_octets(buffer[..len].to_vec()).unwrap();
            transaction.answer(&mut response, Time48::now()).unwrap_or_else(|error| panic!("response {id}: {error}"));
            assert!(id < 3 || response.header().tc(), "the third response in a row to one network slips, signed");
        }
        let output = Command::new(&dig)
            .args(["-b", "127.66.3.9", "@127.0.0.1", "-p", &address.port().to_string(), "+tries=1", "+time=5", "-y"])
            .args([&good_key("hmac-sha256"), "www.example.test", "A"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(said(&text), verified("NOERROR", 32), "dig has its answer either way: {text}");
        text.contains("Truncated, retrying in TCP mode")
    });
    assert!(retried, "dig never saw a slipped response");
}

fn base64_secret() -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(SECRET).unwrap()
}

/// A reference server on loopback, stopped when dropped.
struct Reference {
    child: Child,
    address: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory holding the zone, and a free address.
fn reference_dir(name: &str) -> (tempfile::TempDir, SocketAddr) {
    let dir = tempfile::Builder::new().prefix(&format!("tsig-{name}-")).tempdir().unwrap();
    std::fs::write(dir.path().join("example.test.zone"), ZONE).unwrap();
    (dir, format!("127.0.0.1:{}", free_port()).parse().unwrap())
}

/// Runs `command` (a server on `address` from `dir`) until it answers.
fn run_reference(mut command: Command, dir: tempfile::TempDir, address: SocketAddr) -> Reference {
    let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let server = Reference { child, address, _dir: dir };
    wait_until(&format!("{command:?} answers"), || udp_query(server.address, "www.example.test", Rtype::A).is_some());
    server
}

/// knotd serving the zone, with the same keys, which an ACL lets sign
/// queries (without one, Knot DNS knows no key for a query).
fn start_knot(knotd: &Path) -> Reference {
    let (dir, address) = reference_dir("knot");
    let d = dir.path().display();
    let keys: String = ALGORITHMS
        .iter()
        .map(|algorithm| format!("  - id: {}\n    algorithm: {algorithm}\n    secret: {SECRET}\n", key_name(algorithm)))
        .collect();
    let key_ids: Vec<String> = ALGORITHMS.iter().map(|algorithm| key_name(algorithm)).collect();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: {}@{}\n  background-workers: 1\n\
         key:\n{keys}acl:\n  - id: signed\n    key: [{}]\n    action: query\n\
         database:\n  storage: \"{d}/db\"\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n\
         zone:\n  - domain: example.test.\n    file: example.test.zone\n    acl: signed\n",
        address.ip(),
        address.port(),
        key_ids.join(", ")
    );
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    let mut command = Command::new(knotd);
    command.arg("-c").arg(dir.path().join("knot.conf"));
    run_reference(command, dir, address)
}

/// nsd serving the zone in the foreground, with the same keys (NSD
/// checks every signed query against them).
fn start_nsd(nsd: &Path) -> Reference {
    let (dir, address) = reference_dir("nsd");
    let d = dir.path().display();
    let keys: String = ALGORITHMS
        .iter()
        .map(|algorithm| format!("key:\n  name: {}\n  algorithm: {algorithm}\n  secret: \"{SECRET}\"\n", key_name(algorithm)))
        .collect();
    let conf = format!(
        "server:\n  ip-address: {0}@{1}\n  port: {1}\n  do-ip6: no\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n\
         \x20 database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  pidfile: \"{d}/nsd.pid\"\n\
         {keys}zone:\n  name: example.test\n  zonefile: example.test.zone\n",
        address.ip(),
        address.port()
    );
    std::fs::write(dir.path().join("nsd.conf"), conf).unwrap();
    let mut command = Command::new(nsd);
    command.arg("-d").arg("-c").arg(dir.path().join("nsd.conf"));
    run_reference(command, dir, address)
}

#[test]
fn nsd_signs_a_refusal_for_a_name_in_no_zone_and_refuses_keys_as_pharos_does() {
    let (Some(dig), Some(nsd)) = (require("dig", "bind9-dnsutils"), require("nsd", "nsd")) else { return };
    let signed = start();
    let nsd = start_nsd(&nsd);
    let cases = [
        (good_key("hmac-sha256"), "nowhere.example.org", "REFUSED for a name in no zone, signed (RFC 8945 section 5.3)"),
        (good_key("hmac-sha512"), "www.example.test", "the key"),
        (format!("hmac-sha256:unknown-key:{SECRET}"), "www.example.test", "an unknown key"),
        (format!("hmac-sha256:hmac-sha256-key:{WRONG_SECRET}"), "www.example.test", "a wrong secret"),
    ];
    for (key, name, what) in cases {
        for transport in ["+notcp", "+tcp"] {
            let arguments = [transport, name, "A"];
            let (ours, theirs) =
                (said(&ask(&dig, signed.pharos.address, &key, &arguments)), said(&ask(&dig, nsd.address, &key, &arguments)));
            assert_eq!(ours, theirs, "{what}, {transport}");
        }
    }
}

#[test]
fn knot_refuses_signed_queries_as_pharos_does() {
    let (Some(dig), Some(kdig), Some(knotd)) =
        (require("dig", "bind9-dnsutils"), require("kdig", "knot-dnsutils"), require("knotd", "knot"))
    else {
        return;
    };
    let signed = start();
    let knot = start_knot(&knotd);
    let cases = [
        (format!("hmac-sha256:unknown-key:{SECRET}"), "an unknown key"),
        (format!("hmac-sha512:hmac-sha256-key:{SECRET}"), "a known key's name with another algorithm"),
        (format!("hmac-sha1:hmac-sha1-key:{WRONG_SECRET}"), "a wrong secret"),
        (good_key("hmac-sha384"), "the key"),
    ];
    for (misplaced, what) in misplaced_tsig_records() {
        let answer = |server| {
            let response = common::Asked::new(server).ask(&misplaced);
            let signed = response.additional().unwrap().any(|record| record.unwrap().rtype() == Rtype::TSIG);
            (response.header().rcode(), signed)
        };
        assert_eq!(answer(signed.pharos.address), (Rcode::FORMERR, false), "{what}");
        assert_eq!(answer(signed.pharos.address), answer(knot.address), "{what}");
    }
    for (key, what) in &cases {
        for client in [&dig, &kdig] {
            for transport in ["+notcp", "+tcp"] {
                let arguments = [transport, "www.example.test", "A"];
                let (ours, theirs) =
                    (said(&ask(client, signed.pharos.address, key, &arguments)), said(&ask(client, knot.address, key, &arguments)));
                assert_eq!(ours, theirs, "{what}, {} {transport}", client.display());
            }
        }
    }
}
