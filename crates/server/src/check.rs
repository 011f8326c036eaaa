//! `pharos check`: everything `pharos serve` would load from a
//! configuration, loaded without binding a port or writing to the store,
//! with every problem reported at once, each where it is (`file:line`, or
//! the setting's path). A unit's `ExecStartPre` runs it, and a reload runs
//! the same check (all but the BGP table) before it swaps anything in.
//!
//! The parts that do not depend on each other (settings, each zone file,
//! the certificate, the TSIG keys, the data files, the store) are checked
//! one by one, so that one broken part hides none of the others. The
//! policy declarations are checked last, by opening the control plane
//! exactly as `serve` does, on a copy of the store: they name the zones,
//! regions and data the other parts load.

use std::path::{Path, PathBuf};

use pharos_store::{PostgresStore, Schema, SqliteStore, StoreError};
use pharos_wire::causes;

use crate::config::{Config, ConfigError, ZoneSource};
use crate::data::unix_millis;
use crate::driver::response_settings;
use crate::driver::shell::{ControlShell, load_sources};

/// What `pharos check` found: one line per part checked.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

/// One part's outcome.
#[derive(Debug)]
pub enum Finding {
    Ok(String),
    /// Not a problem, but worth knowing before a start (a store migrated
    /// forward, a part left to the start to check).
    Note(String),
    Problem(String),
}

impl Report {
    /// How many problems were found.
    pub fn problems(&self) -> usize {
        self.problem_findings().count()
    }

    /// The problems, one per line.
    pub fn problem_lines(&self) -> Vec<String> {
        self.problem_findings().map(ToString::to_string).collect()
    }

    fn problem_findings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| matches!(finding, Finding::Problem(_)))
    }

    fn ok(&mut self, what: impl Into<String>) {
        self.findings.push(Finding::Ok(what.into()));
    }

    fn note(&mut self, what: impl Into<String>) {
        self.findings.push(Finding::Note(what.into()));
    }

    fn problem(&mut self, what: impl Into<String>) {
        self.findings.push(Finding::Problem(what.into()));
    }

    /// Records `outcome`: `ok` if it succeeded, else its error with causes.
    fn record<T, E: std::error::Error>(&mut self, outcome: Result<T, E>, ok: impl FnOnce(T) -> String) {
        match outcome {
            Ok(value) => self.ok(ok(value)),
            Err(error) => self.problem(causes(&error)),
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Ok(what) => write!(f, "ok: {what}"),
            Finding::Note(what) => write!(f, "note: {what}"),
            Finding::Problem(what) => write!(f, "error: {what}"),
        }
    }
}

/// How much is loaded: everything, or all but the BGP table before a
/// reload (which loads the table in the background and reports on it
/// apart, without holding the reload for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Everything,
    BeforeReload,
}

/// Checks the configuration file at `path` and everything it names.
pub fn check(path: &Path, depth: Depth) -> Report {
    let mut report = Report::default();
    match Config::from_file(path) {
        Ok(config) => {
            report.ok(format!("{}: read", path.display()));
            check_parts(&config, depth, &mut report);
        }
        Err(error) => report.problem(config_error_place(&error)),
    }
    report
}

/// Checks `config`, already read, and everything it names.
pub fn check_parts(config: &Config, depth: Depth, report: &mut Report) {
    for problem in config.problems() {
        report.problem(causes(&problem));
    }
    let before = report.problems();
    check_zone_files(config, report);
    report.record(pharos_transport::check_certificate(&config.tls), |()| certificate_ok(config));
    report.record(response_settings::from_config(config), |settings| format!("{} TSIG keys read", settings.tsig_keys.len()));
    report.record(load_sources(config, unix_millis()), |_| "MaxMind DB and IP-to-AS table (as configured) read".into());
    if depth == Depth::Everything {
        check_bgp_table(config, report);
    }
    let store = check_store(config, report);
    if report.problems() > before {
        report.note("policy declarations not checked: they name what failed above");
        return;
    }
    check_declarations(config, store, report);
}

/// A configuration file's error, with the line and column of a TOML error.
fn config_error_place(error: &ConfigError) -> String {
    let ConfigError::Parse { path, source } = error else {
        return causes(error);
    };
    let Some(span) = source.span() else {
        return format!("{}: {}", path.display(), source.message());
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |newline| newline + 1) + 1;
    format!("{}:{line}:{column}: {}", path.display(), source.message().trim_end())
}

