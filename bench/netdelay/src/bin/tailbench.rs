//! `tailbench`: the persistent-connections experiment, every case, as
//! markdown tables (bench/tail runs it). Needs root, `ip`, `iptables`,
//! `ping` and a release `pharos`.
//!
//!     tailbench [--pharos target/release/pharos] [--lanes 4] [--queries 350]
//!               [--cases 20:0.005,60:0.02,...] [--hol-rtts 20,60,200] [--bursts 40]
//!               [--seed 1] [--out DIR] [--only main|hol] [--keep]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use netdelay::experiment::{Client, Experiment, Lost, Report, Transport, Workload, head_of_line, quantile, summary};
use netdelay::stub::Retry;

struct Options {
    pharos: PathBuf,
    lanes: u32,
    queries: usize,
    cases: Vec<(u64, f64)>,
    hol_rtts: Vec<u64>,
    bursts: u32,
    burst_size: u32,
    spacing: Duration,
    period: Duration,
    seed: u64,
    out: Option<PathBuf>,
    main: bool,
    hol: bool,
    keep: bool,
}

fn options() -> Options {
    let mut options = Options {
        pharos: PathBuf::from("target/release/pharos"),
        lanes: 4,
        queries: 350,
        cases: [20, 60, 200].iter().flat_map(|&rtt| [0.005, 0.02, 0.05].map(move |loss| (rtt, loss))).collect(),
        hol_rtts: vec![20, 60, 200],
        bursts: 40,
        burst_size: 8,
        spacing: Duration::from_millis(5),
        period: Duration::from_millis(1500),
        seed: 1,
        out: None,
        main: true,
        hol: true,
        keep: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{flag} needs a value")).clone();
        match flag.as_str() {
            "--pharos" => options.pharos = value().into(),
            "--lanes" => options.lanes = value().parse().expect("--lanes N"),
            "--queries" => options.queries = value().parse().expect("--queries N"),
            "--cases" => {
                options.cases = value()
                    .split(',')
                    .map(|case| {
                        let (rtt, loss) = case.split_once(':').expect("--cases RTT_MS:LOSS,...");
                        (rtt.parse().expect("RTT in ms"), loss.parse().expect("loss as a fraction"))
                    })
                    .collect()
            }
            "--hol-rtts" => options.hol_rtts = value().split(',').map(|rtt| rtt.parse().expect("--hol-rtts MS,...")).collect(),
            "--bursts" => options.bursts = value().parse().expect("--bursts N"),
            "--burst-size" => options.burst_size = value().parse().expect("--burst-size N"),
            "--spacing-ms" => options.spacing = Duration::from_millis(value().parse().expect("--spacing-ms MS")),
            "--period-ms" => options.period = Duration::from_millis(value().parse().expect("--period-ms MS")),
            "--seed" => options.seed = value().parse().expect("--seed N"),
            "--out" => options.out = Some(value().into()),
            "--only" => match value().as_str() {
                "main" => options.hol = false,
                "hol" => options.main = false,
                other => panic!("--only main|hol, not {other}"),
            },
            "--keep" => options.keep = true,
            other => panic!("unknown flag {other}; see the top of bench/netdelay/src/bin/tailbench.rs"),
        }
    }
    options
}

fn ms(latency: Option<Duration>) -> String {
    latency.map_or("fail".into(), |latency| format!("{}", latency.as_millis()))
}

fn sum(report: &Report, client: usize, counter: &str) -> u64 {
    report.forwarders.iter().filter(|(c, _, _)| *c == client).map(|(_, _, counters)| counters.get(counter).copied().unwrap_or(0)).sum()
}

/// The clients of every case: UDP; the forwarder over TLS as it comes; the
/// same with its own retransmission timer held back to 2 s, so that TCP's
/// recovery alone decides (see "How to read" in bench/RESULTS.md); QUIC.
fn clients(udp: bool) -> Vec<Client> {
    let mut clients = vec![
        Client::plain(Transport::Tls),
        Client::with_flags("TLS, fwd RTO 2 s", Transport::Tls, &["--min-rto-ms", "2000"]),
        Client::plain(Transport::Quic),
    ];
    if udp {
        clients.insert(0, Client::plain(Transport::Udp));
    }
    clients
}

/// Per-query rows, for whoever wants to look closer.
fn write_csv(out: &Option<PathBuf>, name: &str, report: &Report) {
    let Some(out) = out else { return };
    let mut text = String::from("client,lane,query,burst,place,planned_ms,latency_ms,sent,rcode\n");
    for stream in &report.streams {
        for (index, outcome) in stream.outcomes.iter().enumerate() {
            let (burst, place) = outcome.planned.burst.map_or((String::new(), String::new()), |(b, p)| (b.to_string(), p.to_string()));
            let latency = outcome.latency.map_or(String::new(), |latency| format!("{:.3}", latency.as_secs_f64() * 1000.0));
            let rcode = outcome.rcode.map_or(String::new(), |rcode| rcode.to_string());
            let _ = writeln!(
                text,
                "{},{},{index},{burst},{place},{:.3},{latency},{},{rcode}",
                stream.client,
                stream.lane,
                outcome.planned.at.as_secs_f64() * 1000.0,
                outcome.sent
            );
        }
    }
    std::fs::create_dir_all(out).expect("the --out directory");
    std::fs::write(out.join(format!("{name}.csv")), text).expect("writing the CSV");
}

