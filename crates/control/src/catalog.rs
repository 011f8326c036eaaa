//! The catalog zone Pharos produces (RFC 9432, version 2): a zone listing
//! the zones it serves, so that a secondary configured as its consumer
//! (Knot DNS, NSD, BIND) transfers each member zone without being told of
//! it by hand. The catalog is never written: it is made, as text read like
//! a store zone's, from the zones of each build, so that a zone made or
//! deleted through the API changes the catalog in the same snapshot; its
//! versions, journal and NOTIFYs are then those of any zone.

use std::sync::Arc;

use pharos_model::ControlError;
use pharos_model::zone::CatalogMembers;
use pharos_wire::name;
use pharos_zone::journal::Record;
use pharos_zone::versions::file_records;
use pharos_zone::{Zone, parse_zone_text};

/// The schema version of the catalogs produced (RFC 9432 section 4.2.1).
const SCHEMA_VERSION: &str = "2";
/// How many octets of a member's name's SHA-256 digest make its id: 128
/// bits, so that two names never share one.
const ID_OCTETS: usize = 16;

/// The catalog a node produces, as configured (`[catalog]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// Lowercase wire form.
    origin: Box<[u8]>,
    members: CatalogMembers,
    /// The serial of the catalog's first version: the time (Unix seconds)
    /// this node configured it. Each change of the members adds one to
    /// the serial served (`pharos_zone::versions`), so a node started
    /// again later serves a newer serial than it did before, and its
    /// consumers transfer the catalog again, unless its members changed
    /// more than once a second on average.
    first_serial: u32,
}

/// The catalog zone made for one list of members, kept while the list
/// stays the same.
#[derive(Debug, Clone)]
pub(crate) struct CatalogZone {
    catalog: Catalog,
    /// Sorted.
    members: Vec<Box<[u8]>>,
    pub(crate) zone: Zone,
    pub(crate) records: Arc<[Record]>,
}

impl Catalog {
    /// The catalog named `name`, listing `members`, configured at `now`
    /// (Unix milliseconds).
    pub fn new(name: &str, members: CatalogMembers, now: u64) -> Result<Catalog, ControlError> {
        let origin = name::from_dotted(name)
            .map_err(|error| ControlError::invalid("catalog.zone", format!("{name:?} is not a domain name ({error:?})")))?;
        Ok(Catalog { origin: origin.into(), members, first_serial: (now / 1000) as u32 })
    }

    pub fn origin(&self) -> &[u8] {
        &self.origin
    }

    /// The catalog zone listing, of the zones `files` and `stored`, those
    /// it lists: `kept` if it lists the same. A zone with the catalog's
    /// name is refused, naming both.
    pub(crate) fn zone<'z>(
        &self,
        files: impl Iterator<Item = &'z Zone>,
        stored: impl Iterator<Item = &'z Zone>,
        kept: Option<&CatalogZone>,
    ) -> Result<CatalogZone, ControlError> {
        let mut members: Vec<Box<[u8]>> = Vec::new();
        for (zone, kind) in files.map(|zone| (zone, CatalogMembers::All)).chain(stored.map(|zone| (zone, CatalogMembers::Store))) {
            if zone.origin == self.origin {
                let field = match kind {
                    CatalogMembers::All => "zone",
                    CatalogMembers::Store => "zone (kept in the store)",
                };
                return Err(ControlError::invalid(
                    format!("{field} {}", name::Display(&zone.origin)),
                    "the catalog ([catalog] zone) has this name",
                ));
            }
            if self.members == CatalogMembers::All || kind == CatalogMembers::Store {
                members.push(zone.origin.clone());
            }
        }
        members.sort_unstable_by_key(|member| name::Display(member).to_string());
        match kept {
            Some(kept) if kept.catalog == *self && kept.members == members => Ok(kept.clone()),
            _ => self.made(members),
        }
    }

    fn made(&self, members: Vec<Box<[u8]>>) -> Result<CatalogZone, ControlError> {
        let origin = name::Display(&self.origin).to_string();
        let text = catalog_text(&origin, self.first_serial, &members);
        let zone = parse_zone_text(&origin, &text, "the catalog").map_err(|error| ControlError::invalid("catalog", error.to_string()))?;
        let records = file_records(&zone);
        Ok(CatalogZone { catalog: self.clone(), members, zone, records })
    }
}

