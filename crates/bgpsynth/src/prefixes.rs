//! Address space for the synthetic ASes, and the prefixes they announce.
//!
//! Each AS gets one aligned block, large enough for twice its prefixes at
//! the family's usual most specific length (/24, /48), and announces about
//! half the time the block itself, then more specific prefixes inside it
//! with lengths in the proportions of a real table (60% of IPv4 prefixes
//! are /24s, almost half of IPv6 ones /48s). A few more specifics are
//! announced by a customer of the block's holder (provider-assigned space),
//! so nested prefixes with different origins occur, as they do for real.
//! Prefix counts per AS are heavy-tailed: most ASes announce one or a few,
//! some thousands.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use rustc_hash::FxHashSet;

use super::rng::Rng;
use super::topology::Topology;

/// One prefix and the AS (by index) that originates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Announcement {
    pub(crate) prefix: IpNet,
    pub(crate) origin: u32,
}

/// How one address family is laid out, addresses held in a `u128`.
pub(crate) struct Family {
    bits: u8,
    /// The usual most specific length announced: /24, /48.
    longest: u8,
    /// The shortest block one AS gets.
    largest_block: u8,
    /// Where allocation starts and where it must stop.
    first: u128,
    end: u128,
    /// Blocks never handed out: (address, length).
    reserved: &'static [(u128, u8)],
    /// More-specific lengths and their weights; `longest` among them.
    lengths: &'static [(u8, f64)],
    /// Share of the ASes that announce anything in this family.
    adoption: f64,
}

const fn v4(a: u8, b: u8) -> u128 {
    ((a as u128) << 24) | ((b as u128) << 16)
}

pub(crate) const IPV4: Family = Family {
    bits: 32,
    longest: 24,
    largest_block: 8,
    first: v4(1, 0),
    end: v4(224, 0),
    reserved: &[(v4(10, 0), 8), (v4(100, 64), 10), (v4(127, 0), 8), (v4(169, 254), 16), (v4(172, 16), 12), (v4(192, 168), 16)],
    lengths: &[(24, 0.60), (23, 0.08), (22, 0.12), (21, 0.05), (20, 0.05), (19, 0.03), (18, 0.02), (17, 0.01), (16, 0.04)],
    adoption: 1.0,
};

pub(crate) const IPV6: Family = Family {
    bits: 128,
    longest: 48,
    largest_block: 19,
    first: 0x2001_0000 << 96,
    end: 0x3000_0000 << 96,
    reserved: &[(0x2001_0db8 << 96, 32)],
    lengths: &[(48, 0.45), (47, 0.03), (46, 0.04), (44, 0.10), (40, 0.08), (36, 0.05), (32, 0.20), (29, 0.05)],
    adoption: 0.45,
};

impl Family {
    /// About `total` announcements, sorted by prefix, each prefix once.
    pub(crate) fn allocate(&self, topology: &Topology, total: usize, rng: &mut Rng) -> Vec<Announcement> {
        let counts = self.prefix_counts(topology, total, rng);
        let mut by_size: Vec<usize> = (0..topology.len()).filter(|&a| counts[a] > 0).collect();
        // Largest blocks first keeps every block aligned with no waste.
        by_size.sort_by_key(|&a| std::cmp::Reverse(counts[a]));
        let mut cursor = self.first;
        let mut announcements = Vec::with_capacity(total + total / 8);
        for a in by_size {
            let length = self.block_length(counts[a]);
            let Some(block) = self.next_block(&mut cursor, length) else { break };
            self.announce(a, (block, length), counts[a], topology, rng, &mut announcements);
        }
        // Blocks are disjoint and each holds distinct prefixes: no duplicates.
        announcements.sort_unstable();
        announcements
    }