fn check_zone_files(config: &Config, report: &mut Report) {
    for zone in config.all_zones() {
        match zone.source() {
            Some(ZoneSource::File(file)) => report.record(pharos_zone::load_zone_file(&zone.origin, file), |loaded| {
                format!("zone {} ({}): {} names", zone.origin, file.display(), loaded.nodes.len())
            }),
            Some(ZoneSource::Primaries(primaries)) => {
                let addresses: Vec<String> = primaries.iter().map(|primary| primary.address.to_string()).collect();
                report.note(format!("zone {}: a secondary of {} (not transferred by check)", zone.origin, addresses.join(", ")));
            }
            // Config::problems named it.
            None => {}
        }
    }
}

fn certificate_ok(config: &Config) -> String {
    match &config.tls.certificate {
        Some(certificate) => format!("TLS certificate {} and its key read", certificate.display()),
        None => "no TLS certificate configured (one is generated at start where a TLS listener needs it)".into(),
    }
}

fn check_bgp_table(config: &Config, report: &mut Report) {
    let Some(table) = &config.bgp.table else { return };
    let loaded = pharos_bgp::load(table, config.bgp.origin_rules(), |_| {});
    report.record(loaded, |tables| format!("BGP table {}: {} routes", table.display(), tables.report.routes));
}

/// The store as `serve` would find it; returns the store the declarations
/// are checked on: a copy of the SQLite file, else one in memory.
fn check_store(config: &Config, report: &mut Report) -> CheckedStore {
    match (&config.store.url, &config.store.path) {
        (Some(url), _) => {
            let schema = PostgresStore::inspect(url);
            report.record(schema, |schema| format!("PostgreSQL store (store.url): {schema}"));
            CheckedStore::InMemory { keys_elsewhere: true }
        }
        (None, Some(path)) => match SqliteStore::inspect(path) {
            Ok(schema) => {
                report.ok(format!("store {}: {schema}", path.display()));
                copy_of(path, schema, report)
            }
            Err(error) => {
                report.problem(format!("store {}: {}", path.display(), causes(&error)));
                CheckedStore::InMemory { keys_elsewhere: false }
            }
        },
        (None, None) => {
            report.ok("no store configured: state lives in memory and is lost at exit");
            CheckedStore::InMemory { keys_elsewhere: false }
        }
    }
}

/// Where the declarations are checked: never the store itself, which
/// opening migrates and applying the file's declarations writes to.
enum CheckedStore {
    Copy {
        _directory: tempfile::TempDir,
        path: PathBuf,
    },
    /// `keys_elsewhere`: the real store, which holds the signed zones'
    /// keys, cannot be copied (a fleet's PostgreSQL database, or a SQLite
    /// file a running Pharos holds).
    InMemory {
        keys_elsewhere: bool,
    },
}

fn copy_of(path: &Path, schema: Schema, report: &mut Report) -> CheckedStore {
    match schema {
        Schema::Missing { .. } => return CheckedStore::InMemory { keys_elsewhere: false },
        Schema::InUse => return CheckedStore::InMemory { keys_elsewhere: true },
        Schema::Behind { .. } | Schema::Current { .. } => {}
    }
    let copied = tempfile::tempdir().map_err(StoreError::Runtime).and_then(|directory| {
        let copy = directory.path().join("store.sqlite");
        SqliteStore::copy(path, &copy).map(|()| CheckedStore::Copy { _directory: directory, path: copy })
    });
    copied.unwrap_or_else(|error| {
        report.problem(format!("store {}: cannot copy it to check the declarations on: {}", path.display(), causes(&error)));
        CheckedStore::InMemory { keys_elsewhere: false }
    })
}

/// Opens the control plane on `store` as `serve` would: the file's
/// declarations applied over what the store holds, the first snapshot
/// built.
fn check_declarations(config: &Config, store: CheckedStore, report: &mut Report) {
    let mut checked = config.clone();
    checked.store.url = None;
    checked.store.path = match &store {
        CheckedStore::Copy { path, .. } => Some(path.clone()),
        CheckedStore::InMemory { .. } => None,
    };
    if matches!(store, CheckedStore::InMemory { keys_elsewhere: true }) {
        let signed: Vec<_> = checked.zones.iter_mut().chain(&mut checked.flag_zones).filter(|zone| zone.dnssec).collect();
        if !signed.is_empty() {
            report.note("signed zones' keys are in a store that cannot be copied here: they are checked at start");
        }
        signed.into_iter().for_each(|zone| zone.dnssec = false);
    }
    report.record(ControlShell::open(checked, None, unix_millis()), |shell| {
        let state = shell.state();
        format!(
            "policy declarations: {} services, {} regions, {} data centers",
            state.services.len(),
            state.regions.len(),
            state.datacenters.len()
        )
    });
}
