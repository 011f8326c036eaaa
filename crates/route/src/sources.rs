//! Address data that places clients beyond CIDR lists: an IP-to-AS table
//! and a MaxMind DB (country and continent). Both are parsed from bytes
//! the caller read; nothing here opens a file.

use std::net::IpAddr;

use pharos_ranges::{RangeTable, RangeValue, Slash24Index};
use rustc_hash::FxHashMap;

use crate::geo::{Coordinates, Point};
use crate::prefix::{Bits, PrefixError};

/// Longest-prefix IP-to-AS table, flattened into address ranges as
/// pharos-bgp's table is: a full ip2asn file is half a million ranges,
/// which a bit trie holds in millions of nodes.
#[derive(Debug, Clone)]
pub struct AsnTable {
    v4: RangeTable<u32, MatchedAsn>,
    v6: RangeTable<u128, MatchedAsn>,
    pub prefixes: usize,
}

/// A range's answer: the origin AS and the length of the prefix it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MatchedAsn(Option<(u32, u8)>);

impl RangeValue for MatchedAsn {
    const NONE: Self = MatchedAsn(None);
    fn least_scope(&self) -> u8 {
        self.0.map_or(0, |(_, length)| length)
    }
    fn compact(&self) -> Option<u32> {
        None
    }
}

/// The prefixes of an [`AsnTable`] as read, before they are flattened.
#[derive(Default)]
struct AsnPrefixes {
    v4: Vec<(u32, u8, MatchedAsn)>,
    v6: Vec<(u128, u8, MatchedAsn)>,
}

impl AsnPrefixes {
    fn add(&mut self, network: IpAddr, length: u8, asn: u32) {
        let matched = MatchedAsn(Some((asn, length)));
        match network {
            IpAddr::V4(v4) => self.v4.push((u32::from(v4), length, matched)),
            IpAddr::V6(v6) => self.v6.push((u128::from(v6), length, matched)),
        }
    }

    fn add_line(&mut self, line: &str) -> Result<(), AsnLineProblem> {
        use AsnLineProblem::*;
        if let Some((first, rest)) = line.split_once(',') {
            let mut fields = rest.splitn(3, ',');
            let last = fields.next().ok_or(NoRangeEnd)?;
            let asn = fields.next().ok_or(NoAsn)?.trim().parse::<u32>().map_err(|_| BadAsn)?;
            let first: IpAddr = first.trim().parse().map_err(|_| BadRangeStart)?;
            let last: IpAddr = last.trim().parse().map_err(|_| BadRangeEnd)?;
            for (network, length) in range_to_prefixes(first, last).ok_or(BadRange)? {
                self.add(network, length, asn);
            }
            return Ok(());
        }
        let mut fields = line.split_whitespace();
        let (network, length) = crate::prefix::parse_prefix(fields.next().ok_or(Empty)?)?;
        let asn = fields.next().ok_or(NoAsn)?.parse::<u32>().map_err(|_| BadAsn)?;
        self.add(network, length, asn);
        Ok(())
    }

    fn into_table(mut self) -> AsnTable {
        let prefixes = self.v4.len() + self.v6.len();
        // A stable sort: of two lines with the same prefix, the later wins.
        self.v4.sort_by_key(|&(start, length, _)| (start, length));
        self.v6.sort_by_key(|&(start, length, _)| (start, length));
        AsnTable { v4: RangeTable::build(self.v4), v6: RangeTable::build(self.v6), prefixes }
    }
}

impl AsnTable {
    /// Reads either IP-to-AS format (ip-location-db CSV, pyasn), line by line:
    /// ranges `first,last,asn[,org]` (ip-location-db), or prefixes
    /// `network/length<TAB>asn` (pyasn); `;` and `#` start comments.
    /// A bad line is reported with its number.
    pub fn parse(text: &str) -> Result<AsnTable, AsnTableError> {
        let mut prefixes = AsnPrefixes::default();
        for (number, line) in (1..).zip(text.lines()) {
            let line = line.trim();
            if line.is_empty() || line.starts_with([';', '#']) {
                continue;
            }
            prefixes.add_line(line).map_err(|problem| AsnTableError { number, line: line.into(), problem })?;
        }
        Ok(prefixes.into_table())
    }

