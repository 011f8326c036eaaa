//! Declarations checked and converted into the routing core's regions
//! and services. Every check runs before anything is built, and the first
//! failure names the field to fix; a rejected declaration changes nothing.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use pharos_route::as_paths::AsPaths;
use pharos_route::external::ExternalRegions;
use pharos_route::geo::{Coordinates, Point};
use pharos_route::latency::Latencies;
use pharos_route::locate::Regions;
use pharos_route::model::{Answering, Service};
use pharos_route::policy::{Policy, PolicyKind, ProbabilityTable, RegionRow};
use pharos_route::prefix::parse_prefix;
use pharos_route::replica::{Health, Replica};
use pharos_route::sources::{AsnTable, GeoDatabase};
use pharos_route::{RegionId, UNCLASSIFIED};

use pharos_model::SpecError;
use pharos_model::probe::ProbeKind;
use pharos_model::spec::{DataCenterSpec, RegionSpec, ReplicaSpec, ServiceSpec, service_name};

use crate::probe::{Probed, ProbedHealth};

fn fail<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError::new(field, message))
}

/// Data that region rules beyond CIDR lists, and proximity policies, look
/// addresses up in.
#[derive(Debug, Clone, Default)]
pub struct DataSources {
    pub asn_table: Option<Arc<AsnTable>>,
    pub geo: Option<Arc<GeoDatabase>>,
    pub external: Option<Arc<ExternalRegions>>,
    /// Present when BGP tables are configured, even while they load.
    pub as_paths: Option<Arc<AsPaths>>,
    pub latencies: Arc<Latencies>,
    /// What health probes say, by (service, replica).
    pub probed: Arc<ProbedHealth>,
}

/// Checks data center declarations: unique ids, coordinates on Earth.
pub fn check_datacenters(datacenters: &[DataCenterSpec]) -> Result<(), SpecError> {
    let mut seen = HashSet::new();
    for datacenter in datacenters {
        let field = format!("datacenter[{}]", datacenter.id);
        if datacenter.id.is_empty() || !seen.insert(datacenter.id.as_str()) {
            return fail(field, "the id is empty or used twice");
        }
        if !(-90.0..=90.0).contains(&datacenter.latitude) {
            return fail(format!("{field}.latitude"), format!("{} is not a latitude (-90 to 90)", datacenter.latitude));
        }
        if !(-180.0..=180.0).contains(&datacenter.longitude) {
            return fail(format!("{field}.longitude"), format!("{} is not a longitude (-180 to 180)", datacenter.longitude));
        }
    }
    Ok(())
}

const CONTINENTS: [&str; 7] = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"];

/// The names of the policies `include` picks, for error messages.
fn policy_names(include: impl Fn(PolicyKind) -> bool) -> String {
    let names: Vec<&str> = PolicyKind::ALL.into_iter().filter(|&kind| include(kind)).map(PolicyKind::name).collect();
    names.join(", ")
}

/// Regions built from their declarations, and their ids by name.
#[derive(Debug, Clone)]
pub struct BuiltRegions {
    pub regions: Arc<Regions>,
    /// Shared: every service built with them holds on to them.
    pub ids: Arc<HashMap<String, RegionId>>,
}

