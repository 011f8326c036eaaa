//! Signed zones through the binary: keys made with `pharos key generate`,
//! a zone served with `dnssec = true`, and two validators, BIND's `delv`
//! and Unbound's `unbound-host`, validating its answers (positive,
//! wildcard, NODATA, and names that do not exist, by compact denial) from
//! a trust anchor made of the DS the key command printed, for both
//! algorithms and both key layouts. Answers to DO=0
//! queries are compared byte for byte with those of the same zone unsigned.
//! Answers routed by a service's policy validate too, in every order the
//! policy gives, and so does the NODATA of a service whose replicas are all
//! down. A zone marked `dnssec = true` without keys does not start. The CD
//! bit is cleared in signed answers, as Knot DNS clears it when it signs
//! the same zone (RFC 4035 section 3.1.6: an authoritative server SHOULD).
//! Beside knotd signing the same zone with its own keys, signed answers
//! agree record for record where the two designs meet (positive answers,
//! NODATA, a referral, DS at the cut, the keys), all but what each
//! signer's keys make its own. A signed zone transferred by AXFR passes
//! ldns-verify-zone.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::declarations::Declarations;
use common::{Pharos, free_port, spawn_with, udp_query, wait_until};
use domain::base::iana::Rtype;

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\n MX 10 mail\nns A 192.0.2.1\nmail A 192.0.2.3\n\
www CNAME @\n@ A 192.0.2.2\n*.apps A 192.0.2.4\ntext TXT \"Mixed Case\"\nlab NS ns.lab\nns.lab A 192.0.2.99\n";

/// A directory with ZONE and a config serving it signed on `address`,
/// keeping state (and keys) in a store there, with the services of
/// [`services`]; the config's path.
fn signed_config(dir: &Path, address: SocketAddr) -> std::path::PathBuf {
    std::fs::write(dir.join("example.test.zone"), ZONE).unwrap();
    let config = dir.join("pharos.toml");
    let text = format!(
        "[server]\nlisten = [\"{address}\"]\nthreads = 1\nrandom_seed = 1\n[store]\npath = \"state.db\"\n\
         [[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\ndnssec = true\n\
         allow_transfer = [\"127.0.0.1/32\"]\n{}",
        services()
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// Serves ZONE from a config whose store keeps the zone's keys, made with
/// `key_args`; the server and the DS records `pharos key` printed.
fn serve_signed(key_args: &[&str]) -> (Pharos, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = signed_config(dir.path(), address);
    let zone_file = dir.path().join("example.test.zone");
    let generated = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["key", "generate", "example.test", "--config"])
        .arg(&config)
        .args(key_args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(generated.status.success(), "pharos key generate: {}", String::from_utf8_lossy(&generated.stderr));
    let ds = String::from_utf8(generated.stdout).unwrap().lines().filter(|line| line.contains(" DS ")).map(str::to_string).collect();
    let log_file = dir.path().join("pharos.log");
    let child = spawn_with(&config, &log_file, |command| {
        command.current_dir(dir.path());
    });
    let pharos = Pharos { child, address, zone_file, log_file, config, _dir: dir };
    wait_until("the signed server answers", || udp_query(pharos.address, "www.example.test", Rtype::A).is_some());
    (pharos, ds)
}

/// What `command` printed, or None (with a loud SKIP, a failure under CI)
/// when it cannot run: `package` has it.
fn said(command: &mut Command, package: &str) -> Option<String> {
    match command.output() {
        Ok(output) => Some(format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))),
        Err(error) => {
            let message = format!("{command:?} cannot run ({error}): install the Debian package {package}");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
            eprintln!("SKIP: {message}");
            None
        }
    }
}

/// `delv`'s verdict on NAME TYPE asked of `server`, trusting the
/// trust-anchors file `anchors`, over TCP (unbound-host asks over UDP).
fn delv(server: SocketAddr, anchors: &Path, name: &str, rtype: &str) -> Option<String> {
    let mut command = Command::new("delv");
    command.arg(format!("@{}", server.ip())).args(["-p", &server.port().to_string(), "-a"]).arg(anchors).args([
        "+root=example.test",
        "+nomtrace",
        "+tcp",
        name,
        rtype,
    ]);
    said(&mut command, "bind9-dnsutils")
}

/// Unbound's configuration asking `server` for example.test, trusting `ds`
/// (RFC 6761 makes .test a local zone by default: not here).
fn unbound_config(server: SocketAddr, ds: &[String]) -> String {
    let anchors: String = ds.iter().map(|line| format!("  trust-anchor: \"{line}\"\n")).collect();
    format!(
        "server:\n  do-not-query-localhost: no\n  local-zone: \"test.\" nodefault\n{anchors}\
         stub-zone:\n  name: \"example.test\"\n  stub-addr: {}@{}\n",
        server.ip(),
        server.port()
    )
}

