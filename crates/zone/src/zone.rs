//! The in-memory zone: names (lowercase wire form) mapped to their RRsets.

use std::sync::Arc;

use pharos_dnssec::Signer;

use crate::journal::Journal;
use pharos_wire::name;
use pharos_wire::types;
use rustc_hash::FxHashMap;

/// All records of one type at one name. TTLs in an RRset are equal
/// (RFC 2181 section 5.2); record data is stored uncompressed, in the case
/// the zone file wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rrset {
    pub rtype: u16,
    pub ttl: u32,
    pub rdatas: Vec<Box<[u8]>>,
    /// The RRSIG records' data over this RRset, once its zone is signed
    /// (none for data that is not authoritative: delegation NS, glue).
    pub rrsigs: Vec<Box<[u8]>>,
}

/// One name in the zone. A node with no RRsets is an empty non-terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// Sorted by type.
    pub rrsets: Vec<Rrset>,
    /// Once the zone is signed: the NSEC (with its RRSIGs) that proves
    /// which types the name has, for answers that it lacks one (compact
    /// denial, RFC 9824). Never part of the answers to DO=0 queries.
    pub nsec: Option<Rrset>,
    /// The address types a routing policy answers at this name (A, AAAA),
    /// which its NSEC lists though the zone holds no such records.
    pub routed_types: Vec<u16>,
}

impl Node {
    pub fn get(&self, rtype: u16) -> Option<&Rrset> {
        self.rrsets.iter().find(|rrset| rrset.rtype == rtype)
    }

    pub fn has(&self, rtype: u16) -> bool {
        self.get(rtype).is_some()
    }
}

/// A name a routing policy cannot answer for in a zone ([`Zone::reserve_name`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {why}", name::Display(name))]
pub struct Unreservable {
    /// The name, as a wire name.
    pub name: Box<[u8]>,
    pub why: WhyUnreservable,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhyUnreservable {
    #[error("is not inside the zone {}", name::Display(origin))]
    Outside { origin: Box<[u8]> },
    #[error("already has records in the zone file; a name is either zone data or a service, not both")]
    HasRecords,
    #[error("is below a delegation or DNAME in the zone")]
    Occluded,
}

/// A zone: its origin, apex SOA facts, and every node by name.
#[derive(Debug, Clone)]
pub struct Zone {
    /// Lowercase wire form.
    pub origin: Box<[u8]>,
    pub nodes: FxHashMap<Box<[u8]>, Node>,
    /// TTL for negative answers: min(SOA TTL, SOA MINIMUM), RFC 2308 section 5.
    pub negative_ttl: u32,
    /// Signs the zone's answers to DO=1 queries; `None` serves it unsigned.
    pub signer: Option<Arc<Signer>>,
    /// The differences between its last versions, for IXFR: empty, with
    /// the configured capacity, as loaded; filled as it changes while served.
    pub journal: Arc<Journal>,
    /// A secondary zone whose copy expired (or was never fetched): every
    /// query for a name in it is answered SERVFAIL, and none is built.
    pub expired: bool,
}

impl Zone {
    pub fn node(&self, name: &[u8]) -> Option<&Node> {
        self.nodes.get(name)
    }

    pub fn apex(&self) -> &Node {
        &self.nodes[&self.origin]
    }

    pub fn soa(&self) -> &Rrset {
        self.apex().get(types::SOA).expect("a loaded zone has an apex SOA")
    }

    /// True when `name` is the owner of a delegation: NS below the apex.
    pub fn is_cut(&self, name: &[u8], node: &Node) -> bool {
        node.has(types::NS) && name != &*self.origin
    }

    /// True when `name` lies below a delegation (its data is glue, not
    /// authoritative) or below a DNAME (its data is unreachable).
    pub fn is_occluded(&self, name: &[u8]) -> bool {
        let mut ancestor = name::parent(name);
        while let Some(above) = ancestor {
            if above.len() < self.origin.len() {
                break;
            }
            if let Some(node) = self.nodes.get(above)
                && (self.is_cut(above, node) || node.has(types::DNAME))
            {
                return true;
            }
            ancestor = name::parent(above);
        }
        false
    }

    /// Makes `name` (lowercase wire form, inside the zone) exist with no
    /// records, for a name whose addresses (of `routed_types`) a routing
    /// policy answers. A name that holds records, or lies below a
    /// delegation or DNAME, is refused.
    pub fn reserve_name(&mut self, name: &[u8], routed_types: &[u16]) -> Result<(), Unreservable> {
        let refused = |why| Unreservable { name: name.into(), why };
        if !name::is_at_or_below(name, &self.origin) {
            return Err(refused(WhyUnreservable::Outside { origin: self.origin.clone() }));
        }
        if self.nodes.get(name).is_some_and(|node| !node.rrsets.is_empty()) {
            return Err(refused(WhyUnreservable::HasRecords));
        }
        if self.is_occluded(name) {
            return Err(refused(WhyUnreservable::Occluded));
        }
        add_empty_ancestors(&mut self.nodes, name, &self.origin);
        self.nodes.entry(name.into()).or_default().routed_types = routed_types.to_vec();
        Ok(())
    }

    /// Every record type that appears anywhere in the zone.
    pub fn types_present(&self) -> Vec<u16> {
        let mut present: Vec<u16> = self.nodes.values().flat_map(|node| node.rrsets.iter().map(|rrset| rrset.rtype)).collect();
        present.sort_unstable();
        present.dedup();
        present
    }
}

/// Makes every name between `owner` and the apex exist, so that empty
/// non-terminals answer NODATA and block wildcards (RFC 4592 section 2.2.2).
pub(crate) fn add_empty_ancestors(nodes: &mut FxHashMap<Box<[u8]>, Node>, owner: &[u8], origin: &[u8]) {
    let mut ancestor = name::parent(owner);
    while let Some(above) = ancestor {
        if above.len() <= origin.len() || nodes.contains_key(above) {
            break;
        }
        nodes.insert(above.into(), Node::default());
        ancestor = name::parent(above);
    }
}
