//! DNSSEC for Pharos, free of I/O: what signs, and what it makes.
//!
//! - [`keys`]: a zone's keys (generated with `ring`, kept as text in the
//!   store, shown as DNSKEY and DS records);
//! - [`sign`]: the [`Signer`] of one zone, which makes the RRSIG records
//!   over an RRset (RFC 4034 section 3, RFC 4035 section 2.2) for a
//!   validity [`Window`] (those made per query kept in a bounded cache,
//!   one signature per RRset whatever its order), and the NSEC records of
//!   compact denial of existence (RFC 9824).
//!
//! The zone crate asks a [`Signer`] for signatures at load, and for the
//! few records it makes per query (denials of names that do not exist,
//! wildcard expansions); the answer crate for the addresses a routing
//! policy chose.

pub mod keys;
pub mod sign;

pub use keys::{Algorithm, Role, ZoneKey, ZoneKeys};
pub use sign::{NSEC, NXNAME, Signer, Window, nsec_rdata};
