//! Artemis over QUIC, with quinn: the sockets side of `pharos-artemis`.
//!
//! - [`tls`]: quinn's crypto traits over rustls, our own, so the replica
//!   can send `service_ttl` and both sides keep the peer's raw transport
//!   parameters.
//! - [`params`]: `service_ttl` (0xff00) written, and read with
//!   `preferred_address` (0x0d) from a peer's raw parameters.
//! - [`cid`]: quinn's connection IDs in the replica-naming layout of
//!   `pharos_artemis::replica_cid`.
//! - [`replica`]: the replica server (`pharos replica`).
//! - `retry`: the Retry integrity tag a client checks.
pub mod cid;
pub mod params;
pub mod replica;
mod retry;
pub mod tls;