/// `unbound-host`'s verdict on NAME TYPE with the configuration `config`.
fn unbound_host(config: &Path, name: &str, rtype: &str) -> Option<String> {
    said(Command::new("unbound-host").arg("-C").arg(config).args(["-v", "-t", rtype, name]), "unbound-host")
}

/// delv's trust-anchors statement for the DS lines `pharos key` printed.
fn anchors(ds: &[String]) -> String {
    let statements: String = ds
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [tag, algorithm, digest_type, digest] = fields[fields.len() - 4..] else { unreachable!() };
            format!("  example.test. static-ds {tag} {algorithm} {digest_type} \"{digest}\";\n")
        })
        .collect();
    format!("trust-anchors {{\n{statements}}};\n")
}

/// app.example.test: round robin over three IPv4 replicas and one IPv6;
/// v4.example.test: one IPv4 replica only; down.example.test: its one
/// replica down, answered NODATA.
fn services() -> String {
    Declarations::new()
        .service("app.example.test")
        .policy("round-robin")
        .line("ttl = 30")
        .replica("a", "192.0.2.31")
        .replica("b", "192.0.2.32")
        .replica("c", "192.0.2.33")
        .replica("d", "2001:db8::34")
        .service("v4.example.test")
        .policy("round-robin")
        .replica("a", "192.0.2.41")
        .service("down.example.test")
        .policy("round-robin")
        .line("when_all_down = \"nodata\"")
        .replica("a", "192.0.2.51")
        .line("down = true")
        .toml()
}

#[test]
fn validators_accept_signed_answers_and_denials() {
    let layouts: [&[&str]; 2] = [&["--algorithm", "ecdsap256sha256"], &["--algorithm", "ed25519", "--ksk-zsk"]];
    for key_args in layouts {
        let (pharos, ds) = serve_signed(key_args);
        assert!(!ds.is_empty(), "pharos key printed no DS");
        let anchor_file = pharos._dir.path().join("anchors.conf");
        std::fs::write(&anchor_file, anchors(&ds)).unwrap();
        let unbound_file = pharos._dir.path().join("unbound.conf");
        std::fs::write(&unbound_file, unbound_config(pharos.address, &ds)).unwrap();
        let cases = [
            ("example.test", "SOA", "fully validated"),
            ("example.test", "DNSKEY", "fully validated"),
            ("www.example.test", "A", "fully validated"),
            ("Text.Example.Test", "TXT", "fully validated"),
            ("mail.example.test", "A", "fully validated"),
            ("x.apps.example.test", "A", "fully validated"),
            ("mail.example.test", "AAAA", "negative response, fully validated"),
            ("www.example.test", "AAAA", "fully validated"),
            ("x.apps.example.test", "MX", "negative response, fully validated"),
            ("nope.example.test", "A", "negative response, fully validated"),
            ("deep.nope.example.test", "TXT", "negative response, fully validated"),
            // Routed: round robin turns the order at every query.
            ("app.example.test", "A", "fully validated"),
            ("app.example.test", "A", "fully validated"),
            ("app.example.test", "A", "fully validated"),
            ("app.example.test", "AAAA", "fully validated"),
            ("v4.example.test", "A", "fully validated"),
            ("app.example.test", "TXT", "negative response, fully validated"),
            ("v4.example.test", "AAAA", "negative response, fully validated"),
            // Its NSEC lists A, which it has when the replica is up: not now.
            ("down.example.test", "A", "negative response, fully validated"),
        ];
        for (name, rtype, verdict) in cases {
            let Some(said) = delv(pharos.address, &anchor_file, name, rtype) else { return };
            assert!(said.contains(verdict), "{key_args:?} {name} {rtype}: expected {verdict:?}, delv said:\n{said}");
            // Unbound says "(secure)" after each address, or after "has no ...".
            let Some(said) = unbound_host(&unbound_file, name, rtype) else { return };
            let all_secure = said.lines().all(|line| line.ends_with("(secure)"));
            assert!(all_secure && !said.is_empty(), "{key_args:?} {name} {rtype}: unbound-host said:\n{said}");
        }
    }
}

