//! Longest-prefix tables flattened into sorted address ranges.
//!
//! Pharos looks client addresses up in large prefix tables on the query
//! path: a million BGP prefixes (pharos-bgp), three million City database
//! networks (pharos-route's nearest policy). A trie with a node per bit
//! would take tens of millions of nodes; instead the prefixes are cut into
//! the disjoint ranges of addresses that share a longest match, and a
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
//! Inside the server the kernel's UDP path evicts these tables between two
//! queries, so what a lookup costs is the number of cache misses it waits
//! for one after another. The starts are kept apart from the values, packed,
//! and the last few dozen starts of a search are counted in one pass rather
//! than halved: their cache lines are fetched at once instead of one miss
//! per step. Then a lookup waits for three misses: the directory, the
//! starts, the value.
//!
//! The same ranges give the EDNS Client Subnet scope (RFC 7871 section
//! 7.2.1) exactly: the answer depends on as many leading bits as it takes
//! for the address's aligned block to fit inside its range, and never
//! fewer than the value asks for (the matched prefix's length, for answers
//! that name their prefix).
//!
//! pharos-route keeps a bit trie (`prefix::PrefixMap`) beside these tables
//! for small maps built entry by entry and copied with each snapshot: a
//! range table's directory costs 256 KiB and about 130 us to build or copy
//! even for ten prefixes, where the trie takes a few microseconds; from a
//! thousand prefixes on the range table is the faster in every respect
//! (pharos-route's `examples/prefix_tables.rs` has the figures).

use std::fmt::Debug;

