//! DNSSEC for Pharos, free of I/O: what signs, and what it makes.
//!
//! - [`keys`]: a zone's keys (generated with `ring`, kept as text in the
//!   store, shown as DNSKEY and DS records) and the times each enters its
//!   states (published, active, retired, removed);
//! - [`rollover`]: ZSK rollover by pre-publication and KSK rollover by
//!   double signature, timed from the zone's TTLs;
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
pub mod rollover;
pub mod sign;

pub use keys::{Algorithm, KeyState, KeyTimes, Role, ZoneKey, ZoneKeys};
pub use rollover::{RolloverError, Timings};
pub use sign::{NSEC, NXNAME, NoActiveKeys, Signer, Window, nsec_chain, nsec_rdata};
