//! A snapshot built incrementally (each service built again only when what
//! it is built from changed) is the snapshot built from scratch: seeded
//! random runs of service, region and data center changes, new latency
//! measurements and probe results, each build compared with a fresh
//! builder's build of the same declarations and data (the zones' versions
//! following on from the same history). A refused build is refused by
//! both, with the same error, and changes nothing.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use pharos_answer::{Client, Settings, Snapshot, Transport, respond};
use pharos_control::build::DataSources;
use pharos_control::probe::{Probed, ProbedHealth};
use pharos_control::snapshot::SnapshotBuilder;
use pharos_model::probabilities::ProbabilitySpec;
use pharos_model::probe::ProbeSpec;
use pharos_model::spec::{DataCenterSpec, RegionSpec, ReplicaSpec, ServiceSpec};
use pharos_model::{Change, State};
use pharos_route::latency::{Latencies, Measured, MeasurementBook};
use pharos_route::{Asker, Family, route};
use pharos_zone::{Zone, parse_zone_text};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\n";
const SERVICES: usize = 6;
const REGIONS: u32 = 3;
const DATACENTERS: usize = 3;
const POLICIES: [&str; 5] = ["static", "weighted", "failover", "region-probabilities", "lowest-latency"];

#[test]
fn incremental_builds_equal_builds_from_scratch() {
    for seed in 1..=8 {
        let mut run = Run::new(seed);
        for step in 0..250 {
            run.step(&format!("seed {seed}, step {step}"));
        }
        assert!(run.kept > 100 && run.refused > 10, "seed {seed}: {} kept, {} refused: the run tries both", run.kept, run.refused);
    }
}

struct Run {
    rng: SmallRng,
    zones: Vec<Zone>,
    state: State,
    sources: DataSources,
    builder: SnapshotBuilder,
    kept: usize,
    refused: usize,
}

impl Run {
    fn new(seed: u64) -> Run {
        let zones = vec![parse_zone_text("example.test", ZONE, "example.test.zone").unwrap()];
        let builder = SnapshotBuilder::new(zones.clone(), Settings::default());
        let (state, sources) = (State::default(), DataSources::default());
        Run { rng: SmallRng::seed_from_u64(seed), zones, state, sources, builder, kept: 0, refused: 0 }
    }

    /// One random change (or none: the same declarations built again),
    /// built both ways and compared.
    fn step(&mut self, at: &str) {
        let changes = match self.rng.random_range(0..10) {
            0..=4 => vec![self.put_service()],
            5 => vec![Change::DeleteService(self.service_name())],
            6 => vec![self.region_change()],
            7 => vec![self.datacenter_change()],
            8 => {
                self.sources.latencies = Arc::new(self.latencies());
                Vec::new()
            }
            _ => {
                self.sources.probed = Arc::new(self.probed());
                Vec::new()
            }
        };
        let next = self.state.with(&changes);
        let incremental = self.builder.build(&next.declared(), &self.sources);
        // Built from scratch but for the zones' versions, which follow on
        // from what they served (their serials) as in production.
        let fresh = self.builder.reloaded(self.zones.clone(), Settings::default()).build(&next.declared(), &self.sources);
        match (incremental, fresh) {
            (Ok(incremental), Ok(fresh)) => {
                let snapshot = self.builder.keep(incremental);
                assert_same(&snapshot, &fresh.snapshot, &mut self.rng, at);
                self.state = next;
                self.kept += 1;
            }
            (Err(incremental), Err(fresh)) => {
                assert_eq!(incremental.to_string(), fresh.to_string(), "{at}: the same error");
                self.refused += 1;
            }
            (incremental, fresh) => {
                panic!("{at}: incremental {:?}, fresh {:?}", incremental.err().map(|e| e.to_string()), fresh.err().map(|e| e.to_string()))
            }
        }
    }

    fn service_name(&mut self) -> String {
        format!("s{}.example.test", self.rng.random_range(0..SERVICES))
    }

    /// A service of random policy, replicas and options; some refer to
    /// regions or data centers that may not be declared.
    fn put_service(&mut self) -> Change {
        let name = if self.rng.random_ratio(1, 40) { "www.elsewhere.test".to_string() } else { self.service_name() };
        let policy = POLICIES[self.rng.random_range(0..POLICIES.len())];
        let replicas: Vec<ReplicaSpec> = (0..self.rng.random_range(1..=3)).map(|index| self.replica(index)).collect();
        let mut spec = ServiceSpec::new(name, policy, replicas);
        spec.ttl = self.rng.random_range(30..300);
        if policy == "region-probabilities" {
            for _ in 0..self.rng.random_range(0..=2) {
                let table = format!("r{}", self.rng.random_range(1..=REGIONS));
                let replica = spec.replicas[self.rng.random_range(0..spec.replicas.len())].id.clone();
                let row = BTreeMap::from([(replica, ProbabilitySpec { probability: self.rng.random_range(0.1..1.0), ttl: 60 })]);
                spec.probabilities.insert(table, row);
            }
        }
        if self.rng.random_bool(0.5) {
            let probe = serde_json::json!({ "kind": "tcp", "port": 80, "interval_ms": 1000, "timeout_ms": 500, "rise": 2, "fall": 2 });
            spec.health = Some(serde_json::from_value::<ProbeSpec>(probe).unwrap());
            spec.shrink_ttl = self.rng.random_bool(0.5);
        }
        Change::PutService(spec)
    }

