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
//! (SIGHUP). Once it has read the keys, the server follows their states by
//! itself, signing the zone again at each step.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use clap::{Args, Subcommand};
use domain::base::{Name, ToName};
use pharos_dnssec::{Algorithm, KeyState, KeyTimes, Role, Timings, ZoneKey, ZoneKeys};
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

    /// What a rollover of the zone waits on: its DNSKEY TTL (the SOA's,
    /// which the signer gives the DNSKEY RRset), its largest TTL (records,
    /// negative answers, the services in it, from the configuration and
    /// the store), and the configuration's delays.
    fn timings(&self, store: &mut dyn Store) -> anyhow::Result<Timings> {
        let path = self.config.as_ref().expect("rollovers take --config");
        let config = Config::from_file(path)?;
        let origin = self.zone()?;
        let same_zone = |spec: &&pharos_server::config::ZoneConfig| {
            Name::<Vec<u8>>::from_str(&absolute(&spec.origin)).is_ok_and(|name| name.to_canonical_name::<Vec<u8>>() == origin)
        };
        let Some(spec) = config.all_zones().find(same_zone) else {
            bail!("{} serves no zone {}", path.display(), self.zone);
        };
        let zone = pharos_zone::load_zone_file(&spec.origin, &spec.file)?;
        let records = zone.nodes.values().flat_map(|node| &node.rrsets).map(|rrset| rrset.ttl);
        let (state, _) = store.load()?;
        let inside = |name: &str| Name::<Vec<u8>>::from_str(&absolute(name)).is_ok_and(|name| name.ends_with(&origin));
        let services = config.services.iter().chain(&state.services).filter(|service| inside(&service.name)).map(|service| service.ttl);
        let max_ttl = records.chain(services).chain([zone.negative_ttl]).max().unwrap_or_default();
        Ok(Timings {
            dnskey_ttl: zone.soa().ttl,
            max_ttl,
            propagation: config.dnssec.propagation_seconds,
            ds_ttl: config.dnssec.ds_ttl_seconds,
        })
    }

    /// Where the keys are, for messages (never the url, which may hold a password).
    fn where_kept(&self) -> String {
        match (&self.config, &self.store) {
            (Some(config), _) => format!("the store of {}", config.display()),
            (None, store) => store.iter().map(|path| path.display().to_string()).collect(),
        }
    }
}

/// `name` with its final dot, as zone names are written in configurations either way.
fn absolute(name: &str) -> String {
    if name.ends_with('.') { name.to_string() } else { format!("{name}.") }
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
            print_records(&stored_keys(&mut *store, &target, &random)?, &zone, unix_now());
        }
        KeyCommand::Rollover { config, zsk, zone, .. } => {
            let target = Target { config: Some(config), store: None, zone };
            let mut store = target.open_store()?;
            let timings = target.timings(&mut *store)?;
            let mut keys = stored_keys(&mut *store, &target, &random)?;
            let now = unix_now();
            if zsk {
                keys.roll_zsk(now, timings, &random)?
            } else {
                keys.roll_ksk(now, &random)?
            }
            store.set_setting(&ZoneKeys::setting_name(&target.zone()?), &keys.to_setting())?;
            print_records(&keys, &target.zone()?, now);
        }
        KeyCommand::DsChanged { config, zone } => {
            let target = Target { config: Some(config), store: None, zone };
            let mut store = target.open_store()?;
            let timings = target.timings(&mut *store)?;
            let mut keys = stored_keys(&mut *store, &target, &random)?;
            let now = unix_now();
            keys.ds_changed(now, timings)?;
            store.set_setting(&ZoneKeys::setting_name(&target.zone()?), &keys.to_setting())?;
            print_records(&keys, &target.zone()?, now);
        }
    }
    Ok(())
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_secs()
}

/// The keys `store` keeps for the target's zone.
fn stored_keys(store: &mut dyn Store, target: &Target, random: &SystemRandom) -> anyhow::Result<ZoneKeys> {
    let Some(text) = store.setting(&ZoneKeys::setting_name(&target.zone()?))? else {
        bail!("zone {} has no keys in {}: run `pharos key generate` first", target.zone, target.where_kept());
    };
    Ok(ZoneKeys::from_setting(&text, random)?)
}

/// The DNSKEY of every key still in the zone, a DS for each key the
/// parent should point at, then every key's state as a comment.
fn print_records(keys: &ZoneKeys, zone: &Name<Vec<u8>>, now: u64) {
    let in_zone = || keys.keys.iter().filter(|key| key.times.state(now) != KeyState::Removed);
    for key in in_zone() {
        println!("{}", key.dnskey_record(zone, SHOWN_TTL));
    }
    for key in in_zone().filter(|key| key.role.signs_keys()) {
        println!("{}", key.ds_record(zone, SHOWN_TTL));
    }
    for key in &keys.keys {
        let state = key.times.state(now).name();
        println!("; key {} {} {state}: published={}{}", key.key_tag(), key.role.name(), key.times.published, scheduled(&key.times));
    }
}

/// The steps of `times` after publication, as ` active=T retired=T removed=T`.
fn scheduled(times: &KeyTimes) -> String {
    let steps = [("active", times.active), ("retired", times.retired), ("removed", times.removed)];
    steps.iter().filter_map(|(name, time)| Some(format!(" {name}={}", (*time)?))).collect()
}
