//! MRT dumps written here: TABLE_DUMP_V2 through the crate's writer,
//! TABLE_DUMP (v1) through bgpkit-parser's encoders, the synthetic table,
//! and damaged files that must give an error, never a panic.

use std::net::IpAddr;
use std::path::Path;

use bgpkit_parser::models::{
    AsPath, AsPathSegment, Asn, Attribute, AttributeValue, Attributes, CommonHeader, EntryType, MrtMessage, NetworkPrefix, Origin,
    TableDumpMessage,
};
use bgpsynth::{Config, RibWriter};
use ipnet::IpNet;
use pharos_bgp::{Format, LoadError, load};

use crate::common;
use common::{lab, temp_file};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn net(text: &str) -> IpNet {
    text.parse().unwrap()
}

fn sequence(asns: &[u32]) -> AsPath {
    AsPath::from_sequence(asns)
}

/// Three peers; the table of `hand_made.rs`'s cases, in MRT.
fn small_rib() -> Vec<u8> {
    let peers = [(ip("192.0.2.1"), 100), (ip("192.0.2.2"), 101), (ip("2001:db8::3"), 4_200_000_001)];
    let mut writer = RibWriter::new(Vec::new(), 1_700_000_000, &peers).unwrap();
    let routes: [(&str, Vec<(u16, AsPath)>); 5] = [
        ("10.0.0.0/8", vec![(0, sequence(&[100, 300])), (1, sequence(&[101, 7])), (2, sequence(&[4_200_000_001, 7]))]),
        ("10.1.0.0/16", vec![(0, sequence(&[100, 100, 400, 400]))]),
        ("11.0.0.0/8", vec![(0, AsPath::from_segments(vec![AsPathSegment::sequence([100, 200]), AsPathSegment::set([300, 301])]))]),
        ("12.0.0.0/8", vec![(1, AsPath::new())]),
        ("2001:db8::/32", vec![(2, sequence(&[4_200_000_001, 65536, 4_200_000_000]))]),
    ];
    for (prefix, routes) in routes {
        writer.write_prefix(net(prefix), &routes).unwrap();
    }
    writer.finish().unwrap()
}

#[test]
fn table_dump_v2_with_both_families_and_four_byte_asns() {
    let file = temp_file("rib", &small_rib());
    let tables = load(&file.path, lab(), |_| ()).unwrap();
    let lookup = |address| tables.ip_to_as.lookup(ip(address));
    // 7 from two peers beats 300 from one.
    assert_eq!(lookup("10.200.0.1"), Some((7, 8)));
    assert_eq!(lookup("10.1.0.1"), Some((400, 16)));
    assert_eq!(lookup("11.0.0.1"), Some((200, 8)));
    assert_eq!(lookup("12.0.0.1"), None);
    assert_eq!(lookup("2001:db8::1"), Some((4_200_000_000, 32)));
    let report = &tables.report;
    assert_eq!(report.format, Format::Mrt);
    assert_eq!((report.routes, report.skipped_routes, report.as_set_paths, report.origin_conflicts), (7, 1, 1, 1));
    assert_eq!((report.prefixes_v4, report.prefixes_v6), (3, 1));
    let from_peer = tables.graph.hop_counts_from(4_200_000_001).unwrap();
    assert_eq!((from_peer.to(7), from_peer.to(4_200_000_000), from_peer.to(300)), (Some(1), Some(2), None));
}

/// One TABLE_DUMP (v1) record: 2-byte AS numbers, a 4-byte origin carried
/// as AS_TRANS in AS_PATH and in full in AS4_PATH (RFC 6793).
fn table_dump_v1(prefix: &str, sequence_number: u16) -> Vec<u8> {
    let attributes = Attributes::from(
        [
            AttributeValue::Origin(Origin::IGP),
            AttributeValue::AsPath(AsPath::from_sequence([100, 3356, 23456])),
            AttributeValue::As4Path(AsPath::from_sequence([100, 3356, 196_613])),
            AttributeValue::NextHop(ip("192.0.2.1")),
        ]
        .into_iter()
        .map(Attribute::from)
        .collect::<Vec<_>>(),
    );
    // The record's family (its subtype) sets the width of the peer address too.
    let (subtype, peer_ip) = match net(prefix) {
        IpNet::V4(_) => (1, ip("192.0.2.1")),
        IpNet::V6(_) => (2, ip("2001:db8::1")),
    };
    let message = TableDumpMessage {
        view_number: 0,
        sequence_number,
        prefix: NetworkPrefix::new(net(prefix), None),
        status: 1,
        originated_time: 1_000_000_000,
        peer_ip,
        peer_asn: Asn::new_16bit(100),
        attributes,
    };
    let body = MrtMessage::TableDumpMessage(message).encode(subtype).unwrap();
    let header = CommonHeader {
        timestamp: 1_000_000_000,
        microsecond_timestamp: None,
        entry_type: EntryType::TABLE_DUMP,
        entry_subtype: subtype,
        length: body.len() as u32,
    };
    [header.encode().to_vec(), body.to_vec()].concat()
}

