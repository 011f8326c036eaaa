//! Artemis (Fudan, 2022) on Pharos's routing core: a client connects to a
//! service address computed from the name, with no DNS round trip, and
//! the dispatcher behind that address routes the QUIC handshake.
//!
//! - [`service_id`]: the ServiceID mapping, name -> service address
//!   (operator prefix + leading bits of SHA-512), with the conflict list
//!   consulted first. `pharos sid` prints it.
pub mod service_id;
