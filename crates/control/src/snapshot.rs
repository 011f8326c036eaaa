//! The one way a snapshot is built, in production, in the fuzz targets and
//! in the examples: the routes from the declarations, the zones frozen with
//! every service name reserved in them, and the response settings.
//!
//! A [`SnapshotBuilder`] keeps what the last published build made that the
//! next one can reuse: the regions (a region table can be large; most
//! updates do not touch it), the services (see [`crate::services`]: only
//! those a change touches are built again) and the frozen zones (if the
//! service names and the zones' versions did not change).
//!
//! It also keeps what each zone served last ([`Served`]): a build whose
//! zone files or routed replica sets differ, for a zone, from what it
//! served makes a new version of it (a new serial, a difference in its
//! journal, see `pharos_zone::versions`), and freezes the zones again.

use std::sync::Arc;

use pharos_answer::{Settings, Snapshot, routed_records};
use pharos_route::Routes;
use pharos_wire::name;
use pharos_zone::journal::Record;
use pharos_zone::versions::{Served, file_records};
use pharos_zone::{Zone, ZoneSet};

use crate::build::{BuiltRegions, DataSources, build_regions};
use crate::catalog::{Catalog, CatalogZone};
use crate::services::{ServiceBook, routed_types};
use pharos_model::ControlError;
use pharos_model::spec::{Declared, RegionSpec, service_name};
use pharos_model::zone::ZoneSpec;

/// A service name reserved in the zones (wire form), with the types it
/// answers.
type Reserved = (Box<[u8]>, Vec<u16>);

/// A frozen zone set and the service names reserved in it (sorted), each
/// with the address types its replicas have, and the serials it serves.
/// Every build that changes no name keeps it: the names are shared, not
/// copied (one allocation each, 10,000s of them).
#[derive(Clone)]
struct Frozen {
    set: Arc<ZoneSet>,
    reserved: Arc<[Reserved]>,
    serials: Vec<u32>,
}

/// Builds snapshots over one set of loaded zones and settings.
pub struct SnapshotBuilder {
    loaded: Vec<Zone>,
    /// Each loaded zone's records, for its versions.
    file_records: Vec<Arc<[Record]>>,
    settings: Settings,
    frozen: Option<Frozen>,
    /// What each zone (by origin) served in the last build kept; shared
    /// with the next build while it does not change.
    served: Vec<Arc<Served>>,
    /// The store's zones as last built, parsed.
    stored: Vec<StoredZone>,
    /// The regions last kept, and the declarations they were built from.
    regions: Option<(Vec<RegionSpec>, BuiltRegions)>,
    services: ServiceBook,
    /// The catalog zone to produce, if any, and the one last built.
    catalog: Option<Catalog>,
    catalog_zone: Option<CatalogZone>,
}

/// A snapshot just built, and what the builder keeps if it is published.
pub struct Built {
    pub snapshot: Snapshot,
    frozen: Frozen,
    /// Regions built anew, with their declarations.
    regions: Option<(Vec<RegionSpec>, BuiltRegions)>,
    services: ServiceBook,
    served: Vec<Arc<Served>>,
    stored: Vec<StoredZone>,
    catalog_zone: Option<CatalogZone>,
}

/// A zone the store keeps, parsed from its declaration, which it is kept
/// with: the next build parses only the zones whose text changed.
#[derive(Clone)]
struct StoredZone {
    spec: Arc<ZoneSpec>,
    zone: Zone,
    records: Arc<[Record]>,
}

/// Every zone a build serves (the files' first, then the store's, then
/// the catalog), each with its records.
struct AllZones<'a> {
    zones: Vec<&'a Zone>,
    records: Vec<&'a Arc<[Record]>>,
}