    /// The origin AS of `address`, the prefix it came from, and the scope
    /// (leading bits the answer depends on).
    pub fn lookup(&self, address: IpAddr) -> (Option<(u32, u8)>, u8) {
        let (MatchedAsn(found), scope) = match address {
            IpAddr::V4(v4) => self.v4.lookup(u32::from(v4)),
            IpAddr::V6(v6) => self.v6.lookup(u128::from(v6)),
        };
        (found, scope)
    }
}

/// A line of an IP-to-AS table that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {number}: {problem}: {line:?}")]
pub struct AsnTableError {
    pub number: usize,
    pub line: String,
    pub problem: AsnLineProblem,
}

/// What is wrong with a line of an IP-to-AS table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AsnLineProblem {
    #[error("empty")]
    Empty,
    #[error("no range end")]
    NoRangeEnd,
    #[error("no AS number")]
    NoAsn,
    #[error("bad AS number")]
    BadAsn,
    #[error("bad range start")]
    BadRangeStart,
    #[error("bad range end")]
    BadRangeEnd,
    #[error("range ends before it starts, or mixes families")]
    BadRange,
    #[error(transparent)]
    Prefix(#[from] PrefixError),
}

/// Splits an inclusive address range into the fewest CIDR prefixes; none
/// if it ends before it starts, or mixes families.
fn range_to_prefixes(first: IpAddr, last: IpAddr) -> Option<Vec<(IpAddr, u8)>> {
    let (start, end) = (Bits::of(first), Bits::of(last));
    if start.width != end.width || start.value > end.value {
        return None;
    }
    let shift = 128 - start.width as u32;
    let (mut low, high) = (start.value >> shift, end.value >> shift);
    let mut prefixes = Vec::new();
    loop {
        // The largest aligned block starting at `low` that stays within `high`.
        let mut size_bits = if low == 0 { start.width as u32 } else { low.trailing_zeros().min(start.width as u32) };
        while size_bits > 0 && (size_bits >= 128 || low + ((1u128 << size_bits) - 1) > high) {
            size_bits -= 1;
        }
        let network = if start.width == 32 { IpAddr::from((low as u32).to_be_bytes()) } else { IpAddr::from(low.to_be_bytes()) };
        prefixes.push((network, start.width - size_bits as u8));
        let block_end = low + if size_bits >= 128 { u128::MAX } else { (1u128 << size_bits) - 1 };
        if block_end >= high {
            return Some(prefixes);
        }
        low = block_end + 1;
    }
}

/// A MaxMind DB (GeoIP2/GeoLite2 Country or City, or DB-IP), in memory.
pub struct GeoDatabase {
    reader: maxminddb::Reader<Vec<u8>>,
    /// City databases' IPv4 networks flattened, for the nearest policy.
    places_v4: Option<PlaceTable>,
}

impl std::fmt::Debug for GeoDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GeoDatabase({})", self.reader.metadata().database_type)
    }
}

/// Where a MaxMind DB places an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeoPlace {
    /// ISO 3166-1 alpha-2, upper case.
    pub country: Option<[u8; 2]>,
    /// Two-letter continent code (AF AN AS EU NA OC SA).
    pub continent: Option<[u8; 2]>,
}

/// Why bytes are not a MaxMind DB Pharos can use.
#[derive(Debug, thiserror::Error)]
pub enum GeoDatabaseError {
    #[error("not a MaxMind DB: {0}")]
    NotMaxMind(maxminddb::MaxMindDbError),
    #[error("cannot read the City database's networks: {0}")]
    Networks(maxminddb::MaxMindDbError),
}

