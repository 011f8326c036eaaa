//! The text `bgpdump -m` prints for a RIB dump, one route a line:
//!
//! ```text
//! TABLE_DUMP2|1277971199|B|202.249.2.169|2497|1.9.0.0/16|2497 2914 4788|IGP|202.249.2.169|0|0||NAG||
//! ```
//!
//! Written by hand: bgpkit-parser reads MRT and Cisco `show ip bgp` text
//! but not this format, and no maintained crate does. The format is a line
//! split on `|`; only the prefix (field 6) and the AS path (field 7) are
//! used. That simple reader takes 0.23 s for RIS rrc06's 642,000 lines,
//! gunzip included, against 0.55 s for the 504,000 routes of the MRT JINX
//! dump through bgpkit-parser (bench/RESULTS.md, "bench/bgp-load"). The AS path prints AS_SETs as `{1,2}`, confederation segments as
//! `(1 2)` and `[1,2]`, and 4-byte ASNs in asplain or, from old bgpdump
//! versions, asdot (`1.10`).

use std::io::BufRead;

use ipnet::IpNet;

use crate::collect::Collector;
use crate::error::Corruption;
use crate::path::PathHops;

/// Feeds every route of a `bgpdump -m` stream to `collector`.
pub(crate) fn read(mut reader: impl BufRead, collector: &mut Collector) -> Result<(), Corruption> {
    let mut hops = PathHops::default();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        number += 1;
        line.clear();
        let at = || format!("line {number}");
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(error) => return Err(Corruption { at: at(), detail: format!("truncated or corrupt file: {error}") }),
        }
        // bgpdump ends every line; a last line without an end was cut short.
        if line.pop() != Some(b'\n') {
            return Err(Corruption { at: at(), detail: "truncated file: the last line has no line end".into() });
        }
        let text = std::str::from_utf8(&line).map_err(|_| Corruption { at: at(), detail: "not text".into() })?.trim_end();
        if text.is_empty() {
            continue;
        }
        let prefix = parse_route(text, &mut hops).map_err(|detail| Corruption { at: at(), detail })?;
        collector.route(prefix, &hops);
    }
}

/// The prefix of one route line; its AS path goes into `hops`.
fn parse_route(line: &str, hops: &mut PathHops) -> Result<IpNet, String> {
    let mut fields = line.split('|');
    let kind = fields.next().unwrap_or_default();
    if kind != "TABLE_DUMP2" && kind != "TABLE_DUMP" {
        return Err(format!("expected a TABLE_DUMP2 or TABLE_DUMP route, found {kind:?}"));
    }
    let mut fields = fields.skip(4);
    let (Some(prefix), Some(path)) = (fields.next(), fields.next()) else {
        return Err("too few `|`-separated fields for a route".into());
    };
    let prefix = prefix.parse().map_err(|_| format!("bad prefix {prefix:?}"))?;
    parse_path(path, hops)?;
    Ok(prefix)
}

/// Reads an AS path such as `2497 3549 21877 {4237,4238}` into `hops`.
fn parse_path(path: &str, hops: &mut PathHops) -> Result<(), String> {
    hops.clear();
    let mut rest = path.trim_start();
    while let Some(first) = rest.chars().next() {
        let close = match first {
            '{' => Some('}'),
            '(' => Some(')'),
            '[' => Some(']'),
            _ => None,
        };
        let end = match close {
            Some(close) => rest.find(close).ok_or_else(|| format!("unclosed {first:?} in AS path {path:?}"))? + 1,
            None => rest.find(' ').unwrap_or(rest.len()),
        };
        let (segment, after) = rest.split_at(end);
        match first {
            '{' => parse_members(segment).map(|()| hops.push_set()),
            '(' | '[' => parse_members(segment).map(|()| hops.push_confederation()),
            _ => parse_asn(segment).map(|asn| hops.push(asn)),
        }
        .map_err(|bad| format!("bad AS number {bad:?} in AS path {path:?}"))?;
        rest = after.trim_start();
    }
    Ok(())
}

/// Checks the members of a bracketed segment; Pharos does not use them.
fn parse_members(segment: &str) -> Result<(), &str> {
    let members = &segment[1..segment.len() - 1];
    members.split([',', ' ']).filter(|member| !member.is_empty()).try_for_each(|member| parse_asn(member).map(drop))
}

/// An AS number in asplain (`196613`) or asdot (`3.5`) notation.
fn parse_asn(text: &str) -> Result<u32, &str> {
    let parsed = match text.split_once('.') {
        Some((high, low)) => {
            high.parse::<u16>().ok().zip(low.parse::<u16>().ok()).map(|(high, low)| u32::from(high) << 16 | u32::from(low))
        }
        None => text.parse().ok(),
    };
    parsed.ok_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> (Option<u32>, Vec<(u32, u32)>, bool) {
        let mut hops = PathHops::default();
        parse_path(text, &mut hops).unwrap();
        (hops.origin(), hops.links().collect(), hops.has_set())
    }

    #[test]
    fn sets_confederations_prepending_and_asdot() {
        assert_eq!(path("2497 3549 21877 {4237}"), (Some(21877), vec![(2497, 3549), (3549, 21877)], true));
        assert_eq!(path("(65001 65002) 7018 7018 1.10"), (Some(65546), vec![(7018, 65546)], false));
        assert_eq!(path("[65001,65002] 3356"), (Some(3356), vec![], false));
        assert_eq!(path("  "), (None, vec![], false));
    }

    #[test]
    fn malformed_paths_and_lines_are_reported() {
        let mut hops = PathHops::default();
        for bad in ["1 2x 3", "1 {2,3", "1 {2,x}", "70000.1", "4294967296"] {
            assert!(parse_path(bad, &mut hops).is_err(), "{bad}");
        }
        assert!(parse_route("BGP4MP|1|A|10.0.0.1|1|10.0.0.0/8|1 2", &mut hops).unwrap_err().contains("BGP4MP"));
        assert!(parse_route("TABLE_DUMP2|1|B|10.0.0.1|1", &mut hops).unwrap_err().contains("too few"));
        assert!(parse_route("TABLE_DUMP2|1|B|10.0.0.1|1|10.0.0/8|1 2", &mut hops).unwrap_err().contains("bad prefix"));
    }
}