impl SnapshotBuilder {
    /// A builder over `loaded` zones that has built nothing yet.
    pub fn new(loaded: Vec<Zone>, settings: Settings) -> SnapshotBuilder {
        let file_records = loaded.iter().map(file_records).collect();
        SnapshotBuilder {
            loaded,
            file_records,
            settings,
            frozen: None,
            regions: None,
            services: ServiceBook::default(),
            served: Vec::new(),
            stored: Vec::new(),
            catalog: None,
            catalog_zone: None,
        }
    }

    /// This builder, producing `catalog` from the zones of each build.
    pub fn with_catalog(self, catalog: Option<Catalog>) -> SnapshotBuilder {
        SnapshotBuilder { catalog, catalog_zone: None, ..self }
    }

    /// A builder over newly `loaded` zones and their `settings` (a zone's
    /// transfer list is reloaded with it), reusing nothing built before
    /// but what the zones served, the store's zones and the catalog: their
    /// next versions follow on.
    pub fn reloaded(&self, loaded: Vec<Zone>, settings: Settings) -> SnapshotBuilder {
        SnapshotBuilder {
            served: self.served.clone(),
            stored: self.stored.clone(),
            catalog: self.catalog.clone(),
            catalog_zone: self.catalog_zone.clone(),
            ..SnapshotBuilder::new(loaded, settings)
        }
    }

    /// A builder with `zone` in place of the loaded zone of its origin (a
    /// secondary zone's new copy, or its copy expired), reusing all else:
    /// the zone's version follows on from what it served (a new serial
    /// and a journaled difference if its records changed), and the next
    /// build freezes the zones again.
    pub fn with_zone(&self, zone: Zone) -> SnapshotBuilder {
        let (mut loaded, mut records) = (self.loaded.clone(), self.file_records.clone());
        let zone_records = file_records(&zone);
        match loaded.iter().position(|loaded| loaded.origin == zone.origin) {
            Some(index) => (loaded[index], records[index]) = (zone, zone_records),
            None => {
                loaded.push(zone);
                records.push(zone_records);
            }
        }
        SnapshotBuilder {
            loaded,
            file_records: records,
            settings: self.settings.clone(),
            frozen: None,
            served: self.served.clone(),
            stored: self.stored.clone(),
            regions: self.regions.clone(),
            services: self.services.clone(),
            catalog: self.catalog.clone(),
            catalog_zone: self.catalog_zone.clone(),
        }
    }

    /// The zones alone, with no service routed (what serves until the
    /// first build is published).
    pub fn without_services(&self) -> Result<Snapshot, ControlError> {
        let zones = ZoneSet::new(self.loaded.clone()).map_err(ControlError::zones)?;
        Ok(Snapshot { zones: Arc::new(zones), routes: Routes::default(), settings: self.settings.clone() })
    }

    /// The snapshot of `declared` over `sources`, checked whole: a
    /// declaration that cannot be served is refused, naming its field.
    pub fn build(&self, declared: &Declared<'_>, sources: &DataSources) -> Result<Built, ControlError> {
        let (regions, built_regions) = match &self.regions {
            Some((built_from, built)) if built_from == declared.regions => (built.clone(), None),
            _ => {
                let built = build_regions(declared.regions, sources).map_err(ControlError::Invalid)?;
                (built.clone(), Some((declared.regions.to_vec(), built)))
            }
        };
        let (services, routes) = self.services.build(declared, sources, &regions, service_name).map_err(ControlError::Invalid)?;
        let stored = self.stored_zones(declared.zones)?;
        let catalog_zone = self.catalog_zone(&stored)?;
        let zones = self.all_zones(&stored, catalog_zone.as_ref());
        let settings = self.settings_with(&stored);
        let served = self.versions(&zones, &routes, &settings);
        let frozen = self.frozen_for(&zones, &routes, services.names_changed(), &served)?;
        let snapshot = Snapshot { zones: frozen.set.clone(), routes, settings };
        Ok(Built { snapshot, frozen, regions: built_regions, services, served, stored, catalog_zone })
    }

