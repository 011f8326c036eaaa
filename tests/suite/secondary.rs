//! Pharos as the secondary of a hidden primary, against the real thing:
//! Knot DNS (knotd) and BIND (named) as primaries on loopback, transfers
//! signed with TSIG. Pharos serves the zone after the first transfer, with
//! a routed service inside it; an update on the primary (`knsupdate`,
//! `nsupdate`) reaches Pharos's answers by NOTIFY and IXFR; a restart with
//! the primary down serves the last transfer from the store; a short SOA
//! expire gives SERVFAIL once the primary is gone; a transfer signed with
//! the wrong secret is refused and the zone stays as it was; a NOTIFY from
//! elsewhere, or for a zone that is not a secondary one, is refused.
//!
//! Without knotd, knsupdate, named or nsupdate the tests that need them
//! print SKIP and pass, unless CI is set, where they fail.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use domain::base::iana::{Opcode, Rcode, Rtype};
use domain::base::{Message, MessageBuilder, Name};

use crate::common::declarations::Declarations;
use crate::common::{free_port, request, require, udp_query, wait_until};
use crate::transfer::{KEY, Running, Tsig, WRONG_KEY, run};

const ZONE: &str = "secondary.test";
/// A service routed inside the secondary zone.
const SERVICE: &str = "svc.secondary.test";

/// The primary's zone, with the SOA's refresh, retry and expire times.
fn zone_text(refresh: u32, retry: u32, expire: u32) -> String {
    format!("$TTL 300\n@ SOA ns hostmaster 1 {refresh} {retry} {expire} 60\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n")
}

fn at(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// knotd on `port`, the primary of `zone` (transfers and updates signed
/// with the key), notifying `secondary`.
fn start_knot(knotd: &Path, port: u16, secondary: SocketAddr, zone: &str) -> Running {
    let dir = tempfile::Builder::new().prefix("secondary-knot-").tempdir().unwrap();
    let d = dir.path().display();
    std::fs::write(dir.path().join("zone"), zone).unwrap();
    // Knot 3.2 does not make the directory of its journal, where updates go.
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let conf = format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  background-workers: 1\n\
         database:\n  storage: \"{d}/db\"\n\
         log:\n  - target: stderr\n    any: info\n\
         key:\n  - id: {name}\n    algorithm: hmac-sha256\n    secret: {secret}\n\
         remote:\n  - id: pharos\n    address: {}@{}\n\
         acl:\n  - id: signed\n    address: 127.0.0.0/8\n    action: [transfer, update]\n    key: {name}\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: changes\n\
         zone:\n  - domain: {ZONE}.\n    file: zone\n    notify: pharos\n    acl: signed\n",
        secondary.ip(),
        secondary.port(),
        name = KEY.name,
        secret = KEY.secret,
    );
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    let mut command = Command::new(knotd);
    command.arg("-c").arg(dir.path().join("knot.conf")).current_dir(dir.path());
    let mut knot = run(command, dir);
    wait_for_serial("knotd", &mut knot, at(port), 1);
    knot
}

/// named on `port`, the primary of `zone` (transfers and updates signed
/// with the key), notifying `secondary`.
fn start_named(named: &Path, port: u16, secondary: SocketAddr, zone: &str) -> Running {
    let dir = tempfile::Builder::new().prefix("secondary-named-").tempdir().unwrap();
    let d = dir.path().display();
    std::fs::write(dir.path().join("zone"), zone).unwrap();
    let conf = format!(
        "key \"{name}\" {{ algorithm hmac-sha256; secret \"{secret}\"; }};\n\
         options {{ directory \"{d}\"; pid-file \"{d}/named.pid\"; session-keyfile \"{d}/session.key\"; managed-keys-directory \"{d}\"; listen-on port {port} {{ 127.0.0.1; }}; listen-on-v6 {{ none; }};\n\
         \x20 recursion no; notify explicit; also-notify {{ {} port {}; }}; }};\n\
         zone \"{ZONE}\" {{ type primary; file \"zone\"; allow-transfer {{ key \"{name}\"; }}; allow-update {{ key \"{name}\"; }}; }};\n",
        secondary.ip(),
        secondary.port(),
        name = KEY.name,
        secret = KEY.secret,
    );
    std::fs::write(dir.path().join("named.conf"), conf).unwrap();
    let mut command = Command::new(named);
    command.arg("-g").arg("-c").arg(dir.path().join("named.conf"));
    let mut primary = run(command, dir);
    wait_for_serial("named", &mut primary, at(port), 1);
    primary
}

