//! IP address -> origin AS by longest-prefix match, flattened into sorted
//! address ranges (pharos-ranges), with the ECS scope of every answer.
//!
//! Each range also carries its origin's index in the AS graph, so the
//! shortest AS-path policy reads hop counts without searching the graph's
//! AS numbers on every query.

use std::net::IpAddr;
use std::num::NonZeroU32;

use pharos_ranges::{RangeTable, RangeValue, Slash24Index};

use crate::graph::AsGraph;
use crate::origins::Prefix;

/// What a lookup found, and how much of the address it depended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopedLookup {
    /// The origin AS of the longest matching prefix and that prefix's length.
    pub found: Option<(u32, u8)>,
    /// The origin's index in the AS graph (for [`crate::HopCounts::at`]).
    pub graph_index: Option<usize>,
    /// Leading bits of the address the result depends on: every address
    /// sharing them gets the same `found`.
    pub scope: u8,
}

/// A range's answer: AS 0 where no prefix matches (AS 0 never originates a
/// route, RFC 7607).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Origin {
    asn: u32,
    /// Index in the AS graph, or [`Origin::NOT_IN_GRAPH`].
    graph_index: u32,
    length: u8,
}

impl Origin {
    const NOT_IN_GRAPH: u32 = u32::MAX;
}

impl RangeValue for Origin {
    const NONE: Self = Origin { asn: 0, graph_index: Origin::NOT_IN_GRAPH, length: 0 };
    fn least_scope(&self) -> u8 {
        self.length
    }
    fn compact(&self) -> Option<u32> {
        (self.graph_index != Origin::NOT_IN_GRAPH).then_some(self.graph_index)
    }
}

/// Origin AS by longest-prefix match, for IPv4 and IPv6.
#[derive(Debug)]
pub struct IpToAs {
    v4: RangeTable<u32, Origin>,
    /// Graph indexes of IPv4 /24s, for the query path.
    v4_graph_indexes: Slash24Index,
    v6: RangeTable<u128, Origin>,
    /// Whether the dump had a default route, IPv4 and IPv6 (dropped, as
    /// it names no one's clients).
    default_routes: [bool; 2],
}

impl IpToAs {
    /// Builds the table from elected origins, each family sorted by prefix,
    /// noting each origin's index in `graph`.
    pub(crate) fn new(v4: &[(Prefix<u32>, NonZeroU32)], v6: &[(Prefix<u128>, NonZeroU32)], graph: &AsGraph) -> IpToAs {
        let v4 = RangeTable::build(with_origins(v4, graph));
        IpToAs { v4_graph_indexes: v4.slash24_index(), v4, v6: RangeTable::build(with_origins(v6, graph)), default_routes: [false; 2] }
    }

    /// The table, noting which families had a default route.
    pub(crate) fn with_default_routes(self, default_routes: [bool; 2]) -> IpToAs {
        IpToAs { default_routes, ..self }
    }

    /// Whether `address` is in no prefix but the dump's default route.
    pub fn only_default_route_covers(&self, address: IpAddr) -> bool {
        self.default_routes[usize::from(address.is_ipv6())] && self.lookup(address).is_none()
    }

    /// The graph index of the origin AS of `address`, if it has one, and
    /// the ECS scope of that answer: [`lookup_scoped`](Self::lookup_scoped)
    /// without the AS number, in one cache miss for most IPv4 addresses.
    pub fn graph_index_scoped(&self, address: IpAddr) -> (Option<usize>, u8) {
        if let IpAddr::V4(v4) = address
            && let Some((graph_index, scope)) = self.v4_graph_indexes.lookup(u32::from(v4))
        {
            return (Some(graph_index as usize), scope);
        }
        let found = self.lookup_scoped(address);
        (found.graph_index, found.scope)
    }

    /// The origin AS of the longest prefix holding `address`, and that
    /// prefix's length.
    pub fn lookup(&self, address: IpAddr) -> Option<(u32, u8)> {
        self.lookup_scoped(address).found
    }