/// Checks region declarations and builds them against `sources`.
pub fn build_regions(specs: &[RegionSpec], sources: &DataSources) -> Result<BuiltRegions, SpecError> {
    let mut regions = Regions::default();
    regions.asn_table = sources.asn_table.clone();
    regions.geo = sources.geo.clone();
    regions.external = sources.external.clone();
    let mut ids = HashMap::new();
    let mut seen_ids = HashSet::new();
    let mut claimed: HashMap<(IpAddr, u8), String> = HashMap::new();
    for spec in specs {
        let field = format!("region[{}]", spec.name);
        if spec.id == UNCLASSIFIED {
            return fail(format!("{field}.id"), "0 is reserved for unclassified clients; use 1 or more");
        }
        if !seen_ids.insert(spec.id) || ids.insert(spec.name.clone(), spec.id).is_some() {
            return fail(field, format!("region id {} or name {:?} is used twice", spec.id, spec.name));
        }
        for (index, text) in spec.prefixes.iter().enumerate() {
            let (network, length) = parse_prefix(text).or_else(|error| fail(format!("{field}.prefixes[{index}]"), error.to_string()))?;
            if let Some(other) = claimed.insert((network, length), spec.name.clone()) {
                return fail(format!("{field}.prefixes[{index}]"), format!("{text} already belongs to region {other:?}"));
            }
            regions.add_prefix(network, length, spec.id);
        }
        add_codes(
            &mut regions.by_asn,
            spec,
            &field,
            "asns",
            spec.asns.iter().map(|&asn| Ok(asn)),
            sources.asn_table.is_some(),
            "[geo] asn_table",
        )?;
        let countries = spec.countries.iter().map(|code| country_code(code));
        add_codes(&mut regions.by_country, spec, &field, "countries", countries, sources.geo.is_some(), "[geo] database")?;
        let continents = spec.continents.iter().map(|code| continent_code(code));
        add_codes(&mut regions.by_continent, spec, &field, "continents", continents, sources.geo.is_some(), "[geo] database")?;
    }
    Ok(BuiltRegions { regions: Arc::new(regions), ids: Arc::new(ids) })
}

/// Adds a region's AS numbers or codes to their map, refusing bad ones,
/// ones another region has, and any at all without the data to use them.
fn add_codes<K: std::hash::Hash + Eq + fmt::Debug>(
    map: &mut HashMap<K, RegionId>,
    spec: &RegionSpec,
    field: &str,
    list: &str,
    codes: impl Iterator<Item = Result<K, String>>,
    source_present: bool,
    source_name: &str,
) -> Result<(), SpecError> {
    for (index, code) in codes.enumerate() {
        let code_field = format!("{field}.{list}[{index}]");
        if !source_present {
            return fail(code_field, format!("needs a {source_name} to look clients up in; none is configured"));
        }
        let code = code.or_else(|message| fail(&code_field, message))?;
        if let Some(other) = map.insert(code, spec.id).filter(|&other| other != spec.id) {
            return fail(code_field, format!("already belongs to region {other}"));
        }
    }
    Ok(())
}

fn country_code(code: &str) -> Result<[u8; 2], String> {
    match code.as_bytes() {
        [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => Ok([a.to_ascii_uppercase(), b.to_ascii_uppercase()]),
        _ => Err(format!("{code:?} is not a two-letter country code (ISO 3166-1 alpha-2)")),
    }
}

fn continent_code(code: &str) -> Result<[u8; 2], String> {
    let upper = code.to_ascii_uppercase();
    if CONTINENTS.contains(&upper.as_str()) {
        let bytes = upper.as_bytes();
        Ok([bytes[0], bytes[1]])
    } else {
        Err(format!("{code:?} is not a continent code; one of {}", CONTINENTS.join(" ")))
    }
}

/// What a service's build reads besides its declaration; a service whose
/// declaration and these did not change builds the same again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uses {
    /// Region ids, by name: its probability tables or load-control ranks.
    pub regions: bool,
    /// The data centers: a replica placed in one.
    pub datacenters: bool,
    /// Latencies, AS paths or the MaxMind DB: a proximity policy.
    pub proximity: bool,
    /// What its probes say: it has a health check (no other service's
    /// replicas are probed, and none is built with probe results).
    pub probes: bool,
}

impl Uses {
    pub fn of(spec: &ServiceSpec) -> Uses {
        Uses {
            regions: !spec.probabilities.is_empty() || spec.load_control.is_some(),
            datacenters: spec.replicas.iter().any(|replica| replica.datacenter.is_some()),
            proximity: PolicyKind::named(&spec.policy).is_some_and(PolicyKind::needs_fallback),
            probes: spec.health.is_some(),
        }
    }
}

