//! A synthetic, Internet-sized RIB dump, seeded and deterministic, to
//! measure the loader and the tables at full size without shipping a real
//! 100 MB dump.
//!
//! The model: a tiered AS topology grown by preferential attachment
//! (`topology`), address blocks and prefixes per AS (`prefixes`), and
//! the valley-free shortest routes a handful of collector peers in the
//! backbone would see (`paths`). On top come the oddities of real tables,
//! in about their real proportions: origins that prepend their AS, a few
//! aggregates ending in an AS_SET, and prefixes whose origin half the
//! peers see differently (MOAS). It is written as MRT TABLE_DUMP_V2 by
//! [`RibWriter`], so loading it exercises the real reader. The `bgp-synth`
//! command writes one to a file for `bench/bgp-load`; pharos-bgp's tests
//! load small ones. It lives here, not in pharos-bgp, so the router does
//! not link it.

mod paths;
mod prefixes;
mod rng;
mod topology;
mod writer;

use std::fmt;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};

use bgpkit_parser::models::{AsPath, AsPathSegment};

pub use writer::RibWriter;

use paths::RoutesFrom;
use prefixes::{Announcement, IPV4, IPV6};
use rng::Rng;
use topology::Topology;

/// The size and seed of a synthetic table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The random seed: the same seed, the same bytes.
    pub seed: u64,
    /// ASes in the topology, 100 to 250,000.
    pub ases: usize,
    /// About this many IPv4 prefixes; at least one per AS.
    pub prefixes_v4: usize,
    /// About this many IPv6 prefixes; at least one per two ASes.
    pub prefixes_v6: usize,
    /// Collector peers, each with a full table; 1 to 16.
    pub peers: usize,
}

impl Config {
    /// Today's Internet, roughly: 75,000 ASes, a million IPv4 prefixes and
    /// 200,000 IPv6 ones, seen by 8 peers (4 Tier-1, 4 large transit).
    pub fn internet(seed: u64) -> Config {
        Config { seed, ases: 75_000, prefixes_v4: 1_000_000, prefixes_v6: 200_000, peers: 8 }
    }

    fn check(&self) -> io::Result<()> {
        let problem = if !(100..=250_000).contains(&self.ases) {
            "ases must be 100 to 250,000"
        } else if self.prefixes_v4 < self.ases || self.prefixes_v6 < self.ases / 2 {
            "need an IPv4 prefix per AS and an IPv6 prefix per two ASes"
        } else if !(1..=16).contains(&self.peers) {
            "peers must be 1 to 16"
        } else {
            return Ok(());
        };
        Err(io::Error::new(io::ErrorKind::InvalidInput, problem))
    }
}

/// What was generated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// ASes in the topology.
    pub ases: usize,
    /// Links in the generated topology (the dump shows only those on some path).
    pub links: usize,
    /// ASes per tier; the rest are stubs.
    pub tier1: usize,
    pub large_transit: usize,
    pub small_transit: usize,
    /// Median number of links per AS.
    pub median_degree: usize,
    /// Largest number of links of one AS.
    pub max_degree: usize,
    /// Distinct prefixes written, per family.
    pub prefixes_v4: usize,
    pub prefixes_v6: usize,
    /// Routes written: prefixes times peers.
    pub routes: u64,
    /// Mean ASes per AS path, prepending not counted.
    pub mean_path_length: f64,
    /// Routes whose AS path ends in an AS_SET.
    pub as_set_routes: u64,
    /// Prefixes whose origin some peers see differently.
    pub moas_prefixes: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "ASes {} (Tier-1 {}, large transit {}, small transit {}), links {}, degree median {} max {}",
            self.ases, self.tier1, self.large_transit, self.small_transit, self.links, self.median_degree, self.max_degree
        )?;
        write!(
            f,
            "prefixes {} IPv4 + {} IPv6, routes {}, mean AS path length {:.2}, AS_SET routes {}, MOAS prefixes {}",
            self.prefixes_v4, self.prefixes_v6, self.routes, self.mean_path_length, self.as_set_routes, self.moas_prefixes
        )
    }
}

/// The dump's timestamp: 2024-01-01 00:00 UTC.
const TIMESTAMP: u32 = 1_704_067_200;

/// Writes the table `config` describes to `out` as an MRT TABLE_DUMP_V2
/// RIB dump. The same config always writes the same bytes.
pub fn write(config: &Config, out: impl Write) -> io::Result<Summary> {
    config.check()?;
    let mut rng = Rng::new(config.seed);
    let topology = Topology::grow(config.ases, &mut rng);
    let vantages = vantage_points(&topology, config.peers, &mut rng);
    let v4 = IPV4.allocate(&topology, config.prefixes_v4, &mut rng);
    let v6 = IPV6.allocate(&topology, config.prefixes_v6, &mut rng);
    let mut table = Table::new(&topology, &vantages, &mut rng);
    let peers: Vec<(IpAddr, u32)> =
        (0..vantages.len()).map(|index| (collector_peer_address(index), topology.asns[vantages[index]])).collect();
    let mut writer = RibWriter::new(out, TIMESTAMP, &peers)?;
    for announcement in v4.iter().chain(&v6) {
        let routes = table.routes(announcement, &mut rng);
        writer.write_prefix(announcement.prefix, &routes)?;
    }
    writer.finish()?;
    Ok(table.into_summary(v4.len(), v6.len()))
}

