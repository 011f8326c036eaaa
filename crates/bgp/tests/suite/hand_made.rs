//! Small tables written as `bgpdump -m` text, whose answers can be worked
//! out by hand.

use std::io::Write;
use std::net::IpAddr;

use pharos_bgp::{BgpTables, LoadError, Progress, load};

use crate::common;
use common::{lab, temp_file};

/// `bgpdump -m` lines for (peer AS, prefix, AS path); peers are told
/// apart by AS.
fn bgpdump(routes: &[(u32, &str, &str)]) -> String {
    routes
        .iter()
        .map(|(peer, prefix, path)| {
            format!("TABLE_DUMP2|1700000000|B|192.0.2.{}|{peer}|{prefix}|{path}|IGP|192.0.2.1|0|0||NAG||\n", peer % 250)
        })
        .collect()
}

fn load_text(routes: &[(u32, &str, &str)]) -> BgpTables {
    let file = temp_file("rib.txt", bgpdump(routes).as_bytes());
    load(&file.path, lab(), |_| ()).unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn nested_prefixes_longest_match_and_scope() {
    let tables = load_text(&[
        (100, "10.0.0.0/8", "100 300"),
        (100, "10.1.0.0/16", "100 400"),
        (100, "10.1.2.0/24", "100 500"),
        (100, "192.0.2.0/25", "100 600"),
    ]);
    let scoped = |address| {
        let found = tables.ip_to_as.lookup_scoped(ip(address));
        (found.found, found.scope)
    };
    assert_eq!(scoped("10.1.2.3"), (Some((500, 24)), 24));
    // 10.1.3.x is in the /16 but next to the /24: 24 bits decide.
    assert_eq!(scoped("10.1.3.1"), (Some((400, 16)), 24));
    // 10.2.x parts from 10.1.x at the 15th bit.
    assert_eq!(scoped("10.2.0.1"), (Some((300, 8)), 15));
    assert_eq!(scoped("10.128.0.1"), (Some((300, 8)), 9));
    assert_eq!(scoped("192.0.2.200"), (None, 25));
    // 203/8 and 192/8 share 4 leading bits.
    assert_eq!(scoped("203.0.113.1"), (None, 5));
    assert_eq!(tables.report.prefixes_v4, 4);
}

#[test]
fn disagreeing_peers_elect_the_majority_then_the_lowest_as() {
    let tables = load_text(&[
        (100, "10.0.0.0/8", "100 7"),
        (101, "10.0.0.0/8", "101 5"),
        (102, "10.0.0.0/8", "102 7"),
        (100, "11.0.0.0/8", "100 9"),
        (101, "11.0.0.0/8", "101 3"),
        (100, "12.0.0.0/8", "100 4"),
        (101, "12.0.0.0/8", "101 4"),
    ]);
    assert_eq!(tables.ip_to_as.lookup(ip("10.0.0.1")), Some((7, 8)));
    assert_eq!(tables.ip_to_as.lookup(ip("11.0.0.1")), Some((3, 8)));
    assert_eq!(tables.ip_to_as.lookup(ip("12.0.0.1")), Some((4, 8)));
    assert_eq!(tables.report.origin_conflicts, 2);
    // The losers are ASes on paths all the same.
    assert!(tables.graph.index_of(9).is_some() && tables.graph.index_of(5).is_some());
}

#[test]
fn as_sets_prepending_and_paths_without_origin() {
    let tables = load_text(&[
        // An aggregate: the aggregator 200 is the origin, 300 and 301 stay unlinked.
        (100, "10.0.0.0/8", "100 200 {300,301}"),
        // Prepending collapses: 100 - 210 - 220, no self-links.
        (100, "11.0.0.0/8", "100 100 210 210 220 220 220"),
        // No AS_SEQUENCE, an empty path, AS 0: no origin, skipped.
        (100, "12.0.0.0/8", "{300,301}"),
        (100, "13.0.0.0/8", ""),
        (100, "14.0.0.0/8", "100 0 230"),
        // A set in the middle: 240 and 250 are not linked across it.
        (100, "15.0.0.0/8", "100 240 {241} 250 260"),
    ]);
    let lookup = |address| tables.ip_to_as.lookup(ip(address));
    assert_eq!(lookup("10.0.0.1"), Some((200, 8)));
    assert_eq!(lookup("11.0.0.1"), Some((220, 8)));
    assert_eq!((lookup("12.0.0.1"), lookup("13.0.0.1"), lookup("14.0.0.1")), (None, None, None));
    assert_eq!(lookup("15.0.0.1"), Some((260, 8)));
    let report = &tables.report;
    assert_eq!((report.routes, report.skipped_routes, report.as_set_paths), (6, 3, 3));
    let graph = &tables.graph;
    assert_eq!(graph.neighbours(100).collect::<Vec<_>>(), [200, 210, 240]);
    assert_eq!(graph.neighbours(210).collect::<Vec<_>>(), [100, 220]);
    assert_eq!(graph.neighbours(250).collect::<Vec<_>>(), [260]);
    assert_eq!((graph.index_of(300), graph.index_of(241)), (None, None));
    assert_eq!((graph.as_count(), graph.link_count()), (7, 5));
}

#[test]
fn ipv6_and_four_byte_asns() {
    let tables = load_text(&[
        (100, "2001:db8::/32", "100 65536 4200000000"),
        (100, "2001:db8:ff00::/40", "100 65536 196613"),
        (100, "192.0.2.0/24", "100 1.5"),
    ]);
    let lookup = |address| tables.ip_to_as.lookup(ip(address));
    assert_eq!(lookup("2001:db8::1"), Some((4_200_000_000, 32)));
    assert_eq!(lookup("2001:db8:ff12::1"), Some((196_613, 40)));
    // asdot 1.5 is 65541.
    assert_eq!(lookup("192.0.2.1"), Some((65_541, 24)));
    assert_eq!(lookup("2001:db9::1"), None);
    assert_eq!(tables.ip_to_as.lookup_scoped(ip("2001:db8:ff12::1")).scope, 40);
    assert_eq!((tables.report.prefixes_v4, tables.report.prefixes_v6), (1, 2));
    let from_4byte = tables.graph.hop_counts_from(4_200_000_000).unwrap();
    assert_eq!((from_4byte.to(100), from_4byte.to(196_613)), (Some(2), Some(2)));
}

#[test]
fn hop_counts_over_a_graph_with_equal_paths() {
    // Peer 1 sees 5 through 2 and through 3 (a diamond), peer 6 sits on a
    // tail, and 8 - 9 form an island no path joins to the rest.
    let tables =
        load_text(&[(1, "10.0.0.0/8", "1 2 4 5"), (1, "11.0.0.0/8", "1 3 4 5"), (6, "12.0.0.0/8", "6 7 5"), (8, "13.0.0.0/8", "8 9")]);
    let graph = &tables.graph;
    let from_1 = graph.hop_counts_from(1).unwrap();
    let hops: Vec<_> = [1, 2, 3, 4, 5, 7, 6, 8, 9, 10].iter().map(|&asn| from_1.to(asn)).collect();
    assert_eq!(hops, [Some(0), Some(1), Some(1), Some(2), Some(3), Some(4), Some(5), None, None, None]);
    assert_eq!(graph.hop_counts_from(9).unwrap().to(8), Some(1));
    assert!(graph.hop_counts_from(10).is_none());
}

#[test]
fn compression_is_recognised_by_content_not_by_name() {
    let text = bgpdump(&[(100, "10.0.0.0/8", "100 300")]);
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(text.as_bytes()).unwrap();
    let mut bzip2 = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    bzip2.write_all(text.as_bytes()).unwrap();
    for content in [text.into_bytes(), gzip.finish().unwrap(), bzip2.finish().unwrap()] {
        let file = temp_file("misnamed.mrt", &content);
        let tables = load(&file.path, lab(), |_| ()).unwrap();
        assert_eq!(tables.ip_to_as.lookup(ip("10.9.9.9")), Some((300, 8)), "{:?}", tables.report.compression);
    }
}

#[test]
fn progress_is_reported_to_the_end() {
    let routes: Vec<String> = (0..70_000u32).map(|n| format!("{}.{}.{}.0/24", 1 + n / 65536, n / 256 % 256, n % 256)).collect();
    let lines: Vec<(u32, &str, &str)> = routes.iter().map(|prefix| (100, prefix.as_str(), "100 200")).collect();
    let file = temp_file("rib.txt", bgpdump(&lines).as_bytes());
    let mut seen: Vec<Progress> = Vec::new();
    let tables = load(&file.path, lab(), |progress| seen.push(*progress)).unwrap();
    assert_eq!(seen.iter().map(|progress| progress.routes).collect::<Vec<_>>(), [65_536, 70_000]);
    let size = std::fs::metadata(&file.path).unwrap().len();
    assert_eq!((seen[1].bytes_read, seen[1].file_size), (size, size));
    assert!(seen[0].bytes_read < size);
    assert_eq!(tables.report.prefixes_v4, 70_000);
}

#[test]
fn bad_text_is_an_error_naming_file_and_line() {
    let good = bgpdump(&[(100, "10.0.0.0/8", "100 300")]);
    let cases: [(&[&[u8]], &str); 6] = [
        (&[b"TABLE_DUMP2|1|B|192.0.2.1|100|10.0.0.0/33|100 300|IGP\n"], "line 2: bad prefix"),
        (&[good.as_bytes(), b"TABLE_DUMP2|1|B|192.0.2.1|100|10.0.0.0/8|100 3x0|IGP\n"], "line 3: bad AS number"),
        (&[b"TABLE_DUMP2|1|B|192.0.2.1|100|10.0.0.0/8|100 {3|IGP\n"], "line 2: unclosed"),
        (&[b"TABLE_DUMP2|1|B|192.0.2.1"], "line 2: truncated"),
        (&[b"hello\n"], "line 2: expected a TABLE_DUMP2"),
        (&[b"TABLE_DUMP2|\xff\xfe\n"], "line 2: not text"),
    ];
    for (tail, expected) in cases {
        let content = [&[good.as_bytes()], tail].concat().concat();
        let file = temp_file("broken.txt", &content);
        let error = load(&file.path, lab(), |_| ()).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, LoadError::Corrupt { .. }) && message.contains(expected), "{message}");
        assert!(message.starts_with(&file.path.display().to_string()), "{message}");
    }
}

#[test]
fn empty_and_originless_files_are_errors() {
    let empty = temp_file("empty", b"");
    assert!(matches!(load(&empty.path, lab(), |_| ()), Err(LoadError::Empty { .. })));
    let originless = temp_file("rib.txt", bgpdump(&[(100, "10.0.0.0/8", "")]).as_bytes());
    assert!(matches!(load(&originless.path, lab(), |_| ()), Err(LoadError::NoRoutes { .. })));
    let missing = empty.path.with_file_name("missing");
    assert!(matches!(load(&missing, lab(), |_| ()), Err(LoadError::Io { .. })));
}
