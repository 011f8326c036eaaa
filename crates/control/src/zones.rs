//! The edits of zones the store keeps, as rules over the state: making
//! one, changing its RRsets, deleting it. Each returns the whole zone to
//! put (one entity per zone, see `pharos_model::zone`), with its SOA
//! serial moved forward when its records change; the zone is then read
//! and checked whole, as a zone file is, when the next snapshot is built.

use pharos_model::zone::{NewZone, RrsetChange, RrsetView, ZoneSpec};
use pharos_model::{Change, ControlError, State};
use pharos_wire::{name, types};
use pharos_zone::journal::{Record, soa_serial, with_serial};
use pharos_zone::text::{in_reading_order, rdata_text, zone_text};
use pharos_zone::{parse_records, parse_zone_text};

/// The SOA timers of a zone made empty: refresh, retry, expire and the
/// negative-answer TTL (RFC 1912 section 2.2's advice), and its TTL.
const EMPTY_ZONE_TIMERS: &str = "3600 900 1209600 300";
const EMPTY_ZONE_TTL: u32 = 3600;

/// Makes the store zone `new`: its text imported once, or a SOA and NS
/// records for the name servers given.
pub fn make_zone(state: &State, new: &NewZone) -> Result<Vec<Change>, ControlError> {
    let name = absolute_lowercase(&new.name)?;
    if state.zone(&name).is_some() {
        return Err(ControlError::Conflict { field: "name".into(), message: format!("zone {name} exists") });
    }
    let text = match (&new.text, new.nameservers.as_slice()) {
        (Some(text), []) => imported(&name, text)?,
        (None, [primary, ..]) => empty_zone(&name, primary, &new.nameservers)?,
        (Some(_), [_, ..]) => return Err(ControlError::invalid("nameservers", "give the zone's text or its name servers, not both")),
        (None, []) => return Err(ControlError::invalid("nameservers", "a zone made empty needs at least one name server")),
    };
    Ok(vec![Change::PutZone(ZoneSpec { name, text })])
}

pub fn delete_zone(state: &State, name: &str) -> Result<Vec<Change>, ControlError> {
    let spec = find_zone(state, name)?;
    Ok(vec![Change::DeleteZone(spec.name.clone())])
}

/// The store zone `name` (absolute or not, any case).
pub fn find_zone<'a>(state: &'a State, name: &str) -> Result<&'a ZoneSpec, ControlError> {
    let name = absolute_lowercase(name)?;
    state.zone(&name).map(|spec| &**spec).ok_or_else(|| ControlError::NotFound(format!("zone {name} in the store")))
}

/// Every RRset of the store zone `spec`, in the order of its text.
pub fn rrsets(spec: &ZoneSpec) -> Result<Vec<RrsetView>, ControlError> {
    let mut views: Vec<RrsetView> = Vec::new();
    for record in in_reading_order(&records(spec)?) {
        let (owner, rtype) = (name::Display(&record.owner).to_string(), type_name(record.rtype));
        let data = rdata_text(record.rtype, &record.rdata);
        match views.last_mut() {
            Some(last) if last.name == owner && last.rtype == rtype => last.records.push(data),
            _ => views.push(RrsetView { name: owner, rtype, ttl: record.ttl, records: vec![data] }),
        }
    }
    Ok(views)
}

/// Replaces or deletes (no records) each RRset in `changes`, all or
/// nothing; the SOA serial moves forward unless a change sets a newer one.
pub fn change_rrsets(state: &State, zone: &str, changes: &[RrsetChange]) -> Result<Vec<Change>, ControlError> {
    let spec = find_zone(state, zone)?;
    let before = records(spec)?;
    let mut after = before.clone();
    for (index, change) in changes.iter().enumerate() {
        let field = format!("rrsets[{index}]");
        let rrset = parsed_change(&spec.name, change).map_err(|message| ControlError::invalid(&field, message))?;
        if rrset.rtype == types::SOA && rrset.records.is_empty() {
            return Err(ControlError::invalid(field, "a zone's SOA cannot be deleted"));
        }
        after.retain(|record| record.owner != rrset.owner || record.rtype != rrset.rtype);
        after.extend(rrset.records);
    }
    after.sort_unstable();
    Ok(vec![put_changed(spec, &before, after)?])
}