/// Checks one service's declaration and builds it; `field` names it.
pub(crate) fn build_service(
    spec: &ServiceSpec,
    field: &str,
    region_ids: &HashMap<String, RegionId>,
    datacenters: &[DataCenterSpec],
    sources: &DataSources,
) -> Result<Service, SpecError> {
    let mut replicas = Vec::with_capacity(spec.replicas.len());
    for replica in &spec.replicas {
        if replicas.iter().any(|known: &Replica| known.id == replica.id) {
            return fail(format!("{field}.replica[{}]", replica.id), "replica id used twice");
        }
        if let Some(datacenter) = replica.datacenter.as_ref().filter(|id| !datacenters.iter().any(|known| known.id == **id)) {
            return fail(format!("{field}.replica[{}].datacenter", replica.id), format!("no data center {datacenter:?} is declared"));
        }
        let down_because = why_down(replica, probed_replica(spec, replica, &sources.probed));
        replicas.push(Replica {
            id: replica.id.clone(),
            address: replica.address,
            datacenter: replica.datacenter.clone(),
            weight: replica.weight,
            priority: replica.priority,
            enabled: replica.enabled,
            health: if down_because.is_some() { Health::Down } else { Health::Up },
            down_because,
            redirect_host: replica.redirect_host.as_deref().map(|host| check_host_name(host, field, &replica.id)).transpose()?,
            cname: replica.delegate.as_deref().map(|target| check_delegate(target, field, &replica.id)).transpose()?,
        });
    }
    if let Some(odd) = spec.replicas.iter().find(|replica| replica.delegate.is_some() != spec.replicas[0].delegate.is_some()) {
        return fail(format!("{field}.replica[{}].delegate", odd.id), "a service's replicas all delegate (tier-2 redirectors), or none");
    }
    check_probes_and_load_control(spec, field, region_ids)?;
    if replicas.is_empty() {
        return fail(format!("{field}.replica"), "a service needs at least one replica");
    }
    let policy = build_policy(&spec.policy, &format!("{field}.policy"), spec, &replicas, region_ids, datacenters, sources)?;
    let uses_table = |policy: &Policy| matches!(policy, Policy::RegionProbabilities(_));
    if !uses_table(&policy) && !policy.fallback().is_some_and(uses_table) && !spec.probabilities.is_empty() {
        return fail(format!("{field}.probabilities"), "probabilities need policy (or fallback) = \"region-probabilities\"");
    }
    if spec.fallback.is_some() && policy.fallback().is_none() {
        return fail(
            format!("{field}.fallback"),
            format!("only the policies {} have a fallback", policy_names(PolicyKind::needs_fallback)),
        );
    }
    let ttl_cap = spec.shrink_ttl.then(|| soonest_change(spec, &sources.probed)).flatten();
    let answering = Answering { ttl: spec.ttl, max_answers: spec.max_answers, when_all_down: spec.when_all_down, ttl_cap };
    Ok(Service::new(spec.name.clone(), replicas, policy, answering))
}

/// A replica's `redirect_host`, if it is a host name a URL can carry.
fn check_host_name(host: &str, field: &str, replica: &str) -> Result<Box<str>, SpecError> {
    let is_label = |label: &str| !label.is_empty() && label.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-');
    if host.len() > 253 || !host.split('.').all(is_label) {
        return fail(format!("{field}.replica[{replica}].redirect_host"), format!("{host:?} is not a host name like fra.cdn.example"));
    }
    Ok(host.into())
}

/// A replica's `delegate`, in lowercase wire form, if it is a domain name.
fn check_delegate(target: &str, field: &str, replica: &str) -> Result<Box<[u8]>, SpecError> {
    match service_name(target) {
        Ok(wire) => Ok(wire.to_ascii_lowercase().into()),
        Err(error) => fail(format!("{field}.replica[{replica}].delegate"), error.to_string()),
    }
}

