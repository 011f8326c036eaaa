//! Two-tier redirection (NetAirt) through a real recursive resolver: a
//! tier-1 Pharos answers the service name with a CNAME into the zone of
//! the second-tier redirector its policy picks for the client (by region,
//! from the client subnet Unbound sends), and that redirector, another
//! Pharos, answers with its own policy over its own replicas. Unbound
//! (Debian's) reaches the tier-1 zone and the two tier-2 zones by stub
//! zones on loopback; its clients ask from two regions' addresses.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use domain::base::iana::Rtype;
use domain::base::{Message, Name, ToName};
use domain::rdata::{A, Cname};

use crate::common;
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "two-tier-token";

/// Unbound in the foreground on `port`, with its files in a temporary
/// directory; killed when dropped.
struct Unbound {
    child: Child,
    address: SocketAddr,
    dir: tempfile::TempDir,
}

impl Unbound {
    /// Unbound resolving `example.test` at `tier1` and the tier-2 zones
    /// `stubs` (zone, server) at theirs, sending each the client subnet of
    /// the asker (a /24).
    fn start(tier1: SocketAddr, stubs: &[(&str, SocketAddr)]) -> Unbound {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let stub = |zone: &str, at: SocketAddr| format!("stub-zone:\n  name: \"{zone}\"\n  stub-addr: {}@{}\n", at.ip(), at.port());
        let mut config = format!(
            "server:\n  interface: 127.0.0.1@{port}\n  port: {port}\n  do-not-query-localhost: no\n  access-control: 127.0.0.0/8 allow\n\
             \x20 username: \"\"\n  chroot: \"\"\n  directory: \"{dir}\"\n  pidfile: \"{dir}/unbound.pid\"\n  use-syslog: no\n\
             \x20 logfile: \"{dir}/unbound.log\"\n  num-threads: 1\n  qname-minimisation: no\n  local-zone: \"test.\" nodefault\n\
             \x20 module-config: \"subnetcache iterator\"\n  send-client-subnet: 127.0.0.1\n  max-client-subnet-ipv4: 24\n{}",
            stub("example.test", tier1),
            dir = dir.path().display(),
        );
        for (zone, at) in stubs {
            config.push_str(&stub(zone, *at));
        }
        let file = dir.path().join("unbound.conf");
        std::fs::write(&file, config).unwrap();
        check_config(&file);
        let child = Command::new("unbound")
            .arg("-d")
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unbound runs (Debian's unbound package; scripts/test.sh installs it)");
        let unbound = Unbound { child, address: SocketAddr::from(([127, 0, 0, 1], port)), dir };
        wait_until("Unbound answers", || udp_query(unbound.address, "www.example.test", Rtype::A).is_some());
        unbound
    }

    /// Asks for `name` A from `client` (a loopback address), as a stub
    /// resolver there would.
    fn ask_from(&self, client: Ipv4Addr, name: &str) -> Message<Vec<u8>> {
        let socket = UdpSocket::bind((client, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut query = query_bytes(11, name, Rtype::A);
        query[2] |= 0x01; // recursion desired
        socket.send_to(&query, self.address).unwrap();
        let mut buffer = vec![0; 4096];
        let length = socket.recv(&mut buffer).unwrap_or_else(|error| panic!("no answer from Unbound: {error}; {}", self.log()));
        buffer.truncate(length);
        Message::from_octets(buffer).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("unbound.log")).unwrap_or_default()
    }
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check_config(file: &Path) {
    let checked = Command::new("unbound-checkconf").arg(file).output().expect("unbound-checkconf runs");
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stdout));
}

/// The CNAME target and the addresses of an answer.
fn chain(answer: &Message<Vec<u8>>) -> (Vec<Name<Vec<u8>>>, Vec<IpAddr>) {
    let records = answer.answer().unwrap();
    let targets = records.limit_to::<Cname<_>>().map(|record| record.unwrap().data().cname().to_name::<Vec<u8>>()).collect();
    let addresses = answer.answer().unwrap().limit_to::<A>().map(|record| IpAddr::V4(record.unwrap().data().addr())).collect();
    (targets, addresses)
}

/// A tier-2 redirector: a Pharos answering `name` with its own replica.
fn redirector(name: &str, replica: &str) -> Pharos {
    start(&Declarations::new().service(name).policy("static").replica("own", replica).toml())
}

#[test]
fn clients_in_two_regions_end_at_different_second_tier_redirectors_and_get_their_answers() {
    let europe = redirector("svc.eu.example.test", "192.0.2.1");
    let america = redirector("svc.us.example.test", "198.51.100.1");
    let tier1 = Declarations::new()
        .region(1, "eu", &["127.1.0.0/16"])
        .region(2, "us", &["127.2.0.0/16"])
        .service("svc.example.test")
        .policy("region-probabilities")
        .replica("eu-redirector", &europe.address.ip().to_string())
        .line("delegate = \"svc.eu.example.test\"")
        .replica("us-redirector", &america.address.ip().to_string())
        .line("delegate = \"svc.us.example.test\"")
        .probabilities("eu", &[("eu-redirector", 1.0, 3600)])
        .probabilities("us", &[("us-redirector", 1.0, 3600)])
        .probabilities("default", &[("eu-redirector", 1.0, 3600)]);
    let (tier1, api) = start_with_api(TOKEN, &tier1.toml());
    let unbound = Unbound::start(tier1.address, &[("eu.example.test", europe.address), ("us.example.test", america.address)]);
    let name = |text: &str| Name::<Vec<u8>>::vec_from_str(text).unwrap();
    for (client, redirected_to, answered) in [
        (Ipv4Addr::new(127, 1, 0, 5), "svc.eu.example.test", "192.0.2.1"),
        (Ipv4Addr::new(127, 2, 0, 5), "svc.us.example.test", "198.51.100.1"),
        (Ipv4Addr::new(127, 1, 9, 5), "svc.eu.example.test", "192.0.2.1"),
    ] {
        let answer = unbound.ask_from(client, "svc.example.test");
        let expected = (vec![name(redirected_to)], vec![answered.parse::<IpAddr>().unwrap()]);
        assert_eq!(chain(&answer), expected, "client {client}; Unbound's log: {}", unbound.log());
    }
    // Straight from the tier-1 node, any type gets the CNAME.
    let direct = udp_query(tier1.address, "svc.example.test", Rtype::AAAA).expect("an answer");
    assert_eq!(chain(&direct).0, [name("svc.eu.example.test")], "the default region's redirector");
    let (status, explained) = request("GET", &format!("{api}/v1/explain?name=svc.example.test&client=127.2.0.5"), Some(TOKEN), None);
    assert_eq!(status, 200, "{explained}");
    assert_eq!(explained["delegated_to"]["redirector"], "us-redirector", "{explained}");
    assert_eq!(explained["delegated_to"]["cname"], "svc.us.example.test.", "{explained}");
    let steps = explained["steps"].to_string();
    assert!(steps.contains("us") && steps.contains("second-tier redirector us-redirector"), "why: {explained}");
    // A service whose replicas do not all delegate is refused, named.
    let mixed = serde_json::json!({ "name": "mixed.example.test", "replica": [
        { "id": "a", "address": "192.0.2.1", "delegate": "mixed.eu.example.test" },
        { "id": "b", "address": "192.0.2.2" },
    ] });
    let (status, refused) = request("PUT", &format!("{api}/v1/services/mixed.example.test"), Some(TOKEN), Some(mixed));
    assert_eq!(status, 422, "{refused}");
    assert!(refused.to_string().contains("replica[b].delegate"), "{refused}");
}