    /// Heavy-tailed counts summing to about `total`: each AS in the family
    /// gets one, and the rest is shared by Pareto weights (shape 1.5, so the
    /// largest AS of 75,000 announces some thousands), larger for transit.
    fn prefix_counts(&self, topology: &Topology, total: usize, rng: &mut Rng) -> Vec<usize> {
        let tiers = &topology.tiers;
        let weights: Vec<f64> = (0..topology.len())
            .map(|a| {
                let transit = a < tiers.small_transit.end;
                if !transit && !rng.chance(self.adoption) {
                    return 0.0;
                }
                let tier_factor = if a < tiers.large_transit.end {
                    3.0
                } else if transit {
                    1.5
                } else {
                    1.0
                };
                tier_factor * (1.0 - rng.unit()).powf(-1.0 / 1.5)
            })
            .collect();
        let members = weights.iter().filter(|&&weight| weight > 0.0).count();
        let extra = total.saturating_sub(members) as f64 / weights.iter().sum::<f64>();
        weights.iter().map(|&weight| if weight > 0.0 { 1 + (weight * extra + rng.unit()) as usize } else { 0 }).collect()
    }

    /// A block with room for twice `count` prefixes of the usual length.
    fn block_length(&self, count: usize) -> u8 {
        let room_bits = (2 * count).next_power_of_two().trailing_zeros() as u8;
        self.longest.saturating_sub(room_bits).max(self.largest_block)
    }

    /// The next free aligned block of `length` at or after `cursor`, past reserved space.
    fn next_block(&self, cursor: &mut u128, length: u8) -> Option<u128> {
        let size = 1u128 << (self.bits - length);
        loop {
            let start = cursor.next_multiple_of(size);
            if start + size > self.end {
                return None;
            }
            match self.reserved.iter().find(|&&(address, reserved)| self.overlap(start, length, address, reserved)) {
                Some(&(address, reserved)) => *cursor = self.end_of(address, reserved),
                None => {
                    *cursor = start + size;
                    return Some(start);
                }
            }
        }
    }

    fn end_of(&self, address: u128, length: u8) -> u128 {
        address + (1 << (self.bits - length))
    }

    fn overlap(&self, a: u128, a_length: u8, b: u128, b_length: u8) -> bool {
        a < self.end_of(b, b_length) && b < self.end_of(a, a_length)
    }

    /// Fills the block `(address, length)` of AS `a` with `count` prefixes.
    fn announce(
        &self,
        a: usize,
        (block, length): (u128, u8),
        count: usize,
        topology: &Topology,
        rng: &mut Rng,
        out: &mut Vec<Announcement>,
    ) {
        let mut taken = FxHashSet::default();
        if rng.chance(0.5) {
            taken.insert((block, length));
        }
        // Bounded tries: a small block may not hold `count` distinct prefixes.
        for _ in 0..count * 4 {
            if taken.len() == count {
                break;
            }
            let sub_length = self.more_specific_length(length, rng);
            let offset = rng.below(1 << (sub_length - length)) as u128;
            taken.insert((block + (offset << (self.bits - sub_length)), sub_length));
        }
        // Sorted, so the draws below do not depend on the hash set's order.
        let mut taken: Vec<(u128, u8)> = taken.into_iter().collect();
        taken.sort_unstable();
        let customers = &topology.customers[a];
        for (address, length) in taken {
            let origin = if !customers.is_empty() && rng.chance(0.04) { rng.pick(customers) } else { a as u32 };
            out.push(Announcement { prefix: self.prefix(address, length), origin });
        }
    }

    /// A length longer than the block's; blocks are never longer than
    /// `longest - 1` and `longest` is always weighted, so there is one.
    fn more_specific_length(&self, block_length: u8, rng: &mut Rng) -> u8 {
        let weights: Vec<f64> = self.lengths.iter().map(|&(length, weight)| if length > block_length { weight } else { 0.0 }).collect();
        self.lengths[rng.weighted(&weights)].0
    }

    fn prefix(&self, address: u128, length: u8) -> IpNet {
        let built = match self.bits {
            32 => Ipv4Net::new((address as u32).into(), length).map(IpNet::V4),
            _ => Ipv6Net::new(address.into(), length).map(IpNet::V6),
        };
        built.expect("lengths never exceed the family's width")
    }
}
