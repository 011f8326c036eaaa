//! IP address -> origin AS by longest-prefix match, flattened into sorted
//! address ranges.
//!
//! A full table has about a million IPv4 prefixes. A trie with a node per
//! bit would take tens of millions of nodes; instead the prefixes are cut
//! into the disjoint ranges of addresses that share a longest match, and a
//! lookup is one binary search over the range starts: a few bytes per
//! prefix and no pointer chasing.
//!
//! A plain binary search over a million starts touches some twenty cache
//! lines, scattered, and cache misses would be most of a lookup's time. A
//! directory indexed by the address's first 16 bits narrows the search to
//! the ranges starting in that /16 first. Measured on the JINX table, one
//! run before and one after (bench/RESULTS.md, "bench/bgp-load"): 18 -> 42
//! million lookups a second, 99th percentile 480 -> 190 ns, for 0.5 MB.
//!
//! The same ranges give the EDNS Client Subnet scope (RFC 7871 section
//! 7.2.1) exactly: the answer depends on as many leading bits as it takes
//! for the address's aligned block to fit inside its range. That is the
//! meaning of `pharos_route::prefix::Match::scope`, never shorter than the
//! matched prefix.

use std::net::IpAddr;
use std::num::NonZeroU32;

use crate::origins::Prefix;

/// An unsigned integer holding an address of one family.
pub(crate) trait Address: Copy + Ord + std::fmt::Debug {
    const ZERO: Self;
    const MAX: Self;
    /// The last address of the prefix `self/length`.
    fn last_in_prefix(self, length: u8) -> Self;
    /// The next address, or `None` after the last one.
    fn successor(self) -> Option<Self>;
    /// The previous address; never asked of zero.
    fn predecessor(self) -> Self;
    /// How many leading bits `self` and `other` share.
    fn common_bits(self, other: Self) -> u8;
    /// The address's first [`DIRECTORY_BITS`] bits.
    fn directory_slot(self) -> usize;
}

macro_rules! address {
    ($int:ty) => {
        impl Address for $int {
            const ZERO: Self = 0;
            const MAX: Self = <$int>::MAX;
            fn last_in_prefix(self, length: u8) -> Self {
                self | <$int>::MAX.checked_shr(u32::from(length)).unwrap_or(0)
            }
            fn successor(self) -> Option<Self> {
                self.checked_add(1)
            }
            fn predecessor(self) -> Self {
                self - 1
            }
            fn common_bits(self, other: Self) -> u8 {
                (self ^ other).leading_zeros() as u8
            }
            fn directory_slot(self) -> usize {
                (self >> (<$int>::BITS - DIRECTORY_BITS)) as usize
            }
        }
    };
}
address!(u32);
address!(u128);

/// Leading address bits that index the directory.
const DIRECTORY_BITS: u32 = 16;

/// What a lookup found, and how much of the address it depended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopedLookup {
    /// The origin AS of the longest matching prefix and that prefix's length.
    pub found: Option<(u32, u8)>,
    /// Leading bits of the address the result depends on: every address
    /// sharing them gets the same `found`.
    pub scope: u8,
}

/// The disjoint ranges of one family, covering all of its addresses.
/// Range `i` runs from `starts[i]` up to the next start; `origins[i]` is 0
/// where no prefix matches (AS 0 never originates a route, RFC 7607).
#[derive(Debug, Clone)]
pub(crate) struct RangeTable<A> {
    starts: Vec<A>,
    origins: Vec<u32>,
    lengths: Vec<u8>,
    /// The ranges starting in directory slot `s` are
    /// `directory[s]..directory[s + 1]`.
    directory: Vec<u32>,
}

/// A prefix whose range is still open while more specific ones are cut out of it.
struct Open<A> {
    last: A,
    origin: u32,
    length: u8,
}

impl<A: Address> RangeTable<A> {
    /// Flattens prefixes sorted by (address, length), each with its origin.
    pub(crate) fn build(prefixes: &[(Prefix<A>, NonZeroU32)]) -> Self {
        let mut table = RangeTable { starts: vec![A::ZERO], origins: vec![0], lengths: vec![0], directory: Vec::new() };
        let mut enclosing: Vec<Open<A>> = Vec::new();
        for &(prefix, origin) in prefixes {
            let origin = origin.get();
            table.close_before(&mut enclosing, prefix.address);
            table.begin(prefix.address, origin, prefix.length);
            enclosing.push(Open { last: prefix.address.last_in_prefix(prefix.length), origin, length: prefix.length });
        }
        // Prefixes still open after this end at the family's last address,
        // with nothing after them to hand back.
        table.close_before(&mut enclosing, A::MAX);
        table.starts.shrink_to_fit();
        table.origins.shrink_to_fit();
        table.lengths.shrink_to_fit();
        table.directory = table.build_directory();
        table
    }

    fn build_directory(&self) -> Vec<u32> {
        let mut directory = Vec::with_capacity((1 << DIRECTORY_BITS) + 1);
        let mut index = 0;
        for slot in 0..=1 << DIRECTORY_BITS {
            while index < self.starts.len() && self.starts[index].directory_slot() < slot {
                index += 1;
            }
            directory.push(index as u32);
        }
        directory
    }

