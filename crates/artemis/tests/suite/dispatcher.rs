//! The dispatcher's decisions on real Initials (quinn's, split over two
//! packets), replica connection IDs, the routing core's explanation, and
//! a flood of bogus Initials against the table's caps.

use crate::support;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pharos_artemis::client_hello::Limits;
use pharos_artemis::dispatcher::{Action, Dispatcher, Dropped, RecentLimits, ReplicaAt, Target, Topology};
use pharos_artemis::initial::DropReason;
use pharos_artemis::replica_cid;
use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap};
use pharos_route::model::Answering;
use pharos_route::{Asker, Explanation, Family, Policy, Replica, Routes, Service, route};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::{SERVER_NAME, Sealed, client, crypto_frame, quinn_initials};

const SEED: u64 = 15;

fn replica(id: &str, address: &str, datacenter: &str) -> Replica {
    Replica { datacenter: Some(datacenter.into()), ..Replica::new(id, address.parse().unwrap()) }
}

/// svc.example.test: one replica in data center "a", one in "b".
fn routes(policy: Policy) -> Arc<Routes> {
    let replicas = vec![replica("a1", "10.0.1.1", "a"), replica("b1", "10.0.2.1", "b")];
    let service = Service::new(format!("{SERVER_NAME}."), replicas, policy, Answering::plain(60, 0));
    let mut routes = Routes::default();
    routes.services.insert(b"\x03svc\x07example\x04test\x00".to_vec().into(), service.into());
    Arc::new(routes)
}

fn addresses() -> ServiceIdMap {
    ServiceIdMap::new("192.0.2.0/24".parse().unwrap(), ConflictList::default())
}

fn service_address() -> IpAddr {
    addresses().address_of(&CanonicalName::new(SERVER_NAME).unwrap())
}

fn topology(datacenter: &str) -> Topology {
    Topology {
        datacenter: datacenter.into(),
        dispatchers: HashMap::from([("a".into(), "172.16.0.1".parse().unwrap()), ("b".into(), "172.16.0.2".parse().unwrap())]),
        replicas: HashMap::from([
            (1, ReplicaAt { address: "10.0.1.1".parse().unwrap(), datacenter: Some("a".into()) }),
            (2, ReplicaAt { address: "10.0.2.1".parse().unwrap(), datacenter: Some("b".into()) }),
        ]),
    }
}

fn dispatcher_in(datacenter: &str, policy: Policy) -> Dispatcher {
    Dispatcher::new(routes(policy), addresses(), topology(datacenter), Limits::default(), RecentLimits::default(), SEED)
}

fn replica_a() -> Target {
    Target::Replica("10.0.1.1".parse().unwrap())
}

#[test]
fn a_split_client_hello_waits_then_goes_to_the_chosen_replica_unmodified() {
    let datagrams = quinn_initials(60);
    assert_eq!(datagrams.len(), 2);
    let mut dispatcher = dispatcher_in("a", Policy::Static);
    let now = Instant::now();
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &datagrams[1], now), Action::Wait);
    let action = dispatcher.on_datagram(client(), service_address(), &datagrams[0], now);
    let expected = vec![datagrams[1].clone(), datagrams[0].clone()];
    assert_eq!(action, Action::Forward { target: replica_a(), datagrams: expected, explanation: None });
    assert!(dispatcher.table().is_empty());

    // A retransmission follows its ClientHello, however late within the window.
    let retransmitted = dispatcher.on_datagram(client(), service_address(), &datagrams[0], now + Duration::from_secs(5));
    assert_eq!(retransmitted, Action::Forward { target: replica_a(), datagrams: vec![datagrams[0].clone()], explanation: None });
    assert!(dispatcher.table().is_empty(), "not reassembled again");
    let after = dispatcher.on_datagram(client(), service_address(), &datagrams[0], now + Duration::from_secs(11));
    assert_eq!(after, Action::Wait, "forgotten after the window: a new first flight");
}

