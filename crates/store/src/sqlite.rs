//! The embedded store: one SQLite file, created on first use.

use std::path::Path;

use pharos_control::spec::{DataCenterSpec, RegionSpec, ServiceSpec};
use pharos_route::latency::{Measured, MeasurementBook};
use pharos_route::prefix::parse_prefix;
use rusqlite::{Connection, OptionalExtension, params};
use serde::de::DeserializeOwned;

use crate::{Change, Measurement, State, Store, StoreError};

/// Schema migrations, applied in order; the database records how many
/// it has had in `PRAGMA user_version`. Never edit one that has shipped:
/// add the next.
const MIGRATIONS: &[&str] = &[
    // 1: regions and services, each one row holding its declaration as JSON,
    // so a service's replicas and probability table change together.
    "CREATE TABLE regions (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
     CREATE TABLE services (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
     CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    // 2: data centers, where replicas run.
    "CREATE TABLE datacenters (name TEXT PRIMARY KEY, spec TEXT NOT NULL);",
    // 3: latency measurements, the newest per client subnet and data center.
    "CREATE TABLE measurements (
         subnet TEXT NOT NULL, datacenter TEXT NOT NULL, rtt_ms REAL NOT NULL, measured_at INTEGER NOT NULL,
         PRIMARY KEY (subnet, datacenter)) WITHOUT ROWID;",
];

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
}

fn migrate(connection: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew { found: version, known });
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let transaction = connection.transaction()?;
        transaction.execute_batch(migration)?;
        transaction.pragma_update(None, "user_version", index as i64 + 1)?;
        transaction.commit()?;
    }
    Ok(())
}

fn read_all<T: DeserializeOwned>(connection: &Connection, table: &str, what: &'static str) -> Result<Vec<T>, StoreError> {
    let mut statement = connection.prepare(&format!("SELECT name, spec FROM {table} ORDER BY name"))?;
    let rows = statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
    rows.map(|row| {
        let (name, spec) = row?;
        serde_json::from_str(&spec).map_err(|error| StoreError::Corrupt { what, name, error })
    })
    .collect()
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<State, StoreError> {
        let datacenters: Vec<DataCenterSpec> = read_all(&self.connection, "datacenters", "data center")?;
        let regions: Vec<RegionSpec> = read_all(&self.connection, "regions", "region")?;
        let services: Vec<ServiceSpec> = read_all(&self.connection, "services", "service")?;
        Ok(State { datacenters, regions, services })
    }

    fn apply(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let transaction = self.connection.transaction()?;
        for change in changes {
            let (table, name) = change.key();
            let spec = match change {
                Change::PutDataCenter(datacenter) => Some(serde_json::to_string(datacenter)),
                Change::PutRegion(region) => Some(serde_json::to_string(region)),
                Change::PutService(service) => Some(serde_json::to_string(service)),
                Change::DeleteDataCenter(_) | Change::DeleteRegion(_) | Change::DeleteService(_) => None,
            };
            match spec {
                Some(spec) => {
                    let spec = spec.expect("declarations serialize");
                    transaction
                        .prepare_cached(&format!("INSERT OR REPLACE INTO {table} (name, spec) VALUES (?1, ?2)"))?
                        .execute(params![name, spec])?
                }
                None => transaction.prepare_cached(&format!("DELETE FROM {table} WHERE name = ?1"))?.execute(params![name])?,
            };
        }
        transaction.commit()?;
        Ok(())
    }

    fn load_measurements(&mut self) -> Result<MeasurementBook, StoreError> {
        let mut statement = self.connection.prepare("SELECT subnet, datacenter, rtt_ms, measured_at FROM measurements")?;
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, f64>(2)?, row.get::<_, i64>(3)?)))?;
        let mut book = MeasurementBook::new();
        for row in rows {
            let (subnet, datacenter, rtt_ms, at) = row?;
            let prefix = parse_prefix(&subnet).map_err(|message| StoreError::CorruptMeasurement { subnet: subnet.clone(), message })?;
            book.entry(prefix).or_default().insert(datacenter, Measured { rtt_ms, at: at.max(0) as u64 });
        }
        Ok(book)
    }

    fn record_measurements(&mut self, batch: &[Measurement], older_than: u64) -> Result<(), StoreError> {
        let transaction = self.connection.transaction()?;
        {
            let mut upsert = transaction.prepare(
                "INSERT INTO measurements (subnet, datacenter, rtt_ms, measured_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (subnet, datacenter) DO UPDATE SET rtt_ms = excluded.rtt_ms, measured_at = excluded.measured_at
                 WHERE excluded.measured_at >= measurements.measured_at",
            )?;
            for measurement in batch {
                let subnet = format!("{}/{}", measurement.subnet.0, measurement.subnet.1);
                let at = i64::try_from(measurement.measured.at).unwrap_or(i64::MAX);
                upsert.execute(params![subnet, measurement.datacenter, measurement.measured.rtt_ms, at])?;
            }
            let older_than = i64::try_from(older_than).unwrap_or(i64::MAX);
            transaction.execute("DELETE FROM measurements WHERE measured_at < ?1", params![older_than])?;
        }
        transaction.commit()?;
        Ok(())
    }

    fn setting(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.connection.query_row("SELECT value FROM settings WHERE key = ?1", params![key], |row| row.get(0)).optional()?)
    }

    fn set_setting(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.connection.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?1, ?2)", params![key, value])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(name: &str, id: u32) -> RegionSpec {
        RegionSpec { id, name: name.into(), prefixes: vec!["192.0.2.0/24".into()], ..RegionSpec::default() }
    }

    fn service(name: &str) -> ServiceSpec {
        ServiceSpec { ttl: 60, ..ServiceSpec::new(name, "static", Vec::new()) }
    }

    #[test]
    fn changes_are_applied_together_and_read_back_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.sqlite");
        let mut store = SqliteStore::open(&path).unwrap();
        let fra = DataCenterSpec { id: "fra".into(), latitude: 50.1, longitude: 8.7, asn: Some(64500) };
        let changes = [
            Change::PutRegion(region("eu", 1)),
            Change::PutService(service("b.test")),
            Change::PutService(service("a.test")),
            Change::PutDataCenter(fra),
        ];
        store.apply(&changes).unwrap();
        store.apply(&[Change::DeleteService("b.test".into())]).unwrap();
        store.set_setting("token", "secret").unwrap();
        drop(store);
        let mut reopened = SqliteStore::open(&path).unwrap();
        let state = reopened.load().unwrap();
        assert_eq!(state, State::default().with(&changes).with(&[Change::DeleteService("b.test".into())]));
        assert_eq!(reopened.setting("token").unwrap().as_deref(), Some("secret"));
        assert_eq!(reopened.setting("missing").unwrap(), None);
    }

    #[test]
    fn refuses_a_schema_newer_than_it_knows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.sqlite");
        drop(SqliteStore::open(&path).unwrap());
        Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
        assert!(matches!(SqliteStore::open(&path), Err(StoreError::TooNew { found: 99, .. })));
    }

    #[test]
    fn reports_corrupt_rows_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.sqlite");
        let mut store = SqliteStore::open(&path).unwrap();
        store.connection.execute("INSERT INTO services (name, spec) VALUES ('x.test', '{')", []).unwrap();
        let error = store.load().unwrap_err().to_string();
        assert!(error.contains("service \"x.test\""), "{error}");
    }
}

