//! Zones: authoritative data and the answers Pharos gives from it.
//!
//! A zone is loaded once (from an RFC 1035 master file through the `domain`
//! crate's parser), checked, and then frozen: every answer for a name that
//! exists in it is encoded at load time, as Knot DNS and NSD do, so a query
//! for it costs a hash lookup and a copy. Names that do not exist (NXDOMAIN,
//! wildcards, DNAME substitution) are resolved per query by the same code
//! that built the stored answers.
//!
//! A zone with a signer ([`Zone::signer`], keys from `pharos_dnssec`) is
//! signed when it is frozen ([`signed`]); its answers to DO=1 queries are
//! built beside the unsigned ones and carry RRSIGs and compact denials.
//!
//! A zone's versions as secondaries see them (its file's records and its
//! services' replicas) and their serials are made by [`versions`]; the
//! differences between the last few (for IXFR) are kept by [`journal`].

pub mod encode;
pub mod journal;
pub mod load;
pub mod lookup;
mod presentation;
pub mod set;
pub mod signed;
pub mod text;
pub mod versions;
pub mod zone;

pub use encode::{Body, Fitted};
pub use lookup::Answer;
pub use set::{Lookup, TwiceConfigured, ZoneSet};

pub use load::{LoadError, load_zone_file, parse_records, parse_zone_text, zone_from_records};

pub use zone::{Node, Rrset, Unreservable, WhyUnreservable, Zone};
