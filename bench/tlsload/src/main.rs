//! tlsload: the client side of `bench/encrypted`.
//!
//! `tlsload run` connects to one DNS over TLS or DNS over HTTPS (HTTP/2)
//! server and takes commands on stdin, one per line, answering each with
//! one JSON object on a line of stdout, so that the driving script can read
//! the server's CPU and memory between them:
//!
//! - `open N C`: opens N more connections (full handshakes, C at a time,
//!   each from the next `--sources` address) and holds them.
//! - `query`: one query on every held connection (liveness + first use).
//! - `load SECONDS DEPTH RATE`: every held connection sends DEPTH queries at
//!   once and waits for their answers, again and again (RATE 0: as fast as
//!   answers come), or paced so that all of them together send RATE q/s.
//! - `handshakes SECONDS WORKERS full|resume`: WORKERS loops of connect,
//!   handshake, one query, close; `resume` with a session cache.
//! - `probe N`: N fresh connections one after another, from `--probe-source`,
//!   each verifying the server's certificate.
//! - `close`: closes every held connection politely.
//!
//! `tlsload gencert` writes a self-signed ECDSA P-256 certificate made the
//! way Pharos makes its own (rcgen), for both servers of the benchmark.
//!
//! Single-threaded (pin it with taskset); raises its own descriptor limit
//! to the hard limit; every wait has a deadline.

#[path = "../../dnsload/src/query.rs"]
#[allow(dead_code)]
mod query;

mod conn;
mod stats;

use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use rustls::client::Resumption;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::UnixTime;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use conn::{Conn, Ctx, Proto};
use stats::{Answers, Handshakes};

#[derive(Parser)]
#[command(name = "tlsload", version, about = "DNS over TLS / HTTPS load generator for bench/encrypted")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Connect to a server and take commands on stdin (see the crate docs).
    Run(RunArgs),
    /// Write cert.pem and key.pem (self-signed, ECDSA P-256) into DIR.
    Gencert {
        #[arg(long)]
        dir: PathBuf,
        /// Subject alternative names.
        #[arg(long, default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
        names: Vec<String>,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Server address, IP:PORT.
    #[arg(long)]
    server: SocketAddr,
    #[arg(long, value_enum)]
    proto: Proto,
    /// PEM certificate(s) to trust: the server's self-signed one.
    #[arg(long)]
    ca: PathBuf,
    /// Name to verify the certificate against.
    #[arg(long, default_value = "127.0.0.1")]
    server_name: String,
    /// Query file in dnsperf format (`name TYPE` per line).
    #[arg(long)]
    queries: PathBuf,
    /// Source addresses as FIRST/COUNT, e.g. 127.0.0.2/32; used in turn.
    #[arg(long)]
    sources: Option<String>,
    /// Source address of `probe` connections.
    #[arg(long, default_value = "127.0.0.1")]
    probe_source: Ipv4Addr,
    /// URL path of DNS over HTTPS.
    #[arg(long, default_value = "/dns-query")]
    path: String,
    /// Skip verifying the server's certificate and handshake signature
    /// (the server's work is the same), except on `probe` connections:
    /// with it a single client core can keep up with the server's full
    /// handshakes. A load generator's shortcut, never a client's.
    #[arg(long)]
    no_verify: bool,
    /// Deadline of every handshake and every batch of answers.
    #[arg(long, default_value_t = 20_000)]
    timeout_ms: u64,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Gencert { dir, names } => gencert(&dir, names),
    };
    if let Err(error) = result {
        eprintln!("tlsload: {error:#}");
        std::process::exit(1);
    }
}

fn gencert(dir: &std::path::Path, names: Vec<String>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let generated = rcgen::generate_simple_self_signed(names).context("rcgen")?;
    std::fs::write(dir.join("cert.pem"), generated.cert.pem())?;
    std::fs::write(dir.join("key.pem"), generated.signing_key.serialize_pem())?;
    Ok(())
}

/// Raises the soft descriptor limit to the hard one; returns both.
fn raise_nofile() -> (u64, u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    (limit.rlim_cur, limit.rlim_max)
}

