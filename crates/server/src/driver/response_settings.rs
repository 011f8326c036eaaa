//! The settings every response is made with, from the configuration:
//! `[server]`'s, the `[[tsig_key]]`s with their secrets read, who may
//! transfer each zone, and who may NOTIFY each secondary zone; and the
//! keys secondary zones' transfers are signed with.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pharos_answer::{NotifyAcl, Settings, TransferAcl, TransferRule, TsigAlgorithm, TsigKey};
use pharos_model::spec::{NotADomainName, service_name};
use pharos_route::prefix::{ListedPrefixError, prefix_set};

use crate::config::{Config, TsigKeyConfig};

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
    #[error("zone {zone} primaries[{index}].key: no [[tsig_key]] is named {key:?}")]
    UnknownPrimaryKey { zone: String, index: usize, key: String },
    #[error(
        "zone {zone} primaries[{index}].key: {key:?} is {algorithm}, which transfers in do not offer (hmac-sha1, -sha256, -sha384 and -sha512 do)"
    )]
    PrimaryKeyAlgorithm { zone: String, index: usize, key: String, algorithm: &'static str },
    #[error("zone {zone} notify_from: {name}", zone = .0.text, name = .0)]
    SecondaryOrigin(NotADomainName),
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
        notify_acls: notify_acls(config)?,
    })
}

/// Who may NOTIFY each secondary zone: its `notify_from` prefixes, else
/// its primaries' addresses. Its primaries' keys are checked here too.
fn notify_acls(config: &Config) -> Result<Vec<NotifyAcl>, SettingsError> {
    let secondaries = config.all_zones().filter(|zone| !zone.primaries.is_empty());
    secondaries
        .map(|zone| {
            for (index, primary) in zone.primaries.iter().enumerate() {
                if let Some(key) = &primary.key {
                    primary_key(config, &zone.origin, index, key)?;
                }
            }
            let host = |ip: std::net::IpAddr| format!("{ip}/{}", if ip.is_ipv4() { 32 } else { 128 });
            let primaries = || zone.primaries.iter().map(|primary| host(primary.address.ip())).collect();
            let allowed = zone.notify_from.clone().unwrap_or_else(primaries);
            Ok(NotifyAcl {
                zone: service_name(&zone.origin).map_err(SettingsError::SecondaryOrigin)?,
                allowed: prefix_set(&format!("zone {} notify_from", zone.origin), &allowed)?,
            })
        })
        .collect()
}

/// The key the `index`th primary of the secondary zone `zone` signs its
/// transfers with, named `name`, for the `domain` crate's client side.
pub fn primary_key(config: &Config, zone: &str, index: usize, name: &str) -> Result<pharos_secondary::TsigKey, SettingsError> {
    let unknown = || SettingsError::UnknownPrimaryKey { zone: zone.into(), index, key: name.into() };
    let spec = config.tsig_keys.iter().find(|spec| same_key_name(&spec.name, name)).ok_or_else(unknown)?;
    let ReadKey { algorithm, secret, .. } = read_key(spec)?;
    let refused = || SettingsError::PrimaryKeyAlgorithm { zone: zone.into(), index, key: name.into(), algorithm: algorithm.name() };
    let algorithm: domain::tsig::Algorithm = algorithm.name().parse().map_err(|_| refused())?;
    let key_name = name.parse().map_err(|_| unknown())?;
    let key = domain::tsig::Key::new(algorithm, &secret, key_name, None, None).map_err(|_| refused())?;
    Ok(std::sync::Arc::new(key))
}

/// True when two `[[tsig_key]]` names name the same key.
fn same_key_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.').eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// The `[[tsig_key]]`s, secrets read and decoded; a bad one is refused, named.
fn tsig_keys(config: &Config) -> Result<Vec<TsigKey>, SettingsError> {
    let mut keys: Vec<TsigKey> = Vec::new();
    for spec in &config.tsig_keys {
        let ReadKey { name, algorithm, secret } = read_key(spec)?;
        if keys.iter().any(|key| key.name == name) {
            return Err(SettingsError::TsigKeyTwice(spec.name.clone()));
        }
        keys.push(TsigKey::new(name, algorithm, secret.into()));
    }
    Ok(keys)
}

/// A `[[tsig_key]]` read: its name (wire form), algorithm and secret.
struct ReadKey {
    name: Box<[u8]>,
    algorithm: TsigAlgorithm,
    secret: Vec<u8>,
}

fn read_key(spec: &TsigKeyConfig) -> Result<ReadKey, SettingsError> {
    let refused = |problem| SettingsError::TsigKey { key: spec.name.clone(), problem };
    let name = service_name(&spec.name).map_err(|error| refused(TsigKeyProblem::Name(error)))?;
    let algorithm = TsigAlgorithm::from_name(&spec.algorithm).ok_or_else(|| refused(TsigKeyProblem::Algorithm(spec.algorithm.clone())))?;
    let text = match (&spec.secret, &spec.secret_file) {
        (Some(secret), None) => secret.clone(),
        (None, Some(file)) => std::fs::read_to_string(file).map_err(|error| refused(TsigKeyProblem::Read { path: file.clone(), error }))?,
        _ => return Err(refused(TsigKeyProblem::SecretOrFile)),
    };
    let secret = STANDARD.decode(text.trim()).map_err(|error| refused(TsigKeyProblem::NotBase64(error)))?;
    if secret.is_empty() {
        return Err(refused(TsigKeyProblem::EmptySecret));
    }
    Ok(ReadKey { name, algorithm, secret })
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
        let declared = config.tsig_keys.iter().any(|spec| same_key_name(&spec.name, key));
        let unknown = || SettingsError::UnknownTransferKey { place: place.to_owned(), index, key: key.clone() };
        if declared { service_name(key).map_err(|_| unknown()) } else { Err(unknown()) }
    });
    Ok(Some(TransferRule {
        allowed: prefix_set(&format!("{place} allow_transfer"), allow_transfer)?,
        keys: keys.collect::<Result<_, _>>()?,
    }))
}
