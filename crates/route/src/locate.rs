//! Who is asking: the client's address (from EDNS Client Subnet or the
//! packet) and the region it falls in (MyXDNS's Find_IP_Region).

use std::net::IpAddr;

use std::collections::HashMap;
use std::sync::Arc;

use crate::explain::{Explanation, note};
use crate::external::ExternalRegions;
use crate::prefix::{Bits, PrefixMap};
use crate::sources::{AsnTable, GeoDatabase};
use crate::{RegionId, UNCLASSIFIED};

/// The client as the mechanism saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asker {
    /// The ECS address if the query carried a trusted one, else the source.
    pub address: IpAddr,
    /// How many leading bits of `address` are real: the ECS source prefix,
    /// or the full width for a source address.
    pub known_bits: u8,
    /// Whether `address` came from EDNS Client Subnet.
    pub from_client_subnet: bool,
}

impl Asker {
    /// A client known by its own address (no ECS).
    pub fn from_source(address: IpAddr) -> Asker {
        let known_bits = if address.is_ipv4() { 32 } else { 128 };
        Asker { address, known_bits, from_client_subnet: false }
    }
}

/// Where the client was placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub region: RegionId,
    /// Leading address bits the placement depended on (RFC 7871 scope).
    pub scope: u8,
    /// Who was placed, for policies that look further than the region.
    pub client: Asker,
}

#[cfg(test)]
/// A client at 192.0.2.1 placed in `region` by a /24.
pub(crate) fn located(region: RegionId) -> Location {
    Location { region, scope: 24, client: Asker::from_source(std::net::Ipv4Addr::new(192, 0, 2, 1).into()) }
}

/// Which rule placed a client in its region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionRule {
    Prefix { network: IpAddr, length: u8 },
}

/// The region definitions, tried in this order: CIDR lists (longest prefix
/// wins), AS numbers (through the IP-to-AS table), countries, continents
/// (through the MaxMind DB).
#[derive(Debug, Clone, Default)]
pub struct Regions {
    by_prefix: PrefixMap<(RegionId, RegionRule)>,
    pub by_asn: HashMap<u32, RegionId>,
    pub by_country: HashMap<[u8; 2], RegionId>,
    pub by_continent: HashMap<[u8; 2], RegionId>,
    pub asn_table: Option<Arc<AsnTable>>,
    pub geo: Option<Arc<GeoDatabase>>,
    /// Asked last, when no rule above places the client.
    pub external: Option<Arc<ExternalRegions>>,
}

impl Regions {
    /// Assigns `network/length` to `region`; returns the region it had.
    pub fn add_prefix(&mut self, network: IpAddr, length: u8, region: RegionId) -> Option<RegionId> {
        let rule = RegionRule::Prefix { network, length };
        self.by_prefix.insert(network, length, (region, rule)).map(|(old, _)| old)
    }
}

