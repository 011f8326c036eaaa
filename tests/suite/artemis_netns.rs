//! The Artemis dispatcher on sockets, in network namespaces this test
//! creates and removes: a client, two data centers each with a dispatcher
//! and one replica host, each replica host with a VXLAN interface holding
//! the service address. The client's route to SA leads to data center 1
//! (anycast, emulated by routing).
//!
//! ```text
//!   client 10.77.1.2 ── 10.77.1.1 dispatcher 1 (SA on lo) ── 10.77.11.1 ─ VXLAN ─ 10.77.11.2 replica 1 (SA on vx0)
//!      │                            10.77.3.1 ── tunnel ── 10.77.3.2 dispatcher 2 ── 10.77.12.1 ─ VXLAN ─ 10.77.12.2 replica 2
//!      └──────────── 10.77.2i.1 ── direct link ──────────────────────────────────────────── 10.77.2i.2 = replica i's own address (PA)
//! ```
//!
//! The handshake reaches the replica the routing core chose (weights 1:0,
//! then 0:1): replica 1 by dispatcher 1's VXLAN, replica 2 through
//! dispatcher 2, which delivers the tunnelled datagrams by its own; the
//! replica answers the client directly, from SA; after the move to PA,
//! nothing more reaches the dispatcher. Dispatcher 2 refuses tunnel
//! datagrams with a wrong tag, an old time, or from a stranger. Debian's Chromium, headless, gets
//! an HTTP/3 page from the chosen replica through the dispatcher, its
//! ClientHello split over two Initials. `pharos connect --race-dns` takes
//! the lookup's answer while the service address is silent, and the
//! service address when the lookup fails. Root only (and Chromium for its
//! test): skips loudly without, fails under CI=true.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant, SystemTime};

use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap};
use pharos_artemis_quic::client::{ArtemisClient, Route};
use pharos_artemis_quic::interdc::{TunnelKey, Tunnelled};
use pharos_artemis_quic::replica::ALPN;
use pharos_artemis_quic::tls::client_config;

const NAME: &str = "svc.example.test";
const SERVICE_ADDRESS: &str = "10.99.0.5";
const PORT: u16 = 4433;
const VNI: u32 = 42;
const TUNNEL_PORT: u16 = 4790;
const ROLES: [&str; 5] = ["c", "d", "d2", "r1", "r2"];
const CHROMIUM: &str = "/usr/bin/chromium";
/// Where `pharos serve` answers in the DNS race test: dispatcher 1's namespace.
const DNS_SERVER: &str = "10.77.1.1:5353";
/// The dispatchers' shared tunnel key (hex).
const TUNNEL_KEY: &str = "5f1e0c3a9b7d2e4f6a8c0e1f3b5d7f9a2c4e6a8b0d1f3a5c7e9b2d4f6a8c0e1f";

fn may_run() -> bool {
    if crate::common::is_root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "the Artemis namespace test needs root under CI");
    eprintln!("\n*** SKIP: network namespaces need root. ***\n");
    false
}

