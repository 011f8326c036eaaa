//! Zones kept in the store: made through the control API or `ctl`,
//! changed by DNS UPDATE or the records API, and followed by every node
//! of a fleet through the change log as declarations are. A zone from a
//! file stays in its file; the two kinds are served alike.

use serde::{Deserialize, Serialize};

/// A zone the store keeps: its origin and every record, as master-file
/// text with absolute names (RFC 1035 section 5), so that what the store
/// holds reads as a zone file does. A change to any record puts the whole
/// zone again: each change is one entity, as a service is, so the change
/// log's ordering and coalescing hold for zones unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSpec {
    /// Absolute and lowercase: "example.test.".
    pub name: String,
    pub text: String,
}

/// What the API takes to make a store zone: its name, and either the
/// records to start with (a zone file's text, imported once) or nothing,
/// for a zone holding only a SOA and the NS records given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewZone {
    pub name: String,
    #[serde(default)]
    pub text: Option<String>,
    /// The name servers of a zone made empty; the first is the SOA's
    /// primary.
    #[serde(default)]
    pub nameservers: Vec<String>,
}

/// Where a served zone's records come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneKind {
    File,
    Store,
    /// Transferred from its primaries.
    Secondary,
}

/// A zone as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneView {
    pub name: String,
    pub kind: ZoneKind,
    /// The SOA serial served.
    pub serial: u32,
    pub signed: bool,
}

/// One RRset of a store zone as the records API shows and takes it: the
/// owner (absolute), the type's mnemonic, the TTL and each record's data
/// in presentation form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrsetView {
    pub name: String,
    #[serde(rename = "type")]
    pub rtype: String,
    pub ttl: u32,
    pub records: Vec<String>,
}

/// A change of one RRset by the records API: `records` empty deletes the
/// RRset, else it replaces it whole.
pub type RrsetChange = RrsetView;

/// Which zones the catalog zone Pharos produces lists (RFC 9432):
/// every zone it serves, or only those the store keeps (the files' being
/// configured on the secondaries by hand, say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogMembers {
    #[default]
    All,
    Store,
}