/// An unsigned integer holding an address of one family.
pub trait Address: Copy + Ord + Debug {
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
pub const DIRECTORY_BITS: u32 = 16;

/// What a range answers.
pub trait RangeValue: Copy + PartialEq + Debug {
    /// The answer where no prefix matches.
    const NONE: Self;
    /// Leading bits a lookup's scope never drops below: the matched
    /// prefix's length where the answer names it, else 0.
    fn least_scope(&self) -> u8;
    /// What a [`Slash24Index`] keeps of the value: at most 24 bits, or
    /// nothing, and then lookups in that /24 go to the range table.
    fn compact(&self) -> Option<u32>;
}

/// The disjoint ranges of one address family, covering all of it: range
/// `i` runs from `starts[i]` up to the next start and answers `values[i]`.
#[derive(Debug, Clone)]
pub struct RangeTable<A, V> {
    starts: Vec<A>,
    values: Vec<V>,
    /// The ranges starting in directory slot `s` are
    /// `directory[s]..directory[s + 1]`.
    directory: Vec<u32>,
}

/// Starts few enough to count in one pass: 64 IPv4 starts are four cache
/// lines, which the processor fetches together.
const COUNTED_STARTS: usize = 64;

/// A prefix whose range is still open while more specific ones are cut out of it.
struct Open<A, V> {
    last: A,
    value: V,
}

impl<A: Address, V: RangeValue> RangeTable<A, V> {
    /// Flattens `(address, length, value)` prefixes, sorted by address and
    /// then length (enclosing prefixes first). Nested prefixes are fine;
    /// the longest match wins.
    pub fn build(prefixes: impl IntoIterator<Item = (A, u8, V)>) -> Self {
        let mut table = RangeTable { starts: vec![A::ZERO], values: vec![V::NONE], directory: Vec::new() };
        let mut enclosing: Vec<Open<A, V>> = Vec::new();
        let mut previous = None;
        for (address, length, value) in prefixes {
            debug_assert!(previous <= Some((address, length)), "prefixes must come sorted");
            previous = Some((address, length));
            table.close_before(&mut enclosing, address);
            table.begin(address, value);
            enclosing.push(Open { last: address.last_in_prefix(length), value });
        }
        // Prefixes still open after this end at the family's last address,
        // with nothing after them to hand back.
        table.close_before(&mut enclosing, A::MAX);
        table.starts.shrink_to_fit();
        table.values.shrink_to_fit();
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

    /// Closes the open prefixes that end before `address`, innermost first,
    /// handing the addresses after each back to the prefix around it.
    fn close_before(&mut self, enclosing: &mut Vec<Open<A, V>>, address: A) {
        while let Some(innermost) = enclosing.last().filter(|open| open.last < address) {
            let after = innermost.last.successor();
            enclosing.pop();
            if let Some(after) = after {
                self.begin(after, enclosing.last().map_or(V::NONE, |outer| outer.value));
            }
        }
    }

    /// Starts a range at `start`. A range already starting there was empty
    /// and is replaced; one with the same answer just grows instead.
    fn begin(&mut self, start: A, value: V) {
        if self.starts.last() == Some(&start) {
            self.starts.pop();
            self.values.pop();
        }
        if self.values.last() == Some(&value) {
            return;
        }
        self.starts.push(start);
        self.values.push(value);
    }

    /// The range holding `address`: the last one starting at or before it,
    /// searched among those starting in its directory slot. If none does,
    /// it is the one before them; slot 0 always holds range 0, at zero.
    fn range_of(&self, address: A) -> usize {
        let slot = address.directory_slot();
        let (mut first, end) = (self.directory[slot] as usize, self.directory[slot + 1] as usize);
        let mut candidates = &self.starts[first..end];
        // Halve until few are left; the range sought stays among them or,
        // while `first` has not moved, may be the one before them.
        while candidates.len() > COUNTED_STARTS {
            let middle = candidates.len() / 2;
            if candidates[middle] <= address {
                first += middle;
                candidates = &candidates[middle..];
            } else {
                candidates = &candidates[..middle];
            }
        }
        first + candidates.iter().filter(|&&start| start <= address).count() - 1
    }

    /// The value for `address` (`V::NONE` if no prefix holds it) and the
    /// leading bits of `address` it depends on: every address sharing them
    /// gets the same value.
    pub fn lookup(&self, address: A) -> (V, u8) {
        let index = self.range_of(address);
        let value = self.values[index];
        (value, self.scope(index, address).max(value.least_scope()))
    }

    /// The fewest leading bits of `address` whose aligned block lies inside
    /// range `index`.
    fn scope(&self, index: usize, address: A) -> u8 {
        // The block stays clear of the range before once it no longer
        // holds that range's last address: one bit past what they share.
        let after_previous = match index {
            0 => 0,
            _ => address.common_bits(self.starts[index].predecessor()) + 1,
        };
        let before_next = self.starts.get(index + 1).map_or(0, |&next| address.common_bits(next) + 1);
        after_previous.max(before_next)
    }

    pub fn range_count(&self) -> usize {
        self.starts.len()
    }

    /// Heap bytes held by the table.
    pub fn memory_bytes(&self) -> usize {
        self.starts.capacity() * size_of::<A>() + self.values.capacity() * size_of::<V>() + self.directory.capacity() * size_of::<u32>()
    }
}

/// DIR-24 for IPv4 (as routers' longest-prefix tables do it): one 4-byte
/// entry per /24 holding the compact value and the scope of every address
/// in it, so a lookup is one cache miss instead of three. A /24 that more
/// than one range shares, or whose value has no compact form, says so, and
/// its lookups go to the range table.
///
/// It spans 64 MiB of zeroed memory, and an entry of zero sends its /24
/// to the range table: the kernel backs the pages no range answers
/// directly with nothing, so a sparse table costs the pages it fills and
/// building one writes only those. (The first read of such a page maps
/// the kernel's zero page, once per page; with transparent huge pages
/// set to `always` a write fills 2 MiB, not the 4 KiB `memory_bytes`
/// counts.) It pays where a table is read on every query and each cache
/// miss costs 0.1 us (bench/proximity).
pub struct Slash24Index {
    /// Per /24: 0, or (compact value + 1) << 8 | scope.
    entries: Box<[u32]>,
    /// Pages of `entries` holding an entry other than 0.
    pages_written: usize,
}

impl std::fmt::Debug for Slash24Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slash24Index({} of 2^24 /24s direct)", self.entries.iter().filter(|&&entry| entry != Slash24Index::SHARED).count())
    }
}

impl Slash24Index {
    /// The entry of a /24 that the range table must answer.
    const SHARED: u32 = 0;
    /// Entries per page of memory (4 KiB).
    const PAGE_ENTRIES: usize = 4096 / size_of::<u32>();
    /// The largest compact value an entry holds (24 bits, less the one
    /// added so that no entry with a value is 0).
    const MAX_COMPACT: u32 = (1 << 24) - 2;

    /// The compact value of `address` and the leading bits it depends on,
    /// unless its /24 must be looked up in the range table.
    pub fn lookup(&self, address: u32) -> Option<(u32, u8)> {
        let entry = self.entries[(address >> 8) as usize];
        (entry != Slash24Index::SHARED).then(|| ((entry >> 8) - 1, entry as u8))
    }

