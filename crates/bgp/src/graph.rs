//! The undirected AS graph (NetAirt section 4.3.2) and hop counts over it.
//!
//! ASes get dense indexes in AS-number order, so an AS number maps to its
//! index by binary search and the adjacency lists sit in one array
//! (compressed sparse rows). A breadth-first search from one AS then fills
//! one byte per AS. NetAirt searched from the client on every request;
//! Pharos searches once from each data center's AS when a snapshot is
//! built, and a query only reads `hops[client]` for each data center.

use std::sync::Arc;

/// The hop count of an AS that cannot be reached.
const UNREACHABLE: u8 = u8::MAX;

/// ASes and the links seen between them, in compressed sparse rows.
#[derive(Debug, Clone)]
pub struct AsGraph {
    /// AS numbers, ascending; an AS's index is its position here.
    asns: Arc<[u32]>,
    /// The neighbours of AS `i` are `neighbours[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<u32>,
    /// Neighbour indexes, ascending within each AS.
    neighbours: Vec<u32>,
}

impl AsGraph {
    /// Builds the graph from every AS seen and the links between them
    /// (each once, in either direction).
    pub(crate) fn new(ases: impl IntoIterator<Item = u32>, links: &[(u32, u32)]) -> AsGraph {
        let mut asns: Vec<u32> = ases.into_iter().chain(links.iter().flat_map(|&(a, b)| [a, b])).collect();
        asns.sort_unstable();
        asns.dedup();
        let index = |asn| asns.binary_search(&asn).expect("every linked AS is listed") as u32;
        let ends: Vec<(u32, u32)> = links.iter().flat_map(|&(a, b)| [(index(a), index(b)), (index(b), index(a))]).collect();
        let (offsets, neighbours) = compressed_rows(asns.len(), ends);
        AsGraph { asns: asns.into(), offsets, neighbours }
    }

    /// Number of ASes.
    pub fn as_count(&self) -> usize {
        self.asns.len()
    }

    /// Number of undirected links.
    pub fn link_count(&self) -> usize {
        self.neighbours.len() / 2
    }

    /// The dense index of `asn` (0 to `as_count() - 1`), if it was seen.
    pub fn index_of(&self, asn: u32) -> Option<usize> {
        self.asns.binary_search(&asn).ok()
    }

    /// The AS numbers linked to `asn`, ascending; empty for an unknown AS.
    pub fn neighbours(&self, asn: u32) -> impl Iterator<Item = u32> + '_ {
        let row = self.index_of(asn).map_or(&[][..], |index| self.row(index));
        row.iter().map(|&neighbour| self.asns[neighbour as usize])
    }

    /// Links from AS `index`, as indexes.
    fn row(&self, index: usize) -> &[u32] {
        &self.neighbours[self.offsets[index] as usize..self.offsets[index + 1] as usize]
    }

    /// Hop counts from `asn` to every AS, by breadth-first search; `None`
    /// if `asn` is not in the graph.
    pub fn hop_counts_from(&self, asn: u32) -> Option<HopCounts> {
        let source = self.index_of(asn)?;
        let mut hops = vec![UNREACHABLE; self.asns.len()];
        hops[source] = 0;
        let mut queue = Vec::with_capacity(self.asns.len());
        queue.push(source as u32);
        let mut next = 0;
        while let Some(&node) = queue.get(next) {
            next += 1;
            // Saturates one short of the marker; real AS paths are far shorter.
            let distance = (hops[node as usize] + 1).min(UNREACHABLE - 1);
            for &neighbour in self.row(node as usize) {
                if hops[neighbour as usize] == UNREACHABLE {
                    hops[neighbour as usize] = distance;
                    queue.push(neighbour);
                }
            }
        }
        Some(HopCounts { source: asn, asns: Arc::clone(&self.asns), hops: hops.into() })
    }

    /// Heap bytes held by the graph.
    pub fn memory_bytes(&self) -> usize {
        (self.asns.len() + self.offsets.capacity() + self.neighbours.capacity()) * size_of::<u32>()
    }
}

/// Turns directed (from, to) index pairs into row offsets and sorted rows.
fn compressed_rows(nodes: usize, mut ends: Vec<(u32, u32)>) -> (Vec<u32>, Vec<u32>) {
    ends.sort_unstable();
    let mut offsets = vec![0u32; nodes + 1];
    for &(from, _) in &ends {
        offsets[from as usize + 1] += 1;
    }
    for index in 1..offsets.len() {
        offsets[index] += offsets[index - 1];
    }
    (offsets, ends.iter().map(|&(_, to)| to).collect())
}

/// AS hop counts from one source AS to every AS of a graph.
#[derive(Debug, Clone)]
pub struct HopCounts {
    source: u32,
    asns: Arc<[u32]>,
    hops: Box<[u8]>,
}

impl HopCounts {
    /// The AS the counts start from.
    pub fn source(&self) -> u32 {
        self.source
    }

    /// Links on a shortest path from the source to `asn`; `None` when `asn`
    /// is not in the graph or not connected to the source. Counts saturate
    /// at 254.
    pub fn to(&self, asn: u32) -> Option<u8> {
        self.at(self.asns.binary_search(&asn).ok()?)
    }

    /// [`to`](Self::to) the AS of graph index `index` (from
    /// [`AsGraph::index_of`] on the same graph): one array read, for
    /// callers that look one AS up against many sources.
    pub fn at(&self, index: usize) -> Option<u8> {
        self.hops.get(index).copied().filter(|&hops| hops != UNREACHABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_square_with_a_tail_has_two_shortest_paths() {
        //   1 - 2
        //   |   |
        //   3 - 4 - 5        9 (alone)
        let graph = AsGraph::new([9], &[(1, 2), (1, 3), (2, 4), (4, 3), (5, 4)]);
        assert_eq!((graph.as_count(), graph.link_count()), (6, 5));
        let from_1 = graph.hop_counts_from(1).unwrap();
        let hops: Vec<_> = [1, 2, 3, 4, 5, 9, 77].iter().map(|&asn| from_1.to(asn)).collect();
        assert_eq!(hops, [Some(0), Some(1), Some(1), Some(2), Some(3), None, None]);
        assert_eq!(graph.neighbours(4).collect::<Vec<_>>(), [2, 3, 5]);
        assert_eq!(graph.hop_counts_from(9).unwrap().to(9), Some(0));
        assert!(graph.hop_counts_from(77).is_none());
        assert_eq!(graph.index_of(5), Some(4));
        assert_eq!((from_1.at(4), from_1.at(5), from_1.at(6)), (Some(3), None, None));
    }

    #[test]
    fn four_byte_asns_and_hop_counts_share_the_index() {
        let graph = AsGraph::new([], &[(4_200_000_000, 65536), (65536, 1)]);
        let counts = graph.hop_counts_from(1).unwrap();
        assert_eq!((counts.source(), counts.to(4_200_000_000)), (1, Some(2)));
    }

    #[test]
    fn long_chains_saturate_below_the_unreachable_marker() {
        let links: Vec<_> = (1..400).map(|asn| (asn, asn + 1)).collect();
        let counts = AsGraph::new([], &links).hop_counts_from(1).unwrap();
        assert_eq!((counts.to(200), counts.to(400)), (Some(199), Some(254)));
    }
}
