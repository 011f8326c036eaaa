//! A zone's versions as a secondary sees them.
//!
//! What a zone transfers is its file's records and, for each service
//! routed inside it, a record per enabled replica address (the records
//! given here as `routed`). Each change of either, or of the file's SOA,
//! and each signing of it afresh (a signed zone's reload), is a new
//! version ([`Served::next`]) with a new serial: the file's if it
//! is newer than the one served (RFC 1982 arithmetic), else the served one
//! plus one; its difference to the one before goes into the zone's
//! [`Journal`].

use std::sync::Arc;

use pharos_dnssec::Signer;
use pharos_wire::types;

use crate::journal::{Difference, Journal, Record, changes, newer, soa_serial, with_serial};
use crate::zone::Zone;

/// What a zone serves: its SOA data (with the serial served), its file's
/// records and the routed ones, and the journal that led here.
#[derive(Debug, Clone)]
pub struct Served {
    /// The zone's origin, lowercase wire form.
    origin: Box<[u8]>,
    soa: Box<[u8]>,
    /// The file's SOA data as last read: a reload that changes nothing
    /// else in it changes no serial.
    file_soa: Box<[u8]>,
    /// Sorted; shared while the file is not reloaded.
    file_records: Arc<[Record]>,
    /// Sorted.
    routed: Vec<Record>,
    /// What signed it: a zone signed again (a reload does, with fresh
    /// signatures) is a new version, which secondaries must fetch before
    /// the old signatures expire.
    signer: Option<Arc<Signer>>,
    journal: Arc<Journal>,
}

impl Served {
    /// The first version of a loaded `zone` (its `file_records`, from
    /// [`file_records`]) with `routed` records: the file's serial, an
    /// empty journal of the zone's capacity.
    pub fn first(zone: &Zone, file_records: Arc<[Record]>, mut routed: Vec<Record>) -> Served {
        routed.sort_unstable();
        let soa = zone.soa().rdatas[0].clone();
        let (origin, signer, journal) = (zone.origin.clone(), zone.signer.clone(), zone.journal.clone());
        Served { origin, file_soa: soa.clone(), soa, file_records, routed, signer, journal }
    }

    /// The version after this one for the loaded `zone` (its
    /// `file_records`) and `routed` records, or `None` if a secondary
    /// would see no change.
    pub fn next(&self, zone: &Zone, file_records: &Arc<[Record]>, mut routed: Vec<Record>) -> Option<Served> {
        routed.sort_unstable();
        let file_soa = &zone.soa().rdatas[0];
        let served = soa_serial(&self.soa).expect("a served SOA has a serial");
        let file_serial = soa_serial(file_soa).expect("a loaded SOA has a serial");
        let same_file = Arc::ptr_eq(&self.file_records, file_records) || self.file_records == *file_records;
        let (mut removed, mut added) = if same_file { (Vec::new(), Vec::new()) } else { changes(&self.file_records, file_records) };
        let (routed_removed, routed_added) = changes(&self.routed, &routed);
        let soa_changed = *file_soa != self.file_soa && (newer(file_serial, served) || with_serial(file_soa, served) != self.soa);
        let signed_again = match (&self.signer, &zone.signer) {
            (Some(before), Some(now)) => !Arc::ptr_eq(before, now),
            (before, now) => before.is_some() != now.is_some(),
        };
        if !soa_changed && !signed_again && removed.is_empty() && added.is_empty() && routed_removed.is_empty() && routed_added.is_empty() {
            return None;
        }
        removed.extend(routed_removed);
        added.extend(routed_added);
        removed.sort_unstable();
        added.sort_unstable();
        let serial = if newer(file_serial, served) { file_serial } else { served.wrapping_add(1) };
        let soa = with_serial(file_soa, serial);
        let difference = Difference { from_soa: self.soa.clone(), to_soa: soa.clone(), removed, added };
        // A zone reloaded with another capacity keeps the differences that fit it.
        let journal = self.journal.recorded(difference, zone.journal.capacity());
        Some(Served {
            origin: self.origin.clone(),
            soa,
            file_soa: file_soa.clone(),
            file_records: file_records.clone(),
            routed,
            signer: zone.signer.clone(),
            journal: Arc::new(journal),
        })
    }

    /// The serial served.
    pub fn serial(&self) -> u32 {
        soa_serial(&self.soa).expect("a served SOA has a serial")
    }