    /// [`lookup`](Self::lookup), plus the origin's graph index and the ECS
    /// scope of the answer.
    pub fn lookup_scoped(&self, address: IpAddr) -> ScopedLookup {
        let (origin, scope) = match address {
            IpAddr::V4(v4) => self.v4.lookup(u32::from(v4)),
            IpAddr::V6(v6) => self.v6.lookup(u128::from(v6)),
        };
        let found = (origin.asn != 0).then_some((origin.asn, origin.length));
        let graph_index = (origin.graph_index != Origin::NOT_IN_GRAPH).then_some(origin.graph_index as usize);
        ScopedLookup { found, graph_index, scope }
    }

    /// Starts fetching what [`graph_index_scoped`](Self::graph_index_scoped)
    /// will read for `address` (see [`Slash24Index::prefetch`]).
    pub fn prefetch(&self, address: IpAddr) {
        if let IpAddr::V4(v4) = address {
            self.v4_graph_indexes.prefetch(u32::from(v4));
        }
    }

    /// Number of address ranges (IPv4, IPv6) the prefixes were cut into.
    pub fn range_counts(&self) -> (usize, usize) {
        (self.v4.range_count(), self.v6.range_count())
    }

    /// Heap bytes held by the table.
    pub fn memory_bytes(&self) -> usize {
        self.v4.memory_bytes() + self.v4_graph_indexes.memory_bytes() + self.v6.memory_bytes()
    }
}

/// Prefixes as the range table takes them, each origin with its graph index.
fn with_origins<'a, A: Copy>(prefixes: &'a [(Prefix<A>, NonZeroU32)], graph: &'a AsGraph) -> impl Iterator<Item = (A, u8, Origin)> + 'a {
    prefixes.iter().map(|&(prefix, origin)| {
        let graph_index = graph.index_of(origin.get()).map_or(Origin::NOT_IN_GRAPH, |index| index as u32);
        (prefix.address, prefix.length, Origin { asn: origin.get(), graph_index, length: prefix.length })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asn(value: u32) -> NonZeroU32 {
        NonZeroU32::new(value).unwrap()
    }

    #[test]
    fn ipv6_and_ipv4_are_looked_up_apart_and_name_their_graph_index() {
        let v4: u32 = "192.0.2.0".parse::<std::net::Ipv4Addr>().unwrap().into();
        let v6: u128 = "2001:db8::".parse::<std::net::Ipv6Addr>().unwrap().into();
        let graph = AsGraph::new([], &[(64496, 4_200_000_000)]);
        let table = IpToAs::new(
            &[(Prefix { address: v4, length: 24 }, asn(64496))],
            &[(Prefix { address: v6, length: 32 }, asn(4_200_000_000)), (Prefix { address: v6 + (1 << 90), length: 40 }, asn(7))],
            &graph,
        );
        assert_eq!(table.lookup("2001:db8:1::1".parse().unwrap()), Some((4_200_000_000, 32)));
        assert_eq!(table.lookup_scoped("192.0.2.77".parse().unwrap()).graph_index, graph.index_of(64496));
        assert_eq!(table.graph_index_scoped("192.0.2.77".parse().unwrap()), (graph.index_of(64496), 24));
        assert_eq!(table.graph_index_scoped("2001:db8:400::1".parse().unwrap()), (None, 40));
        assert_eq!(table.lookup_scoped("2001:db8:1::1".parse().unwrap()).graph_index, graph.index_of(4_200_000_000));
        let unlinked = table.lookup_scoped("2001:db8:400::1".parse().unwrap());
        assert_eq!((unlinked.found, unlinked.graph_index), (Some((7, 40)), None), "AS7 is in no link");
        assert_eq!(table.lookup("2001:db9::1".parse().unwrap()), None);
        assert_eq!(table.lookup_scoped("2001:db9::1".parse().unwrap()).scope, 32);
    }
}
