//! DNS UPDATE (RFC 2136) on the DNS listeners: an update is not answered
//! on the query path but handed, with the client it came from, to
//! whoever applies updates (the control plane, which commits it to the
//! store before it replies); the reply is sent back on the transport the
//! update came over once it is made. Without an applier configured, an
//! UPDATE is answered NOTIMP as any opcode Pharos does not serve.

use std::net::SocketAddr;

use pharos_wire::HEADER_LEN;

/// The UPDATE opcode (RFC 2136 section 1.3), in the header's flags.
const UPDATE: u8 = 5;

/// An UPDATE message as received.
#[derive(Debug, Clone)]
pub struct UpdateRequest {
    pub message: Vec<u8>,
    /// The client it came from (behind a proxy: the one the proxy named).
    pub client: SocketAddr,
    /// How it came: "udp", "tcp" or "tls".
    pub transport: &'static str,
}

/// Sends the reply to an update back to its client.
pub type Reply = Box<dyn FnOnce(Vec<u8>) + Send>;

/// Whoever applies updates: takes each one, and calls `reply` once with
/// the reply (or drops it, to send none).
pub trait Updates: Send + Sync + std::fmt::Debug {
    fn submit(&self, request: UpdateRequest, reply: Reply);
}

/// True for a request (QR clear) with the UPDATE opcode.
pub fn is_update(packet: &[u8]) -> bool {
    packet.len() >= HEADER_LEN && packet[2] & 0x80 == 0 && (packet[2] >> 3) & 0x0F == UPDATE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_with_the_update_opcode_are_updates() {
        let header = |flags: u8| [[0x12, 0x34, flags, 0].as_slice(), &[0; 8]].concat();
        assert!(is_update(&header(UPDATE << 3)));
        assert!(!is_update(&header(0x80 | UPDATE << 3)), "a response");
        assert!(!is_update(&header(0)), "a query");
        assert!(!is_update(&header(4 << 3)), "a NOTIFY");
        assert!(!is_update(&header(UPDATE << 3)[..11]), "shorter than a header");
    }
}
