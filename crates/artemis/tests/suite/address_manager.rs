//! The Address Manager on small prefixes, where collisions and reserved
//! addresses are certain, and the fix it suggests checked by applying it.

use std::collections::BTreeSet;
use std::net::IpAddr;

use pharos_artemis::address_manager::{Allocation, Problem, allocate, is_reserved};
use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap, ServicePrefix};

fn map(prefix: &str, conflicts: &str) -> ServiceIdMap {
    let prefix: ServicePrefix = prefix.parse().unwrap();
    ServiceIdMap::new(prefix, ConflictList::parse(conflicts, &prefix).unwrap())
}

fn hashed(prefix: &str, name: &str) -> IpAddr {
    prefix.parse::<ServicePrefix>().unwrap().service_address(&CanonicalName::new(name).unwrap())
}

/// The first name `svc<i>.example` whose hash lands on `wanted`.
fn name_hashed_to(prefix: &str, wanted: &str) -> String {
    let wanted: IpAddr = wanted.parse().unwrap();
    (0..10_000).map(|i| format!("svc{i}.example")).find(|name| hashed(prefix, name) == wanted).unwrap()
}

/// The conflict list the problems ask for.
fn suggested_lines(allocation: &Allocation) -> String {
    let mut lines = String::new();
    for problem in &allocation.problems {
        match problem {
            Problem::Collision { moved, .. } => {
                for (name, suggestion) in moved {
                    lines += &format!("{name} {}\n", suggestion.unwrap());
                }
            }
            Problem::Reserved { name, suggestion, .. } => lines += &format!("{name} {}\n", suggestion.unwrap()),
            Problem::BadName(error) => panic!("unexpected {error}"),
        }
    }
    lines
}

#[test]
fn distinct_hashes_are_allocated_as_computed() {
    let names = ["www.example.com", "api.example.com", "Bücher.example."];
    let allocation = allocate(&names, &map("2001:db8:5::/64", ""));
    assert!(allocation.problems.is_empty(), "{:?}", allocation.problems);
    for name in names {
        let canonical = CanonicalName::new(name).unwrap();
        assert_eq!(allocation.addresses[&canonical], hashed("2001:db8:5::/64", name));
    }
}

#[test]
fn collisions_and_reserved_addresses_are_fixed_by_the_suggested_conflict_list() {
    let prefix = "192.0.2.0/28";
    let services: Vec<String> = (0..12).map(|i| format!("svc{i}.example")).collect();
    let first = allocate(&services, &map(prefix, ""));
    let collisions = first.problems.iter().filter(|p| matches!(p, Problem::Collision { .. })).count();
    let reserved = first.problems.iter().filter(|p| matches!(p, Problem::Reserved { .. })).count();
    assert!(collisions > 0 && reserved > 0, "pick names with both: {:?}", first.problems);
    for problem in &first.problems {
        assert!(problem.to_string().contains("add to the conflict list"), "{problem}");
    }

    let fixed = allocate(&services, &map(prefix, &suggested_lines(&first)));
    assert!(fixed.problems.is_empty(), "{:?}", fixed.problems);
    assert_eq!(fixed.addresses.len(), services.len());
    let distinct: BTreeSet<IpAddr> = fixed.addresses.values().copied().collect();
    assert_eq!(distinct.len(), services.len(), "one name per address");
    let prefix: ServicePrefix = prefix.parse().unwrap();
    assert!(distinct.iter().all(|&address| prefix.contains(address) && !is_reserved(&prefix, address)));
}

#[test]
fn a_conflict_list_entry_keeps_its_address_and_the_hashed_name_moves() {
    let prefix = "192.0.2.0/24";
    let taken = hashed(prefix, "hashed.example");
    let allocation = allocate(&["hashed.example", "fixed.example"], &map(prefix, &format!("fixed.example {taken}\n")));
    let [Problem::Collision { address, keeper, moved }] = &allocation.problems[..] else {
        panic!("{:?}", allocation.problems);
    };
    assert_eq!((*address, keeper.as_str()), (taken, "fixed.example"));
    assert_eq!(moved[0].0.as_str(), "hashed.example");
    assert_ne!(moved[0].1, Some(taken));
    assert_eq!(allocation.addresses.len(), 1);
}

#[test]
fn reserved_addresses_follow_the_prefix_size() {
    let v4: ServicePrefix = "192.0.2.0/29".parse().unwrap();
    assert!(is_reserved(&v4, "192.0.2.0".parse().unwrap()));
    assert!(is_reserved(&v4, "192.0.2.7".parse().unwrap()));
    assert!(!is_reserved(&v4, "192.0.2.6".parse().unwrap()));
    let v6: ServicePrefix = "2001:db8::/126".parse().unwrap();
    assert!(is_reserved(&v6, "2001:db8::".parse().unwrap()));
    assert!(!is_reserved(&v6, "2001:db8::3".parse().unwrap()), "no broadcast in IPv6");
    for point_to_point in ["192.0.2.0/31", "2001:db8::/127", "192.0.2.1/32"] {
        let prefix: ServicePrefix = point_to_point.parse().unwrap();
        assert!(!is_reserved(&prefix, prefix.network()), "{point_to_point}");
    }

    let on_network = name_hashed_to("192.0.2.0/29", "192.0.2.0");
    let allocation = allocate(&[on_network], &map("192.0.2.0/29", ""));
    assert!(matches!(&allocation.problems[..], [Problem::Reserved { suggestion: Some(_), .. }]));
    assert!(allocation.addresses.is_empty());
}

#[test]
fn a_full_prefix_says_so() {
    let allocation = allocate(&["a.example", "b.example"], &map("192.0.2.9/32", ""));
    let [problem @ Problem::Collision { moved, .. }] = &allocation.problems[..] else {
        panic!("{:?}", allocation.problems);
    };
    assert_eq!(moved[0].1, None);
    assert!(problem.to_string().contains("no free address"), "{problem}");
}

#[test]
fn bad_names_are_reported_and_the_rest_allocated() {
    let allocation = allocate(&["good.example", "bad_name.example", "GOOD.example."], &map("10.0.0.0/8", ""));
    assert!(matches!(&allocation.problems[..], [Problem::BadName(error)] if error.name == "bad_name.example"));
    assert_eq!(allocation.addresses.len(), 1, "the same name twice is one service");
}