#[test]
fn a_replica_in_another_data_center_is_reached_through_its_dispatcher() {
    let datagrams = quinn_initials(1);
    let mut dispatcher = dispatcher_in("b", Policy::Static);
    let Action::Forward { target, .. } = dispatcher.on_datagram(client(), service_address(), &datagrams[0], Instant::now()) else {
        panic!()
    };
    assert_eq!(
        target,
        Target::Dispatcher { datacenter: "a".into(), address: "172.16.0.1".parse().unwrap(), replica: "10.0.1.1".parse().unwrap() }
    );
}

#[test]
fn the_explanation_is_the_routing_core_s_own() {
    let datagrams = quinn_initials(1);
    for seed_offset in 0..8 {
        let routes = routes(Policy::Weighted);
        let topology = topology("a");
        let seed = SEED + seed_offset;
        let mut dispatcher = Dispatcher::new(routes.clone(), addresses(), topology, Limits::default(), RecentLimits::default(), seed);
        let action = dispatcher.on_datagram_explained(client(), service_address(), &datagrams[0], Instant::now());
        let Action::Forward { target, explanation: Some(explanation), .. } = action else { panic!("{action:?}") };

        let service = routes.service(b"\x03svc\x07example\x04test\x00").unwrap();
        let mut direct = Explanation::default();
        let asker = Asker::from_source(client().ip());
        let mut rng = SmallRng::seed_from_u64(seed);
        let routed = route(&routes, service, Family::V4, &asker, &mut rng, Some(&mut direct));
        assert_eq!(explanation, direct);
        assert!(!explanation.steps.is_empty());
        let chosen = &service.replicas[routed.decision.replicas[0]];
        let expected = topology_target(chosen);
        assert_eq!(target, expected, "seed {seed}");
    }
}

fn topology_target(replica: &Replica) -> Target {
    match replica.datacenter.as_deref() {
        Some("a") => Target::Replica(replica.address),
        _ => Target::Dispatcher { datacenter: "b".into(), address: "172.16.0.2".parse().unwrap(), replica: replica.address },
    }
}

#[test]
fn replica_connection_ids_route_later_packets_without_state() {
    let mut dispatcher = dispatcher_in("a", Policy::Static);
    let now = Instant::now();
    let short = |replica_id: u16| [&[0x41][..], &replica_cid::encode(replica_id, [1, 2, 3, 4, 5]), &[0xee; 30]].concat();
    let forwarded = |target: Target, datagram: &[u8]| Action::Forward { target, datagrams: vec![datagram.to_vec()], explanation: None };
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &short(1), now), forwarded(replica_a(), &short(1)));
    let dispatcher_b =
        Target::Dispatcher { datacenter: "b".into(), address: "172.16.0.2".parse().unwrap(), replica: "10.0.2.1".parse().unwrap() };
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &short(2), now), forwarded(dispatcher_b, &short(2)));
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &short(9), now), Action::Drop(Dropped::UnknownReplicaId(9)));
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &[0x41, 0x07, 0], now), Action::Drop(Dropped::NotReplicaConnectionId));
    let random_cid = [&[0x41][..], &[0x99; 8], &[0; 30]].concat();
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &random_cid, now), Action::Drop(Dropped::NotReplicaConnectionId));

    // A Handshake packet to a replica's connection ID: long header, same rule.
    let handshake = Sealed { first_byte: 0xe3, dcid: replica_cid::encode(1, [7; 5]).to_vec(), ..Sealed::new(vec![0x01]) }.seal();
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &handshake, now), forwarded(replica_a(), &handshake));
    assert!(dispatcher.table().is_empty());
}