#[test]
fn table_dump_v1_with_as4_path() {
    let file = temp_file("rib", &[table_dump_v1("198.51.100.0/24", 0), table_dump_v1("2001:db8::/32", 1)].concat());
    let tables = load(&file.path, lab(), |_| ()).unwrap();
    assert_eq!(tables.ip_to_as.lookup(ip("198.51.100.7")), Some((196_613, 24)));
    assert_eq!(tables.ip_to_as.lookup(ip("2001:db8::7")), Some((196_613, 32)));
    assert_eq!(tables.graph.neighbours(3356).collect::<Vec<_>>(), [100, 196_613]);
    assert_eq!(tables.graph.index_of(23456), None);
}

#[test]
fn the_synthetic_table_loads_as_generated() {
    let config = Config { seed: 9, ases: 600, prefixes_v4: 6_000, prefixes_v6: 1_200, peers: 4 };
    let mut rib = Vec::new();
    let summary = bgpsynth::write(&config, &mut rib).unwrap();
    let file = temp_file("rib", &rib);
    let report = load(&file.path, lab(), |_| ()).unwrap().report;
    assert_eq!((report.prefixes_v4, report.prefixes_v6), (summary.prefixes_v4, summary.prefixes_v6));
    assert_eq!((report.routes, report.as_set_paths), (summary.routes, summary.as_set_routes));
    assert_eq!(report.origin_conflicts, summary.moas_prefixes);
    assert_eq!(report.skipped_routes + report.skipped_records, 0);
    assert!(report.ases <= summary.ases && report.links <= summary.links);
    assert!((3.0..6.0).contains(&summary.mean_path_length), "{summary}");
}

/// Loads `content`; it may load or fail, but only with a `Corrupt`,
/// `UnknownFormat`, `UpdatesNotRib`, `Empty` or `NoRoutes` error.
fn load_damaged(path: &Path, content: &[u8]) -> Result<(), LoadError> {
    std::fs::write(path, content).unwrap();
    match load(path, lab(), |_| ()) {
        Ok(_) => Ok(()),
        Err(LoadError::Io { source, .. }) => panic!("damage is not an I/O error: {source}"),
        Err(error) => Err(error),
    }
}

#[test]
fn every_truncation_is_an_error_or_a_record_boundary() {
    let rib = small_rib();
    let file = temp_file("rib", b"");
    let mut boundaries = 0;
    for length in 1..rib.len() {
        match load_damaged(&file.path, &rib[..length]) {
            Ok(()) => boundaries += 1,
            Err(LoadError::Corrupt { at, detail, .. }) => {
                assert!(at.starts_with("after route") && detail.contains("truncated"), "{at}: {detail}")
            }
            Err(error) => assert!(matches!(error, LoadError::UnknownFormat { .. } | LoadError::NoRoutes { .. }), "{error}"),
        }
    }
    // The peer table then five prefix records: only the cuts after the
    // records with an origin load.
    assert_eq!(boundaries, 4);
}

#[test]
fn truncated_compressed_files_are_errors() {
    let rib = small_rib();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gzip, &rib).unwrap();
    let gzip = gzip.finish().unwrap();
    let file = temp_file("rib", b"");
    // The last cut keeps the whole deflate stream but for its last two
    // bytes (the 8-byte checksum trailer goes too).
    for length in [20, gzip.len() / 2, gzip.len() - 10] {
        let error = load_damaged(&file.path, &gzip[..length]).unwrap_err();
        assert!(matches!(error, LoadError::Corrupt { .. }), "{error}");
    }
}

/// Seeded xorshift, so the damage is the same on every run.
fn damage_source(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let rib = small_rib();
    let file = temp_file("rib", b"");
    let mut random = damage_source(0x5EED);
    for _ in 0..3_000 {
        let mut damaged = rib.clone();
        for _ in 0..1 + random() % 4 {
            let at = (random() % damaged.len() as u64) as usize;
            damaged[at] = random() as u8;
        }
        let _ = load_damaged(&file.path, &damaged);
    }
}

#[test]
fn garbage_never_panics() {
    let file = temp_file("rib", b"");
    let mut random = damage_source(0xBAD);
    // A plausible TABLE_DUMP_V2 header, then noise.
    let header = [0x53, 0x88, 0xfe, 0x20, 0, 13, 0, 2, 0, 0, 0, 64];
    for round in 0..2_000 {
        let noise: Vec<u8> = (0..random() % 600).map(|_| random() as u8).collect();
        let content = if round % 2 == 0 { [&header[..], &noise].concat() } else { noise };
        let _ = load_damaged(&file.path, &content);
    }
}
