//! `figure10`: the paper's Figure 10 in network namespaces (issue 15):
//! connection setup and first-response latency for DNS + QUIC, anycast
//! alone, and Artemis, one connection of each per draw of Table 3's delays.
//!
//! - [`model`]: Table 3 as seeded draws (Figures 8 and 9 as log-normals
//!   through the points the paper states; inter-DC latency from real
//!   data-center coordinates).
//! - [`topology`]: the namespaces, Pharos's processes (DNS server,
//!   dispatchers, replicas), and each draw's delays on the links
//!   (bench/netdelay's NFQUEUE emulation).
//! - [`resolver`]: the caching resolver in front of Pharos's DNS server.
//! - [`measure`]: the three clients and their timings.
//!
//! Prints p10/p50/p90 and the mean of each, writes every draw and sample
//! as JSON and plots their distributions (plot.py). Root needed.

mod measure;
mod model;
mod resolver;
mod topology;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use netdelay::delayer::Random;
use serde_json::json;

use crate::measure::{Client, Sample};
use crate::model::{Draw, Model};
use crate::resolver::Resolver;
use crate::topology::{AUTH, FAR, NEAR, RESOLVER, Topology};

#[derive(Parser)]
#[command(about = "The paper's Figure 10 in network namespaces: DNS + QUIC, anycast, Artemis")]
struct Args {
    /// Draws of Table 3's delays: one connection of each kind per draw.
    #[arg(long, default_value_t = 1000)]
    trials: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The pharos binary (build it with `cargo build --release`).
    #[arg(long, default_value = "target/release/pharos")]
    pharos: PathBuf,
    /// Data-center coordinates: WonderProxy's server list; by default the
    /// one in the large data sets (`$PHAROS_DATA`, else ../shared/data).
    #[arg(long)]
    sites: Option<PathBuf>,
    /// Where the JSON and the PNG go.
    #[arg(long, default_value = "bench/out")]
    out: PathBuf,
    /// Skip the plot.
    #[arg(long)]
    no_plot: bool,
}

const SYSTEMS: [&str; 3] = ["dns+quic", "anycast", "artemis"];

/// The benchmarks' one setting for where the large data sets are:
/// `$PHAROS_DATA`, else `../shared/data` from the repository's root (where
/// the benchmarks run).
fn large_data() -> PathBuf {
    std::env::var_os("PHAROS_DATA").map_or_else(|| PathBuf::from("../shared/data"), PathBuf::from)
}

fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    anyhow::ensure!(unsafe { libc::geteuid() } == 0, "network namespaces and NFQUEUE need root");
    anyhow::ensure!(args.trials > 0, "--trials must be at least 1");
    let sites_file = args.sites.get_or_insert_with(|| large_data().join("latency/wonderproxy-servers-2020-07-19.csv")).clone();
    let sites = std::fs::read_to_string(&sites_file)
        .with_context(|| format!("reading {} (give --sites, or set PHAROS_DATA to the large data sets)", sites_file.display()))?;
    let model = Model::new(&sites).map_err(|error| anyhow::anyhow!("{}: {error}", sites_file.display()))?;
    let pharos = std::fs::canonicalize(&args.pharos).with_context(|| format!("{}: build it first", args.pharos.display()))?;
    std::fs::create_dir_all(&args.out)?;
    let work = tempfile::tempdir()?;
    let topology = Topology::build(&pharos, work.path())?;
    let resolver = start_resolver(&topology)?;
    resolver.wait_for_server(NEAR.0, Duration::from_secs(10))?;
    let certificates = topology.certificates.iter().map(std::fs::read).collect::<Result<Vec<_>, _>>()?;
    // The client's thread alone enters its namespace: the plot (pip,
    // perhaps) runs from this one's afterwards.
    let trials = std::thread::scope(|scope| {
        scope.spawn(|| run_trials(&args, &model, &topology, &resolver, &certificates)).join().expect("the client's thread panicked")
    })?;
    report(&args, &model, &trials)
}

/// One connection of each kind per draw, from the client's namespace.
fn run_trials(
    args: &Args,
    model: &Model,
    topology: &Topology,
    resolver: &Resolver,
    certificates: &[Vec<u8>],
) -> anyhow::Result<Vec<(Draw, [Sample; 3])>> {
    netdelay::netns::enter(&topology.ns("c"))?;
    let client = Client::new(certificates)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut random = Random::new(args.seed);
    let mut trials = Vec::with_capacity(args.trials);
    for trial in 0..args.trials {
        let draw = model.draw(&mut random);
        // The policy's pick is the optimal data center: 1 when anycast
        // reaches it, else 2 (whose service is FAR).
        let (name, replica) = if draw.anycast_optimal { (NEAR.0, 1) } else { (FAR.0, 2) };
        resolver.prepare(name, draw.cache_hit)?;
        let samples = topology.with_delays(&draw, || {
            runtime.block_on(async {
                let dns = client.dns_and_quic(name, replica).await.context("DNS + QUIC")?;
                let anycast = client.anycast(NEAR.0, 1).await.context("anycast")?;
                let artemis = client.artemis(name, replica).await.context("Artemis")?;
                anyhow::Ok([dns, anycast, artemis])
            })
        })??;
        if trial % 100 == 0 {
            eprintln!("figure10: trial {trial}/{}", args.trials);
        }
        trials.push((draw, samples));
    }
    Ok(trials)
}

