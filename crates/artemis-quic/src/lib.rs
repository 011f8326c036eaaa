//! Artemis on sockets: the replica and the client over quinn, and the
//! dispatcher over VXLAN; the sockets side of the sans-IO `pharos-artemis`.
//!
//! - [`tls`]: quinn's crypto traits over rustls, our own, so the replica
//!   can send `service_ttl` and both sides keep the peer's raw transport
//!   parameters.
//! - [`params`]: `service_ttl` (0xff00) written, and read with
//!   `preferred_address` (0x0d) from a peer's raw parameters.
//! - [`cid`]: quinn's connection IDs in the replica-naming layout of
//!   `pharos_artemis::replica_cid`.
//! - [`socket`]: quinn's UDP socket with a hook on each datagram's
//!   address: the replica counts arrivals at the service address, the
//!   client moves to the preferred address.
//! - [`replica`]: the replica server (`pharos replica`): the greeting,
//!   and HTTP/3 through [`http3`], one page naming the replica.
//! - [`client`]: the client (`pharos connect`): service address, move to
//!   the replica, and [`cache`]: name -> replica for the service_ttl.
//! - [`vxlan`]: the frame that carries a client's datagram, whole, to a
//!   replica's host.
//! - [`interdc`]: the tunnel that carries a client's datagram, whole, to
//!   another data center's dispatcher, tagged (HMAC-SHA256) under the
//!   dispatchers' shared key and timed against replays.
//! - [`dispatcher`]: the Service Dispatcher on sockets (`pharos
//!   dispatcher`): its configuration, and the loop that asks the sans-IO
//!   dispatcher and tunnels by VXLAN, or to a peer dispatcher.
//! - `retry`: the Retry integrity tag a client checks.
pub mod cache;
pub mod cid;
pub mod client;
pub mod dispatcher;
pub mod http3;
pub mod interdc;
pub mod params;
pub mod replica;
mod retry;
pub mod socket;
pub mod tls;
pub mod vxlan;
