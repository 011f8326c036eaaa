//! The declarations of the configuration file against those made through
//! the API since. The file's declarations are upserts; each is applied
//! only when it differs from the version of it last applied (a record the
//! store keeps per declaration), so that a reload applies what the file
//! changed, and what it did not change keeps any change made through the
//! API since.

use pharos_model::Change;
use pharos_model::spec::{DataCenterSpec, RegionSpec, ServiceSpec};

/// Every data center, region and service a file declares, as upserts.
pub fn declarations(datacenters: &[DataCenterSpec], regions: &[RegionSpec], services: &[ServiceSpec]) -> Vec<Change> {
    let datacenters = datacenters.iter().cloned().map(Change::PutDataCenter);
    let regions = regions.iter().cloned().map(Change::PutRegion);
    datacenters.chain(regions).chain(services.iter().cloned().map(Change::PutService)).collect()
}

/// The record that remembers a file declaration as last applied: the
/// name of the store's setting, and its value.
pub fn record(declaration: &Change) -> (String, String) {
    match declaration {
        Change::PutDataCenter(datacenter) => (format!("declared datacenter {}", datacenter.id), json(datacenter)),
        Change::PutRegion(region) => (format!("declared region {}", region.name), json(region)),
        Change::PutService(service) => (format!("declared service {}", service.name), json(service)),
        Change::DeleteDataCenter(_)
        | Change::DeleteRegion(_)
        | Change::DeleteService(_)
        | Change::PutToken(_)
        | Change::PutZone(_)
        | Change::DeleteZone(_) => unreachable!("a file only declares data centers, regions and services"),
    }
}

fn json(declared: &impl serde::Serialize) -> String {
    serde_json::to_string(declared).expect("a declaration serializes")
}

/// The `declarations` that differ from their records as last applied
/// (`recorded` reads a record by name, none if there is none).
pub fn changed<E>(declarations: Vec<Change>, mut recorded: impl FnMut(&str) -> Result<Option<String>, E>) -> Result<Vec<Change>, E> {
    let mut changed = Vec::new();
    for declaration in declarations {
        let (name, value) = record(&declaration);
        if recorded(&name)?.as_deref() != Some(value.as_str()) {
            changed.push(declaration);
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn fra(latitude: f64) -> DataCenterSpec {
        DataCenterSpec { id: "fra".into(), latitude, longitude: 8.57, asn: None }
    }

    fn service(ttl: u32) -> ServiceSpec {
        ServiceSpec { ttl, ..ServiceSpec::new("www.example.test", "static", Vec::new()) }
    }

    /// Records as a store keeps them, after applying `applied`.
    fn recorded(applied: &[Change]) -> HashMap<String, String> {
        applied.iter().map(record).collect()
    }

    fn read(records: &HashMap<String, String>) -> impl FnMut(&str) -> Result<Option<String>, std::convert::Infallible> + '_ {
        |name| Ok(records.get(name).cloned())
    }

    #[test]
    fn a_file_declares_its_data_centers_then_regions_then_services() {
        let region = RegionSpec { id: 1, name: "europe".into(), ..RegionSpec::default() };
        let declared = declarations(&[fra(50.03)], std::slice::from_ref(&region), &[service(60)]);
        assert_eq!(declared, [Change::PutDataCenter(fra(50.03)), Change::PutRegion(region), Change::PutService(service(60))]);
        let names: Vec<String> = declared.iter().map(|change| record(change).0).collect();
        assert_eq!(names, ["declared datacenter fra", "declared region europe", "declared service www.example.test"]);
    }

    #[test]
    fn only_what_the_file_changed_since_it_was_last_applied_is_applied() {
        let first = declarations(&[fra(50.03)], &[], &[service(60)]);
        assert_eq!(changed(first.clone(), read(&HashMap::new())).unwrap(), first, "nothing applied yet: all of it");
        let records = recorded(&first);
        assert_eq!(changed(first.clone(), read(&records)).unwrap(), [], "unchanged: an API edit since stands");
        let edited = declarations(&[fra(50.03)], &[], &[service(300)]);
        assert_eq!(changed(edited, read(&records)).unwrap(), [Change::PutService(service(300))], "the file's edit wins");
    }

    #[test]
    fn a_record_that_cannot_be_read_stops_the_diff() {
        let unreadable = |_: &str| Err("the store is unavailable");
        assert_eq!(changed(declarations(&[fra(50.03)], &[], &[]), unreadable), Err("the store is unavailable"));
    }
}