    /// The range holding `address`: the last one starting at or before it,
    /// searched among those starting in its directory slot. If none does,
    /// it is the one before them; slot 0 always holds range 0, at zero.
    fn range_of(&self, address: A) -> usize {
        let slot = address.directory_slot();
        let (first, end) = (self.directory[slot] as usize, self.directory[slot + 1] as usize);
        first + self.starts[first..end].partition_point(|&start| start <= address) - 1
    }

    /// Closes the open prefixes that end before `address`, innermost first,
    /// handing the addresses after each back to the prefix around it.
    fn close_before(&mut self, enclosing: &mut Vec<Open<A>>, address: A) {
        while let Some(innermost) = enclosing.last().filter(|open| open.last < address) {
            let after = innermost.last.successor();
            enclosing.pop();
            if let Some(after) = after {
                let (origin, length) = enclosing.last().map_or((0, 0), |outer| (outer.origin, outer.length));
                self.begin(after, origin, length);
            }
        }
    }

    /// Starts a range at `start`. A range already starting there was empty
    /// and is replaced; one with the same answer just grows instead.
    fn begin(&mut self, start: A, origin: u32, length: u8) {
        if self.starts.last() == Some(&start) {
            self.starts.pop();
            self.origins.pop();
            self.lengths.pop();
        }
        if self.origins.last() == Some(&origin) && self.lengths.last() == Some(&length) {
            return;
        }
        self.starts.push(start);
        self.origins.push(origin);
        self.lengths.push(length);
    }

    pub(crate) fn lookup(&self, address: A) -> ScopedLookup {
        let index = self.range_of(address);
        let found = match self.origins[index] {
            0 => None,
            origin => Some((origin, self.lengths[index])),
        };
        ScopedLookup { found, scope: self.scope(index, address) }
    }

    /// The fewest leading bits of `address` whose aligned block lies inside
    /// range `index`, but no fewer than the matched prefix length.
    fn scope(&self, index: usize, address: A) -> u8 {
        // The block stays clear of the range before once it no longer
        // holds that range's last address: one bit past what they share.
        let after_previous = match index {
            0 => 0,
            _ => address.common_bits(self.starts[index].predecessor()) + 1,
        };
        let before_next = self.starts.get(index + 1).map_or(0, |&next| address.common_bits(next) + 1);
        self.lengths[index].max(after_previous).max(before_next)
    }

    pub(crate) fn range_count(&self) -> usize {
        self.starts.len()
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.starts.capacity() * size_of::<A>()
            + (self.origins.capacity() + self.directory.capacity()) * size_of::<u32>()
            + self.lengths.capacity()
    }
}

/// Origin AS by longest-prefix match, for IPv4 and IPv6.
#[derive(Debug, Clone)]
pub struct IpToAs {
    v4: RangeTable<u32>,
    v6: RangeTable<u128>,
}

impl IpToAs {
    /// Builds the table from elected origins, each family sorted by prefix.
    pub(crate) fn new(v4: &[(Prefix<u32>, NonZeroU32)], v6: &[(Prefix<u128>, NonZeroU32)]) -> IpToAs {
        IpToAs { v4: RangeTable::build(v4), v6: RangeTable::build(v6) }
    }

    /// The origin AS of the longest prefix holding `address`, and that
    /// prefix's length.
    pub fn lookup(&self, address: IpAddr) -> Option<(u32, u8)> {
        self.lookup_scoped(address).found
    }

    /// [`lookup`](Self::lookup), plus the ECS scope of the answer.
    pub fn lookup_scoped(&self, address: IpAddr) -> ScopedLookup {
        match address {
            IpAddr::V4(v4) => self.v4.lookup(u32::from(v4)),
            IpAddr::V6(v6) => self.v6.lookup(u128::from(v6)),
        }
    }

    /// Number of address ranges (IPv4, IPv6) the prefixes were cut into.
    pub fn range_counts(&self) -> (usize, usize) {
        (self.v4.range_count(), self.v6.range_count())
    }

