//! Two network namespaces joined by a veth pair, for the kernel fast path's
//! end-to-end tests: `pharos serve --xdp` runs in the server's namespace on
//! its end of the pair (and on the namespace's loopback, where no XDP runs,
//! so the same server answers there from user space), and the client's
//! namespace queries it. Names are unique per test; everything is removed
//! on drop, also when the test panics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether this process may create namespaces and load XDP programs. If
/// not, prints a loud SKIP, or fails when the environment variable CI is set.
pub fn may_run() -> bool {
    if super::is_root() {
        return true;
    }
    let message = "network namespaces and XDP need root";
    if std::env::var_os("CI").is_some() {
        panic!("{message}; CI is set, so this is a failure");
    }
    eprintln!("\n*** SKIP: {message}. ***\n");
    false
}

pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 1);
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 2);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x203, 0, 0, 0, 0, 0, 1);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x203, 0, 0, 0, 0, 0, 2);
/// The DNS port inside the server's namespace (nothing else runs there).
pub const PORT: u16 = 53;
/// The control API, on the server namespace's loopback.
pub const API: &str = "127.0.0.1:5380";

/// A veth pair between two fresh namespaces.
pub struct Link {
    pub server: String,
    pub client: String,
    /// The server's end of the pair (in `server`), and the client's.
    pub server_interface: String,
    pub client_interface: String,
}

impl Link {
    /// Creates the namespaces and the pair, addressed and up. XDP_TX on a
    /// veth only delivers to a peer that runs an XDP program itself, so the
    /// client's end gets one that passes everything.
    pub fn new() -> Link {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let tag = format!("{}{}", std::process::id() % 100_000, NEXT.fetch_add(1, Ordering::Relaxed));
        // Made first, so that a failure below still removes what was made.
        let link = Link {
            server: format!("pharos-s{tag}"),
            client: format!("pharos-c{tag}"),
            server_interface: format!("pxs{tag}"),
            client_interface: format!("pxc{tag}"),
        };
        ip(&["netns", "add", &link.server]);
        ip(&["netns", "add", &link.client]);
        ip(&[
            "link",
            "add",
            &link.server_interface,
            "netns",
            &link.server,
            "type",
            "veth",
            "peer",
            "name",
            &link.client_interface,
            "netns",
            &link.client,
        ]);
        for (namespace, interface, v4, v6) in
            [(&link.server, &link.server_interface, SERVER_V4, SERVER_V6), (&link.client, &link.client_interface, CLIENT_V4, CLIENT_V6)]
        {
            ip(&["-n", namespace, "addr", "add", &format!("{v4}/24"), "dev", interface]);
            ip(&["-n", namespace, "addr", "add", &format!("{v6}/64"), "dev", interface, "nodad"]);
            ip(&["-n", namespace, "link", "set", interface, "up"]);
            ip(&["-n", namespace, "link", "set", "lo", "up"]);
        }
        let program = tempfile::tempdir().unwrap();
        let pass = pass_program(program.path());
        ip(&["-n", &link.client, "link", "set", "dev", &link.client_interface, "xdp", "obj", pass.to_str().unwrap(), "sec", "xdp"]);
        link
    }

    /// `command` run inside `namespace`.
    pub fn command(namespace: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", namespace]).arg(program);
        command
    }

    /// Runs `work` on a thread inside `namespace`: the sockets it opens
    /// belong there (and keep working from any thread afterwards).
    pub fn inside<T: Send + 'static>(namespace: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
        let handle = std::fs::File::open(Path::new("/run/netns").join(namespace)).unwrap();
        std::thread::spawn(move || {
            // SAFETY: setns on a namespace file this thread holds open; it
            // moves only this thread, which ends with `work`.
            let entered = unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
            work()
        })
        .join()
        .unwrap()
    }

    /// Where the client reaches the server over the veth pair (kernel path).
    pub fn over_veth(v6: bool) -> SocketAddr {
        let address = if v6 { IpAddr::V6(SERVER_V6) } else { IpAddr::V4(SERVER_V4) };
        SocketAddr::new(address, PORT)
    }

    /// Where the server's own namespace reaches it over loopback (user space).
    pub fn over_loopback() -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), PORT)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Removing a namespace removes its end of the pair, and so the pair.
        for namespace in [&self.server, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", namespace]).status();
        }
    }
}

/// Sends `query` over UDP from this thread's namespace and returns the
/// reply with the query's ID, if one comes within a second.
pub fn exchange(server: SocketAddr, query: &[u8]) -> Option<Vec<u8>> {
    ask(&socket_to(server), query)
}

/// A UDP socket of this thread's namespace connected to `server`; it stays
/// there when used from another thread.
pub fn socket_to(server: SocketAddr) -> std::net::UdpSocket {
    let unspecified: IpAddr = if server.is_ipv6() { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
    let socket = std::net::UdpSocket::bind((unspecified, 0)).unwrap();
    socket.connect(server).unwrap();
    socket
}

/// Sends `query` on `socket` and returns the reply with its ID, if one
/// comes within a second (replies to earlier queries are skipped).
pub fn ask(socket: &std::net::UdpSocket, query: &[u8]) -> Option<Vec<u8>> {
    socket.send(query).ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut buffer = vec![0; 65535];
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now()).filter(|left| !left.is_zero())?;
        socket.set_read_timeout(Some(left)).unwrap();
        let length = socket.recv(&mut buffer).ok()?;
        if length >= 2 && buffer[..2] == query[..2] {
            return Some(buffer[..length].to_vec());
        }
    }
}

fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().unwrap();
    assert!(output.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
}

/// Compiles the client end's pass-everything XDP program into `directory`
/// (clang builds the server's program too).
fn pass_program(directory: &Path) -> PathBuf {
    let object = directory.join("pass.o");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/common/xdp_pass.bpf.c");
    let compiled = Command::new(std::env::var("CLANG").unwrap_or_else(|_| "clang".into()))
        .args(["-O2", "-target", "bpf", "-c"])
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .output()
        .expect("clang, which builds the XDP program, compiles the test's own");
    assert!(compiled.status.success(), "clang {}: {}", source.display(), String::from_utf8_lossy(&compiled.stderr));
    object
}

/// `pharos serve` inside the server's namespace, on its veth end with XDP
/// and on its loopback; killed when dropped (before the namespaces go).
pub struct Served {
    pub child: Child,
    pub log_file: PathBuf,
    pub zone_file: PathBuf,
    pub dir: tempfile::TempDir,
    pub token: String,
    /// Dropped last: the server goes first.
    pub link: Link,
}

impl Served {
    /// Serves `zone` as example.test with `config_extra` (TOML tables)
    /// and waits until the client gets an answer over the veth pair.
    pub fn start(zone: &str, config_extra: &str) -> Served {
        Served::start_with(zone, config_extra, true)
    }

    /// As [`Served::start`], with the fast path on the server's end of the
    /// pair (`--xdp`) or without (sockets only).
    pub fn start_with(zone: &str, config_extra: &str, fast_path: bool) -> Served {
        Served::start_as(zone, config_extra, fast_path, "")
    }

    /// As [`Served::start_with`], with `server_keys` added to `[server]`
    /// (such as the user to run as).
    pub fn start_as(zone: &str, config_extra: &str, fast_path: bool, server_keys: &str) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let zone_file = dir.path().join("example.test.zone");
        std::fs::write(&zone_file, zone).unwrap();
        Served::start_in_with(dir, &[("example.test", zone_file)], config_extra, fast_path, server_keys)
    }

    /// Serves the zone files `zones` (origin, file; `$INCLUDE`s relative to
    /// the first one's directory), with its state kept in `dir`.
    pub fn start_in(dir: tempfile::TempDir, zones: &[(&str, PathBuf)], config_extra: &str) -> Served {
        Served::start_in_with(dir, zones, config_extra, true, "")
    }

    fn start_in_with(dir: tempfile::TempDir, zones: &[(&str, PathBuf)], config_extra: &str, fast_path: bool, server_keys: &str) -> Served {
        let link = Link::new();
        let token = "netns-test-token".to_string();
        let listen = [Link::over_veth(false), Link::over_veth(true), Link::over_loopback()].map(|address| format!("\"{address}\""));
        let zone_tables: String =
            zones.iter().map(|(origin, file)| format!("[[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\n", file.display())).collect();
        let config = format!(
            "[server]\nlisten = [{}]\nthreads = 1\nrandom_seed = 1\n{server_keys}\n[control]\nlisten = \"{API}\"\ntoken = \"{token}\"\n{config_extra}\n{zone_tables}",
            listen.join(", ")
        );
        let config_file = dir.path().join("pharos.toml");
        std::fs::write(&config_file, config).unwrap();
        let log_file = dir.path().join("pharos.log");
        // `ip netns exec` execs pharos: the child is the server itself.
        let child = Link::command(&link.server, env!("CARGO_BIN_EXE_pharos"))
            .args(["serve", "--config"])
            .arg(&config_file)
            .args(if fast_path { vec!["--xdp", &link.server_interface] } else { vec![] })
            .current_dir(zones[0].1.parent().unwrap())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_file).unwrap())
            .spawn()
            .unwrap();
        let zone_file = zones[0].1.clone();
        let served = Served { child, log_file, zone_file, dir, token, link };
        let client = served.link.client.clone();
        let query = super::query_bytes(1, &format!("{}.", zones[0].0), domain::base::iana::Rtype::SOA);
        // The kernel answers before user space listens: wait for both.
        let server = served.link.server.clone();
        super::wait_until("the server answers over the veth pair and its loopback", || {
            let (query, again) = (query.clone(), query.clone());
            Link::inside(&client, move || exchange(Link::over_veth(false), &query).is_some())
                && Link::inside(&server, move || exchange(Link::over_loopback(), &again).is_some())
        });
        served
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// A control API call, made from inside the server's namespace.
    pub fn api(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> (u16, serde_json::Value) {
        let (method, url, token) = (method.to_string(), format!("http://{API}{path}"), self.token.clone());
        let log = self.log();
        Link::inside(&self.link.server, move || {
            let reached = std::panic::catch_unwind(|| super::request(&method, &url, Some(&token), body));
            reached.unwrap_or_else(|_| panic!("{method} {url} failed; the server's log:\n{log}"))
        })
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