/// Collector peers, alternately Tier-1 and large transit, as at RouteViews.
fn vantage_points(topology: &Topology, peers: usize, rng: &mut Rng) -> Vec<usize> {
    let tiers = &topology.tiers;
    let mut chosen = Vec::with_capacity(peers);
    while chosen.len() < peers {
        let pool = if chosen.len() % 2 == 0 { &tiers.tier1 } else { &tiers.large_transit };
        let candidate = pool.start + rng.below(pool.len());
        if !chosen.contains(&candidate) {
            chosen.push(candidate);
        }
    }
    chosen
}

fn collector_peer_address(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, index as u8 + 1))
}

/// Share of ASes that prepend their own AS, of prefixes that are
/// aggregates ending in an AS_SET, and of prefixes with two origins.
const PREPENDING_ASES: f64 = 0.10;
const AS_SET_PREFIXES: f64 = 0.0005;
const MOAS_PREFIXES: f64 = 0.003;

/// Turns announcements into each peer's routes, keeping count.
struct Table<'t> {
    topology: &'t Topology,
    routes_from: Vec<RoutesFrom>,
    /// Extra copies of its own AS each AS prepends.
    prepends: Vec<u8>,
    path: Vec<u32>,
    summary: Summary,
    path_lengths: u64,
}

impl<'t> Table<'t> {
    fn new(topology: &'t Topology, vantages: &[usize], rng: &mut Rng) -> Table<'t> {
        let prepends = (0..topology.len()).map(|_| if rng.chance(PREPENDING_ASES) { 1 + rng.below(3) as u8 } else { 0 }).collect();
        let routes_from = vantages.iter().map(|&vantage| RoutesFrom::new(topology, vantage)).collect();
        Table { topology, routes_from, prepends, path: Vec::new(), summary: Summary::default(), path_lengths: 0 }
    }

    /// Every peer's route to `announcement`. For a MOAS prefix the odd
    /// peers see one of the origin's providers originate it instead; a
    /// single peer sees no MOAS prefixes.
    fn routes(&mut self, announcement: &Announcement, rng: &mut Rng) -> Vec<(u16, AsPath)> {
        let origin = announcement.origin as usize;
        let providers = &self.topology.providers[origin];
        let moas = self.routes_from.len() > 1 && !providers.is_empty() && rng.chance(MOAS_PREFIXES);
        let second_origin = moas.then(|| rng.pick(providers) as usize);
        let aggregate = rng.chance(AS_SET_PREFIXES);
        self.summary.moas_prefixes += u64::from(second_origin.is_some());
        (0..self.routes_from.len())
            .map(|peer| {
                let origin = second_origin.filter(|_| peer % 2 == 1).unwrap_or(origin);
                (peer as u16, self.path(peer, origin, aggregate, rng))
            })
            .collect()
    }

    /// Peer `peer`'s AS path to `origin`, with the origin's prepending and,
    /// for an aggregate, a trailing AS_SET of two ASes drawn at random (the
    /// loader neither links set members nor takes them as origins).
    fn path(&mut self, peer: usize, origin: usize, aggregate: bool, rng: &mut Rng) -> AsPath {
        self.routes_from[peer].path_to(origin, &mut self.path);
        self.summary.routes += 1;
        self.path_lengths += self.path.len() as u64;
        let asns = &self.topology.asns;
        let mut sequence: Vec<u32> = self.path.iter().map(|&a| asns[a as usize]).collect();
        sequence.extend(std::iter::repeat_n(asns[origin], usize::from(self.prepends[origin])));
        let mut segments = vec![AsPathSegment::sequence(sequence)];
        if aggregate {
            self.summary.as_set_routes += 1;
            let members = [rng.below(asns.len()), rng.below(asns.len())].map(|a| asns[a]);
            segments.push(AsPathSegment::set(members));
        }
        AsPath::from_segments(segments)
    }

    fn into_summary(self, prefixes_v4: usize, prefixes_v6: usize) -> Summary {
        let topology = self.topology;
        let mut degrees: Vec<usize> = (0..topology.len()).map(|a| topology.degree(a)).collect();
        degrees.sort_unstable();
        Summary {
            ases: topology.len(),
            links: topology.link_count(),
            tier1: topology.tiers.tier1.len(),
            large_transit: topology.tiers.large_transit.len(),
            small_transit: topology.tiers.small_transit.len(),
            median_degree: degrees[degrees.len() / 2],
            max_degree: degrees[degrees.len() - 1],
            prefixes_v4,
            prefixes_v6,
            mean_path_length: self.path_lengths as f64 / self.summary.routes.max(1) as f64,
            ..self.summary
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> Config {
        Config { seed, ases: 400, prefixes_v4: 4_000, prefixes_v6: 800, peers: 3 }
    }

    #[test]
    fn the_same_seed_writes_the_same_bytes() {
        let (mut first, mut second, mut other) = (Vec::new(), Vec::new(), Vec::new());
        let summary = write(&small(5), &mut first).unwrap();
        write(&small(5), &mut second).unwrap();
        write(&small(6), &mut other).unwrap();
        assert!(first == second && first != other);
        assert_eq!(summary.routes, 3 * (summary.prefixes_v4 + summary.prefixes_v6) as u64);
        let v4_share = summary.prefixes_v4 as f64 / 4_000.0;
        assert!((0.9..1.1).contains(&v4_share), "{summary}");
    }

    #[test]
    fn bad_configs_are_refused() {
        let mut config = small(1);
        config.peers = 0;
        assert_eq!(write(&config, io::sink()).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        config = Config { prefixes_v4: 10, ..small(1) };
        assert!(write(&config, io::sink()).is_err());
    }
}
