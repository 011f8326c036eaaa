//! The Address Manager: allocates the service address of every service
//! with Artemis enabled, and says what to fix when the mapping is not one
//! to one. Two names on one address still reach their service (the
//! dispatcher reads the SNI), but the paper's design, and every client's
//! cache keyed by address, wants one name per address: so a collision is
//! reported with the conflict-list lines that would end it.
//!
//! Reserved addresses: in an IPv4 prefix with at least two host bits, the
//! network and broadcast addresses; in an IPv6 prefix with at least two,
//! the subnet-router anycast address (host part zero, RFC 4291 2.6.1).
//! Point-to-point sized prefixes (/31, /127: RFC 3021, RFC 6164) and
//! single addresses reserve nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use crate::service_id::{CanonicalName, NameError, ServiceIdMap, ServicePrefix};

/// The outcome: the addresses that are fine, and every problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Each service whose address is its own and usable.
    pub addresses: BTreeMap<CanonicalName, IpAddr>,
    pub problems: Vec<Problem>,
}

/// An address the conflict list should give a name, or none when the
/// prefix has no free address left.
pub type Suggestion = Option<IpAddr>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The service's name is not a host name; it gets no address.
    BadName(NameError),
    /// Several services map to one address. `keeper` keeps it (a
    /// conflict-list entry wins, else the first name in order); each of
    /// `moved` needs a conflict-list line.
    Collision { address: IpAddr, keeper: CanonicalName, moved: Vec<(CanonicalName, Suggestion)> },
    /// The service maps to an address the prefix reserves.
    Reserved { name: CanonicalName, address: IpAddr, suggestion: Suggestion },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadName(error) => write!(f, "{error}"),
            Problem::Collision { address, keeper, moved } => {
                let others: Vec<String> = moved.iter().map(|(name, _)| name.to_string()).collect();
                write!(f, "{keeper} and {} map to {address}; {keeper} keeps it", others.join(", "))?;
                for (name, suggestion) in moved {
                    write_fix(f, name, *suggestion)?;
                }
                Ok(())
            }
            Problem::Reserved { name, address, suggestion } => {
                write!(f, "{name} maps to the reserved address {address}")?;
                write_fix(f, name, *suggestion)
            }
        }
    }
}

fn write_fix(f: &mut fmt::Formatter<'_>, name: &CanonicalName, suggestion: Suggestion) -> fmt::Result {
    match suggestion {
        Some(address) => write!(f, "; add to the conflict list: \"{name} {address}\""),
        None => write!(f, "; the prefix has no free address for {name}: use a shorter prefix"),
    }
}

/// Whether `address` is one the prefix reserves (see the module's notes).
pub fn is_reserved(prefix: &ServicePrefix, address: IpAddr) -> bool {
    let host_bits = prefix.host_bits();
    if host_bits < 2 {
        return false;
    }
    let host = prefix.host_of(address);
    let all_ones = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
    host == 0 || (address.is_ipv4() && host == all_ones)
}

/// Allocates an address to each of `services` (names as configured) under
/// `map`. Pure: the same inputs give the same allocation and problems, in
/// name order.
pub fn allocate<S: AsRef<str>>(services: &[S], map: &ServiceIdMap) -> Allocation {
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for service in services {
        match CanonicalName::new(service.as_ref()) {
            Ok(name) => {
                names.insert(name);
            }
            Err(error) => problems.push(Problem::BadName(error)),
        }
    }
    let mut by_address: BTreeMap<IpAddr, Vec<CanonicalName>> = BTreeMap::new();
    for name in names {
        by_address.entry(map.address_of(&name)).or_default().push(name);
    }
    // Taken: every service's address and every conflict-list address, so a
    // suggestion never lands on a name some client already computes.
    let mut free = FreeAddresses { prefix: map.prefix, taken: by_address.keys().copied().collect() };
    free.taken.extend(map.conflicts.iter().map(|(_, address)| address));

    let mut addresses = BTreeMap::new();
    for (address, mut names) in by_address {
        if is_reserved(&map.prefix, address) {
            for name in names {
                let suggestion = free.take_after(address);
                problems.push(Problem::Reserved { name, address, suggestion });
            }
            continue;
        }
        let keeper_index = names.iter().position(|name| map.conflicts.get(name) == Some(address)).unwrap_or(0);
        let keeper = names.remove(keeper_index);
        if !names.is_empty() {
            let moved = names.into_iter().map(|name| (name, free.take_after(address))).collect();
            problems.push(Problem::Collision { address, keeper: keeper.clone(), moved });
        }
        addresses.insert(keeper, address);
    }
    Allocation { addresses, problems }
}

/// The prefix's addresses not yet taken, handed out one by one.
struct FreeAddresses {
    prefix: ServicePrefix,
    taken: BTreeSet<IpAddr>,
}

impl FreeAddresses {
    /// The first free, unreserved address after `start`, wrapping around
    /// the prefix, now taken. A linear probe: it steps over at most the
    /// taken and reserved addresses, a few more than there are services.
    fn take_after(&mut self, start: IpAddr) -> Option<IpAddr> {
        let host_bits = self.prefix.host_bits();
        let mask = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
        let first = self.prefix.host_of(start);
        let mut host = first;
        loop {
            host = host.wrapping_add(1) & mask;
            if host == first {
                return None;
            }
            let candidate = self.prefix.address_with_host(host);
            if !is_reserved(&self.prefix, candidate) && self.taken.insert(candidate) {
                return Some(candidate);
            }
        }
    }
}
