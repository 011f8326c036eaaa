//! The source of truth for routing state: regions and services as the
//! operator declared them ([`State`], changed by [`Change`]s, both defined
//! by the control plane), and latency measurements. The live snapshot is
//! built from what is here. Each batch of measurements is stamped one
//! more than the last, so that nodes sharing a database read the batches
//! others recorded after the last they have
//! ([`Store::measurements_after`]).
//!
//! A [`Store`] applies a batch of changes in one transaction and returns
//! only once it is committed, so an acknowledged update survives a crash.
//! The same transaction logs the batch under the next sequence number
//! (sequences commit in order), so what was applied can be read back after
//! any sequence ([`Store::changes_after`]). A batch is made from the state
//! as of some sequence and refused ([`StoreError::Behind`]) if others were
//! logged since, so that no writer undoes what another wrote unseen.
//! Nodes sharing a database are woken when one logs a batch
//! ([`Store::follow`], [`Following`], which carries the batch when it fits
//! in a notification), else read the batches and the measurements logged
//! since together ([`Store::news_after`]), and share what their probes see of
//! each replica ([`Store::exchange_health`], reading only the verdicts
//! stamped after the last read, as measurements are).
//! Two engines implement it over one schema (`schema`: a migration list
//! with each engine's dialect where they differ):
//! - [`SqliteStore`] (`sqlite`): one embedded file, one node;
//! - [`PostgresStore`] (`postgres`): one database a fleet of nodes shares.

mod postgres;
mod schema;
mod sqlite;

use pharos_model::fleet::{FleetReports, NodeVerdict};
use pharos_model::{Change, ControlError, Measurement, State};
use pharos_route::latency::Measured;
use pharos_route::prefix::parse_prefix;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use postgres::{Following, PostgresStore, Wake};
pub use schema::{SCHEMA_VERSION, Schema};
pub use sqlite::SqliteStore;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("PostgreSQL error: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    #[error("PostgreSQL cannot be reached: {0}")]
    Unreachable(String),
    #[error("invalid store url (expected a libpq connection string, e.g. postgres://user@host:5432/pharos): {0}")]
    InvalidUrl(String),
    #[error("cannot start the store's I/O thread: {0}")]
    Runtime(std::io::Error),
    #[error("stored {what} {name:?} cannot be read back: {error}")]
    Corrupt { what: &'static str, name: String, error: serde_json::Error },
    #[error(
        "the database schema is version {found}, newer than this Pharos ({version}) knows ({known}): it was written by a newer Pharos; upgrade Pharos",
        version = env!("CARGO_PKG_VERSION")
    )]
    TooNew { found: i64, known: i64 },
    /// Batches were logged after the one the changes were made from.
    #[error("{}", ControlError::Behind { applied: *applied, latest: *latest })]
    Behind { applied: u64, latest: u64 },
    #[error("stored measurement subnet {subnet:?} cannot be read back: {error}")]
    CorruptMeasurement { subnet: String, error: pharos_route::prefix::PrefixError },
}

impl From<StoreError> for ControlError {
    fn from(error: StoreError) -> ControlError {
        match error {
            StoreError::Behind { applied, latest } => ControlError::Behind { applied, latest },
            _ => ControlError::store(error),
        }
    }
}

/// A batch of the change log: its changes, and the names of the tokens
/// whose requests made them, in the order they asked. None: the server's
/// own changes (from its configuration file or its load control), or a
/// batch logged before the log kept its authors.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Batch {
    pub changes: Vec<Change>,
    pub authors: Vec<String>,
}

/// Batches logged, each with its sequence, in order.
pub type Batches = Vec<(u64, Batch)>;

/// What other nodes wrote since a node last read ([`Store::news_after`]).
#[derive(Debug, PartialEq)]
pub struct News {
    pub batches: Batches,
    /// The measurements, and the stamp to ask after next time.
    pub measurements: (Vec<Measurement>, u64),
}

