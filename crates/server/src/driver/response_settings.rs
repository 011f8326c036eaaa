//! The settings every response is made with, from the configuration:
//! `[server]`'s, the `[[tsig_key]]`s with their secrets read, and who may
//! transfer each zone.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pharos_answer::{Settings, TransferAcl, TransferRule, TsigAlgorithm, TsigKey};
use pharos_model::spec::{NotADomainName, service_name};
use pharos_route::prefix::{ListedPrefixError, prefix_set};

use crate::config::Config;

/// Why the response settings cannot be made from the configuration's
/// `[server]`, `[[tsig_key]]`s and zones' transfer lists.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A bad entry in a list of prefixes, named as `field[index]`.
    #[error(transparent)]
    Prefix(#[from] ListedPrefixError),
    #[error("tsig_key {key:?}: {problem}")]
    TsigKey { key: String, problem: TsigKeyProblem },
    #[error("tsig_key {0:?} is declared twice")]
    TsigKeyTwice(String),
    #[error("{0}: transfer_keys without allow_transfer lets nobody transfer; list the clients' prefixes")]
    KeysWithoutPrefixes(String),
    #[error("zone {zone} allow_transfer: {name}", zone = .0.text, name = .0)]
    TransferOrigin(NotADomainName),
    #[error("{place} transfer_keys[{index}]: no [[tsig_key]] is named {key:?}")]
    UnknownTransferKey { place: String, index: usize, key: String },
}

/// What is wrong with one `[[tsig_key]]`.
#[derive(Debug, thiserror::Error)]
pub enum TsigKeyProblem {
    #[error(transparent)]
    Name(NotADomainName),
    #[error("algorithm {0:?} is not offered ({offered} are)", offered = offered_algorithms())]
    Algorithm(String),
    #[error("give secret or secret_file, one of them")]
    SecretOrFile,
    #[error("cannot read {}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("the secret is not base64 ({0})")]
    NotBase64(base64::DecodeError),
    #[error("the secret is empty")]
    EmptySecret,
}

/// The TSIG algorithms a key may name, for an operator who named another.
fn offered_algorithms() -> String {
    let offered: Vec<&str> = TsigAlgorithm::ALL.iter().map(|algorithm| algorithm.name()).collect();
    offered.join(", ")
}

/// The response settings of `config`'s `[server]`, `[[tsig_key]]`s and
/// zones' transfer lists; a bad one is refused, named.
pub fn from_config(config: &Config) -> Result<Settings, SettingsError> {
    let server = &config.server;
    let trusted = server.client_subnet_trusted_from.as_deref();
    let trusted_subnet_senders = trusted.map(|prefixes| prefix_set("server.client_subnet_trusted_from", prefixes)).transpose()?;
    Ok(Settings {
        nsid: server.nsid.as_ref().map(|nsid| nsid.as_bytes().into()),
        udp_payload: server.udp_payload,
        trusted_subnet_senders,
        transfer_acls: transfer_acls(config)?,
        store_zone_transfers: store_zone_transfers(config)?,
        tsig_keys: tsig_keys(config)?,
    })
}

/// The `[[tsig_key]]`s, secrets read and decoded; a bad one is refused, named.
fn tsig_keys(config: &Config) -> Result<Vec<TsigKey>, SettingsError> {
    let mut keys: Vec<TsigKey> = Vec::new();
    for spec in &config.tsig_keys {
        let refused = |problem| SettingsError::TsigKey { key: spec.name.clone(), problem };
        let name = service_name(&spec.name).map_err(|error| refused(TsigKeyProblem::Name(error)))?;
        if keys.iter().any(|key| key.name == name) {
            return Err(SettingsError::TsigKeyTwice(spec.name.clone()));
        }
        let algorithm =
            TsigAlgorithm::from_name(&spec.algorithm).ok_or_else(|| refused(TsigKeyProblem::Algorithm(spec.algorithm.clone())))?;
        let text = match (&spec.secret, &spec.secret_file) {
            (Some(secret), None) => secret.clone(),
            (None, Some(file)) => {
                std::fs::read_to_string(file).map_err(|error| refused(TsigKeyProblem::Read { path: file.clone(), error }))?
            }
            _ => return Err(refused(TsigKeyProblem::SecretOrFile)),
        };
        let secret = STANDARD.decode(text.trim()).map_err(|error| refused(TsigKeyProblem::NotBase64(error)))?;
        if secret.is_empty() {
            return Err(refused(TsigKeyProblem::EmptySecret));
        }
        keys.push(TsigKey::new(name, algorithm, secret.into()));
    }
    Ok(keys)
}

/// Who may transfer each zone with an `allow_transfer` list, the catalog
/// (`[catalog]`) among them.
fn transfer_acls(config: &Config) -> Result<Vec<TransferAcl>, SettingsError> {
    let mut acls = Vec::new();
    for zone in config.all_zones() {
        let place = format!("zone {}", zone.origin);
        if let Some(transfers) = transfer_rule(config, &place, &zone.allow_transfer, &zone.transfer_keys)? {
            let origin = service_name(&zone.origin).map_err(SettingsError::TransferOrigin)?;
            acls.push(transfers.for_zone(&origin));
        }
    }
    if let Some(catalog) = &config.catalog
        && let Some(transfers) = transfer_rule(config, "catalog", &catalog.allow_transfer, &catalog.transfer_keys)?
    {
        let origin = service_name(&catalog.zone).map_err(SettingsError::TransferOrigin)?;
        acls.push(transfers.for_zone(&origin));
    }
    Ok(acls)
}

/// Who may transfer the zones kept in the store (`[store_zones]`).
fn store_zone_transfers(config: &Config) -> Result<Option<TransferRule>, SettingsError> {
    let store_zones = &config.store_zones;
    transfer_rule(config, "store_zones", &store_zones.allow_transfer, &store_zones.transfer_keys)
}

/// The prefixes and keys `place` lists (none if it lists no prefix),
/// each checked: the prefixes parse, the keys are declared.
fn transfer_rule(
    config: &Config,
    place: &str,
    allow_transfer: &[String],
    transfer_keys: &[String],
) -> Result<Option<TransferRule>, SettingsError> {
    if allow_transfer.is_empty() {
        return match transfer_keys.is_empty() {
            true => Ok(None),
            false => Err(SettingsError::KeysWithoutPrefixes(place.to_owned())),
        };
    }
    let keys = transfer_keys.iter().enumerate().map(|(index, key)| {
        let declared = config.tsig_keys.iter().any(|spec| spec.name.trim_end_matches('.').eq_ignore_ascii_case(key.trim_end_matches('.')));
        let unknown = || SettingsError::UnknownTransferKey { place: place.to_owned(), index, key: key.clone() };
        if declared { service_name(key).map_err(|_| unknown()) } else { Err(unknown()) }
    });
    Ok(Some(TransferRule {
        allowed: prefix_set(&format!("{place} allow_transfer"), allow_transfer)?,
        keys: keys.collect::<Result<_, _>>()?,
    }))
}
