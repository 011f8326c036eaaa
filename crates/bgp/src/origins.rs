//! One origin AS per prefix, elected from what the peers of a route
//! collector saw.
//!
//! Peers usually agree. When they do not (a "MOAS" prefix: anycast, a
//! hijack, a provider announcing a customer's space), the origin most peers
//! saw wins and ties go to the lowest AS number, so the same table always
//! gives the same answer whatever order its routes come in.

use std::num::NonZeroU32;

/// A prefix with its host bits cleared. Ordered by address, then by
/// length, which puts every prefix before the more specific ones it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Prefix<A> {
    pub(crate) address: A,
    pub(crate) length: u8,
}

/// How many peers saw `origin` for `prefix`.
#[derive(Debug, Clone, Copy)]
struct Vote<A> {
    prefix: Prefix<A>,
    origin: NonZeroU32,
    peers: u32,
}

/// The votes of one address family, as routes arrive.
#[derive(Debug)]
pub(crate) struct OriginVotes<A> {
    votes: Vec<Vote<A>>,
}

/// The elected origins, sorted by prefix, and how many prefixes were contested.
#[derive(Debug)]
pub(crate) struct Elected<A> {
    pub(crate) origins: Vec<(Prefix<A>, NonZeroU32)>,
    pub(crate) conflicts: u64,
}

impl<A> Default for OriginVotes<A> {
    fn default() -> Self {
        OriginVotes { votes: Vec::new() }
    }
}

impl<A: Ord + Copy> OriginVotes<A> {
    /// Counts one peer's route. Dumps list a prefix's routes together, so a
    /// repeat of the previous (prefix, origin) only bumps its count: memory
    /// grows with distinct pairs, not with routes.
    pub(crate) fn add(&mut self, prefix: Prefix<A>, origin: NonZeroU32) {
        match self.votes.last_mut() {
            Some(last) if last.prefix == prefix && last.origin == origin => last.peers += 1,
            _ => self.votes.push(Vote { prefix, origin, peers: 1 }),
        }
    }

    /// Whether no route was counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.votes.is_empty()
    }

    /// Every prefix seen, each once, with the origin most of its peers saw.
    pub(crate) fn elect(mut self) -> Elected<A> {
        self.votes.sort_unstable_by_key(|vote| (vote.prefix, vote.origin));
        let mut elected = Elected { origins: Vec::new(), conflicts: 0 };
        for ballots in self.votes.chunk_by(|a, b| a.prefix == b.prefix) {
            let (winner, candidates) = count(ballots);
            elected.conflicts += u64::from(candidates > 1);
            elected.origins.push((ballots[0].prefix, winner));
        }
        elected
    }
}

/// The winning origin among one prefix's votes (sorted by origin), and how
/// many distinct origins stood.
fn count<A: Copy>(ballots: &[Vote<A>]) -> (NonZeroU32, usize) {
    let mut winner = (0, ballots[0].origin);
    let mut candidates = 0;
    for same_origin in ballots.chunk_by(|a, b| a.origin == b.origin) {
        candidates += 1;
        let peers: u32 = same_origin.iter().map(|vote| vote.peers).sum();
        // Ascending origins and a strict `>` keep the lowest AS on a tie.
        if peers > winner.0 {
            winner = (peers, same_origin[0].origin);
        }
    }
    (winner.1, candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asn(value: u32) -> NonZeroU32 {
        NonZeroU32::new(value).unwrap()
    }

    fn prefix(address: u32, length: u8) -> Prefix<u32> {
        Prefix { address, length }
    }

    #[test]
    fn the_majority_wins_and_ties_go_to_the_lowest_asn() {
        let mut votes = OriginVotes::default();
        for origin in [7, 5, 7] {
            votes.add(prefix(10 << 24, 8), asn(origin));
        }
        for origin in [9, 3] {
            votes.add(prefix(11 << 24, 8), asn(origin));
        }
        votes.add(prefix(12 << 24, 8), asn(4));
        let elected = votes.elect();
        assert_eq!(elected.origins, [(prefix(10 << 24, 8), asn(7)), (prefix(11 << 24, 8), asn(3)), (prefix(12 << 24, 8), asn(4))]);
        assert_eq!(elected.conflicts, 2);
    }

    #[test]
    fn scattered_votes_for_one_prefix_are_counted_together() {
        let mut votes = OriginVotes::default();
        for (address, origin) in [(1, 8), (2, 1), (1, 9), (1, 8), (2, 1)] {
            votes.add(prefix(address, 32), asn(origin));
        }
        let elected = votes.elect();
        assert_eq!(elected.origins, [(prefix(1, 32), asn(8)), (prefix(2, 32), asn(1))]);
        assert_eq!(elected.conflicts, 1);
    }
}
