//! Every store behaviour, checked on both engines: each case is written
//! once over an [`Engine`] and run on SQLite (a temporary file) and on a
//! real PostgreSQL (tests/suite/common/postgres.rs); then what only a networked
//! database can get wrong (its url, its hosts, its going away).

#[path = "../../../tests/suite/common/postgres.rs"]
mod postgres;

use pharos_model::fleet::NodeVerdict;
use pharos_model::spec::{DataCenterSpec, RegionSpec, ServiceSpec};
use pharos_model::token::{Scope, TokenSpec};
use pharos_model::zone::ZoneSpec;
use pharos_model::{Change, Measurement, State};
use pharos_route::latency::Measured;
use pharos_route::prefix::parse_prefix;
use pharos_store::{Batch, Following, PostgresStore, SCHEMA_VERSION, SqliteStore, Store, StoreError};
use postgres::Postgres;

/// One database, opened as a store as often as a case needs, and written
/// to behind the store's back.
trait Engine {
    fn open(&self) -> Result<Box<dyn Store>, StoreError>;
    /// Runs `sql` directly on the database (no store open: SQLite's store
    /// holds its file's lock).
    fn execute(&self, sql: &str);
    /// Makes the database claim it has had `version` migrations.
    fn set_schema_version(&self, version: i64);
}

struct Sqlite {
    dir: tempfile::TempDir,
}

impl Sqlite {
    fn new() -> Sqlite {
        Sqlite { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("pharos.sqlite")
    }
}

impl Engine for Sqlite {
    fn open(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(SqliteStore::open(&self.path())?))
    }

    fn execute(&self, sql: &str) {
        rusqlite::Connection::open(self.path()).unwrap().execute_batch(sql).unwrap();
    }

    fn set_schema_version(&self, version: i64) {
        self.execute(&format!("PRAGMA user_version = {version}"));
    }
}

struct Postgresql {
    server: Postgres,
    url: String,
}

impl Postgresql {
    fn new() -> Postgresql {
        let server = Postgres::start();
        let url = server.create_database("pharos");
        Postgresql { server, url }
    }
}

impl Engine for Postgresql {
    fn open(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(PostgresStore::open(&self.url, || {})?))
    }

    fn execute(&self, sql: &str) {
        self.server.sql("pharos", sql);
    }

    fn set_schema_version(&self, version: i64) {
        self.execute(&format!("UPDATE pharos_schema SET version = {version}"));
    }
}

/// Runs each case, a function of `&dyn Engine`, once per engine.
macro_rules! on_both_engines {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $case() { super::$case(&super::Sqlite::new()) })*
        }
        mod postgresql {
            $(#[test] fn $case() { super::$case(&super::Postgresql::new()) })*
        }
    };
}

on_both_engines!(
    changes_are_applied_together_and_read_back_after_reopening,
    refuses_a_schema_newer_than_it_knows,
    reports_corrupt_rows_by_name,
    the_newest_measurement_per_pair_is_kept_and_old_ones_are_forgotten,
    a_node_reads_only_the_measurements_recorded_after_its_last_stamp,
    every_batch_is_logged_under_the_next_sequence,
    news_are_the_batches_and_the_measurements_after_what_was_read,
    a_batch_made_from_a_state_without_the_last_one_logged_is_refused,
    a_corrupt_logged_batch_is_named_by_its_sequence,
    a_batch_logged_before_authors_were_kept_has_none,
    a_setting_made_by_several_at_once_is_the_first_one_written,
    each_node_keeps_one_verdict_per_replica_and_reads_every_node_s,
);

fn a_setting_made_by_several_at_once_is_the_first_one_written(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    assert_eq!(store.setting_or_insert("cookie_secret", "first").unwrap(), "first");
    assert_eq!(store.setting_or_insert("cookie_secret", "second").unwrap(), "first", "kept, not replaced");
    assert_eq!(store.setting("cookie_secret").unwrap().as_deref(), Some("first"));
}