fn check_probes_and_load_control(spec: &ServiceSpec, field: &str, region_ids: &HashMap<String, RegionId>) -> Result<(), SpecError> {
    if let Some(probe) = &spec.health {
        probe.check(&format!("{field}.health"))?;
    }
    if let Some(probe) = &spec.load_probe {
        probe.check(&format!("{field}.load_probe"))?;
        if !matches!(probe.kind, ProbeKind::Http | ProbeKind::Https) {
            return fail(format!("{field}.load_probe.kind"), "a load probe is an HTTP or HTTPS GET answering a number");
        }
    }
    let Some(control) = &spec.load_control else { return Ok(()) };
    let control_field = format!("{field}.load_control");
    if spec.policy != "region-probabilities" {
        return fail(control_field, "load control sets region probabilities: needs policy = \"region-probabilities\"");
    }
    let ids: Vec<&str> = spec.replicas.iter().map(|replica| replica.id.as_str()).collect();
    control.check(&control_field, &ids)?;
    match control.ranks.keys().find(|table| *table != "default" && !region_ids.contains_key(*table)) {
        Some(unknown) => fail(format!("{control_field}.ranks[{unknown}]"), "no region of that name (declare it, or use \"default\")"),
        None => Ok(()),
    }
}

/// Why a replica is down: an operator's mark, or its probes.
fn why_down(replica: &ReplicaSpec, probed: Option<&Probed>) -> Option<Arc<str>> {
    match probed {
        _ if replica.down => Some("marked down by an operator".into()),
        Some(probed) if !probed.up => Some(probed.reason.clone()),
        _ => None,
    }
}

/// Seconds until probes could change any of `spec`'s replicas' state.
fn soonest_change(spec: &ServiceSpec, probed: &ProbedHealth) -> Option<u32> {
    spec.replicas.iter().filter_map(|replica| probed_replica(spec, replica, probed)).map(|probed| probed.stable_for).min()
}

/// What the probes say of `replica` of `spec`: nothing for a service
/// without a health check, whatever `probed` holds (what [`Uses`] says).
pub(crate) fn probed_replica<'a>(spec: &ServiceSpec, replica: &ReplicaSpec, probed: &'a ProbedHealth) -> Option<&'a Probed> {
    spec.health.as_ref()?;
    probed.get(&(spec.name.clone(), replica.id.clone()))
}

/// The policy called `name`, for `spec`'s `replicas`.
fn build_policy(
    name: &str,
    field: &str,
    spec: &ServiceSpec,
    replicas: &[Replica],
    region_ids: &HashMap<String, RegionId>,
    datacenters: &[DataCenterSpec],
    sources: &DataSources,
) -> Result<Policy, SpecError> {
    let fallback = || -> Result<Box<Policy>, SpecError> {
        let fallback_name = spec.fallback.as_deref().unwrap_or(PolicyKind::Weighted.name());
        let field = format!("service[{}].fallback", spec.name);
        if PolicyKind::named(fallback_name).is_some_and(PolicyKind::needs_fallback) {
            return fail(field, format!("{fallback_name:?} needs a fallback itself; pick a policy that does not look at the client"));
        }
        build_policy(fallback_name, &field, spec, replicas, region_ids, datacenters, sources).map(Box::new)
    };
    let datacenter_of =
        |replica: &Replica| replica.datacenter.as_ref().and_then(|id| datacenters.iter().find(|datacenter| datacenter.id == *id));
    let Some(kind) = PolicyKind::named(name) else {
        return fail(field, format!("unknown policy {name:?}; one of {}", policy_names(|_| true)));
    };
    Ok(match kind {
        PolicyKind::Static => Policy::Static,
        PolicyKind::RoundRobin => Policy::round_robin(),
        PolicyKind::Weighted => Policy::Weighted,
        PolicyKind::Failover => Policy::Failover,
        PolicyKind::RegionProbabilities => {
            Policy::RegionProbabilities(build_table(spec, &format!("service[{}]", spec.name), replicas, region_ids)?)
        }
        PolicyKind::LowestLatency => {
            let datacenters = replicas.iter().map(|replica| sources.latencies.datacenter_index(replica.datacenter.as_deref()?)).collect();
            Policy::LowestLatency { datacenters, fallback: fallback()? }
        }
        PolicyKind::ShortestAsPath => {
            let Some(as_paths) = &sources.as_paths else { return fail(field, "needs BGP tables ([bgp] table); none is configured") };
            let hops =
                replicas.iter().map(|replica| datacenter_of(replica).and_then(|datacenter| as_paths.hops_from(datacenter.asn?))).collect();
            Policy::ShortestAsPath { hops, fallback: fallback()? }
        }
        PolicyKind::Nearest => {
            if sources.geo.is_none() {
                return fail(field, "needs a MaxMind City database ([geo] database); none is configured");
            }
            let places = replicas
                .iter()
                .map(|replica| {
                    datacenter_of(replica)
                        .map(|datacenter| Point::new(Coordinates { latitude: datacenter.latitude, longitude: datacenter.longitude }))
                })
                .collect();
            Policy::Nearest { places, fallback: fallback()? }
        }
    })
}