fn run(namespace: Option<&str>, command: &str) {
    let mut full = Command::new("ip");
    if let Some(namespace) = namespace {
        full.args(["netns", "exec", namespace]);
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    let status = if namespace.is_some() { full.args(&words).status() } else { full.args(&words[1..]).status() };
    assert!(status.unwrap().success(), "{namespace:?}: {command}");
}

/// The namespaces and their links; removed when dropped.
struct Network {
    prefix: String,
}

impl Network {
    fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.prefix)
    }

    /// `tag` keeps the namespaces of tests running side by side apart.
    fn build(tag: &str) -> Network {
        let network = Network { prefix: format!("art{}{tag}", std::process::id()) };
        let (client, dispatcher) = (network.ns("c"), network.ns("d"));
        for role in ROLES {
            let ns = network.ns(role);
            run(None, &format!("ip netns add {ns}"));
            run(Some(&ns), "ip link set lo up");
            // Replies come from SA over a link SA is not routed through.
            run(Some(&ns), "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0");
        }
        network.veth(&client, "cd", "10.77.1.2/24", &dispatcher, "dc", "10.77.1.1/24");
        network.veth(&dispatcher, "dx", "10.77.3.1/24", &network.ns("d2"), "xd", "10.77.3.2/24");
        run(Some(&dispatcher), &format!("ip addr add {SERVICE_ADDRESS}/32 dev lo"));
        run(Some(&client), &format!("ip route add {SERVICE_ADDRESS}/32 via 10.77.1.1"));
        for i in [1, 2] {
            let replica = network.ns(&format!("r{i}"));
            let its_dispatcher = network.ns(["d", "d2"][i - 1]);
            network.veth(&its_dispatcher, &format!("d{i}"), &format!("10.77.1{i}.1/24"), &replica, "rd", &format!("10.77.1{i}.2/24"));
            network.veth(&client, &format!("c{i}"), &format!("10.77.2{i}.1/24"), &replica, "rc", &format!("10.77.2{i}.2/24"));
            run(Some(&replica), &format!("ip link add vx0 type vxlan id {VNI} dstport 4789 local 10.77.1{i}.2 dev rd"));
            run(Some(&replica), &format!("ip link set vx0 address 02:00:00:00:00:0{i} up"));
            run(Some(&replica), &format!("ip addr add {SERVICE_ADDRESS}/32 dev vx0"));
            run(Some(&replica), &format!("ip route add 10.77.1.0/24 via 10.77.2{i}.1"));
        }
        network
    }

    fn veth(&self, a: &str, a_name: &str, a_address: &str, b: &str, b_name: &str, b_address: &str) {
        run(None, &format!("ip link add {a_name} netns {a} type veth peer name {b_name} netns {b}"));
        for (ns, name, address) in [(a, a_name, a_address), (b, b_name, b_address)] {
            run(Some(ns), &format!("ip addr add {address} dev {name}"));
            run(Some(ns), &format!("ip link set {name} up"));
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for role in ROLES {
            Command::new("ip").args(["netns", "del", &self.ns(role)]).status().ok();
        }
    }
}

/// A `pharos` process in a namespace, killed when dropped; its stdout lines after the first.
struct Process {
    child: Child,
    first_line: String,
    lines: Receiver<String>,
}

impl Process {
    fn start(namespace: &str, args: &[&str]) -> Process {
        let mut child = Command::new("ip")
            .args(["netns", "exec", namespace, env!("CARGO_BIN_EXE_pharos")])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first_line = String::new();
        stdout.read_line(&mut first_line).unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| send.send(line)));
        Process { child, first_line, lines }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// The configuration of data center `datacenter`'s dispatcher (1 or 2):
/// replica i is in data center i, the other dispatcher is its peer.
fn dispatcher_config(dir: &Path, datacenter: usize, weights: [u32; 2]) -> PathBuf {
    let replicas: String = [1, 2]
        .iter()
        .zip(weights)
        .map(|(i, weight)| {
            format!(
                "[[service.replica]]\nid = {i}\ndatacenter = \"dc{i}\"\naddress = \"10.77.2{i}.2\"\nvtep = \"10.77.1{i}.2\"\nmac = \"02:00:00:00:00:0{i}\"\nweight = {weight}\n"
            )
        })
        .collect();
    let peer = 3 - datacenter;
    let text = format!(
        "port = {PORT}\nprefix = \"10.99.0.0/24\"\nconflicts = \"{NAME} {SERVICE_ADDRESS}\"\nvni = {VNI}\n\
         datacenter = \"dc{datacenter}\"\ntunnel_port = {TUNNEL_PORT}\ntunnel_key = \"{TUNNEL_KEY}\"\n[[peer]]\ndatacenter = \"dc{peer}\"\naddress = \"10.77.3.{peer}\"\n\
         [[service]]\nname = \"{NAME}\"\n{replicas}"
    );
    let path = dir.join(format!("dispatcher{datacenter}-{}{}.toml", weights[0], weights[1]));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `work` on a thread inside `namespace`.
fn inside<T: Send + 'static>(namespace: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let file = std::fs::File::open(format!("/var/run/netns/{namespace}")).unwrap();
    std::thread::spawn(move || {
        assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        work()
    })
    .join()
    .unwrap()
}