/// The raw response to NAME TYPE without EDNS, and with EDNS but DO=0.
fn raw_answers(server: SocketAddr, name: &str, rtype: Rtype) -> Vec<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let plain = common::query_bytes(7, name, rtype);
    let with_edns = common::ecs_query(7, name, rtype, None);
    [plain, with_edns]
        .iter()
        .map(|query| {
            socket.send_to(query, server).unwrap();
            let mut buf = vec![0; 4096];
            let len = socket.recv(&mut buf).expect("an answer");
            buf.truncate(len);
            buf
        })
        .collect()
}

#[test]
fn do_zero_answers_are_those_of_the_unsigned_zone() {
    let (signed, _) = serve_signed(&[]);
    let unsigned = common::start_with("", ZONE);
    let questions = [
        ("example.test", Rtype::SOA),
        ("example.test", Rtype::NS),
        ("example.test", Rtype::ANY),
        ("www.example.test", Rtype::A),
        ("www.example.test", Rtype::AAAA),
        ("x.apps.example.test", Rtype::A),
        ("x.apps.example.test", Rtype::TXT),
        ("nope.example.test", Rtype::A),
        ("host.lab.example.test", Rtype::A),
        ("lab.example.test", Rtype::DS),
        ("text.example.test", Rtype::NSEC),
    ];
    for (name, rtype) in questions {
        assert_eq!(raw_answers(signed.address, name, rtype), raw_answers(unsigned.address, name, rtype), "{name} {rtype}");
    }
}

#[test]
fn a_signed_zone_without_keys_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = signed_config(dir.path(), format!("127.0.0.1:{}", free_port()).parse().unwrap());
    let output =
        Command::new(env!("CARGO_BIN_EXE_pharos")).args(["serve", "--config"]).arg(&config).current_dir(dir.path()).output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a signed zone without keys served");
    assert!(said.contains("zone example.test") && said.contains("run `pharos key generate` first"), "{said}");
}

/// A query for NAME TYPE with DO=1 and the CD and AD bits set.
fn checking_disabled_query(name: &str, rtype: Rtype) -> Vec<u8> {
    let mut query = common::ecs_query(9, name, rtype, None);
    query[3] |= CD | AD;
    let flags_at = query.len() - 4;
    query[flags_at] |= 0x80;
    query
}

/// The CD bit, in the second octet of the header's flags.
const CD: u8 = 0x10;
/// The AD bit, beside it.
const AD: u8 = 0x20;

/// The header's second flags octet of the answer `server` gives `query`.
fn second_flags(server: SocketAddr, query: &[u8]) -> u8 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(query, server).unwrap();
    let mut buf = [0; 4096];
    let len = socket.recv(&mut buf).expect("an answer");
    assert!(len >= 12, "a header");
    buf[3]
}