#[test]
fn version_negotiation_unknown_services_and_garbage() {
    let mut dispatcher = dispatcher_in("a", Policy::Static);
    let now = Instant::now();
    let mut unknown_version = vec![0xc0, 0xfa, 0xce, 0xb0, 0x0c, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    unknown_version.resize(1200, 0);
    let Action::SendVersionNegotiation(packet) = dispatcher.on_datagram(client(), service_address(), &unknown_version, now) else {
        panic!()
    };
    assert_eq!(&packet[packet.len() - 8..], &[0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf]);

    let datagrams = quinn_initials(1);
    let elsewhere: IpAddr = "192.0.2.1".parse().unwrap();
    assert!(matches!(dispatcher.on_datagram(client(), elsewhere, &datagrams[0], now), Action::Drop(Dropped::WrongServiceAddress { .. })));
    let mut no_services =
        Dispatcher::new(Arc::new(Routes::default()), addresses(), topology("a"), Limits::default(), RecentLimits::default(), SEED);
    assert!(matches!(no_services.on_datagram(client(), service_address(), &datagrams[0], now), Action::Drop(Dropped::UnknownService(_))));
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &[], now), Action::Drop(DropReason::Truncated("first byte").into()));
    let mut corrupted = datagrams[0].clone();
    corrupted[600] ^= 1;
    assert_eq!(dispatcher.on_datagram(client(), service_address(), &corrupted, now), Action::Drop(DropReason::Undecryptable.into()));
}

/// A validly encrypted Initial with the start of a 1000-byte ClientHello:
/// the costliest bogus Initial, since it takes a table entry.
fn bogus_partial_hello(rng: &mut SmallRng) -> Vec<u8> {
    let mut data = vec![1, 0, 0x03, 0xe8];
    data.resize(100, 0);
    let dcid: Vec<u8> = (0..rng.random_range(8..=20)).map(|_| rng.random()).collect();
    Sealed { dcid, ..Sealed::new(crypto_frame(0, &data)) }.seal()
}

/// A long header of version 1 with random IDs and random bytes after.
fn random_initial(rng: &mut SmallRng) -> Vec<u8> {
    let mut datagram = vec![0; rng.random_range(1200..=1350)];
    rng.fill(&mut datagram[..]);
    datagram[0] = 0xc0 | (datagram[0] & 0x0f);
    datagram[1..5].copy_from_slice(&1u32.to_be_bytes());
    datagram[5] = rng.random_range(8..=20);
    datagram
}

#[test]
fn a_flood_of_bogus_initials_never_grows_the_table_past_its_caps() {
    const FLOOD: usize = 1_000_000;
    // One in 10 is validly encrypted (a partial ClientHello from a new
    // source). At 20 us apart, 10,000 arrive per 2 s lifetime: more than
    // the 4,096 entries, so the cap binds, and entries expire and are replaced.
    let limits = Limits::default();
    let mut dispatcher = Dispatcher::new(routes(Policy::Static), addresses(), topology("a"), limits, RecentLimits::default(), SEED);
    let mut rng = SmallRng::seed_from_u64(SEED);
    let sealed: Vec<Vec<u8>> = (0..limits.entries * 3).map(|_| bogus_partial_hello(&mut rng)).collect();
    let mut now = Instant::now();
    let (mut max_entries, mut max_bytes, mut waited) = (0, 0, 0);
    for index in 0..FLOOD {
        let datagram = if index % 10 == 0 { sealed[(index / 10) % sealed.len()].clone() } else { random_initial(&mut rng) };
        let source = SocketAddr::new(IpAddr::from(rng.random::<[u8; 4]>()), rng.random());
        match dispatcher.on_datagram(source, service_address(), &datagram, now) {
            Action::Wait => waited += 1,
            Action::Drop(_) => {}
            other => panic!("datagram {index}: {other:?}"),
        }
        let table = dispatcher.table();
        assert!(table.len() <= limits.entries && table.bytes() <= limits.total_bytes);
        max_entries = max_entries.max(table.len());
        max_bytes = max_bytes.max(table.bytes());
        now += Duration::from_micros(20);
    }
    assert_eq!(max_entries, limits.entries, "the flood reached the entry cap");
    assert!(waited > limits.entries, "entries expired and were replaced");
    println!(
        "flood of {FLOOD} bogus Initials: at most {max_entries} entries, {max_bytes} bytes of datagrams and CRYPTO data held; {waited} kept for a while"
    );
}
