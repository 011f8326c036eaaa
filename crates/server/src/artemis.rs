//! Artemis in the operator's view: the `[artemis]` section (the service
//! prefix, the conflict list, the services with Artemis enabled), the
//! Address Manager's allocation of their service addresses for `GET
//! /v1/artemis`, and the service a service address stands for, so that
//! `explain` can say where the dispatcher would send a client's handshake.

use std::net::IpAddr;

use pharos_artemis::address_manager::allocate;
use pharos_artemis::service_id::{CanonicalName, ConflictList, ConflictListError, PrefixError, ServiceIdMap, ServicePrefix};
pub use pharos_model::api::{AddressView, ServiceAddress};
use serde::Deserialize;

/// `[artemis]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArtemisSection {
    prefix: String,
    #[serde(default)]
    conflicts: String,
    services: Vec<String>,
}

/// `[artemis]`, checked as the file is read: a bad prefix or conflict
/// list stops the start, named.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "ArtemisSection")]
pub struct ArtemisConfig {
    map: ServiceIdMap,
    /// The services with Artemis enabled, as configured.
    services: Vec<String>,
}

/// Why `[artemis]` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ArtemisSectionError {
    #[error("[artemis] prefix: {0}")]
    Prefix(#[from] PrefixError),
    #[error("[artemis] conflicts: {0}")]
    Conflicts(#[from] ConflictListError),
}

impl TryFrom<ArtemisSection> for ArtemisConfig {
    type Error = ArtemisSectionError;

    fn try_from(section: ArtemisSection) -> Result<Self, ArtemisSectionError> {
        let prefix: ServicePrefix = section.prefix.parse()?;
        let conflicts = ConflictList::parse(&section.conflicts, &prefix)?;
        Ok(Self { map: ServiceIdMap::new(prefix, conflicts), services: section.services })
    }
}

impl ArtemisConfig {
    pub fn view(&self) -> AddressView {
        let allocation = allocate(&self.services, &self.map);
        let services = allocation
            .addresses
            .iter()
            .map(|(name, &address)| ServiceAddress {
                name: name.to_string(),
                address,
                from_conflict_list: self.map.conflicts.get(name).is_some(),
            })
            .collect();
        let problems = allocation.problems.iter().map(ToString::to_string).collect();
        AddressView { prefix: self.map.prefix.to_string(), services, problems }
    }

    /// The service whose address `address` is, once allocated: a name
    /// whose address another keeps, or a reserved one, has none.
    pub fn service_at(&self, address: IpAddr) -> Option<CanonicalName> {
        allocate(&self.services, &self.map).addresses.into_iter().find(|&(_, allocated)| allocated == address).map(|(name, _)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ArtemisConfig, String> {
        toml::from_str(text).map_err(|error: toml::de::Error| error.message().to_owned())
    }

    #[test]
    fn the_view_lists_each_address_and_where_it_came_from() {
        let config =
            parse("prefix = \"192.0.2.0/24\"\nconflicts = \"a.example 192.0.2.9\"\nservices = [\"A.example.\", \"www.example.com\"]")
                .unwrap();
        let view = config.view();
        assert_eq!(view.prefix, "192.0.2.0/24");
        let listed: Vec<(&str, String, bool)> =
            view.services.iter().map(|service| (service.name.as_str(), service.address.to_string(), service.from_conflict_list)).collect();
        // www.example.com hashes to .97 under this prefix (see `pharos sid`).
        assert_eq!(listed, [("a.example", "192.0.2.9".into(), true), ("www.example.com", "192.0.2.97".into(), false)]);
        assert!(view.problems.is_empty());
        assert_eq!(config.service_at("192.0.2.97".parse().unwrap()).unwrap().as_str(), "www.example.com");
        assert_eq!(config.service_at("192.0.2.98".parse().unwrap()), None);
    }

    #[test]
    fn problems_are_listed_and_a_bad_section_is_refused_by_name() {
        let config = parse("prefix = \"192.0.2.0/24\"\nservices = [\"bad_name\", \"www.example.com\"]").unwrap();
        assert_eq!(config.view().services.len(), 1);
        assert_eq!(config.view().problems.len(), 1, "{:?}", config.view().problems);
        assert!(parse("prefix = \"192.0.2.1/24\"\nservices = []").unwrap_err().starts_with("[artemis] prefix:"));
        let outside = parse("prefix = \"192.0.2.0/24\"\nconflicts = \"a.example 198.51.100.1\"\nservices = []");
        assert!(outside.unwrap_err().starts_with("[artemis] conflicts:"));
        assert!(parse("prefix = \"192.0.2.0/24\"\nservices = []\ncolour = 1").unwrap_err().contains("unknown field"));
    }
}