/// Reads `process`'s log until a line ends with `wanted`, for at most 10 s.
fn wait_for_line(process: &Process, wanted: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = process.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the log line comes within 10 s");
        if line.ends_with(wanted) {
            return line;
        }
    }
}

/// The dispatcher's log lines up to a marker datagram sent now from the
/// client: it handles datagrams in order, so every earlier one is in.
fn lines_until_marker(network: &Network, dispatcher: &Process) -> Vec<String> {
    let marker_from = inside(&network.ns("c"), || {
        let socket = UdpSocket::bind("10.77.1.2:0").unwrap();
        socket.send_to(b"marker", (SERVICE_ADDRESS, PORT)).unwrap();
        socket.local_addr().unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    loop {
        let line = dispatcher.lines.recv_timeout(deadline - Instant::now()).expect("the dispatcher logs the marker");
        if line.starts_with(&marker_from.to_string()) {
            return lines;
        }
        lines.push(line);
    }
}

/// Replicas 1 and 2, each in its namespace, certificates in `dir`/r{i}.der.
fn start_replicas(network: &Network, dir: &Path) -> Vec<Process> {
    [1, 2]
        .iter()
        .map(|i| {
            let cert = dir.join(format!("r{i}.der"));
            let args = [
                "replica",
                "--listen",
                &format!("10.77.2{i}.2:{PORT}"),
                "--service-address",
                SERVICE_ADDRESS,
                "--replica-id",
                &i.to_string(),
                "--ttl",
                "60",
                "--name",
                NAME,
                "--cert-out",
                cert.to_str().unwrap(),
            ];
            Process::start(&network.ns(&format!("r{i}")), &args)
        })
        .collect()
}

fn connect_with_the_cli(network: &Network, dir: &Path, extra: &[&str]) -> String {
    let output = Command::new("ip")
        .args(["netns", "exec", &network.ns("c"), env!("CARGO_BIN_EXE_pharos"), "connect", NAME, "--prefix", "10.99.0.0/24"])
        .args(["--port", &PORT.to_string(), "--conflicts"])
        .arg(dir.join("conflicts"))
        .arg("--ca")
        .arg(dir.join("r1.der"))
        .arg("--ca")
        .arg(dir.join("r2.der"))
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_dispatcher_routes_the_handshake_by_vxlan_or_through_the_other_data_center_and_steps_aside() {
    if !may_run() {
        return;
    }
    let network = Network::build("q");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("conflicts"), format!("{NAME} {SERVICE_ADDRESS}\n")).unwrap();
    let _replicas = start_replicas(&network, dir.path());

    let far_config = dispatcher_config(dir.path(), 2, [1, 1]);
    let far_dispatcher = Process::start(&network.ns("d2"), &["dispatcher", "--config", far_config.to_str().unwrap()]);
    for (weights, chosen, route) in [([1, 0], 1, ""), ([0, 1], 2, " through data center dc2 (10.77.3.2)")] {
        let config = dispatcher_config(dir.path(), 1, weights);
        let dispatcher = Process::start(&network.ns("d"), &["dispatcher", "--config", config.to_str().unwrap()]);
        assert_eq!(dispatcher.first_line.trim(), PORT.to_string());
        let printed = connect_with_the_cli(&network, dir.path(), &[]);
        let expected = format!("via {SERVICE_ADDRESS}:{PORT} moved to 10.77.2{chosen}.2:{PORT} ttl 60: hello from replica {chosen}\n");
        assert_eq!(printed, expected, "weights {weights:?}");
        let handled = lines_until_marker(&network, &dispatcher);
        assert!(handled.iter().any(|line| line.ends_with(&format!("forward 1 to 10.77.2{chosen}.2{route}"))), "{handled:#?}");
    }
    let delivered = wait_for_line(&far_dispatcher, "tunnelled from 10.77.3.1: forward 1 to 10.77.22.2");
    assert!(delivered.starts_with("10.77.1.2:"), "the tunnel carried the client's own address: {delivered}");
    forged_tunnel_datagrams_are_refused(&network, &far_dispatcher);

    // Within one connection: greetings after the move never reach the dispatcher.
    let dispatcher =
        Process::start(&network.ns("d"), &["dispatcher", "--config", dir.path().join("dispatcher1-10.toml").to_str().unwrap()]);
    let certificates = [std::fs::read(dir.path().join("r1.der")).unwrap(), std::fs::read(dir.path().join("r2.der")).unwrap()];
    let (client_tx, client_rx) = channel::<()>();
    let (report_tx, report_rx) = channel();
    let client_ns = network.ns("c");
    let client = std::thread::spawn(move || {
        inside(&client_ns, move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            runtime.block_on(async move {
                let mut roots = rustls::RootCertStore::empty();
                certificates.into_iter().for_each(|der| roots.add(der.into()).unwrap());
                let prefix = "10.99.0.0/24".parse().unwrap();
                let conflicts = ConflictList::parse(&format!("{NAME} {SERVICE_ADDRESS}\n"), &prefix).unwrap();
                let mut client = ArtemisClient::new(ServiceIdMap::new(prefix, conflicts), PORT, client_config(roots, ALPN));
                let mut connected = client.connect(&CanonicalName::new(NAME).unwrap(), Instant::now()).await.unwrap();
                assert!(matches!(connected.route, Route::Service { replica: Some(_), .. }));
                for round in 0..2 {
                    // Round 0's first greeting leaves before the move, through the dispatcher.
                    for _ in 0..5 {
                        let (mut send, mut receive) = connected.connection.open_bi().await.unwrap();
                        send.write_all(b"ping").await.unwrap();
                        send.finish().unwrap();
                        assert_eq!(receive.read_to_end(100).await.unwrap(), b"hello from replica 1\nping");
                    }
                    let moved_to = connected.settled().await.unwrap();
                    assert_eq!(moved_to, Some(format!("10.77.21.2:{PORT}").parse().unwrap()), "the connection ends on the replica");
                    report_tx.send(round).unwrap();
                    tokio::task::block_in_place(|| client_rx.recv().unwrap());
                }
            })
        })
    });
    report_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let through_handshake = lines_until_marker(&network, &dispatcher);
    assert!(through_handshake.iter().any(|line| line.ends_with("forward 1 to 10.77.21.2")), "{through_handshake:#?}");
    client_tx.send(()).unwrap();
    report_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let after_the_move = lines_until_marker(&network, &dispatcher);
    assert_eq!(after_the_move, Vec::<String>::new(), "five greetings after the move, none through the dispatcher");
    client_tx.send(()).unwrap();
    client.join().unwrap();
}

/// Tunnel datagrams to dispatcher 2 from its peer's address but tagged
/// with another key, tagged right but sent 10 s ago (a replay), and from
/// an address not a peer: each refused, counted, none delivered.
fn forged_tunnel_datagrams_are_refused(network: &Network, far_dispatcher: &Process) {
    let forged = Tunnelled {
        client: "10.77.1.2:40000".parse().unwrap(),
        service: format!("{SERVICE_ADDRESS}:{PORT}").parse().unwrap(),
        replica: "10.77.22.2".parse().unwrap(),
        datagram: b"\xc0 not from a peer",
    };
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as u64;
    let wrong_key = forged.seal(&TunnelKey::new(&[0x42; 32]).unwrap(), now).unwrap();
    let replayed = forged.seal(&TunnelKey::from_hex(TUNNEL_KEY).unwrap(), now - 10_000).unwrap();
    let send_from = |namespace: &str, source: &'static str, bytes: Vec<u8>| {
        inside(namespace, move || UdpSocket::bind((source, 0)).unwrap().send_to(&bytes, ("10.77.3.2", TUNNEL_PORT)).unwrap());
    };
    send_from(&network.ns("d"), "10.77.3.1", wrong_key);
    wait_for_line(
        far_dispatcher,
        "from 10.77.3.1 refused (1 so far): the tag does not match: not sealed with our key, or changed on the way",
    );
    send_from(&network.ns("d"), "10.77.3.1", replayed.clone());
    let stale = wait_for_line(far_dispatcher, "outside the 2000 ms window (replayed, or clocks apart)");
    assert!(stale.contains("from 10.77.3.1 refused (2 so far): sent at "), "{stale}");
    send_from(&network.ns("d2"), "10.77.3.2", replayed);
    wait_for_line(far_dispatcher, "from 10.77.3.2 refused (3 so far): not a peer dispatcher");
}