fn parse_sources(spec: &str) -> Result<Vec<Ipv4Addr>> {
    let (first, count) = spec.split_once('/').context("--sources FIRST/COUNT")?;
    let first: Ipv4Addr = first.parse().context("--sources: first address")?;
    let count: u32 = count.parse().context("--sources: count")?;
    Ok((0..count).map(|k| Ipv4Addr::from(u32::from(first) + k)).collect())
}

fn client_config(ca: &std::path::Path, alpn: &[&[u8]], resume: bool, verify: bool) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))? {
        roots.add(certificate?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let mut config = if verify {
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerify(provider))).with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.resumption = if resume { Resumption::in_memory_sessions(4096) } else { Resumption::disabled() };
    Ok(Arc::new(config))
}

/// Accepts any certificate and handshake signature: see `--no-verify`.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

struct State {
    ctx: Arc<Ctx>,
    held: Vec<Conn>,
}

fn run(args: RunArgs) -> Result<()> {
    let (soft, hard) = raise_nofile();
    let text = std::fs::read_to_string(&args.queries).with_context(|| format!("reading {}", args.queries.display()))?;
    let queries = query::parse_query_file(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.queries.display()))?;
    let alpn: &[&[u8]] = match args.proto {
        Proto::Dot => &[],
        Proto::Doh => &[b"h2"],
    };
    let sources = args.sources.as_deref().map(parse_sources).transpose()?.unwrap_or_default();
    let uri: http::Uri = format!("https://{}{}", args.server, args.path).parse().context("DoH URI")?;
    let ctx = Arc::new(Ctx {
        server: args.server,
        proto: args.proto,
        name: ServerName::try_from(args.server_name.clone()).context("--server-name")?,
        tls_full: client_config(&args.ca, alpn, false, !args.no_verify)?,
        tls_resume: client_config(&args.ca, alpn, true, !args.no_verify)?,
        tls_verify: client_config(&args.ca, alpn, false, true)?,
        queries,
        sources,
        next_source: AtomicUsize::new(0),
        probe_source: Some(args.probe_source),
        timeout: Duration::from_millis(args.timeout_ms),
        uri,
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut state = State { ctx, held: Vec::new() };
    emit(json!({"cmd": "start", "nofile_soft": soft, "nofile_hard": hard, "rss_kib": rss_kib()}));
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(&command) = words.first() else { continue };
        let number = |i: usize| -> Result<f64> {
            words.get(i).with_context(|| format!("{command}: argument {i} missing"))?.parse::<f64>().context("a number")
        };
        let started = Instant::now();
        let result: Result<Value> = match command {
            "open" => number(1).and_then(|n| Ok((n, number(2)?))).map(|(n, c)| runtime.block_on(state.open(n as usize, c as usize))),
            "query" => Ok(runtime.block_on(state.query())),
            "load" => (|| Ok((number(1)?, number(2)? as usize, number(3)?)))()
                .and_then(|(secs, depth, rate)| runtime.block_on(state.load(secs, depth, rate))),
            "handshakes" => (|| Ok((number(1)?, number(2)? as usize)))().and_then(|(secs, workers)| {
                let resume = match words.get(3) {
                    Some(&"full") => false,
                    Some(&"resume") => true,
                    other => bail!("handshakes: full or resume, not {other:?}"),
                };
                runtime.block_on(state.handshakes(secs, workers, resume))
            }),
            "probe" => number(1).map(|n| runtime.block_on(state.probe(n as usize))),
            "close" => Ok(runtime.block_on(state.close())),
            "quit" => break,
            other => Err(anyhow::anyhow!("unknown command {other:?}")),
        };
        let mut out = result.unwrap_or_else(|error| json!({"error": format!("{error:#}")}));
        if let Value::Object(map) = &mut out {
            map.insert("cmd".into(), json!(command));
            map.insert("wall_s".into(), json!(started.elapsed().as_secs_f64()));
            map.insert("held".into(), json!(state.held.len()));
            map.insert("rss_kib".into(), json!(rss_kib()));
        }
        emit(out);
    }
    Ok(())
}

fn emit(value: Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}