    pub fn origin(&self) -> &[u8] {
        &self.origin
    }

    /// Makes the loaded `zone` (this version's) serve this version: its
    /// SOA data and its journal.
    pub fn apply_to(&self, zone: &mut Zone) {
        let apex = zone.nodes.get_mut(&zone.origin).expect("a loaded zone has its apex");
        let soa = apex.rrsets.iter_mut().find(|rrset| rrset.rtype == types::SOA).expect("a loaded zone has an apex SOA");
        soa.rdatas[0] = self.soa.clone();
        zone.journal = self.journal.clone();
    }
}

/// Every record of a loaded `zone` but its SOA, sorted.
pub fn file_records(zone: &Zone) -> Arc<[Record]> {
    let mut records: Vec<Record> = zone
        .nodes
        .iter()
        .flat_map(|(owner, node)| node.rrsets.iter().filter(|rrset| rrset.rtype != types::SOA).map(move |rrset| (owner, rrset)))
        .flat_map(|(owner, rrset)| {
            rrset.rdatas.iter().map(|rdata| Record { owner: owner.clone(), rtype: rrset.rtype, rdata: rdata.clone(), ttl: rrset.ttl })
        })
        .collect();
    records.sort_unstable();
    records.into()
}

#[cfg(test)]
mod tests {
    use pharos_wire::name;

    use super::*;
    use crate::parse_zone_text;

    const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 2024010101 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\nwww A 192.0.2.1\n";

    fn zone(text: &str, capacity: usize) -> Zone {
        let mut zone = parse_zone_text("example.test", text, "test").unwrap();
        zone.journal = Arc::new(Journal::new(capacity));
        zone
    }

    fn address(owner: &str, last: u8) -> Record {
        let owner = name::from_dotted(owner).unwrap().into();
        Record { owner, rtype: types::A, rdata: Box::new([192, 0, 2, last]), ttl: 60 }
    }

    fn first(zone: &Zone, routed: Vec<Record>) -> Served {
        Served::first(zone, file_records(zone), routed)
    }

    #[test]
    fn a_routed_change_moves_the_serial_by_one_and_is_journaled() {
        let zone = zone(ZONE, 4);
        let served = first(&zone, vec![address("svc.example.test", 10)]);
        assert_eq!(served.serial(), 2024010101);
        let records = file_records(&zone);
        assert!(served.next(&zone, &records, vec![address("svc.example.test", 10)]).is_none(), "nothing changed");
        let next = served.next(&zone, &records, vec![address("svc.example.test", 20), address("svc.example.test", 10)]).unwrap();
        assert_eq!(next.serial(), 2024010102);
        let difference = next.journal.since(2024010101).unwrap();
        assert_eq!((difference.removed, difference.added), (vec![], vec![address("svc.example.test", 20)]));
        assert_eq!(soa_serial(&difference.to_soa), Some(2024010102));
        assert!(next.journal.since(2024010102).is_none(), "the version served has no difference from itself");
    }

    #[test]
    fn a_reload_takes_the_files_serial_when_newer_and_counts_on_from_the_served_one_otherwise() {
        let old = zone(ZONE, 4);
        let served = first(&old, Vec::new());
        let same = zone(ZONE, 4);
        assert!(served.next(&same, &file_records(&same), Vec::new()).is_none(), "the same file again");
        let edited = zone(&ZONE.replace("192.0.2.1", "192.0.2.2"), 4);
        let unbumped = served.next(&edited, &file_records(&edited), Vec::new()).unwrap();
        assert_eq!(unbumped.serial(), 2024010102, "edited, its serial not raised: the served one plus one");
        let bumped = zone(&ZONE.replace("2024010101", "2024020101").replace("192.0.2.1", "192.0.2.3"), 4);
        let next = unbumped.next(&bumped, &file_records(&bumped), Vec::new()).unwrap();
        assert_eq!(next.serial(), 2024020101, "the file's newer serial");
        let older = zone(&ZONE.replace("2024010101", "2000010101"), 4);
        assert_eq!(next.next(&older, &file_records(&older), Vec::new()).unwrap().serial(), 2024020102, "never backwards");
        let only_serial = zone(&ZONE.replace("2024010101", "2025010101"), 4);
        let bumped_only = served.next(&only_serial, &file_records(&only_serial), Vec::new()).unwrap();
        assert_eq!(bumped_only.serial(), 2025010101, "a raised serial alone is a version");
        let difference = bumped_only.journal.since(2024010101).unwrap();
        assert!(difference.removed.is_empty() && difference.added.is_empty());
    }