    /// The store's `declared` zones, parsed: those last built kept, the
    /// others read from their text. One whose origin a file zone has, or
    /// that does not read as a zone, is refused naming it.
    fn stored_zones(&self, declared: &[Arc<ZoneSpec>]) -> Result<Vec<StoredZone>, ControlError> {
        declared
            .iter()
            .map(|spec| match self.stored.iter().find(|kept| kept.spec == *spec) {
                Some(kept) => Ok(kept.clone()),
                None => self.parse_stored(spec),
            })
            .collect()
    }

    fn parse_stored(&self, spec: &Arc<ZoneSpec>) -> Result<StoredZone, ControlError> {
        let field = format!("zone[{}]", spec.name);
        let zone = pharos_zone::parse_zone_text(&spec.name, &spec.text, &spec.name)
            .map_err(|error| ControlError::invalid(&field, error.to_string()))?;
        if self.loaded.iter().any(|file_zone| file_zone.origin == zone.origin) {
            return Err(ControlError::invalid(field, "a zone file of the configuration serves this zone"));
        }
        let records = file_records(&zone);
        Ok(StoredZone { spec: spec.clone(), zone, records })
    }

    /// The settings with each of the `stored` zones' transfer list.
    fn settings_with(&self, stored: &[StoredZone]) -> Settings {
        let mut settings = self.settings.clone();
        if let Some(transfers) = &self.settings.store_zone_transfers {
            settings.transfer_acls.extend(stored.iter().map(|stored| transfers.for_zone(&stored.zone.origin)));
        }
        settings
    }

    /// The catalog zone listing the files' zones and `stored`, if one is
    /// produced.
    fn catalog_zone(&self, stored: &[StoredZone]) -> Result<Option<CatalogZone>, ControlError> {
        let Some(catalog) = &self.catalog else { return Ok(None) };
        catalog.zone(self.loaded.iter(), stored.iter().map(|stored| &stored.zone), self.catalog_zone.as_ref()).map(Some)
    }

    /// The files' zones, then `stored`, then the `catalog`.
    fn all_zones<'a>(&'a self, stored: &'a [StoredZone], catalog: Option<&'a CatalogZone>) -> AllZones<'a> {
        let stored = stored.iter().map(|stored| (&stored.zone, &stored.records));
        let generated = stored.chain(catalog.map(|catalog| (&catalog.zone, &catalog.records)));
        let (zones, records): (Vec<_>, Vec<_>) = self.loaded.iter().zip(&self.file_records).chain(generated).unzip();
        AllZones { zones, records }
    }

    /// The zones, each serving its version in `served`, frozen with
    /// `routes`' service names reserved: those kept, unless the versions,
    /// the names or their types changed.
    fn frozen_for(
        &self,
        zones: &AllZones<'_>,
        routes: &Routes,
        names_changed: bool,
        served: &[Arc<Served>],
    ) -> Result<Frozen, ControlError> {
        let serials: Vec<u32> = served.iter().map(|served| served.serial()).collect();
        match &self.frozen {
            Some(frozen) if !names_changed && frozen.serials == serials => Ok(frozen.clone()),
            kept => {
                let names = sorted_names(routes);
                match kept {
                    Some(frozen) if *frozen.reserved == *names && frozen.serials == serials => Ok(frozen.clone()),
                    _ => freeze(&zones.zones, names, served),
                }
            }
        }
    }

    /// What each loaded zone serves with `routes`: what it served, or the
    /// version after it if a secondary would see a change. Only a zone
    /// some client may transfer (`allow_transfer`) counts its services'
    /// replica sets: no secondary reads the others', and a new serial
    /// re-encodes every answer of the zone (those carrying the SOA), a
    /// cost proportional to the zone, not to the change.
    fn versions(&self, all: &AllZones<'_>, routes: &Routes, settings: &Settings) -> Vec<Arc<Served>> {
        let transferred: Vec<bool> =
            all.zones.iter().map(|zone| settings.transfer_acls.iter().any(|acl| acl.zone == zone.origin)).collect();
        let mut routed: Vec<Vec<Record>> = vec![Vec::new(); all.zones.len()];
        if transferred.contains(&true) {
            for (owner, service) in &routes.services {
                // A service outside every zone is refused when the zones are frozen.
                if let Some(index) = zone_of(all.zones.iter().copied(), owner).filter(|index| transferred[*index]) {
                    routed[index].extend(routed_records(owner, service));
                }
            }
        }
        let zones = all.zones.iter().zip(&all.records).zip(routed);
        zones
            .map(|((zone, records), routed)| match self.served.iter().find(|served| served.origin() == &*zone.origin) {
                Some(served) => served.next(zone, records, routed).map_or_else(|| served.clone(), Arc::new),
                None => Arc::new(Served::first(zone, Arc::clone(records), routed)),
            })
            .collect()
    }

    /// When each signed zone's keys next change state (Unix seconds).
    pub fn key_steps(&self) -> impl Iterator<Item = u64> + '_ {
        self.loaded.iter().filter_map(|zone| zone.signer.as_ref()?.next_step())
    }

    /// Keeps what `built` made for the next build to reuse; returns its
    /// snapshot, to publish.
    pub fn keep(&mut self, built: Built) -> Snapshot {
        self.frozen = Some(built.frozen);
        self.served = built.served;
        self.stored = built.stored;
        self.catalog_zone = built.catalog_zone;
        if let Some(regions) = built.regions {
            self.regions = Some(regions);
        }
        self.services = built.services;
        built.snapshot
    }
}