/// Durable storage of the routing state.
pub trait Store: Send {
    /// Reads the whole state, and the sequence of the last batch it holds.
    fn load(&mut self) -> Result<(State, u64), StoreError>;
    /// Applies `changes`, made from the state as of sequence `after` and
    /// asked for by the tokens named `authors`, and logs them as a batch
    /// under the next sequence number, in one transaction; returns that
    /// number once committed. Refused with
    /// [`StoreError::Behind`] if a batch was logged after `after`: changes
    /// computed from a state without it could undo it.
    fn apply(&mut self, after: u64, changes: &[Change], authors: &[String]) -> Result<u64, StoreError>;
    /// Every batch logged after `sequence`, in order, with its number.
    fn changes_after(&mut self, sequence: u64) -> Result<Batches, StoreError>;
    /// Calls `wake` from now on whenever other writers may have logged
    /// batches. An engine that only this process writes never calls it.
    fn follow(&mut self, _wake: Wake) {}
    /// A value kept for the server itself (e.g. the API token).
    fn setting(&mut self, key: &str) -> Result<Option<String>, StoreError>;
    fn set_setting(&mut self, key: &str, value: &str) -> Result<(), StoreError>;
    /// The value of `key`, set to `value` first if it has none: of nodes
    /// that make a value at once (a shared secret), every one gets the one
    /// written first.
    fn setting_or_insert(&mut self, key: &str, value: &str) -> Result<String, StoreError>;
    /// Notes that `node` reports at `now` (Unix ms), keeps its changed
    /// `verdicts` (stamped one more than the last verdicts kept), and
    /// returns every node's last report and the verdicts stamped after
    /// `after` (all of them after 0), in one transaction.
    fn exchange_health(&mut self, node: &str, now: u64, verdicts: &[NodeVerdict], after: u64) -> Result<FleetReports, StoreError>;
    /// The latency measurements kept by batches recorded after the one
    /// stamped `stamp` (all of them after 0), and the stamp to ask after
    /// next time.
    fn measurements_after(&mut self, stamp: u64) -> Result<(Vec<Measurement>, u64), StoreError>;
    /// What other nodes wrote: the batches logged after `sequence` and the
    /// measurements recorded after `stamp`, as [`Store::changes_after`]
    /// and [`Store::measurements_after`] read them (a shared database
    /// reads both in one round trip: a node reads them at each change
    /// another node makes).
    fn news_after(&mut self, sequence: u64, stamp: u64) -> Result<News, StoreError> {
        Ok(News { batches: self.changes_after(sequence)?, measurements: self.measurements_after(stamp)? })
    }
    /// Keeps `batch` (a measurement older than the one kept for its pair
    /// is ignored) and forgets those measured before `older_than` (Unix
    /// seconds), in one transaction; returns the batch's stamp, one more
    /// than the last batch's.
    fn record_measurements(&mut self, batch: &[Measurement], older_than: u64) -> Result<u64, StoreError>;
}

/// The JSON row a change writes, or `None` for a deletion; every
/// declaration is one row, whichever engine keeps it.
fn declaration_row(change: &Change) -> Option<String> {
    let spec = match change {
        Change::PutDataCenter(datacenter) => serde_json::to_string(datacenter),
        Change::PutRegion(region) => serde_json::to_string(region),
        Change::PutService(service) => serde_json::to_string(service),
        Change::PutToken(token) => serde_json::to_string(token),
        Change::PutZone(zone) => serde_json::to_string(zone),
        Change::DeleteDataCenter(_) | Change::DeleteRegion(_) | Change::DeleteService(_) | Change::DeleteZone(_) => return None,
    };
    Some(spec.expect("declarations serialize"))
}

/// A declaration read back from its row, named in the error if it is not
/// one.
fn read_declaration<T: DeserializeOwned>(what: &'static str, name: String, spec: &str) -> Result<T, StoreError> {
    serde_json::from_str(spec).map_err(|error| StoreError::Corrupt { what, name, error })
}

