//! Key rollovers through the binary, watched by a real Unbound: a ZSK
//! rolled by pre-publication and a KSK by double signature, while Unbound,
//! trusting only the anchor it started with, keeps answering secure (AD)
//! for a static name, a routed name, a name that does not exist and the
//! keys themselves. And 1,000 routing updates through the API, each
//! followed by Unbound's answer for the routed name: secure every time,
//! never bogus, whatever the policy.
//!
//! The ZSK rollover and the DS change go through the API of the running
//! server; the KSK rollover through `pharos key`, with the server stopped
//! while it writes the SQLite store the server owns.
//!
//! The DS change of the KSK rollover is real, not simulated in Unbound:
//! the same server serves the parent zone `test.` (signed with its own key,
//! the one trust anchor Unbound has), which delegates `example.test.` with
//! a DS; the test rewrites that DS in the parent's file and reloads, as a
//! registry would, then says so to the API (`ds-changed`). TTLs are 2 s
//! and the configured delays 1 s, so a whole rollover takes seconds; every
//! step is polled with a deadline, asking Unbound between polls.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::declarations::Declarations;
use common::{free_port, request, spawn_with, wait_until};
use domain::base::iana::{Rcode, Rtype};
use domain::base::name::ParsedName;
use domain::base::{Message, MessageBuilder, Name};
use domain::rdata::{Dnskey, Ds, Rrsig};
use serde_json::json;

const CHILD: &str = "$TTL 2\n@ SOA ns hostmaster 1 7200 3600 1209600 2\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n";
const PARENT: &str = "$TTL 2\n@ SOA ns hostmaster 1 7200 3600 1209600 2\n NS ns\nns A 192.0.2.1\n\
example NS ns.example\nns.example A 192.0.2.1\n";

/// How long a poll for one step may take before the test fails.
const STEP_DEADLINE: Duration = Duration::from_secs(60);

/// The pharos process, killed when the test ends.
struct Served {
    child: Child,
    address: SocketAddr,
    /// The control API's base URL (token [`TOKEN`]).
    api: String,
    dir: tempfile::TempDir,
    config: PathBuf,
}

const TOKEN: &str = "rollover-token";

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `pharos key ARGS --config CONFIG` run in `dir`: whether it succeeded,
/// and what it printed (stdout, or stderr on failure).
fn pharos_key(dir: &Path, config: &Path, args: &[&str]) -> (bool, String) {
    let output =
        Command::new(env!("CARGO_BIN_EXE_pharos")).arg("key").args(args).arg("--config").arg(config).current_dir(dir).output().unwrap();
    let printed = if output.status.success() { &output.stdout } else { &output.stderr };
    (output.status.success(), String::from_utf8_lossy(printed).into_owned())
}

impl Served {
    /// `pharos key ARGS`, which must succeed, run while the server is
    /// stopped (it owns its SQLite store while it runs), then the server
    /// started again: what the command printed. Unbound is not asked while
    /// the server is down.
    fn key_while_stopped(&mut self, args: &[&str]) -> String {
        self.stop();
        let printed = self.key(args);
        self.child = spawn_with(&self.config, &self.dir.path().join("pharos.log"), |command| {
            command.current_dir(self.dir.path());
        });
        let address = self.address;
        wait_until("the server is back", || !dnskeys(address).is_empty());
        printed
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `pharos key ARGS`, which must succeed: what it printed.
    fn key(&self, args: &[&str]) -> String {
        let (succeeded, printed) = pharos_key(self.dir.path(), &self.config, args);
        assert!(succeeded, "pharos key {args:?}: {printed}");
        printed
    }

    /// `pharos key ARGS`, which must fail: why.
    fn refused(&self, args: &[&str]) -> String {
        let (succeeded, printed) = pharos_key(self.dir.path(), &self.config, args);
        assert!(!succeeded, "pharos key {args:?} succeeded: {printed}");
        printed
    }

    /// `POST /v1/zones/example.test/keys` with `step`, which must succeed:
    /// the keys after it, as (tag, role, state).
    fn key_step(&self, step: &str) -> Vec<(u64, String, String)> {
        let (status, keys) = self.api_keys("POST", Some(json!({ "step": step })));
        assert_eq!(status, 200, "{step}: {keys}");
        key_states(&keys)
    }

    /// The keys API of example.test: status and body.
    fn api_keys(&self, method: &str, body: Option<serde_json::Value>) -> (u16, serde_json::Value) {
        request(method, &format!("{}/v1/zones/example.test/keys", self.api), Some(TOKEN), body)
    }

    /// Writes the parent zone delegating example.test with `ds` (a DS line
    /// `pharos key` printed) and reloads (SIGHUP), as a registry would.
    fn delegate_with(&self, ds: &str) {
        std::fs::write(self.dir.path().join("test.zone"), format!("{PARENT}example DS {}\n", ds_data(ds))).unwrap();
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGHUP) }, 0);
    }
}

