//! The program attached to `lo` in generic mode answers real queries sent
//! through a socket, with what user space would answer: a small reply,
//! and one 452 octets longer than its query, more than the tail of lo's
//! socket buffers can grow (between 340 and 373 octets on Linux 6.18), so
//! the program grows the packet at both ends. Needs root, as
//! tests/suite/answer.rs.

use crate::common;

use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

use common::{may_load_bpf, snapshot_of, wire_name};
use pharos_answer::{Client, Transport, respond};
use pharos_route::Routes;
use pharos_xdp::{Attached, FastPath, Mode, Settings as FastPathSettings};
use rand::SeedableRng;

/// ns1's A record, and four 100-octet TXT records at big.
fn zone() -> String {
    let big: String = (b'a'..b'e').map(|letter| format!("big 3600 IN TXT \"{}\"\n", char::from(letter).to_string().repeat(100))).collect();
    format!("@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.53\n{big}")
}

#[test]
fn answers_on_lo_in_generic_mode() {
    if !may_load_bpf() {
        return;
    }
    let snapshot = snapshot_of(&zone(), Routes::default());
    // A port of our own, held so nothing else takes it; the kernel answers
    // before the socket would see the query.
    let server = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    server.set_nonblocking(true).unwrap();
    let port = server.local_addr().unwrap().port();
    let settings = FastPathSettings { ports: vec![port], max_entries: 64, rate_limit: None, response_limit: None };
    let mut fast_path = FastPath::load(&settings).expect("the program loads");
    fast_path.sync(&snapshot).unwrap();
    let attached = fast_path.attach("lo", Mode::Auto).expect("XDP attaches to lo");
    assert_eq!(attached, Attached { interface: "lo".into(), mode: Mode::Generic }, "lo has no native XDP");

    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let small = [&[0x55, 0xAA, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], &wire_name("NS1.example.test"), &[0, 1, 0, 1]].concat();
    let edns = [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0];
    let large = [&[0x55, 0xAB, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1][..], &wire_name("big.example.test"), &[0, 16, 0, 1], &edns].concat();
    for query in [small, large] {
        client.send_to(&query, (Ipv4Addr::LOCALHOST, port)).unwrap();
        let mut reply = [0; 1500];
        let (len, from) = client.recv_from(&mut reply).expect("the kernel answers");
        assert!(server.recv_from(&mut [0; 512]).is_err(), "the query never reached the socket");
        let mut expected = Vec::new();
        let asker = Client { address: from.ip(), transport: Transport::Udp };
        respond(&query, &asker, &snapshot, &mut rand::rngs::SmallRng::seed_from_u64(1), &mut expected).unwrap();
        assert_eq!(from.port(), port);
        assert_eq!(reply[..len], expected[..]);
    }
    let counters = &fast_path.counters().unwrap().interfaces;
    let lo = counters.iter().find(|counters| counters.interface.as_deref() == Some("lo")).expect("lo counted");
    assert_eq!((lo.answered_static, lo.adjust_tail_failed), (2, 0));
}
