//! Measured round-trip times from client subnets to data centers (Artemis
//! section 3.3, the LatencyMeasurement table), arranged for longest-prefix
//! lookup.
//!
//! The table is rebuilt whenever measurements arrive or one grows too old,
//! so a lookup needs no clock: what is here is fresh as of `built_at`. The
//! index of its subnets is kept while the same subnets are measured.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use pharos_ranges::{RangeTable, RangeValue, Slash24Index};
use rustc_hash::FxHashMap;

use crate::prefix::Bits;

/// One measurement as ingested: a client subnet's RTT to a data center.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasurementSpec {
    /// The client subnet, e.g. "198.51.100.0/24".
    pub subnet: String,
    /// A declared data center's id.
    pub datacenter: String,
    /// Round-trip time in milliseconds.
    pub rtt_ms: f64,
    /// When it was measured, in seconds since the Unix epoch; unset, when
    /// it was received.
    #[serde(default)]
    pub measured_at: Option<u64>,
}

/// The latest measurement of one (subnet, data center) pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub rtt_ms: f64,
    /// Seconds since the Unix epoch.
    pub at: u64,
}

/// Every measurement kept, by subnet and then data center id: the newest
/// of each pair wins.
pub type MeasurementBook = BTreeMap<(IpAddr, u8), BTreeMap<String, Measured>>;

/// One data center's RTT from a subnet.
#[derive(Debug, Clone, PartialEq)]
pub struct DataCenterRtt {
    /// Index into [`Latencies::datacenters`].
    pub datacenter: u16,
    pub rtt_ms: f64,
    /// Seconds the measurement was old when the table was built.
    pub age: u64,
}

/// The fresh measurements of one subnet, lowest RTT first.
#[derive(Debug, Clone, PartialEq)]
pub struct SubnetRtts {
    pub network: IpAddr,
    pub length: u8,
    pub rtts: SmallVec<[DataCenterRtt; 4]>,
    /// Leading address bits every answer from this subnet depends on: its
    /// length, or more if measured subnets lie inside it.
    pub scope: u8,
}

/// The fresh part of a measurement book, for lookups.
///
/// Subnets sit in one hash map per prefix length, tried longest first:
/// measurements come in few distinct lengths (mostly /24 and /48), so a
/// lookup is a few hash probes where a bit-per-level trie walked 24 levels
/// of cache misses (1.8 us per decision over 100,000 subnets, measured with
/// examples/decide.rs).
///
/// A decision reads each replica's RTT from a dense row per subnet, one
/// cache line for a few data centers, rather than searching the subnet's
/// list (0.15 us of a decision inside the server, bench/RESULTS.md).
#[derive(Debug, Default)]
pub struct Latencies {
    /// Where each subnet is found; shared with the table this one was
    /// [`refreshed`](Self::refreshed) from while the same subnets are measured.
    index: Arc<SubnetIndex>,
    subnets: Vec<SubnetRtts>,
    /// Subnet `i`'s RTT in ms to data center `d` is `rows[i * datacenters.len() + d]`,
    /// NaN where it has no fresh measurement.
    rows: Vec<f64>,
    /// Data center ids; measurements refer to them by index.
    pub datacenters: Vec<String>,
    /// Seconds since the Unix epoch when built.
    pub built_at: u64,
    /// Measurements kept (fresh ones).
    pub count: usize,
    /// When the oldest kept measurement becomes too old, if any is kept.
    pub next_expiry: Option<u64>,
}

/// How lookups find a measured subnet's position. It depends only on which
/// subnets are measured, not on what they measured, so the usual upload,
/// new RTTs of subnets measured before, reuses it. For 12,000 IPv4 /24s x
/// 8 data centers a build from nothing took 35-50 ms, a refresh that keeps
/// the index 10-13 ms.
#[derive(Debug, Default)]
struct SubnetIndex {
    /// Each position's ECS scope: its length, or more if measured subnets
    /// lie inside it.
    scopes: Vec<u8>,
    /// Per family (IPv4, IPv6): prefix lengths, longest first, each with
    /// its subnets by masked address bits.
    by_length: [Vec<(u8, FxHashMap<u128, u32>)>; 2],
    /// IPv4 subnets by /24 (DIR-24), once there are so many that the hash
    /// maps miss the cache on every query: one cache miss, which the server
    /// starts for a whole batch of queries at once.
    by_slash24: Option<Slash24Index>,
}

impl Latencies {
    /// The measurements of `book` no older than `max_age` seconds at `now`.
    pub fn build(book: &MeasurementBook, now: u64, max_age: u64) -> Latencies {
        Latencies::default().refreshed(book, now, max_age)
    }