fn experiment(options: &Options, rtt: u64, loss: f64, clients: Vec<Client>, workload: Workload, pings: u32) -> Experiment {
    Experiment {
        pharos: options.pharos.clone(),
        rtt: Duration::from_millis(rtt),
        loss,
        seed: options.seed,
        lanes: options.lanes,
        clients,
        workload,
        retry: Retry { timeout: Duration::from_secs(3), tries: 4 },
        pings,
        work_dir: work_dir(),
        keep: options.keep,
    }
}

fn run(experiment: &Experiment, what: &str) -> Report {
    let started = Instant::now();
    eprintln!("== {what}");
    let report = experiment.run().unwrap_or_else(|error| panic!("{what}: {error}"));
    eprintln!("   {:.0} s", started.elapsed().as_secs_f64());
    report
}

/// Where each case keeps its configuration, certificate and logs.
fn work_dir() -> PathBuf {
    std::env::temp_dir().join(format!("pharos-tail-{}", std::process::id()))
}

/// On SIGINT or SIGTERM: deletes this run's namespaces and files and exits (the
/// servers and forwarders die with the process). Call before any thread
/// starts, so that every thread inherits the blocked signals.
fn clean_up_on_signals() {
    unsafe {
        let mut signals: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut signals);
        libc::sigaddset(&raw mut signals, libc::SIGINT);
        libc::sigaddset(&raw mut signals, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &raw const signals, std::ptr::null_mut());
        std::thread::spawn(move || {
            let mut signal = 0;
            libc::sigwait(&raw const signals, &raw mut signal);
            eprintln!("tailbench: signal {signal}: deleting the namespaces and stopping");
            netdelay::netns::delete_own();
            let _ = std::fs::remove_dir_all(work_dir());
            std::process::exit(128 + signal);
        });
    }
}