#[test]
fn nodes_making_a_setting_at_once_all_keep_the_first_one_written() {
    let engine = Postgresql::new();
    let writers = 4;
    let starting = std::sync::Barrier::new(writers);
    let kept: Vec<String> = std::thread::scope(|scope| {
        let racing: Vec<_> = (0..writers)
            .map(|writer| {
                let (engine, starting) = (&engine, &starting);
                scope.spawn(move || {
                    let mut store = engine.open().unwrap();
                    starting.wait();
                    store.setting_or_insert("token", &format!("made by {writer}")).unwrap()
                })
            })
            .collect();
        racing.into_iter().map(|writer| writer.join().unwrap()).collect()
    });
    assert!(kept.iter().all(|token| *token == kept[0]), "every node keeps the same token: {kept:?}");
    assert_eq!(engine.open().unwrap().setting("token").unwrap().as_ref(), Some(&kept[0]));
}

fn region(name: &str, id: u32) -> RegionSpec {
    RegionSpec { id, name: name.into(), prefixes: vec!["192.0.2.0/24".into()], ..RegionSpec::default() }
}

fn service(name: &str) -> ServiceSpec {
    ServiceSpec { ttl: 60, ..ServiceSpec::new(name, "static", Vec::new()) }
}

fn token(revoked: bool) -> TokenSpec {
    TokenSpec { name: "ci".into(), sha256: "0".repeat(64), scope: Scope::Read, created: 1_700_000_000, revoked }
}

fn changes_are_applied_together_and_read_back_after_reopening(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    let fra = DataCenterSpec { id: "fra".into(), latitude: 50.1, longitude: 8.7, asn: Some(64500) };
    // Names whose order differs between byte order and a locale's; one
    // made and deleted in the batch (the writes are sent together, and
    // must still be made in order).
    let changes = [
        Change::PutRegion(region("eu", 1)),
        Change::PutService(service("b.test")),
        Change::PutService(service("c.test")),
        Change::PutService(service("a.test")),
        Change::DeleteService("c.test".into()),
        Change::PutService(service("B.test")),
        Change::PutDataCenter(fra),
        Change::PutToken(token(false)),
        Change::PutZone(zone("b.test.", 1)),
        Change::PutZone(zone("a.test.", 1)),
    ];
    // A token is revoked as it is changed: by a later batch.
    let later = [
        Change::DeleteService("b.test".into()),
        Change::PutToken(token(true)),
        Change::PutZone(zone("a.test.", 2)),
        Change::DeleteZone("b.test.".into()),
    ];
    store.apply(0, &changes, &[]).unwrap();
    store.apply(1, &later, &[]).unwrap();
    store.set_setting("token", "secret").unwrap();
    store.set_setting("token", "rotated").unwrap();
    drop(store);
    let mut reopened = engine.open().unwrap();
    let (state, sequence) = reopened.load().unwrap();
    assert_eq!(sequence, 2);
    assert_eq!(state, State::default().with(&changes).with(&later));
    assert!(state.tokens[0].revoked);
    assert_eq!(state.zones.iter().map(|zone| zone.text.as_str()).collect::<Vec<_>>(), [zone("a.test.", 2).text]);
    assert_eq!(reopened.setting("token").unwrap().as_deref(), Some("rotated"));
    assert_eq!(reopened.setting("missing").unwrap(), None);
}

fn zone(name: &str, serial: u32) -> ZoneSpec {
    ZoneSpec {
        name: name.into(),
        text: format!("{name} 300 IN SOA ns.{name} hostmaster.{name} {serial} 1 1 1 1\n{name} 300 IN NS ns.{name}\n"),
    }
}

fn refuses_a_schema_newer_than_it_knows(engine: &dyn Engine) {
    drop(engine.open().unwrap());
    engine.set_schema_version(99);
    assert!(matches!(engine.open().err(), Some(StoreError::TooNew { found: 99, .. })));
}

fn reports_corrupt_rows_by_name(engine: &dyn Engine) {
    drop(engine.open().unwrap());
    engine.execute("INSERT INTO services (name, spec) VALUES ('x.test', '{')");
    let error = engine.open().unwrap().load().unwrap_err().to_string();
    assert!(error.contains("service \"x.test\""), "{error}");
}

fn every_batch_is_logged_under_the_next_sequence(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    assert_eq!(store.changes_after(0).unwrap(), []);
    let first = Batch {
        changes: vec![Change::PutRegion(region("eu", 1)), Change::PutService(service("a.test"))],
        authors: vec!["ci".into(), "ops".into()],
    };
    let second = unauthored(&[Change::DeleteService("a.test".into())]);
    assert_eq!(store.apply(0, &first.changes, &first.authors).unwrap(), 1);
    assert_eq!(store.apply(1, &second.changes, &second.authors).unwrap(), 2);
    drop(store);
    let mut reopened = engine.open().unwrap();
    assert_eq!(reopened.changes_after(0).unwrap(), [(1, first), (2, second.clone())]);
    assert_eq!(reopened.changes_after(1).unwrap(), [(2, second)]);
    assert_eq!(reopened.changes_after(2).unwrap(), []);
}

