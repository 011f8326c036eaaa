//! DNS UPDATE against Knot DNS: the same UPDATE messages, in the same
//! order, to a knotd serving a zone with DDNS allowed and to a Pharos
//! keeping the same zone in its store. Most messages are written by real
//! clients, Knot's `knsupdate` and BIND's `nsupdate` in turn, sent to a
//! socket of the test's that passes each on to Pharos and hands Pharos's
//! reply back (the client must see success exactly when it is NOERROR),
//! then to Knot; the malformed ones no client writes are built here.
//! Each RCODE must be the one expected from both; after the whole
//! sequence, both zones (by AXFR) must be the same, SOA serial included
//! (Knot's default serial policy increments by one, as Pharos does).
//!
//! Not compared: DNAMEs added, and records added below a DNAME. Knot 3.2
//! (Debian's) refuses the latter, then stops answering updates; a DNAME
//! added where one is makes knotd crash (segfault). Pharos follows
//! Knot's current code instead (`ddns.c`: a DNAME replaces a DNAME, is
//! ignored beside a CNAME or above names; a record below a DNAME is
//! ignored), and crates/update's tests/suite/apply.rs checks it.
//!
//! Nor a record added again with another TTL: RFC 2136 section 3.4.2.2
//! replaces the record, so its RRset takes the new TTL, as Pharos does
//! (and BIND); Knot ignores the record.
//!
//! Skipped, loudly, when knotd or knsupdate is not installed; knsupdate
//! writes every client's update when nsupdate is not.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use domain::base::iana::Rtype;
use domain::base::rdata::ComposeRecordData;
use domain::base::{Message, ParsedName, ToName};
use domain::rdata::ZoneRecordData;
use pharos_update::write::{Rr, rr, update_message};
use pharos_wire::{MessageWriter, rcode, types};
use pharos_zone::journal::Record;
use serde_json::json;

use crate::common;

const CLASS_IN: u16 = types::CLASS_IN;
const ANY: u16 = types::CLASS_ANY;
const NONE: u16 = types::CLASS_NONE;

/// The zone the updates change, in both servers.
const ORIGIN: &str = "example.test";
/// The zone crates/update's tests change too.
const ZONE: &str = include_str!("../zones/update.test.zone");
const TOKEN: &str = "update-knot-token";

fn name(text: &str) -> Vec<u8> {
    pharos_wire::name::from_dotted(text).expect("a test name")
}

/// An A record added (class IN).
fn add_a(owner: &str, ttl: u32, address: [u8; 4]) -> Rr {
    rr(owner, types::A, CLASS_IN, ttl, &address)
}

fn message(zone: &str, prerequisites: &[Rr], updates: &[Rr]) -> Vec<u8> {
    update_message(0x2136, zone, prerequisites, updates)
}

/// How long knotd may take to serve the zone, and any one exchange.
const DEADLINE: Duration = Duration::from_secs(20);
/// How long a server may take to answer an update (each answers in milliseconds).
const REPLY: Duration = Duration::from_secs(3);

/// One update of the sequence and the RCODE both must answer.
struct Case {
    what: &'static str,
    sent: Sent,
    expected: u16,
    /// Knot's reply where it differs on purpose: `None`, no reply at all.
    knot: Option<u16>,
}