    /// Heap bytes held by the table.
    pub fn memory_bytes(&self) -> usize {
        self.v4.memory_bytes() + self.v6.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asn(value: u32) -> NonZeroU32 {
        NonZeroU32::new(value).unwrap()
    }

    fn v4(text: &str) -> u32 {
        text.parse::<std::net::Ipv4Addr>().unwrap().into()
    }

    /// A table from `(network address, length, origin)` in any order.
    fn table(entries: &[(&str, u8, u32)]) -> RangeTable<u32> {
        let mut prefixes: Vec<_> =
            entries.iter().map(|&(address, length, origin)| (Prefix { address: v4(address), length }, asn(origin))).collect();
        prefixes.sort_unstable();
        RangeTable::build(&prefixes)
    }

    fn lookup(table: &RangeTable<u32>, address: &str) -> (Option<(u32, u8)>, u8) {
        let found = table.lookup(v4(address));
        (found.found, found.scope)
    }

    #[test]
    fn nested_prefixes_match_the_longest_and_scope_stops_at_the_hole() {
        let table = table(&[("10.0.0.0", 8, 1), ("10.1.0.0", 16, 2), ("10.1.2.0", 24, 3)]);
        assert_eq!(lookup(&table, "10.1.2.3"), (Some((3, 24)), 24));
        assert_eq!(lookup(&table, "10.1.3.1"), (Some((2, 16)), 24));
        // 10.2/16 and 10.1/16 part at bit 15, so 15 bits decide.
        assert_eq!(lookup(&table, "10.2.0.1"), (Some((1, 8)), 15));
        // 10.128/9 holds no more specific prefix; 10.0/9 does.
        assert_eq!(lookup(&table, "10.200.0.1"), (Some((1, 8)), 9));
        // Outside any prefix: 11.x shares 7 bits with 10.255.255.255.
        assert_eq!(lookup(&table, "11.0.0.1"), (None, 8));
        assert_eq!(lookup(&table, "192.0.2.1"), (None, 1));
    }

    #[test]
    fn the_scope_agrees_with_the_bit_trie_in_the_route_crate() {
        // The cases of crates/route/src/prefix.rs, same answers.
        let table = table(&[("10.0.0.0", 8, 8), ("10.1.0.0", 16, 16)]);
        assert_eq!(lookup(&table, "10.1.2.3"), (Some((16, 16)), 16));
        assert_eq!(lookup(&table, "10.2.0.1"), (Some((8, 8)), 15));
        assert_eq!(lookup(&table, "192.0.2.1"), (None, 1));
    }

    #[test]
    fn edges_of_the_address_space() {
        let table = table(&[("0.0.0.0", 0, 7), ("255.255.255.255", 32, 9), ("0.0.0.0", 32, 5)]);
        assert_eq!(lookup(&table, "255.255.255.255"), (Some((9, 32)), 32));
        assert_eq!(lookup(&table, "255.255.255.254"), (Some((7, 0)), 32));
        assert_eq!(lookup(&table, "0.0.0.0"), (Some((5, 32)), 32));
        // 128/1 would hold 255.255.255.255; 128/2 does not.
        assert_eq!(lookup(&table, "128.0.0.0"), (Some((7, 0)), 2));
        assert_eq!(table.range_count(), 3);
        assert_eq!(lookup(&RangeTable::build(&[]), "1.2.3.4"), (None, 0));
    }

    #[test]
    fn siblings_with_the_same_origin_and_length_share_one_range() {
        let table = table(&[("192.0.2.0", 25, 4), ("192.0.2.128", 25, 4), ("198.51.100.0", 24, 4)]);
        // Unrouted space, the two /25s as one, unrouted, the /24, unrouted.
        assert_eq!(table.range_count(), 5);
        // Both halves answer alike, yet the scope never drops below the /25.
        assert_eq!(lookup(&table, "192.0.2.1"), (Some((4, 25)), 25));
    }

    #[test]
    fn a_more_specific_that_fills_its_parent_hides_it() {
        let table = table(&[("10.0.0.0", 8, 1), ("10.0.0.0", 9, 2), ("10.128.0.0", 9, 3)]);
        assert_eq!(lookup(&table, "10.0.0.1"), (Some((2, 9)), 9));
        assert_eq!(lookup(&table, "10.128.0.1"), (Some((3, 9)), 9));
    }

    #[test]
    fn every_address_in_the_scope_gets_the_same_answer() {
        let table =
            table(&[("10.0.0.0", 8, 1), ("10.128.0.0", 9, 2), ("10.200.3.0", 24, 3), ("10.200.3.128", 25, 3), ("172.16.0.0", 12, 4)]);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..5000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let address = (state >> 32) as u32 & 0x0FFF_FFFF | 0x0A00_0000;
            let found = table.lookup(address);
            let free_bits = 32 - u32::from(found.scope);
            let other = address ^ ((state as u32 | 1) & u32::MAX.checked_shr(32 - free_bits).unwrap_or(0));
            assert_eq!(table.lookup(other).found, found.found, "{address:#x} vs {other:#x}");
        }
    }

    #[test]
    fn ipv6_and_ipv4_are_looked_up_apart() {
        let v6: u128 = "2001:db8::".parse::<std::net::Ipv6Addr>().unwrap().into();
        let table = IpToAs::new(
            &[(Prefix { address: v4("192.0.2.0"), length: 24 }, asn(64496))],
            &[(Prefix { address: v6, length: 32 }, asn(4_200_000_000))],
        );
        assert_eq!(table.lookup("2001:db8:1::1".parse().unwrap()), Some((4_200_000_000, 32)));
        assert_eq!(table.lookup("192.0.2.77".parse().unwrap()), Some((64496, 24)));
        assert_eq!(table.lookup("2001:db9::1".parse().unwrap()), None);
        assert_eq!(table.lookup_scoped("2001:db9::1".parse().unwrap()).scope, 32);
    }
}