fn news_are_the_batches_and_the_measurements_after_what_was_read(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    let nothing = store.news_after(0, 0).unwrap();
    assert_eq!((nothing.batches, nothing.measurements), (vec![], (vec![], 0)));
    let first = unauthored(&[Change::PutService(service("a.test"))]);
    let second = unauthored(&[Change::PutService(service("b.test"))]);
    store.apply(0, &first.changes, &first.authors).unwrap();
    store.apply(1, &second.changes, &second.authors).unwrap();
    let stamp = store.record_measurements(&[measurement("10.1.0.0/16", "fra", 20.0, 1000)], 0).unwrap();
    let news = store.news_after(1, 0).unwrap();
    assert_eq!(news.batches, [(2, second)]);
    assert_eq!((listed(&news.measurements.0), news.measurements.1), (vec![("10.1.0.0/16".to_string(), "fra", 20.0, 1000)], stamp));
    let news = store.news_after(2, stamp).unwrap();
    assert_eq!((news.batches, news.measurements), (vec![], (vec![], stamp)), "nothing new");
}

fn a_batch_made_from_a_state_without_the_last_one_logged_is_refused(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    store.apply(0, &[Change::PutService(service("a.test"))], &[]).unwrap();
    let stale = [Change::DeleteService("a.test".into())];
    let error = store.apply(0, &stale, &[]).unwrap_err();
    assert!(matches!(error, StoreError::Behind { applied: 0, latest: 1 }), "{error}");
    assert!(error.to_string().contains("changes up to 1 that this node has not applied yet"), "{error}");
    let error = store.apply(2, &stale, &[]).unwrap_err();
    assert!(matches!(error, StoreError::Behind { applied: 2, latest: 1 }), "ahead of the log is no better: {error}");
    assert_eq!(store.load().unwrap(), (State::default().with(&[Change::PutService(service("a.test"))]), 1), "nothing written");
    assert_eq!(store.apply(1, &stale, &[]).unwrap(), 2);
}

fn a_corrupt_logged_batch_is_named_by_its_sequence(engine: &dyn Engine) {
    drop(engine.open().unwrap());
    engine.execute("INSERT INTO changes (sequence, batch) VALUES (7, '[{')");
    let error = engine.open().unwrap().changes_after(0).unwrap_err().to_string();
    assert!(error.contains("change batch \"7\""), "{error}");
}

fn a_batch_logged_before_authors_were_kept_has_none(engine: &dyn Engine) {
    drop(engine.open().unwrap());
    engine.execute("INSERT INTO changes (sequence, batch) VALUES (1, '[{\"DeleteService\": \"a.test\"}]')");
    assert_eq!(engine.open().unwrap().changes_after(0).unwrap(), [(1, unauthored(&[Change::DeleteService("a.test".into())]))]);
}

/// A batch of `changes` no token asked for.
fn unauthored(changes: &[Change]) -> Batch {
    Batch { changes: changes.to_vec(), authors: Vec::new() }
}

fn measurement(subnet: &str, datacenter: &str, rtt_ms: f64, at: u64) -> Measurement {
    Measurement { subnet: parse_prefix(subnet).unwrap(), datacenter: datacenter.into(), measured: Measured { rtt_ms, at } }
}

/// `(subnet, data center, rtt, at)` of each measurement, sorted.
fn listed(measurements: &[Measurement]) -> Vec<(String, &str, f64, u64)> {
    let mut listed: Vec<_> = measurements
        .iter()
        .map(|kept| {
            let (network, length) = kept.subnet;
            (format!("{network}/{length}"), kept.datacenter.as_str(), kept.measured.rtt_ms, kept.measured.at)
        })
        .collect();
    listed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    listed
}

