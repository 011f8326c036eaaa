//! The integration tests of pharos-artemis-quic, one module per subject,
//! in one test binary (one link instead of one per file).

mod aioquic;
mod client;
mod replica;