    fn replica(&mut self, index: usize) -> ReplicaSpec {
        let address = match self.rng.random_bool(0.7) {
            true => IpAddr::V4(Ipv4Addr::new(192, 0, 2, self.rng.random())),
            false => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, self.rng.random())),
        };
        let mut replica = ReplicaSpec::new(format!("r{index}"), address);
        replica.weight = self.rng.random_range(0..4);
        replica.priority = self.rng.random_range(1..3);
        replica.enabled = self.rng.random_ratio(9, 10);
        replica.down = self.rng.random_ratio(1, 10);
        if self.rng.random_bool(0.5) {
            replica.datacenter = Some(format!("dc{}", self.rng.random_range(0..DATACENTERS)));
        }
        replica
    }

    fn region_change(&mut self) -> Change {
        let id = self.rng.random_range(1..=REGIONS);
        if self.rng.random_ratio(1, 3) {
            return Change::DeleteRegion(format!("r{id}"));
        }
        let prefixes = (0..self.rng.random_range(0..=2)).map(|_| format!("10.{}.0.0/16", self.rng.random_range(0..8))).collect();
        Change::PutRegion(RegionSpec { id, name: format!("r{id}"), prefixes, ..RegionSpec::default() })
    }

    fn datacenter_change(&mut self) -> Change {
        let id = format!("dc{}", self.rng.random_range(0..DATACENTERS));
        if self.rng.random_ratio(1, 3) {
            return Change::DeleteDataCenter(id);
        }
        Change::PutDataCenter(DataCenterSpec { id, latitude: self.rng.random_range(-60.0..60.0), longitude: 0.0, asn: None })
    }

    /// Measurements from a few subnets to a few data centers.
    fn latencies(&mut self) -> Latencies {
        let mut book = MeasurementBook::new();
        for _ in 0..self.rng.random_range(0..4) {
            let subnet = (IpAddr::V4(Ipv4Addr::new(10, self.rng.random_range(0..8), 0, 0)), 16);
            let datacenter = format!("dc{}", self.rng.random_range(0..DATACENTERS));
            book.entry(subnet).or_default().insert(datacenter, Measured { rtt_ms: self.rng.random_range(1.0..100.0), at: 1000 });
        }
        Latencies::build(&book, 1000, 3600)
    }

    /// Random probe results for the replicas of services with a health
    /// check (the only ones probed).
    fn probed(&mut self) -> ProbedHealth {
        let mut probed = ProbedHealth::default();
        for service in self.state.services.iter().filter(|service| service.health.is_some()) {
            for replica in &service.replicas {
                let up = self.rng.random_bool(0.6);
                let result = Probed { up, reason: (if up { "passed" } else { "refused" }).into(), stable_for: self.rng.random_range(1..5) };
                probed.insert((service.name.clone(), replica.id.clone()), result);
            }
        }
        probed
    }
}

/// Every service the same (replicas, health, policy and what it
/// prepared), the same routing decisions and the same responses for
/// clients in every region and none.
fn assert_same(incremental: &Snapshot, fresh: &Snapshot, rng: &mut SmallRng, at: &str) {
    let described = |snapshot: &Snapshot| -> BTreeMap<Vec<u8>, String> {
        snapshot.routes.services.iter().map(|(name, service)| (name.to_vec(), format!("{service:?}"))).collect()
    };
    assert_eq!(described(incremental), described(fresh), "{at}: the services");
    let clients: Vec<IpAddr> = (0..9).map(|net| IpAddr::V4(Ipv4Addr::new(10, net, 1, 1))).collect();
    let seed = rng.random();
    for (name, service) in &incremental.routes.services {
        let fresh_service = &fresh.routes.services[name];
        for client in &clients {
            for family in [Family::V4, Family::V6] {
                let asker = Asker::from_source(*client);
                let decide = |snapshot: &Snapshot, service| {
                    let routed = route(&snapshot.routes, service, family, &asker, &mut SmallRng::seed_from_u64(seed), None);
                    (routed.location.region, routed.decision.replicas.to_vec(), routed.decision.ttl, routed.decision.scope)
                };
                assert_eq!(decide(incremental, service), decide(fresh, fresh_service), "{at}: {client} asking {:?}", service.name);
            }
        }
    }
    for index in 0..=SERVICES {
        for (rtype, client) in [(1u16, clients[index % clients.len()]), (28, clients[0])] {
            let query = query(&format!("s{index}.example.test"), rtype);
            let answer = |snapshot: &Snapshot| {
                let mut out = Vec::new();
                let client = Client { address: client, transport: Transport::Udp };
                respond(&query, &client, snapshot, &mut SmallRng::seed_from_u64(seed), &mut out);
                out
            };
            assert_eq!(answer(incremental), answer(fresh), "{at}: s{index}.example.test type {rtype}");
        }
    }
}

/// A query for `name` and `rtype`, without EDNS.
fn query(name: &str, rtype: u16) -> Vec<u8> {
    let mut packet = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        packet.push(label.len() as u8);
        packet.extend(label.as_bytes());
    }
    packet.push(0);
    packet.extend(rtype.to_be_bytes());
    packet.extend([0, 1]);
    packet
}