/// The zone `spec` holding `after` (sorted), with its serial moved
/// forward past `before`'s unless `after` moved it already.
pub fn put_changed(spec: &ZoneSpec, before: &[Record], mut after: Vec<Record>) -> Result<Change, ControlError> {
    let serial_of = |records: &[Record]| records.iter().find(|record| record.rtype == types::SOA).and_then(|soa| soa_serial(&soa.rdata));
    let (Some(old), Some(new)) = (serial_of(before), serial_of(&after)) else {
        return Err(ControlError::invalid(format!("zone[{}]", spec.name), "a zone needs one SOA record"));
    };
    if after != before && !pharos_zone::journal::newer(new, old) {
        let soa = after.iter_mut().find(|record| record.rtype == types::SOA).expect("found above");
        soa.rdata = with_serial(&soa.rdata, old.wrapping_add(1));
    }
    let origin = name::from_dotted(&spec.name).map_err(|error| ControlError::invalid("name", format!("{error:?}")))?;
    Ok(Change::PutZone(ZoneSpec { name: spec.name.clone(), text: zone_text(&origin, &after) }))
}

/// The records of the store zone `spec`, its SOA among them, sorted.
pub fn records(spec: &ZoneSpec) -> Result<Vec<Record>, ControlError> {
    let zone = parse_zone_text(&spec.name, &spec.text, &spec.name)
        .map_err(|error| ControlError::invalid(format!("zone[{}]", spec.name), error.to_string()))?;
    Ok(pharos_zone::text::records_of(&zone))
}

/// An RRset a change puts (no records: deletes).
struct ParsedRrset {
    /// Wire form.
    owner: Box<[u8]>,
    rtype: u16,
    records: Vec<Record>,
}

/// A change's owner and type, and the records it puts there.
fn parsed_change(origin: &str, change: &RrsetChange) -> Result<ParsedRrset, String> {
    let owner_text = absolute_lowercase(&change.name).map_err(|error| error.to_string())?;
    let owner: Box<[u8]> =
        name::from_dotted(&owner_text).map_err(|error| format!("{:?} is not a domain name ({error:?})", change.name))?.into();
    let origin_wire = name::from_dotted(origin).map_err(|error| format!("{error:?}"))?;
    if !name::is_at_or_below(&owner, &origin_wire) {
        return Err(format!("{owner_text} is not inside zone {origin}"));
    }
    let rtype = type_number(&change.rtype)?;
    let mut text = String::new();
    for data in &change.records {
        if data.contains(['\n', '\r']) {
            return Err(format!("record data {data:?} spans lines"));
        }
        text.push_str(&format!("{owner_text} {} IN {} {data}\n", change.ttl, change.rtype));
    }
    let records = parse_records(origin, &text, "the change").map_err(|error| error.message)?;
    if let Some(stray) = records.iter().find(|record| record.owner != owner || record.rtype != rtype) {
        return Err(format!("record data {:?} is not one {} record", rdata_text(stray.rtype, &stray.rdata), change.rtype));
    }
    Ok(ParsedRrset { owner, rtype, records })
}

/// The text of a zone imported once: read and checked whole now, so an
/// error names the line it is on.
fn imported(name: &str, text: &str) -> Result<String, ControlError> {
    let zone = parse_zone_text(name, text, "line").map_err(|error| ControlError::invalid("text", error.to_string()))?;
    Ok(zone_text(&zone.origin, &pharos_zone::text::records_of(&zone)))
}

fn empty_zone(name: &str, primary: &str, nameservers: &[String]) -> Result<String, ControlError> {
    let mut text = format!("{name} {EMPTY_ZONE_TTL} IN SOA {} hostmaster.{name} 1 {EMPTY_ZONE_TIMERS}\n", absolute_lowercase(primary)?);
    for nameserver in nameservers {
        text.push_str(&format!("{name} {EMPTY_ZONE_TTL} IN NS {}\n", absolute_lowercase(nameserver)?));
    }
    imported(name, &text)
}

/// `text` as an absolute lowercase name, checked.
fn absolute_lowercase(text: &str) -> Result<String, ControlError> {
    let absolute = if text.ends_with('.') { text.to_ascii_lowercase() } else { format!("{}.", text.to_ascii_lowercase()) };
    name::from_dotted(&absolute).map_err(|error| ControlError::invalid("name", format!("{text:?} is not a domain name ({error:?})")))?;
    Ok(absolute)
}

fn type_name(rtype: u16) -> String {
    domain::base::iana::Rtype::from_int(rtype).to_string()
}

