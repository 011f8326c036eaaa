//! Regions from an external classifier process (MyXDNS's second design,
//! where Find_IP_Region lives outside the server).
//!
//! The query path must never wait on a socket, so it only reads a cache of
//! the classifier's answers, keyed by subnet, and queues the subnets it
//! missed. Something else (the server's classifier thread) asks the
//! process, with a timeout, and publishes the answers; until then, and
//! whenever the process fails, the client is unclassified.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use arc_swap::ArcSwap;

use crate::RegionId;
use crate::prefix::Bits;

/// How many unanswered subnets may wait; past that, misses are dropped
/// (they will be asked again on a later query).
const QUEUE: usize = 4096;

/// The cache of the classifier's answers and the queue of subnets to ask.
#[derive(Debug)]
pub struct ExternalRegions {
    answers: ArcSwap<HashMap<Bits, RegionId>>,
    misses: SyncSender<Bits>,
    /// Subnet sizes answers are cached for (and so the ECS scope).
    pub v4_prefix: u8,
    pub v6_prefix: u8,
}

/// The other end: subnets to ask about.
pub type Misses = Receiver<Bits>;

impl ExternalRegions {
    pub fn new(v4_prefix: u8, v6_prefix: u8) -> (Arc<ExternalRegions>, Misses) {
        let (misses, receiver) = sync_channel(QUEUE);
        let regions = ExternalRegions { answers: ArcSwap::default(), misses, v4_prefix: v4_prefix.min(32), v6_prefix: v6_prefix.min(128) };
        (Arc::new(regions), receiver)
    }

    /// The subnet `address` is cached under.
    pub fn subnet_of(&self, address: IpAddr) -> Bits {
        let bits = Bits::of(address);
        let length = if bits.width == 32 { self.v4_prefix } else { self.v6_prefix };
        let keep = if length == 0 { 0 } else { u128::MAX << (128 - length as u32) };
        Bits { value: bits.value & keep, width: bits.width }
    }

    /// The cached region of `address`'s subnet, or `None` (the subnet is
    /// queued to be asked, unless the queue is full).
    pub fn lookup(&self, address: IpAddr) -> Option<RegionId> {
        let subnet = self.subnet_of(address);
        let found = self.answers.load().get(&subnet).copied();
        if found.is_none() {
            match self.misses.try_send(subnet) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        }
        found
    }

    /// Publishes a batch of answers (one pointer swap for the batch).
    pub fn publish(&self, batch: &[(Bits, RegionId)]) {
        if batch.is_empty() {
            return;
        }
        let mut next = HashMap::clone(&self.answers.load());
        next.extend(batch.iter().copied());
        self.answers.store(Arc::new(next));
    }

    /// Forgets every answer, so each subnet is asked again.
    pub fn clear(&self) {
        self.answers.store(Arc::default());
    }

    /// The prefix an address of this family is cached under.
    pub fn scope_for(&self, address: IpAddr) -> u8 {
        if address.is_ipv4() { self.v4_prefix } else { self.v6_prefix }
    }
}

/// Shows a cached subnet as `address/length`, as the classifier is asked.
pub fn subnet_text(subnet: Bits, prefix: u8) -> String {
    let address = if subnet.width == 32 {
        IpAddr::from(((subnet.value >> 96) as u32).to_be_bytes())
    } else {
        IpAddr::from(subnet.value.to_be_bytes())
    };
    format!("{address}/{prefix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_are_queued_and_answers_are_served_once_published() {
        let (regions, misses) = ExternalRegions::new(24, 56);
        let client: IpAddr = "203.0.113.77".parse().unwrap();
        assert_eq!(regions.lookup(client), None);
        let asked = misses.try_recv().unwrap();
        assert_eq!(subnet_text(asked, 24), "203.0.113.0/24");
        regions.publish(&[(asked, 7)]);
        assert_eq!(regions.lookup("203.0.113.1".parse().unwrap()), Some(7));
        assert!(misses.try_recv().is_err(), "a hit queues nothing");
        let v6 = regions.subnet_of("2001:db8:1:2ff:3::1".parse().unwrap());
        assert_eq!(subnet_text(v6, 56), "2001:db8:1:200::/56");
    }
}
