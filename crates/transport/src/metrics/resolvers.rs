//! The per-resolver tally of routed answers, and the pieces every holder
//! of such a tally shares: the answering threads' slots here, and the
//! control plane's window over the drained tallies (the server's split).
//! Both number the operator's service and replica names as first seen
//! ([`Names`]) and tell apart a resolver's first
//! [`REPLICAS_PER_RESOLVER`] replicas, one place each ([`ReplicaPlaces`]).

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr};

use pharos_route::RegionId;
use rustc_hash::{FxBuildHasher, FxHashMap};

/// A thread's resolver tally has 2^RESOLVER_SLOT_BITS slots (8,192: about
/// 700 KB, allocated when the thread first tallies).
const RESOLVER_SLOT_BITS: u32 = 13;
const RESOLVER_SLOTS: usize = 1 << RESOLVER_SLOT_BITS;

/// The first replicas one resolver's tally tells apart, for one service
/// and region: answers to a resolver naming any other first replica are
/// counted as untallied.
pub const REPLICAS_PER_RESOLVER: usize = 4;

/// Service and replica names, numbered as first seen. Never forgotten:
/// they are the operator's, as many as were ever configured.
#[derive(Debug, Default)]
pub struct Names {
    names: Vec<Box<str>>,
    index: FxHashMap<Box<str>, u32>,
}

impl Names {
    /// The number of `name`, given it now if it has none.
    pub fn number(&mut self, name: &str) -> u32 {
        if let Some(&number) = self.index.get(name) {
            return number;
        }
        let number = u32::try_from(self.names.len()).expect("fewer names than the operator can configure");
        self.names.push(name.into());
        self.index.insert(name.into(), number);
        number
    }

    /// The number `name` was given, if any.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// The name numbered `number` by [`Names::number`].
    pub fn name(&self, number: u32) -> &str {
        &self.names[number as usize]
    }
}

/// The first replicas (as [`Names`] numbers them) one resolver was
/// answered with, each in a place of its own, so that counts kept beside
/// it by place need no map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaPlaces([u32; REPLICAS_PER_RESOLVER]);

/// A free place.
const NO_REPLICA: u32 = u32::MAX;

impl ReplicaPlaces {
    pub const EMPTY: ReplicaPlaces = ReplicaPlaces([NO_REPLICA; REPLICAS_PER_RESOLVER]);

    /// The place of `replica`, taking a free one if it holds none; `None`
    /// when every place is held by another.
    pub fn place(&mut self, replica: u32) -> Option<usize> {
        if let Some(place) = self.0.iter().position(|&held| held == replica) {
            return Some(place);
        }
        let place = self.0.iter().position(|&held| held == NO_REPLICA)?;
        self.0[place] = replica;
        Some(place)
    }

    /// Frees `place` for another replica.
    pub fn free(&mut self, place: usize) {
        self.0[place] = NO_REPLICA;
    }

    /// The places held, with their replicas.
    pub fn held(&self) -> impl Iterator<Item = (usize, u32)> + Clone + '_ {
        self.0.iter().copied().enumerate().filter(|&(_, replica)| replica != NO_REPLICA)
    }
}

/// Routed answers by service and client region, then by resolver.
pub type ResolverTally = FxHashMap<(Box<str>, RegionId), FxHashMap<IpAddr, ResolverAnswers>>;

/// What one resolver was answered for one service and region.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolverAnswers {
    pub answers: u64,
    /// The seconds of caching its answers granted each first replica: the
    /// sum of their TTLs (a TTL of 0 counts as 1: the answer serves at
    /// least the query that asked).
    pub cached_seconds: BTreeMap<Box<str>, u64>,
}

/// Every thread's tally since the last drain, merged.
#[derive(Debug, Default)]
pub struct Resolvers {
    pub tally: ResolverTally,
    /// Routed answers not tallied: their slot was held by another resolver
    /// (or it had [`REPLICAS_PER_RESOLVER`] replicas already).
    pub untallied: u64,
}

/// One resolver's answers for one service and region since the last
/// drain, names numbered by the thread's [`Names`].
#[derive(Debug, Clone, Copy)]
struct ResolverSlot {
    /// 0: the slot is free.
    answers: u64,
    resolver: IpAddr,
    service: u32,
    region: RegionId,
    replicas: ReplicaPlaces,
    /// The seconds of caching granted the replica in each place.
    seconds: [u64; REPLICAS_PER_RESOLVER],
}

