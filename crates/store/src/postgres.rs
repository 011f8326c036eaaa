//! The fleet's store: one PostgreSQL database that every node shares.
//!
//! The store is given a libpq connection string (`postgres://...` or
//! `host=... dbname=...`), which may list several hosts: every connection
//! asks for a read-write session (`target_session_attrs=read-write`), so
//! after a failover the promoted standby is the one found. Connections come
//! from a small pool on the async client, driven by the store's own
//! runtime thread; the control thread that owns the store waits for each
//! call's transaction to commit, so the answering threads never touch the
//! database. TLS is not spoken: reach the database over a trusted network.
//!
//! Every node makes or reads each change (at 100 a second in a storm), on
//! the core that answers its queries, so the change log's statements are
//! prepared once per connection, and those that do not wait on one another
//! are sent together (pipelined): logging a batch takes four round trips to
//! the database whatever it changes, reading the batches after a sequence
//! one (they took eleven and two, each statement prepared anew, and the
//! batch's entities one round trip each).
//!
//! Every batch logged is notified on commit (NOTIFY on one channel), the
//! batch itself in the notification when it fits, so that the nodes
//! following need not read it back; a follower ([`Store::follow`]) LISTENs
//! on a connection of its own, outside the pool, and wakes its node on
//! each notification, on each (re)connect and, as a safety net, every
//! [`LOOK_INTERVAL`]; a lost connection is made again with back-off.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use pharos_model::fleet::{FleetReports, NodeVerdict};
use pharos_model::spec::{DataCenterSpec, RegionSpec, ServiceSpec};
use pharos_model::token::TokenSpec;
use pharos_model::zone::ZoneSpec;
use pharos_wire::causes;
use serde::de::DeserializeOwned;
use tokio::runtime::Runtime;
use tokio_postgres::config::TargetSessionAttrs;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Config, IsolationLevel, NoTls, Row};

use crate::schema::Schema;
use crate::{
    Batch, Batches, Change, Measurement, NEXT_MEASUREMENT_STAMP, NEXT_VERDICT_STAMP, News, State, Store, StoreError, batch_row,
    check_not_behind, declaration_row, fleet_reports, last_stamp, millis_row, read_batch, read_declaration, read_measurement, schema,
    subnet_text,
};

/// How long to wait for a connection (to connect, or for a free one in the
/// pool) before reporting the database unreachable; a connection string's
/// own `connect_timeout` overrides it for connecting.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections kept: the control thread runs one transaction at a time.
const POOL_SIZE: usize = 2;
/// The advisory lock nodes starting together take turns on to migrate.
const MIGRATION_LOCK: i64 = 0x7068_6172_6f73; // "pharos"
/// The advisory lock writers of the change log take turns on, so that
/// sequence numbers commit in order: a reader that has seen sequence n
/// never later finds an n - 1 it skipped.
const CHANGE_LOG_LOCK: i64 = 0x0070_6861_726f_736c; // "pharosl"

/// PostgreSQL's limit on a notification's payload (octets, exclusive).
const NOTIFICATION_OCTETS: usize = 8000;
/// The last sequence logged (0 for none).
const LAST_SEQUENCE: &str = "SELECT COALESCE(MAX(sequence), 0) FROM changes";
const CHANGES_AFTER: &str = "SELECT sequence, batch, authors FROM changes WHERE sequence > $1 ORDER BY sequence";
const MEASUREMENTS_AFTER: &str = "SELECT subnet, datacenter, rtt_ms, measured_at, stamp FROM measurements WHERE stamp > $1";
/// The channel each logged batch is notified on.
const CHANGES_CHANNEL: &str = "pharos_changes";
/// How often a follower looks for batches without being notified: a
/// notification is lost if it comes while the listening connection is
/// being made again.
const LOOK_INTERVAL: Duration = Duration::from_secs(1);
/// The wait before making a lost listening connection again, doubled at
/// each failure up to the second (five seconds).
const RECONNECT_WAIT: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// What a follower tells its node.
#[derive(Debug, Clone, PartialEq)]
pub enum Following {
    /// Listening (again): batches logged from now on will be notified;
    /// those logged before may have been missed.
    Listening,
    /// The batch with this sequence was logged; the batch if the
    /// notification carried it (one too large for a notification is
    /// only named, and read from the database).
    Notified(u64, Option<Batch>),
    /// Time for a look: a notification may have been missed.
    Look,
    /// The listening connection is lost (why); it is being made again.
    Lost(String),
}