/// (tag, role, state) of each key in an answer of the keys API.
fn key_states(keys: &serde_json::Value) -> Vec<(u64, String, String)> {
    let field = |key: &serde_json::Value, name: &str| key[name].as_str().unwrap().to_string();
    keys.as_array().unwrap().iter().map(|key| (key["tag"].as_u64().unwrap(), field(key, "role"), field(key, "state"))).collect()
}

/// The record data of a DS line `pharos key` printed (its last four fields).
fn ds_data(ds: &str) -> String {
    let fields: Vec<&str> = ds.split_whitespace().collect();
    fields[fields.len() - 4..].join(" ")
}

/// Unbound, killed when the test ends.
struct Unbound {
    child: Child,
    address: SocketAddr,
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Unbound on a free port, asking `server` for test. and
/// example.test., trusting `anchor` (the DS of test.); None (with a loud
/// SKIP, a failure under CI) when Debian's unbound is not installed.
fn start_unbound(dir: &Path, server: SocketAddr, anchor: &str) -> Option<Unbound> {
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let stub = |zone: &str| format!("stub-zone:\n  name: \"{zone}\"\n  stub-addr: {}@{}\n", server.ip(), server.port());
    let config = format!(
        "server:\n  interface: {}\n  port: {}\n  do-ip6: no\n  do-not-query-localhost: no\n  username: \"\"\n  chroot: \"\"\n\
         directory: \"{dir}\"\n  pidfile: \"{dir}/unbound.pid\"\n  use-syslog: no\n  logfile: \"{dir}/unbound.log\"\n\
         verbosity: 1\n  val-log-level: 2\n  access-control: 127.0.0.0/8 allow\n  local-zone: \"test.\" nodefault\n\
         trust-anchor: \"{anchor}\"\nremote-control:\n  control-enable: no\n{}{}",
        address.ip(),
        address.port(),
        stub("test."),
        stub("example.test."),
        dir = dir.display(),
    );
    let config_file = dir.join("unbound.conf");
    std::fs::write(&config_file, config).unwrap();
    match Command::new("unbound").arg("-d").arg("-c").arg(&config_file).stdout(Stdio::null()).stderr(Stdio::null()).spawn() {
        Ok(child) => Some(Unbound { child, address }),
        Err(error) => {
            let message = format!("unbound cannot run ({error}): install the Debian package unbound");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
            eprintln!("SKIP: {message}");
            None
        }
    }
}

/// NAME TYPE asked of `server` with DO=1 and AD=1 (RFC 6840 section 5.7:
/// a resolver then says whether it validated); None on no answer in time.
fn ask(server: SocketAddr, name: &str, rtype: Rtype) -> Option<Message<Vec<u8>>> {
    let mut builder = MessageBuilder::new_vec();
    builder.header_mut().set_id(0x5ec);
    builder.header_mut().set_rd(true);
    builder.header_mut().set_ad(true);
    let mut question = builder.question();
    question.push((Name::<Vec<u8>>::vec_from_str(name).unwrap(), rtype)).unwrap();
    let mut additional = question.additional();
    additional
        .opt(|opt| {
            opt.set_udp_payload_size(1232);
            opt.set_dnssec_ok(true);
            Ok(())
        })
        .unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(additional.finish().as_slice(), server).ok()?;
    let mut buf = vec![0; 4096];
    let len = socket.recv(&mut buf).ok()?;
    buf.truncate(len);
    Message::from_octets(buf).ok()
}

/// What Unbound is asked at every poll: a static name, a routed one, one
/// that does not exist, and the zone's keys.
const WATCHED: [(&str, Rtype, Rcode); 4] = [
    ("www.example.test", Rtype::A, Rcode::NOERROR),
    ("app.example.test", Rtype::A, Rcode::NOERROR),
    // Compact denial (RFC 9824) answers NOERROR, its NSEC saying NXNAME.
    ("nope.example.test", Rtype::A, Rcode::NOERROR),
    ("example.test", Rtype::DNSKEY, Rcode::NOERROR),
];

/// Asks Unbound every watched question; each must come back secure.
fn assert_secure(unbound: &Unbound, step: &str) {
    for (name, rtype, rcode) in WATCHED {
        let response = ask(unbound.address, name, rtype).unwrap_or_else(|| panic!("{step}: Unbound did not answer {name} {rtype}"));
        let header = response.header();
        assert!(
            header.rcode() == rcode && header.ad(),
            "{step}: {name} {rtype}: {:?} AD={} (see unbound.log)",
            header.rcode(),
            header.ad()
        );
    }
}

/// Polls `done` until it holds, asking Unbound between polls: the
/// number of polls, each of which found every answer secure.
fn through(unbound: &Unbound, step: &str, mut done: impl FnMut() -> bool) -> usize {
    let deadline = Instant::now() + STEP_DEADLINE;
    let mut polls = 0;
    loop {
        assert_secure(unbound, step);
        polls += 1;
        if done() {
            return polls;
        }
        assert!(Instant::now() < deadline, "timed out at step: {step}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The (flags, key tag) of each key in the DNSKEY RRset `server` serves.
fn dnskeys(server: SocketAddr) -> Vec<(u16, u16)> {
    let Some(response) = ask(server, "example.test", Rtype::DNSKEY) else { return Vec::new() };
    let records = response.answer().unwrap().limit_to::<Dnskey<_>>();
    records.map(|record| record.unwrap().into_data()).map(|key| (key.flags(), key.key_tag())).collect()
}

/// The key tags of the RRSIGs over NAME TYPE that `server` serves.
fn signed_by(server: SocketAddr, name: &str, rtype: Rtype) -> Vec<u16> {
    let Some(response) = ask(server, name, rtype) else { return Vec::new() };
    let records = response.answer().unwrap().limit_to::<Rrsig<_, ParsedName<_>>>();
    let mut tags: Vec<u16> = records.map(|record| record.unwrap().into_data().key_tag()).collect();
    tags.sort();
    tags
}

/// The key tags of the DS records for example.test that `server` serves.
fn ds_tags(server: SocketAddr) -> Vec<u16> {
    let Some(response) = ask(server, "example.test", Rtype::DS) else { return Vec::new() };
    response.answer().unwrap().limit_to::<Ds<_>>().map(|record| record.unwrap().into_data().key_tag()).collect()
}

/// The tags of the keys with `flags` among `keys`, sorted.
fn tags_with(keys: &[(u16, u16)], flags: u16) -> Vec<u16> {
    let mut tags: Vec<u16> = keys.iter().filter(|(key_flags, _)| *key_flags == flags).map(|(_, tag)| *tag).collect();
    tags.sort();
    tags
}

/// The line `pharos key` printed that holds `needle` and `tag`.
fn line_with<'a>(printed: &'a str, needle: &str, tag: u16) -> &'a str {
    let tag = format!(" {tag} ");
    printed
        .lines()
        .find(|line| line.contains(needle) && format!("{line} ").contains(&tag))
        .unwrap_or_else(|| panic!("no {needle} {tag}: {printed}"))
}

/// Serves test. (CSK) and example.test. (KSK and ZSK) signed, with a
/// routed name in the child, rollover delays of a second; the server and
/// the DS of test., Unbound's trust anchor.
fn serve() -> (Served, String) {
    serve_with_delays(1, 2)
}

/// [`serve`] with the rollover delays given (`[dnssec]`).
fn serve_with_delays(propagation_seconds: u64, ds_ttl_seconds: u64) -> (Served, String) {
    let dir = tempfile::tempdir().unwrap();
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    std::fs::write(dir.path().join("example.test.zone"), CHILD).unwrap();
    let services = Declarations::new()
        .service("app.example.test")
        .policy("round-robin")
        .line("ttl = 1")
        .replica("a", "192.0.2.31")
        .replica("b", "192.0.2.32")
        .toml();
    let config = dir.path().join("pharos.toml");
    let api = format!("127.0.0.1:{}", free_port());
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"{address}\"]\nthreads = 1\nrandom_seed = 1\n[store]\npath = \"state.db\"\n\
             [control]\nlisten = \"{api}\"\ntoken = \"{TOKEN}\"\n\
             [dnssec]\npropagation_seconds = {propagation_seconds}\nds_ttl_seconds = {ds_ttl_seconds}\n\
             [[zone]]\norigin = \"test\"\nfile = \"test.zone\"\ndnssec = true\n\
             [[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\ndnssec = true\n{services}"
        ),
    )
    .unwrap();
    let first_ds = |args: &[&str]| {
        let (succeeded, printed) = pharos_key(dir.path(), &config, args);
        assert!(succeeded, "pharos key {args:?}: {printed}");
        printed.lines().find(|line| line.contains(" DS ")).unwrap().to_string()
    };
    let parent_ds = first_ds(&["generate", "test"]);
    let child_ds = first_ds(&["generate", "example.test", "--ksk-zsk"]);
    std::fs::write(dir.path().join("test.zone"), format!("{PARENT}example DS {}\n", ds_data(&child_ds))).unwrap();
    let child = spawn_with(&config, &dir.path().join("pharos.log"), |command| {
        command.current_dir(dir.path());
    });
    let served = Served { child, address, api: format!("http://{api}"), dir, config };
    wait_until("the signed zones are served", || dnskeys(address).len() == 2);
    (served, parent_ds)
}