impl GeoDatabase {
    /// Reads a database; a City database's IPv4 networks are indexed too,
    /// which takes about a second for a full one (DB-IP City Lite).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GeoDatabase, GeoDatabaseError> {
        let reader = maxminddb::Reader::from_source(bytes).map_err(GeoDatabaseError::NotMaxMind)?;
        let places_v4 = match reader.metadata().database_type.contains("City") {
            true => Some(PlaceTable::index_v4(&reader).map_err(GeoDatabaseError::Networks)?),
            false => None,
        };
        Ok(GeoDatabase { reader, places_v4 })
    }

    /// IPv4 ranges and distinct places in the nearest policy's index, if
    /// this is a City database.
    pub fn place_index_size(&self) -> Option<(usize, usize)> {
        self.places_v4.as_ref().map(|table| (table.ranges.range_count(), table.points.len()))
    }

    /// When the database was built (Unix seconds), as its metadata says.
    pub fn built_at(&self) -> u64 {
        self.reader.metadata().build_epoch
    }

    pub fn has_place_index(&self) -> bool {
        self.places_v4.is_some()
    }

    /// The place of `address` and the prefix length the database answered
    /// for (every address in that prefix gets the same place).
    pub fn lookup(&self, address: IpAddr) -> (Option<GeoPlace>, u8) {
        let Ok(result) = self.reader.lookup(address) else { return (None, full_width(address)) };
        let scope = result.network().map_or(full_width(address), |network| network.prefix());
        let place = result.decode::<maxminddb::geoip2::Country>().ok().flatten().map(|record| GeoPlace {
            country: record.country.iso_code.and_then(two_letters),
            continent: record.continent.code.and_then(two_letters),
        });
        (place, scope)
    }
}

/// Just the coordinates of a City database record: decoding only these
/// skips the names in many languages that a full record carries.
#[derive(serde::Deserialize)]
struct PointRecord {
    #[serde(default)]
    location: PointLocation,
}

#[derive(Default, serde::Deserialize)]
struct PointLocation {
    latitude: Option<f64>,
    longitude: Option<f64>,
}

impl PointRecord {
    fn coordinates(self) -> Option<Coordinates> {
        let PointLocation { latitude, longitude } = self.location;
        Some(Coordinates { latitude: latitude?, longitude: longitude? })
    }
}

impl GeoDatabase {
    /// Where `address` is (City databases only), and the leading bits of
    /// the address that answer depends on.
    pub fn point(&self, address: IpAddr) -> (Option<Point>, u8) {
        match (address, &self.places_v4) {
            (IpAddr::V4(v4), Some(table)) => table.lookup(u32::from(v4)),
            _ => self.point_from_tree(address),
        }
    }

    /// Starts fetching what [`point`](Self::point) will read first for
    /// `address`.
    pub fn prefetch(&self, address: IpAddr) {
        if let (IpAddr::V4(v4), Some(table)) = (address, &self.places_v4) {
            table.by_slash24.prefetch(u32::from(v4));
        }
    }

    /// [`point`](Self::point) by walking the database's search tree and
    /// decoding the record: the scope is the database's network.
    fn point_from_tree(&self, address: IpAddr) -> (Option<Point>, u8) {
        let Ok(result) = self.reader.lookup(address) else { return (None, full_width(address)) };
        let scope = result.network().map_or(full_width(address), |network| network.prefix());
        let point = result.decode::<PointRecord>().ok().flatten().and_then(PointRecord::coordinates).map(Point::new);
        (point, scope)
    }
}

/// A City database's IPv4 networks as address ranges, each naming one of
/// the distinct places the database holds.
///
/// Walking the database's tree (24-32 nodes spread over 100 MB) and
/// decoding a record took 0.7 us of a nearest decision inside the server,
/// where the kernel's UDP path evicts the tree from cache between queries
/// (bench/RESULTS.md, "bench/proximity"). A range lookup touches a few
/// cache lines, and the /24 index one. Adjacent networks at the same place
/// merge, so DB-IP City Lite's 6.0 million IPv4 networks become 3.3 million
/// ranges (26 MB) and 0.39 million places (15 MB), with 64 MiB of /24
/// index. IPv6 (another 5.6 million networks, 16-byte starts) keeps walking
/// the tree.
struct PlaceTable {
    ranges: RangeTable<u32, PlaceIndex>,
    /// The ranges' places by /24, where a /24 has one.
    by_slash24: Slash24Index,
    points: Vec<Point>,
}

/// An index into [`PlaceTable::points`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct PlaceIndex(u32);