/// The resolver's sockets belong to its namespace; it serves on a thread.
fn start_resolver(topology: &Topology) -> anyhow::Result<std::sync::Arc<Resolver>> {
    let ns = topology.ns("res");
    let sockets = std::thread::spawn(move || {
        netdelay::netns::enter(&ns)?;
        let listen = std::net::UdpSocket::bind((RESOLVER, 53))?;
        let upstream = std::net::UdpSocket::bind("0.0.0.0:0")?;
        upstream.connect((AUTH, 53))?;
        std::io::Result::Ok((listen, upstream))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the resolver's setup panicked"))??;
    let resolver = Resolver::new(sockets.0, sockets.1)?;
    let serving = resolver.clone();
    std::thread::spawn(move || serving.serve());
    Ok(resolver)
}

/// The value below which `share` of `sorted` lies (nearest rank).
fn percentile(sorted: &[f64], share: f64) -> f64 {
    let rank = ((share * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn summary(values: impl Iterator<Item = f64>) -> serde_json::Value {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
    json!({"p10": percentile(&sorted, 0.1), "p50": percentile(&sorted, 0.5), "p90": percentile(&sorted, 0.9), "mean": mean})
}

fn report(args: &Args, model: &Model, trials: &[(Draw, [Sample; 3])]) -> anyhow::Result<()> {
    let mut summaries = serde_json::Map::new();
    println!("{} connections of each kind, seed {} (ms)", trials.len(), args.seed);
    println!("{:<10} {:>30}   {:>30}", "", "setup p10 / p50 / p90 (mean)", "first response p10 / p50 / p90 (mean)");
    for (index, system) in SYSTEMS.iter().enumerate() {
        let setup = summary(trials.iter().map(|(_, samples)| samples[index].setup));
        let first = summary(trials.iter().map(|(_, samples)| samples[index].first_response));
        let line = |s: &serde_json::Value| {
            let [p10, p50, p90, mean] = ["p10", "p50", "p90", "mean"].map(|key| s[key].as_f64().unwrap_or(f64::NAN));
            format!("{p10:6.2} / {p50:6.2} / {p90:6.2} ({mean:6.2})")
        };
        println!("{system:<10} {:>30}   {:>30}", line(&setup), line(&first));
        summaries.insert(system.to_string(), json!({"setup": setup, "first_response": first}));
    }
    let rows: Vec<_> = trials
        .iter()
        .map(|(draw, samples)| {
            let measured: serde_json::Map<_, _> = SYSTEMS
                .iter()
                .zip(samples)
                .map(|(system, sample)| (system.to_string(), json!({"setup": sample.setup, "first_response": sample.first_response})))
                .collect();
            json!({"cache_hit": draw.cache_hit, "dns_rtt": draw.dns_rtt, "optimal_rtt": draw.optimal_rtt,
                   "anycast_optimal": draw.anycast_optimal, "anycast_rtt": draw.anycast_rtt, "overlay": draw.overlay,
                   "sites": draw.sites, "measured": measured})
        })
        .collect();
    let stamp = utc_stamp();
    let json_path = args.out.join(format!("figure10-{stamp}.json"));
    let document = json!({
        "args": {"trials": args.trials, "seed": args.seed, "sites": args.sites},
        "model": {"dns_hit_mean": model.dns_hit.mean(), "dns_miss_mean": model.dns_miss.mean(),
                  "optimal_rtt_mean": model.optimal_rtt.mean(), "anycast_extra_mean": model.anycast_extra.mean()},
        "summary": summaries,
        "trials": rows,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&document)?)?;
    println!("raw: {}", json_path.display());
    if !args.no_plot {
        plot(&json_path, &json_path.with_extension("png"))?;
    }
    Ok(())
}

/// UTC YYYYmmdd-HHMMSS, from `date` (no date crate for one name).
fn utc_stamp() -> String {
    Command::new("date")
        .args(["-u", "+%Y%m%d-%H%M%S"])
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|stamp| stamp.trim().to_owned())
        .unwrap_or_else(|| std::process::id().to_string())
}

fn plot(json: &Path, png: &Path) -> anyhow::Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("plot.py");
    let status = Command::new("python3").arg(script).arg(json).arg(png).status()?;
    anyhow::ensure!(status.success(), "plot.py failed");
    Ok(())
}
