//! Artemis (Li et al., ICPP 2019) on Pharos's routing core: a client connects to a
//! service address computed from the name, with no DNS round trip, and
//! the dispatcher behind that address routes the QUIC handshake.
//!
//! - [`service_id`]: the ServiceID mapping, name -> service address
//!   (operator prefix + leading bits of SHA-512), with the conflict list
//!   consulted first. `pharos sid` prints it.
//! - [`address_manager`]: allocates the addresses of every Artemis
//!   service, finds collisions and reserved addresses, and suggests the
//!   conflict-list lines that fix them.
//! - [`initial`]: decrypts a client's QUIC v1/v2 Initials (keys from the
//!   DCID by rustls's key schedule) and reads their CRYPTO frames; answers
//!   unknown versions with Version Negotiation.
//! - [`client_hello`]: the bounded table that reassembles a ClientHello
//!   split over Initials, in any order, and reads its SNI and ALPN.
//! - [`replica_cid`]: connection IDs that name their replica (QUIC-LB
//!   style, plaintext), so later packets need no per-connection state.
//! - [`seal`]: Initials sealed as a client seals them, for the tests, the
//!   fuzz target and the benchmark.
//! - [`dispatcher`]: the Service Dispatcher's decision per datagram:
//!   forward to the replica the routing core chose (or to its data
//!   center's dispatcher), Version Negotiation, wait, or drop.
//!
//! All of it is sans-IO: bytes and the time in, decisions out.
pub mod address_manager;
pub mod client_hello;
pub mod dispatcher;
pub mod initial;
pub mod replica_cid;
pub mod seal;
pub mod service_id;
