//! The client's memory of where each name's replica is: name -> the
//! replica's preferred address, valid for the service_ttl it sent (time
//! passed in).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pharos_artemis::service_id::CanonicalName;

#[derive(Debug, Default)]
pub struct ReplicaCache {
    entries: HashMap<CanonicalName, (SocketAddr, Instant)>,
}

impl ReplicaCache {
    /// The replica to connect straight to, if one is still valid at `now`;
    /// an expired entry is forgotten.
    pub fn get(&mut self, name: &CanonicalName, now: Instant) -> Option<SocketAddr> {
        match self.entries.get(name) {
            Some(&(replica, expires)) if now < expires => Some(replica),
            Some(_) => {
                self.entries.remove(name);
                None
            }
            None => None,
        }
    }

    /// Remembers `replica` for `ttl` from `now` (a ttl of zero: not at all).
    pub fn insert(&mut self, name: CanonicalName, replica: SocketAddr, ttl: Duration, now: Instant) {
        match now.checked_add(ttl).filter(|_| !ttl.is_zero()) {
            Some(expires) => self.entries.insert(name, (replica, expires)),
            None => self.entries.remove(&name),
        };
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_for_its_ttl_then_is_forgotten() {
        let name = CanonicalName::new("WWW.Example.com.").unwrap();
        let replica: SocketAddr = "192.0.2.11:443".parse().unwrap();
        let start = Instant::now();
        let mut cache = ReplicaCache::default();
        cache.insert(name.clone(), replica, Duration::from_secs(30), start);
        assert_eq!(cache.get(&CanonicalName::new("www.example.com").unwrap(), start), Some(replica));
        assert_eq!(cache.get(&name, start + Duration::from_millis(29_999)), Some(replica));
        assert_eq!(cache.get(&name, start + Duration::from_secs(30)), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn a_zero_ttl_or_one_past_the_clock_caches_nothing_and_replaces_the_old_entry() {
        let name = CanonicalName::new("a.example").unwrap();
        let start = Instant::now();
        let mut cache = ReplicaCache::default();
        cache.insert(name.clone(), "192.0.2.1:1".parse().unwrap(), Duration::from_secs(5), start);
        cache.insert(name.clone(), "192.0.2.2:1".parse().unwrap(), Duration::ZERO, start);
        assert_eq!(cache.get(&name, start), None);
        cache.insert(name.clone(), "192.0.2.3:1".parse().unwrap(), Duration::MAX, start);
        assert_eq!(cache.len(), 0);
    }
}
