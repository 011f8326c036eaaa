//! `pharos key`: a zone's DNSSEC keys, generated into the store, rolled
//! over (`pharos_dnssec::rollover`, timed from the zone's TTLs and the
//! configuration's `[dnssec]` delays), and shown as the DNSKEY and DS
//! records to publish with each key's state.
//!
//! It opens the store itself (the one a server's configuration names, or a
//! SQLite file) rather than asking a running server: keys are made before a
//! zone is first signed, often before any server runs. A running server
//! holds a SQLite store for itself: run the command with it stopped, and
//! start it again; with PostgreSQL, run it beside the server and reload it
//! (SIGHUP). A running server takes the same steps through its API
//! (`/v1/zones/{zone}/keys`, the steps in `pharos_server::driver::keys`). Once it
//! has read the keys, the server follows their states by itself, signing
//! the zone again at each step.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use clap::{Args, Subcommand};
use domain::base::Name;
use pharos_dnssec::{Algorithm, KeyTimes, Role, ZoneKey, ZoneKeys};
use pharos_server::config::{Config, StoreConfig};
use pharos_server::driver::keys::{self, KeyStep, StepError};
use pharos_server::driver::shell::open_store;
use pharos_store::Store;
use ring::rand::SystemRandom;

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
    /// Print the DNSKEY and DS records of a zone's keys, and each key's state.
    Show {
        #[command(flatten)]
        target: Target,
    },
    /// Start a key rollover: a ZSK by pre-publication, a KSK by double signature.
    Rollover {
        /// The server's configuration file: its [store], the zone's file (for
        /// its TTLs) and [dnssec]'s propagation_seconds and ds_ttl_seconds.
        #[arg(long, short)]
        config: PathBuf,
        /// Roll the zone-signing key.
        #[arg(long, required_unless_present = "ksk", conflicts_with = "ksk")]
        zsk: bool,
        /// Roll the key-signing key (then `ds-changed` once the parent's DS names the new one).
        #[arg(long)]
        ksk: bool,
        /// The zone, e.g. example.com.
        zone: String,
    },
    /// Say that the parent's DS now names only the new KSK: the old KSK is removed once the old DS has expired.
    DsChanged {
        /// The server's configuration file: its [store], the zone's file and [dnssec]'s delays.
        #[arg(long, short)]
        config: PathBuf,
        /// The zone, e.g. example.com.
        zone: String,
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
        Ok(keys::zone_name(&self.zone)?)
    }

    fn open_store(&self) -> anyhow::Result<Box<dyn Store>> {
        let store_config = match (&self.config, &self.store) {
            (Some(path), _) => Config::from_file(path)?.store,
            (None, path) => StoreConfig { path: path.clone(), url: None },
        };
        if store_config.path.is_none() && store_config.url.is_none() {
            bail!("the configuration names no store ([store] path or url): keys kept in memory would be lost");
        }
        Ok(open_store(&store_config)?)
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
                bail!("zone {} already has keys in {}: roll them with `pharos key rollover`", target.zone, target.where_kept());
            }
            let roles: &[Role] = if ksk_zsk { &[Role::Ksk, Role::Zsk] } else { &[Role::Csk] };
            let now = unix_now();
            let generate = |role: &Role| ZoneKey::generate(algorithm, *role, &random).map(|key| key.with_times(KeyTimes::active_from(now)));
            let keys = ZoneKeys { keys: roles.iter().map(generate).collect::<Result<_, _>>()? };
            store.set_setting(&setting, &keys.to_setting())?;
            print_records(&keys, &zone, now);
        }
        KeyCommand::Show { target } => {
            let zone = target.zone()?;
            let mut store = target.open_store()?;
            print_records(&stored_keys(&mut *store, &target)?, &zone, unix_now());
        }
        KeyCommand::Rollover { config, zsk, zone, .. } => {
            let step = if zsk { KeyStep::RollZsk } else { KeyStep::RollKsk };
            take_step(Target { config: Some(config), store: None, zone }, step)?;
        }
        KeyCommand::DsChanged { config, zone } => take_step(Target { config: Some(config), store: None, zone }, KeyStep::DsChanged)?,
    }
    Ok(())
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_secs()
}

/// Takes `step` in the target's keys, kept in the store its configuration names.
fn take_step(target: Target, step: KeyStep) -> anyhow::Result<()> {
    let config = Config::from_file(target.config.as_ref().expect("key steps take --config"))?;
    let zone = target.zone()?;
    let mut store = target.open_store()?;
    let now = unix_now();
    let keys = match keys::take_step(&config, &mut *store, &zone, step, now) {
        Ok(keys) => keys,
        Err(StepError::NoKeys(_)) => bail!("zone {} has no keys in {}: run `pharos key generate` first", target.zone, target.where_kept()),
        Err(error) => return Err(error.into()),
    };
    print_records(&keys, &zone, now);
    Ok(())
}

/// The keys `store` keeps for the target's zone.
fn stored_keys(store: &mut dyn Store, target: &Target) -> anyhow::Result<ZoneKeys> {
    let Some(keys) = keys::stored_keys(store, &target.zone()?)? else {
        bail!("zone {} has no keys in {}: run `pharos key generate` first", target.zone, target.where_kept());
    };
    Ok(keys)
}

/// The DNSKEY of every key still in the zone, a DS for each key the
/// parent should point at, then every key's state and schedule as a comment.
fn print_records(keys: &ZoneKeys, zone: &Name<Vec<u8>>, now: u64) {
    let views = keys::key_views(keys, zone, now);
    for record in views.iter().filter_map(|view| view.dnskey.as_ref()).chain(views.iter().filter_map(|view| view.ds.as_ref())) {
        println!("{record}");
    }
    for view in &views {
        let times = &view.times;
        let steps = [("active", times.active), ("retired", times.retired), ("removed", times.removed)];
        let scheduled: String = steps.iter().filter_map(|(name, time)| Some(format!(" {name}={}", (*time)?))).collect();
        println!("; key {} {} {}: published={}{scheduled}", view.tag, view.role, view.state, times.published);
    }
}
