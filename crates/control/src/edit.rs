//! The operator's edits (the control API's calls) as rules over the state:
//! each takes the state as it stands and returns the changes to make, or
//! why there are none. The changes are then checked whole, with everything
//! else, when the next snapshot is built from them ([`crate::spec`]).

use pharos_model::ControlError;
pub use pharos_model::api::{NewRegion, Probabilities, ReplicaPatch};
use pharos_model::spec::{RegionSpec, ServiceSpec};
use pharos_model::{Change, State};

pub fn delete_datacenter(state: &State, id: &str) -> Result<Vec<Change>, ControlError> {
    if !state.datacenters.iter().any(|datacenter| datacenter.id == id) {
        return Err(ControlError::NotFound(format!("data center {id}")));
    }
    Ok(vec![Change::DeleteDataCenter(id.to_owned())])
}

/// Adds `new` with the id after the highest one given so far.
pub fn add_region(state: &State, new: &NewRegion) -> Result<Vec<Change>, ControlError> {
    if state.regions.iter().any(|region| region.name == new.name) {
        return Err(ControlError::Conflict { field: "name".into(), message: format!("region {:?} exists", new.name) });
    }
    let id = state.regions.iter().map(|region| region.id).max().unwrap_or(0) + 1;
    let NewRegion { name, prefixes, asns, countries, continents } = new.clone();
    Ok(vec![Change::PutRegion(RegionSpec { id, name, prefixes, asns, countries, continents })])
}

pub fn delete_region(state: &State, name: &str) -> Result<Vec<Change>, ControlError> {
    if !state.regions.iter().any(|region| region.name == name) {
        return Err(ControlError::NotFound(format!("region {name}")));
    }
    Ok(vec![Change::DeleteRegion(name.to_owned())])
}

/// The declaration of the service `name`.
pub fn find_service<'a>(state: &'a State, name: &str) -> Result<&'a ServiceSpec, ControlError> {
    state.service(name).map(|service| &**service).ok_or_else(|| ControlError::NotFound(format!("service {name}")))
}

pub fn delete_service(state: &State, name: &str) -> Result<Vec<Change>, ControlError> {
    find_service(state, name)?;
    Ok(vec![Change::DeleteService(name.to_owned())])
}

/// MyXDNS's Update_Prob: replaces the service's whole table.
pub fn set_probabilities(state: &State, name: &str, table: &Probabilities) -> Result<Vec<Change>, ControlError> {
    let mut service = find_service(state, name)?.clone();
    service.probabilities = table.clone();
    Ok(vec![Change::PutService(service)])
}

pub fn patch_replica(state: &State, name: &str, id: &str, patch: &ReplicaPatch) -> Result<Vec<Change>, ControlError> {
    let mut service = find_service(state, name)?.clone();
    let replica = service
        .replicas
        .iter_mut()
        .find(|replica| replica.id == id)
        .ok_or_else(|| ControlError::NotFound(format!("replica {id} of {name}")))?;
    replica.enabled = patch.enabled.unwrap_or(replica.enabled);
    replica.down = patch.down.unwrap_or(replica.down);
    replica.weight = patch.weight.unwrap_or(replica.weight);
    replica.priority = patch.priority.unwrap_or(replica.priority);
    Ok(vec![Change::PutService(service)])
}

/// Checks a load report: a number, 0 or more, for a declared replica.
pub fn check_load(state: &State, service: &str, replica: &str, value: f64) -> Result<(), ControlError> {
    if !value.is_finite() || value < 0.0 {
        return Err(ControlError::invalid("load", format!("{value} is not a load (a number, 0 or more)")));
    }
    if !find_service(state, service)?.replicas.iter().any(|spec| spec.id == replica) {
        return Err(ControlError::NotFound(format!("replica {replica} of {service}")));
    }
    Ok(())
}
