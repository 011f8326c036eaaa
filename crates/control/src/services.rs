//! The services of a snapshot, built from their declarations and kept
//! from one build to the next, so that a change costs what it changes: a
//! service whose declaration, probe results and the inputs it reads
//! ([`Uses`]: region ids, data centers, proximity data) are as they were
//! is shared with the last snapshot as built, not built again.

use std::collections::HashMap;
use std::sync::Arc;

use pharos_route::model::Service;
use pharos_route::proximity::Proximity;
use pharos_route::{RegionId, Routes};
use pharos_wire::types;
use rustc_hash::FxHashMap;

use crate::build::{BuiltRegions, DataSources, Uses, build_regions, build_service, check_datacenters, probed_replica};
use crate::probe::Probed;
use pharos_model::SpecError;
use pharos_model::spec::{DataCenterSpec, Declared, NotADomainName, ServiceSpec};

/// Checks regions and services together and builds the routing table.
/// `wire_name` turns a service name into its lowercase wire form (or says
/// why it cannot).
pub fn build_routes(
    declared: &Declared<'_>,
    sources: &DataSources,
    wire_name: impl Fn(&str) -> Result<Box<[u8]>, NotADomainName>,
) -> Result<Routes, SpecError> {
    let regions = build_regions(declared.regions, sources)?;
    let (_, routes) = ServiceBook::default().build(declared, sources, &regions, wire_name)?;
    Ok(routes)
}

/// A service as built, with what it was built from.
#[derive(Debug)]
struct Kept {
    /// Shared with the state it was declared in.
    spec: Arc<ServiceSpec>,
    /// What else it was built from.
    uses: Uses,
    /// What the probes said of each replica, for a service with probes.
    probed: Vec<Option<Probed>>,
    /// Lowercase wire form.
    name: Arc<[u8]>,
    service: Arc<Service>,
}

/// What every service is built with besides its own declaration, as the
/// book's services were built with it.
#[derive(Debug, Clone)]
struct Inputs {
    region_ids: Arc<HashMap<String, RegionId>>,
    datacenters: Arc<[DataCenterSpec]>,
    proximity: Proximity,
}

/// Every service built, by declared name.
#[derive(Debug, Clone, Default)]
pub struct ServiceBook {
    /// `None` until something is built.
    inputs: Option<Inputs>,
    /// In the order declared: a state's, by name.
    kept: Vec<Arc<Kept>>,
    /// Whether the names served, or the types answered at a name, differ
    /// from the book this one was built from (the zones must then be
    /// frozen again).
    names_changed: bool,
}

impl ServiceBook {
    /// The book of `declared`'s services over `sources` and `regions`,
    /// each taken from this book where nothing it was built from changed,
    /// built afresh (and checked) otherwise; and the routing table of
    /// them (moved into the snapshot's routes, not kept: the book keeps
    /// only what the next build reuses).
    pub fn build(
        &self,
        declared: &Declared<'_>,
        sources: &DataSources,
        regions: &BuiltRegions,
        wire_name: impl Fn(&str) -> Result<Box<[u8]>, NotADomainName>,
    ) -> Result<(ServiceBook, Routes), SpecError> {
        let inputs = self.inputs_for(declared.datacenters, sources, regions)?;
        let changed = |uses: Uses| match &self.inputs {
            None => true,
            Some(before) => {
                (uses.regions && !Arc::ptr_eq(&before.region_ids, &inputs.region_ids))
                    || (uses.datacenters && !Arc::ptr_eq(&before.datacenters, &inputs.datacenters))
                    || (uses.proximity && !same_proximity(&before.proximity, &inputs.proximity))
            }
        };
        let mut kept = Vec::with_capacity(declared.services.len());
        let mut services = FxHashMap::with_capacity_and_hasher(declared.services.len(), Default::default());
        let mut names_changed = declared.services.len() != self.kept.len();
        let mut cursor = 0;
        for spec in declared.services {
            let field = || format!("service[{}]", spec.name);
            let before = self.built_before(spec, &mut cursor);
            let unchanged = before.filter(|before| {
                same_spec(&before.spec, spec)
                    && !changed(before.uses)
                    && (!before.uses.probes || before.probed == probed_replicas(spec, sources))
            });
            let entry = match unchanged {
                Some(before) => before.clone(),
                None => {
                    let uses = Uses::of(spec);
                    let probed = if uses.probes { probed_replicas(spec, sources) } else { Vec::new() };
                    let name = wire_name(&spec.name)
                        .map_err(|error| SpecError { field: format!("{}.name", field()), message: error.to_string() })?;
                    let service = Arc::new(build_service(spec, &field(), &inputs.region_ids, &inputs.datacenters, sources)?);
                    let name = Arc::from(name);
                    names_changed |=
                        before.is_none_or(|before| before.name != name || routed_types(&before.service) != routed_types(&service));
                    Arc::new(Kept { spec: spec.clone(), uses, probed, name, service })
                }
            };
            // Two names alike are one wire name.
            if services.insert(entry.name.clone(), entry.service.clone()).is_some() {
                return Err(SpecError { field: field(), message: "declared twice".into() });
            }
            kept.push(entry);
        }
        let proximity = Proximity { latencies: sources.latencies.clone(), as_paths: sources.as_paths.clone(), geo: sources.geo.clone() };
        let routes = Routes { services, regions: regions.regions.clone(), proximity };
        Ok((ServiceBook { inputs: Some(inputs), kept, names_changed }, routes))
    }

