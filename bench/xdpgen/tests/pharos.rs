//! xdpgen against `pharos serve` over a veth pair (root, and a kernel that
//! allows live-frames test runs; it skips loudly without either, with the
//! reason, and fails under CI=true when not root): a bounded count of queries sent as
//! XDP frames out of the client's end, to the server with its fast path on
//! the server's end (answers in XDP) and without it (the socket path), and
//! every query sent counted as answered with the rcode its name has, none
//! truncated, none an answer to another question. This checks the load
//! generator's frames and its counting; the answers themselves are the
//! product's tests' business. Correctness, not timing.
//!
//! The server is the product's release build, target/release/pharos at the
//! repository's root (`cargo build --release -p pharos` there), or the
//! program the environment variable PHAROS names.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use dnsload::query::Query;
use netdelay::netns::{self, CLIENT_ADDRESS, CLIENT_DEVICE, Link, SERVER_ADDRESS, SERVER_DEVICE};
use xdpgen::kernel::LiveFramesRefused;

const ZONE: &str = "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\nwww AAAA 2001:db8::2\n";
/// Names the zone has (NOERROR), and names it has not (NXDOMAIN): one mix each.
const FOUND: &str = "www.example.test A\nwww.example.test AAAA\nns.example.test A\nexample.test SOA\n";
const NOT_FOUND: &str = "nothing.example.test A\nnx1.example.test AAAA\nnx2.www.example.test A\n";
const COUNT: u64 = 3000;
const NOERROR: usize = 0;
const NXDOMAIN: usize = 3;
/// The control API, on the server namespace's loopback.
const API: &str = "127.0.0.1:5380";
const TOKEN: &str = "xdpgen-test-token";
const SOA: u16 = 6;

#[test]
fn every_query_xdpgen_sends_to_the_kernel_path_is_answered_rightly() {
    if may_run() {
        let served = Served::start(true);
        if check_answers(&served) {
            let shown = served.api_get("/v1/fastpath");
            let answered = shown["interfaces"][0]["traffic"]["answered_static"].as_u64().unwrap_or(0);
            assert!(answered >= COUNT / 2, "the kernel answered {answered} queries: the frames did not reach XDP\n{shown}");
        }
    }
}

#[test]
fn every_query_xdpgen_sends_to_the_socket_path_is_answered_rightly() {
    if may_run() {
        let served = Served::start(false);
        check_answers(&served);
    }
}

/// Whether this process may create namespaces and load XDP programs (as
/// root). Without root it says so loudly and the test passes, except under
/// CI, where the test fails.
fn may_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(std::env::var_os("CI").is_none(), "network namespaces and XDP need root; CI is set, so this is a failure");
        eprintln!("\n*** SKIP: network namespaces and XDP need root. ***\n");
    }
    root
}

/// Sends COUNT queries of each mix and checks what xdpgen counted; false
/// when this kernel refuses xdpgen's live-frames test runs (see
/// [`skipped_for`]).
fn check_answers(served: &Served) -> bool {
    let link = &served.link;
    // xdpgen's program takes the client's end; the server's end needs a
    // NAPI instance to take XDP frames (ndo_xdp_xmit): GRO gives it one
    // where no XDP program does.
    run(Link::exec(&link.server).args(["ethtool", "-K", SERVER_DEVICE, "gro", "on"]));
    let server_mac = mac(&link.server, SERVER_DEVICE);
    let dir = tempfile::tempdir().unwrap();
    for (mix, rcode) in [(FOUND, NOERROR), (NOT_FOUND, NXDOMAIN)] {
        let file = dir.path().join("mix.txt");
        std::fs::write(&file, mix).unwrap();
        let report = match send(link, &server_mac, &file) {
            Ok(report) => report,
            Err(error) => return !skipped_for(error),
        };
        let (sent, responses) = (report.sending.sent, report.responses);
        let log = served.log();
        assert_eq!(sent + report.sending.skipped, COUNT, "{}", report.json());
        assert!(sent > 0, "{}", report.json());
        assert_eq!(responses.rcodes[rcode], sent, "every query answered with rcode {rcode}: {}\n{log}", report.json());
        assert_eq!(responses.answered(), sent, "no other rcode: {}", report.json());
        assert_eq!((responses.truncated, responses.unexpected, report.refused), (0, 0, 0), "{}", report.json());
    }
    true
}

/// True when xdpgen failed because the kernel refuses its live-frames test
/// runs: it says so loudly, with the kernel's reason, under CI as well
/// (CI's machines run the same guest kernel, and no install step brings
/// what it forbids). Any other failure fails the test.
fn skipped_for(error: anyhow::Error) -> bool {
    let Some(refused) = error.downcast_ref::<LiveFramesRefused>() else {
        panic!("xdpgen failed: {error:#}");
    };
    eprintln!("\n*** SKIP: {refused} ***\n");
    true
}

