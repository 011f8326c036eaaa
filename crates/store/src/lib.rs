//! The source of truth for routing state: regions and services as the
//! operator declared them ([`State`], changed by [`Change`]s, both defined
//! by the control plane), and latency measurements. The live snapshot is
//! built from what is here.
//!
//! A [`Store`] applies a batch of changes in one transaction and returns
//! only once it is committed, so an acknowledged update survives a crash.
//! SQLite is the embedded default; a PostgreSQL store for fleets is meant
//! to implement the same trait.

mod sqlite;

use pharos_control::{Change, ControlError, Measurement, State};
use pharos_route::latency::MeasurementBook;

pub use sqlite::SqliteStore;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("stored {what} {name:?} cannot be read back: {error}")]
    Corrupt { what: &'static str, name: String, error: serde_json::Error },
    #[error("the database schema is version {found}, newer than this Pharos knows ({known}); upgrade Pharos")]
    TooNew { found: i64, known: i64 },
    #[error("stored measurement subnet {subnet:?} cannot be read back: {message}")]
    CorruptMeasurement { subnet: String, message: String },
}

impl From<StoreError> for ControlError {
    fn from(error: StoreError) -> ControlError {
        ControlError::Store(error.to_string())
    }
}

/// Durable storage of the routing state.
pub trait Store: Send {
    /// Reads the whole state.
    fn load(&mut self) -> Result<State, StoreError>;
    /// Applies `changes` in one transaction; returns once committed.
    fn apply(&mut self, changes: &[Change]) -> Result<(), StoreError>;
    /// A value kept for the server itself (e.g. the API token).
    fn setting(&mut self, key: &str) -> Result<Option<String>, StoreError>;
    fn set_setting(&mut self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Every latency measurement kept.
    fn load_measurements(&mut self) -> Result<MeasurementBook, StoreError>;
    /// Keeps `batch` (a measurement older than the one kept for its pair
    /// is ignored) and forgets those measured before `older_than` (Unix
    /// seconds), in one transaction.
    fn record_measurements(&mut self, batch: &[Measurement], older_than: u64) -> Result<(), StoreError>;
}
