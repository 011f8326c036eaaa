//! quinn's connection IDs in the layout of `pharos_artemis::replica_cid`,
//! so the dispatcher can forward a connection's later packets to the
//! replica that issued them without keeping state.

use pharos_artemis::replica_cid::{self, REPLICA_CID_LEN};
use quinn::ConnectionId;
use quinn_proto::InvalidCid;
use ring::rand::{SecureRandom, SystemRandom};

/// Issues this replica's connection IDs with random nonces.
pub struct ReplicaCidGenerator {
    replica_id: u16,
    random: SystemRandom,
}

impl ReplicaCidGenerator {
    pub fn new(replica_id: u16) -> Self {
        Self { replica_id, random: SystemRandom::new() }
    }
}

impl quinn::ConnectionIdGenerator for ReplicaCidGenerator {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut nonce = [0; 5];
        self.random.fill(&mut nonce).expect("the system's random source works");
        ConnectionId::new(&replica_cid::encode(self.replica_id, nonce))
    }

    /// Packets whose ID names another replica were misrouted: quinn drops
    /// them cheaply instead of looking them up.
    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        match replica_cid::decode(cid) {
            Some(id) if id == self.replica_id => Ok(()),
            _ => Err(InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        REPLICA_CID_LEN
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use quinn::ConnectionIdGenerator;

    use super::*;

    #[test]
    fn issues_distinct_ids_naming_the_replica_and_refuses_others() {
        let mut generator = ReplicaCidGenerator::new(0x0102);
        let first = generator.generate_cid();
        let second = generator.generate_cid();
        assert_ne!(first, second);
        for cid in [first, second] {
            assert_eq!(cid.len(), REPLICA_CID_LEN);
            assert_eq!(replica_cid::decode(&cid), Some(0x0102));
            assert!(generator.validate(&cid).is_ok());
        }
        let other = ConnectionId::new(&replica_cid::encode(7, [0; 5]));
        assert!(generator.validate(&other).is_err());
        assert!(generator.validate(&ConnectionId::new(&[0; 8])).is_err());
    }
}