    /// Like [`build`](Self::build), reusing this table's index if the same
    /// subnets are measured.
    pub fn refreshed(&self, book: &MeasurementBook, now: u64, max_age: u64) -> Latencies {
        let mut latencies = Latencies { built_at: now, ..Latencies::default() };
        // Each id once, in order: a few data centers, measured from many subnets.
        let datacenters: BTreeSet<&str> = book.values().flat_map(|by_datacenter| by_datacenter.keys().map(String::as_str)).collect();
        latencies.datacenters = datacenters.into_iter().map(str::to_owned).collect();
        for (&(network, length), by_datacenter) in book {
            let mut rtts: SmallVec<[DataCenterRtt; 4]> = SmallVec::new();
            for (datacenter, measured) in by_datacenter.iter().filter(|(_, measured)| now.saturating_sub(measured.at) <= max_age) {
                let expiry = measured.at + max_age + 1;
                latencies.next_expiry = Some(latencies.next_expiry.map_or(expiry, |soonest| soonest.min(expiry)));
                let index = latencies.datacenter_index(datacenter).expect("listed above");
                rtts.push(DataCenterRtt { datacenter: index, rtt_ms: measured.rtt_ms, age: now.saturating_sub(measured.at) });
            }
            if !rtts.is_empty() {
                rtts.sort_by(|a, b| a.rtt_ms.total_cmp(&b.rtt_ms).then_with(|| a.datacenter.cmp(&b.datacenter)));
                latencies.count += rtts.len();
                latencies.subnets.push(SubnetRtts { network, length, rtts, scope: length });
            }
        }
        let key = |subnet: &SubnetRtts| (subnet.network, subnet.length);
        let same_subnets = self.subnets.iter().map(key).eq(latencies.subnets.iter().map(key));
        latencies.index = if same_subnets { self.index.clone() } else { Arc::new(SubnetIndex::new(&latencies.subnets)) };
        for (subnet, &scope) in latencies.subnets.iter_mut().zip(&latencies.index.scopes) {
            subnet.scope = scope;
        }
        latencies.fill_rows();
        latencies
    }

    pub fn has_slash24_index(&self) -> bool {
        self.index.by_slash24.is_some()
    }

    /// Starts fetching what [`lookup`](Self::lookup) reads first for
    /// `address`, where the /24 index holds it.
    pub fn prefetch(&self, address: IpAddr) {
        if let (IpAddr::V4(v4), Some(index)) = (address, &self.index.by_slash24) {
            index.prefetch(u32::from(v4));
        }
    }

    fn fill_rows(&mut self) {
        let width = self.datacenters.len();
        self.rows = vec![f64::NAN; self.subnets.len() * width];
        for (position, subnet) in self.subnets.iter().enumerate() {
            for rtt in &subnet.rtts {
                self.rows[position * width + usize::from(rtt.datacenter)] = rtt.rtt_ms;
            }
        }
    }

    /// The index of data center `id` in [`Latencies::datacenters`].
    pub fn datacenter_index(&self, id: &str) -> Option<u16> {
        self.datacenters.binary_search_by(|known| known.as_str().cmp(id)).ok().map(|index| index as u16)
    }

    /// The measurements of the longest measured subnet holding `address`,
    /// and the ECS scope of that answer.
    pub fn lookup(&self, address: IpAddr) -> (Option<MeasuredSubnet<'_>>, u8) {
        if let (IpAddr::V4(v4), Some(index)) = (address, &self.index.by_slash24)
            && let Some((position, scope)) = index.lookup(u32::from(v4))
        {
            return (Some(self.measured(position as usize)), scope);
        }
        self.lookup_hashed(address)
    }

    /// [`lookup`](Self::lookup) through the per-length hash maps.
    fn lookup_hashed(&self, address: IpAddr) -> (Option<MeasuredSubnet<'_>>, u8) {
        let bits = Bits::of(address);
        let family = &self.index.by_length[usize::from(bits.width == 128)];
        for (length, subnets) in family {
            if let Some(&position) = subnets.get(&masked(bits, *length)) {
                let measured = self.measured(position as usize);
                return (Some(measured), measured.subnet.scope);
            }
        }
        // Every measured subnet is at most this long, so every address
        // sharing this many bits misses them all too.
        (None, family.first().map_or(0, |(length, _)| *length))
    }

    fn measured(&self, position: usize) -> MeasuredSubnet<'_> {
        let width = self.datacenters.len();
        MeasuredSubnet { subnet: &self.subnets[position], rtts: &self.rows[position * width..][..width] }
    }
}

impl SubnetIndex {
    /// Indexes `subnets` by position.
    fn new(subnets: &[SubnetRtts]) -> SubnetIndex {
        let mut index = SubnetIndex { scopes: subnets.iter().map(|subnet| subnet.length).collect(), ..SubnetIndex::default() };
        index.index_by_length(subnets);
        for subnet in subnets {
            index.widen_outer_scopes(subnet);
        }
        index.index_slash24s(subnets);
        index
    }