impl RangeValue for PlaceIndex {
    const NONE: Self = PlaceIndex(u32::MAX);
    fn least_scope(&self) -> u8 {
        0
    }
    fn compact(&self) -> Option<u32> {
        (*self != PlaceIndex::NONE).then_some(self.0)
    }
}

impl PlaceTable {
    fn index_v4(reader: &maxminddb::Reader<Vec<u8>>) -> Result<PlaceTable, maxminddb::MaxMindDbError> {
        let mut points = Vec::new();
        let mut by_record: FxHashMap<usize, PlaceIndex> = FxHashMap::default();
        let mut networks = Vec::new();
        let all_v4 = ipnetwork::IpNetwork::V4(ipnetwork::Ipv4Network::new(std::net::Ipv4Addr::UNSPECIFIED, 0).expect("/0 is a prefix"));
        for found in reader.within(all_v4, Default::default())? {
            let found = found?;
            let ipnetwork::IpNetwork::V4(network) = found.network()? else { continue };
            let record = found.offset().expect("networks with data have a record");
            let place = match by_record.get(&record) {
                Some(&place) => place,
                None => {
                    let point = found.decode::<PointRecord>()?.and_then(PointRecord::coordinates).map(Point::new);
                    let place = point.map_or(PlaceIndex::NONE, |point| {
                        points.push(point);
                        PlaceIndex(points.len() as u32 - 1)
                    });
                    *by_record.entry(record).or_insert(place)
                }
            };
            networks.push((u32::from(network.network()), network.prefix(), place));
        }
        networks.sort_unstable_by_key(|&(start, length, _)| (start, length));
        let ranges = RangeTable::build(networks);
        Ok(PlaceTable { by_slash24: ranges.slash24_index(), ranges, points })
    }

    fn lookup(&self, address: u32) -> (Option<Point>, u8) {
        let (place, scope) = match self.by_slash24.lookup(address) {
            Some((place, scope)) => (PlaceIndex(place), scope),
            None => self.ranges.lookup(address),
        };
        (self.points.get(place.0 as usize).copied(), scope)
    }
}

fn two_letters(code: &str) -> Option<[u8; 2]> {
    let bytes = code.as_bytes();
    (bytes.len() == 2).then(|| [bytes[0].to_ascii_uppercase(), bytes[1].to_ascii_uppercase()])
}