/// The text of the catalog `origin` at `serial` listing `members` (wire
/// form, sorted), as RFC 9432 section 4 has it: a SOA, `NS invalid.`,
/// the schema version, and a PTR per member below `zones`, named by the
/// member's id. TTL 0, as its examples have: no resolver should keep it.
pub fn catalog_text(origin: &str, serial: u32, members: &[Box<[u8]>]) -> String {
    let mut text = format!(
        "{origin} 0 IN SOA invalid. invalid. {serial} 3600 600 2147483646 0\n\
         {origin} 0 IN NS invalid.\n\
         version.{origin} 0 IN TXT \"{SCHEMA_VERSION}\"\n"
    );
    for member in members {
        text.push_str(&format!("{}.zones.{origin} 0 IN PTR {}\n", member_id(member), name::Display(member)));
    }
    text
}

/// A member's unique id (RFC 9432 section 4.1): the first octets of the
/// SHA-256 digest of its lowercase wire name, in hex. The same on every
/// node and after every restart: an id that changes tells the consumer
/// the zone was removed and added anew, and it would drop the zone's data.
pub fn member_id(member: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, &member.to_ascii_lowercase());
    digest.as_ref()[..ID_OCTETS].iter().map(|octet| format!("{octet:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(origin: &str) -> Zone {
        parse_zone_text(origin, &format!("{origin} 60 IN SOA ns. h. 1 2 3 4 5\n{origin} 60 IN NS ns.\n"), "test").unwrap()
    }

    fn catalog(members: CatalogMembers) -> Catalog {
        Catalog::new("catalog.pharos.test.", members, 1_700_000_000_000).unwrap()
    }

    fn listed(catalog: &CatalogZone) -> Vec<String> {
        catalog.members.iter().map(|member| name::Display(member).to_string()).collect()
    }

    #[test]
    fn the_text_has_what_rfc_9432_asks_members_sorted() {
        let (files, stored) = ([zone("b.test."), zone("a.test.")], [zone("c.test.")]);
        let made = catalog(CatalogMembers::All).zone(files.iter(), stored.iter(), None).unwrap();
        assert_eq!(listed(&made), ["a.test.", "b.test.", "c.test."]);
        let text = catalog_text("catalog.pharos.test.", 1_700_000_000, &made.members);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "catalog.pharos.test. 0 IN SOA invalid. invalid. 1700000000 3600 600 2147483646 0");
        assert_eq!(lines[1..3], ["catalog.pharos.test. 0 IN NS invalid.", "version.catalog.pharos.test. 0 IN TXT \"2\""]);
        let id = member_id(&made.members[0]);
        assert_eq!(lines[3], format!("{id}.zones.catalog.pharos.test. 0 IN PTR a.test."));
        assert_eq!(made.records.len(), 5, "NS, TXT and three PTRs");
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        let a = name::from_dotted("a.test.").unwrap();
        assert_eq!(member_id(&a), member_id(&name::from_dotted("A.Test.").unwrap()), "case does not count");
        // sha256(b"\x01a\x04test\x00"), by Python's hashlib: the same on every node and release.
        assert_eq!(member_id(&a), "22a4880d5f861991ec49d9e21ee8df71");
        assert_ne!(member_id(&a), member_id(&name::from_dotted("b.test.").unwrap()));
        assert_eq!(member_id(&a).len(), 2 * ID_OCTETS);
        assert!(member_id(&a).bytes().all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase()));
    }

    #[test]
    fn the_same_members_keep_the_catalog_and_others_make_another() {
        let catalog = catalog(CatalogMembers::All);
        let (a, b) = (zone("a.test."), zone("b.test."));
        let first = catalog.zone([&a].into_iter(), [&b].into_iter(), None).unwrap();
        let again = catalog.zone([&b].into_iter(), [&a].into_iter(), Some(&first)).unwrap();
        assert!(Arc::ptr_eq(&first.records, &again.records), "the same members, listed in another order");
        let fewer = catalog.zone([&a].into_iter(), [].into_iter(), Some(&first)).unwrap();
        assert!(!Arc::ptr_eq(&first.records, &fewer.records));
        assert_eq!(listed(&fewer), ["a.test."]);
    }

    #[test]
    fn store_members_only_when_asked_and_the_catalogs_name_is_nobody_elses() {
        let (file, kept) = ([zone("file.test.")], [zone("kept.test.")]);
        let made = catalog(CatalogMembers::Store).zone(file.iter(), kept.iter(), None).unwrap();
        assert_eq!(listed(&made), ["kept.test."]);
        let clash = [zone("catalog.pharos.test.")];
        let refused = catalog(CatalogMembers::All).zone(file.iter(), clash.iter(), None).unwrap_err().to_string();
        assert!(refused.contains("zone (kept in the store) catalog.pharos.test.") && refused.contains("[catalog]"), "{refused}");
        let refused = catalog(CatalogMembers::Store).zone(clash.iter(), kept.iter(), None).unwrap_err().to_string();
        assert!(refused.contains("zone catalog.pharos.test.") && refused.contains("[catalog]"), "{refused}");
    }
}