/// The probability table, rows indexed like `replicas`. Replicas missing
/// from a row get probability 0; a missing default row gives every
/// replica an equal share.
fn build_table(
    spec: &ServiceSpec,
    field: &str,
    replicas: &[Replica],
    region_ids: &HashMap<String, RegionId>,
) -> Result<ProbabilityTable, SpecError> {
    let equal = RegionRow { probability: 1.0, ttl: spec.ttl };
    let mut table = ProbabilityTable { default: vec![equal; replicas.len()], regions: Default::default() };
    for (table_name, entries) in &spec.probabilities {
        let table_field = format!("{field}.probabilities[{table_name}]");
        let mut rows = vec![RegionRow { probability: 0.0, ttl: spec.ttl }; replicas.len()];
        for (replica_id, entry) in entries {
            let entry_field = format!("{table_field}[{replica_id}]");
            let index = replicas
                .iter()
                .position(|replica| replica.id == *replica_id)
                .ok_or_else(|| SpecError { field: entry_field.clone(), message: format!("no replica {replica_id:?} in this service") })?;
            if !entry.probability.is_finite() || entry.probability < 0.0 {
                return fail(format!("{entry_field}.probability"), format!("{} is not a probability (0 or more)", entry.probability));
            }
            rows[index] = RegionRow { probability: entry.probability, ttl: entry.ttl };
        }
        if rows.iter().map(|row| row.probability).sum::<f64>() <= 0.0 {
            return fail(table_field, "the probabilities add up to 0, so they cannot be normalized");
        }
        if table_name == "default" {
            table.default = rows;
        } else {
            let region = region_ids.get(table_name).ok_or_else(|| SpecError {
                field: table_field.clone(),
                message: format!("no region named {table_name:?} (declare it, or use \"default\")"),
            })?;
            table.regions.insert(*region, rows);
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::services::build_routes;
    use pharos_model::probabilities::ProbabilitySpec;
    use pharos_model::spec::{Declared, NotADomainName};

    fn wire(name: &str) -> Result<Box<[u8]>, NotADomainName> {
        Ok(name.as_bytes().into())
    }

    fn service(policy: &str) -> ServiceSpec {
        let replica = |id: &str, address: &str| ReplicaSpec::new(id, address.parse().unwrap());
        ServiceSpec { ttl: 300, ..ServiceSpec::new("www.example.test", policy, vec![replica("a", "192.0.2.1"), replica("b", "192.0.2.2")]) }
    }

    fn region(id: RegionId, name: &str, prefixes: &[&str]) -> RegionSpec {
        RegionSpec { id, name: name.into(), prefixes: prefixes.iter().map(|prefix| prefix.to_string()).collect(), ..RegionSpec::default() }
    }

    fn error(regions: &[RegionSpec], services: &[ServiceSpec]) -> String {
        let services: Vec<Arc<ServiceSpec>> = services.iter().cloned().map(Arc::new).collect();
        build_routes(&Declared { regions, services: &services, ..Declared::default() }, &DataSources::default(), wire)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn builds_a_region_probability_service() {
        let mut spec = service("region-probabilities");
        spec.probabilities.insert("eu".into(), BTreeMap::from([("b".into(), ProbabilitySpec { probability: 1.0, ttl: 30 })]));
        let declared = Declared { regions: &[region(1, "eu", &["192.0.2.0/24"])], services: &[Arc::new(spec)], ..Declared::default() };
        let routes = build_routes(&declared, &DataSources::default(), wire).unwrap();
        let Policy::RegionProbabilities(table) = &routes.services[&b"www.example.test"[..]].policy else { panic!() };
        assert_eq!(table.regions[&1], [RegionRow { probability: 0.0, ttl: 300 }, RegionRow { probability: 1.0, ttl: 30 }]);
        assert_eq!(table.default.len(), 2);
    }

    #[test]
    fn every_bad_field_is_named() {
        let mut unknown_replica = service("region-probabilities");
        unknown_replica
            .probabilities
            .insert("default".into(), BTreeMap::from([("zz".into(), ProbabilitySpec { probability: 1.0, ttl: 1 })]));
        assert_eq!(
            error(&[], &[unknown_replica]),
            "service[www.example.test].probabilities[default][zz]: no replica \"zz\" in this service"
        );
        let mut negative = service("region-probabilities");
        negative.probabilities.insert("default".into(), BTreeMap::from([("a".into(), ProbabilitySpec { probability: -1.0, ttl: 1 })]));
        assert!(error(&[], &[negative]).contains("[a].probability: -1 is not a probability"));
        let mut zero = service("region-probabilities");
        zero.probabilities.insert("default".into(), BTreeMap::from([("a".into(), ProbabilitySpec { probability: 0.0, ttl: 1 })]));
        assert!(error(&[], &[zero]).contains("cannot be normalized"));
        let mut unknown_region = service("region-probabilities");
        unknown_region.probabilities.insert("mars".into(), BTreeMap::from([("a".into(), ProbabilitySpec { probability: 1.0, ttl: 1 })]));
        assert!(error(&[], &[unknown_region]).contains("no region named \"mars\""));
        assert!(error(&[], &[service("fastest")]).contains(".policy: unknown policy \"fastest\""));
        assert!(error(&[region(0, "x", &[])], &[]).contains("region[x].id: 0 is reserved"));
        assert!(error(&[region(1, "x", &["192.0.2.1/24"])], &[]).contains("region[x].prefixes[0]: 192.0.2.1/24 has bits set past /24"));
        assert!(
            error(&[region(1, "x", &["10.0.0.0/8"]), region(2, "y", &["10.0.0.0/8"])], &[]).contains("already belongs to region \"x\"")
        );
        assert!(error(&[], &[service("static"), service("static")]).contains("declared twice"));
        let by_country = RegionSpec { countries: vec!["DE".into()], ..region(1, "de", &[]) };
        assert_eq!(error(&[by_country], &[]), "region[de].countries[0]: needs a [geo] database to look clients up in; none is configured");
        let mut empty = service("static");
        empty.replicas.clear();
        assert!(error(&[], &[empty]).contains("at least one replica"));
        let mut placed = service("static");
        placed.replicas[0].datacenter = Some("fra".into());
        assert_eq!(error(&[], &[placed]), "service[www.example.test].replica[a].datacenter: no data center \"fra\" is declared");
        let mut redirected = service("static");
        redirected.replicas[0].redirect_host = Some("fra.cdn.example/x".into());
        assert!(error(&[], &[redirected]).starts_with("service[www.example.test].replica[a].redirect_host: \"fra.cdn.example/x\" is not"));
        let mut delegated = service("static");
        delegated.replicas[0].delegate = Some(format!("{}.test", "x".repeat(64)));
        assert!(error(&[], &[delegated.clone()]).starts_with("service[www.example.test].replica[a].delegate: "), "a label over 63 octets");
        delegated.replicas[0].delegate = Some("svc.eu.example.test".into());
        assert_eq!(
            error(&[], &[delegated.clone()]),
            format!(
                "service[www.example.test].replica[{}].delegate: a service's replicas all delegate (tier-2 redirectors), or none",
                delegated.replicas[1].id
            )
        );
        let far = DataCenterSpec { id: "x".into(), latitude: 91.0, longitude: 0.0, asn: None };
        let declared = Declared { datacenters: &[far], ..Declared::default() };
        assert_eq!(build_routes(&declared, &DataSources::default(), wire).unwrap_err().field, "datacenter[x].latitude");
    }
}