/// Waits until `server` serves the zone at `serial` or newer.
fn wait_for_serial(what: &str, process: &mut Running, server: SocketAddr, serial: u32) {
    wait_until(&format!("{what} serves {ZONE} at serial {serial}"), || {
        assert!(process.running(), "{what} exited:\n{}", process.log());
        serial_of(server).is_some_and(|served| served >= serial)
    });
}

fn serial_of(server: SocketAddr) -> Option<u32> {
    let answer = udp_query(server, ZONE, Rtype::SOA)?;
    let soa = answer.answer().ok()?.limit_to::<domain::rdata::Soa<_>>().next()?.ok()?;
    Some(soa.data().serial().into_int())
}

/// A Pharos secondary of the zone: its directory (config and store)
/// outlives each run, so that a restart finds the store's copy.
struct Secondary {
    dir: tempfile::TempDir,
    address: SocketAddr,
    /// The control API's base URL.
    api: String,
    running: Option<Running>,
}

/// The control API's token.
const TOKEN: &str = "secondary-test-token";

impl Secondary {
    /// Configured to copy the zone from `primaries`, in order, signing
    /// with `key`.
    fn new(primaries: &[SocketAddr], key: &Tsig) -> Secondary {
        let dir = tempfile::Builder::new().prefix("secondary-pharos-").tempdir().unwrap();
        let api = format!("http://{}", at(free_port()));
        let secondary = Secondary { dir, address: at(free_port()), api, running: None };
        secondary.configure(primaries, key);
        secondary
    }

    fn configure(&self, primaries: &[SocketAddr], key: &Tsig) {
        let primaries: Vec<String> =
            primaries.iter().map(|primary| format!("{{ address = \"{primary}\", key = \"{}\" }}", key.name)).collect();
        let services = Declarations::new().service(SERVICE).policy("failover").line("ttl = 60").replica("a", "192.0.2.10").toml();
        let config = format!(
            "[server]\nlisten = [\"{}\"]\nthreads = 1\n[store]\npath = \"{}\"\n[control]\nlisten = \"{}\"\ntoken = \"{TOKEN}\"\n{services}\n\
             [[tsig_key]]\nname = \"{}\"\nsecret = \"{}\"\n\
             [[zone]]\norigin = \"{ZONE}\"\nprimaries = [{}]\nrefresh_min_seconds = 1\n",
            self.address,
            self.dir.path().join("pharos.sqlite").display(),
            self.api.trim_start_matches("http://"),
            key.name,
            key.secret,
            primaries.join(", "),
        );
        std::fs::write(self.config(), config).unwrap();
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("pharos.toml")
    }

    /// Starts (or starts again) `pharos serve`, and waits until it answers.
    fn start(&mut self) {
        self.running = None;
        let mut command = Command::new(env!("CARGO_BIN_EXE_pharos"));
        command.args(["serve", "--config"]).arg(self.config());
        self.running = Some(run(command, tempfile::Builder::new().prefix("secondary-log-").tempdir().unwrap()));
        let address = self.address;
        wait_until("Pharos answers", || {
            assert!(self.process().running(), "pharos exited:\n{}", self.log());
            udp_query(address, ZONE, Rtype::SOA).is_some()
        });
    }

    fn process(&mut self) -> &mut Running {
        self.running.as_mut().expect("started")
    }

    fn log(&self) -> String {
        self.running.as_ref().map(Running::log).unwrap_or_default()
    }

    /// The RCODE and addresses Pharos answers for `name` A.
    fn addresses(&self, name: &str) -> (Rcode, Vec<String>) {
        let answer = udp_query(self.address, name, Rtype::A).unwrap_or_else(|| panic!("no answer for {name}"));
        let records = answer.answer().unwrap().limit_to::<domain::rdata::A>().map(|record| record.unwrap().data().to_string());
        (answer.header().rcode(), records.collect())
    }

    /// Waits until Pharos answers `name` A with `address`.
    fn wait_for(&mut self, name: &str, address: &str) {
        wait_until(&format!("Pharos answers {name} A {address}"), || {
            assert!(self.process().running(), "pharos exited:\n{}", self.log());
            self.addresses(name) == (Rcode::NOERROR, vec![address.to_string()])
        });
    }
}

