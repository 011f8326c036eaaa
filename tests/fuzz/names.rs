//! The names queries are made of: every owner of the served zones, sorted
//! by what it is (apex, delegation, DNAME, wildcard, empty non-terminal,
//! ...), plus names derived from them that the zones do not hold (below a
//! delegation or a DNAME, covered by a wildcard, beside existing names,
//! outside every zone).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use std::process::Command;

use crate::support::norm::parse_type;
use crate::support::servers::Zone;

/// What a name is in its zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameKind {
    Apex,
    Data,
    Cname,
    Dname,
    BelowDname,
    Delegation,
    BelowDelegation,
    WildcardOwner,
    UnderWildcard,
    EmptyNonTerminal,
    Missing,
    Outside,
}

/// A name to query, lower case, leftmost label first, and the types it holds.
#[derive(Clone, Debug)]
pub struct PoolName {
    pub labels: Vec<Vec<u8>>,
    pub kind: NameKind,
    pub types: Vec<u16>,
}

pub struct NamePool {
    pub names: Vec<PoolName>,
}

type Labels = Vec<Vec<u8>>;

fn labels_of(text: &str) -> Labels {
    text.trim_end_matches('.').split('.').filter(|l| !l.is_empty()).map(|l| l.to_ascii_lowercase().into_bytes()).collect()
}

/// The owners of a zone file and their types, as BIND's named-checkzone
/// reads it (includes followed, every name absolute, one record a line).
fn owners(checkzone: &Path, dir: &Path, zone: &Zone, into: &mut BTreeMap<Labels, BTreeSet<u16>>) {
    let out = Command::new(checkzone)
        .args(["-q", "-k", "ignore", "-i", "none", "-D", "-o", "-", zone.origin, zone.file])
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", checkzone.display()));
    assert!(out.status.success(), "named-checkzone {} {}: {}", zone.origin, zone.file, String::from_utf8_lossy(&out.stderr));
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [owner, _ttl, _class, rtype, ..] = words.as_slice()
            && let Some(rtype) = parse_type(rtype)
        {
            into.entry(labels_of(owner)).or_default().insert(rtype);
        }
    }
}

impl NamePool {
    /// Reads the zones' files in `dir` with `checkzone` (named-checkzone).
    pub fn from_zones(checkzone: &Path, dir: &Path, zones: &[Zone]) -> NamePool {
        let mut found = BTreeMap::new();
        let mut names = Vec::new();
        for zone in zones {
            let mut owners_here = BTreeMap::new();
            owners(checkzone, dir, zone, &mut owners_here);
            found.insert(labels_of(zone.origin), owners_here);
        }
        let apexes: Vec<Labels> = found.keys().cloned().collect();
        for (apex, owners_here) in &found {
            // A name is in the zone whose apex is its longest suffix.
            let home = |labels: &Labels| apexes.iter().filter(|a| labels.ends_with(a)).max_by_key(|a| a.len()) == Some(apex);
            for (labels, types) in owners_here.iter().filter(|(l, _)| home(l)) {
                let kind = classify(labels, types, apex);
                names.push(PoolName { labels: labels.clone(), kind, types: types.iter().copied().collect() });
                let child =
                    |first: &[u8], kind| PoolName { labels: [vec![first.to_vec()], labels.clone()].concat(), kind, types: Vec::new() };
                match kind {
                    NameKind::Delegation => names.push(child(b"www", NameKind::BelowDelegation)),
                    NameKind::Dname => names.push(child(b"www", NameKind::BelowDname)),
                    NameKind::WildcardOwner => {
                        let parent = labels[1..].to_vec();
                        names.push(PoolName {
                            labels: [vec![b"covered".to_vec()], parent].concat(),
                            kind: NameKind::UnderWildcard,
                            types: Vec::new(),
                        });
                    }
                    _ => names.push(child(b"nope", NameKind::Missing)),
                }
                // Empty non-terminals: ancestors below the apex that own nothing.
                for skip in 1..labels.len().saturating_sub(apex.len()) {
                    let ancestor = labels[skip..].to_vec();
                    if !owners_here.contains_key(&ancestor) && !names.iter().any(|n| n.labels == ancestor) {
                        names.push(PoolName { labels: ancestor, kind: NameKind::EmptyNonTerminal, types: Vec::new() });
                    }
                }
            }
        }
        names.push(PoolName { labels: labels_of("www.example.net"), kind: NameKind::Outside, types: Vec::new() });
        names.push(PoolName { labels: Vec::new(), kind: NameKind::Outside, types: Vec::new() });
        NamePool { names }
    }
}

impl NamePool {
    /// Whether `labels` (any case) own a CNAME.
    pub fn is_cname(&self, labels: &[Vec<u8>]) -> bool {
        let lower: Labels = labels.iter().map(|l| l.to_ascii_lowercase()).collect();
        self.names.iter().any(|n| n.kind == NameKind::Cname && n.labels == lower)
    }

    /// Whether a proper ancestor of `labels` (any case) owns a DNAME: the
    /// name is answered by substitution, however many labels it has.
    pub fn is_below_dname(&self, labels: &[Vec<u8>]) -> bool {
        let lower: Labels = labels.iter().map(|l| l.to_ascii_lowercase()).collect();
        let dname_owners = self.names.iter().filter(|n| n.kind == NameKind::Dname);
        dname_owners.into_iter().any(|n| lower.len() > n.labels.len() && lower.ends_with(&n.labels))
    }
}

fn classify(labels: &Labels, types: &BTreeSet<u16>, apex: &Labels) -> NameKind {
    const NS: u16 = 2;
    const CNAME: u16 = 5;
    const DNAME: u16 = 39;
    if labels == apex {
        NameKind::Apex
    } else if labels.first().is_some_and(|l| l == b"*") {
        NameKind::WildcardOwner
    } else if types.contains(&NS) {
        NameKind::Delegation
    } else if types.contains(&CNAME) {
        NameKind::Cname
    } else if types.contains(&DNAME) {
        NameKind::Dname
    } else {
        NameKind::Data
    }
}