/// Places `asker` in a region. A client no rule claims is in region 0.
pub fn locate(asker: &Asker, regions: &Regions, mut explanation: Option<&mut Explanation>) -> Location {
    let source = if asker.from_client_subnet { "EDNS Client Subnet" } else { "packet source" };
    note(&mut explanation, || format!("client {}/{} (from the {source})", asker.address, asker.known_bits));
    if asker.known_bits == 0 {
        // RFC 7871 section 7.1.2: a /0 subnet says nothing about the client.
        note(&mut explanation, || "region 0 (unclassified): the client subnet is /0; answer scope /0".to_string());
        return Location { region: UNCLASSIFIED, scope: 0, client: *asker };
    }
    let found = regions.by_prefix.lookup_bits(Bits::of(asker.address));
    if let Some(((region, RegionRule::Prefix { network, length }), _)) = found.value {
        note(&mut explanation, || format!("region {region}: matched prefix {network}/{length}; answer scope /{}", found.scope));
        return Location { region: *region, scope: found.scope, client: *asker };
    }
    // Every source consulted shapes the answer: the scope is the most
    // specific of them.
    let mut scope = found.scope;
    if let Some(table) = regions.asn_table.as_ref().filter(|_| !regions.by_asn.is_empty()) {
        let (origin, asn_scope) = table.lookup(asker.address);
        scope = scope.max(asn_scope);
        if let Some((asn, length)) = origin {
            if let Some(&region) = regions.by_asn.get(&asn) {
                note(&mut explanation, || format!("region {region}: origin AS{asn} (table prefix /{length}); answer scope /{scope}"));
                return Location { region, scope, client: *asker };
            }
            note(&mut explanation, || format!("origin AS{asn} belongs to no region"));
        }
    }
    if let Some(geo) = regions.geo.as_ref().filter(|_| !regions.by_country.is_empty() || !regions.by_continent.is_empty()) {
        let (place, geo_scope) = geo.lookup(asker.address);
        scope = scope.max(geo_scope);
        let place = place.unwrap_or(crate::sources::GeoPlace { country: None, continent: None });
        let show = |code: Option<[u8; 2]>| code.map_or("unknown".to_string(), |code| String::from_utf8_lossy(&code).into_owned());
        if let Some(&region) = place.country.and_then(|country| regions.by_country.get(&country)) {
            note(&mut explanation, || {
                format!("region {region}: country {} (MaxMind DB prefix /{geo_scope}); answer scope /{scope}", show(place.country))
            });
            return Location { region, scope, client: *asker };
        }
        if let Some(&region) = place.continent.and_then(|continent| regions.by_continent.get(&continent)) {
            note(&mut explanation, || {
                format!("region {region}: continent {} (MaxMind DB prefix /{geo_scope}); answer scope /{scope}", show(place.continent))
            });
            return Location { region, scope, client: *asker };
        }
        note(&mut explanation, || format!("country {} / continent {} belong to no region", show(place.country), show(place.continent)));
    }
    if let Some(external) = &regions.external {
        scope = scope.max(external.scope_for(asker.address));
        match external.lookup(asker.address) {
            Some(region) => {
                note(&mut explanation, || format!("region {region}: from the external classifier; answer scope /{scope}"));
                return Location { region, scope, client: *asker };
            }
            None => note(&mut explanation, || "the external classifier has not answered for this subnet (yet): unclassified".to_string()),
        }
    }
    note(&mut explanation, || format!("region 0 (unclassified): no region rule matches; answer scope /{scope}"));
    Location { region: UNCLASSIFIED, scope, client: *asker }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_places_the_client_and_unmatched_is_region_zero() {
        let mut regions = Regions::default();
        regions.add_prefix("198.51.100.0".parse().unwrap(), 24, 1);
        regions.add_prefix("198.51.100.128".parse().unwrap(), 25, 2);
        regions.add_prefix("2001:db8::".parse().unwrap(), 32, 3);
        let at = |text: &str| locate(&Asker::from_source(text.parse().unwrap()), &regions, None);
        assert_eq!((at("198.51.100.7").region, at("198.51.100.7").scope), (1, 25));
        assert_eq!((at("198.51.100.200").region, at("198.51.100.200").scope), (2, 25));
        assert_eq!(at("2001:db8:1::1").region, 3);
        assert_eq!(at("203.0.113.1").region, UNCLASSIFIED);
    }

    #[test]
    fn explains_the_placement() {
        let mut regions = Regions::default();
        regions.add_prefix("10.0.0.0".parse().unwrap(), 8, 4);
        let mut explanation = Explanation::default();
        let asker = Asker { address: "10.1.2.0".parse().unwrap(), known_bits: 24, from_client_subnet: true };
        locate(&asker, &regions, Some(&mut explanation));
        assert_eq!(
            explanation.steps,
            ["client 10.1.2.0/24 (from the EDNS Client Subnet)", "region 4: matched prefix 10.0.0.0/8; answer scope /8"]
        );
    }
}