    /// Fills the per-length maps.
    fn index_by_length(&mut self, subnets: &[SubnetRtts]) {
        for (position, &SubnetRtts { network, length, .. }) in subnets.iter().enumerate() {
            let bits = Bits::of(network);
            let family = &mut self.by_length[usize::from(bits.width == 128)];
            let slot = match family.iter().position(|(known, _)| *known == length) {
                Some(slot) => slot,
                None => {
                    family.push((length, FxHashMap::default()));
                    family.len() - 1
                }
            };
            family[slot].1.insert(masked(bits, length), position as u32);
        }
        for family in &mut self.by_length {
            family.sort_by_key(|(length, _)| std::cmp::Reverse(*length));
        }
    }

    /// Widens the scope of every measured subnet holding `inner` to
    /// `inner`'s length: an answer from the outer one holds only for
    /// addresses that agree on enough bits to miss the inner one.
    fn widen_outer_scopes(&mut self, inner: &SubnetRtts) {
        let bits = Bits::of(inner.network);
        let family = &self.by_length[usize::from(bits.width == 128)];
        let outers =
            family.iter().filter(|(outer, _)| *outer < inner.length).filter_map(|(outer, subnets)| subnets.get(&masked(bits, *outer)));
        for &outer in outers {
            let scope = &mut self.scopes[outer as usize];
            *scope = (*scope).max(inner.length);
        }
    }

    /// Builds the /24 index when there are at least [`SLASH24_INDEX_FROM`]
    /// IPv4 subnets.
    fn index_slash24s(&mut self, subnets: &[SubnetRtts]) {
        let mut v4: Vec<(u32, u8, MeasuredAt)> = (subnets.iter().zip(&self.scopes).enumerate())
            .filter(|(_, (subnet, _))| subnet.network.is_ipv4())
            .map(|(position, (subnet, &scope))| {
                let start = (masked(Bits::of(subnet.network), subnet.length) >> 96) as u32;
                (start, subnet.length, MeasuredAt { position: position as u32, scope })
            })
            .collect();
        if v4.len() < SLASH24_INDEX_FROM {
            return;
        }
        v4.sort_unstable_by_key(|&(start, length, _)| (start, length));
        self.by_slash24 = Some(RangeTable::build(v4).slash24_index());
    }
}

/// IPv4 subnets from which on [`Latencies`] keeps a /24 index: fewer fit
/// the cache in hash maps.
const SLASH24_INDEX_FROM: usize = 4096;

/// A measured subnet in the /24 index: its position and ECS scope.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MeasuredAt {
    position: u32,
    scope: u8,
}

impl RangeValue for MeasuredAt {
    const NONE: Self = MeasuredAt { position: u32::MAX, scope: 0 };
    fn least_scope(&self) -> u8 {
        self.scope
    }
    fn compact(&self) -> Option<u32> {
        (self.position != u32::MAX).then_some(self.position)
    }
}

/// A lookup's answer: the subnet measured, and its RTTs by data center.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredSubnet<'a> {
    /// The measurements in full, for explanations.
    pub subnet: &'a SubnetRtts,
    rtts: &'a [f64],
}

impl MeasuredSubnet<'_> {
    /// The fresh RTT in ms to data center `datacenter` (an index into
    /// [`Latencies::datacenters`]), if measured.
    pub fn rtt_ms(&self, datacenter: u16) -> Option<f64> {
        self.rtts.get(usize::from(datacenter)).copied().filter(|rtt| !rtt.is_nan())
    }
}