fn the_newest_measurement_per_pair_is_kept_and_old_ones_are_forgotten(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    let first = [
        measurement("10.1.0.0/16", "fra", 20.0, 1000),
        measurement("10.1.0.0/16", "iad", 80.0, 1000),
        measurement("2001:db8::/32", "fra", 5.0, 1000),
    ];
    assert_eq!(store.record_measurements(&first, 0).unwrap(), 2, "batches are stamped from 2 on");
    // An older report of a known pair changes nothing; a newer one wins.
    let second = [measurement("10.1.0.0/16", "fra", 99.0, 900), measurement("10.1.0.0/16", "iad", 70.1, 1100)];
    assert_eq!(store.record_measurements(&second, 0).unwrap(), 3);
    assert_eq!(store.record_measurements(&[measurement("10.2.0.0/16", "fra", 1.0, 2000)], 1001).unwrap(), 4);
    drop(store);
    let (kept, last) = engine.open().unwrap().measurements_after(0).unwrap();
    assert_eq!(listed(&kept), [("10.1.0.0/16".to_string(), "iad", 70.1, 1100), ("10.2.0.0/16".to_string(), "fra", 1.0, 2000)]);
    assert_eq!(last, 4);
}

fn a_node_reads_only_the_measurements_recorded_after_its_last_stamp(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    let stamp = store.record_measurements(&[measurement("10.1.0.0/16", "fra", 20.0, 1000)], 0).unwrap();
    let (kept, last) = store.measurements_after(0).unwrap();
    assert_eq!((listed(&kept), last), (vec![("10.1.0.0/16".to_string(), "fra", 20.0, 1000)], stamp));
    assert_eq!(store.measurements_after(last).unwrap(), (vec![], last), "nothing new");
    let newer = [measurement("10.1.0.0/16", "fra", 7.0, 1001), measurement("10.9.0.0/16", "iad", 30.0, 1001)];
    let next = store.record_measurements(&newer, 0).unwrap();
    assert_eq!(next, stamp + 1);
    let (kept, last) = store.measurements_after(stamp).unwrap();
    assert_eq!(listed(&kept), [("10.1.0.0/16".to_string(), "fra", 7.0, 1001), ("10.9.0.0/16".to_string(), "iad", 30.0, 1001)]);
    assert_eq!(last, next);
}

#[test]
fn a_url_that_is_no_connection_string_is_refused_saying_what_is_expected() {
    for url in ["postgres://[::1", "host=", "sqlite:///var/lib/pharos.db"] {
        let error = PostgresStore::open(url, || {}).err().map(|error| error.to_string()).unwrap_or_default();
        assert!(error.starts_with("invalid store url (expected a libpq connection string"), "{url}: {error}");
    }
}

#[test]
fn a_database_nobody_listens_for_is_reported_unreachable() {
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let error = PostgresStore::open(&format!("postgres://postgres@127.0.0.1:{closed_port}/pharos"), || {}).err().unwrap().to_string();
    assert!(error.starts_with("PostgreSQL cannot be reached") && error.contains("refused"), "{error}");
}

#[test]
fn a_database_that_goes_away_fails_each_call_clearly_and_serves_again_when_back() {
    let engine = Postgresql::new();
    let mut store = engine.open().unwrap();
    store.apply(0, &[Change::PutService(service("a.test"))], &[]).unwrap();
    engine.server.stop();
    let error = store.apply(1, &[Change::PutService(service("b.test"))], &[]).unwrap_err().to_string();
    assert!(error.starts_with("PostgreSQL"), "{error}");
    let error = store.load().unwrap_err().to_string();
    assert!(error.starts_with("PostgreSQL cannot be reached"), "{error}");
    engine.server.start_server();
    // The pool replaces the dead connections: no reopening needed.
    store.apply(1, &[Change::PutService(service("b.test"))], &[]).unwrap();
    let names: Vec<String> = store.load().unwrap().0.services.iter().map(|service| service.name.clone()).collect();
    assert_eq!(names, ["a.test", "b.test"]);
}

#[test]
fn of_several_hosts_the_read_write_one_is_written_to() {
    // The first host is up but read-only, as a standby is; the second
    // takes writes.
    let standby = Postgres::start();
    standby.create_database("pharos");
    standby.sql("postgres", "ALTER SYSTEM SET default_transaction_read_only = on");
    standby.sql("postgres", "SELECT pg_reload_conf()");
    let primary = Postgresql::new();
    let url = format!("postgres://postgres@127.0.0.1:{},127.0.0.1:{}/pharos", standby.port, primary.server.port);
    let mut store = PostgresStore::open(&url, || {}).unwrap();
    store.apply(0, &[Change::PutService(service("a.test"))], &[]).unwrap();
    assert_eq!(primary.server.sql("pharos", "SELECT name FROM services"), "a.test\n");
}