/// Adds `name` A `address` to the zone on `primary` with `program`
/// (knsupdate or nsupdate), signed with the key.
fn update(program: &Path, primary: SocketAddr, name: &str, address: &str) {
    let said = update_output(program, primary, name, address);
    assert!(!said.contains("REFUSED") && !said.contains("failed"), "{} failed: {said}", program.display());
}

/// What `program` says when it sends [`update`]'s change to `server`.
fn update_output(program: &Path, server: SocketAddr, name: &str, address: &str) -> String {
    let script = format!("server {} {}\nzone {ZONE}.\nupdate add {name}. 300 A {address}\nsend\n", server.ip(), server.port());
    let mut child = Command::new(program)
        .arg("-y")
        .arg(format!("hmac-sha256:{}:{}", KEY.name, KEY.secret))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// A NOTIFY for `zone` sent to `server` from `source` (a loopback
/// address): the reply's RCODE, AA and Extended DNS Error code.
fn notify(server: SocketAddr, source: &str, zone: &str) -> (Rcode, bool, Option<u16>) {
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(4242);
    builder.header_mut().set_opcode(Opcode::NOTIFY);
    builder.header_mut().set_aa(true);
    let mut question = builder.question();
    question.push((Name::<Vec<u8>>::vec_from_str(zone).unwrap(), Rtype::SOA)).unwrap();
    let mut additional = question.additional();
    additional.opt(|_| Ok(())).unwrap();
    let socket = UdpSocket::bind((source, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    socket.send_to(&additional.finish(), server).unwrap();
    let mut buffer = [0; 512];
    let len = socket.recv(&mut buffer).unwrap();
    let reply = Message::from_octets(buffer[..len].to_vec()).unwrap();
    let extended = reply.opt().and_then(|opt| {
        opt.opt().iter::<domain::base::opt::ExtendedError<_>>().next().and_then(Result::ok).map(|error| error.code().to_int())
    });
    assert_eq!(reply.header().opcode(), Opcode::NOTIFY, "the reply keeps the opcode");
    (reply.header().rcode(), reply.header().aa(), extended)
}

/// The whole life of a secondary zone with `primary` updated by `updater`,
/// listed after a primary that is down: the first transfer, a service
/// inside, an update by NOTIFY and IXFR, and a restart with the primary
/// down.
fn follows_its_primary(updater: &Path, primary_port: u16, start_primary: impl FnOnce(SocketAddr) -> Running) {
    let (down, primary_address) = (at(free_port()), at(primary_port));
    let mut pharos = Secondary::new(&[down, primary_address], &KEY);
    let primary = start_primary(pharos.address);
    pharos.start();
    pharos.wait_for(&format!("www.{ZONE}"), "192.0.2.2");
    assert!(pharos.log().contains(&format!("primary={down}")), "the first primary was tried first:\n{}", pharos.log());
    assert_eq!(pharos.addresses(SERVICE), (Rcode::NOERROR, vec!["192.0.2.10".to_string()]), "the service inside is routed");
    assert!(pharos.log().contains("by=AXFR"), "the first copy is whole:\n{}", pharos.log());

    update(updater, primary_address, &format!("new.{ZONE}"), "192.0.2.99");
    pharos.wait_for(&format!("new.{ZONE}"), "192.0.2.99");
    let log = pharos.log();
    assert!(log.contains("NOTIFY taken"), "the primary's NOTIFY started it:\n{log}");
    assert!(log.contains("by=IXFR"), "the difference came by IXFR:\n{log}");
    assert_eq!(pharos.addresses(&format!("www.{ZONE}")).1, vec!["192.0.2.2"], "the rest of the zone stays");
    let refused = update_output(updater, pharos.address, &format!("other.{ZONE}"), "192.0.2.98");
    assert!(refused.contains("REFUSED"), "an update to the secondary goes to its primary: {refused}");

    let (status, shown) = request("GET", &format!("{}/v1/secondary", pharos.api), Some(TOKEN), None);
    assert_eq!(status, 200);
    let zone = &shown[0];
    assert_eq!(
        (zone["zone"].as_str(), zone["expired"].as_bool(), zone["last_error"].is_null()),
        (Some("secondary.test."), Some(false), true)
    );
    assert!(zone["serial"].as_u64().is_some_and(|serial| serial > 1) && zone["next_check"].is_u64(), "{shown}");
    let ctl = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", &pharos.api, "--token", TOKEN]).args(args).output();
        let output = output.unwrap();
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (listed, table) = ctl(&["zone", "secondary"]);
    assert!(listed && table.contains("secondary.test.") && table.contains("serving"), "{table}");
    let (refreshed, table) = ctl(&["zone", "refresh", ZONE]);
    assert!(refreshed && table.contains("secondary.test."), "{table}");
    let refresh = |zone: &str| request("POST", &format!("{}/v1/zones/{zone}/refresh", pharos.api), Some(TOKEN), None).0;
    assert_eq!((refresh(ZONE), refresh("other.test")), (200, 404), "only a secondary zone is refreshed");

    let config = std::fs::read_to_string(pharos.config()).unwrap();
    std::fs::write(pharos.config(), config.replace("refresh_min_seconds = 1", "refresh_min_seconds = 2")).unwrap();
    let (status, refused) = request("POST", &format!("{}/v1/reload", pharos.api), Some(TOKEN), None);
    assert!(status != 200 && refused.to_string().contains("takes a restart"), "{status} {refused}");
    std::fs::write(pharos.config(), config).unwrap();

    assert_eq!(notify(pharos.address, "127.0.0.1", ZONE), (Rcode::NOERROR, true, None), "a NOTIFY from the primary's address");
    assert_eq!(notify(pharos.address, "127.0.0.2", ZONE), (Rcode::REFUSED, false, Some(18)), "from another address");
    assert_eq!(notify(pharos.address, "127.0.0.1", "other.test"), (Rcode::REFUSED, false, Some(20)), "no such secondary zone");

    drop(primary);
    pharos.start();
    pharos.wait_for(&format!("new.{ZONE}"), "192.0.2.99");
    assert_eq!(pharos.addresses(SERVICE).1, vec!["192.0.2.10"], "the service too");
    let log = pharos.log();
    assert!(log.contains("SOA query failed"), "the primary is down:\n{log}");
}

#[test]
fn pharos_follows_a_knot_primary_and_keeps_its_copy_across_a_restart() {
    let (Some(knotd), Some(knsupdate)) = (require("knotd", "knot"), require("knsupdate", "knot-dnsutils")) else { return };
    let port = free_port();
    follows_its_primary(&knsupdate, port, |secondary| start_knot(&knotd, port, secondary, &zone_text(3600, 600, 86400)));
}

#[test]
fn pharos_follows_a_bind_primary() {
    let (Some(named), Some(nsupdate)) = (require("named", "bind9"), require("nsupdate", "bind9-dnsutils")) else { return };
    let port = free_port();
    follows_its_primary(&nsupdate, port, |secondary| start_named(&named, port, secondary, &zone_text(3600, 600, 86400)));
}

#[test]
fn the_zone_expires_into_servfail_once_its_primary_is_gone() {
    let Some(knotd) = require("knotd", "knot") else { return };
    let port = free_port();
    let mut pharos = Secondary::new(&[at(port)], &KEY);
    let knot = start_knot(&knotd, port, pharos.address, &zone_text(1, 1, 4));
    pharos.start();
    pharos.wait_for(&format!("www.{ZONE}"), "192.0.2.2");
    drop(knot);
    wait_until("the copy expires", || pharos.addresses(&format!("www.{ZONE}")).0 == Rcode::SERVFAIL);
    assert!(pharos.log().contains("secondary zone expired"), "{}", pharos.log());
}

#[test]
fn a_transfer_signed_with_the_wrong_secret_is_refused_and_the_zone_stays() {
    let (Some(knotd), Some(knsupdate)) = (require("knotd", "knot"), require("knsupdate", "knot-dnsutils")) else { return };
    let port = free_port();
    let mut pharos = Secondary::new(&[at(port)], &KEY);
    let _knot = start_knot(&knotd, port, pharos.address, &zone_text(1, 1, 86400));
    pharos.start();
    pharos.wait_for(&format!("www.{ZONE}"), "192.0.2.2");
    pharos.configure(&[at(port)], &WRONG_KEY);
    pharos.start();
    update(&knsupdate, at(port), &format!("new.{ZONE}"), "192.0.2.99");
    // Knot DNS answers NOTAUTH, BADSIG: it could not check the request.
    wait_until("Pharos sees its requests refused", || pharos.log().contains("TSIG: server failed to verify MAC"));
    assert_eq!(pharos.addresses(&format!("www.{ZONE}")).1, vec!["192.0.2.2"], "the copy is served as it was");
    assert_eq!(pharos.addresses(&format!("new.{ZONE}")).0, Rcode::NXDOMAIN, "the update did not come in");
}