/// Where a follower's news go.
pub type Wake = Box<dyn Fn(Following) + Send + Sync>;

/// Routing state in a PostgreSQL database.
pub struct PostgresStore {
    /// The settings every connection is made with.
    config: Config,
    pool: Pool,
    /// Whether the schema is up to date (checked at the first call that
    /// reaches the database).
    migrated: AtomicBool,
    /// Runs the pool's connections between calls, and each call.
    runtime: Runtime,
}

impl PostgresStore {
    /// Connects to the database `url` names and brings its schema up to
    /// date; fails if the url is not a connection string or no host listed
    /// gives a read-write session. The store's runtime thread calls
    /// `on_thread_start` first (a server makes it yield to its query
    /// threads: it wakes for every round trip to the database).
    pub fn open(url: &str, on_thread_start: fn()) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::open_later(url, on_thread_start)?;
        // Reached and migrated; the connection goes back to the pool.
        drop(store.runtime.block_on(store.connection())?);
        Ok(store)
    }

    /// Like [`PostgresStore::open`], without connecting yet: for a node
    /// that starts while the database is down. The first call that reaches
    /// it brings its schema up to date.
    pub fn open_later(url: &str, on_thread_start: fn()) -> Result<PostgresStore, StoreError> {
        let config = connection_config(url)?;
        let runtime = store_runtime(on_thread_start)?;
        let pool = pool(&config);
        Ok(PostgresStore { config, pool, runtime, migrated: AtomicBool::new(false) })
    }

    /// What opening the database `url` names would do to its schema, read
    /// without writing; an error if it cannot be reached.
    pub fn inspect(url: &str) -> Result<Schema, StoreError> {
        let store = PostgresStore::open_later(url, || {})?;
        store.runtime.block_on(async {
            let client = store.pool.get().await.map_err(|error| StoreError::Unreachable(causes(&error)))?;
            let table = client.query_one("SELECT to_regclass('pharos_schema') IS NOT NULL", &[]).await?;
            if !table.get::<_, bool>(0) {
                return schema::schema_of(None);
            }
            let version = client.query_opt("SELECT version FROM pharos_schema", &[]).await?;
            schema::schema_of(version.map(|row| row.get(0)))
        })
    }

    /// A connection from the pool, to a database migrated by now.
    async fn connection(&self) -> Result<Object, StoreError> {
        // The pool's message alone says only that it could not connect; the
        // operator needs to know why (refused, timed out, authentication failed).
        let mut client = self.pool.get().await.map_err(|error| StoreError::Unreachable(causes(&error)))?;
        if !self.migrated.load(Ordering::Acquire) {
            migrate(&mut client).await?;
            self.migrated.store(true, Ordering::Release);
        }
        Ok(client)
    }
}

/// The runtime thread that drives the store's connections.
fn store_runtime(on_thread_start: fn()) -> Result<Runtime, StoreError> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(1).thread_name("store").on_thread_start(on_thread_start).enable_all();
    builder.build().map_err(StoreError::Runtime)
}

