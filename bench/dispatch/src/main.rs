//! `dispatch`: the Artemis dispatcher's cost per client first flight on
//! one core, from the project's own client's Initials. See README.md.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use hdrhistogram::Histogram;
use pharos_artemis::client_hello::{ClientHelloTable, Decoded, Limits};
use pharos_artemis::dispatcher::{Action, Dispatcher, Target};
use pharos_artemis::initial::{QUIC_V2, Received, decode_datagram};
use pharos_artemis::seal::{Sealed, crypto_frame};
use pharos_artemis::service_id::CanonicalName;
use pharos_artemis_quic::dispatcher::DispatcherConfig;
use pharos_artemis_quic::tls::ClientCrypto;

const SERVICE: &str = "svc.example.test";
/// Offered ALPN protocols that make a ClientHello as large as one with an
/// X25519MLKEM768 key share (about 1.2 KB more), so it spans Initials.
const MULTI_PACKET_ALPNS: usize = 96;
/// Two replicas, weighted: every flight goes through the routing core's
/// weighted choice, as `pharos dispatcher` routes.
const CONFIG: &str = r#"
    port = 443
    prefix = "10.99.0.0/16"
    vni = 1
    [[service]]
    name = "svc.example.test"
    [[service.replica]]
    id = 1
    address = "10.77.21.2"
    vtep = "10.77.11.2"
    mac = "02:00:00:00:00:01"
    weight = 1
    [[service.replica]]
    id = 2
    address = "10.77.22.2"
    vtep = "10.77.12.2"
    mac = "02:00:00:00:00:02"
    weight = 1
"#;

#[derive(Parser)]
struct Args {
    /// How long each of the four cases runs.
    #[arg(long, default_value_t = 5.0)]
    seconds_per_case: f64,
    /// The core the measuring thread is pinned to.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!(args.seconds_per_case > 0.0 && args.seconds_per_case.is_finite(), "--seconds-per-case must be positive");
    let duration = Duration::from_secs_f64(args.seconds_per_case);
    let one_packet = capture_flight(1)?;
    let multi_packet = capture_flight(MULTI_PACKET_ALPNS)?;
    ensure!(one_packet.len() == 1, "the one-ALPN ClientHello took {} Initials, expected 1", one_packet.len());
    ensure!(multi_packet.len() > 1, "the {MULTI_PACKET_ALPNS}-ALPN ClientHello fit one Initial");
    let cases = [
        ("v1, 1 packet", one_packet.clone()),
        ("v1, multi-packet", multi_packet.clone()),
        ("v2, 1 packet", reseal_as_v2(&one_packet)?),
        ("v2, multi-packet", reseal_as_v2(&multi_packet)?),
    ];
    pin_to(args.cpu)?;
    let config = DispatcherConfig::parse(CONFIG)?;
    let service = config.service_address(&CanonicalName::new(SERVICE)?)?;
    println!("case               datagrams  median_us    p99_us  flights/s  initials/s  (cpu {})", args.cpu);
    for (name, flight) in cases {
        let mut dispatcher = config.dispatcher(1)?;
        let measured = measure(&mut dispatcher, service, &flight, duration).with_context(|| name.to_owned())?;
        let flights_per_second = measured.histogram.len() as f64 / measured.wall.as_secs_f64();
        println!(
            "{name:<18} {:>9}  {:>9.2}  {:>8.2}  {:>9.0}  {:>10.0}",
            flight.len(),
            measured.histogram.value_at_quantile(0.5) as f64 / 1000.0,
            measured.histogram.value_at_quantile(0.99) as f64 / 1000.0,
            flights_per_second,
            flights_per_second * flight.len() as f64,
        );
    }
    Ok(())
}

/// The project's client's first flight to a socket that never answers,
/// until it holds a whole ClientHello.
fn capture_flight(alpn_count: usize) -> anyhow::Result<Vec<Vec<u8>>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let capture = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        tls.alpn_protocols = (0..alpn_count).map(|i| format!("artemis-bench-{i:03}").into_bytes()).collect();
        let config = quinn::ClientConfig::new(Arc::new(ClientCrypto::new(Arc::new(tls))?));
        let endpoint = quinn::Endpoint::client((Ipv4Addr::LOCALHOST, 0).into())?;
        let connecting = endpoint.connect_with(config, capture.local_addr()?, SERVICE)?;
        let _handshake = tokio::spawn(connecting);
        let mut table = ClientHelloTable::new(Limits::default());
        let mut buffer = vec![0; 65536];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (len, from) = tokio::time::timeout_at(deadline, capture.recv_from(&mut buffer))
                .await
                .context("the client's Initials did not complete a ClientHello within 10 s")??;
            if let Decoded::Complete { datagrams, .. } = table.receive(from, &buffer[..len], Instant::now())? {
                return Ok(datagrams);
            }
        }
    })
}

/// The same CRYPTO data in QUIC v2 Initials of the same sizes.
fn reseal_as_v2(flight: &[Vec<u8>]) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut resealed = Vec::new();
    for (number, datagram) in flight.iter().enumerate() {
        let Received::Initial { dcid, fragments, .. } = decode_datagram(datagram)? else { bail!("a captured datagram is not an Initial") };
        let frames = fragments.iter().flat_map(|fragment| crypto_frame(fragment.offset, &fragment.data)).collect();
        let sealed = Sealed {
            version: QUIC_V2,
            first_byte: 0xd3, // long header, fixed bit, Initial (v2), 4-byte packet number
            dcid: dcid.as_slice().to_vec(),
            packet_number: number.try_into()?,
            datagram_size: datagram.len(),
            ..Sealed::new(frames)
        };
        resealed.push(sealed.seal());
    }
    Ok(resealed)
}

struct Measured {
    /// Nanoseconds per flight.
    histogram: Histogram<u64>,
    wall: Duration,
}

/// Hands `flight` to the dispatcher from a new client address each time,
/// for `duration`, timing each flight.
fn measure(dispatcher: &mut Dispatcher, service: IpAddr, flight: &[Vec<u8>], duration: Duration) -> anyhow::Result<Measured> {
    let mut histogram = Histogram::new_with_bounds(1, 60_000_000_000, 3)?;
    let start = Instant::now();
    let mut clients = (0u64..).map(client_address);
    while start.elapsed() < duration {
        let client = clients.next().expect("an endless range");
        let began = Instant::now();
        let mut last = Action::Wait;
        for datagram in flight {
            last = dispatcher.on_datagram(client, service, datagram, began);
        }
        histogram.record(began.elapsed().as_nanos().try_into()?)?;
        if !matches!(last, Action::Forward { target: Target::Replica(_), ref datagrams, .. } if datagrams.len() == flight.len()) {
            bail!("a flight ended in {last:?}, not a forward of its {} datagrams to a replica", flight.len());
        }
    }
    Ok(Measured { histogram, wall: start.elapsed() })
}

/// The n-th client: addresses in 10.0.0.0/8, then the next port.
fn client_address(n: u64) -> SocketAddr {
    let host = Ipv4Addr::from(0x0a00_0000 | (n & 0x00ff_ffff) as u32);
    SocketAddr::new(host.into(), 1024 + (n >> 24) as u16)
}

fn pin_to(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it
    // (checked against CPU_SETSIZE) and sched_setaffinity only reads it.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        ensure!(cpu < libc::CPU_SETSIZE as usize, "--cpu {cpu} is beyond CPU_SETSIZE");
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    ensure!(pinned == 0, "pinning to cpu {cpu}: {}", std::io::Error::last_os_error());
    Ok(())
}
