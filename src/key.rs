//! `pharos key`: a zone's DNSSEC keys, generated into the store and shown
//! as the DNSKEY and DS records to publish.
//!
//! It opens the store itself (the one a server's configuration names, or a
//! SQLite file) rather than asking a running server: keys are made before a
//! zone is first signed, often before any server runs, and both stores are
//! safe to share with one.

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::bail;
use clap::{Args, Subcommand};
use domain::base::{Name, ToName};
use pharos_dnssec::{Algorithm, Role, ZoneKey, ZoneKeys};
use pharos_server::config::{Config, StoreConfig};
use pharos_server::control::open_store;
use pharos_store::Store;
use ring::rand::SystemRandom;

/// The TTL printed on the records (the zone's own TTL applies once signed).
const SHOWN_TTL: u32 = 3600;

#[derive(Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    command: KeyCommand,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Generate a zone's keys into the store (a CSK by default) and print their DNSKEY and DS.
    Generate {
        #[command(flatten)]
        target: Target,
        /// ecdsap256sha256 (13) or ed25519 (15).
        #[arg(long, default_value = "ecdsap256sha256")]
        algorithm: String,
        /// One combined signing key (the default).
        #[arg(long, conflicts_with = "ksk_zsk")]
        csk: bool,
        /// A key-signing key and a zone-signing key.
        #[arg(long)]
        ksk_zsk: bool,
    },
    /// Print the DNSKEY and DS records of a zone's keys.
    Show {
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Args)]
struct Target {
    /// The server's configuration file: its [store] (path or url) keeps the keys.
    #[arg(long, short, required_unless_present = "store", conflicts_with = "store")]
    config: Option<PathBuf>,
    /// A SQLite store file, as [store] path names it.
    #[arg(long)]
    store: Option<PathBuf>,
    /// The zone, e.g. example.com.
    zone: String,
}

impl Target {
    /// The zone's name, lowercase: records are printed as zone files write them.
    fn zone(&self) -> anyhow::Result<Name<Vec<u8>>> {
        let zone: Name<Vec<u8>> =
            Name::from_str(&self.zone).map_err(|error| anyhow::anyhow!("zone {:?} is not a domain name: {error}", self.zone))?;
        Ok(zone.to_canonical_name())
    }

    fn open_store(&self) -> anyhow::Result<Box<dyn Store>> {
        let store_config = match (&self.config, &self.store) {
            (Some(path), _) => Config::from_file(path)?.store,
            (None, path) => StoreConfig { path: path.clone(), url: None },
        };
        if store_config.path.is_none() && store_config.url.is_none() {
            bail!("the configuration names no store ([store] path or url): keys kept in memory would be lost");
        }
        open_store(&store_config)
    }

    /// Where the keys are, for messages (never the url, which may hold a password).
    fn where_kept(&self) -> String {
        match (&self.config, &self.store) {
            (Some(config), _) => format!("the store of {}", config.display()),
            (None, store) => store.iter().map(|path| path.display().to_string()).collect(),
        }
    }
}

pub fn run(args: KeyArgs) -> anyhow::Result<()> {
    let random = SystemRandom::new();
    match args.command {
        KeyCommand::Generate { target, algorithm, ksk_zsk, .. } => {
            let algorithm = Algorithm::from_name(&algorithm)?;
            let zone = target.zone()?;
            let mut store = target.open_store()?;
            let setting = ZoneKeys::setting_name(&zone);
            if store.setting(&setting)?.is_some() {
                bail!("zone {} already has keys in {}; rolling them over is not supported yet", target.zone, target.where_kept());
            }
            let roles: &[Role] = if ksk_zsk { &[Role::Ksk, Role::Zsk] } else { &[Role::Csk] };
            let keys = ZoneKeys { keys: roles.iter().map(|role| ZoneKey::generate(algorithm, *role, &random)).collect::<Result<_, _>>()? };
            store.set_setting(&setting, &keys.to_setting())?;
            print_records(&keys, &zone);
        }
        KeyCommand::Show { target } => {
            let zone = target.zone()?;
            let mut store = target.open_store()?;
            let Some(text) = store.setting(&ZoneKeys::setting_name(&zone))? else {
                bail!("zone {} has no keys in {}: run `pharos key generate` first", target.zone, target.where_kept());
            };
            print_records(&ZoneKeys::from_setting(&text, &random)?, &zone);
        }
    }
    Ok(())
}

/// Every key's DNSKEY, then a DS for each key the parent should point at.
fn print_records(keys: &ZoneKeys, zone: &Name<Vec<u8>>) {
    for key in &keys.keys {
        println!("{}", key.dnskey_record(zone, SHOWN_TTL));
    }
    for key in keys.keys.iter().filter(|key| key.role.signs_keys()) {
        println!("{}", key.ds_record(zone, SHOWN_TTL));
    }
}