impl State {
    /// Opens `n` connections, `concurrency` handshakes at a time.
    async fn open(&mut self, n: usize, concurrency: usize) -> Value {
        let stats = Arc::new(Handshakes::new());
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        let mut launched = 0;
        let mut negotiated = None;
        while launched < n || !tasks.is_empty() {
            while launched < n && tasks.len() < concurrency.max(1) {
                let ctx = self.ctx.clone();
                tasks.spawn(async move {
                    let source = ctx.take_source();
                    conn::open(&ctx, &ctx.tls_full, source).await
                });
                launched += 1;
            }
            match tasks.join_next().await {
                Some(Ok(Ok(opened))) => {
                    stats.done(opened.handshake, opened.handshake, opened.resumed);
                    negotiated.get_or_insert_with(|| json!({"version": opened.version, "suite": opened.suite, "alpn": opened.alpn}));
                    self.held.push(opened.conn);
                }
                Some(Ok(Err(error))) => stats.error(&error),
                Some(Err(join)) => stats.error(&anyhow::anyhow!("task: {join}")),
                None => {}
            }
        }
        let open_s = started.elapsed().as_secs_f64();
        let mut out = stats.json();
        out["open_s"] = json!(open_s);
        out["negotiated"] = negotiated.unwrap_or(Value::Null);
        out
    }

    /// One query on every held connection; those that fail are dropped.
    async fn query(&mut self) -> Value {
        let answers = Arc::new(Answers::new(None));
        let total = self.held.len();
        let (kept, dead) = self
            .each_connection(&answers, |ctx, mut conn, index, answers| async move {
                let mut next = index * 7919;
                match conn.batch(&ctx, &mut next, 1, &answers).await {
                    Ok(()) => Some(conn),
                    Err(error) => {
                        answers.error(&error);
                        None
                    }
                }
            })
            .await;
        let mut out = answers.json();
        out["connections"] = json!(total);
        out["alive"] = json!(kept);
        out["dead"] = json!(dead);
        out
    }