/// Runs xdpgen in-process on a thread inside the client's namespace.
fn send(link: &Link, server_mac: &str, mix: &Path) -> anyhow::Result<xdpgen::Report> {
    let args = xdpgen::Args::parse_from([
        "xdpgen",
        "--iface",
        CLIENT_DEVICE,
        "--server",
        &SERVER_ADDRESS.to_string(),
        "--server-mac",
        server_mac,
        "--source",
        &CLIENT_ADDRESS.to_string(),
        "--mix",
        mix.to_str().unwrap(),
        // Slow enough for a debug build on a busy machine; bounded by count.
        "--rate",
        "5000",
        "--count",
        &COUNT.to_string(),
        "--duration",
        "30",
        "--timeout-ms",
        "3000",
    ]);
    inside(&link.client, move || xdpgen::run(&args))
}

/// `pharos serve` inside the server's namespace, on its veth end and its
/// loopback; killed when dropped, before the namespaces go.
struct Served {
    child: Child,
    log_file: PathBuf,
    _dir: tempfile::TempDir,
    link: Link,
}

impl Served {
    /// Serves ZONE as example.test, with the fast path on the server's end
    /// of the pair (`--xdp`) or without, and waits until it answers.
    fn start(fast_path: bool) -> Served {
        let link = Link::veth().expect("two network namespaces joined by a veth pair");
        let dir = tempfile::tempdir().unwrap();
        let zone_file = dir.path().join("example.test.zone");
        std::fs::write(&zone_file, ZONE).unwrap();
        let config = format!(
            "[server]\nlisten = [\"{SERVER_ADDRESS}:53\", \"127.0.0.1:53\"]\nthreads = 1\nrandom_seed = 1\n\
             [control]\nlisten = \"{API}\"\ntoken = \"{TOKEN}\"\n\
             [[zone]]\norigin = \"example.test\"\nfile = \"{}\"\n",
            zone_file.display()
        );
        let config_file = dir.path().join("pharos.toml");
        std::fs::write(&config_file, config).unwrap();
        let log_file = dir.path().join("pharos.log");
        let child = Link::exec(&link.server)
            .arg(pharos())
            .args(["serve", "--config"])
            .arg(&config_file)
            .args(if fast_path { vec!["--xdp", SERVER_DEVICE] } else { vec![] })
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_file).unwrap())
            .spawn()
            .unwrap();
        let mut served = Served { child, log_file, _dir: dir, link };
        served.wait_until_answering();
        served
    }

    /// Polls with a SOA query over the server namespace's loopback, for at
    /// most a minute: pharos listens there once its fast path is attached.
    /// (Not over the pair: the kernel's XDP_TX answers reach the client's
    /// end only while an XDP program runs there, and xdpgen's comes later.)
    fn wait_until_answering(&mut self) {
        let mut query = Query::new("example.test.", SOA).unwrap().wire;
        query[..2].copy_from_slice(&0x5053_u16.to_be_bytes());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("pharos exited ({status}) before answering:\n{}", self.log());
            }
            let query = query.clone();
            if inside(&self.link.server, move || answered((Ipv4Addr::LOCALHOST, 53).into(), &query)) {
                return;
            }
            assert!(Instant::now() < deadline, "pharos did not answer within a minute:\n{}", self.log());
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// GET `path` from the control API, inside the server's namespace.
    fn api_get(&self, path: &str) -> serde_json::Value {
        let request = format!("GET {path} HTTP/1.0\r\nHost: {API}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
        let reply = inside(&self.link.server, move || {
            let mut stream = TcpStream::connect(API).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).unwrap();
            reply
        });
        let (head, body) = reply.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not an HTTP reply: {reply:?}"));
        assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
        serde_json::from_str(body).unwrap_or_else(|error| panic!("GET {path}: {error}: {body}"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server under test: PHAROS, or the root's release build.
fn pharos() -> PathBuf {
    let path = std::env::var_os("PHAROS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/pharos"));
    assert!(path.is_file(), "{} is missing: run `cargo build --release -p pharos` at the repository's root, or set PHAROS", path.display());
    path
}

/// Whether `server` answers `query` (matching ID) within 200 ms, from this thread's namespace.
fn answered(server: SocketAddr, query: &[u8]) -> bool {
    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buffer = [0; 4096];
    socket.send_to(query, server).is_ok() && matches!(socket.recv(&mut buffer), Ok(length) if length >= 2 && buffer[..2] == query[..2])
}

/// Runs `work` on a thread inside `namespace`: the sockets and programs it
/// opens belong there.
fn inside<T: Send + 'static>(namespace: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let namespace = namespace.to_owned();
    std::thread::spawn(move || {
        netns::enter(&namespace).unwrap();
        work()
    })
    .join()
    .unwrap()
}

/// The MAC address of `interface` in `namespace`.
fn mac(namespace: &str, interface: &str) -> String {
    let output = Command::new("ip").args(["-n", namespace, "-br", "link", "show", "dev", interface]).output().unwrap();
    let shown = String::from_utf8(output.stdout).unwrap();
    shown.split_whitespace().nth(2).unwrap_or_else(|| panic!("no MAC address in {shown:?}")).to_string()
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
}
