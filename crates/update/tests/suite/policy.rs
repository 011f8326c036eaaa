//! The update policy: who may change what, from where, and the reason a
//! refusal gives.

use std::net::IpAddr;

use crate::common::*;
use pharos_update::{Policy, RuleConfig, RuleError, parse};
use pharos_wire::{rcode, types};
use serde::Deserialize;

/// The zone configuration's part the lead puts rules in.
#[derive(Deserialize)]
struct Zone {
    update: Vec<RuleConfig>,
}

/// The rules of the crate's documentation.
const RULES: &str = r#"
[[update]]
key = "acme"
at_or_below = "example.test."
acme_only = true

[[update]]
key = "external-dns"
below = "k8s.example.test."
types = ["A", "AAAA", "TXT"]
from = ["10.0.0.0/8", "fd00::/8"]

[[update]]
below = "dhcp.example.test."
types = ["A", "PTR"]
from = ["192.0.2.10/32"]

[[update]]
key = "*"
name = "open.example.test."
"#;

fn policy() -> Policy {
    let zone: Zone = toml::from_str(RULES).expect("the documented rules read");
    Policy::new(&name(ORIGIN), &zone.update).expect("the documented rules are valid")
}

fn address(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn refusal(key: Option<&str>, source: &str, owner: &str, rtype: u16) -> String {
    let refusal = policy().permits(key, address(source), &name(owner), rtype).expect_err("refused");
    assert_eq!((refusal.rcode, refusal.extended_error), (rcode::REFUSED, Some(18)));
    refusal.reason
}

fn permitted(key: Option<&str>, source: &str, owner: &str, rtype: u16) -> bool {
    policy().permits(key, address(source), &name(owner), rtype).is_ok()
}

#[test]
fn only_txt_at_acme_challenge_names_for_the_acme_key() {
    assert!(permitted(Some("acme"), "198.51.100.1", "_acme-challenge.example.test", types::TXT), "the apex's challenge");
    assert!(permitted(Some("ACME."), "198.51.100.1", "_acme-challenge.www.example.test", types::TXT), "key names ignore case and the dot");
    assert!(refusal(Some("acme"), "198.51.100.1", "www.example.test", types::TXT).contains("change www.example.test."));
    assert!(refusal(Some("acme"), "198.51.100.1", "_acme-challenge.www.example.test", types::A).contains("the A records"));
    assert!(!permitted(Some("acme"), "198.51.100.1", "_acme-challenge.www.example.test", types::ANY), "not every RRset");
    assert!(!permitted(Some("acme"), "198.51.100.1", "_acme-challenge.example.org", types::TXT), "outside the zone");
}

#[test]
fn a_key_is_held_to_its_names_types_and_sources() {
    assert!(permitted(Some("external-dns"), "10.1.2.3", "app.k8s.example.test", types::A));
    assert!(permitted(Some("external-dns"), "::ffff:10.1.2.3", "app.k8s.example.test", types::A), "an IPv4-mapped source");
    assert!(permitted(Some("external-dns"), "fd00::1", "app.k8s.example.test", types::AAAA));
    assert!(refusal(Some("external-dns"), "192.0.2.1", "app.k8s.example.test", types::A).contains("from 192.0.2.1"), "a source outside");
    assert!(refusal(Some("external-dns"), "10.1.2.3", "k8s.example.test", types::A).contains("change k8s.example.test."), "below, not at");
    assert!(refusal(Some("external-dns"), "10.1.2.3", "app.k8s.example.test", types::MX).contains("the MX records"));
    assert!(refusal(Some("intruder"), "10.1.2.3", "app.k8s.example.test", types::A).contains("key intruder"));
    let acme_alone =
        Policy::new(&name(ORIGIN), &[RuleConfig { key: Some("acme".into()), name: Some(ORIGIN.into()), ..RuleConfig::default() }]).unwrap();
    let refusal = acme_alone.permits(Some("intruder"), address("10.1.2.3"), &name(ORIGIN), types::A).unwrap_err();
    assert_eq!(refusal.reason, "no update rule of this zone is for key intruder");
}

#[test]
fn unsigned_updates_only_where_a_rule_allows_them() {
    assert!(permitted(None, "192.0.2.10", "host.dhcp.example.test", types::A));
    assert!(refusal(None, "192.0.2.11", "host.dhcp.example.test", types::A).contains("an unsigned update"));
    assert!(!permitted(None, "192.0.2.10", "open.example.test", types::A), "a rule for any key is not for unsigned updates");
    assert!(permitted(Some("anyone"), "203.0.113.5", "open.example.test", types::CNAME), "any key, from anywhere, every type");
    assert!(!permitted(Some("acme"), "192.0.2.10", "host.dhcp.example.test", types::A), "the unsigned rule is not for a key");
    assert!(Policy::default().permits(Some("acme"), address("127.0.0.1"), &name("www.example.test"), types::A).is_err(), "no rules");
}

#[test]
fn an_update_is_checked_change_by_change() {
    let update = parse(&message(
        ORIGIN,
        &[],
        &[add_a("app.k8s.example.test", 60, [10, 0, 0, 1]), rr("app.k8s.example.test", types::ANY, ANY, 0, &[])],
    ))
    .unwrap();
    let refusal = policy().check(Some("external-dns"), address("10.0.0.9"), &update).unwrap_err();
    assert!(refusal.reason.contains("every RRset"), "{refusal}");
    let update = parse(&message(ORIGIN, &[], &[add_a("app.k8s.example.test", 60, [10, 0, 0, 1])])).unwrap();
    assert!(policy().check(Some("external-dns"), address("10.0.0.9"), &update).is_ok());
}

#[test]
fn rules_that_cannot_mean_anything_are_refused() {
    let rule = |text: &str| {
        let zone: Zone = toml::from_str(text).expect("reads");
        Policy::new(&name(ORIGIN), &zone.update).expect_err("invalid").why
    };
    assert_eq!(rule("[[update]]\nkey = \"k\""), RuleError::Names);
    assert_eq!(rule("[[update]]\nkey = \"k\"\nname = \"a.example.test\"\nbelow = \"example.test\""), RuleError::Names);
    assert_eq!(rule("[[update]]\nname = \"a.example.test\""), RuleError::UnsignedFromAnywhere);
    assert_eq!(rule("[[update]]\nkey = \".\"\nname = \"a.example.test\""), RuleError::EmptyKey);
    assert!(matches!(rule("[[update]]\nkey = \"k\"\nname = \"a.example.org\""), RuleError::Outside { .. }));
    assert_eq!(rule("[[update]]\nkey = \"k\"\nname = \"a.example.test\"\ntypes = [\"BOGUS\"]"), RuleError::BadType("BOGUS".into()));
    assert_eq!(rule("[[update]]\nkey = \"k\"\nname = \"a.example.test\"\ntypes = [\"ANY\"]"), RuleError::MetaType("ANY".into()));
    assert_eq!(
        rule("[[update]]\nkey = \"k\"\nname = \"a.example.test\"\nacme_only = true\ntypes = [\"A\"]"),
        RuleError::AcmeType("A".into())
    );
    assert!(matches!(rule("[[update]]\nkey = \"k\"\nname = \"a.example.test\"\nfrom = [\"10.0.0.1/8\"]"), RuleError::Prefix(_)));
    assert!(toml::from_str::<Zone>("[[update]]\nkey = \"k\"\nnames = \"a.example.test\"").is_err(), "unknown fields are refused");
}
