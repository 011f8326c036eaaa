//! Loading the real dumps of the large data sets (`pharos_test_data::large`:
//! bgp/ and ip2asn/ of the directory PHAROS_DATA names; each test skips
//! without them, outside CI).
//! Every expected origin below can be read off the data: for the text dump
//! with `zcat ... | grep '|8.8.8.0/24|'`, for the MRT dumps with any MRT
//! reader (bgpdump, bgpkit-parser's elem iterator).

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::sync::OnceLock;

use pharos_bgp::{BgpTables, Compression, DroppedRoutes, Format, LoadError, OriginRules, load};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Each dump is loaded once and shared by the tests that read it.
static JINX: OnceLock<BgpTables> = OnceLock::new();
static RRC06: OnceLock<BgpTables> = OnceLock::new();

/// The dump at `file` of the large data sets, loaded into `slot` by the
/// first test that asks; `None` (the test skips) without the data sets.
fn loaded(slot: &'static OnceLock<BgpTables>, file: &str) -> Option<&'static BgpTables> {
    let path = pharos_test_data::large(file)?;
    Some(slot.get_or_init(|| load(path, OriginRules::default(), |_| ()).unwrap()))
}

fn jinx() -> Option<&'static BgpTables> {
    loaded(&JINX, "bgp/routeviews.route-views.jinx.ribs.1401487200.bz2")
}

fn rrc06() -> Option<&'static BgpTables> {
    loaded(&RRC06, "bgp/ris-rrc06.bview.20100701.0759.bgpdump-m.txt.gz")
}

#[test]
fn jinx_counts_match_bgpdump() {
    let Some(jinx) = jinx() else { return };
    let report = &jinx.report;
    assert_eq!((report.format, report.compression), (Format::Mrt, Compression::Bzip2));
    // The README: `bgpdump -m` gives 503,590 routes and 497,407 unique
    // prefixes. 17 of them give no origin: the two default routes and 15
    // routes into special-purpose space (leaked RFC 1918 /30s among them),
    // as counted apart with Python's mrtparse and ipaddress modules.
    assert_eq!(report.routes, 503_590);
    assert_eq!(report.dropped, DroppedRoutes { default_routes: 2, too_short: 0, special_purpose: 15 });
    assert_eq!(report.prefixes_v4 + report.prefixes_v6, 497_407 - 17);
    assert_eq!(report.prefixes_v6, 83);
    assert_eq!((report.skipped_routes, report.skipped_records), (0, 0));
    assert_eq!(report.as_set_paths, 128);
}

#[test]
fn jinx_origins() {
    let Some(tables) = jinx() else { return };
    let lookup = |address| tables.ip_to_as.lookup(ip(address));
    assert_eq!(lookup("8.8.8.8"), Some((15169, 24)));
    assert_eq!(lookup("193.0.0.1"), Some((3333, 21)));
    // A 4-byte origin: "30844 9304 17408 132537".
    assert_eq!(lookup("1.1.40.1"), Some((132537, 24)));
    // Prepended: "30844 3491 55410 55410 38266 38266".
    assert_eq!(lookup("1.38.4.1"), Some((38266, 24)));
    // Three peers see 37053 and one sees 65513: the majority wins.
    assert_eq!(lookup("196.1.130.1"), Some((37053, 24)));
    // One peer each for 3491 and 31713: the lower AS wins the tie.
    assert_eq!(lookup("41.221.216.1"), Some((3491, 24)));
    // AS30844 sends a default route: it is no one's origin, and the
    // addresses it alone covers have none.
    assert_eq!(lookup("240.0.0.1"), None);
    assert!(tables.ip_to_as.only_default_route_covers(ip("240.0.0.1")));
    assert!(!tables.ip_to_as.only_default_route_covers(ip("8.8.8.8")));
    assert_eq!(lookup("2001:500:3::1"), Some((20144, 48)));
    // Nor is the IPv6 default route's, "6968 37105".
    assert_eq!(lookup("2001:db8::1"), None);
    assert!(tables.ip_to_as.only_default_route_covers(ip("2001:db8::1")));
}

#[test]
fn jinx_graph() {
    let Some(jinx) = jinx() else { return };
    let graph = &jinx.graph;
    let from_30844 = graph.hop_counts_from(30844).unwrap();
    assert_eq!(from_30844.to(30844), Some(0));
    assert_eq!(from_30844.to(15169), Some(1));
    // "30844 9304 17408 132537": at most three hops.
    assert!(from_30844.to(132537).is_some_and(|hops| (1..=3).contains(&hops)));
    // Prepending adds no self-link.
    assert!(!graph.neighbours(38266).any(|asn| asn == 38266));
    assert!(graph.neighbours(38266).any(|asn| asn == 55410));
    // "30844 50384 31200 31200 {50923,65014,65100,65111,65500}" is the only
    // path with AS65111, in a set: it is no node of the graph.
    assert_eq!(graph.index_of(65111), None);
    assert!(graph.as_count() > 40_000 && graph.link_count() > graph.as_count());
}

