//! A tiered AS topology grown by preferential attachment.
//!
//! The Internet's AS graph has a power-law degree distribution: a few
//! transit networks with thousands of customers, tens of thousands of stub
//! networks with one or two providers. Growing it by preferential
//! attachment, each new AS choosing providers in proportion to the
//! customers they already have, reproduces that (Barabási and Albert,
//! 1999). On top sits a tier structure, as in the CAIDA AS-relationship
//! data: a full mesh of Tier-1 networks that peer with each other and buy
//! transit from no one, a few hundred large transit networks, many small
//! regional ones, and stubs.

use std::ops::Range;

use rustc_hash::FxHashSet;

use super::rng::Rng;

/// Which AS indexes form each tier; ASes are created in this order.
#[derive(Debug, Clone)]
pub(crate) struct Tiers {
    pub(crate) tier1: Range<usize>,
    pub(crate) large_transit: Range<usize>,
    pub(crate) small_transit: Range<usize>,
    pub(crate) stubs: Range<usize>,
}

impl Tiers {
    fn for_size(ases: usize) -> Tiers {
        let tier1 = 16;
        let large_transit = (ases / 200).max(8);
        let small_transit = ases * 12 / 100;
        let stubs_start = tier1 + large_transit + small_transit;
        Tiers {
            tier1: 0..tier1,
            large_transit: tier1..tier1 + large_transit,
            small_transit: tier1 + large_transit..stubs_start,
            stubs: stubs_start..ases,
        }
    }
}

/// ASes (by index) and their business relationships.
#[derive(Debug)]
pub(crate) struct Topology {
    pub(crate) asns: Vec<u32>,
    pub(crate) providers: Vec<Vec<u32>>,
    pub(crate) customers: Vec<Vec<u32>>,
    pub(crate) peers: Vec<Vec<u32>>,
    pub(crate) tiers: Tiers,
}

impl Topology {
    /// Grows a topology of `ases` ASes (at least 100).
    pub(crate) fn grow(ases: usize, rng: &mut Rng) -> Topology {
        let tiers = Tiers::for_size(ases);
        let mut topology = Topology {
            asns: draw_asns(ases, rng),
            providers: vec![Vec::new(); ases],
            customers: vec![Vec::new(); ases],
            peers: vec![Vec::new(); ases],
            tiers,
        };
        // Transit ASes, each listed once plus once per customer: a uniform
        // pick from this list is a pick in proportion to customers.
        let mut transit_draw = Vec::new();
        for a in topology.tiers.tier1.clone() {
            for b in topology.tiers.tier1.start..a {
                topology.peer(a, b);
            }
            transit_draw.push(a as u32);
        }
        for a in topology.tiers.large_transit.clone() {
            topology.buy_transit(a, 2 + rng.below(2), &mut transit_draw, rng);
            topology.peer_with_some(a, 3 + rng.below(6), topology.tiers.large_transit.start..a, rng);
            transit_draw.push(a as u32);
        }
        for a in topology.tiers.small_transit.clone() {
            topology.buy_transit(a, 1 + rng.below(3), &mut transit_draw, rng);
            if rng.chance(0.3) {
                topology.peer_with_some(a, 1 + rng.below(2), topology.tiers.large_transit.start..a, rng);
            }
            transit_draw.push(a as u32);
        }
        for a in topology.tiers.stubs.clone() {
            let providers = 1 + rng.weighted(&[0.60, 0.33, 0.07]);
            topology.buy_transit(a, providers, &mut transit_draw, rng);
        }
        topology
    }

    pub(crate) fn len(&self) -> usize {
        self.asns.len()
    }

    /// Links of AS `a`, of every kind.
    pub(crate) fn degree(&self, a: usize) -> usize {
        self.providers[a].len() + self.customers[a].len() + self.peers[a].len()
    }

    /// Undirected links in the whole topology.
    pub(crate) fn link_count(&self) -> usize {
        (0..self.len()).map(|a| self.degree(a)).sum::<usize>() / 2
    }

    /// Gives `customer` up to `count` distinct providers drawn from `transit_draw`.
    fn buy_transit(&mut self, customer: usize, count: usize, transit_draw: &mut Vec<u32>, rng: &mut Rng) {
        for _ in 0..count * 4 {
            if self.providers[customer].len() == count {
                break;
            }
            let provider = rng.pick(transit_draw);
            if !self.providers[customer].contains(&provider) {
                self.providers[customer].push(provider);
                self.customers[provider as usize].push(customer as u32);
                transit_draw.push(provider);
            }
        }
    }

    /// Tries `attempts` peerings of `a` with ASes drawn uniformly from `candidates`.
    fn peer_with_some(&mut self, a: usize, attempts: usize, candidates: Range<usize>, rng: &mut Rng) {
        if candidates.is_empty() {
            return;
        }
        for _ in 0..attempts {
            let b = candidates.start + rng.below(candidates.len());
            if !self.linked(a, b) {
                self.peer(a, b);
            }
        }
    }

    /// Whether `a` (a new AS, with few links) is linked to `b` in any way.
    fn linked(&self, a: usize, b: usize) -> bool {
        let b = b as u32;
        self.providers[a].contains(&b) || self.customers[a].contains(&b) || self.peers[a].contains(&b)
    }

    fn peer(&mut self, a: usize, b: usize) {
        self.peers[a].push(b as u32);
        self.peers[b].push(a as u32);
    }
}

/// Distinct AS numbers, one per AS in creation order. The older, larger
/// networks hold 2-byte numbers; the last third get 4-byte ones (RFC 6793),
/// about the share the RIRs had handed out by the 2020s.
fn draw_asns(count: usize, rng: &mut Rng) -> Vec<u32> {
    const AS_TRANS: u32 = 23456;
    let two_byte = (count * 2 / 3).min(60_000);
    let mut used = FxHashSet::default();
    (0..count)
        .map(|index| {
            loop {
                let asn = if index < two_byte { 1 + rng.below(64_495) as u32 } else { 131_072 + rng.below(300_000) as u32 };
                if asn != AS_TRANS && used.insert(asn) {
                    break asn;
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyone_but_tier1_buys_transit_and_degrees_are_skewed() {
        let topology = Topology::grow(5_000, &mut Rng::new(1));
        let tiers = &topology.tiers;
        assert!(tiers.tier1.clone().all(|a| topology.providers[a].is_empty() && topology.peers[a].len() >= 15));
        assert!((tiers.tier1.end..topology.len()).all(|a| !topology.providers[a].is_empty()));
        let mut degrees: Vec<usize> = (0..topology.len()).map(|a| topology.degree(a)).collect();
        degrees.sort_unstable();
        // Most ASes have one or two links, a few have hundreds.
        assert!(degrees[degrees.len() / 2] <= 2, "median {}", degrees[degrees.len() / 2]);
        assert!(*degrees.last().unwrap() >= 200, "max {}", degrees.last().unwrap());
        let distinct: FxHashSet<u32> = topology.asns.iter().copied().collect();
        assert_eq!(distinct.len(), topology.len());
    }
}