const FREE_SLOT: ResolverSlot = ResolverSlot {
    answers: 0,
    resolver: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    service: 0,
    region: 0,
    replicas: ReplicaPlaces::EMPTY,
    seconds: [0; REPLICAS_PER_RESOLVER],
};

/// A thread's resolver tally: a direct-mapped array, so that tallying an
/// answer allocates nothing (but a name's first time) and touches one
/// slot. A slot is kept by the
/// first resolver (for a service and region) that lands in it until the
/// next drain; answers to another that lands there are counted as
/// untallied. Which resolvers are tallied then depends on a hash of their
/// address, not on the replicas they were given, so the cached split, a
/// mean over resolvers of each one's split, is estimated from a sample of
/// them that is blind to what is estimated, and every resolver tallied is
/// tallied whole. Taking the slot over instead would throw away the
/// holder's partial counts, and keep most often the busiest resolvers,
/// the ones that ask last.
#[derive(Default)]
pub(crate) struct ResolverSlots {
    /// Empty until the thread first tallies.
    slots: Box<[ResolverSlot]>,
    /// The names in the slots: services and replicas are the operator's,
    /// so this stays as small as the configuration.
    names: Names,
    untallied: u64,
}

impl ResolverSlots {
    pub(crate) fn tally(&mut self, (service, region): (&str, RegionId), resolver: IpAddr, replica: &str, ttl: u32) {
        if self.slots.is_empty() {
            self.slots = vec![FREE_SLOT; RESOLVER_SLOTS].into_boxed_slice();
        }
        let service = self.names.number(service);
        // FxHash alone spreads addresses in a row over too few slots (16,384
        // of them in a /18 took 5,636 of 8,192); a Fibonacci multiply's top
        // bits spread them as well as random (7,541; random: 7,083).
        let hash = FxBuildHasher.hash_one((resolver, service, region));
        let index = (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (u64::BITS - RESOLVER_SLOT_BITS)) as usize;
        let slot = &mut self.slots[index];
        if slot.answers == 0 {
            *slot = ResolverSlot { resolver, service, region, ..FREE_SLOT };
        } else if (slot.resolver, slot.service, slot.region) != (resolver, service, region) {
            self.untallied += 1;
            return;
        }
        let Some(place) = slot.replicas.place(self.names.number(replica)) else {
            self.untallied += 1;
            return;
        };
        slot.seconds[place] += u64::from(ttl.max(1));
        slot.answers += 1;
    }