    /// Pipelined load on every held connection; see the crate docs.
    async fn load(&mut self, secs: f64, depth: usize, rate: f64) -> Result<Value> {
        if !(1..=64).contains(&depth) || secs <= 0.0 || rate < 0.0 {
            bail!("load: SECONDS > 0, DEPTH 1..=64, RATE >= 0");
        }
        let n = self.held.len().max(1);
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(secs);
        let answers = Arc::new(Answers::new(Some(deadline)));
        // Each connection sends one batch per `interval`, the connections'
        // batches spread evenly over it.
        let interval = (rate > 0.0).then(|| Duration::from_secs_f64(n as f64 * depth as f64 / rate));
        // Batches each connection completed before the deadline: how evenly
        // the server shares itself among its connections.
        let per_conn = Arc::new(std::sync::Mutex::new(Vec::with_capacity(n)));
        let counts = per_conn.clone();
        let (kept, dead) = self
            .each_connection(&answers, move |ctx, mut conn, index, answers| {
                let counts = counts.clone();
                async move {
                    let mut next_query = index.wrapping_mul(7919);
                    let mut next_send = interval.map(|every| started + every.mul_f64(index as f64 / n as f64));
                    let mut batches = 0u64;
                    let result = loop {
                        if let (Some(at), Some(every)) = (next_send.as_mut(), interval) {
                            if *at >= deadline {
                                break Some(conn);
                            }
                            tokio::time::sleep_until((*at).into()).await;
                            *at += every;
                        }
                        if Instant::now() >= deadline {
                            break Some(conn);
                        }
                        if let Err(error) = conn.batch(&ctx, &mut next_query, depth, &answers).await {
                            answers.error(&error);
                            break None;
                        }
                        if Instant::now() <= deadline {
                            batches += 1;
                        }
                    };
                    counts.lock().expect("counts lock").push(batches);
                    result
                }
            })
            .await;
        let mut counts = std::mem::take(&mut *per_conn.lock().expect("counts lock"));
        counts.sort_unstable();
        let at = |q: f64| counts.get(((counts.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or(0);
        let (sum, squares) = counts.iter().fold((0f64, 0f64), |(s, q), &c| (s + c as f64, q + (c as f64) * (c as f64)));
        // Jain's fairness index: 1 when every connection got the same.
        let jain = if squares > 0.0 { sum * sum / (counts.len() as f64 * squares) } else { 0.0 };
        let run_s = started.elapsed().as_secs_f64();
        let mut out = answers.json();
        let in_window = out["answered_in_window"].as_u64().unwrap_or(0);
        out["qps"] = json!(in_window as f64 / secs);
        out["run_s"] = json!(run_s);
        out["connections"] = json!(n);
        out["alive"] = json!(kept);
        out["dead"] = json!(dead);
        out["depth"] = json!(depth);
        out["rate"] = json!(rate);
        out["batches_per_conn"] = json!({
            "min": at(0.0), "p01": at(0.01), "p10": at(0.10), "p50": at(0.50), "p90": at(0.90), "max": at(1.0),
            "jain": (jain * 1000.0).round() / 1000.0,
        });
        Ok(out)
    }

    /// Runs `work` on every held connection at once; keeps those it hands
    /// back. Returns (kept, dropped).
    async fn each_connection<Work, Fut>(&mut self, answers: &Arc<Answers>, work: Work) -> (usize, usize)
    where
        Work: Fn(Arc<Ctx>, Conn, usize, Arc<Answers>) -> Fut,
        Fut: Future<Output = Option<Conn>> + Send + 'static,
    {
        let mut tasks = JoinSet::new();
        for (index, conn) in self.held.drain(..).enumerate() {
            tasks.spawn(work(self.ctx.clone(), conn, index, answers.clone()));
        }
        let mut dead = 0;
        while let Some(result) = tasks.join_next().await {
            match result {
                Ok(Some(conn)) => self.held.push(conn),
                _ => dead += 1,
            }
        }
        (self.held.len(), dead)
    }

    /// `workers` loops of: connect, handshake, one query, close.
    async fn handshakes(&mut self, secs: f64, workers: usize, resume: bool) -> Result<Value> {
        let stats = Arc::new(Handshakes::new());
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(secs);
        let mut tasks = JoinSet::new();
        for _ in 0..workers.max(1) {
            let (ctx, stats) = (self.ctx.clone(), stats.clone());
            tasks.spawn(async move {
                // Each worker is a client of its own, with its own session
                // cache: one shared cache would hold too few tickets for
                // many concurrent workers (rustls keeps 8 per server name).
                let config = if resume {
                    let mut own = (*ctx.tls_resume).clone();
                    own.resumption = Resumption::in_memory_sessions(16);
                    Arc::new(own)
                } else {
                    ctx.tls_full.clone()
                };
                while Instant::now() < deadline {
                    let source = ctx.take_source();
                    if let Err(error) = once(&ctx, &config, source, &stats).await {
                        stats.error(&error);
                        // A refused or reset connection must not spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        let run_s = started.elapsed().as_secs_f64();
        let mut out = stats.json();
        out["per_s"] = json!(out["done"].as_u64().unwrap_or(0) as f64 / run_s);
        out["run_s"] = json!(run_s);
        out["workers"] = json!(workers);
        out["mode"] = json!(if resume { "resume" } else { "full" });
        Ok(out)
    }

    /// `n` fresh connections, one after another, each a full handshake and
    /// one query, from the probe source address.
    async fn probe(&mut self, n: usize) -> Value {
        let stats = Handshakes::new();
        for _ in 0..n {
            if let Err(error) = once(&self.ctx, &self.ctx.tls_verify, self.ctx.probe_source, &stats).await {
                stats.error(&error);
            }
        }
        stats.json()
    }

    async fn close(&mut self) -> Value {
        let n = self.held.len();
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        for conn in self.held.drain(..) {
            tasks.spawn(conn.close());
        }
        while tasks.join_next().await.is_some() {}
        json!({"closed": n, "close_s": started.elapsed().as_secs_f64()})
    }
}

/// One connection: connect, handshake, one query (one request over
/// HTTP/2), close. Recorded in `stats`.
async fn once(ctx: &Ctx, config: &Arc<ClientConfig>, source: Option<Ipv4Addr>, stats: &Handshakes) -> Result<()> {
    let started = Instant::now();
    let opened = conn::open(ctx, config, source).await?;
    let mut conn = opened.conn;
    let answers = Answers::new(None);
    let mut next = ctx.next_source.load(std::sync::atomic::Ordering::Relaxed);
    conn.batch(ctx, &mut next, 1, &answers).await?;
    let total = started.elapsed();
    conn.close().await;
    stats.done(opened.handshake, total, opened.resumed);
    Ok(())
}