    /// The memory the entries occupy: the pages written.
    pub fn memory_bytes(&self) -> usize {
        self.pages_written * Slash24Index::PAGE_ENTRIES * size_of::<u32>()
    }

    /// Starts fetching the entry of `address` into the cache, so that a
    /// lookup a little later does not wait for memory. Server loops call
    /// it for a whole batch of queries before answering them.
    pub fn prefetch(&self, address: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let entry: *const u32 = &self.entries[(address >> 8) as usize];
            // SAFETY: a prefetch is only a hint; it never faults and the address is in bounds anyway.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(entry.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = address;
    }
}

impl<V: RangeValue> RangeTable<u32, V> {
    /// The DIR-24 index of this IPv4 table.
    pub fn slash24_index(&self) -> Slash24Index {
        // Zeroed (SHARED) memory comes from the kernel untouched.
        let mut entries = vec![Slash24Index::SHARED; 1 << 24].into_boxed_slice();
        let mut pages = vec![false; entries.len() / Slash24Index::PAGE_ENTRIES];
        for index in 0..self.starts.len() {
            let first_block = self.starts[index].div_ceil(256) as usize;
            let end_block = self.starts.get(index + 1).map_or(1 << 24, |&next| (next / 256) as usize);
            let Some(compact) = self.values[index].compact().filter(|&compact| compact <= Slash24Index::MAX_COMPACT) else {
                continue;
            };
            for block in first_block..end_block {
                // The scope is the same for the whole block: the range's edges lie outside it.
                let (_, scope) = self.lookup((block as u32) << 8);
                entries[block] = (compact + 1) << 8 | u32::from(scope);
                pages[block / Slash24Index::PAGE_ENTRIES] = true;
            }
        }
        Slash24Index { entries, pages_written: pages.iter().filter(|&&written| written).count() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test answer: an origin number and its prefix length; 0 is none.
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Matched(u32, u8);

    impl RangeValue for Matched {
        const NONE: Self = Matched(0, 0);
        fn least_scope(&self) -> u8 {
            self.1
        }
        fn compact(&self) -> Option<u32> {
            (self.0 != 0).then_some(self.0)
        }
    }

    fn v4(text: &str) -> u32 {
        text.parse::<std::net::Ipv4Addr>().unwrap().into()
    }

    /// A table from `(network address, length, origin)` in any order.
    fn table(entries: &[(&str, u8, u32)]) -> RangeTable<u32, Matched> {
        let mut prefixes: Vec<_> =
            entries.iter().map(|&(address, length, origin)| (v4(address), length, Matched(origin, length))).collect();
        prefixes.sort_unstable_by_key(|&(address, length, _)| (address, length));
        RangeTable::build(prefixes)
    }

    fn lookup(table: &RangeTable<u32, Matched>, address: &str) -> (Option<(u32, u8)>, u8) {
        let (found, scope) = table.lookup(v4(address));
        ((found != Matched::NONE).then_some((found.0, found.1)), scope)
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
        assert_eq!(lookup(&RangeTable::build([]), "1.2.3.4"), (None, 0));
    }

    #[test]
    fn siblings_with_the_same_answer_share_one_range() {
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
            let (found, scope) = table.lookup(address);
            let free_bits = 32 - u32::from(scope);
            let other = address ^ ((state as u32 | 1) & u32::MAX.checked_shr(32 - free_bits).unwrap_or(0));
            assert_eq!(table.lookup(other).0, found, "{address:#x} vs {other:#x}");
        }
    }

    #[test]
    fn crowded_slots_answer_as_a_plain_longest_prefix_search() {
        // 10.0/16 cut into 1,024 /26s and some /28s inside them: far more
        // starts in one directory slot than are counted in one pass.
        let mut entries: Vec<(u32, u8, Matched)> = Vec::new();
        for block in 0..1024u32 {
            entries.push((v4("10.0.0.0") + block * 64, 26, Matched(1 + block % 3, 26)));
            if block % 5 == 0 {
                entries.push((v4("10.0.0.0") + block * 64 + 16, 28, Matched(100 + block, 28)));
            }
        }
        entries.push((v4("10.0.0.0"), 8, Matched(7, 8)));
        entries.sort_unstable_by_key(|&(address, length, _)| (address, length));
        let table = RangeTable::build(entries.iter().copied());
        let longest_match = |address: u32| {
            let holds = |&&(network, length, _): &&(u32, u8, Matched)| address.last_in_prefix(length) == network.last_in_prefix(length);
            entries.iter().filter(holds).max_by_key(|(_, length, _)| *length).map_or(Matched::NONE, |&(_, _, value)| value)
        };
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let address = v4("10.0.0.0") | (state >> 40) as u32 & 0x0001_FFFF;
            assert_eq!(table.lookup(address).0, longest_match(address), "{address:#x}");
        }
    }

