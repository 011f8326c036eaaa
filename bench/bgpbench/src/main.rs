//! Measures one RIB dump for `bench/bgp-load`: load time and peak memory,
//! IP-to-AS lookups, and breadth-first searches over the AS graph.
//!
//! `cargo run --release --manifest-path bench/Cargo.toml -p bgpbench -- FILE`
//! prints one line of `key=value` pairs.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use pharos_bgp::{BgpTables, OriginRules, load};

/// Addresses per lookup measurement and sources for the searches.
const LOOKUPS: usize = 1_000_000;
const TIMED_LOOKUPS: usize = 200_000;
const SEARCH_SOURCES: usize = 50;

fn main() {
    let path = std::env::args().nth(1).expect("usage: bgp-bench FILE");
    let started = Instant::now();
    let tables = load(&path, OriginRules::default(), |_| ()).unwrap_or_else(|error| panic!("{error}"));
    let load_time = started.elapsed();
    // Read before the samples below are allocated: the load's own peak.
    let peak_rss = peak_rss_kib();
    let report = &tables.report;
    let mut random = Xorshift(0x9E37_79B9_7F4A_7C15);
    let v4: Vec<IpAddr> = (0..LOOKUPS).map(|_| IpAddr::V4(Ipv4Addr::from(random.next() as u32))).collect();
    // Global unicast IPv6 (2000::/3); most of it is unrouted, which costs a lookup the same.
    let v6: Vec<IpAddr> = (0..LOOKUPS).map(|_| IpAddr::V6(Ipv6Addr::from((u128::from(random.next()) << 64 | 1) >> 3 | 1 << 125))).collect();
    let (v4_rate, v4_median, v4_p99) = measure_lookups(&tables, &v4);
    let (_, v6_median, v6_p99) = measure_lookups(&tables, &v6);
    let (search_median, search_max, hop_lookup) = measure_searches(&tables, &v4);
    let (ranges_v4, ranges_v6) = tables.ip_to_as.range_counts();
    println!(
        "routes={} prefixes={} ases={} links={} load_s={:.2} peak_rss_mib={:.0} tables_mib={:.1} ranges_v4={ranges_v4} ranges_v6={ranges_v6} \
         v4_lookups_per_s={:.1}M v4_median_ns={v4_median} v4_p99_ns={v4_p99} v6_median_ns={v6_median} v6_p99_ns={v6_p99} \
         bfs_median_ms={:.2} bfs_max_ms={:.2} hop_lookup_ns={:.0}",
        report.routes,
        report.prefixes_v4 + report.prefixes_v6,
        report.ases,
        report.links,
        load_time.as_secs_f64(),
        peak_rss as f64 / 1024.0,
        report.memory_bytes as f64 / (1 << 20) as f64,
        v4_rate / 1e6,
        millis(search_median),
        millis(search_max),
        hop_lookup,
    );
}

/// Lookups per second over all `addresses`, then the median and 99th
/// percentile of single lookups in nanoseconds, the clock's own cost taken off.
fn measure_lookups(tables: &BgpTables, addresses: &[IpAddr]) -> (f64, u64, u64) {
    let started = Instant::now();
    for &address in addresses {
        black_box(tables.ip_to_as.lookup_scoped(black_box(address)));
    }
    let rate = addresses.len() as f64 / started.elapsed().as_secs_f64();
    let clock = median(&mut (0..TIMED_LOOKUPS).map(|_| time(|| ())).collect::<Vec<_>>());
    let mut single: Vec<u64> = addresses[..TIMED_LOOKUPS]
        .iter()
        .map(|&address| {
            time(|| {
                black_box(tables.ip_to_as.lookup_scoped(black_box(address)));
            })
        })
        .collect();
    single.sort_unstable();
    let adjusted = |value: u64| value.saturating_sub(clock);
    (rate, adjusted(single[single.len() / 2]), adjusted(single[single.len() * 99 / 100]))
}

/// Breadth-first searches from the origin ASes of the first addresses:
/// median and longest search, and the mean cost of one hop-count read.
fn measure_searches(tables: &BgpTables, addresses: &[IpAddr]) -> (Duration, Duration, f64) {
    let sources: Vec<u32> =
        addresses.iter().filter_map(|&address| tables.ip_to_as.lookup(address)).map(|(asn, _)| asn).take(SEARCH_SOURCES).collect();
    let mut durations = Vec::new();
    let mut counts = Vec::new();
    for &source in &sources {
        let started = Instant::now();
        counts.push(tables.graph.hop_counts_from(source).expect("origins are in the graph"));
        durations.push(started.elapsed());
    }
    durations.sort_unstable();
    let targets: Vec<u32> =
        addresses.iter().filter_map(|&address| tables.ip_to_as.lookup(address)).map(|(asn, _)| asn).take(LOOKUPS / 10).collect();
    let started = Instant::now();
    for &target in &targets {
        black_box(counts[0].to(black_box(target)));
    }
    let hop_lookup = started.elapsed().as_nanos() as f64 / targets.len() as f64;
    (durations[durations.len() / 2], durations[durations.len() - 1], hop_lookup)
}

fn time(work: impl FnOnce()) -> u64 {
    let started = Instant::now();
    work();
    started.elapsed().as_nanos() as u64
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The process's peak resident memory, from /proc (Linux).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap_or("VmHWM: 0 kB");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).unwrap_or(0)
}

struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