/// The first `length` bits of `bits`, the rest cleared.
fn masked(bits: Bits, length: u8) -> u128 {
    if length == 0 { 0 } else { bits.value & (u128::MAX << (128 - u32::from(length))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(entries: &[(&str, u8, &str, f64, u64)]) -> MeasurementBook {
        let mut book = MeasurementBook::new();
        for &(network, length, datacenter, rtt_ms, at) in entries {
            book.entry((network.parse().unwrap(), length)).or_default().insert(datacenter.into(), Measured { rtt_ms, at });
        }
        book
    }

    #[test]
    fn the_longest_measured_subnet_answers_with_its_fresh_rtts_sorted() {
        let book = book(&[
            ("10.0.0.0", 8, "fra", 30.0, 1000),
            ("10.1.0.0", 16, "fra", 20.0, 1000),
            ("10.1.0.0", 16, "iad", 5.0, 1000),
            ("10.1.0.0", 16, "sin", 1.0, 100),
        ]);
        let latencies = Latencies::build(&book, 1100, 600);
        let (found, scope) = latencies.lookup("10.1.2.3".parse().unwrap());
        let (found, measured) = (found.unwrap().subnet, found.unwrap());
        let index = |id| latencies.datacenter_index(id).unwrap();
        assert_eq!((measured.rtt_ms(index("iad")), measured.rtt_ms(index("sin"))), (Some(5.0), None));
        assert_eq!((found.length, scope), (16, 16));
        let order: Vec<(&str, u64)> =
            found.rtts.iter().map(|rtt| (latencies.datacenters[rtt.datacenter as usize].as_str(), rtt.age)).collect();
        assert_eq!(order, [("iad", 100), ("fra", 100)], "sin is 1000 s old, past the 600 s limit");
        let (outer, scope) = latencies.lookup("10.2.0.1".parse().unwrap());
        assert_eq!((outer.unwrap().subnet.length, scope), (8, 16), "10/8 holds 10.1/16: its answers depend on 16 bits");
        assert_eq!(latencies.lookup("192.0.2.1".parse().unwrap()), (None, 16));
        assert_eq!((latencies.count, latencies.next_expiry), (3, Some(1601)));
    }

    #[test]
    fn the_slash24_index_answers_as_the_hash_maps() {
        // 5,000 /24s in 10.0/8, an outer /16 and /8, and /26s that split
        // some /24s: enough for the index, and every kind of /24 in it.
        let mut entries: Vec<(String, u8, &str, f64, u64)> = Vec::new();
        for block in 0..5000u32 {
            entries.push((format!("10.{}.{}.0", block / 200, block % 200), 24, "fra", f64::from(block % 97), 1000));
        }
        entries.push(("10.30.0.0".into(), 16, "iad", 7.0, 1000));
        entries.push(("10.0.0.0".into(), 8, "iad", 9.0, 1000));
        for block in 0..50u32 {
            entries.push((format!("10.{}.{}.64", block, block * 3), 26, "sin", 1.0, 1000));
        }
        let rows: Vec<(&str, u8, &str, f64, u64)> = entries.iter().map(|(a, l, d, r, t)| (a.as_str(), *l, *d, *r, *t)).collect();
        let latencies = Latencies::build(&book(&rows), 1100, 600);
        assert!(latencies.has_slash24_index());
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..50_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let address = IpAddr::from(((state >> 40) as u32 & 0x00FF_FFFF | 0x0A00_0000).to_be_bytes());
            let (indexed, hashed) = (latencies.lookup(address), latencies.lookup_hashed(address));
            assert_eq!((indexed.0.map(|found| found.subnet), indexed.1), (hashed.0.map(|found| found.subnet), hashed.1), "{address}");
        }
    }

    #[test]
    fn new_rtts_of_the_same_subnets_reuse_the_index_and_new_subnets_rebuild_it() {
        let first = Latencies::build(&book(&[("10.0.0.0", 8, "fra", 30.0, 1000), ("10.1.0.0", 16, "fra", 40.0, 1000)]), 1100, 600);
        let address: IpAddr = "10.1.2.3".parse().unwrap();
        let remeasured = first.refreshed(&book(&[("10.0.0.0", 8, "sin", 5.0, 1050), ("10.1.0.0", 16, "fra", 12.0, 1050)]), 1100, 600);
        assert!(Arc::ptr_eq(&first.index, &remeasured.index), "same subnets, same index");
        let (found, scope) = remeasured.lookup(address);
        assert_eq!((found.unwrap().rtt_ms(remeasured.datacenter_index("fra").unwrap()), scope), (Some(12.0), 16));
        let (outer, outer_scope) = remeasured.lookup("10.200.0.1".parse().unwrap());
        assert_eq!(
            (outer.unwrap().rtt_ms(remeasured.datacenter_index("sin").unwrap()), outer_scope),
            (Some(5.0), 16),
            "widened by the /16"
        );
        let without_inner = remeasured.refreshed(&book(&[("10.0.0.0", 8, "sin", 5.0, 1050)]), 1100, 600);
        assert!(!Arc::ptr_eq(&remeasured.index, &without_inner.index), "a subnet left: a new index");
        let (outer, outer_scope) = without_inner.lookup(address);
        assert_eq!((outer.unwrap().subnet.length, outer_scope), (8, 8), "nothing inside the /8 any more");
        let expired = without_inner.refreshed(&book(&[("10.0.0.0", 8, "sin", 5.0, 1050)]), 5000, 600);
        assert_eq!((expired.lookup(address).0, expired.count), (None, 0), "stale measurements leave the index too");
    }

    #[test]
    fn a_subnet_with_only_stale_measurements_is_not_there() {
        let latencies = Latencies::build(&book(&[("10.0.0.0", 8, "fra", 30.0, 0)]), 10_000, 600);
        assert_eq!(latencies.lookup("10.0.0.1".parse().unwrap()).0, None);
        assert_eq!(latencies.next_expiry, None);
    }
}