/// The base64 SHA-256 of a certificate's public key, as Chromium's
/// --ignore-certificate-errors-spki-list takes it.
fn spki_hash(certificate: &Path) -> String {
    use base64::Engine;
    let der = std::fs::read(certificate).unwrap();
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, parsed.tbs_certificate.subject_pki.raw);
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Debian's Chromium, headless in the client's namespace, fetches
/// https://NAME:PORT/ over HTTP/3 only, NAME resolved to the service
/// address, the replicas' keys trusted, and must show replica `chosen`'s
/// page. Its net-log stays in the temporary directory when it does not.
fn fetch_with_chromium(network: &Network, dir: &Path, chosen: usize) {
    let profile = tempfile::tempdir_in(dir).unwrap();
    let net_log = std::env::temp_dir().join(format!("artemis-chromium-{}.netlog.json", std::process::id()));
    let trusted = format!("{},{}", spki_hash(&dir.join("r1.der")), spki_hash(&dir.join("r2.der")));
    let output = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", &network.ns("c"), CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .args(["--enable-quic", &format!("--origin-to-force-quic-on={NAME}:{PORT}")])
        .arg(format!("--host-resolver-rules=MAP {NAME} {SERVICE_ADDRESS}"))
        .arg(format!("--ignore-certificate-errors-spki-list={trusted}"))
        .args(["--dump-dom", &format!("https://{NAME}:{PORT}/")])
        .output()
        .unwrap();
    let (page, errors) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let wanted = format!(">hello from replica {chosen}</p>");
    assert!(
        output.status.success() && page.contains(&wanted),
        "chromium ({}) did not show {wanted:?}: {page}\n{errors}\nits net-log: {}",
        output.status,
        net_log.display()
    );
    std::fs::remove_file(&net_log).unwrap();
}