    #[test]
    fn the_serial_wraps_past_the_top() {
        let zone = zone(&ZONE.replace("2024010101", "4294967295"), 4);
        let served = first(&zone, Vec::new());
        let next = served.next(&zone, &file_records(&zone), vec![address("svc.example.test", 1)]).unwrap();
        assert_eq!(next.serial(), 0);
        assert_eq!(next.journal.since(u32::MAX).unwrap().added.len(), 1);
    }

    #[test]
    fn differences_condense_and_the_journal_keeps_its_capacity() {
        let zone = zone(ZONE, 3);
        let records = file_records(&zone);
        let svc = |last| address("svc.example.test", last);
        let mut served = first(&zone, vec![svc(1)]);
        // 1 -> 1,2 -> 2 -> 2,3 -> 1,3
        for routed in [vec![svc(1), svc(2)], vec![svc(2)], vec![svc(2), svc(3)], vec![svc(1), svc(3)]] {
            served = served.next(&zone, &records, routed).unwrap();
        }
        assert_eq!(served.serial(), 2024010105);
        assert_eq!(served.journal.differences().len(), 3, "capacity 3");
        assert!(served.journal.since(2024010101).is_none(), "fell out of the journal");
        let condensed = served.journal.since(2024010102).unwrap();
        assert_eq!((condensed.removed, condensed.added), (vec![svc(2)], vec![svc(3)]), "from {{1,2}} to {{1,3}}");
        assert_eq!(soa_serial(&condensed.from_soa), Some(2024010102));
        let last = served.journal.since(2024010104).unwrap();
        assert_eq!((last.removed, last.added), (vec![svc(2)], vec![svc(1)]));
        let none = zone_with_capacity_zero();
        assert_eq!(none.journal.differences().len(), 0, "capacity 0 keeps nothing");
    }

    fn zone_with_capacity_zero() -> Served {
        let zone = zone(ZONE, 0);
        first(&zone, Vec::new()).next(&zone, &file_records(&zone), vec![address("svc.example.test", 1)]).unwrap()
    }

    #[test]
    fn a_ttl_change_is_a_removal_and_an_addition() {
        let zone = zone(ZONE, 4);
        let served = first(&zone, vec![address("svc.example.test", 1)]);
        let longer = Record { ttl: 120, ..address("svc.example.test", 1) };
        let next = served.next(&zone, &file_records(&zone), vec![longer.clone()]).unwrap();
        let difference = next.journal.since(2024010101).unwrap();
        assert_eq!((difference.removed, difference.added), (vec![address("svc.example.test", 1)], vec![longer]));
    }
}

#[cfg(test)]
mod signed_tests {
    use pharos_dnssec::keys::{Algorithm, Role};
    use pharos_dnssec::{Window, ZoneKey, ZoneKeys};

    use super::*;
    use crate::parse_zone_text;

    /// The zone signed by a signer of its own (as each load makes one).
    fn signed(zone: &Zone) -> Zone {
        let random = ring::rand::SystemRandom::new();
        let keys = ZoneKeys { keys: vec![ZoneKey::generate(Algorithm::Ed25519, Role::Csk, &random).unwrap()] };
        let signer = Signer::new(&zone.origin, keys, Window::from_now(1_800_000_000, 86_400), 1_800_000_000).unwrap();
        Zone { signer: Some(Arc::new(signer)), ..zone.clone() }
    }

    #[test]
    fn a_zone_signed_again_is_a_new_version() {
        let text = "$TTL 300\n@ SOA ns hostmaster 5 3600 600 86400 300\n@ NS ns\nns A 192.0.2.53\n";
        let unsigned = parse_zone_text("example.test", text, "test").unwrap();
        let loaded = signed(&unsigned);
        let records = file_records(&loaded);
        let served = Served::first(&loaded, records.clone(), Vec::new());
        assert!(served.next(&loaded, &records, Vec::new()).is_none(), "the same signing");
        let again = served.next(&signed(&unsigned), &records, Vec::new()).expect("signed afresh");
        assert_eq!(again.serial(), 6);
        assert_eq!(again.next(&unsigned, &records, Vec::new()).map(|next| next.serial()), Some(7), "no longer signed");
    }
}