    /// The service this book built under `spec`'s name, if any: the one
    /// at `cursor` (after the last one found) if it is, as it is for all
    /// but the changed ones of a state, else found by name (a state's
    /// services are in name order; declarations in another order are
    /// not found, only built again). Moves `cursor` past it.
    fn built_before(&self, spec: &Arc<ServiceSpec>, cursor: &mut usize) -> Option<&Arc<Kept>> {
        let position = match self.kept.get(*cursor) {
            Some(next) if Arc::ptr_eq(&next.spec, spec) || next.spec.name == spec.name => *cursor,
            _ => self.kept.binary_search_by(|kept| kept.spec.name.cmp(&spec.name)).ok()?,
        };
        *cursor = position + 1;
        Some(&self.kept[position])
    }

    /// Whether the names or their types changed since the book this one
    /// was built from.
    pub fn names_changed(&self) -> bool {
        self.names_changed
    }

    /// The inputs to build with: this book's where they are the same (so
    /// that a comparison of pointers tells what changed), else new ones;
    /// the data centers checked.
    fn inputs_for(&self, datacenters: &[DataCenterSpec], sources: &DataSources, regions: &BuiltRegions) -> Result<Inputs, SpecError> {
        let before = self.inputs.as_ref();
        let datacenters = match before {
            Some(before) if *before.datacenters == *datacenters => before.datacenters.clone(),
            _ => {
                check_datacenters(datacenters)?;
                Arc::from(datacenters)
            }
        };
        let region_ids = match before {
            Some(before) if *before.region_ids == *regions.ids => before.region_ids.clone(),
            _ => regions.ids.clone(),
        };
        let proximity = Proximity { latencies: sources.latencies.clone(), as_paths: sources.as_paths.clone(), geo: sources.geo.clone() };
        Ok(Inputs { region_ids, datacenters, proximity })
    }
}

/// Whether two declarations are equal: at once if they are one shared
/// declaration, as every service a change leaves alone is.
fn same_spec(a: &Arc<ServiceSpec>, b: &Arc<ServiceSpec>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// Whether two sets of proximity data are the same ones.
fn same_proximity(a: &Proximity, b: &Proximity) -> bool {
    fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        }
    }
    Arc::ptr_eq(&a.latencies, &b.latencies) && same(&a.as_paths, &b.as_paths) && same(&a.geo, &b.geo)
}

/// What the probes say of each of `spec`'s replicas.
fn probed_replicas(spec: &ServiceSpec, sources: &DataSources) -> Vec<Option<Probed>> {
    spec.replicas.iter().map(|replica| probed_replica(spec, replica, &sources.probed).cloned()).collect()
}

/// The types a service answers at its name: those of its replicas'
/// addresses (A, AAAA), or CNAME for second-tier redirectors. A signed
/// zone's proofs at the name list them.
pub fn routed_types(service: &Service) -> Vec<u16> {
    if service.redirectors_family().is_some() {
        return vec![types::CNAME];
    }
    let has = |v4: bool| service.replicas.iter().any(|replica| replica.address.is_ipv4() == v4);
    [(types::A, true), (types::AAAA, false)].into_iter().filter(|(_, v4)| has(*v4)).map(|(rtype, _)| rtype).collect()
}
