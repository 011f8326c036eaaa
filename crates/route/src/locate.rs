//! Who is asking: the client's address (from EDNS Client Subnet or the
//! packet) and the region it falls in (MyXDNS's Find_IP_Region).

use std::net::IpAddr;

use std::collections::HashMap;
use std::sync::Arc;

use crate::explain::{Explanation, note};
use crate::external::ExternalRegions;
use crate::prefix::{Bits, PrefixMap};
use crate::replica::Family;
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

/// An address block whose every address [`locate`] places in `region`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub network: IpAddr,
    pub length: u8,
    pub region: RegionId,
    /// The scope [`locate`] gives every address of the block (the trie's
    /// walk for them all stops within the block's leading bits).
    pub scope: u8,
}

/// Why the regions cannot be cut into blocks listed in advance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unpartitioned {
    /// Regions come from a source that cannot be enumerated.
    External,
    /// They cut the address space into more blocks than allowed.
    TooManyBlocks(usize),
}

/// Blocks that cover the whole address space of `family` (clients' own
/// addresses, no ECS), each placed in one region, at most `max_blocks` of
/// them. Works down from the whole space: where the block's first address
/// is placed with a scope no longer than the block's length, the scope
/// promises (RFC 7871) that the whole block is placed alike; otherwise the
/// block is split in halves.
pub fn partition(regions: &Regions, family: Family, max_blocks: usize) -> Result<Vec<Block>, Unpartitioned> {
    if regions.external.is_some() {
        return Err(Unpartitioned::External);
    }
    let width: u8 = if family == Family::V4 { 32 } else { 128 };
    let address = |bits: u128| match family {
        Family::V4 => IpAddr::from(std::net::Ipv4Addr::from(bits as u32)),
        Family::V6 => IpAddr::from(std::net::Ipv6Addr::from(bits)),
    };
    let mut blocks = Vec::new();
    // Blocks still to place, as (first address, length), next on top.
    let mut pending: Vec<(u128, u8)> = vec![(0, 0)];
    while let Some((first, length)) = pending.pop() {
        let location = locate(&Asker::from_source(address(first)), regions, None);
        if location.scope <= length || length == width {
            if blocks.len() == max_blocks {
                return Err(Unpartitioned::TooManyBlocks(max_blocks));
            }
            blocks.push(Block { network: address(first), length, region: location.region, scope: location.scope });
        } else {
            let half = 1u128 << (width - length - 1);
            pending.push((first + half, length + 1));
            pending.push((first, length + 1));
        }
    }
    Ok(blocks)
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

    /// Regions by nested prefixes in both families, some unclassified space between.
    fn nested_regions() -> Regions {
        let mut regions = Regions::default();
        for (network, length, region) in [
            ("198.51.100.0", 24, 1),
            ("198.51.100.128", 25, 2),
            ("198.51.100.200", 30, 1),
            ("10.0.0.0", 8, 3),
            ("2001:db8::", 32, 4),
            ("2001:db8:ff00::", 40, 5),
        ] {
            regions.add_prefix(network.parse().unwrap(), length, region);
        }
        regions
    }

    fn bits(address: IpAddr) -> u128 {
        match address {
            IpAddr::V4(v4) => u32::from(v4).into(),
            IpAddr::V6(v6) => v6.into(),
        }
    }

    /// The blocks tile the space in order, and every address gets its
    /// block's region from `locate`: 20,000 seeded random addresses per
    /// family, half of them near the prefixes' edges.
    #[test]
    fn the_partition_places_every_address_as_locate_does() {
        use rand::{Rng, SeedableRng};
        let regions = nested_regions();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(14);
        for (family, width) in [(Family::V4, 32u32), (Family::V6, 128)] {
            let mut blocks = partition(&regions, family, 1 << 16).unwrap();
            blocks.sort_by_key(|block| bits(block.network));
            let size = |block: &Block| 1u128.checked_shl(width - u32::from(block.length)).unwrap_or(0);
            let mut next = 0u128;
            for block in &blocks {
                assert_eq!(bits(block.network), next, "{block:?} follows the previous block");
                next = next.wrapping_add(size(block));
            }
            let end = if width == 128 { 0 } else { 1u128 << width };
            assert_eq!(next, end, "the blocks cover the space");
            assert!(blocks.len() < 200, "{} blocks", blocks.len());
            let edges: Vec<u128> = blocks.iter().map(|block| bits(block.network)).collect();
            for round in 0..20_000 {
                let random = if width == 32 { u128::from(rng.random::<u32>()) } else { rng.random::<u128>() };
                let point =
                    if round % 2 == 0 { random } else { edges[random as usize % edges.len()].wrapping_add(random % 3).wrapping_sub(1) };
                let point = if width == 32 { point & 0xffff_ffff } else { point };
                let address = match family {
                    Family::V4 => IpAddr::from(std::net::Ipv4Addr::from(point as u32)),
                    Family::V6 => IpAddr::from(std::net::Ipv6Addr::from(point)),
                };
                let block = &blocks[blocks.partition_point(|block| bits(block.network) <= point) - 1];
                let location = locate(&Asker::from_source(address), &regions, None);
                assert_eq!((block.region, block.scope), (location.region, location.scope), "{address} in {block:?}");
            }
        }
    }

    #[test]
    fn a_partition_above_its_cap_is_refused() {
        assert_eq!(partition(&nested_regions(), Family::V4, 10), Err(Unpartitioned::TooManyBlocks(10)));
        assert_eq!(partition(&Regions::default(), Family::V6, 1).unwrap().len(), 1, "no region: one block for everyone");
    }
}