#[cfg(test)]
mod measurement_tests {
    use super::*;

    fn measurement(subnet: &str, datacenter: &str, rtt_ms: f64, at: u64) -> Measurement {
        Measurement { subnet: parse_prefix(subnet).unwrap(), datacenter: datacenter.into(), measured: Measured { rtt_ms, at } }
    }

    #[test]
    fn the_newest_measurement_per_pair_is_kept_and_old_ones_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.sqlite");
        let mut store = SqliteStore::open(&path).unwrap();
        store
            .record_measurements(
                &[
                    measurement("10.1.0.0/16", "fra", 20.0, 1000),
                    measurement("10.1.0.0/16", "iad", 80.0, 1000),
                    measurement("2001:db8::/32", "fra", 5.0, 1000),
                ],
                0,
            )
            .unwrap();
        // An older report of a known pair changes nothing; a newer one wins.
        store
            .record_measurements(&[measurement("10.1.0.0/16", "fra", 99.0, 900), measurement("10.1.0.0/16", "iad", 70.0, 1100)], 0)
            .unwrap();
        store.record_measurements(&[measurement("10.2.0.0/16", "fra", 1.0, 2000)], 1001).unwrap();
        drop(store);
        let book = SqliteStore::open(&path).unwrap().load_measurements().unwrap();
        let kept: Vec<(String, &str, f64, u64)> = book
            .iter()
            .flat_map(|((network, length), by_datacenter)| {
                by_datacenter
                    .iter()
                    .map(move |(datacenter, measured)| (format!("{network}/{length}"), datacenter.as_str(), measured.rtt_ms, measured.at))
            })
            .collect();
        assert_eq!(kept, [("10.1.0.0/16".to_string(), "iad", 70.0, 1100), ("10.2.0.0/16".to_string(), "fra", 1.0, 2000)]);
    }
}