fn main() {
    clean_up_on_signals();
    let options = options();
    let started = Instant::now();
    let mut tcp_settings = Vec::new();
    if options.main {
        let mut table = String::from(
            "| RTT ms | loss/dir % | ping RTT ms | ping loss % (expected) | transport | queries | stub resent | failed | p50 ms | p99 ms | p99.9 ms | max ms |\n|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut recovery = String::from(
            "| RTT ms | loss/dir % | packets shaped | dropped | released >1 ms late | latest ms | TCP retrans. segs | TCP loss probes | TCP RTO timeouts | forwarder timeouts / SERVFAIL: TLS | TLS, fwd RTO 2 s | QUIC | run s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for &(rtt, loss) in &options.cases {
            let workload = Workload::Uniform { queries: options.queries, min: Duration::from_millis(50), max: Duration::from_millis(300) };
            let experiment = experiment(&options, rtt, loss, clients(true), workload, 300);
            let report = run(&experiment, &format!("RTT {rtt} ms, loss {}% per direction", loss * 100.0));
            write_csv(&options.out, &format!("main-rtt{rtt}-loss{loss}"), &report);
            tcp_settings = report.tcp_settings.clone();
            let ping = report.ping.clone().unwrap_or_default();
            let ping_loss = 100.0 * f64::from(ping.sent - ping.received) / f64::from(ping.sent.max(1));
            let expected = 100.0 * (1.0 - (1.0 - loss) * (1.0 - loss));
            for (index, client) in experiment.clients.iter().enumerate() {
                let s = summary(&report, index);
                let _ = writeln!(
                    table,
                    "| {rtt} | {} | {:.1} | {ping_loss:.1} ({expected:.1}) | {} | {} | {} | {} | {} | {} | {} | {} |",
                    loss * 100.0,
                    ping.avg_ms,
                    client.name,
                    s.queries,
                    s.resent,
                    s.unanswered + s.errors,
                    ms(s.p50),
                    ms(s.p99),
                    ms(s.p999),
                    ms(s.max)
                );
            }
            let both = |name: &str| report.tcp_client.get(name).copied().unwrap_or(0) + report.tcp_server.get(name).copied().unwrap_or(0);
            let dropped = report.to_server.dropped_random + report.to_client.dropped_random;
            let forwarded: Vec<String> = (1..experiment.clients.len())
                .map(|client| format!("{} / {}", sum(&report, client, "timeouts"), sum(&report, client, "servfail")))
                .collect();
            let (to_server, to_client) = (&report.to_server, &report.to_client);
            let _ = writeln!(
                recovery,
                "| {rtt} | {} | {} | {dropped} | {} | {:.1} | {} | {} | {} | {} | {:.0} |",
                loss * 100.0,
                to_server.packets + to_client.packets,
                to_server.late_over_1ms + to_client.late_over_1ms,
                to_server.latest.max(to_client.latest).as_secs_f64() * 1000.0,
                both("RetransSegs"),
                both("TCPLossProbes"),
                both("TCPTimeouts"),
                forwarded.join(" | "),
                report.measured.as_secs_f64()
            );
            eprint!("{table}");
        }
        println!("### Tail latency under random loss (UDP with a 3 s timeout vs pharos forward over TLS and QUIC)\n");
        println!(
            "Failed: no answer after the stub's 4 tries, or a SERVFAIL from the forwarder; percentiles count failures as longer than any answer (\"fail\").\n"
        );
        println!("{table}");
        println!(
            "### The emulated link and loss recovery during those runs (delayers of both directions; TCP counters of both namespaces; forwarder counters summed over lanes)\n"
        );
        println!("{recovery}");
    }
    if options.hol {
        let mut table = String::from(
            "| RTT ms | packet lost | transport | bursts hit / clean | lost query p50 ms | behind the loss: p50 ms | p90 ms | max ms | clean bursts p50 ms | behind p50 − clean p50 ms | behind > clean p50 + RTT/2 |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut places = String::new();
        for &rtt in &options.hol_rtts {
            for lost in [Lost::Query, Lost::Answer] {
                let workload = Workload::Bursts {
                    bursts: options.bursts,
                    size: options.burst_size,
                    spacing: options.spacing,
                    period: options.period,
                    lost,
                    every: 2,
                };
                let experiment = experiment(&options, rtt, 0.0, clients(false), workload, 0);
                let which = if lost == Lost::Query { "query" } else { "answer" };
                let report = run(&experiment, &format!("head of line: RTT {rtt} ms, first {which} of every other burst lost"));
                write_csv(&options.out, &format!("hol-rtt{rtt}-{which}"), &report);
                for (index, client) in experiment.clients.iter().enumerate() {
                    let view = head_of_line(&experiment, &report, index);
                    let clean = quantile(&view.control_latencies, 0.5);
                    let behind = quantile(&view.behind, 0.5);
                    let extra = match (behind, clean) {
                        (Some(behind), Some(clean)) => format!("{:+}", behind.as_millis() as i64 - clean.as_millis() as i64),
                        _ => "–".into(),
                    };
                    let threshold = clean.map(|clean| clean + Duration::from_millis(rtt / 2));
                    let slowed = view.behind.iter().filter(|latency| latency.is_none_or(|latency| Some(latency) > threshold)).count();
                    let elsewhere =
                        if view.lost_elsewhere > 0 { format!(" ({} not the first query)", view.lost_elsewhere) } else { String::new() };
                    let _ = writeln!(
                        table,
                        "| {rtt} | {which} | {} | {} / {}{elsewhere} | {} | {} | {} | {} | {} | {extra} | {slowed} of {} |",
                        client.name,
                        view.hit,
                        view.control,
                        ms(quantile(&view.lost, 0.5)),
                        ms(behind),
                        ms(quantile(&view.behind, 0.9)),
                        ms(quantile(&view.behind, 1.0)),
                        ms(clean),
                        view.behind.len()
                    );
                    let medians: Vec<String> = view.by_place.values().map(|latencies| ms(quantile(latencies, 0.5))).collect();
                    let _ = writeln!(places, "| {rtt} | {which} | {} | {} |", client.name, medians.join(" | "));
                }
                eprint!("{table}");
            }
        }
        let size = options.burst_size;
        println!(
            "### Head-of-line blocking: bursts of {size} queries {} ms apart, every {} ms; the first query's (or answer's) packet of every other burst dropped, nothing else lost\n",
            options.spacing.as_millis(),
            options.period.as_millis()
        );
        println!("{table}");
        println!("Median latency (ms) by place in the burst, bursts with a loss (place 0 is the query whose packet was lost):\n");
        let header: Vec<String> = (0..size).map(|place| place.to_string()).collect();
        println!("| RTT ms | packet lost | transport | {} |\n|---:|---|---|{}", header.join(" | "), "---:|".repeat(size as usize));
        println!("{places}");
    }
    let settings: Vec<String> = tcp_settings.iter().map(|(name, value)| format!("{name}={value}")).collect();
    if !settings.is_empty() {
        println!("TCP settings in the namespaces: {}\n", settings.join(", "));
    }
    println!(
        "Lanes: {} (each: one stub per client, those of TLS and QUIC each through a `pharos forward --connections 1` of its own). Stub: 3 s timeout, 4 tries. Took {:.0} s.",
        options.lanes,
        started.elapsed().as_secs_f64()
    );
}