/// Builds one snapshot from scratch (the fuzz targets and examples).
pub fn build_snapshot(
    zones: Vec<Zone>,
    settings: Settings,
    declared: &Declared<'_>,
    sources: &DataSources,
) -> Result<Snapshot, ControlError> {
    let builder = SnapshotBuilder::new(zones, settings);
    let built = builder.build(declared, sources)?;
    Ok(built.snapshot)
}

/// The service names, sorted, each with the types it answers.
fn sorted_names(routes: &Routes) -> Vec<Reserved> {
    let mut names: Vec<Reserved> = routes.services.iter().map(|(name, service)| (Box::from(&name[..]), routed_types(service))).collect();
    names.sort();
    names
}

/// Freezes `loaded` zones, each serving its version in `served`, with
/// every service name in `names` reserved.
fn freeze(loaded: &[&Zone], names: Vec<Reserved>, served: &[Arc<Served>]) -> Result<Frozen, ControlError> {
    let mut zones: Vec<Zone> = loaded.iter().map(|&zone| zone.clone()).collect();
    for (zone, version) in zones.iter_mut().zip(served) {
        version.apply_to(zone);
    }
    for (service, routed_types) in &names {
        reserve_in_zone(&mut zones, service, routed_types)?;
    }
    let set = ZoneSet::new(zones).map_err(ControlError::zones)?;
    Ok(Frozen { set: Arc::new(set), reserved: names.into(), serials: served.iter().map(|served| served.serial()).collect() })
}

/// The index of the most specific zone containing `owner`.
fn zone_of<'z>(zones: impl Iterator<Item = &'z Zone>, owner: &[u8]) -> Option<usize> {
    let containing = zones.enumerate().filter(|(_, zone)| name::is_at_or_below(owner, &zone.origin));
    containing.max_by_key(|(_, zone)| zone.origin.len()).map(|(index, _)| index)
}

/// Makes a service's name exist in the most specific zone containing it.
fn reserve_in_zone(zones: &mut [Zone], service: &[u8], routed_types: &[u16]) -> Result<(), ControlError> {
    let field = format!("service[{}].name", name::Display(service));
    let index = zone_of(zones.iter(), service).ok_or_else(|| ControlError::invalid(&field, "not inside any served zone"))?;
    zones[index].reserve_name(service, routed_types).map_err(|error| ControlError::invalid(field, error.to_string()))
}