#[test]
fn chromium_fetches_a_page_over_http3_from_the_replica_the_dispatcher_chose() {
    if !may_run() {
        return;
    }
    if !Path::new(CHROMIUM).exists() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "no {CHROMIUM} under CI: scripts/test.sh installs Debian's chromium");
        return eprintln!("\n*** SKIP: no {CHROMIUM} (Debian package chromium). ***\n");
    }
    let network = Network::build("b");
    let dir = tempfile::tempdir().unwrap();
    let replicas = start_replicas(&network, dir.path());
    let far_config = dispatcher_config(dir.path(), 2, [1, 1]);
    let _far_dispatcher = Process::start(&network.ns("d2"), &["dispatcher", "--config", far_config.to_str().unwrap()]);
    for (weights, chosen, route) in [([1, 0], 1, ""), ([0, 1], 2, " through data center dc2 (10.77.3.2)")] {
        let config = dispatcher_config(dir.path(), 1, weights);
        let dispatcher = Process::start(&network.ns("d"), &["dispatcher", "--config", config.to_str().unwrap()]);
        fetch_with_chromium(&network, dir.path(), chosen);
        let connected = wait_for_line(&replicas[chosen - 1], &format!(" -> {SERVICE_ADDRESS}: h3"));
        assert!(connected.starts_with("10.77.1.2:"), "the replica saw the browser's own address: {connected}");
        let handled = lines_until_marker(&network, &dispatcher);
        let forwarded = format!(" to 10.77.2{chosen}.2{route}");
        let initials = handled.iter().find_map(|line| line.strip_suffix(&forwarded)?.rsplit_once(": forward ")?.1.parse::<usize>().ok());
        // Chromium's post-quantum key share spreads its ClientHello over
        // two Initials: the dispatcher waits for the second, then forwards both.
        assert_eq!(initials, Some(2), "the dispatcher forwarded the browser's split ClientHello{forwarded}: {handled:#?}");
        let browser = connected.split(" -> ").next().unwrap();
        assert_eq!(handled[0], format!("{browser} -> {SERVICE_ADDRESS}: wait"), "{handled:#?}");
    }
}