    /// Adds the tally to `into` and starts afresh.
    pub(crate) fn drain_into(&mut self, into: &mut Resolvers) {
        into.untallied += std::mem::take(&mut self.untallied);
        for slot in self.slots.iter_mut().filter(|slot| slot.answers > 0) {
            let service = self.names.name(slot.service).into();
            let answers = into.tally.entry((service, slot.region)).or_default().entry(slot.resolver).or_default();
            answers.answers += slot.answers;
            for (place, replica) in slot.replicas.held() {
                *answers.cached_seconds.entry(self.names.name(replica).into()).or_default() += slot.seconds[place];
            }
            *slot = FREE_SLOT;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_keeps_its_place_and_a_freed_place_takes_another() {
        let mut places = ReplicaPlaces::EMPTY;
        assert_eq!([7, 8, 7, 9, 10].map(|replica| places.place(replica)), [Some(0), Some(1), Some(0), Some(2), Some(3)]);
        assert_eq!(places.place(11), None, "every place held by another");
        places.free(1);
        assert_eq!(places.place(11), Some(1));
        assert_eq!(places.held().collect::<Vec<_>>(), [(0, 7), (1, 11), (2, 9), (3, 10)]);
    }

    #[test]
    fn names_are_numbered_once_as_first_seen() {
        let mut names = Names::default();
        assert_eq!([names.number("svc."), names.number("fra"), names.number("svc.")], [0, 1, 0]);
        assert_eq!((names.name(1), names.find("fra"), names.find("sin")), ("fra", Some(1), None));
    }

    fn resolver(number: u32) -> IpAddr {
        IpAddr::from((0x0a00_0000 + number).to_be_bytes())
    }

    #[test]
    fn more_resolvers_than_slots_are_tallied_whole_or_not_at_all() {
        let mut slots = ResolverSlots::default();
        let count = 3 * RESOLVER_SLOTS as u32;
        for number in 0..count {
            slots.tally(("svc", 7), resolver(number), "fra", 0);
            slots.tally(("svc", 7), resolver(number), "sin", 30);
            slots.tally(("svc", 7), resolver(number), "fra", 60);
        }
        let mut drained = Resolvers::default();
        slots.drain_into(&mut drained);
        let tallied = &drained.tally[&("svc".into(), 7)];
        assert!(tallied.len() <= RESOLVER_SLOTS && tallied.len() > RESOLVER_SLOTS / 2, "{} tallied", tallied.len());
        let whole = ResolverAnswers { answers: 3, cached_seconds: BTreeMap::from([("fra".into(), 61), ("sin".into(), 30)]) };
        assert!(tallied.values().all(|answers| *answers == whole), "each tallied with all its answers, TTL 0 as a second");
        assert_eq!(3 * tallied.len() as u64 + drained.untallied, 3 * u64::from(count), "every answer tallied or counted untallied");
        let mut again = Resolvers::default();
        slots.drain_into(&mut again);
        assert!(again.tally.is_empty() && again.untallied == 0, "a drain starts the tally afresh");
        slots.tally(("svc", 7), resolver(count), "fra", 5);
        slots.drain_into(&mut again);
        assert_eq!(again.tally[&("svc".into(), 7)][&resolver(count)].answers, 1, "the freed slots take new resolvers");
    }

    #[test]
    fn a_slot_tells_apart_a_bounded_number_of_replicas_and_keys_by_service_and_region() {
        let mut slots = ResolverSlots::default();
        for replica in ["a", "b", "c", "d", "e", "a"] {
            slots.tally(("svc", 1), resolver(1), replica, 10);
        }
        slots.tally(("other", 1), resolver(1), "a", 10);
        slots.tally(("svc", 2), resolver(1), "a", 10);
        let mut drained = Resolvers::default();
        slots.drain_into(&mut drained);
        let first = &drained.tally[&("svc".into(), 1)][&resolver(1)];
        assert_eq!(first.answers, 5);
        assert_eq!(first.cached_seconds.keys().map(|name| &**name).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        assert_eq!(first.cached_seconds["a"], 20);
        assert_eq!(drained.untallied, 1, "the fifth replica's answer");
        assert_eq!(drained.tally[&("other".into(), 1)][&resolver(1)].answers, 1);
        assert_eq!(drained.tally[&("svc".into(), 2)][&resolver(1)].answers, 1);
    }

    /// With many more resolvers than slots, the cached split measured on
    /// the tallied ones is the whole population's: which resolvers are
    /// tallied does not depend on what they were answered.
    #[test]
    fn the_tallied_resolvers_estimate_the_cached_split_of_all() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(17);
        let mut slots = ResolverSlots::default();
        let mut true_share = 0.0;
        let count = 4 * RESOLVER_SLOTS as u32;
        for number in 0..count {
            // Busier resolvers ask more often: 1 to 8 answers, 30 % to fra.
            let answers = 1 + number % 8;
            let to_fra = (0..answers).filter(|_| rng.random_bool(0.3)).count();
            for index in 0..answers as usize {
                slots.tally(("svc", 0), resolver(number), if index < to_fra { "fra" } else { "sin" }, 60);
            }
            true_share += to_fra as f64 / f64::from(answers) / f64::from(count);
        }
        let mut drained = Resolvers::default();
        slots.drain_into(&mut drained);
        let tallied = &drained.tally[&("svc".into(), 0)];
        let fra_share = |answers: &ResolverAnswers| {
            answers.cached_seconds.get("fra").copied().unwrap_or(0) as f64 / answers.cached_seconds.values().sum::<u64>() as f64
        };
        let estimate = tallied.values().map(fra_share).sum::<f64>() / tallied.len() as f64;
        assert!(drained.untallied > 0, "more resolvers than slots");
        assert!((estimate - true_share).abs() < 0.01, "estimated {estimate}, all resolvers {true_share}");
    }
}