#[test]
fn nodes_starting_together_on_a_new_database_migrate_it_once() {
    let engine = Postgresql::new();
    let starting = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        let opened: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    starting.wait();
                    PostgresStore::open(&engine.url, || {}).map(drop)
                })
            })
            .collect();
        for store in opened {
            store.join().unwrap().unwrap();
        }
    });
    assert_eq!(engine.server.sql("pharos", "SELECT count(*), max(version) FROM pharos_schema"), format!("1|{SCHEMA_VERSION}\n"));
}

#[test]
fn nodes_writing_at_once_log_every_batch_once_in_the_order_they_committed() {
    const NODES: usize = 4;
    const BATCHES: usize = 25;
    let engine = Postgresql::new();
    drop(engine.open().unwrap());
    let starting = std::sync::Barrier::new(NODES);
    let mut applied: Vec<(u64, Batch)> = std::thread::scope(|scope| {
        let nodes: Vec<_> = (0..NODES)
            .map(|node| {
                let (engine, starting) = (&engine, &starting);
                scope.spawn(move || {
                    let mut store = engine.open().unwrap();
                    starting.wait();
                    let mut after = 0;
                    (0..BATCHES)
                        .map(|batch| {
                            let changes = unauthored(&[Change::PutService(service(&format!("n{node}-{batch}.test")))]);
                            after = apply_catching_up(store.as_mut(), after, &changes);
                            (after, changes)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        nodes.into_iter().flat_map(|node| node.join().unwrap()).collect()
    });
    applied.sort_by_key(|(sequence, _)| *sequence);
    let sequences: Vec<u64> = applied.iter().map(|(sequence, _)| *sequence).collect();
    assert_eq!(sequences, (1..=(NODES * BATCHES) as u64).collect::<Vec<_>>());
    assert_eq!(engine.open().unwrap().changes_after(0).unwrap(), applied);
}

/// Applies `changes` made from the state as of `after`, as a node does:
/// when others logged first, it reads their batches and tries again.
/// Returns the sequence its batch was logged under.
fn apply_catching_up(store: &mut dyn Store, mut after: u64, changes: &Batch) -> u64 {
    for _ in 0..1000 {
        match store.apply(after, &changes.changes, &changes.authors) {
            Ok(sequence) => return sequence,
            Err(StoreError::Behind { latest, .. }) => after = latest,
            Err(error) => panic!("{error}"),
        }
    }
    panic!("never caught up with the others")
}

/// A follower's news, waited for with a deadline.
struct Followed(std::sync::mpsc::Receiver<Following>);

impl Followed {
    fn start(store: &mut dyn Store) -> Followed {
        let (wake, news) = std::sync::mpsc::channel();
        store.follow(Box::new(move |news| drop(wake.send(news))));
        Followed(news)
    }

    /// Waits (at most 20 s) for news that `wanted` accepts, skipping others.
    fn until(&self, wanted: impl Fn(&Following) -> bool) -> Following {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let news = self.0.recv_timeout(left).expect("the follower's news in time");
            if wanted(&news) {
                return news;
            }
        }
    }
}

#[test]
fn a_follower_is_woken_by_each_batch_another_logs_with_the_batch_if_it_fits_and_listens_again_when_cut_off() {
    let engine = Postgresql::new();
    let mut follower = engine.open().unwrap();
    let news = Followed::start(follower.as_mut());
    news.until(|news| *news == Following::Listening);
    let mut writer = engine.open().unwrap();
    let first = Batch { changes: vec![Change::PutService(service("a.test"))], authors: vec!["ci".into()] };
    let second = unauthored(&[Change::DeleteService("a.test".into())]);
    // Over 8,000 octets as JSON: too large for a notification.
    let large: Vec<Change> = (0..200).map(|number| Change::PutService(service(&format!("s{number}.test")))).collect();
    let large = unauthored(&large);
    writer.apply(0, &first.changes, &first.authors).unwrap();
    writer.apply(1, &second.changes, &second.authors).unwrap();
    writer.apply(2, &large.changes, &large.authors).unwrap();
    news.until(|news| *news == Following::Notified(1, Some(first.clone())));
    news.until(|news| *news == Following::Notified(2, Some(second.clone())));
    news.until(|news| *news == Following::Notified(3, None));
    assert_eq!(follower.changes_after(0).unwrap(), vec![(1, first), (2, second), (3, large)]);
    let listener = format!("application_name = 'pharos-follower-{}'", std::process::id());
    assert_eq!(engine.server.sql("pharos", &format!("SELECT count(*) FROM pg_stat_activity WHERE {listener}")), "1\n");
    engine.server.sql("pharos", &format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {listener}"));
    let Following::Lost(why) = news.until(|news| matches!(news, Following::Lost(_))) else { unreachable!() };
    assert!(why.contains("terminating connection due to administrator command"), "{why}");
    news.until(|news| *news == Following::Listening);
}

#[test]
fn a_store_opened_while_the_database_is_down_connects_and_migrates_at_its_first_call_that_reaches_it() {
    let engine = Postgresql::new();
    engine.server.stop();
    assert!(PostgresStore::open(&engine.url, || {}).is_err(), "open connects at once");
    let mut store = PostgresStore::open_later(&engine.url, || {}).unwrap();
    let error = store.apply(0, &[Change::PutService(service("a.test"))], &[]).unwrap_err().to_string();
    assert!(error.starts_with("PostgreSQL cannot be reached"), "{error}");
    engine.server.start_server();
    assert_eq!(store.apply(0, &[Change::PutService(service("a.test"))], &[]).unwrap(), 1);
    assert_eq!(engine.server.sql("pharos", "SELECT max(version) FROM pharos_schema"), format!("{SCHEMA_VERSION}\n"));
}

fn verdict(node: &str, replica: &str, up: bool, since: u64) -> NodeVerdict {
    let reason = if up { "probe passed" } else { "probe failed: refused" };
    NodeVerdict { node: node.into(), service: "s.test".into(), replica: replica.into(), up, reason: reason.into(), since }
}

fn each_node_keeps_one_verdict_per_replica_and_reads_every_node_s(engine: &dyn Engine) {
    let mut store = engine.open().unwrap();
    let first = store.exchange_health("n1", 1000, &[verdict("n1", "a", true, 900), verdict("n1", "b", true, 900)], 0).unwrap();
    assert_eq!(first.reported, [("n1".to_owned(), 1000)].into());
    assert_eq!(first.verdicts, [verdict("n1", "a", true, 900), verdict("n1", "b", true, 900)]);
    assert_eq!(first.stamp, 2, "verdicts are stamped from 2 on");
    let second = store.exchange_health("n2", 1500, &[verdict("n2", "a", false, 1400)], first.stamp).unwrap();
    assert_eq!((second.verdicts, second.stamp), (vec![verdict("n2", "a", false, 1400)], 3), "only what changed");
    drop(store);
    // A transition replaces the node's row; a report with none only says
    // the node is alive, and takes no stamp.
    let mut reopened = engine.open().unwrap();
    let third = reopened.exchange_health("n1", 2000, &[verdict("n1", "a", false, 1900)], 0).unwrap();
    assert_eq!(third.stamp, 4);
    let reports = reopened.exchange_health("n2", 2500, &[], 0).unwrap();
    assert_eq!(reports.reported, [("n1".to_owned(), 2000), ("n2".to_owned(), 2500)].into());
    assert_eq!(reports.verdicts, [verdict("n1", "a", false, 1900), verdict("n1", "b", true, 900), verdict("n2", "a", false, 1400)]);
    assert_eq!(reports.stamp, 4);
    let quiet = reopened.exchange_health("n1", 3000, &[], 4).unwrap();
    assert_eq!((quiet.verdicts, quiet.stamp, quiet.reported.len()), (vec![], 4, 2), "nothing changed: no verdict read");
}

/// The threads the store's runtime started, by name, as they started.
static STARTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn note_thread_start() {
    let name = std::thread::current().name().unwrap_or_default().to_owned();
    STARTED.lock().unwrap().push(name);
}

#[test]
fn the_store_thread_runs_what_it_is_given_at_its_start() {
    // Nothing listens there: the runtime starts without a connection.
    let _store = PostgresStore::open_later("postgres://postgres@127.0.0.1:1/pharos", note_thread_start).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while STARTED.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the store's thread never started");
        std::thread::yield_now();
    }
    assert_eq!(STARTED.lock().unwrap()[0], "store");
}
