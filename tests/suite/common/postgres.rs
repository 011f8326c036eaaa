//! A real PostgreSQL for tests: `initdb` into a temporary directory and a
//! server on a free loopback port, run as the unprivileged `nobody`
//! (PostgreSQL refuses to run as root) and stopped on drop. The binaries
//! come from Debian's `postgresql` package (/usr/lib/postgresql/*/bin,
//! installed by scripts/test.sh). Authentication is `trust`, loopback only.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The unprivileged user the server runs as.
const SERVER_USER: &str = "nobody";

/// A running PostgreSQL server, stopped (immediately) when dropped.
pub struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
}

impl Postgres {
    /// Creates a database cluster and starts its server; `pg_ctl -w`
    /// returns once it accepts connections (or fails after 30 s).
    pub fn start() -> Postgres {
        let bin = binaries();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(uid(SERVER_USER)), None).unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let postgres = Postgres { bin, dir, port };
        let data = postgres.data();
        postgres.as_server_user("initdb", &["-D", &data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
        postgres.start_server();
        postgres
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Starts the server of an existing cluster (again, after [`Postgres::stop`]).
    pub fn start_server(&self) {
        let options = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.path().display());
        let log = self.dir.path().join("server.log").display().to_string();
        let started = self.run_as_server_user("pg_ctl", &["-D", &self.data(), "-l", &log, "-o", &options, "-w", "-t", "30", "start"]);
        assert!(started.status.success(), "PostgreSQL did not start: {}", std::fs::read_to_string(&log).unwrap_or_default());
    }

    /// Stops the server at once, as a crash would (`-m immediate`).
    pub fn stop(&self) {
        let stopped = self.stop_server();
        assert!(stopped.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&stopped.stderr));
    }

    fn stop_server(&self) -> Output {
        self.run_as_server_user("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"])
    }

    /// The connection string of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates an empty database and returns its connection string.
    pub fn create_database(&self, name: &str) -> String {
        self.sql("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url(name)
    }

    /// Runs `sql` on `database` with psql, stopping at the first error;
    /// returns what it printed, unaligned.
    pub fn sql(&self, database: &str, sql: &str) -> String {
        let output = self.psql(database).args(["-c", sql]).output().unwrap();
        assert!(output.status.success(), "psql {sql:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    /// A psql session on `database` that reads its statements from its
    /// standard input and prints results there, for a test that holds a
    /// transaction (and its locks) open while something else happens.
    #[allow(dead_code)] // crates/store's tests include this file and hold none
    pub fn session(&self, database: &str) -> std::process::Child {
        use std::process::Stdio;
        self.psql(database).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()
    }

    fn psql(&self, database: &str) -> Command {
        let mut psql = Command::new(self.bin.join("psql"));
        psql.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-qAt"]);
        psql
    }

    fn as_server_user(&self, program: &str, args: &[&str]) {
        let output = self.run_as_server_user(program, args);
        assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }

    fn run_as_server_user(&self, program: &str, args: &[&str]) -> Output {
        let program = self.bin.join(program);
        Command::new("runuser").args(["-u", SERVER_USER, "--"]).arg(program).args(args).current_dir(self.dir.path()).output().unwrap()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Already stopped by the test, or not: either way nothing to report.
        let _ = self.stop_server();
    }
}

/// The newest installed PostgreSQL's binaries.
fn binaries() -> PathBuf {
    let installed = std::fs::read_dir("/usr/lib/postgresql").map(|entries| {
        entries
            .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .max_by_key(|bin| version(bin))
    });
    installed.ok().flatten().expect("no PostgreSQL under /usr/lib/postgresql: install Debian's postgresql package (scripts/test.sh does)")
}

/// The major version a /usr/lib/postgresql/VERSION/bin directory is of.
fn version(bin: &Path) -> u32 {
    bin.parent().and_then(|dir| dir.file_name()?.to_str()?.parse().ok()).unwrap_or(0)
}

fn uid(user: &str) -> u32 {
    let output = Command::new("id").args(["-u", user]).output().unwrap();
    assert!(output.status.success(), "no user {user}");
    String::from_utf8(output.stdout).unwrap().trim().parse().unwrap()
}
