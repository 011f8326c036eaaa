//! The ServiceID mapping against an independent reference: Python's
//! hashlib and ipaddress, run at test time on the same canonical name.

use std::net::IpAddr;
use std::process::Command;

use pharos_artemis::service_id::{CanonicalName, ConflictList, ConflictListError, PrefixError, ServiceIdMap, ServicePrefix};

/// The address Python computes: prefix network + first (width - length)
/// bits of SHA-512 over the canonical name's bytes.
fn reference_address(prefix: &str, canonical: &str) -> IpAddr {
    let script = r#"
import hashlib, ipaddress, sys
net = ipaddress.ip_network(sys.argv[1])
host_bits = net.max_prefixlen - net.prefixlen
digest = int.from_bytes(hashlib.sha512(sys.argv[2].encode()).digest(), "big")
print(net.network_address + (digest >> (512 - host_bits)))
"#;
    let output = Command::new("python3").args(["-c", script, prefix, canonical]).output().expect("python3 runs");
    assert!(output.status.success(), "python3 failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().parse().unwrap()
}

fn mapped(prefix: &str, name: &str) -> IpAddr {
    let prefix: ServicePrefix = prefix.parse().unwrap();
    prefix.service_address(&CanonicalName::new(name).unwrap())
}

#[test]
fn every_prefix_length_matches_the_reference() {
    let prefixes = [
        "0.0.0.0/0",
        "10.0.0.0/7",
        "192.0.2.0/24",
        "198.51.100.7/32",
        "::/0",
        "2001:db8:1::/48",
        "2001:db8:1:2::/64",
        "2001:db8::/127",
        "2001:db8::1/128",
    ];
    for prefix in prefixes {
        for name in ["www.example.com", "a.b", "service-7.apps.example.test"] {
            assert_eq!(mapped(prefix, name), reference_address(prefix, name), "{name} in {prefix}");
        }
    }
}

#[test]
fn full_length_prefix_is_the_address_itself_and_zero_length_is_all_hash() {
    assert_eq!(mapped("198.51.100.7/32", "anything.example"), "198.51.100.7".parse::<IpAddr>().unwrap());
    // The sha512sum of the name, read as an address: a second, unrelated reference.
    let output = Command::new("sh").args(["-c", "printf %s www.example.com | sha512sum"]).output().unwrap();
    let hex = String::from_utf8(output.stdout).unwrap();
    let first_32: u32 = u32::from_str_radix(&hex[..8], 16).unwrap();
    assert_eq!(mapped("0.0.0.0/0", "www.example.com"), IpAddr::from(first_32.to_be_bytes()));
}

#[test]
fn case_and_trailing_dot_are_folded() {
    let canonical = CanonicalName::new("WWW.Example.COM.").unwrap();
    assert_eq!(canonical.as_str(), "www.example.com");
    assert_eq!(canonical.wire(), b"\x03www\x07example\x03com\x00", "the routing core's key");
    assert_eq!(mapped("2001:db8::/48", "WWW.Example.COM."), reference_address("2001:db8::/48", "www.example.com"));
}

#[test]
fn internationalized_names_hash_their_a_labels() {
    for (unicode, ascii) in [("Bücher.example", "xn--bcher-kva.example"), ("пример.рф.", "xn--e1afmkfd.xn--p1ai")] {
        assert_eq!(CanonicalName::new(unicode).unwrap().as_str(), ascii);
        assert_eq!(mapped("10.0.0.0/8", unicode), reference_address("10.0.0.0/8", ascii));
        assert_eq!(mapped("10.0.0.0/8", unicode), mapped("10.0.0.0/8", ascii));
    }
}

#[test]
fn bad_names_are_refused() {
    let long_label = format!("{}.example", "a".repeat(64));
    let long_name = ["abcdefghi"; 26].join(".");
    for bad in ["", ".", "a..b", "under_score.example", "-lead.example", "space here.example", &long_label, &long_name] {
        assert!(CanonicalName::new(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn bad_prefixes_are_refused_clearly() {
    assert!(matches!("192.0.2.0".parse::<ServicePrefix>(), Err(PrefixError::Syntax(_))));
    assert!(matches!("192.0.2.0/x".parse::<ServicePrefix>(), Err(PrefixError::Syntax(_))));
    assert!(matches!("nonsense/8".parse::<ServicePrefix>(), Err(PrefixError::Syntax(_))));
    assert!(matches!("192.0.2.0/33".parse::<ServicePrefix>(), Err(PrefixError::TooLong { .. })));
    assert!(matches!("2001:db8::/129".parse::<ServicePrefix>(), Err(PrefixError::TooLong { .. })));
    let error = "192.0.2.1/24".parse::<ServicePrefix>().unwrap_err();
    assert_eq!(error.to_string(), "prefix \"192.0.2.1/24\": host bits are set (did you mean 192.0.2.0/24?)");
}

#[test]
fn conflict_list_comes_before_the_hash() {
    let prefix: ServicePrefix = "192.0.2.0/24".parse().unwrap();
    let text = "# fixed addresses\n\nWWW.Example.com. 192.0.2.200  # moved off a collision\n";
    let map = ServiceIdMap::new(prefix, ConflictList::parse(text, &prefix).unwrap());
    let www = CanonicalName::new("www.example.com").unwrap();
    let other = CanonicalName::new("other.example.com").unwrap();
    assert_eq!(map.address_of(&www), "192.0.2.200".parse::<IpAddr>().unwrap());
    assert_eq!(map.address_of(&other), reference_address("192.0.2.0/24", "other.example.com"));
}

/// Whether an error is the one a case expects.
type Expected = fn(&ConflictListError) -> bool;

#[test]
fn malformed_conflict_lists_name_the_line() {
    let prefix: ServicePrefix = "192.0.2.0/24".parse().unwrap();
    let cases: [(&str, Expected); 5] = [
        ("a.example\n", |e| matches!(e, ConflictListError::Syntax { line: 1, .. })),
        ("\na_b.example 192.0.2.1\n", |e| matches!(e, ConflictListError::Name { line: 2, .. })),
        ("a.example 192.0.2.300\n", |e| matches!(e, ConflictListError::Address { line: 1, .. })),
        ("a.example 198.51.100.1\n", |e| matches!(e, ConflictListError::OutsidePrefix { line: 1, .. })),
        ("a.example 192.0.2.1\nA.example. 192.0.2.2\n", |e| matches!(e, ConflictListError::Duplicate { line: 2, first: 1, .. })),
    ];
    for (text, expected) in cases {
        let error = ConflictList::parse(text, &prefix).unwrap_err();
        assert!(expected(&error), "{text:?} gave {error}");
        assert!(error.to_string().starts_with("line "), "{error}");
    }
}
