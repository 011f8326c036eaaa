//! Time what one change costs the control plane: a plane serving `N`
//! services (as bench/fleet's: static, one replica) takes changes that
//! move one service to a new address, and each step of the commit is
//! timed: the next state, validating it by building its snapshot
//! (`prepare`) and making it current (`adopt`).
//!
//!     cargo run --release -p pharos-control --example publish_cost -- 10000
//!
//! The figures are medians and 90th percentiles over the changes.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pharos_answer::Settings;
use pharos_control::build::DataSources;
use pharos_control::plane::{Plane, PlaneSettings};
use pharos_control::snapshot::SnapshotBuilder;
use pharos_model::spec::{ReplicaSpec, ServiceSpec};
use pharos_model::{Change, State};
use pharos_zone::parse_zone_text;

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\n";
const CHANGES: u32 = 200;

fn main() {
    let count: u32 = std::env::args().nth(1).map_or(10_000, |text| text.parse().expect("a number of services"));
    let mut plane = plane();
    // Kept in name order, as changes keep it.
    let mut services: Vec<Arc<ServiceSpec>> = (0..count).map(|number| Arc::new(service(number, number))).collect();
    services.sort_by(|a, b| a.name.cmp(&b.name));
    let next = State { services, ..State::default() };
    let prepared = plane.prepare(next, None, 0).expect("valid services");
    plane.adopt(prepared, 0);
    let mut timings: [Vec<Duration>; 3] = Default::default();
    for change in 0..CHANGES {
        let started = Instant::now();
        let next = plane.state().with(&[Change::PutService(service(change % count.max(1), count + change))]);
        let made = Instant::now();
        let prepared = plane.prepare(next, None, 0).expect("a valid change");
        let built = Instant::now();
        std::hint::black_box(plane.adopt(prepared, 0));
        let adopted = Instant::now();
        for (timing, (from, to)) in timings.iter_mut().zip([(started, made), (made, built), (built, adopted)]) {
            timing.push(to - from);
        }
    }
    println!("{count} services, {CHANGES} changes of one service each");
    for (step, timing) in ["next state", "prepare (build)", "adopt"].iter().zip(&mut timings) {
        timing.sort();
        let at = |share: f64| timing[((timing.len() - 1) as f64 * share) as usize].as_secs_f64() * 1000.0;
        println!("  {step:<16} median {:8.3} ms   p90 {:8.3} ms", at(0.5), at(0.9));
    }
}

fn plane() -> Plane {
    let zone = parse_zone_text("fleet.test", ZONE, "fleet.test.zone").expect("a valid zone");
    let snapshots = SnapshotBuilder::new(vec![zone], Settings::default());
    let settings =
        PlaneSettings { load: pharos_control::load::LoadSettings { max_age_seconds: 30, smoothing: 1.0 }, latency_max_age_seconds: 60 };
    Plane::new(State::default(), Vec::new(), DataSources::default(), snapshots, settings, 0)
}

/// Service `number`, its one replica at an address made of `address`.
fn service(number: u32, address: u32) -> ServiceSpec {
    let address = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (address & 0x00ff_ffff)));
    ServiceSpec::new(format!("s{number}.fleet.test"), "static", vec![ReplicaSpec::new("a", address)])
}