/// Checks, inside the transaction about to log a batch made from the
/// state as of `after`, that `latest` is still the last sequence logged.
fn check_not_behind(after: u64, latest: i64) -> Result<u64, StoreError> {
    let latest = latest.max(0) as u64;
    if latest == after { Ok(latest + 1) } else { Err(StoreError::Behind { applied: after, latest }) }
}

/// The change log's row for a batch: its changes and its authors.
fn batch_row(changes: &[Change], authors: &[String]) -> (String, String) {
    (serde_json::to_string(changes).expect("changes serialize"), serde_json::to_string(authors).expect("names serialize"))
}

/// A logged batch read back from its row (authors NULL: logged before
/// they were kept), named by its sequence if it is not one.
fn read_batch(sequence: i64, changes: &str, authors: Option<&str>) -> Result<(u64, Batch), StoreError> {
    let changes = read_declaration("change batch", sequence.to_string(), changes)?;
    let authors = authors.map(|authors| read_declaration("change batch's authors", sequence.to_string(), authors)).transpose()?;
    Ok((sequence.max(0) as u64, Batch { changes, authors: authors.unwrap_or_default() }))
}

/// A time in Unix ms as both engines keep it (a signed 64-bit integer).
fn millis_row(at: u64) -> i64 {
    i64::try_from(at).unwrap_or(i64::MAX)
}

/// The reports read back: each node's last report time, and the verdicts
/// stamped after `after`, each with its stamp.
fn fleet_reports(reported: Vec<(String, i64)>, verdicts: Vec<(NodeVerdict, i64)>, after: u64) -> FleetReports {
    let stamp = last_stamp(after, verdicts.iter().map(|(_, stamp)| *stamp));
    let verdicts = verdicts.into_iter().map(|(verdict, _)| verdict).collect();
    FleetReports { reported: reported.into_iter().map(|(node, at)| (node, at.max(0) as u64)).collect(), verdicts, stamp }
}

/// Takes the next measurement batch's stamp; both engines read it alike.
const NEXT_MEASUREMENT_STAMP: &str = "UPDATE measurement_stamp SET last = last + 1 RETURNING last";
/// Takes the next stamp of the verdicts an exchange keeps.
const NEXT_VERDICT_STAMP: &str = "UPDATE verdict_stamp SET last = last + 1 RETURNING last";

/// How a measurement's client subnet is kept: `network/length`.
fn subnet_text(measurement: &Measurement) -> String {
    format!("{}/{}", measurement.subnet.0, measurement.subnet.1)
}

/// A stored measurement row read back.
fn read_measurement(subnet: String, datacenter: String, rtt_ms: f64, at: i64) -> Result<Measurement, StoreError> {
    let subnet = parse_prefix(&subnet).map_err(|error| StoreError::CorruptMeasurement { subnet, error })?;
    Ok(Measurement { subnet, datacenter, measured: Measured { rtt_ms, at: at.max(0) as u64 } })
}

/// The stamp to read after next time: the highest of the rows read (a
/// batch with a higher one committed after all those with lower ones), or
/// `after` if none was read.
fn last_stamp(after: u64, stamps: impl Iterator<Item = i64>) -> u64 {
    stamps.map(|stamp| stamp.max(0) as u64).fold(after, u64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_behind_stays_a_value_for_the_control_plane() {
        let behind = StoreError::Behind { applied: 2, latest: 5 };
        let message = behind.to_string();
        let refused = ControlError::from(behind);
        assert!(matches!(refused, ControlError::Behind { applied: 2, latest: 5 }), "{refused:?}");
        assert_eq!(refused.to_string(), message);
    }

    #[test]
    fn any_other_store_error_is_kept_whole_as_the_source() {
        let refused = ControlError::from(StoreError::TooNew { found: 9, known: 3 });
        let ControlError::Store(source) = &refused else { panic!("{refused:?}") };
        assert!(matches!(source.downcast_ref::<StoreError>(), Some(StoreError::TooNew { found: 9, known: 3 })));
        assert!(refused.to_string().starts_with("the store is unavailable: the database schema is version 9"), "{refused}");
    }
}