fn type_number(text: &str) -> Result<u16, String> {
    text.to_ascii_uppercase()
        .parse::<domain::base::iana::Rtype>()
        .map(|rtype| rtype.to_int())
        .map_err(|_| format!("{text:?} is not a record type"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with(changes: Vec<Change>) -> State {
        State::default().with(&changes)
    }

    fn made() -> State {
        let new =
            NewZone { name: "Example.TEST".into(), text: None, nameservers: vec!["ns1.example.test".into(), "ns2.example.net.".into()] };
        state_with(make_zone(&State::default(), &new).unwrap())
    }

    fn rrset(name: &str, rtype: &str, records: &[&str]) -> RrsetChange {
        RrsetChange { name: name.into(), rtype: rtype.into(), ttl: 60, records: records.iter().map(|data| data.to_string()).collect() }
    }

    fn serial(state: &State) -> u32 {
        let soa = rrsets(state.zone("example.test.").unwrap()).unwrap().into_iter().find(|view| view.rtype == "SOA").unwrap();
        soa.records[0].split(' ').nth(2).unwrap().parse().unwrap()
    }

    #[test]
    fn a_zone_made_empty_holds_a_soa_and_its_name_servers() {
        let state = made();
        let views = rrsets(state.zone("example.test.").unwrap()).unwrap();
        let summary: Vec<(String, String, Vec<String>)> = views.into_iter().map(|view| (view.name, view.rtype, view.records)).collect();
        assert_eq!(summary[0].1, "SOA");
        assert_eq!(summary[1], ("example.test.".into(), "NS".into(), vec!["ns1.example.test.".into(), "ns2.example.net.".into()]));
        let again = make_zone(&state, &NewZone { name: "example.test.".into(), text: None, nameservers: vec!["ns1.example.test".into()] });
        assert!(matches!(again, Err(ControlError::Conflict { .. })));
    }

    #[test]
    fn rrsets_are_replaced_and_deleted_together_and_the_serial_moves() {
        let state = made();
        let first = serial(&state);
        let changes = [rrset("www.example.test", "A", &["192.0.2.1", "192.0.2.2"]), rrset("example.test.", "TXT", &["\"hello world\""])];
        let state = state.with(&change_rrsets(&state, "example.test", &changes).unwrap());
        assert_eq!(serial(&state), first + 1);
        let views = rrsets(state.zone("example.test.").unwrap()).unwrap();
        assert!(views.contains(&rrset("www.example.test.", "A", &["192.0.2.1", "192.0.2.2"])), "{views:?}");
        let state = state.with(&change_rrsets(&state, "example.test.", &[rrset("www.example.test.", "A", &[])]).unwrap());
        assert!(!rrsets(state.zone("example.test.").unwrap()).unwrap().iter().any(|view| view.rtype == "A"));
        assert_eq!(serial(&state), first + 2);
    }

    #[test]
    fn a_bad_change_is_refused_naming_it_and_changes_nothing() {
        let state = made();
        let refused = |change: RrsetChange| {
            change_rrsets(&state, "example.test.", &[rrset("a.example.test.", "A", &["192.0.2.1"]), change]).unwrap_err().to_string()
        };
        assert!(refused(rrset("example.test.", "SOA", &[])).contains("rrsets[1]: a zone's SOA cannot be deleted"));
        assert!(refused(rrset("www.example.test.", "A", &["not-an-address"])).contains("rrsets[1]"));
        assert!(refused(rrset("www.other.test.", "A", &["192.0.2.1"])).contains("not inside zone example.test."));
        assert!(refused(rrset("www.example.test.", "A", &["192.0.2.1\nevil 60 IN A 192.0.2.9"])).contains("spans lines"));
        assert!(refused(rrset("www.example.test.", "BOGUS", &["1"])).contains("not a record type"));
        assert!(matches!(change_rrsets(&state, "missing.test.", &[]), Err(ControlError::NotFound(_))));
    }

    #[test]
    fn imported_text_may_not_include_the_servers_files() {
        let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n$INCLUDE /etc/passwd\n";
        let refused = make_zone(&State::default(), &NewZone { name: "example.test".into(), text: Some(text.into()), nameservers: vec![] });
        assert!(refused.unwrap_err().to_string().contains("$INCLUDE is refused"));
    }

    #[test]
    fn a_change_that_sets_a_newer_serial_keeps_it() {
        let state = made();
        let soa = "ns1.example.test. hostmaster.example.test. 2026120701 3600 900 1209600 300";
        let state = state.with(&change_rrsets(&state, "example.test.", &[rrset("example.test.", "SOA", &[soa])]).unwrap());
        assert_eq!(serial(&state), 2026120701);
    }
}
