//! Zone transfer out, against the real thing: Knot DNS and NSD as
//! secondaries of Pharos fetch tests/zones/example.com.zone (with a routed
//! service in it) and then answer its names as Pharos does; Pharos's AXFR
//! holds what Knot DNS's AXFR of the same file holds; unlisted zones, UDP
//! and bad transfer settings are refused. With a TSIG key, both transfer,
//! a wrong key is refused, and kdig checks the signatures and reads
//! BADKEY, BADSIG and BADTIME (its clock moved by libfaketime). Every
//! change a secondary would see (a replica through the API, a reloaded
//! file) moves the serial; kdig gets the difference by IXFR, or the whole
//! zone from a serial Pharos never served; Pharos NOTIFYs (signed, and
//! again until answered), and knotd and nsd follow by IXFR.
//!
//! Without knotd, nsd, kdig or faketime the tests that need them print
//! SKIP and pass, unless CI is set, where they fail.

use crate::common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::declarations::Declarations;
use common::{free_port, query_bytes, read_frame, request, require, udp_query, wait_until};
use domain::base::iana::{Rcode, Rtype};
use domain::base::{Message, ParsedName};
use domain::rdata::AllRecordData;
use pharos_wire::framing::framed;

const ZONE: &str = "example.com";
/// The service routed inside the zone: Pharos answers one replica, a
/// secondary every one.
const SERVICE: &str = "svc.example.com";

