//! The routing state as declared ([`State`]) and the changes made to it
//! ([`Change`]): what the store keeps and the snapshot is built from.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::spec::{DataCenterSpec, Declared, RegionSpec, ServiceSpec};
use crate::token::TokenSpec;
use crate::zone::ZoneSpec;

/// Everything stored, each list in order of its key (id or name, as
/// strings compare: the order the stores read them in), which changes keep
/// and lookups by name rely on. Serializable: a node of a fleet keeps a
/// copy of it locally.
///
/// Each service's declaration is shared between the states a change
/// makes: the next state copies a pointer per service it leaves alone
/// (the builder then knows it unchanged by that pointer), not the
/// service. (A persistent map would make the copy itself cheaper, but
/// every build walks every service anyway, and the list keeps the order
/// and serialized form the store and the state cache have.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub datacenters: Vec<DataCenterSpec>,
    pub regions: Vec<RegionSpec>,
    pub services: Vec<Arc<ServiceSpec>>,
    /// The control API's named tokens (routing ignores them); a state
    /// cached before there were any reads back without.
    #[serde(default)]
    pub tokens: Vec<TokenSpec>,
    /// The zones kept in the store (file zones are the config's); a state
    /// cached before there were any reads back without.
    #[serde(default)]
    pub zones: Vec<Arc<ZoneSpec>>,
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
    /// Makes a token, or revokes it (a token is never deleted: its name
    /// stays taken).
    PutToken(TokenSpec),
    /// Makes or changes a store zone: the whole zone, each time.
    PutZone(ZoneSpec),
    DeleteZone(String),
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
            Change::PutToken(token) => ("tokens", &token.name),
            Change::PutZone(zone) => ("zones", &zone.name),
            Change::DeleteZone(name) => ("zones", name),
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
                Change::PutDataCenter(datacenter) => put(&mut self.datacenters, &datacenter.id, || datacenter.clone(), |known| &known.id),
                Change::DeleteDataCenter(id) => delete(&mut self.datacenters, id, |known| &known.id),
                Change::PutRegion(region) => put(&mut self.regions, &region.name, || region.clone(), |known| &known.name),
                Change::DeleteRegion(name) => delete(&mut self.regions, name, |known| &known.name),
                Change::PutService(service) => put(&mut self.services, &service.name, || Arc::new(service.clone()), |known| &known.name),
                Change::DeleteService(name) => delete(&mut self.services, name, |known| &known.name),
                Change::PutToken(token) => put(&mut self.tokens, &token.name, || token.clone(), |known| &known.name),
                Change::PutZone(zone) => put(&mut self.zones, &zone.name, || Arc::new(zone.clone()), |known| &known.name),
                Change::DeleteZone(name) => delete(&mut self.zones, name, |known| &known.name),
            }
        }
    }

    /// The declaration of the service `name`, found by its place in the
    /// order.
    pub fn service(&self, name: &str) -> Option<&Arc<ServiceSpec>> {
        let found = self.services.binary_search_by(|known| known.name.as_str().cmp(name));
        found.ok().map(|position| &self.services[position])
    }

    /// The store zone `name` (absolute, lowercase), found by its place in
    /// the order.
    pub fn zone(&self, name: &str) -> Option<&Arc<ZoneSpec>> {
        let found = self.zones.binary_search_by(|known| known.name.as_str().cmp(name));
        found.ok().map(|position| &self.zones[position])
    }

    /// Everything declared, as the routing core's builder takes it.
    pub fn declared(&self) -> Declared<'_> {
        Declared { datacenters: &self.datacenters, regions: &self.regions, services: &self.services, zones: &self.zones }
    }
}

/// Puts `made()` in `list`, in place of the item keyed `name` if there is
/// one, else at its place in the key order.
fn put<T>(list: &mut Vec<T>, name: &str, made: impl FnOnce() -> T, key: impl Fn(&T) -> &String) {
    match list.binary_search_by(|known| key(known).as_str().cmp(name)) {
        Ok(position) => list[position] = made(),
        Err(position) => list.insert(position, made()),
    }
}

/// Takes the item keyed `name` out of `list`, if it is there.
fn delete<T>(list: &mut Vec<T>, name: &str, key: impl Fn(&T) -> &String) {
    if let Ok(position) = list.binary_search_by(|known| key(known).as_str().cmp(name)) {
        list.remove(position);
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

    #[test]
    fn a_change_shares_the_services_it_leaves_alone_and_keeps_the_order() {
        let before = State::default().with(&[service("c.example.", 1), service("a.example.", 1), service("e.example.", 1)]);
        let after = before.with(&[service("d.example.", 2), service("a.example.", 3), Change::DeleteService("e.example.".into())]);
        let names: Vec<&str> = after.services.iter().map(|spec| spec.name.as_str()).collect();
        assert_eq!(names, ["a.example.", "c.example.", "d.example."]);
        assert!(Arc::ptr_eq(before.service("c.example.").unwrap(), after.service("c.example.").unwrap()), "left alone: shared");
        assert_eq!((before.service("a.example.").unwrap().ttl, after.service("a.example.").unwrap().ttl), (1, 3));
        assert!(after.service("e.example.").is_none() && after.service("b.example.").is_none());
    }
}
