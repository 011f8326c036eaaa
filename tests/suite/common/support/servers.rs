//! Starting, probing and stopping the servers under comparison: Knot DNS
//! (`knotd`), NSD (`nsd`) and Pharos. Each runs from its own temporary
//! directory on a free loopback port, on a private copy of tests/zones/, and
//! is stopped by a Drop guard.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::norm::normalize;
use super::wire::{QuerySpec, Reply, Transport, exchange};
use crate::common::free_port;

/// The NSID every server is configured with (RFC 5001).
pub const NSID: &str = "pharos-test";
/// The EDNS UDP payload size every server advertises.
pub const PAYLOAD: u16 = 1232;
/// How long a server may take to answer for all its zones.
const READY_DEADLINE: Duration = Duration::from_secs(20);

/// One zone served by every server.
#[derive(Clone, Copy, Debug)]
pub struct Zone {
    /// Origin, with the trailing dot.
    pub origin: &'static str,
    /// File name inside tests/zones/.
    pub file: &'static str,
}

/// What a server is configured with besides its zones: the same on every
/// server of a comparison, each in its own configuration language.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// A TSIG key (HMAC-SHA256) the server knows, for any query.
    pub tsig: Option<TsigKeySpec>,
    /// Response rate limiting: responses per second, and every `slip`th
    /// limited response sent empty with TC=1.
    pub rrl: Option<(u32, u32)>,
    /// DNS cookies (RFC 7873) answered and checked.
    pub cookies: bool,
    /// Every zone signed online by the server, with keys of its own (Knot
    /// and Pharos; NSD cannot).
    pub signed: bool,
}

/// A TSIG key as configurations give it.
#[derive(Clone, Debug)]
pub struct TsigKeySpec {
    /// Key name, without the trailing dot.
    pub name: &'static str,
    /// The secret, base64.
    pub secret: &'static str,
}

/// A temporary directory for one server, removed on drop unless
/// `PHAROS_CONFORMANCE_KEEP` is set. Its name is short: knotd puts a unix
/// socket in it (108-octet path limit).
fn server_dir(tag: &str) -> std::io::Result<TempDir> {
    let keep = std::env::var_os("PHAROS_CONFORMANCE_KEEP").is_some();
    let dir = tempfile::Builder::new().prefix(&format!("phc-{tag}-")).disable_cleanup(keep).tempdir()?;
    if keep {
        eprintln!("keeping {}", dir.path().display());
    }
    Ok(dir)
}

/// Finds an executable in PATH or in the sbin directories (where Debian puts
/// knotd and nsd, often outside a normal user's PATH).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    for extra in ["/usr/sbin", "/usr/local/sbin", "/sbin"] {
        dirs.push(PathBuf::from(extra));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// Copies tests/zones/ into `dir`/zones and returns that path. Every server
/// reads the same copy and runs with it as working directory, so a relative
/// `$INCLUDE` resolves the same whether a server takes it relative to the
/// including file or to its working directory.
pub fn copy_zones(source: &Path, dir: &Path) -> PathBuf {
    let target = dir.join("zones");
    fs::create_dir_all(&target).unwrap();
    for entry in fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            fs::copy(entry.path(), target.join(entry.file_name())).unwrap();
        }
    }
    target
}

/// A running server. Dropping it stops it.
pub struct Server {
    pub name: &'static str,
    pub addr: SocketAddr,
    child: Option<Child>,
    log: PathBuf,
    // Declared last: removed after the process is gone.
    _dir: TempDir,
}

