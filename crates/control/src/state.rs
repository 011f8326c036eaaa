//! The routing state as declared ([`State`]) and the changes made to it
//! ([`Change`]): what the store keeps and the snapshot is built from.

use serde::{Deserialize, Serialize};

use crate::spec::{DataCenterSpec, Declared, RegionSpec, ServiceSpec};

/// Everything stored, in a stable order (by name). Serializable: a node
/// of a fleet keeps a copy of it locally.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub datacenters: Vec<DataCenterSpec>,
    pub regions: Vec<RegionSpec>,
    pub services: Vec<ServiceSpec>,
}

/// One change to the state. A batch of them is applied all or nothing.
/// Serializable: a shared store logs each batch for the nodes that follow it.
// A service's declaration is much bigger than the other variants; changes
// are few and short-lived, so boxing it would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Change {
    PutDataCenter(DataCenterSpec),
    DeleteDataCenter(String),
    PutRegion(RegionSpec),
    DeleteRegion(String),
    PutService(ServiceSpec),
    DeleteService(String),
}

impl Change {
    /// The kind of entity changed (its table) and the entity's name.
    pub fn key(&self) -> (&'static str, &str) {
        match self {
            Change::PutDataCenter(datacenter) => ("datacenters", &datacenter.id),
            Change::DeleteDataCenter(id) => ("datacenters", id),
            Change::PutRegion(region) => ("regions", &region.name),
            Change::DeleteRegion(name) => ("regions", name),
            Change::PutService(service) => ("services", &service.name),
            Change::DeleteService(name) => ("services", name),
        }
    }

    /// `changes` without those a later one overrides: each change sets or
    /// removes one whole entity, kept sorted by name, so only the last
    /// change of each entity shapes the state after them. In an update
    /// storm a batch then writes each service once, not once per upload.
    pub fn coalesced(changes: Vec<Change>) -> Vec<Change> {
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<Change> = changes
            .into_iter()
            .rev()
            .filter(|change| {
                let (table, name) = change.key();
                seen.insert((table, name.to_owned()))
            })
            .collect();
        kept.reverse();
        kept
    }
}

impl State {
    /// The state after `changes`, in memory (the store is not touched).
    pub fn with(&self, changes: &[Change]) -> State {
        let mut next = self.clone();
        next.apply(changes);
        next
    }

    /// Makes `changes` to this copy, in memory (the store is not touched).
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            match change {
                Change::PutDataCenter(datacenter) => upsert(&mut self.datacenters, datacenter, |known| &known.id),
                Change::DeleteDataCenter(id) => self.datacenters.retain(|known| known.id != *id),
                Change::PutRegion(region) => upsert(&mut self.regions, region, |known| &known.name),
                Change::DeleteRegion(name) => self.regions.retain(|known| known.name != *name),
                Change::PutService(service) => upsert(&mut self.services, service, |known| &known.name),
                Change::DeleteService(name) => self.services.retain(|known| known.name != *name),
            }
        }
    }
}

/// Puts `item` in `list`, replacing the one with its key, and keeps the
/// list in key order (the sort is linear on a list already in order).
fn upsert<T: Clone>(list: &mut Vec<T>, item: &T, key: impl Fn(&T) -> &String) {
    match list.iter().position(|known| key(known) == key(item)) {
        Some(position) => list[position] = item.clone(),
        None => {
            list.push(item.clone());
            list.sort_by(|a, b| key(a).cmp(key(b)));
        }
    }
}

impl State {
    /// Everything declared, as the routing core's builder takes it.
    pub fn declared(&self) -> Declared<'_> {
        Declared { datacenters: &self.datacenters, regions: &self.regions, services: &self.services }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, ttl: u32) -> Change {
        let mut spec = ServiceSpec::new(name, "static", Vec::new());
        spec.ttl = ttl;
        Change::PutService(spec)
    }

    #[test]
    fn coalescing_keeps_the_last_change_of_each_entity_and_the_same_state() {
        let region = |name: &str| Change::PutRegion(RegionSpec { name: name.into(), ..RegionSpec::default() });
        let names = ["a.example.", "b.example.", "c.example."];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..500 {
            let mut changes = Vec::new();
            for _ in 0..(state % 12) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let name = names[(state % 3) as usize];
                changes.push(match (state >> 8) % 4 {
                    0 => Change::DeleteService(name.into()),
                    1 => region(name),
                    2 => Change::DeleteRegion(name.into()),
                    _ => service(name, (state >> 16) as u32 % 100),
                });
            }
            let coalesced = Change::coalesced(changes.clone());
            assert_eq!(State::default().with(&coalesced), State::default().with(&changes), "{changes:?}");
            let keys: std::collections::HashSet<_> = coalesced.iter().map(Change::key).collect();
            assert_eq!(keys.len(), coalesced.len(), "one change per entity");
        }
        let storm: Vec<Change> = (0..10).map(|ttl| service("a.example.", ttl)).collect();
        assert_eq!(Change::coalesced(storm), vec![service("a.example.", 9)]);
    }
}