enum Sent {
    /// A client's commands between `zone` and `send` (knsupdate and
    /// nsupdate read the same).
    Client(&'static str),
    /// A message built here.
    Built(Vec<u8>),
}

fn client(what: &'static str, expected: u16, commands: &'static str) -> Case {
    Case { what, sent: Sent::Client(commands), expected, knot: Some(expected) }
}

fn built(what: &'static str, expected: u16, message: Vec<u8>) -> Case {
    Case { what, sent: Sent::Built(message), expected, knot: Some(expected) }
}

fn cases() -> Vec<Case> {
    use rcode::*;
    let add = [add_a("added.example.test", 300, [192, 0, 2, 200])];
    vec![
        client("RRset exists", NOERROR, "prereq yxrrset www.example.test. A\nupdate add p1.example.test. 300 A 192.0.2.101"),
        client("RRset exists, failing", NXRRSET, "prereq yxrrset nope.example.test. A\nupdate add x.example.test. 300 A 192.0.2.1"),
        client(
            "RRset exists with these records",
            NOERROR,
            "prereq yxrrset www.example.test. A 192.0.2.1\nprereq yxrrset www.example.test. A 192.0.2.2\nupdate add p2.example.test. 300 A 192.0.2.102",
        ),
        client(
            "RRset exists with these records, only part",
            NXRRSET,
            "prereq yxrrset www.example.test. A 192.0.2.1\nupdate add x.example.test. 300 A 192.0.2.1",
        ),
        client("RRset does not exist", NOERROR, "prereq nxrrset www.example.test. AAAA\nupdate add p3.example.test. 300 A 192.0.2.103"),
        client("RRset does not exist, failing", YXRRSET, "prereq nxrrset www.example.test. A\nupdate add x.example.test. 300 A 192.0.2.1"),
        client("name in use", NOERROR, "prereq yxdomain www.example.test.\nupdate add p4.example.test. 300 A 192.0.2.104"),
        client("name in use, failing", NXDOMAIN, "prereq yxdomain nope.example.test.\nupdate add x.example.test. 300 A 192.0.2.1"),
        client(
            "an empty non-terminal is not in use",
            NXDOMAIN,
            "prereq yxdomain b.c.example.test.\nupdate add x.example.test. 300 A 192.0.2.1",
        ),
        client("name not in use", NOERROR, "prereq nxdomain nope.example.test.\nupdate add p5.example.test. 300 A 192.0.2.105"),
        client("name not in use, failing", YXDOMAIN, "prereq nxdomain www.example.test.\nupdate add x.example.test. 300 A 192.0.2.1"),
        client("a new name", NOERROR, "update add new.example.test. 300 A 192.0.2.7\nupdate add NEW.example.test. 300 AAAA 2001:db8::7"),
        client("a record more in an RRset", NOERROR, "update add www.example.test. 300 A 192.0.2.3"),
        client("a record there already", NOERROR, "update add www.example.test. 300 A 192.0.2.2"),
        client("a record more in an RRset, another TTL", NOERROR, "update add www.example.test. 60 A 192.0.2.4"),
        client(
            "TXT, MX and SRV",
            NOERROR,
            "update add t.example.test. 300 TXT \"two\" \"strings\"\nupdate add example.test. 300 MX 20 mx2.example.test.\nupdate add _sip._tcp.example.test. 300 SRV 0 5 5060 sip.example.test.",
        ),
        client("delete an RRset", NOERROR, "update delete www.example.test. TXT"),
        client("delete a record", NOERROR, "update delete www.example.test. A 192.0.2.2"),
        client("delete a name", NOERROR, "update delete mail.example.test."),
        client("delete what is not there", NOERROR, "update delete www.example.test. A 192.0.2.250\nupdate delete nope.example.test."),
        client("delete the apex SOA", NOERROR, "update delete example.test. SOA"),
        client("delete the apex NS RRset", NOERROR, "update delete example.test. NS"),
        client(
            "delete every apex NS record",
            NOERROR,
            "update delete example.test. NS ns1.example.test.\nupdate delete example.test. NS ns2.example.test.",
        ),
        client("delete everything at the apex", NOERROR, "update delete example.test."),
        client("a CNAME where data is", NOERROR, "update add www.example.test. 300 CNAME mail.example.test."),
        client("data where a CNAME is", NOERROR, "update add alias.example.test. 300 A 192.0.2.8"),
        client(
            "a CNAME's name compared ignoring case",
            NOERROR,
            "prereq yxrrset alias.example.test. CNAME WWW.Example.TEST.\nupdate add p7.example.test. 300 A 192.0.2.107",
        ),
        client(
            "names in data lowercased",
            NOERROR,
            "update add upper.example.test. 300 CNAME WWW.Example.TEST.\nupdate add upper2.example.test. 300 MX 5 MX.Example.TEST.",
        ),
        client("a record's name in its data deleted ignoring case", NOERROR, "update delete example.test. MX 10 MAIL.example.test."),
        client("a CNAME replacing a CNAME", NOERROR, "update add alias.example.test. 600 CNAME new.example.test."),
        client("a CNAME at a new name", NOERROR, "update add c2.example.test. 300 CNAME www.example.test."),
        client(
            "a newer SOA",
            NOERROR,
            "update add example.test. 300 SOA ns.example.test. hostmaster.example.test. 2030000000 3600 600 86400 300",
        ),
        client(
            "an older SOA beside a change",
            NOERROR,
            "update add example.test. 300 SOA ns.example.test. hostmaster.example.test. 2020000000 3600 600 86400 300\nupdate add p6.example.test. 300 A 192.0.2.106",
        ),
        client("changes in order", NOERROR, "update delete alias.example.test. CNAME\nupdate add alias.example.test. 300 A 192.0.2.8"),
        client("a name outside the zone", NOTZONE, "update add www.example.org. 300 A 192.0.2.1"),
        built("a prerequisite with a TTL", FORMERR, message(ORIGIN, &[rr("www.example.test", types::A, ANY, 300, &[])], &add)),
        built(
            "a prerequisite of class ANY with data",
            FORMERR,
            message(ORIGIN, &[rr("www.example.test", types::A, ANY, 0, &[192, 0, 2, 1])], &add),
        ),
        built("a prerequisite of class CH", FORMERR, message(ORIGIN, &[rr("www.example.test", types::A, 3, 0, &[])], &add)),
        built("a prerequisite outside the zone", NOTZONE, message(ORIGIN, &[rr("www.example.org", types::A, ANY, 0, &[])], &add)),
        built(
            "a deletion of class ANY with data",
            FORMERR,
            message(ORIGIN, &[], &[rr("www.example.test", types::A, ANY, 0, &[192, 0, 2, 1])]),
        ),
        built("an added record of type ANY", FORMERR, message(ORIGIN, &[], &[rr("www.example.test", types::ANY, CLASS_IN, 300, &[])])),
        built(
            "a deletion of class NONE with a TTL",
            FORMERR,
            message(ORIGIN, &[], &[rr("www.example.test", types::A, NONE, 300, &[192, 0, 2, 1])]),
        ),
        built("a deletion of class NONE, type ANY", FORMERR, message(ORIGIN, &[], &[rr("www.example.test", types::ANY, NONE, 0, &[])])),
        built("a change of class CH", FORMERR, message(ORIGIN, &[], &[rr("www.example.test", types::A, 3, 300, &[192, 0, 2, 1])])),
        built(
            "an A record of three octets",
            FORMERR,
            message(ORIGIN, &[], &[rr("www.example.test", types::A, CLASS_IN, 300, &[192, 0, 2])]),
        ),
        built("a zone not served", NOTAUTH, message("example.org", &[], &[add_a("www.example.org", 300, [192, 0, 2, 1])])),
        built("a zone section of type A", FORMERR, {
            let mut message = message(ORIGIN, &[], &add);
            message[12 + name(ORIGIN).len() + 1] = types::A as u8;
            message
        }),
        // RFC 2136 section 3.1.1 says FORMERR; Knot does not answer.
        Case {
            knot: None,
            ..built("two zones", FORMERR, {
                let mut message = message(ORIGIN, &[], &[]);
                message[5] = 2;
                message.extend(&message[12..].to_vec());
                message
            })
        },
        built("a message cut short", FORMERR, {
            let mut message = message(ORIGIN, &[], &add);
            message.truncate(message.len() - 2);
            message
        }),
    ]
}

#[test]
fn updates_do_what_knot_does() {
    let (Some(knotd), Some(knsupdate)) = (common::require("knotd", "knot"), common::require("knsupdate", "knot-dnsutils")) else {
        return;
    };
    let nsupdate = common::require("nsupdate", "bind9-dnsutils");
    let clients: Vec<PathBuf> = [Some(knsupdate), nsupdate].into_iter().flatten().collect();
    let knot = Knot::start(&knotd, ZONE);
    let pharos = start_pharos();
    let relay = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    relay.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut differences = Vec::new();
    for (index, case) in cases().into_iter().enumerate() {
        let (request, answer_client): (Vec<u8>, Option<(Child, SocketAddr)>) = match &case.sent {
            Sent::Client(commands) => {
                let program = &clients[index % clients.len()];
                let mut client = run_client(program, relay.local_addr().unwrap(), commands);
                let mut buffer = vec![0; 65535];
                let (length, from) = relay.recv_from(&mut buffer).unwrap_or_else(|error| {
                    let _ = client.kill();
                    panic!("{}: {} sent nothing: {error}", case.what, program.display())
                });
                buffer.truncate(length);
                (buffer, Some((client, from)))
            }
            Sent::Built(message) => (message.clone(), None),
        };
        let reply = exchange(pharos.address, &request).unwrap_or_else(|| panic!("{}: Pharos did not reply", case.what));
        let ours = u16::from(reply[3] & 0x0F);
        if let Some((mut client, from)) = answer_client {
            relay.send_to(&reply, from).unwrap();
            // The client exits with success exactly when the reply's RCODE is NOERROR.
            if wait(&mut client, case.what).success() != (ours == rcode::NOERROR) {
                differences.push(format!("{}: the client misread Pharos's reply with RCODE {ours}", case.what));
            }
        }
        let theirs = exchange(knot.address, &request).map(|reply| u16::from(reply[3] & 0x0F));
        if (ours, theirs) != (case.expected, case.knot) {
            let theirs = theirs.map_or("no reply".to_string(), |rcode| rcode.to_string());
            let why = String::from_utf8_lossy(&reply[12..]).into_owned();
            differences.push(format!("{}: expected {}, Pharos {ours} ({why}), Knot {theirs}", case.what, case.expected));
        }
    }
    assert!(differences.is_empty(), "RCODEs differ:\n{}", differences.join("\n"));
    let (knots, ours) = (transfer(knot.address, &knot.log()), transfer(pharos.address, &pharos.log()));
    let only = |these: &[Record], those: &[Record]| these.iter().filter(|record| !those.contains(record)).map(show).collect::<Vec<_>>();
    assert!(
        knots == ours,
        "the zones differ after the sequence\nonly in Pharos's:\n{}\nonly in Knot's:\n{}",
        only(&ours, &knots).join("\n"),
        only(&knots, &ours).join("\n")
    );
}

/// Pharos keeping the test zone in its store, taking unsigned updates
/// from loopback (the clients here sign nothing, as Knot's ACL asks).
fn start_pharos() -> common::Pharos {
    let dir = tempfile::tempdir().unwrap();
    let (address, api) = (SocketAddr::from((Ipv4Addr::LOCALHOST, common::free_port())), common::free_port());
    let config = format!(
        "[server]\nlisten = [\"{address}\"]\nthreads = 1\n[store]\npath = \"state.sqlite\"\n\
         [control]\nlisten = \"127.0.0.1:{api}\"\ntoken = \"{TOKEN}\"\n\
         [store_zones]\nallow_transfer = [\"127.0.0.0/8\"]\n\
         [[store_zones.update]]\nfrom = [\"127.0.0.0/8\"]\nat_or_below = \"{ORIGIN}.\"\n"
    );
    let config_file = dir.path().join("pharos.toml");
    std::fs::write(&config_file, config).unwrap();
    let log_file = dir.path().join("pharos.log");
    let child = common::spawn_with(&config_file, &log_file, |_| {});
    let pharos = common::Pharos { child, address, zone_file: PathBuf::new(), log_file, config: config_file, _dir: dir };
    common::wait_until("Pharos's API accepts", || TcpStream::connect((Ipv4Addr::LOCALHOST, api)).is_ok());
    let zones = format!("http://127.0.0.1:{api}/v1/zones");
    let (status, reply) = common::request("POST", &zones, Some(TOKEN), Some(json!({"name": ORIGIN, "text": ZONE})));
    assert_eq!(status, 201, "{reply}");
    pharos
}

/// Sends `request` over UDP to `server`: its reply, `None` if there is
/// none within `REPLY`.
fn exchange(server: SocketAddr, request: &[u8]) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(REPLY)).unwrap();
    socket.send_to(request, server).unwrap();
    let mut reply = vec![0; 65535];
    let length = socket.recv(&mut reply).ok()?;
    reply.truncate(length);
    assert!(length >= 12 && reply[..2] == request[..2], "not a reply to the update");
    Some(reply)
}

