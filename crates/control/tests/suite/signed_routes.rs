//! Routed answers in a signed zone, through the query path: every order of
//! the same addresses carries the same RRSIG, made once and then taken
//! from the signer's cache, and DO=0 answers carry none.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use pharos_answer::{Client, Settings, Snapshot, Transport, respond};
use pharos_control::build::DataSources;
use pharos_control::snapshot::build_snapshot;
use pharos_dnssec::{Algorithm, Role, Signer, Window, ZoneKey, ZoneKeys};
use pharos_model::spec::{Declared, ReplicaSpec, ServiceSpec};
use pharos_zone::parse_zone_text;
use rand::SeedableRng;
use rand::rngs::SmallRng;

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\n";
const RRSIG: u16 = 46;

fn signed_snapshot() -> Snapshot {
    let mut zone = parse_zone_text("example.test", ZONE, "test").unwrap();
    let random = ring::rand::SystemRandom::new();
    let keys = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::EcdsaP256Sha256, Role::Csk, &random).unwrap()] };
    zone.signer = Some(Arc::new(Signer::new(&zone.origin, keys, Window::from_now(1_800_000_000, 86_400), 1_800_000_000).unwrap()));
    let replicas: Vec<ReplicaSpec> = ["192.0.2.31", "192.0.2.32", "192.0.2.33"]
        .iter()
        .enumerate()
        .map(|(at, address)| ReplicaSpec::new(format!("r{at}"), address.parse().unwrap()))
        .collect();
    let services = [Arc::new(ServiceSpec::new("www.example.test", "round-robin", replicas))];
    let declared = Declared { services: &services, ..Declared::default() };
    build_snapshot(vec![zone], Settings::default(), &declared, &DataSources::default()).unwrap()
}

/// A query for www.example.test A with EDNS, DO as given.
fn query(dnssec_ok: bool) -> Vec<u8> {
    let mut packet = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    packet.extend(b"\x03www\x07example\x04test\x00\x00\x01\x00\x01");
    packet.extend([0, 0, 41, 4, 0xd0, 0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
    packet
}

/// The answer section's records of a response to [`query`], as (type, rdata).
fn answer_records(response: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let count = u16::from_be_bytes([response[6], response[7]]);
    let mut at = 12 + b"\x03www\x07example\x04test\x00".len() + 4;
    (0..count)
        .map(|_| {
            // Owners are pointers to the question (two octets).
            let rtype = u16::from_be_bytes([response[at + 2], response[at + 3]]);
            let length = usize::from(u16::from_be_bytes([response[at + 10], response[at + 11]]));
            let rdata = response[at + 12..at + 12 + length].to_vec();
            at += 12 + length;
            (rtype, rdata)
        })
        .collect()
}

#[test]
fn every_order_of_a_routed_set_shares_one_cached_signature() {
    let snapshot = signed_snapshot();
    let client = Client { address: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), transport: Transport::Udp };
    let mut rng = SmallRng::seed_from_u64(7);
    let mut orders = Vec::new();
    let mut signatures = Vec::new();
    for _ in 0..12 {
        let mut response = Vec::new();
        respond(&query(true), &client, &snapshot, &mut rng, &mut response).unwrap();
        let records = answer_records(&response);
        orders.push(records.iter().filter(|(rtype, _)| *rtype == 1).map(|(_, rdata)| rdata.clone()).collect::<Vec<_>>());
        signatures.push(records.iter().filter(|(rtype, _)| *rtype == RRSIG).map(|(_, rdata)| rdata.clone()).collect::<Vec<_>>());
    }
    orders.sort();
    orders.dedup();
    assert!(orders.len() > 1, "round robin gave one order only: {orders:?}");
    assert_eq!(signatures[0].len(), 1, "one RRSIG over the addresses");
    assert!(signatures.iter().all(|signature| *signature == signatures[0]), "ECDSA signs anew each time: one signature means one signing");
    let signer = snapshot.zones.zone_for(b"\x07example\x04test\x00").unwrap().signer.clone().unwrap();
    assert_eq!(signer.cached(), 1);
    let mut unsigned = Vec::new();
    respond(&query(false), &client, &snapshot, &mut rng, &mut unsigned).unwrap();
    assert!(answer_records(&unsigned).iter().all(|(rtype, _)| *rtype == 1), "DO=0 gets no RRSIG");
}