/// knotd, stopped when dropped.
struct Knot {
    child: Child,
    address: SocketAddr,
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// knotd serving ZONE signed by itself (onlinesign's sibling, automatic
/// signing with its default policy), from files in `dir` (its log in
/// knot.log); None (with a loud SKIP, a failure under CI) without
/// Debian's knot.
fn knot_signing(dir: &Path) -> Option<Knot> {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    std::fs::write(dir.join("example.test.zone"), ZONE).unwrap();
    // Knot 3.2 makes neither its database's directory nor its keys'.
    for made in ["db", "keys"] {
        std::fs::create_dir(dir.join(made)).unwrap();
    }
    let d = dir.display();
    let config = format!(
        "server:\n  rundir: \"{d}\"\n  listen: {}@{}\n  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n\
         database:\n  storage: \"{d}/db\"\n  kasp-db: \"{d}/keys\"\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n\
         zone:\n  - domain: example.test\n    file: example.test.zone\n    dnssec-signing: on\n",
        address.ip(),
        address.port()
    );
    std::fs::write(dir.join("knot.conf"), config).unwrap();
    let mut command = Command::new("knotd");
    let log = std::fs::File::create(dir.join("knot.log")).unwrap();
    command.arg("-c").arg(dir.join("knot.conf")).stdout(Stdio::null()).stderr(log);
    said(Command::new("knotd").arg("--version"), "knot")?;
    let knot = Knot { child: command.spawn().unwrap(), address };
    wait_until("knotd answers", || udp_query(address, "example.test", Rtype::SOA).is_some_and(|answer| answer.header().aa()));
    Some(knot)
}

#[test]
fn signed_answers_clear_the_cd_bit_as_knot_does() {
    let (pharos, _) = serve_signed(&[]);
    let knot_dir = tempfile::tempdir().unwrap();
    let Some(knot) = knot_signing(knot_dir.path()) else { return };
    let questions = [
        ("example.test", Rtype::SOA),
        ("www.example.test", Rtype::A),
        ("mail.example.test", Rtype::AAAA),
        ("nope.example.test", Rtype::A),
        ("host.lab.example.test", Rtype::A),
    ];
    for (name, rtype) in questions {
        let query = checking_disabled_query(name, rtype);
        let (ours, knots) = (second_flags(pharos.address, &query), second_flags(knot.address, &query));
        assert_eq!(ours & (CD | AD), knots & (CD | AD), "{name} {rtype}: CD and AD as Knot sets them");
        assert_eq!(ours & CD, 0, "{name} {rtype}: CD cleared");
    }
    // A routed answer, which Knot has no counterpart of, too.
    assert_eq!(second_flags(pharos.address, &checking_disabled_query("app.example.test", Rtype::A)) & CD, 0);
}

/// The answer `server` gives NAME TYPE with DO=1 over UDP, as comparable
/// lines: the RCODE and AA, then each record but the OPT as "SECTION
/// owner ttl TYPE data", where what two signers with their own keys
/// cannot share is left out: the SOA serial (Knot increments it when it
/// signs), an RRSIG's algorithm, times, key tag and
/// signature (its type covered, labels, original TTL and signer stay), a
/// DNSKEY's data, an NSEC's next name (Knot's chain names the next owner,
/// Pharos's compact denial the owner's successor: the types stay). Sorted
/// within each section.
fn signed_summary(server: SocketAddr, name: &str, rtype: Rtype) -> Vec<String> {
    use domain::base::ParsedName;
    use domain::rdata::AllRecordData;
    let mut query = common::ecs_query(5, name, rtype, None);
    let flags_at = query.len() - 4;
    query[flags_at] |= 0x80;
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(&query, server).unwrap();
    let mut buf = vec![0; 4096];
    let len = socket.recv(&mut buf).expect("an answer");
    buf.truncate(len);
    let message = domain::base::Message::from_octets(buf).unwrap();
    let mut lines = vec![format!("{} aa={}", message.header().rcode(), message.header().aa())];
    let sections =
        [("ANSWER", message.answer().unwrap()), ("AUTHORITY", message.authority().unwrap()), ("ADDITIONAL", message.additional().unwrap())];
    for (section, records) in sections {
        let mut described: Vec<String> = records
            .limit_to::<AllRecordData<_, ParsedName<_>>>()
            .map(Result::unwrap)
            .filter(|record| record.rtype() != Rtype::OPT)
            .map(|record| {
                let data = match record.data() {
                    AllRecordData::Rrsig(rrsig) => format!(
                        "covers {} labels {} ttl {} signer {}",
                        rrsig.type_covered(),
                        rrsig.labels(),
                        rrsig.original_ttl().as_secs(),
                        rrsig.signer_name()
                    ),
                    AllRecordData::Nsec(nsec) => format!("types {}", nsec.types()),
                    AllRecordData::Dnskey(_) => "(a key)".into(),
                    AllRecordData::Soa(soa) => format!(
                        "{} {} (serial) {} {} {} {}",
                        soa.mname(),
                        soa.rname(),
                        soa.refresh().as_secs(),
                        soa.retry().as_secs(),
                        soa.expire().as_secs(),
                        soa.minimum().as_secs()
                    ),
                    data => data.to_string(),
                };
                format!("{section} {} {} {} {data}", record.owner().to_string().to_lowercase(), record.ttl().as_secs(), record.rtype())
            })
            .collect();
        described.sort();
        described.dedup();
        lines.extend(described);
    }
    lines
}

#[test]
fn signed_answers_agree_with_knot_signing_the_same_zone() {
    let (pharos, _) = serve_signed(&[]);
    let knot_dir = tempfile::tempdir().unwrap();
    let Some(knot) = knot_signing(knot_dir.path()) else { return };
    // Where the two agree: answers, a CNAME to the apex, a NODATA (types
    // at the name), a referral (no DS, shown by the NSEC at the cut),
    // the DS question at the cut, the keys, explicit RRSIG queries. Not compared: names that do
    // not exist and wildcards, which Knot denies with its chain and
    // Pharos with compact denial (RFC 9824), by design.
    let questions = [
        ("example.test", Rtype::SOA),
        ("example.test", Rtype::NS),
        ("example.test", Rtype::MX),
        ("example.test", Rtype::DNSKEY),
        ("www.example.test", Rtype::A),
        ("Text.Example.Test", Rtype::TXT),
        ("mail.example.test", Rtype::AAAA),
        ("host.lab.example.test", Rtype::A),
        ("lab.example.test", Rtype::DS),
        // An explicit RRSIG query: the signatures of the name's lowest type
        // (at a CNAME, the CNAME's, never followed).
        ("example.test", Rtype::RRSIG),
        ("www.example.test", Rtype::RRSIG),
        ("mail.example.test", Rtype::RRSIG),
    ];
    for (name, rtype) in questions {
        let (ours, knots) = (signed_summary(pharos.address, name, rtype), signed_summary(knot.address, name, rtype));
        assert_eq!(ours, knots, "{name} {rtype}: Pharos (left) and Knot DNS (right)");
    }
}

/// The zone as kdig transferred it from `server` (AXFR over TCP), in
/// presentation format, or None (a loud SKIP) without kdig.
fn kdig_axfr(server: SocketAddr) -> Option<String> {
    let mut command = Command::new("kdig");
    command.arg(format!("@{}", server.ip())).args(["-p", &server.port().to_string(), "AXFR", "example.test", "+nocomments", "+nostats"]);
    let output = command.output();
    let Ok(output) = output else {
        return said(&mut command, "knot-dnsutils").and(None);
    };
    assert!(output.status.success(), "kdig: {}", String::from_utf8_lossy(&output.stderr));
    Some(String::from_utf8(output.stdout).unwrap())
}

#[test]
fn an_axfr_of_a_signed_zone_verifies_with_its_nsec_chain() {
    for key_args in [&["--algorithm", "ecdsap256sha256"][..], &["--algorithm", "ed25519", "--ksk-zsk"]] {
        let (pharos, _) = serve_signed(key_args);
        let Some(zone) = kdig_axfr(pharos.address) else { return };
        let file = pharos._dir.path().join("transferred.zone");
        std::fs::write(&file, &zone).unwrap();
        let Some(verdict) = said(Command::new("ldns-verify-zone").arg("-V").arg("3").arg(&file), "ldnsutils") else { return };
        assert!(verdict.contains("Zone is verified and complete"), "{key_args:?}: ldns-verify-zone said:\n{verdict}\nof:\n{zone}");
        // The routed names: every enabled replica, health aside (a
        // secondary keeps what it fetched), each RRset signed.
        let records = |owner: &str, rtype: &str| {
            zone.lines().filter(|line| line.starts_with(owner) && line.split_whitespace().nth(3) == Some(rtype)).count()
        };
        assert_eq!((records("app.example.test.", "A"), records("app.example.test.", "AAAA")), (3, 1), "{zone}");
        assert_eq!((records("down.example.test.", "A"), records("down.example.test.", "NSEC")), (1, 1), "{zone}");
        assert_eq!(records("app.example.test.", "RRSIG"), 3, "A, AAAA and NSEC, each signed by the zone-signing key: {zone}");
        assert_eq!(records("ns.lab.example.test.", "NSEC"), 0, "glue has no NSEC: {zone}");
    }
}

/// dig's status for `name` TYPE128 (NXNAME) asked of `server` with DO
/// set, whether it read Extended DNS Error 30, and what it printed; None
/// (a loud SKIP) without dig.
fn dig_nxname(server: SocketAddr, name: &str) -> Option<(String, bool, String)> {
    let mut command = Command::new("dig");
    command.arg(format!("@{}", server.ip())).args(["-p", &server.port().to_string(), "+dnssec", "+tries=1", "+time=5", name, "TYPE128"]);
    let output = said(&mut command, "bind9-dnsutils")?;
    let status = output.split("status: ").nth(1).unwrap_or_default().split(',').next().unwrap_or_default().to_string();
    // dig 9.18 predates the code's name: "EDE: 30" alone.
    Some((status, output.contains("EDE: 30"), output))
}

/// RFC 9824 section 3.5: an explicit query for NXNAME, the meta type
/// compact denial puts in its bitmaps, MUST get FORMERR; the MAY of an
/// Extended DNS Error 30 is taken. Any zone, signed or not, and any name
/// in it: the rule is the server's. (Knot DNS 3.2 answers it NOERROR with
/// no data, as any meta type: it makes no compact denials.)
#[test]
fn dig_asking_for_nxname_gets_formerr_from_a_signed_zone_and_an_unsigned_one() {
    let (signed, _) = serve_signed(&[]);
    let unsigned = common::start_with("", ZONE);
    for server in [signed.address, unsigned.address] {
        for name in ["www.example.test", "nowhere.example.test"] {
            let Some((status, invalid_query_type, output)) = dig_nxname(server, name) else { return };
            assert_eq!((status.as_str(), invalid_query_type), ("FORMERR", true), "{server} {name}: {output}");
        }
    }
}
