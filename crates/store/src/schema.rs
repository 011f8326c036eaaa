//! The schema, one migration list for both engines: each step is written
//! once where the two dialects agree, twice where they differ.

use crate::StoreError;

/// One schema step as each engine spells it.
pub(crate) struct Migration {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

impl Migration {
    /// A step both engines read alike.
    const fn portable(sql: &'static str) -> Migration {
        Migration { sqlite: sql, postgres: sql }
    }
}

/// Schema migrations, applied in order; each database records how many it
/// has had. Never edit one that has shipped: add the next.
pub(crate) const MIGRATIONS: &[Migration] = &[
    // 1: regions and services, each one row holding its declaration as JSON,
    // so a service's replicas and probability table change together.
    Migration::portable(
        "CREATE TABLE regions (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
         CREATE TABLE services (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
         CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    ),
    // 2: data centers, where replicas run.
    Migration::portable("CREATE TABLE datacenters (name TEXT PRIMARY KEY, spec TEXT NOT NULL);"),
    // 3: latency measurements, the newest per client subnet and data center.
    // PostgreSQL's REAL is single precision and its INTEGER 32 bits: the
    // same values need DOUBLE PRECISION and BIGINT there.
    Migration {
        sqlite: "CREATE TABLE measurements (
                     subnet TEXT NOT NULL, datacenter TEXT NOT NULL, rtt_ms REAL NOT NULL, measured_at INTEGER NOT NULL,
                     PRIMARY KEY (subnet, datacenter)) WITHOUT ROWID;",
        postgres: "CREATE TABLE measurements (
                       subnet TEXT NOT NULL, datacenter TEXT NOT NULL, rtt_ms DOUBLE PRECISION NOT NULL,
                       measured_at BIGINT NOT NULL, PRIMARY KEY (subnet, datacenter));",
    },
    // 4: the change log: every applied batch under its sequence number, in
    // commit order, so a node sharing the database can replay what others
    // applied after the last batch it has.
    Migration::portable("CREATE TABLE changes (sequence BIGINT PRIMARY KEY, batch TEXT NOT NULL);"),
    // 5: health by quorum: when each node last reported, and each node's
    // verdict on each replica it probes (a row per node and replica,
    // written when the node's view changes). Times are Unix ms.
    Migration::portable(
        "CREATE TABLE health_nodes (node TEXT PRIMARY KEY, reported_at BIGINT NOT NULL);
         CREATE TABLE health_verdicts (
             node TEXT NOT NULL, service TEXT NOT NULL, replica TEXT NOT NULL,
             up BOOLEAN NOT NULL, reason TEXT NOT NULL, since BIGINT NOT NULL,
             PRIMARY KEY (node, service, replica));",
    ),
    // 6: measurements shared by a fleet: each batch recorded takes the next
    // stamp from a one-row counter and marks the rows it writes with it, so
    // a node reads what others recorded after the last stamp it has. The
    // counter row stays locked until the batch commits: stamps commit in
    // order and without gaps (a clock or an id sequence would not). Rows
    // kept before are stamp 1.
    Migration::portable(
        "CREATE TABLE measurement_stamp (last BIGINT NOT NULL);
         INSERT INTO measurement_stamp (last) VALUES (1);
         ALTER TABLE measurements ADD COLUMN stamp BIGINT NOT NULL DEFAULT 1;
         CREATE INDEX measurements_by_stamp ON measurements (stamp);",
    ),
    // 7: health verdicts read by what changed: each exchange that writes
    // verdicts stamps them as step 6 stamps measurements, and a node reads
    // only the verdicts stamped after the last it read.
    Migration::portable(
        "CREATE TABLE verdict_stamp (last BIGINT NOT NULL);
         INSERT INTO verdict_stamp (last) VALUES (1);
         ALTER TABLE health_verdicts ADD COLUMN stamp BIGINT NOT NULL DEFAULT 1;
         CREATE INDEX health_verdicts_by_stamp ON health_verdicts (stamp);",
    ),
    // 8: the control API's named tokens, each one row holding its name,
    // scope, the SHA-256 of its secret (never the secret), when it was
    // made and whether it is revoked, changed through the change log as
    // declarations are, so every node of a fleet sees a revocation.
    Migration::portable("CREATE TABLE tokens (name TEXT PRIMARY KEY, spec TEXT NOT NULL);"),
    // 9: the zones kept in the store, each one row holding its name and
    // its records as master-file text, changed through the change log as
    // declarations are, so every node of a fleet serves each version.
    Migration::portable("CREATE TABLE zones (name TEXT PRIMARY KEY, spec TEXT NOT NULL);"),
    // 10: who asked for each batch of the change log: the names of the
    // tokens, as a JSON array, so that every node of a fleet can name them.
    // NULL in the batches logged before, whose authors are unknown. A
    // column of its own, not a field of `batch`: a node not yet upgraded
    // still reads the batches the upgraded ones log.
    Migration::portable("ALTER TABLE changes ADD COLUMN authors TEXT;"),
];

/// The schema version this Pharos writes: the number of migrations.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The migrations a database at `version` still needs, numbered from 1;
/// an error if it is newer than this Pharos.
pub(crate) fn pending(version: i64) -> Result<impl Iterator<Item = (i64, &'static Migration)>, StoreError> {
    schema_of(Some(version))?;
    Ok(MIGRATIONS.iter().zip(1..).skip(version.max(0) as usize).map(|(migration, number)| (number, migration)))
}

/// What opening a database whose schema is at `version` (`None`: there is
/// no database yet) would do; an error if it is newer than this Pharos.
pub(crate) fn schema_of(version: Option<i64>) -> Result<Schema, StoreError> {
    let known = SCHEMA_VERSION;
    match version {
        None => Ok(Schema::Missing { known }),
        Some(found) if found > known => Err(StoreError::TooNew { found, known }),
        Some(found) if found < known => Ok(Schema::Behind { found, known }),
        Some(_) => Ok(Schema::Current { version: known }),
    }
}

/// The state of a store's schema, as `pharos check` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// There is no database yet: it is made at start.
    Missing {
        known: i64,
    },
    /// Migrated forward at start, from `found` to `known`.
    Behind {
        found: i64,
        known: i64,
    },
    Current {
        version: i64,
    },
    /// A running Pharos holds the file: it cannot be read beside it.
    InUse,
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Schema::Missing { known } => write!(f, "no database yet: it is made at start, at schema version {known}"),
            Schema::Behind { found, known } => write!(f, "schema version {found}: migrated forward to {known} at start"),
            Schema::Current { version } => write!(f, "schema version {version}, current"),
            Schema::InUse => write!(f, "in use by a running Pharos (which holds it locked): its schema was checked when that one started"),
        }
    }
}