#[test]
fn rrc06_counts_match_the_readme() {
    let Some(rrc06) = rrc06() else { return };
    let report = &rrc06.report;
    assert_eq!((report.format, report.compression), (Format::BgpdumpText, Compression::Gzip));
    assert_eq!(report.routes, 641_957);
    // The README counts 323,487 prefixes. One of them, 84.205.86.0/24, has
    // a single route with an empty AS path (a RIS beacon the peer
    // originates itself); with no origin AS it is skipped. Two routes, to
    // one prefix, lie in special-purpose space and give no origin (counted
    // apart with Python's ipaddress module).
    assert_eq!(report.skipped_routes, 1);
    assert_eq!(report.dropped, DroppedRoutes { default_routes: 0, too_short: 0, special_purpose: 2 });
    assert_eq!((report.prefixes_v4, report.prefixes_v6), (323_485, 0));
    assert_eq!(report.as_set_paths, 123);
}

#[test]
fn rrc06_origins() {
    let Some(tables) = rrc06() else { return };
    let lookup = |address| tables.ip_to_as.lookup(ip(address));
    assert_eq!(lookup("8.8.8.8"), Some((15169, 24)));
    assert_eq!(lookup("202.12.27.33"), Some((7500, 24)));
    // Peers disagree, 4847 against 17816: a tie, the lower AS wins.
    assert_eq!(lookup("124.203.192.1"), Some((4847, 18)));
    // "2497 3549 21877 {4237}": the aggregator 21877, not the set member.
    assert_eq!(lookup("20.137.0.1"), Some((21877, 21)));
    assert_eq!(lookup("20.137.12.1"), Some((4237, 22)));
    assert_eq!(lookup("20.137.32.1"), Some((3549, 16)));
    assert_eq!(lookup("84.205.86.1"), None);
    // 20.137.0.0/21 sits inside 20.137.0.0/16 by itself: 21 bits decide.
    assert_eq!(tables.ip_to_as.lookup_scoped(ip("20.137.0.1")).scope, 21);
}

#[test]
fn rrc06_graph() {
    let Some(rrc06) = rrc06() else { return };
    let graph = &rrc06.graph;
    assert!(graph.neighbours(15169).any(|asn| asn == 2497));
    // "4777 2516 4788" and "2497 2914 4788".
    let from_4788 = graph.hop_counts_from(4788).unwrap();
    assert_eq!((from_4788.to(2516), from_4788.to(2914)), (Some(1), Some(1)));
    assert!(from_4788.to(4777).is_some_and(|hops| hops <= 2));
}

/// A check against an independent source: pyasn's table, built from another
/// RouteViews collector (route-views2) two weeks earlier. Where both have
/// the same prefix, the origins should nearly always agree.
#[test]
fn jinx_agrees_with_pyasn_on_shared_prefixes() {
    let Some(tables) = jinx() else { return };
    let Some(pyasn) = pharos_test_data::large("ip2asn/pyasn-ipasn_20140513.dat.gz") else { return };
    let file = std::fs::File::open(pyasn).unwrap();
    let (mut shared, mut agreeing) = (0, 0);
    for line in BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
        let line = line.unwrap();
        let Some((prefix, origin)) = line.split_once('\t') else { continue };
        let Some((address, length)) = prefix.split_once('/') else { continue };
        let length: u8 = length.parse().unwrap();
        if let Some((asn, _)) = tables.ip_to_as.lookup(ip(address)).filter(|&(_, matched)| matched == length) {
            shared += 1;
            agreeing += u32::from(origin.parse::<u32>() == Ok(asn));
        }
    }
    assert!(shared > 400_000, "{shared} shared prefixes");
    let agreement = f64::from(agreeing) / f64::from(shared);
    assert!(agreement > 0.98, "{agreement:.4} of {shared}");
}

#[test]
fn update_files_and_prefix_lists_are_refused_by_name() {
    for updates in ["bgp/routeviews.route-views.jinx.updates.1401493500.bz2", "bgp/ris.updates.20160811.1600.gz"] {
        let Some(path) = pharos_test_data::large(updates) else { return };
        let error = load(path, OriginRules::default(), |_| ()).unwrap_err();
        assert!(matches!(error, LoadError::UpdatesNotRib { .. }), "{error}");
        assert!(error.to_string().contains(updates.trim_start_matches("bgp/")), "{error}");
    }
    let Some(prefix_list) = pharos_test_data::large("bgp/fulltable-prefixes-2024.txt.gz") else { return };
    let error = load(prefix_list, OriginRules::default(), |_| ()).unwrap_err();
    assert!(matches!(error, LoadError::UnknownFormat { .. }), "{error}");
}