fn full_width(address: IpAddr) -> u8 {
    if address.is_ipv4() { 32 } else { 128 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// The flattened IPv4 index answers every address as the database's
    /// own tree does, with a scope no longer than the tree's network and
    /// within which every address gets the same place.
    #[test]
    fn the_place_index_agrees_with_the_database_tree() {
        let path = pharos_test_data::fixture("maxmind-test-GeoIP2-City-Test.mmdb");
        let city = GeoDatabase::from_bytes(std::fs::read(path).unwrap()).unwrap();
        let (ranges, places) = city.place_index_size().expect("a City database is indexed");
        assert!(ranges > 10 && places > 5, "{ranges} ranges, {places} places");
        let all_v4 = ipnetwork::IpNetwork::V4(ipnetwork::Ipv4Network::new(std::net::Ipv4Addr::UNSPECIFIED, 0).unwrap());
        let edges: Vec<u32> = (city.reader.within(all_v4, Default::default()).unwrap())
            .filter_map(|found| match found.unwrap().network().unwrap() {
                ipnetwork::IpNetwork::V4(network) => Some([u32::from(network.network()), u32::from(network.broadcast())]),
                ipnetwork::IpNetwork::V6(_) => None,
            })
            .flatten()
            .collect();
        let mut state = 0x853C_49E6_748F_EA9Bu64;
        let mut located = 0;
        for turn in 0..20_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let bits = (state >> 32) as u32;
            // The database's network edges, their neighbours, and anywhere.
            let address = match turn % 3 {
                0 => edges[turn / 3 % edges.len()],
                1 => edges[turn / 3 % edges.len()].wrapping_add(if bits & 1 == 0 { 1 } else { u32::MAX }),
                _ => bits,
            };
            let address = IpAddr::from(address.to_be_bytes());
            let ((indexed, scope), (walked, tree_scope)) = (city.point(address), city.point_from_tree(address));
            assert_eq!(indexed, walked, "{address}");
            assert!(scope <= tree_scope, "{address}: scope /{scope} beyond the database's /{tree_scope}");
            let IpAddr::V4(v4) = address else { unreachable!() };
            let other = u32::from(v4) ^ (bits.rotate_left(7) & u32::MAX.checked_shr(u32::from(scope)).unwrap_or(0));
            assert_eq!(city.point(IpAddr::from(other.to_be_bytes())).0, indexed, "{address} and {other:#x} share /{scope}");
            located += usize::from(indexed.is_some());
        }
        assert!(located > 100, "only {located} addresses were in the database");
    }

    #[test]
    fn ranges_become_the_fewest_prefixes() {
        assert_eq!(range_to_prefixes(ip("1.0.4.0"), ip("1.0.7.255")).unwrap(), [(ip("1.0.4.0"), 22)]);
        assert_eq!(range_to_prefixes(ip("10.0.0.1"), ip("10.0.0.6")).unwrap().len(), 4, "1/32, 2/31, 4/31, 6/32");
        assert_eq!(range_to_prefixes(ip("0.0.0.0"), ip("255.255.255.255")).unwrap(), [(ip("0.0.0.0"), 0)]);
        assert_eq!(range_to_prefixes(ip("2001::"), ip("2001::ffff:ffff:ffff:ffff:ffff:ffff")).unwrap(), [(ip("2001::"), 32)]);
        assert!(range_to_prefixes(ip("10.0.0.9"), ip("10.0.0.1")).is_none());
    }

    /// The range tables answer as the bit trie did before them, scope
    /// included, for nested and repeated prefixes of both families.
    #[test]
    fn the_asn_table_answers_as_a_bit_trie() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 16
        };
        let (mut text, mut trie) = (String::new(), crate::prefix::PrefixMap::default());
        for line in 0..3000u32 {
            let bits = next() as u32 & 0x0AFF_FFFF | 0x0A00_0000;
            let (network, length) = match line % 4 {
                3 => {
                    let length = 8 + (next() % 57) as u8;
                    let network = (u128::from(bits) << 96 | 0x2001_0db8 << 96) & !(u128::MAX >> length);
                    (IpAddr::from(network.to_be_bytes()), length)
                }
                _ => {
                    let length = 8 + (next() % 25) as u8;
                    (IpAddr::from((bits & !u32::MAX.checked_shr(u32::from(length)).unwrap_or(0)).to_be_bytes()), length)
                }
            };
            let asn = (next() % 50) as u32;
            text.push_str(&format!("{network}/{length}\t{asn}\n"));
            trie.insert(network, length, asn);
        }
        let table = AsnTable::parse(&text).unwrap();
        for turn in 0..20_000u32 {
            let bits = next() as u32 & 0x0AFF_FFFF | 0x0A00_0000;
            let address = match turn % 2 {
                0 => IpAddr::from(bits.to_be_bytes()),
                _ => IpAddr::from((u128::from(bits) << 96 | 0x2001_0db8 << 96 | u128::from(next())).to_be_bytes()),
            };
            let expected = trie.lookup(address);
            assert_eq!(table.lookup(address), (expected.value.map(|(&asn, length)| (asn, length)), expected.scope), "{address}");
        }
    }

    #[test]
    fn reads_both_table_formats_and_names_bad_lines() {
        let table = AsnTable::parse("; comment\n1.0.0.0/24\t15169\n1.0.4.0,1.0.7.255,38803,\"Gtelecom, Pty\"\n").unwrap();
        assert_eq!(table.lookup(ip("1.0.0.9")).0, Some((15169, 24)));
        assert_eq!(table.lookup(ip("1.0.6.1")).0, Some((38803, 22)));
        assert_eq!(table.lookup(ip("9.9.9.9")).0, None);
        assert_eq!(
            AsnTable::parse("1.0.0.0/24\t15169\n1.2.3.0/33 7\n").unwrap_err().to_string(),
            "line 2: prefix length \"33\" must be 0 to 32: \"1.2.3.0/33 7\""
        );
    }
}