fn show(record: &Record) -> String {
    format!("{} {} {} {:02x?}", pharos_wire::name::Display(&record.owner), record.ttl, Rtype::from_int(record.rtype), record.rdata)
}

/// Starts knsupdate or nsupdate (the same options for both: wait long,
/// never retry) on `commands` for `server`.
fn run_client(program: &Path, server: SocketAddr, commands: &str) -> Child {
    let mut child = Command::new(program)
        .args(["-t", "20", "-r", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("{} does not start: {error}", program.display()));
    let script = format!("server {} {}\nzone {ORIGIN}.\n{commands}\nsend\nquit\n", server.ip(), server.port());
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    child
}

/// Waits for a client to exit, killing it past the deadline.
fn wait(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: the client did not finish");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A knotd on a free loopback port, serving `example.test` with DDNS
/// allowed from loopback; stopped when dropped.
struct Knot {
    child: Child,
    address: SocketAddr,
    directory: tempfile::TempDir,
}

impl Knot {
    fn start(knotd: &Path, zone: &str) -> Knot {
        // Short: knotd puts a unix socket in it (a path of at most 108 octets).
        let directory = tempfile::Builder::new().prefix("phu-knot-").tempdir().unwrap();
        let dir = directory.path().display().to_string();
        std::fs::write(directory.path().join("example.test.zone"), zone).unwrap();
        // Knot 3.2 does not make the directory of its journal.
        std::fs::create_dir(directory.path().join("db")).unwrap();
        let port = common::free_port();
        let user = Command::new("id").arg("-un").output().ok().map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
        let user = user.filter(|user| !user.is_empty()).map(|user| format!("  user: \"{user}\"\n")).unwrap_or_default();
        let conf = format!(
            "server:\n  rundir: \"{dir}\"\n  pidfile: \"{dir}/knot.pid\"\n  listen: 127.0.0.1@{port}\n{user}  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n\
             database:\n  storage: \"{dir}/db\"\n\
             log:\n  - target: stderr\n    any: info\n\
             acl:\n  - id: loopback\n    address: 127.0.0.0/8\n    action: [update, transfer]\n\
             zone:\n  - domain: example.test.\n    storage: \"{dir}\"\n    file: example.test.zone\n    acl: loopback\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: changes\n"
        );
        std::fs::write(directory.path().join("knot.conf"), conf).unwrap();
        let log = std::fs::File::create(directory.path().join("knot.log")).unwrap();
        let child = Command::new(knotd)
            .arg("-c")
            .arg(directory.path().join("knot.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("knotd starts");
        let mut knot = Knot { child, address: SocketAddr::from((Ipv4Addr::LOCALHOST, port)), directory };
        knot.wait_ready();
        knot
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.directory.path().join("knot.log")).unwrap_or_default()
    }

    /// Polls the zone's SOA until Knot answers it with authority.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + DEADLINE;
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("knotd exited ({status}) before serving; its log:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "knotd does not serve the zone after {DEADLINE:?}; its log:\n{}", self.log());
            socket.send_to(&query(types::SOA), self.address).unwrap();
            let mut reply = [0; 512];
            if let Ok(length) = socket.recv(&mut reply)
                && length > 12
                && reply[2] & 0x04 != 0
                && reply[3] & 0x0F == 0
            {
                return;
            }
        }
    }
}

/// The zone's records from `server` by AXFR over TCP, owners lowercased,
/// sorted; `log` says why if it is refused.
fn transfer(server: SocketAddr, log: &str) -> Vec<Record> {
    let mut stream = TcpStream::connect(server).unwrap_or_else(|error| panic!("no transfer from {server}: {error}; its log:\n{log}"));
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let query = query(types::AXFR);
    stream.write_all(&[&(query.len() as u16).to_be_bytes()[..], &query].concat()).unwrap();
    let mut records = Vec::new();
    let mut soas = 0;
    while soas < 2 {
        let mut length = [0; 2];
        stream.read_exact(&mut length).unwrap();
        let mut message = vec![0; usize::from(u16::from_be_bytes(length))];
        stream.read_exact(&mut message).unwrap();
        let message = Message::from_octets(message).unwrap();
        assert_eq!(message.header().rcode().to_int(), 0, "the transfer is refused; the server's log:\n{log}");
        for record in message.answer().unwrap() {
            let parsed = record.unwrap();
            let record = parsed.to_record::<ZoneRecordData<_, ParsedName<_>>>().unwrap().unwrap();
            if record.rtype() == Rtype::SOA {
                soas += 1;
                if soas == 2 {
                    break;
                }
            }
            let mut rdata = Vec::new();
            record.data().compose_rdata(&mut rdata).unwrap();
            let owner = record.owner().to_name::<Vec<u8>>().as_slice().to_ascii_lowercase();
            records.push(Record { owner: owner.into(), rtype: record.rtype().to_int(), rdata: rdata.into(), ttl: record.ttl().as_secs() });
        }
    }
    records.sort_unstable();
    records
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A query for the zone's apex.
fn query(rtype: u16) -> Vec<u8> {
    let mut message = Vec::new();
    let mut writer = MessageWriter::new(&mut message);
    writer.set_id(0x5eed);
    writer.set_counts([1, 0, 0, 0]);
    writer.name(&name(ORIGIN));
    writer.u16(rtype);
    writer.u16(types::CLASS_IN);
    message
}