/// When the key `tag` reaches `step`, as `pharos key` printed it.
fn step_time(printed: &str, tag: u16, step: &str) -> u64 {
    let state = line_with(printed, "; key", tag);
    let time = state.split(&format!("{step}=")).nth(1).unwrap_or_else(|| panic!("no {step} in {state}"));
    time.split_whitespace().next().unwrap().parse().unwrap()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn unbound_validates_through_a_zsk_and_a_ksk_rollover() {
    let (mut served, parent_ds) = serve();
    let Some(unbound) = start_unbound(served.dir.path(), served.address, &parent_ds) else { return };
    let server = served.address;
    wait_until("Unbound answers", || ask(unbound.address, "www.example.test", Rtype::A).is_some());
    assert_secure(&unbound, "before any rollover");
    let keys = dnskeys(server);
    let (ksk, old_zsk) = (tags_with(&keys, 257), tags_with(&keys, 256));
    let mut polls = 0;

    // ZSK by pre-publication, through the API of the running server.
    let keys = served.key_step("roll-zsk");
    let new_zsk: Vec<u16> =
        keys.iter().filter(|(tag, role, _)| role == "zsk" && !old_zsk.contains(&(*tag as u16))).map(|key| key.0 as u16).collect();
    assert_eq!(keys.iter().filter(|(_, _, state)| state == "published").count(), 1, "{keys:?}");
    assert_eq!(tags_with(&dnskeys(server), 256).len(), 2, "the API reloads: the new ZSK is published on return");
    assert_secure(&unbound, "new ZSK published");
    let (_, shown) = served.api_keys("GET", None);
    let active_at = shown.as_array().unwrap().iter().find(|key| key["tag"] == new_zsk[0]).unwrap()["times"]["active"].as_u64().unwrap();
    let signed_before = signed_by(server, "www.example.test", Rtype::A);
    if unix_now() < active_at {
        assert_eq!(signed_before, old_zsk, "a published ZSK signs nothing yet");
    }
    polls += through(&unbound, "new ZSK active", || signed_by(server, "www.example.test", Rtype::A) == new_zsk);
    assert_eq!(signed_by(server, "app.example.test", Rtype::A), new_zsk, "routed answers follow the new ZSK");
    polls += through(&unbound, "old ZSK removed", || tags_with(&dnskeys(server), 256) == new_zsk);
    let removed = Instant::now();
    polls += through(&unbound, "caches past the old ZSK", || removed.elapsed() > Duration::from_secs(5));

    // KSK by double signature, with the DS changed at the parent; by the
    // command line, with the server stopped (it owns its SQLite store).
    let printed = served.key_while_stopped(&["rollover", "example.test", "--ksk"]);
    polls += through(&unbound, "new KSK published", || tags_with(&dnskeys(server), 257).len() == 2);
    let both = tags_with(&dnskeys(server), 257);
    let new_ksk: Vec<u16> = both.iter().copied().filter(|tag| !ksk.contains(tag)).collect();
    assert_eq!(signed_by(server, "example.test", Rtype::DNSKEY), both, "both KSKs sign the DNSKEY RRset");
    let published = step_time(&printed, new_ksk[0], "published");
    // The new KSK is known to every cache after the delay and DNSKEY TTL (1 s + 2 s).
    polls += through(&unbound, "new KSK known to caches", || unix_now() >= published + 3);
    served.delegate_with(line_with(&printed, " DS ", new_ksk[0]));
    polls += through(&unbound, "the parent's DS changed", || ds_tags(server) == new_ksk);
    served.key_step("ds-changed");
    polls += through(&unbound, "old KSK removed", || tags_with(&dnskeys(server), 257) == new_ksk);
    assert_eq!(signed_by(server, "example.test", Rtype::DNSKEY), new_ksk);
    let removed = Instant::now();
    polls += through(&unbound, "caches past the old KSK", || removed.elapsed() > Duration::from_secs(5));
    eprintln!("{polls} polls of {} questions, every answer secure", WATCHED.len());
}

#[test]
fn unbound_finds_every_answer_secure_through_1000_routing_updates() {
    const UPDATES: u32 = 1000;
    const POLICIES: [&str; 4] = ["round-robin", "static", "weighted", "failover"];
    let (served, parent_ds) = serve();
    let Some(unbound) = start_unbound(served.dir.path(), served.address, &parent_ds) else { return };
    wait_until("Unbound answers", || ask(unbound.address, "www.example.test", Rtype::A).is_some());
    for update in 0..UPDATES {
        // Two replicas at addresses that move with every update (TTL 1 s:
        // Unbound asks again at least every second).
        let (a, b) = (update % 250 + 1, (update * 7) % 250 + 1);
        let service = json!({ "name": "app.example.test", "policy": POLICIES[update as usize % POLICIES.len()], "ttl": 1, "replica": [
            { "id": "a", "address": format!("192.0.2.{a}") },
            { "id": "b", "address": format!("198.51.100.{b}") },
        ] });
        let (status, reply) = request("PUT", &format!("{}/v1/services/app.example.test", served.api), Some(TOKEN), Some(service));
        assert_eq!(status, 200, "update {update}: {reply}");
        let response = ask(unbound.address, "app.example.test", Rtype::A).unwrap_or_else(|| panic!("update {update}: no answer"));
        let header = response.header();
        assert!(
            header.rcode() == Rcode::NOERROR && header.ad(),
            "update {update}: {:?} AD={} (see unbound.log)",
            header.rcode(),
            header.ad()
        );
    }
    assert_secure(&unbound, "after the updates");
}

#[test]
fn rollover_refusals_are_clear() {
    // Delays of an hour: the rollovers begun here stay in their first step
    // however slow the machine, as the counts at the end expect.
    let (mut served, _) = serve_with_delays(3600, 3600);
    let step = |zone: &str, step: &str| {
        let url = format!("{}/v1/zones/{zone}/keys", served.api);
        request("POST", &url, Some(TOKEN), Some(json!({ "step": step })))
    };
    let refusals = [
        ("example.test", "ds-changed", 409, "no KSK rollover waits for its DS"),
        ("test", "roll-zsk", 409, "the zone has a CSK"),
        ("other.test", "roll-zsk", 404, "zone other.test not found"),
        ("example.test", "roll-everything", 422, "unknown variant"),
    ];
    for (zone, name, status, why) in refusals {
        let (answered, body) = step(zone, name);
        assert!(answered == status && body.to_string().contains(why), "{zone} {name}: {answered} {body}");
    }
    assert_eq!(step("example.test", "roll-zsk").0, 200);
    let (answered, body) = step("example.test", "roll-zsk");
    assert!(answered == 409 && body["error"].as_str().unwrap().contains("a ZSK rollover is under way"), "{body}");

    served.stop();
    let refused = |args: &[&str]| served.refused(args);
    let csk = refused(&["rollover", "test", "--zsk"]);
    assert!(csk.contains("the zone has a CSK"), "{csk}");
    assert!(refused(&["ds-changed", "example.test"]).contains("no KSK rollover waits for its DS"));
    served.key(&["rollover", "example.test", "--ksk"]);
    assert!(refused(&["ds-changed", "example.test"]).contains("the new KSK is in every cached DNSKEY RRset only from"));
    assert!(refused(&["rollover", "example.test", "--ksk"]).contains("a KSK rollover is under way"));
    assert!(refused(&["rollover", "other.test", "--zsk"]).contains("serves no zone other.test"));
    let shown = served.key(&["show", "example.test"]);
    assert_eq!(shown.matches("ksk active").count(), 2, "{shown}");
    assert_eq!(shown.matches("zsk published").count(), 1, "{shown}");
    assert_eq!(shown.matches(" DS ").count(), 2, "{shown}");
}