struct DnsServer(Child);

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// `pharos serve` in dispatcher 1's namespace on [`DNS_SERVER`], its zone
/// naming replica 2's own address for [`NAME`]; returned once it answers
/// the client's namespace; killed when dropped.
fn start_dns_server(network: &Network, dir: &Path) -> DnsServer {
    std::fs::write(
        dir.join("example.test.zone"),
        "$TTL 300\n@ SOA ns hostmaster 1 7200 3600 1209600 60\n NS ns\nns A 10.77.1.1\nsvc A 10.77.22.2\n",
    )
    .unwrap();
    let config = dir.join("pharos.toml");
    std::fs::write(
        &config,
        format!("[server]\nlisten = [\"{DNS_SERVER}\"]\nthreads = 1\n[[zone]]\norigin = \"example.test\"\nfile = \"example.test.zone\"\n"),
    )
    .unwrap();
    let server = DnsServer(
        Command::new("ip")
            .args(["netns", "exec", &network.ns("d"), env!("CARGO_BIN_EXE_pharos"), "serve", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    // A bare query for NAME's A record, id 7.
    let query = [&[0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0][..], b"\x03svc\x07example\x04test\x00\x00\x01\x00\x01"].concat();
    loop {
        let query = query.clone();
        let answered = inside(&network.ns("c"), move || {
            let socket = UdpSocket::bind("10.77.1.2:0").unwrap();
            socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            socket.send_to(&query, DNS_SERVER).is_ok() && socket.recv(&mut [0; 512]).is_ok()
        });
        if answered {
            return server;
        }
        assert!(Instant::now() < deadline, "pharos serve answers within 30 s");
    }
}

#[test]
fn pharos_connect_races_a_dns_lookup_against_the_service_address() {
    if !may_run() {
        return;
    }
    let network = Network::build("r");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("conflicts"), format!("{NAME} {SERVICE_ADDRESS}\n")).unwrap();
    let _replicas = start_replicas(&network, dir.path());
    let _dns = start_dns_server(&network, dir.path());

    // No dispatcher yet: the service address never answers, the lookup wins.
    let printed = connect_with_the_cli(&network, dir.path(), &["--race-dns", DNS_SERVER]);
    assert_eq!(printed, format!("by DNS through {DNS_SERVER} to 10.77.22.2:{PORT}: hello from replica 2\n"));

    // A lookup refused at once (nothing on the port) leaves the service address to win.
    let far_config = dispatcher_config(dir.path(), 2, [1, 0]);
    let _far = Process::start(&network.ns("d2"), &["dispatcher", "--config", far_config.to_str().unwrap()]);
    let config = dispatcher_config(dir.path(), 1, [1, 0]);
    let _dispatcher = Process::start(&network.ns("d"), &["dispatcher", "--config", config.to_str().unwrap()]);
    let printed = connect_with_the_cli(&network, dir.path(), &["--race-dns", "10.77.1.1:5354"]);
    assert_eq!(printed, format!("via {SERVICE_ADDRESS}:{PORT} moved to 10.77.21.2:{PORT} ttl 60: hello from replica 1\n"));
}
