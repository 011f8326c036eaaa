//! Why Pharos keeps two longest-prefix structures: the bit trie
//! ([`PrefixMap`], region CIDR lists and trusted senders, built by
//! `insert` and cloned with each snapshot) and the range tables of
//! pharos-ranges (IP-to-AS and City data, built once from a sorted list).
//! For tables of several sizes it times building, cloning and looking up
//! IPv4 addresses in each, and prints what the range tables occupy.
//!
//!     cargo run --release -p pharos-route --example prefix_tables

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use pharos_ranges::{RangeTable, RangeValue};
use pharos_route::prefix::PrefixMap;

const SIZES: [usize; 4] = [10, 1_000, 100_000, 1_000_000];
const LOOKUPS: usize = 1_000_000;

/// A range's answer: the matched prefix's length, as the trie reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Length(Option<u8>);

impl RangeValue for Length {
    const NONE: Self = Length(None);
    fn least_scope(&self) -> u8 {
        self.0.unwrap_or(0)
    }
    fn compact(&self) -> Option<u32> {
        None
    }
}

/// A 64-bit linear congruential generator: the same tables on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 32) as u32
    }
}

fn main() {
    println!("| prefixes | trie build | ranges build | trie clone | ranges clone | trie lookup | ranges lookup | ranges memory |");
    println!("|---|---|---|---|---|---|---|---|");
    for size in SIZES {
        measure(size);
    }
}

fn measure(size: usize) {
    let mut random = Lcg(size as u64);
    let prefixes: Vec<(u32, u8)> = (0..size)
        .map(|_| {
            let length = 8 + (random.next() % 25) as u8;
            (random.next() & !u32::MAX.checked_shr(u32::from(length)).unwrap_or(0), length)
        })
        .collect();
    let addresses: Vec<u32> = (0..LOOKUPS).map(|_| random.next()).collect();

    let started = Instant::now();
    let mut trie = PrefixMap::default();
    for &(network, length) in &prefixes {
        trie.insert(IpAddr::V4(Ipv4Addr::from(network)), length, length);
    }
    let trie_build = started.elapsed();

    let started = Instant::now();
    let mut sorted: Vec<(u32, u8, Length)> = prefixes.iter().map(|&(network, length)| (network, length, Length(Some(length)))).collect();
    sorted.sort_by_key(|&(network, length, _)| (network, length));
    let ranges = RangeTable::build(sorted);
    let ranges_build = started.elapsed();

    let trie_clone = time_once(|| drop(black_box(trie.clone())));
    let ranges_clone = time_once(|| drop(black_box(ranges.clone())));
    let trie_lookup = per_lookup(&addresses, |address| black_box(trie.lookup(IpAddr::V4(Ipv4Addr::from(address)))).scope);
    let ranges_lookup = per_lookup(&addresses, |address| black_box(ranges.lookup(address)).1);
    println!(
        "| {size} | {} | {} | {} | {} | {:.0} ns | {:.0} ns | {:.0} KiB |",
        short(trie_build),
        short(ranges_build),
        short(trie_clone),
        short(ranges_clone),
        trie_lookup,
        ranges_lookup,
        ranges.memory_bytes() as f64 / 1024.0
    );
}

fn time_once(work: impl FnOnce()) -> Duration {
    let started = Instant::now();
    work();
    started.elapsed()
}

/// Mean nanoseconds per lookup over `addresses`.
fn per_lookup(addresses: &[u32], lookup: impl Fn(u32) -> u8) -> f64 {
    let started = Instant::now();
    let scopes: u64 = addresses.iter().map(|&address| u64::from(lookup(address))).sum();
    black_box(scopes);
    started.elapsed().as_nanos() as f64 / addresses.len() as f64
}

fn short(duration: Duration) -> String {
    match duration.as_micros() {
        0..1_000 => format!("{:.1} us", duration.as_secs_f64() * 1e6),
        _ => format!("{:.1} ms", duration.as_secs_f64() * 1e3),
    }
}
