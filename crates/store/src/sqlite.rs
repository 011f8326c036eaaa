//! The embedded store: one SQLite file, created on first use.

use std::path::Path;
use std::sync::Arc;

use pharos_model::fleet::{FleetReports, NodeVerdict};
use pharos_model::spec::{DataCenterSpec, RegionSpec, ServiceSpec};
use pharos_model::token::TokenSpec;
use pharos_model::zone::ZoneSpec;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::de::DeserializeOwned;

use crate::schema::Schema;
use crate::{
    Batches, Change, Measurement, NEXT_MEASUREMENT_STAMP, NEXT_VERDICT_STAMP, State, Store, StoreError, batch_row, check_not_behind,
    declaration_row, fleet_reports, last_stamp, millis_row, read_batch, read_declaration, read_measurement, schema, subnet_text,
};

/// Routing state in a SQLite database file.
pub struct SqliteStore {
    connection: Connection,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let mut connection = Connection::open(path)?;
        // WAL: readers never block the writer. synchronous=NORMAL in WAL
        // mode keeps every committed transaction across a process crash
        // (kill -9); only a power loss can drop the last few.
        // One Pharos owns its file: holding the lock for good spares two
        // fcntl calls and the shared-memory index on every commit.
        connection.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "NORMAL")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&mut connection)?;
        Ok(SqliteStore { connection })
    }

    /// What opening the database at `path` would do to its schema, read
    /// without writing (and without waiting for a running Pharos's lock).
    pub fn inspect(path: &Path) -> Result<Schema, StoreError> {
        if !path.exists() {
            return schema::schema_of(None);
        }
        let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        match connection.pragma_query_value(None, "user_version", |row| row.get(0)) {
            Ok(version) => schema::schema_of(Some(version)),
            Err(rusqlite::Error::SqliteFailure(error, _)) if error.code == rusqlite::ErrorCode::DatabaseBusy => Ok(Schema::InUse),
            Err(error) => Err(error.into()),
        }
    }

    /// Writes a copy of the database at `path` to `copy`, read without
    /// writing: `pharos check` opens the copy as `serve` would the file.
    pub fn copy(path: &Path, copy: &Path) -> Result<(), StoreError> {
        let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        connection.execute("VACUUM INTO ?1", [copy.to_string_lossy()])?;
        Ok(())
    }
}

fn migrate(connection: &mut Connection) -> Result<(), StoreError> {
    // The database records how many migrations it has had in
    // `PRAGMA user_version`.
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    for (number, migration) in schema::pending(version)? {
        let transaction = connection.transaction()?;
        transaction.execute_batch(migration.sqlite)?;
        transaction.pragma_update(None, "user_version", number)?;
        transaction.commit()?;
    }
    Ok(())
}