fn pool(config: &Config) -> Pool {
    let manager = Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(CONNECT_TIMEOUT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .recycle_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .expect("timeouts are allowed: a runtime is given")
}

/// The connection settings `url` gives, with a read-write session required
/// and a bounded connect time unless the url sets one.
fn connection_config(url: &str) -> Result<Config, StoreError> {
    let mut config = Config::from_str(url).map_err(|error| StoreError::InvalidUrl(error.to_string()))?;
    if config.get_hosts().is_empty() {
        return Err(StoreError::InvalidUrl("no host given".into()));
    }
    config.target_session_attrs(TargetSessionAttrs::ReadWrite);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

/// Applies the migrations the database lacks, in one transaction; the
/// number applied is kept in `pharos_schema`.
async fn migrate(client: &mut Object) -> Result<(), StoreError> {
    let transaction = client.transaction().await?;
    // Held until commit: a node starting beside another waits, then finds
    // the schema migrated.
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    transaction.batch_execute("CREATE TABLE IF NOT EXISTS pharos_schema (version BIGINT NOT NULL)").await?;
    let version: i64 = match transaction.query_opt("SELECT version FROM pharos_schema", &[]).await? {
        Some(row) => row.get(0),
        None => {
            transaction.execute("INSERT INTO pharos_schema (version) VALUES (0)", &[]).await?;
            0
        }
    };
    for (number, migration) in schema::pending(version)? {
        transaction.batch_execute(migration.postgres).await?;
        transaction.execute("UPDATE pharos_schema SET version = $1", &[&number]).await?;
    }
    transaction.commit().await?;
    Ok(())
}

/// A sequence or stamp as the database keeps it.
fn row_number(number: u64) -> i64 {
    i64::try_from(number).unwrap_or(i64::MAX)
}

fn read_batches(rows: Vec<Row>) -> Result<Batches, StoreError> {
    rows.iter().map(|row| read_batch(row.get(0), row.get(1), row.get(2))).collect()
}

/// The measurements in `rows` (read after `stamp`) and the stamp to ask
/// after next time.
fn read_measurements(rows: Vec<Row>, stamp: u64) -> Result<(Vec<Measurement>, u64), StoreError> {
    let measurements = rows.iter().map(|row| read_measurement(row.get(0), row.get(1), row.get(2), row.get(3)));
    Ok((measurements.collect::<Result<_, _>>()?, last_stamp(stamp, rows.iter().map(|row| row.get(4)))))
}

async fn read_all<T: DeserializeOwned>(client: &impl GenericClient, table: &str, what: &'static str) -> Result<Vec<T>, StoreError> {
    // Byte order, as SQLite sorts, whatever the database's collation.
    let rows = client.query(&format!("SELECT name, spec FROM {table} ORDER BY name COLLATE \"C\""), &[]).await?;
    rows.iter().map(|row| read_declaration(what, row.get(0), row.get(1))).collect()
}

impl Store for PostgresStore {
    fn load(&mut self) -> Result<(State, u64), StoreError> {
        self.runtime.block_on(async {
            let mut client = self.connection().await?;
            // One snapshot of all the tables, not one moment each.
            let transaction = client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await?;
            let datacenters: Vec<DataCenterSpec> = read_all(&transaction, "datacenters", "data center").await?;
            let regions: Vec<RegionSpec> = read_all(&transaction, "regions", "region").await?;
            let services: Vec<Arc<ServiceSpec>> = read_all(&transaction, "services", "service").await?;
            let tokens: Vec<TokenSpec> = read_all(&transaction, "tokens", "token").await?;
            let zones: Vec<Arc<ZoneSpec>> = read_all(&transaction, "zones", "zone").await?;
            let sequence: i64 = transaction.query_one(LAST_SEQUENCE, &[]).await?.get(0);
            transaction.commit().await?;
            Ok((State { datacenters, regions, services, tokens, zones }, sequence.max(0) as u64))
        })
    }

    fn apply(&mut self, after: u64, changes: &[Change], authors: &[String]) -> Result<u64, StoreError> {
        self.runtime.block_on(async {
            let mut client = self.connection().await?;
            let transaction = client.transaction().await?;
            let (lock, last, log, notify) = tokio::try_join!(
                transaction.prepare_cached("SELECT pg_advisory_xact_lock($1)"),
                transaction.prepare_cached(LAST_SEQUENCE),
                transaction.prepare_cached("INSERT INTO changes (sequence, batch, authors) VALUES ($1, $2, $3)"),
                transaction.prepare_cached("SELECT pg_notify($1, $2)"),
            )?;
            // Held until commit (see CHANGE_LOG_LOCK): the last sequence
            // read stays the last until this transaction logs the next.
            // Sent together (pipelined): the database takes the lock
            // before it reads.
            let (_, latest) = tokio::try_join!(transaction.execute(&lock, &[&CHANGE_LOG_LOCK]), transaction.query_one(&last, &[]))?;
            let sequence = check_not_behind(after, latest.get(0))?;
            let mut writes = Vec::with_capacity(changes.len());
            for change in changes {
                let (table, name) = change.key();
                let spec = declaration_row(change);
                let statement = match spec {
                    Some(_) => {
                        format!("INSERT INTO {table} (name, spec) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec")
                    }
                    None => format!("DELETE FROM {table} WHERE name = $1"),
                };
                writes.push((transaction.prepare_cached(&statement).await?, name, spec));
            }
            let writing = &transaction;
            let written = writes.iter().map(|(statement, name, spec)| async move {
                match spec {
                    Some(spec) => writing.execute(statement, &[name, spec]).await,
                    None => writing.execute(statement, &[name]).await,
                }
            });
            let logged = sequence as i64;
            // The notification is delivered to the listeners once
            // committed, never before.
            let (batch, authors) = batch_row(changes, authors);
            let payload = notification(logged, &batch, &authors);
            let log_row: [&(dyn ToSql + Sync); 3] = [&logged, &batch, &authors];
            let notification: [&(dyn ToSql + Sync); 2] = [&CHANGES_CHANNEL, &payload];
            // The entities, the log and the notification sent together
            // (pipelined), executed in that order.
            tokio::try_join!(
                futures_util::future::try_join_all(written),
                transaction.execute(&log, &log_row),
                transaction.execute(&notify, &notification)
            )?;
            transaction.commit().await?;
            Ok(sequence)
        })
    }

    fn changes_after(&mut self, sequence: u64) -> Result<Batches, StoreError> {
        self.runtime.block_on(async {
            let client = self.connection().await?;
            let read = client.prepare_cached(CHANGES_AFTER).await?;
            read_batches(client.query(&read, &[&row_number(sequence)]).await?)
        })
    }

    fn news_after(&mut self, sequence: u64, stamp: u64) -> Result<News, StoreError> {
        self.runtime.block_on(async {
            let client = self.connection().await?;
            let (changes, measurements) =
                tokio::try_join!(client.prepare_cached(CHANGES_AFTER), client.prepare_cached(MEASUREMENTS_AFTER))?;
            let (sequence_row, stamp_row) = (row_number(sequence), row_number(stamp));
            let (after_sequence, after_stamp): ([&(dyn ToSql + Sync); 1], [&(dyn ToSql + Sync); 1]) = ([&sequence_row], [&stamp_row]);
            // Sent together (pipelined): one round trip.
            let (batches, measured) = tokio::try_join!(client.query(&changes, &after_sequence), client.query(&measurements, &after_stamp))?;
            Ok(News { batches: read_batches(batches)?, measurements: read_measurements(measured, stamp)? })
        })
    }

    fn follow(&mut self, wake: Wake) {
        let mut config = self.config.clone();
        // Named, so an operator (or a test) can tell whose listener it is.
        config.application_name(format!("pharos-follower-{}", std::process::id()));
        self.runtime.spawn(follow(config, wake));
    }

    fn exchange_health(&mut self, node: &str, now: u64, verdicts: &[NodeVerdict], after: u64) -> Result<FleetReports, StoreError> {
        let after_row = i64::try_from(after).unwrap_or(i64::MAX);
        self.runtime.block_on(async {
            let mut client = self.connection().await?;
            let transaction = client.transaction().await?;
            let report = "INSERT INTO health_nodes (node, reported_at) VALUES ($1, $2)
                          ON CONFLICT (node) DO UPDATE SET reported_at = excluded.reported_at";
            transaction.execute(report, &[&node, &millis_row(now)]).await?;
            if !verdicts.is_empty() {
                // The counter row stays locked until commit (see the schema).
                let stamp: i64 = transaction.query_one(NEXT_VERDICT_STAMP, &[]).await?.get(0);
                let upsert = transaction
                    .prepare_cached(
                        "INSERT INTO health_verdicts (node, service, replica, up, reason, since, stamp)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)
                         ON CONFLICT (node, service, replica)
                         DO UPDATE SET up = excluded.up, reason = excluded.reason, since = excluded.since, stamp = excluded.stamp",
                    )
                    .await?;
                for verdict in verdicts {
                    let since = millis_row(verdict.since);
                    transaction
                        .execute(
                            &upsert,
                            &[&verdict.node, &verdict.service, &verdict.replica, &verdict.up, &verdict.reason, &since, &stamp],
                        )
                        .await?;
                }
            }
            let reported = transaction.query("SELECT node, reported_at FROM health_nodes", &[]).await?;
            let read = transaction
                .query(
                    "SELECT node, service, replica, up, reason, since, stamp FROM health_verdicts WHERE stamp > $1
                     ORDER BY node, service, replica",
                    &[&after_row],
                )
                .await?;
            transaction.commit().await?;
            let verdicts = read
                .iter()
                .map(|row| {
                    let verdict = NodeVerdict {
                        node: row.get(0),
                        service: row.get(1),
                        replica: row.get(2),
                        up: row.get(3),
                        reason: row.get(4),
                        since: row.get::<_, i64>(5).max(0) as u64,
                    };
                    (verdict, row.get(6))
                })
                .collect();
            Ok(fleet_reports(reported.iter().map(|row| (row.get(0), row.get(1))).collect(), verdicts, after))
        })
    }

    fn measurements_after(&mut self, stamp: u64) -> Result<(Vec<Measurement>, u64), StoreError> {
        self.runtime.block_on(async {
            let client = self.connection().await?;
            let read = client.prepare_cached(MEASUREMENTS_AFTER).await?;
            read_measurements(client.query(&read, &[&row_number(stamp)]).await?, stamp)
        })
    }

    fn record_measurements(&mut self, batch: &[Measurement], older_than: u64) -> Result<u64, StoreError> {
        self.runtime.block_on(async {
            let mut client = self.connection().await?;
            let transaction = client.transaction().await?;
            // The counter row stays locked until commit (see the schema).
            let stamp: i64 = transaction.query_one(NEXT_MEASUREMENT_STAMP, &[]).await?.get(0);
            let upsert = transaction
                .prepare_cached(
                    "INSERT INTO measurements (subnet, datacenter, rtt_ms, measured_at, stamp) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (subnet, datacenter)
                     DO UPDATE SET rtt_ms = excluded.rtt_ms, measured_at = excluded.measured_at, stamp = excluded.stamp
                     WHERE excluded.measured_at >= measurements.measured_at",
                )
                .await?;
            for measurement in batch {
                let at = i64::try_from(measurement.measured.at).unwrap_or(i64::MAX);
                let subnet = subnet_text(measurement);
                transaction.execute(&upsert, &[&subnet, &measurement.datacenter, &measurement.measured.rtt_ms, &at, &stamp]).await?;
            }
            let older_than = i64::try_from(older_than).unwrap_or(i64::MAX);
            transaction.execute("DELETE FROM measurements WHERE measured_at < $1", &[&older_than]).await?;
            transaction.commit().await?;
            Ok(stamp.max(0) as u64)
        })
    }

    fn setting(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        self.runtime.block_on(async {
            let client = self.connection().await?;
            let row = client.query_opt("SELECT value FROM settings WHERE key = $1", &[&key]).await?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn set_setting(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.runtime.block_on(async {
            let client = self.connection().await?;
            client
                .execute(
                    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[&key, &value],
                )
                .await?;
            Ok(())
        })
    }

    fn setting_or_insert(&mut self, key: &str, value: &str) -> Result<String, StoreError> {
        self.runtime.block_on(async {
            let client = self.connection().await?;
            // The no-op update takes the row's lock, so a racing insert
            // waits for the first to commit and returns its value.
            let kept = "INSERT INTO settings (key, value) VALUES ($1, $2) \
                        ON CONFLICT (key) DO UPDATE SET value = settings.value RETURNING value";
            Ok(client.query_one(kept, &[&key, &value]).await?.get(0))
        })
    }
}

/// What a batch's notification says: its sequence, then the batch (a
/// [`Batch`] as JSON, made of the row's `changes` and `authors`) if both
/// fit in one notification (PostgreSQL takes payloads shorter than 8,000
/// octets), so that the nodes following need not read it back.
fn notification(sequence: i64, changes: &str, authors: &str) -> String {
    let carried = format!(r#"{sequence} {{"changes":{changes},"authors":{authors}}}"#);
    if carried.len() < NOTIFICATION_OCTETS { carried } else { sequence.to_string() }
}

/// What a notification's payload tells: the sequence (0 if unreadable:
/// the node then looks for anything new) and the batch, if it carries
/// one that can be read (a node of an earlier version carries only the
/// changes: the batch is then read from the database, authors and all).
fn notified(payload: &str) -> Following {
    let (sequence, batch) = payload.split_once(' ').unwrap_or((payload, ""));
    let sequence: i64 = sequence.parse().unwrap_or_default();
    Following::Notified(sequence.max(0) as u64, serde_json::from_str(batch).ok())
}

/// Listens for logged batches for as long as the store's runtime runs,
/// making the connection again with back-off whenever it is lost.
async fn follow(config: Config, wake: Wake) {
    let (first_wait, longest_wait) = RECONNECT_WAIT;
    let mut wait = first_wait;
    loop {
        let lost = listen(&config, &wake, || wait = first_wait).await;
        wake(Following::Lost(lost));
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(longest_wait);
    }
}

/// Listens on one connection until it fails, waking on each notification
/// and every [`LOOK_INTERVAL`]; calls `listening` once it listens. Returns
/// why it stopped.
async fn listen(config: &Config, wake: &Wake, listening: impl FnOnce()) -> String {
    let (client, mut connection) = match config.connect(NoTls).await {
        Ok(connected) => connected,
        Err(error) => return causes(&error),
    };
    // The connection is driven here; the batches notified, or how it
    // ended, go to the loop below.
    let (news_of, mut notifications) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|context| connection.poll_message(context)).await {
            let news = match message {
                Ok(AsyncMessage::Notification(notification)) => Ok(notified(notification.payload())),
                Ok(_) => continue, // a notice
                Err(error) => Err(error),
            };
            let ended = news.is_err();
            if news_of.send(news).is_err() || ended {
                return;
            }
        }
    });
    if let Err(error) = client.batch_execute(&format!("LISTEN {CHANGES_CHANNEL}")).await {
        return causes(&error);
    }
    listening();
    wake(Following::Listening);
    loop {
        match tokio::time::timeout(LOOK_INTERVAL, notifications.recv()).await {
            Ok(Some(Ok(news))) => wake(news),
            Err(_) => wake(Following::Look),
            Ok(Some(Err(error))) => return causes(&error),
            Ok(None) => return "the server closed the connection".into(),
        }
    }
}