    #[test]
    fn the_slash24_index_answers_as_the_table_or_defers_to_it() {
        let table = table(&[
            ("10.0.0.0", 8, 1),
            ("10.1.0.0", 16, 2),
            ("10.1.2.0", 24, 3),
            ("10.1.3.0", 25, 4),
            ("10.9.0.0", 17, 5),
            ("255.255.255.0", 24, 6),
            ("0.0.0.0", 23, 7),
        ]);
        let index = table.slash24_index();
        let mut direct = 0;
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let near = ["10.1.2.0", "10.1.3.0", "10.9.128.0", "255.255.255.0", "0.0.1.0", "11.0.0.0", "9.255.255.0"];
        for turn in 0..40_000u32 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let address = match turn % 2 {
                0 => v4(near[turn as usize / 2 % near.len()]) ^ (state as u32 & 0x1FF),
                _ => (state >> 32) as u32,
            };
            let (value, scope) = table.lookup(address);
            match index.lookup(address) {
                Some(fast) => {
                    assert_eq!(fast, (value.0, scope), "{address:#x}");
                    direct += 1;
                }
                None => assert!(value == Matched::NONE || value.1 > 24 || table.lookup(address ^ 0xFF).0 != value, "{address:#x} deferred"),
            }
        }
        assert!(direct > 10_000, "{direct} answered directly");
        assert_eq!(index.lookup(v4("10.1.3.7")), None, "10.1.3/24 is split by a /25");
        assert_eq!(index.lookup(v4("12.0.0.1")), None, "unrouted: no compact value");
        assert_eq!(index.lookup(v4("255.255.255.255")), Some((6, 24)));
    }

    /// A value that asks for no least scope, like a place on the globe.
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Place(u32);

    impl RangeValue for Place {
        const NONE: Self = Place(u32::MAX);
        fn least_scope(&self) -> u8 {
            0
        }
        fn compact(&self) -> Option<u32> {
            (*self != Place::NONE).then_some(self.0)
        }
    }

    #[test]
    fn adjacent_networks_with_the_same_value_merge_and_scope_follows_the_merged_range() {
        let networks = [(v4("10.0.0.0"), 9, Place(1)), (v4("10.128.0.0"), 9, Place(1)), (v4("11.0.0.0"), 8, Place(2))];
        let table = RangeTable::build(networks);
        assert_eq!(table.range_count(), 4, "nothing, 10/8 as one, 11/8, nothing");
        assert_eq!(table.lookup(v4("10.1.2.3")), (Place(1), 8), "the /9s merged: 8 bits decide");
        assert_eq!(table.lookup(v4("12.0.0.1")), (Place::NONE, 6), "12.0.0.0/6 holds nothing");
    }

    #[test]
    fn a_sparse_slash24_index_writes_only_its_pages_and_keeps_value_zero() {
        let networks = [(v4("10.0.0.0"), 24, Place(0)), (v4("10.0.1.0"), 24, Place(7)), (v4("200.1.2.0"), 24, Place(1 << 23))];
        let index = RangeTable::build(networks).slash24_index();
        assert_eq!(index.lookup(v4("10.0.0.9")), Some((0, 24)), "value 0 is a value, not a deferral");
        assert_eq!(index.lookup(v4("10.0.1.9")), Some((7, 24)));
        assert_eq!(index.lookup(v4("200.1.2.3")), Some((1 << 23, 24)));
        assert_eq!(index.lookup(v4("10.0.2.1")), None, "nothing there");
        assert_eq!(index.memory_bytes(), 2 * 4096, "two pages of entries written, the rest of the 64 MiB untouched");
        let largest = Slash24Index::MAX_COMPACT;
        let index = RangeTable::build([(v4("10.0.0.0"), 24, Place(largest)), (v4("10.0.1.0"), 24, Place(largest + 1))]).slash24_index();
        assert_eq!(index.lookup(v4("10.0.0.1")), Some((largest, 24)));
        assert_eq!(index.lookup(v4("10.0.1.1")), None, "too large for an entry: the range table answers");
    }
}
