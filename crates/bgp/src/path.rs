//! What Pharos takes from one AS path: its origin AS and the pairs of ASes
//! known to be adjacent.
//!
//! The rules follow NetAirt (section 4.3):
//!
//! - The origin ("home AS") is the last AS of the AS_SEQUENCE. When an
//!   aggregator appended an AS_SET, the set is unordered and nobody knows
//!   which member the route really ends in, so the last AS of the sequence
//!   (the aggregator) is "the best available approximation". The same goes
//!   for incomplete ("?") origins: the ORIGIN attribute is not consulted.
//! - Two ASes are linked when they are adjacent in an AS_SEQUENCE. A set's
//!   members are not linked to anything: which of them the sequence
//!   continues to, and in what order, is unknown.
//! - Confederation segments (RFC 5065) are hops inside one confederation,
//!   which the rest of the Internet sees as a single AS; they are dropped
//!   and, like a set, break adjacency.
//! - Prepending (the same AS repeated) is collapsed, so it neither adds a
//!   self-loop nor lengthens anything.
//! - A path containing AS 0 is malformed (RFC 7607) and has no origin.

/// One AS path reduced to the ASes whose order is known, filled one
/// segment at a time and reused from route to route.
#[derive(Debug, Default)]
pub(crate) struct PathHops {
    /// The AS_SEQUENCE members in path order, prepending collapsed.
    asns: Vec<u32>,
    /// Indexes into `asns` whose AS does not follow the one before it,
    /// because a set or confederation segment came between them.
    run_starts: Vec<usize>,
    /// A set or confederation segment was seen since the last sequence AS.
    gap_pending: bool,
    has_set: bool,
    has_as0: bool,
}

impl PathHops {
    /// Forgets the previous path.
    pub(crate) fn clear(&mut self) {
        self.asns.clear();
        self.run_starts.clear();
        self.gap_pending = false;
        self.has_set = false;
        self.has_as0 = false;
    }

    /// Appends the next AS of an AS_SEQUENCE segment.
    pub(crate) fn push(&mut self, asn: u32) {
        self.has_as0 |= asn == 0;
        if std::mem::take(&mut self.gap_pending) {
            self.run_starts.push(self.asns.len());
        } else if self.asns.last() == Some(&asn) {
            return;
        }
        self.asns.push(asn);
    }

    /// Records an AS_SET segment; its members are not used.
    pub(crate) fn push_set(&mut self) {
        self.has_set = true;
        self.gap_pending = true;
    }

    /// Records a confederation segment; its members are not used.
    pub(crate) fn push_confederation(&mut self) {
        self.gap_pending = true;
    }

    /// The origin AS, or `None` for a path with no AS_SEQUENCE member or a
    /// malformed one.
    pub(crate) fn origin(&self) -> Option<u32> {
        if self.has_as0 { None } else { self.asns.last().copied() }
    }

    /// Whether the path has an AS_SET segment.
    pub(crate) fn has_set(&self) -> bool {
        self.has_set
    }

    /// Pairs of ASes adjacent in the path, in path order; prepending was
    /// collapsed, so the two always differ.
    pub(crate) fn links(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (1..self.asns.len()).filter(|index| !self.run_starts.contains(index)).map(|index| (self.asns[index - 1], self.asns[index]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(asns: &[u32]) -> PathHops {
        let mut hops = PathHops::default();
        asns.iter().for_each(|&asn| hops.push(asn));
        hops
    }

    #[test]
    fn prepending_is_collapsed() {
        let hops = sequence(&[3356, 174, 174, 174, 64500, 64500]);
        assert_eq!(hops.origin(), Some(64500));
        assert_eq!(hops.links().collect::<Vec<_>>(), [(3356, 174), (174, 64500)]);
    }

    #[test]
    fn a_trailing_set_leaves_the_aggregator_as_origin_and_unlinked_members() {
        let mut hops = sequence(&[2497, 3549, 21877]);
        hops.push_set();
        assert_eq!(hops.origin(), Some(21877));
        assert!(hops.has_set());
        assert_eq!(hops.links().count(), 2);
    }

    #[test]
    fn a_set_in_the_middle_breaks_adjacency() {
        let mut hops = sequence(&[1, 2]);
        hops.push_set();
        hops.push(3);
        hops.push(4);
        assert_eq!(hops.links().collect::<Vec<_>>(), [(1, 2), (3, 4)]);
        assert_eq!(hops.origin(), Some(4));
    }

    #[test]
    fn confederation_segments_are_dropped() {
        let mut hops = PathHops::default();
        hops.push_confederation();
        hops.push(65001);
        hops.push(7018);
        assert_eq!(hops.links().collect::<Vec<_>>(), [(65001, 7018)]);
        assert!(!hops.has_set());
    }

    #[test]
    fn empty_set_only_and_as0_paths_have_no_origin() {
        assert_eq!(PathHops::default().origin(), None);
        let mut set_only = PathHops::default();
        set_only.push_set();
        assert_eq!(set_only.origin(), None);
        assert_eq!(sequence(&[1, 0, 2]).origin(), None);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut hops = sequence(&[1, 0]);
        hops.push_set();
        hops.clear();
        hops.push(5);
        assert_eq!((hops.origin(), hops.has_set(), hops.links().count()), (Some(5), false, 0));
    }
}