impl Server {
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(30);
        lines[start..].join("\n")
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        // SIGTERM first: nsd stops its own worker processes on it, and
        // knotd shuts down cleanly. SIGKILL if that takes too long.
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Polls every zone's SOA over UDP and TCP until each is answered with
    /// AA set, the process dies, or the deadline passes.
    fn wait_ready(&mut self, zones: &[Zone]) -> Result<(), String> {
        let deadline = Instant::now() + READY_DEADLINE;
        let mut pending: Vec<(Zone, Transport)> = zones.iter().flat_map(|z| [(*z, Transport::Udp), (*z, Transport::Tcp)]).collect();
        let mut last = String::new();
        while !pending.is_empty() {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("{} exited ({status}) before it was ready; log:\n{}", self.name, self.log_tail()));
            }
            if Instant::now() > deadline {
                return Err(format!("{} not ready after {:?} (last probe: {last}); log:\n{}", self.name, READY_DEADLINE, self.log_tail()));
            }
            let (zone, transport) = pending[0];
            let mut q = QuerySpec::new(zone.origin, 6);
            q.id = 0x5eed;
            match exchange(self.addr, transport, &q.encode(), Duration::from_millis(200)) {
                Reply::Message(m) => {
                    let n = normalize(&m);
                    // Rate limiting may slip a UDP probe: empty, with TC.
                    let slipped = transport == Transport::Udp && n.tc;
                    if n.rcode == 0 && n.aa && (slipped || n.answer.keys().any(|k| k.rtype == 6)) {
                        pending.remove(0);
                        continue;
                    }
                    last = format!("{} {transport}: {}", zone.origin, n.summary());
                }
                Reply::Silence => last = format!("{} {transport}: no reply", zone.origin),
                Reply::Error(e) => last = format!("{} {transport}: {e}", zone.origin),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(name: &'static str, mut cmd: Command, dir: TempDir, port: u16, zones: &[Zone]) -> Result<Server, String> {
    let log = dir.path().join(format!("{name}.log"));
    let out = fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let child = cmd.spawn().map_err(|e| format!("cannot start {name}: {e}"))?;
    let mut server = Server { name, addr: SocketAddr::from(([127, 0, 0, 1], port)), child: Some(child), log, _dir: dir };
    server.wait_ready(zones)?;
    Ok(server)
}

fn current_user() -> Option<String> {
    let out = Command::new("id").arg("-un").output().ok()?;
    let name = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// Starts knotd on a copy of the zones.
pub fn start_knot(knotd: &Path, zone_src: &Path, zones: &[Zone], extras: &Extras) -> Result<Server, String> {
    let dir = server_dir("knot").map_err(|e| e.to_string())?;
    let zdir = copy_zones(zone_src, dir.path());
    let port = free_port();
    let d = dir.path().display();
    let mut conf = String::new();
    conf.push_str("server:\n");
    conf.push_str(&format!("  rundir: \"{d}\"\n  pidfile: \"{d}/knot.pid\"\n"));
    conf.push_str(&format!("  listen: 127.0.0.1@{port}\n"));
    conf.push_str(&format!("  nsid: \"{NSID}\"\n"));
    // No CH TXT identity/version answers: nothing to compare them with.
    conf.push_str("  identity: \"\"\n  version: \"\"\n");
    conf.push_str(&format!("  udp-max-payload: {PAYLOAD}\n"));
    conf.push_str("  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n");
    if let Some(user) = current_user() {
        conf.push_str(&format!("  user: \"{user}\"\n"));
    }
    conf.push_str(&format!("database:\n  storage: \"{d}/db\"\n"));
    if extras.signed {
        // Knot 3.2 makes neither its database's directory nor its keys'.
        for made in ["db", "keys"] {
            fs::create_dir_all(dir.path().join(made)).map_err(|e| e.to_string())?;
        }
        conf.push_str(&format!("  kasp-db: \"{d}/keys\"\n"));
    }
    conf.push_str("log:\n  - target: stderr\n    any: info\n");
    conf.push_str(&knot_extras(extras));
    conf.push_str("template:\n  - id: default\n");
    conf.push_str(&format!("    storage: \"{}\"\n", zdir.display()));
    let modules: Vec<&str> = [(extras.rrl.is_some(), "mod-rrl/default"), (extras.cookies, "mod-cookies/default")]
        .into_iter()
        .filter_map(|(on, module)| on.then_some(module))
        .collect();
    if !modules.is_empty() {
        conf.push_str(&format!("    global-module: [{}]\n", modules.join(", ")));
    }
    // Serve the zone files exactly as written: never write them back, no
    // journal, and the semantic checks knot runs anyway on load.
    conf.push_str("    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\n");
    conf.push_str("zone:\n");
    for z in zones {
        conf.push_str(&format!("  - domain: \"{}\"\n    file: \"{}\"\n", z.origin, z.file));
        if extras.signed {
            conf.push_str("    dnssec-signing: on\n");
        }
    }
    let conf_path = dir.path().join("knot.conf");
    fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(knotd);
    cmd.arg("-c").arg(&conf_path).current_dir(&zdir);
    spawn("knot", cmd, dir, port, zones)
}

/// The `key:`, `mod-rrl:` and `mod-cookies:` sections of a knot.conf.
fn knot_extras(extras: &Extras) -> String {
    let mut conf = String::new();
    if let Some(key) = &extras.tsig {
        conf.push_str(&format!("key:\n  - id: {}\n    algorithm: hmac-sha256\n    secret: {}\n", key.name, key.secret));
    }
    if let Some((rate, slip)) = extras.rrl {
        conf.push_str(&format!("mod-rrl:\n  - id: default\n    rate-limit: {rate}\n    slip: {slip}\n"));
    }
    if extras.cookies {
        conf.push_str("mod-cookies:\n  - id: default\n");
    }
    conf
}

/// Starts nsd (in the foreground, `-d`) on a copy of the zones.
pub fn start_nsd(nsd: &Path, zone_src: &Path, zones: &[Zone], extras: &Extras) -> Result<Server, String> {
    let dir = server_dir("nsd").map_err(|e| e.to_string())?;
    let zdir = copy_zones(zone_src, dir.path());
    let port = free_port();
    let d = dir.path().display();
    let mut conf = String::new();
    conf.push_str("server:\n");
    conf.push_str(&format!("  ip-address: 127.0.0.1@{port}\n  port: {port}\n"));
    conf.push_str("  do-ip6: no\n");
    // Empty username: do not switch user; no chroot.
    conf.push_str("  username: \"\"\n  chroot: \"\"\n");
    conf.push_str(&format!("  zonesdir: \"{}\"\n", zdir.display()));
    conf.push_str("  database: \"\"\n");
    conf.push_str(&format!(
        "  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n"
    ));
    conf.push_str("  server-count: 1\n  verbosity: 1\n");
    conf.push_str(&format!("  nsid: \"ascii_{NSID}\"\n"));
    conf.push_str(&format!("  ipv4-edns-size: {PAYLOAD}\n  ipv6-edns-size: {PAYLOAD}\n"));
    // No CH TXT identity/version answers, as for knot.
    conf.push_str("  hide-version: yes\n  hide-identity: yes\n");
    if let Some((rate, slip)) = extras.rrl {
        conf.push_str(&format!("  rrl-ratelimit: {rate}\n  rrl-slip: {slip}\n  rrl-whitelist-ratelimit: {rate}\n"));
    } else {
        // NSD limits by default (200 a second): off, as on the others.
        conf.push_str("  rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n");
    }
    if extras.cookies {
        conf.push_str("  answer-cookie: yes\n");
    }
    conf.push_str("remote-control:\n  control-enable: no\n");
    if let Some(key) = &extras.tsig {
        conf.push_str(&format!("key:\n  name: \"{}\"\n  algorithm: hmac-sha256\n  secret: \"{}\"\n", key.name, key.secret));
    }
    for z in zones {
        conf.push_str(&format!("zone:\n  name: \"{}\"\n  zonefile: \"{}\"\n", z.origin, z.file));
    }
    let conf_path = dir.path().join("nsd.conf");
    fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(nsd);
    cmd.arg("-d").arg("-c").arg(&conf_path).current_dir(&zdir);
    spawn("nsd", cmd, dir, port, zones)
}

/// Starts `pharos serve` on a copy of the zones.
pub fn start_pharos(bin: &Path, zone_src: &Path, zones: &[Zone], extras: &Extras) -> Result<Server, String> {
    let dir = server_dir("pharos").map_err(|e| e.to_string())?;
    let zdir = copy_zones(zone_src, dir.path());
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg("serve").arg("--listen").arg(format!("127.0.0.1:{port}"));
    let mut config = pharos_extras(extras);
    if extras.signed {
        config.push_str(&signed_zone_tables(zones, &zdir, !extras.cookies));
    } else {
        for z in zones {
            let origin = z.origin.trim_end_matches('.');
            cmd.arg("--zone").arg(format!("{origin}={}", zdir.join(z.file).display()));
        }
    }
    if !config.is_empty() {
        let path = dir.path().join("pharos.toml");
        fs::write(&path, config).map_err(|e| e.to_string())?;
        if extras.signed {
            generate_keys(bin, &path, zones, &zdir)?;
        }
        cmd.arg("--config").arg(path);
    }
    cmd.arg("--nsid").arg(NSID).current_dir(&zdir);
    spawn("pharos", cmd, dir, port, zones)
}

/// The `[[zone]]` tables of zones signed online, and the `[store]` their
/// keys are kept in (unless one is there already).
fn signed_zone_tables(zones: &[Zone], zdir: &Path, with_store: bool) -> String {
    let mut conf = if with_store { "[store]\npath = \"state.sqlite\"\n".to_string() } else { String::new() };
    for z in zones {
        conf.push_str(&format!(
            "[[zone]]\norigin = \"{}\"\nfile = \"{}\"\ndnssec = true\n",
            z.origin.trim_end_matches('.'),
            zdir.join(z.file).display()
        ));
    }
    conf
}

/// `pharos key generate` for every zone of the config at `config`.
fn generate_keys(bin: &Path, config: &Path, zones: &[Zone], cwd: &Path) -> Result<(), String> {
    for z in zones {
        let out = Command::new(bin)
            .args(["key", "generate", z.origin.trim_end_matches('.'), "--config"])
            .arg(config)
            .current_dir(cwd)
            .output()
            .map_err(|e| format!("pharos key generate: {e}"))?;
        if !out.status.success() {
            return Err(format!("pharos key generate {}: {}", z.origin, String::from_utf8_lossy(&out.stderr)));
        }
    }
    Ok(())
}

/// The `[[tsig_key]]`, `[rrl]`, `[cookies]` (and its `[store]`) tables of
/// a pharos.toml.
fn pharos_extras(extras: &Extras) -> String {
    let mut conf = String::new();
    if let Some(key) = &extras.tsig {
        conf.push_str(&format!("[[tsig_key]]\nname = \"{}\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{}\"\n", key.name, key.secret));
    }
    if let Some((rate, slip)) = extras.rrl {
        conf.push_str(&format!("[rrl]\nrate = {rate}\nslip = {slip}\n"));
    }
    if extras.cookies {
        // The cookie secret lives in the store.
        conf.push_str("[store]\npath = \"state.sqlite\"\n[cookies]\n");
    }
    conf
}

/// Loads each (origin, file) as a zone into one knotd and reports, per
/// origin, whether knotd loaded it (true) or refused it (false), read from
/// its log. Used to prove that the zone files under tests/zones/invalid/ are
/// refused by the reference, not only by Pharos.
pub fn knot_accepts(knotd: &Path, zones: &[(String, PathBuf)]) -> Result<Vec<bool>, String> {
    let dir = server_dir("knotchk").map_err(|e| e.to_string())?;
    let d = dir.path().display();
    let port = free_port();
    let mut conf = format!("server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  background-workers: 1\n");
    if let Some(user) = current_user() {
        conf.push_str(&format!("  user: \"{user}\"\n"));
    }
    conf.push_str(&format!("database:\n  storage: \"{d}/db\"\n"));
    conf.push_str("log:\n  - target: stderr\n    any: info\n");
    conf.push_str("template:\n  - id: default\n    zonefile-sync: -1\n    journal-content: none\n");
    conf.push_str("zone:\n");
    for (origin, file) in zones {
        conf.push_str(&format!("  - domain: \"{origin}\"\n    file: \"{}\"\n", file.display()));
    }
    let conf_path = dir.path().join("knot.conf");
    fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
    let log = dir.path().join("knot.log");
    let out = fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let child = Command::new(knotd)
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start knotd: {e}"))?;
    let mut server = Server { name: "knot", addr: SocketAddr::from(([127, 0, 0, 1], port)), child: Some(child), log, _dir: dir };
    let deadline = Instant::now() + READY_DEADLINE;
    loop {
        let text = fs::read_to_string(&server.log).unwrap_or_default();
        let verdicts: Vec<Option<bool>> = zones
            .iter()
            .map(|(origin, _)| {
                let tag = format!("[{}] ", origin);
                let lines: Vec<&str> = text.lines().filter(|l| l.contains(&tag)).collect();
                if lines.iter().any(|l| l.contains("loaded, serial")) {
                    Some(true)
                } else if lines.iter().any(|l| l.contains("failed")) {
                    Some(false)
                } else {
                    None
                }
            })
            .collect();
        if verdicts.iter().all(Option::is_some) {
            return Ok(verdicts.into_iter().map(Option::unwrap).collect());
        }
        if let Some(child) = server.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(format!("knotd exited ({status}); log:\n{}", server.log_tail()));
        }
        if Instant::now() > deadline {
            return Err(format!("knotd did not report on every zone; log:\n{}", server.log_tail()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