/// A process stopped when dropped, with its directory.
pub(crate) struct Running {
    pub(crate) child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Running {
    pub(crate) fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// Asks the process to reload (SIGHUP, as `kill -HUP` does).
    fn hang_up(&self) {
        // SAFETY: sends a signal to a child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGHUP) }, 0);
    }

    /// True while the process has not exited.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls until `address` serves the zone with its file's serial;
    /// fails at once, with the log, if the process exits.
    fn wait_for_zone(&mut self, what: &str, address: SocketAddr) {
        wait_until(&format!("{what} serves {ZONE}"), || {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{what} exited ({status}):\n{}", self.log());
            }
            has_zone(address)
        });
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` (its output to `log` in `dir`).
pub(crate) fn run(mut command: Command, dir: tempfile::TempDir) -> Running {
    let log = dir.path().join("log");
    let out = std::fs::File::create(&log).unwrap();
    command.stdin(Stdio::null()).stdout(out.try_clone().unwrap()).stderr(out);
    let child = command.spawn().unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
    Running { child, log, _dir: dir }
}

/// A directory holding a copy of tests/zones/ (the zone and its $INCLUDE).
fn zone_copy() -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("xfr-").tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zones");
    for entry in std::fs::read_dir(source).unwrap().map(Result::unwrap).filter(|entry| entry.file_type().unwrap().is_file()) {
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// Pharos serving example.com (transfers allowed to `allow_transfer`,
/// and if `key` is given, signed by it) and example.org (to nobody) on
/// `address`. The key's secret is read from a file.
fn start_pharos(address: SocketAddr, allow_transfer: &str, key: Option<&Tsig>) -> Running {
    start_pharos_with(address, allow_transfer, key, "", "")
}

/// [`start_pharos`] with more tables (`tables`) and more keys in
/// example.com's (`zone_keys`).
fn start_pharos_with(address: SocketAddr, allow_transfer: &str, key: Option<&Tsig>, tables: &str, zone_keys: &str) -> Running {
    let dir = zone_copy();
    let key_tables = key.map_or(String::new(), |key| {
        std::fs::write(dir.path().join("xfr.secret"), format!("{}\n", key.secret)).unwrap();
        format!("[[tsig_key]]\nname = \"{}\"\nalgorithm = \"hmac-sha256\"\nsecret_file = \"xfr.secret\"\n", key.name)
    });
    let transfer_keys = key.map_or(String::new(), |key| format!("transfer_keys = [\"{}\"]\n", key.name));
    let services = Declarations::new()
        .service(SERVICE)
        .policy("failover")
        .line("ttl = 120")
        .line("max_answers = 1")
        .replica("a", "192.0.2.10")
        .replica("b", "192.0.2.20")
        .replica("c", "2001:db8::30")
        .toml();
    let config = format!(
        "[server]\nlisten = [\"{address}\"]\nthreads = 1\n{services}\n{key_tables}{tables}\n\
         [[zone]]\norigin = \"{ZONE}\"\nfile = \"example.com.zone\"\nallow_transfer = {allow_transfer}\n{transfer_keys}{zone_keys}\n\
         [[zone]]\norigin = \"example.org\"\nfile = \"example.org.zone\"\n"
    );
    std::fs::write(dir.path().join("pharos.toml"), config).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pharos"));
    command.args(["serve", "--config"]).arg(dir.path().join("pharos.toml"));
    run(command, dir)
}

/// A TSIG key as the servers' configurations give it: HMAC-SHA256.
pub(crate) struct Tsig {
    pub(crate) name: &'static str,
    /// Base64.
    pub(crate) secret: &'static str,
}

pub(crate) const KEY: Tsig = Tsig { name: "xfr-key", secret: "c2VjcmV0IG9mIHRoZSB0cmFuc2ZlciB0ZXN0cyEhIQ==" };
pub(crate) const WRONG_KEY: Tsig = Tsig { name: "xfr-key", secret: "bm90IHRoZSBzZWNyZXQgUGhhcm9zIGhvbGRzISEhISE=" };

/// knotd on `port`: the primary of the zone file (transfers to loopback)
/// when `primary` is None, else a secondary fetching from `primary`,
/// signing with `key` if given.
fn start_knot(knotd: &Path, port: u16, primary: Option<SocketAddr>, key: Option<&Tsig>) -> Running {
    let dir = zone_copy();
    let d = dir.path().display();
    let mut conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  background-workers: 1\n\
         database:\n  storage: \"{d}/db\"\n\
         log:\n  - target: stderr\n    any: info\n\
         acl:\n  - id: loopback\n    address: 127.0.0.0/8\n    action: [transfer, notify]\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n"
    );
    match primary {
        None => conf.push_str(&format!("zone:\n  - domain: {ZONE}.\n    file: example.com.zone\n    acl: loopback\n")),
        Some(primary) => conf.push_str(&format!(
            "{}remote:\n  - id: pharos\n    address: {}@{}\n{}\
             zone:\n  - domain: {ZONE}.\n    file: secondary.zone\n    master: pharos\n    acl: [loopback{}]\n",
            // With a key, NOTIFYs signed by it are accepted too.
            key.map_or(String::new(), |key| format!(
                "key:\n  - id: {0}\n    algorithm: hmac-sha256\n    secret: {1}\n\
                 acl:\n  - id: signed\n    address: 127.0.0.0/8\n    action: notify\n    key: {0}\n",
                key.name, key.secret
            )),
            primary.ip(),
            primary.port(),
            key.map_or(String::new(), |key| format!("    key: {}\n", key.name)),
            if key.is_some() { ", signed" } else { "" },
        )),
    }
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    let mut command = Command::new(knotd);
    command.arg("-c").arg(dir.path().join("knot.conf")).current_dir(dir.path());
    run(command, dir)
}

/// nsd on `port`, a secondary fetching the zone from `primary`, signing
/// with `key` if given.
fn start_nsd(nsd: &Path, port: u16, primary: SocketAddr, key: Option<&Tsig>) -> Running {
    let dir = tempfile::Builder::new().prefix("xfr-nsd-").tempdir().unwrap();
    let d = dir.path().display();
    let conf = format!(
        "server:\n  ip-address: 127.0.0.1@{port}\n  port: {port}\n  do-ip6: no\n  username: \"\"\n  chroot: \"\"\n\
         \x20 zonesdir: \"{d}\"\n  database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n\
         \x20 xfrdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  server-count: 1\n  verbosity: 2\n\
         remote-control:\n  control-enable: no\n{}\
         zone:\n  name: \"{ZONE}\"\n  zonefile: \"secondary.zone\"\n  request-xfr: {}@{} {}\n  allow-notify: 127.0.0.1 {}\n",
        key.map_or(String::new(), |key| format!(
            "key:\n  name: \"{}\"\n  algorithm: hmac-sha256\n  secret: \"{}\"\n",
            key.name, key.secret
        )),
        primary.ip(),
        primary.port(),
        key.map_or("NOKEY", |key| key.name),
        key.map_or("NOKEY", |key| key.name),
    );
    std::fs::write(dir.path().join("nsd.conf"), conf).unwrap();
    let mut command = Command::new(nsd);
    command.arg("-d").arg("-c").arg(dir.path().join("nsd.conf"));
    run(command, dir)
}

/// Every record of a message's answer section as "owner ttl TYPE data",
/// the owner lowercased.
fn answer_records(message: &Message<Vec<u8>>) -> Vec<String> {
    let answer = message.answer().unwrap().limit_to::<AllRecordData<_, ParsedName<_>>>();
    answer
        .map(Result::unwrap)
        .map(|record| {
            format!("{} {} {} {}", record.owner().to_string().to_lowercase(), record.ttl().as_secs(), record.rtype(), record.data())
        })
        .collect()
}

/// An AXFR of `zone` from `server` over TCP: the messages, read until the
/// second SOA or an error.
fn axfr(server: SocketAddr, zone: &str) -> Vec<Message<Vec<u8>>> {
    let mut stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(&framed(&query_bytes(77, zone, Rtype::AXFR))).unwrap();
    let mut messages = Vec::new();
    let mut soas = 0;
    // Bounded: a transfer of this zone takes one message or a few.
    while soas < 2 && messages.len() < 100 {
        let message = read_frame(&mut stream).unwrap();
        soas += message.answer().unwrap().filter(|record| record.as_ref().is_ok_and(|record| record.rtype() == Rtype::SOA)).count();
        let failed = message.header().rcode() != Rcode::NOERROR;
        messages.push(message);
        if failed {
            break;
        }
    }
    messages
}

/// The records of a transfer, in order.
fn transferred(messages: &[Message<Vec<u8>>]) -> Vec<String> {
    messages.iter().flat_map(answer_records).collect()
}

/// What a server answers to (name, type), over UDP: the RCODE, AA and the
/// answer section, sorted.
fn answer(server: SocketAddr, name: &str, rtype: Rtype) -> (Rcode, bool, Vec<String>) {
    let message = udp_query(server, name, rtype).unwrap_or_else(|| panic!("no answer to {name} {rtype} from {server}"));
    let mut records = answer_records(&message);
    records.sort();
    (message.header().rcode(), message.header().aa(), records)
}

/// True when `server` serves the zone with the serial of the zone file.
fn has_zone(server: SocketAddr) -> bool {
    udp_query(server, ZONE, Rtype::SOA)
        .is_some_and(|message| message.header().aa() && answer_records(&message).iter().any(|soa| soa.contains(" 2024010101 ")))
}

/// The replica addresses a secondary must give for the service.
fn replica_set(rtype: Rtype) -> Vec<String> {
    let records: &[&str] = match rtype {
        Rtype::A => &["svc.example.com 120 A 192.0.2.10", "svc.example.com 120 A 192.0.2.20"],
        _ => &["svc.example.com 120 AAAA 2001:db8::30"],
    };
    records.iter().map(|record| record.to_string()).collect()
}

#[test]
fn knot_and_nsd_transfer_the_zone_and_answer_as_pharos_does() {
    let (Some(knotd), Some(nsd)) = (require("knotd", "knot"), require("nsd", "nsd")) else { return };
    let pharos_address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut pharos = start_pharos(pharos_address, "[\"127.0.0.1/32\"]", None);
    pharos.wait_for_zone("pharos", pharos_address);
    let messages = axfr(pharos_address, ZONE);
    let records = transferred(&messages);
    assert!(records.len() > 100, "pharos's AXFR: {records:?}\n{}", pharos.log());

    // The differential: Knot's AXFR of the same file holds the same
    // records, the service's aside, SOA first and last in both.
    let knot_port = free_port();
    let mut knot = start_knot(&knotd, knot_port, None, None);
    let knot_address = SocketAddr::from(([127, 0, 0, 1], knot_port));
    knot.wait_for_zone("knotd", knot_address);
    let knot_records = transferred(&axfr(knot_address, ZONE));
    assert!(knot_records.len() > 100, "knot's AXFR: {knot_records:?}\n{}", knot.log());
    for list in [&records, &knot_records] {
        assert!(list[0].contains(" SOA ") && list[0] == list[list.len() - 1], "SOA first and last: {list:?}");
    }
    let mut pharos_static: Vec<&String> = records.iter().filter(|record| !record.starts_with(SERVICE)).collect();
    let mut knot_sorted: Vec<&String> = knot_records.iter().collect();
    pharos_static.sort();
    knot_sorted.sort();
    assert_eq!(pharos_static, knot_sorted, "pharos's AXFR against knot's");
    let service_records: Vec<&String> = records.iter().filter(|record| record.starts_with(SERVICE)).collect();
    assert_eq!(service_records.len(), 3, "the full replica set: {service_records:?}");

    let (knot_port, nsd_port) = (free_port(), free_port());
    let knot = start_knot(&knotd, knot_port, Some(pharos_address), None);
    let nsd = start_nsd(&nsd, nsd_port, pharos_address, None);
    let secondaries =
        [("knotd", SocketAddr::from(([127, 0, 0, 1], knot_port)), knot), ("nsd", SocketAddr::from(([127, 0, 0, 1], nsd_port)), nsd)];
    let mut questions: Vec<(String, Rtype)> = records
        .iter()
        .map(|record| {
            let mut fields = record.split(' ');
            let owner = fields.next().unwrap().to_string();
            (owner, fields.nth(1).unwrap().parse().unwrap())
        })
        .collect();
    questions.extend([("nothere.example.com".to_string(), Rtype::A), ("www.example.com".to_string(), Rtype::TXT)]);
    questions.sort();
    questions.dedup();
    let mut mismatches = Vec::new();
    for (name, address, mut secondary) in secondaries {
        secondary.wait_for_zone(&format!("{name}, a secondary of pharos,"), address);
        for (owner, rtype) in &questions {
            let theirs = answer(address, owner, *rtype);
            let expected =
                if owner == SERVICE { (Rcode::NOERROR, true, replica_set(*rtype)) } else { answer(pharos_address, owner, *rtype) };
            if theirs != expected {
                mismatches.push(format!("{name} {owner} {rtype}: {theirs:?}, pharos {expected:?}"));
            }
        }
    }
    assert!(mismatches.is_empty(), "{} of {} questions differ:\n{}", mismatches.len(), 2 * questions.len(), mismatches.join("\n"));
    // Pharos itself routes the service: one replica of the set.
    let (_, _, routed) = answer(pharos_address, SERVICE, Rtype::A);
    assert!(routed.len() == 1 && replica_set(Rtype::A).contains(&routed[0]), "{routed:?}");
    eprintln!("knot and nsd answered {} questions each as pharos; {} records transferred", questions.len(), records.len());
}

/// The INFO-CODE of a response's Extended DNS Error, if it has one.
fn extended_error(message: &Message<Vec<u8>>) -> Option<u16> {
    let opt = message.opt()?;
    let mut options = opt.opt().iter::<domain::base::opt::UnknownOptData<_>>().map(Result::unwrap);
    let extended = options.find(|option| option.code().to_int() == 15)?;
    Some(u16::from_be_bytes([extended.as_slice()[0], extended.as_slice()[1]]))
}

/// An AXFR query with an OPT record, so that refusals can say why.
fn axfr_refusal(server: SocketAddr, zone: &str) -> (Rcode, Option<u16>) {
    let mut query = query_bytes(78, zone, Rtype::AXFR);
    query[11] = 1;
    query.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
    let mut stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(&framed(&query)).unwrap();
    let message = read_frame(&mut stream).unwrap();
    (message.header().rcode(), extended_error(&message))
}

#[test]
fn transfers_are_refused_to_unlisted_clients_and_zones_and_over_udp() {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut pharos = start_pharos(address, "[\"10.0.0.0/8\", \"::1/128\"]", None);
    pharos.wait_for_zone("pharos", address);
    assert_eq!(axfr_refusal(address, ZONE), (Rcode::REFUSED, Some(18)), "127.0.0.1 is not listed: {}", pharos.log());
    assert_eq!(axfr_refusal(address, "example.org"), (Rcode::REFUSED, Some(18)), "example.org lists nobody");
    assert_eq!(axfr_refusal(address, "www.example.com"), (Rcode::NOTAUTH, Some(20)), "not a zone's apex");
    assert_eq!(udp_query(address, ZONE, Rtype::AXFR).unwrap().header().rcode(), Rcode::NOTIMP);
}

/// What `pharos serve` says when it refuses to start on a config of
/// example.com with `zone_keys` in its zone table and `tables` before it.
fn start_refused(tables: &str, zone_keys: &str) -> String {
    let dir = zone_copy();
    std::fs::write(dir.path().join("xfr.secret"), format!("{}\n", KEY.secret)).unwrap();
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let config =
        format!("[server]\nlisten = [\"{address}\"]\n{tables}\n[[zone]]\norigin = \"{ZONE}\"\nfile = \"example.com.zone\"\n{zone_keys}\n");
    std::fs::write(dir.path().join("pharos.toml"), config).unwrap();
    let output =
        Command::new(env!("CARGO_BIN_EXE_pharos")).args(["serve", "--config"]).arg(dir.path().join("pharos.toml")).output().unwrap();
    assert!(!output.status.success(), "started on {tables} {zone_keys}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_transfer_settings_stop_the_start_naming_them() {
    let key = |lines: &str| format!("[[tsig_key]]\nname = \"xfr-key\"\n{lines}");
    let secret = format!("secret = \"{}\"", KEY.secret);
    let listed = "allow_transfer = [\"127.0.0.1/32\"]";
    let cases = [
        (
            String::new(),
            "allow_transfer = [\"127.0.0.1/32\", \"10.0.0.1/8\"]".to_string(),
            "zone example.com allow_transfer[1]: 10.0.0.1/8 has bits set past /8",
        ),
        (
            key(&secret),
            format!("{listed}\ntransfer_keys = [\"other\"]"),
            "zone example.com transfer_keys[0]: no [[tsig_key]] is named \"other\"",
        ),
        (key(&secret), "transfer_keys = [\"xfr-key\"]".to_string(), "zone example.com: transfer_keys without allow_transfer"),
        (key("secret = \"not base64!\""), listed.to_string(), "tsig_key \"xfr-key\": the secret is not base64"),
        (key(""), listed.to_string(), "tsig_key \"xfr-key\": give secret or secret_file, one of them"),
        (key(&format!("{secret}\nsecret_file = \"xfr.secret\"")), listed.to_string(), "give secret or secret_file, one of them"),
        (key("secret_file = \"nowhere.secret\""), listed.to_string(), "tsig_key \"xfr-key\": cannot read"),
        (
            key(&format!("{secret}\nalgorithm = \"hmac-md5\"")),
            listed.to_string(),
            "algorithm \"hmac-md5\" is not offered (hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512 are)",
        ),
        (format!("{}\n{}", key(&secret), key(&secret)), listed.to_string(), "tsig_key \"xfr-key\" is declared twice"),
        (String::new(), "notify = [\"192.0.2.53\"]".to_string(), "invalid socket address syntax"),
    ];
    for (tables, zone_keys, expected) in cases {
        let said = start_refused(&tables, &zone_keys);
        assert!(said.contains(expected), "{tables} {zone_keys}: {said}");
    }
}

#[test]
fn knot_and_nsd_transfer_with_the_key_and_are_refused_with_a_wrong_one() {
    let (Some(knotd), Some(nsd)) = (require("knotd", "knot"), require("nsd", "nsd")) else { return };
    let pharos_address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut pharos = start_pharos(pharos_address, "[\"127.0.0.1/32\"]", Some(&KEY));
    pharos.wait_for_zone("pharos", pharos_address);
    let ports = [free_port(), free_port(), free_port(), free_port()];
    let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let signed = [
        ("knotd", at(ports[0]), start_knot(&knotd, ports[0], Some(pharos_address), Some(&KEY))),
        ("nsd", at(ports[1]), start_nsd(&nsd, ports[1], pharos_address, Some(&KEY))),
    ];
    let wrong = [
        ("knotd", at(ports[2]), start_knot(&knotd, ports[2], Some(pharos_address), Some(&WRONG_KEY))),
        ("nsd", at(ports[3]), start_nsd(&nsd, ports[3], pharos_address, Some(&WRONG_KEY))),
    ];
    for (name, address, mut secondary) in signed {
        secondary.wait_for_zone(&format!("{name}, signing with the key,"), address);
        assert_eq!(answer(address, "www.example.com", Rtype::A), answer(pharos_address, "www.example.com", Rtype::A));
    }
    // Each secondary with the wrong key is told BADSIG (in its words), and serves nothing.
    wait_until("both wrong-key secondaries are refused", || pharos.log().matches("zone transfer refused").count() >= 2);
    for ((name, address, secondary), says) in wrong.iter().zip(["failed to verify TSIG", "tsig error (Bad Signature)"]) {
        wait_until(&format!("{name} logs the BADSIG"), || secondary.log().contains(says));
        assert!(!has_zone(*address), "{name} serves the zone though refused:\n{}", secondary.log());
    }
    assert!(pharos.log().contains("rcode=9"), "{}", pharos.log());
}

/// kdig's words for what Pharos answered its AXFR of example.com signed
/// with `key`, with kdig's clock `shift` away (through libfaketime).
fn kdig_axfr(kdig: &Path, faketime: &Path, server: SocketAddr, key: &Tsig, shift: &str) -> String {
    let output = Command::new(faketime)
        .args(["-f", shift])
        .arg(kdig)
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), ZONE, "AXFR", "-y"])
        .arg(format!("hmac-sha256:{}:{}", key.name, key.secret))
        .output()
        .unwrap();
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn kdig_checks_signed_transfers_and_reads_badkey_badsig_and_badtime() {
    let (Some(kdig), Some(faketime)) = (require("kdig", "knot-dnsutils"), require("faketime", "faketime")) else { return };
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut pharos = start_pharos(address, "[\"127.0.0.1/32\"]", Some(&KEY));
    pharos.wait_for_zone("pharos", address);
    let signed = kdig_axfr(&kdig, &faketime, address, &KEY, "+0s");
    assert!(signed.contains("1 messages, 188 records") && !signed.contains("WARNING"), "{signed}");
    let unknown = Tsig { name: "other-key", ..KEY };
    assert!(kdig_axfr(&kdig, &faketime, address, &unknown, "+0s").contains("'BADKEY'"));
    assert!(kdig_axfr(&kdig, &faketime, address, &WRONG_KEY, "+0s").contains("'BADSIG'"));
    assert!(kdig_axfr(&kdig, &faketime, address, &KEY, "-1000s").contains("'BADTIME'"));
    assert!(kdig_axfr(&kdig, &faketime, address, &KEY, "-200s").contains("188 records"), "within the fudge");
}

/// The serial of the zone's SOA as `server` answers it over UDP.
fn serial(server: SocketAddr) -> Option<u32> {
    let message = udp_query(server, ZONE, Rtype::SOA)?;
    let answer = message.answer().ok()?.limit_to::<domain::rdata::Soa<ParsedName<_>>>().next()?.ok()?;
    Some(answer.data().serial().into_int())
}

/// A primary with the control API, on `address`; its base URL.
fn start_primary_with_api(address: SocketAddr, key: Option<&Tsig>, zone_keys: &str) -> (Running, String) {
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let tables = format!("[control]\nlisten = \"{api}\"\ntoken = \"{API_TOKEN}\"\n");
    let mut pharos = start_pharos_with(address, "[\"127.0.0.1/32\"]", key, &tables, zone_keys);
    pharos.wait_for_zone("pharos", address);
    (pharos, format!("http://{api}"))
}

const API_TOKEN: &str = "transfer-test-token";

/// Enables or disables replica `id` of the service through the API.
fn set_enabled(api: &str, id: &str, enabled: bool) {
    let url = format!("{api}/v1/services/{SERVICE}/replicas/{id}");
    let (status, reply) = request("PATCH", &url, Some(API_TOKEN), Some(serde_json::json!({ "enabled": enabled })));
    assert_eq!(status, 200, "{reply}");
}

/// Rewrites the zone file in `dir` with `edit`, whole at once (a reload
/// never reads half of it).
fn edit_zone(dir: &Path, edit: impl FnOnce(String) -> String) {
    let file = dir.join("example.com.zone");
    let written = dir.join("example.com.zone.new");
    std::fs::write(&written, edit(std::fs::read_to_string(&file).unwrap())).unwrap();
    std::fs::rename(written, file).unwrap();
}

/// Reloads `pharos` and waits until it has.
fn reload(pharos: &Running) {
    let reloads = || pharos.log().matches("zones reloaded").count();
    let before = reloads();
    pharos.hang_up();
    wait_until("pharos reloads", || reloads() > before);
}

#[test]
fn every_change_a_secondary_would_see_moves_the_serial_forward() {
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (pharos, api) = start_primary_with_api(address, None, "");
    assert_eq!(serial(address), Some(2024010101), "the file's serial, at first");
    set_enabled(&api, "b", false);
    assert_eq!(serial(address), Some(2024010102), "a replica left the set: {}", pharos.log());
    assert!(!transferred(&axfr(address, ZONE)).iter().any(|record| record.ends_with("192.0.2.20")), "b is not transferred");
    // Health is not transferred: no new version.
    let url = format!("{api}/v1/services/{SERVICE}/replicas/a");
    assert_eq!(request("PATCH", &url, Some(API_TOKEN), Some(serde_json::json!({ "down": true }))).0, 200);
    set_enabled(&api, "b", false);
    assert_eq!(serial(address), Some(2024010102), "nothing a secondary sees changed");
    // An edit without a new serial in the file: the served one plus one.
    edit_zone(pharos.dir(), |text| text.replace("A       192.0.2.1\n", "A       192.0.2.100\n"));
    reload(&pharos);
    assert_eq!(serial(address), Some(2024010103));
    assert_eq!(answer(address, ZONE, Rtype::A).2, vec!["example.com 3600 A 192.0.2.100".to_string()]);
    reload(&pharos);
    assert_eq!(serial(address), Some(2024010103), "the same file again");
    edit_zone(pharos.dir(), |text| text.replace("2024010101  ; serial", "2024060101  ; serial"));
    reload(&pharos);
    assert_eq!(serial(address), Some(2024060101), "the file's newer serial");
    assert!(!pharos.log().contains("reload failed"), "{}", pharos.log());
}

/// kdig's output for an IXFR of the zone from `serial`.
fn kdig_ixfr(kdig: &Path, server: SocketAddr, serial: u32) -> String {
    let output = Command::new(kdig)
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), ZONE, &format!("IXFR={serial}")])
        .output()
        .unwrap();
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn kdig_gets_what_changed_by_ixfr_and_the_whole_zone_from_an_unknown_serial() {
    let Some(kdig) = require("kdig", "knot-dnsutils") else { return };
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (pharos, api) = start_primary_with_api(address, None, "");
    set_enabled(&api, "b", false);
    set_enabled(&api, "c", false);
    set_enabled(&api, "c", true);
    assert_eq!(serial(address), Some(2024010104));
    let difference = kdig_ixfr(&kdig, address, 2024010101);
    let lines: Vec<&str> = difference.lines().filter(|line| line.starts_with(ZONE) || line.starts_with(SERVICE)).collect();
    assert_eq!(lines.len(), 5, "SOA, old SOA, the A removed, SOA, SOA: {difference}");
    assert!(
        lines[1].contains(" 2024010101 ") && lines[2].starts_with(&format!("{SERVICE}.")) && lines[2].ends_with("192.0.2.20"),
        "{difference}"
    );
    assert!(lines[0].contains(" 2024010104 ") && lines[3].contains(" 2024010104 "), "{difference}");
    assert!(difference.contains("5 records"), "c went and came back: not in the difference\n{difference}");
    let whole = kdig_ixfr(&kdig, address, 2000000000);
    assert!(whole.contains("187 records"), "the whole zone, b left out: {whole}");
    assert!(pharos.log().contains("difference from serial 2024010101 to 2024010104"), "{}", pharos.log());
    assert!(pharos.log().contains("whole zone at serial 2024010104"), "{}", pharos.log());
}

/// The next NOTIFY `secondary` receives (within 10 s): its bytes, sender
/// and the serial it carries.
fn receive_notify(secondary: &std::net::UdpSocket) -> (Vec<u8>, SocketAddr, u32) {
    let mut buffer = vec![0; 1024];
    let (len, from) = secondary.recv_from(&mut buffer).expect("a NOTIFY within 10 s");
    buffer.truncate(len);
    let message = Message::from_octets(buffer.clone()).unwrap();
    assert_eq!(message.header().opcode(), domain::base::iana::Opcode::NOTIFY);
    let soa = message.answer().unwrap().limit_to::<domain::rdata::Soa<ParsedName<_>>>().next().unwrap().unwrap();
    (buffer, from, soa.data().serial().into_int())
}

/// Replies to the NOTIFY `notify` from `from`, as a secondary does.
fn acknowledge(secondary: &std::net::UdpSocket, notify: &[u8], from: SocketAddr) {
    let mut reply = notify.to_vec();
    reply[2] |= 0x80;
    // The question alone: no answer section, no TSIG.
    reply[6..12].fill(0);
    let question_end = 12 + reply[12..].iter().position(|&octet| octet == 0).unwrap() + 5;
    reply.truncate(question_end);
    secondary.send_to(&reply, from).unwrap();
}

#[test]
fn pharos_notifies_each_new_serial_signed_and_retries_until_answered() {
    let secondary = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    secondary.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let notify = format!("notify = [\"{}\"]\n", secondary.local_addr().unwrap());
    let (pharos, api) = start_primary_with_api(address, Some(&KEY), &notify);
    let (first, from, serial) = receive_notify(&secondary);
    assert_eq!(serial, 2024010101, "a NOTIFY at start");
    // Its signature is checked by domain in pharos-answer, by knotd below.
    let message = Message::from_octets(first.clone()).unwrap();
    let tsig = message.additional().unwrap().next().unwrap().unwrap();
    assert_eq!((tsig.rtype(), tsig.owner().to_string()), (Rtype::TSIG, KEY.name.to_string()), "signed with the zone's transfer key");
    let (again, _, _) = receive_notify(&secondary);
    assert_eq!(again[..2], first[..2], "unanswered, the same NOTIFY is sent again");
    acknowledge(&secondary, &again, from);
    wait_until("pharos logs the acknowledgement", || pharos.log().contains("NOTIFY acknowledged"));
    set_enabled(&api, "b", false);
    let (changed, from, serial) = receive_notify(&secondary);
    assert_eq!(serial, 2024010102, "a NOTIFY for the new serial");
    acknowledge(&secondary, &changed, from);
    wait_until("both acknowledged", || pharos.log().matches("NOTIFY acknowledged").count() == 2);
    let (_, metrics) = request("GET", &format!("{api}/metrics"), Some(API_TOKEN), None);
    let metrics = metrics.as_str().unwrap().to_string();
    for (outcome, count) in [("sent", 3), ("acknowledged", 2)] {
        let line = format!("pharos_notifies_total{{zone=\"example.com.\",outcome=\"{outcome}\"}} {count}");
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
}

/// The serial `server` serves and what it answers for the apex's and the
/// service's addresses.
fn served(server: SocketAddr) -> (Option<u32>, Vec<String>, Vec<String>) {
    (serial(server), answer(server, ZONE, Rtype::A).2, answer(server, SERVICE, Rtype::A).2)
}

/// Waits until every secondary serves `serial`, the apex's addresses
/// Pharos serves and the service's enabled IPv4 `replicas`.
fn wait_for_serial(secondaries: &[(&str, SocketAddr)], pharos: SocketAddr, serial: u32, replicas: &[&str]) {
    let replicas = replicas.iter().map(|address| format!("{SERVICE} 120 A {address}")).collect();
    let expected = (Some(serial), answer(pharos, ZONE, Rtype::A).2, replicas);
    for (name, address) in secondaries {
        wait_until(&format!("{name} serves serial {serial}"), || served(*address) == expected);
    }
}

/// How many transfers Pharos logged sending the difference between two serials.
fn differences_sent(pharos: &Running, from: u32, to: u32) -> usize {
    pharos.log().matches(&format!("difference from serial {from} to {to}")).count()
}

/// A primary (its API's base URL beside it) whose zone notifies knotd and
/// nsd, both secondaries of it holding the zone, with `key` on every
/// NOTIFY and transfer if given; the secondaries' names and addresses.
/// None (a loud skip) without Debian's knot or nsd.
struct NotifiedFleet {
    pharos: Running,
    api: String,
    address: SocketAddr,
    knot: Running,
    nsd: Running,
    secondaries: [(&'static str, SocketAddr); 2],
}

fn notified_fleet(key: Option<&Tsig>) -> Option<NotifiedFleet> {
    let (Some(knotd), Some(nsd)) = (require("knotd", "knot"), require("nsd", "nsd")) else { return None };
    let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (knot_port, nsd_port) = (free_port(), free_port());
    let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let notify = format!("notify = [\"{}\", \"{}\"]\n", at(knot_port), at(nsd_port));
    let (pharos, api) = start_primary_with_api(address, key, &notify);
    let (mut knot, mut nsd) = (start_knot(&knotd, knot_port, Some(address), key), start_nsd(&nsd, nsd_port, address, key));
    knot.wait_for_zone("knotd", at(knot_port));
    nsd.wait_for_zone("nsd", at(nsd_port));
    Some(NotifiedFleet { pharos, api, address, knot, nsd, secondaries: [("knotd", at(knot_port)), ("nsd", at(nsd_port))] })
}

#[test]
fn knot_and_nsd_follow_notify_after_api_and_file_changes_by_ixfr() {
    // nsd is bound to be kept: a field left out of the pattern would be dropped, and nsd stopped.
    let Some(NotifiedFleet { pharos, api, address, knot, nsd: _nsd, secondaries }) = notified_fleet(None) else { return };
    // A replica's change through the API.
    set_enabled(&api, "b", false);
    wait_for_serial(&secondaries, address, 2024010102, &["192.0.2.10"]);
    assert_eq!(differences_sent(&pharos, 2024010101, 2024010102), 2, "both by IXFR:\n{}", pharos.log());
    // The zone file's, by a reload.
    edit_zone(pharos.dir(), |text| text.replace("A       192.0.2.1\n", "A       192.0.2.100\n"));
    reload(&pharos);
    wait_for_serial(&secondaries, address, 2024010103, &["192.0.2.10"]);
    assert_eq!(answer(secondaries[1].1, ZONE, Rtype::A).2, vec!["example.com 3600 A 192.0.2.100".to_string()]);
    assert_eq!(differences_sent(&pharos, 2024010102, 2024010103), 2, "both by IXFR:\n{}", pharos.log());
    assert!(knot.log().contains("IXFR"), "{}", knot.log());
    assert_eq!(pharos.log().matches("NOTIFY given up").count(), 0, "{}", pharos.log());
}

#[test]
fn knot_and_nsd_follow_a_notify_signed_with_their_key() {
    let Some(NotifiedFleet { pharos, api, address, knot, nsd, secondaries }) = notified_fleet(Some(&KEY)) else { return };
    set_enabled(&api, "b", false);
    wait_for_serial(&secondaries, address, 2024010102, &["192.0.2.10"]);
    assert!(knot.log().contains("notify, incoming, remote 127.0.0.1"), "{}", knot.log());
    assert!(nsd.log().contains("TSIG verified with key xfr-key"), "{}", nsd.log());
    assert!(nsd.log().contains("notify for example.com. from 127.0.0.1 serial 2024010102"), "{}", nsd.log());
    assert_eq!(differences_sent(&pharos, 2024010101, 2024010102), 2, "both by IXFR:\n{}", pharos.log());
    let acknowledged =
        || pharos.log().lines().filter(|line| line.contains("NOTIFY acknowledged") && line.contains("serial=2024010102")).count();
    wait_until("both acknowledge the signed NOTIFY of the change", || acknowledged() == 2);
}
