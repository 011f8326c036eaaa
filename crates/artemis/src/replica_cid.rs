//! Connection IDs that name their replica, so the dispatcher forwards a
//! connection's later packets with no per-connection state (QUIC-LB,
//! draft-ietf-quic-load-balancers, plaintext server IDs).
//!
//! Layout, 8 bytes:
//!
//! ```text
//! byte 0      config rotation (3 bits, always 0) | length - 1 (5 bits) = 0x07
//! bytes 1-2   replica id, big-endian
//! bytes 3-7   nonce, chosen by the replica, unique per connection ID
//! ```
//!
//! Short-header packets carry no length, so every replica of a dispatcher
//! issues IDs of this one length.

/// The length of every replica-issued connection ID.
pub const REPLICA_CID_LEN: usize = 8;
/// Config rotation 0, self-encoded length.
const FIRST_BYTE: u8 = (REPLICA_CID_LEN - 1) as u8;

/// The connection ID for replica `replica_id` with `nonce`.
pub fn encode(replica_id: u16, nonce: [u8; 5]) -> [u8; REPLICA_CID_LEN] {
    let mut id = [0; REPLICA_CID_LEN];
    id[0] = FIRST_BYTE;
    id[1..3].copy_from_slice(&replica_id.to_be_bytes());
    id[3..].copy_from_slice(&nonce);
    id
}

/// The replica id a connection ID names, if it has this layout.
pub fn decode(id: &[u8]) -> Option<u16> {
    match id {
        [FIRST_BYTE, high, low, _, _, _, _, _] => Some(u16::from_be_bytes([*high, *low])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_layouts() {
        for replica_id in [0, 1, 0x1234, u16::MAX] {
            assert_eq!(decode(&encode(replica_id, [9, 8, 7, 6, 5])), Some(replica_id));
        }
        let mut other_rotation = encode(3, [0; 5]);
        other_rotation[0] |= 0x20;
        assert_eq!(decode(&other_rotation), None);
        assert_eq!(decode(&encode(3, [0; 5])[..7]), None);
        assert_eq!(decode(&[0x07; 9]), None);
    }
}