fn read_all<T: DeserializeOwned>(connection: &Connection, table: &str, what: &'static str) -> Result<Vec<T>, StoreError> {
    let mut statement = connection.prepare(&format!("SELECT name, spec FROM {table} ORDER BY name"))?;
    let rows = statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
    rows.map(|row| {
        let (name, spec) = row?;
        read_declaration(what, name, &spec)
    })
    .collect()
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<(State, u64), StoreError> {
        // One read transaction: the sequence is the state's.
        let transaction = self.connection.transaction()?;
        let datacenters: Vec<DataCenterSpec> = read_all(&transaction, "datacenters", "data center")?;
        let regions: Vec<RegionSpec> = read_all(&transaction, "regions", "region")?;
        let services: Vec<Arc<ServiceSpec>> = read_all(&transaction, "services", "service")?;
        let tokens: Vec<TokenSpec> = read_all(&transaction, "tokens", "token")?;
        let zones: Vec<Arc<ZoneSpec>> = read_all(&transaction, "zones", "zone")?;
        let sequence: i64 = transaction.query_row("SELECT COALESCE(MAX(sequence), 0) FROM changes", [], |row| row.get(0))?;
        transaction.commit()?;
        Ok((State { datacenters, regions, services, tokens, zones }, sequence.max(0) as u64))
    }

    fn apply(&mut self, after: u64, changes: &[Change], authors: &[String]) -> Result<u64, StoreError> {
        // Write-locked from the start: the last sequence read stays the
        // last until this transaction logs the next, whoever else opens
        // the file.
        let transaction = self.connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let latest: i64 = transaction.query_row("SELECT COALESCE(MAX(sequence), 0) FROM changes", [], |row| row.get(0))?;
        let sequence = check_not_behind(after, latest)?;
        for change in changes {
            let (table, name) = change.key();
            match declaration_row(change) {
                Some(spec) => transaction
                    .prepare_cached(&format!("INSERT OR REPLACE INTO {table} (name, spec) VALUES (?1, ?2)"))?
                    .execute(params![name, spec])?,
                None => transaction.prepare_cached(&format!("DELETE FROM {table} WHERE name = ?1"))?.execute(params![name])?,
            };
        }
        let (batch, authors) = batch_row(changes, authors);
        transaction
            .execute("INSERT INTO changes (sequence, batch, authors) VALUES (?1, ?2, ?3)", params![sequence as i64, batch, authors])?;
        transaction.commit()?;
        Ok(sequence)
    }

    fn changes_after(&mut self, sequence: u64) -> Result<Batches, StoreError> {
        let after = i64::try_from(sequence).unwrap_or(i64::MAX);
        let mut statement =
            self.connection.prepare_cached("SELECT sequence, batch, authors FROM changes WHERE sequence > ?1 ORDER BY sequence")?;
        let rows = statement
            .query_map(params![after], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get::<_, Option<String>>(2)?)))?;
        rows.map(|row| {
            let (sequence, changes, authors) = row?;
            read_batch(sequence, &changes, authors.as_deref())
        })
        .collect()
    }

    fn exchange_health(&mut self, node: &str, now: u64, verdicts: &[NodeVerdict], after: u64) -> Result<FleetReports, StoreError> {
        let transaction = self.connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute("INSERT OR REPLACE INTO health_nodes (node, reported_at) VALUES (?1, ?2)", params![node, millis_row(now)])?;
        if !verdicts.is_empty() {
            let stamp: i64 = transaction.query_row(NEXT_VERDICT_STAMP, [], |row| row.get(0))?;
            let mut upsert = transaction.prepare_cached(
                "INSERT OR REPLACE INTO health_verdicts (node, service, replica, up, reason, since, stamp)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for verdict in verdicts {
                let since = millis_row(verdict.since);
                upsert.execute(params![verdict.node, verdict.service, verdict.replica, verdict.up, verdict.reason, since, stamp])?;
            }
        }
        let reported = {
            let mut statement = transaction.prepare_cached("SELECT node, reported_at FROM health_nodes")?;
            statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<Vec<_>, _>>()?
        };
        let read = {
            let mut statement = transaction.prepare_cached(
                "SELECT node, service, replica, up, reason, since, stamp FROM health_verdicts WHERE stamp > ?1
                 ORDER BY node, service, replica",
            )?;
            statement
                .query_map(params![i64::try_from(after).unwrap_or(i64::MAX)], |row| {
                    let since: i64 = row.get(5)?;
                    let verdict = NodeVerdict {
                        node: row.get(0)?,
                        service: row.get(1)?,
                        replica: row.get(2)?,
                        up: row.get(3)?,
                        reason: row.get(4)?,
                        since: since.max(0) as u64,
                    };
                    Ok((verdict, row.get(6)?))
                })?
                .collect::<Result<Vec<_>, _>>()?
        };
        transaction.commit()?;
        Ok(fleet_reports(reported, read, after))
    }

    fn measurements_after(&mut self, stamp: u64) -> Result<(Vec<Measurement>, u64), StoreError> {
        let after = i64::try_from(stamp).unwrap_or(i64::MAX);
        let mut statement =
            self.connection.prepare("SELECT subnet, datacenter, rtt_ms, measured_at, stamp FROM measurements WHERE stamp > ?1")?;
        let rows = statement
            .query_map(params![after], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, f64>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let last = last_stamp(stamp, rows.iter().map(|row| row.4));
        let measurements = rows.into_iter().map(|(subnet, datacenter, rtt_ms, at, _)| read_measurement(subnet, datacenter, rtt_ms, at));
        Ok((measurements.collect::<Result<_, _>>()?, last))
    }

    fn record_measurements(&mut self, batch: &[Measurement], older_than: u64) -> Result<u64, StoreError> {
        let transaction = self.connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let stamp: i64 = transaction.query_row(NEXT_MEASUREMENT_STAMP, [], |row| row.get(0))?;
        {
            let mut upsert = transaction.prepare(
                "INSERT INTO measurements (subnet, datacenter, rtt_ms, measured_at, stamp) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (subnet, datacenter)
                 DO UPDATE SET rtt_ms = excluded.rtt_ms, measured_at = excluded.measured_at, stamp = excluded.stamp
                 WHERE excluded.measured_at >= measurements.measured_at",
            )?;
            for measurement in batch {
                let subnet = subnet_text(measurement);
                let at = i64::try_from(measurement.measured.at).unwrap_or(i64::MAX);
                upsert.execute(params![subnet, measurement.datacenter, measurement.measured.rtt_ms, at, stamp])?;
            }
            let older_than = i64::try_from(older_than).unwrap_or(i64::MAX);
            transaction.execute("DELETE FROM measurements WHERE measured_at < ?1", params![older_than])?;
        }
        transaction.commit()?;
        Ok(stamp.max(0) as u64)
    }

    fn setting(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.connection.query_row("SELECT value FROM settings WHERE key = ?1", params![key], |row| row.get(0)).optional()?)
    }

    fn set_setting(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.connection.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?1, ?2)", params![key, value])?;
        Ok(())
    }

    fn setting_or_insert(&mut self, key: &str, value: &str) -> Result<String, StoreError> {
        // One statement: SQLite serializes writers, so the first insert wins.
        let kept = "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = value RETURNING value";
        Ok(self.connection.query_row(kept, params![key, value], |row| row.get(0))?)
    }
}
