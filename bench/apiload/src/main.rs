//! apiload: the update driver of `bench/storm`.
//!
//! Sends the lines of `--bodies` (line i is upload number `--first-k` + i)
//! as paced HTTP/1.1 requests over `--connections` keep-alive connections:
//! upload i is due at start + i / `--rate`, and a connection takes the next
//! due upload once its previous one is answered. It runs on one thread
//! (pin it with taskset) so that it costs the core it shares with the DNS
//! load generator little; the Python driver it replaces spent about 100 µs
//! of CPU per upload there.
//!
//! Prints `ready` once every connection is open, then at the end one JSON
//! line: counts, achieved rate, latency percentiles, schedule lag, its own
//! CPU time, and the uploads whose requests overlapped the last one
//! acknowledged (any of them may be the one the server applied last).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// Error messages kept in the result as samples.
const ERROR_SAMPLES: usize = 5;

#[derive(Parser)]
#[command(name = "apiload", version, about = "Paced HTTP/1.1 uploads over keep-alive connections (bench/storm)")]
struct Args {
    /// The control API, IP:PORT.
    #[arg(long)]
    api: SocketAddr,
    /// Bearer token.
    #[arg(long)]
    token: String,
    /// Request path, e.g. /v1/services/svc.bench.test/probabilities.
    #[arg(long)]
    path: String,
    #[arg(long, default_value = "PUT")]
    method: Method,
    /// File of JSON bodies, one per line, in upload order.
    #[arg(long)]
    bodies: PathBuf,
    /// Uploads per second.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Keep-alive connections, each with one request in flight at most.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Seconds of uploads.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Number of the upload on the first line.
    #[arg(long, default_value_t = 1)]
    first_k: u64,
    /// Seconds to wait for one reply.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// The HTTP status that counts as success (404 for bench/storm's
    /// HTTP-only control, which uploads to a service that does not exist).
    #[arg(long, default_value_t = 200)]
    expect_status: u16,
}

/// One answered upload.
struct Upload {
    k: u64,
    due: Instant,
    sent: Instant,
    acked: Instant,
    status: u16,
}

/// What every connection shares: the uploads, the schedule, the results.
struct Plan {
    args: Args,
    bodies: Vec<Bytes>,
    start: Instant,
    /// Uploads in the run: upload i is due at start + i / rate.
    planned: usize,
    next: AtomicUsize,
    answered: Mutex<Vec<Upload>>,
    /// Replies with another status than the one expected.
    refused: Mutex<Vec<String>>,
    /// Requests with no reply at all.
    failed: Mutex<Vec<String>>,
    /// Connections that could not be opened again after one failed.
    reconnects_failed: Mutex<Vec<String>>,
}

impl Plan {
    /// The next upload to send and when it is due, while the run lasts.
    fn take(&self) -> Option<(usize, Instant)> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.planned).then(|| (index, self.start + Duration::from_secs_f64(index as f64 / self.args.rate)))
    }

    fn request(&self, index: usize) -> Result<Request<Full<Bytes>>> {
        Ok(Request::builder()
            .method(self.args.method.clone())
            .uri(&self.args.path)
            .header(HOST, self.args.api.to_string())
            .header(AUTHORIZATION, format!("Bearer {}", self.args.token))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(self.bodies[index].clone()))?)
    }

    fn fail(&self, message: String) {
        self.failed.lock().unwrap().push(message);
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(args.rate > 0.0 && args.duration > 0.0 && args.connections > 0) {
        bail!("--rate, --duration and --connections must be positive");
    }
    let bodies = read_bodies(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(run(args, bodies))?;
    println!("{result}");
    Ok(())
}

/// One body per line; there must be one for every upload the run can send.
fn read_bodies(args: &Args) -> Result<Vec<Bytes>> {
    let text = std::fs::read_to_string(&args.bodies).with_context(|| format!("cannot read {}", args.bodies.display()))?;
    let bodies: Vec<Bytes> = text.lines().map(|line| Bytes::copy_from_slice(line.as_bytes())).collect();
    let planned = planned(args);
    if bodies.len() < planned {
        bail!("{} holds {} bodies; {planned} uploads are planned", args.bodies.display(), bodies.len());
    }
    Ok(bodies)
}

/// Uploads due within the run: those with i / rate < duration.
fn planned(args: &Args) -> usize {
    (args.rate * args.duration).ceil() as usize
}

async fn run(args: Args, bodies: Vec<Bytes>) -> Result<Value> {
    let mut connections = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        connections.push(connect(args.api).await?);
    }
    println!("ready");
    let cpu_before = cpu_seconds();
    let start = Instant::now() + Duration::from_millis(5);
    let plan = Arc::new(Plan {
        planned: planned(&args),
        args,
        bodies,
        start,
        next: AtomicUsize::new(0),
        answered: Mutex::default(),
        refused: Mutex::default(),
        failed: Mutex::default(),
        reconnects_failed: Mutex::default(),
    });
    let mut drivers = JoinSet::new();
    for connection in connections {
        drivers.spawn(drive(connection, plan.clone()));
    }
    drivers.join_all().await;
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    Ok(report(&plan, elapsed, cpu))
}

async fn connect(api: SocketAddr) -> Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(api).await.with_context(|| format!("cannot connect to {api}"))?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// Sends due uploads on one connection, one at a time, until the run ends;
/// a connection that fails is replaced before the next upload.
async fn drive(mut connection: SendRequest<Full<Bytes>>, plan: Arc<Plan>) {
    let timeout = Duration::from_secs_f64(plan.args.timeout);
    while let Some((index, due)) = plan.take() {
        tokio::time::sleep_until(due.into()).await;
        let k = plan.args.first_k + index as u64;
        let sent = Instant::now();
        match tokio::time::timeout(timeout, upload(&plan, &mut connection, index)).await {
            Ok(Ok((status, body))) => {
                if status != plan.args.expect_status {
                    plan.refused
                        .lock()
                        .unwrap()
                        .push(format!("k={k}: HTTP {status} {}", String::from_utf8_lossy(&body[..body.len().min(200)])));
                }
                plan.answered.lock().unwrap().push(Upload { k, due, sent, acked: Instant::now(), status });
            }
            Ok(Err(error)) => plan.fail(format!("k={k}: {error:#}")),
            Err(_) => plan.fail(format!("k={k}: no reply in {timeout:?}")),
        }
        if connection.is_closed() {
            match connect(plan.args.api).await {
                Ok(fresh) => connection = fresh,
                Err(error) => return plan.reconnects_failed.lock().unwrap().push(format!("cannot reconnect: {error:#}")),
            }
        }
    }
}

async fn upload(plan: &Plan, connection: &mut SendRequest<Full<Bytes>>, index: usize) -> Result<(u16, Bytes)> {
    connection.ready().await?;
    let response = connection.send_request(plan.request(index)?).await?;
    let status = response.status().as_u16();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

fn report(plan: &Plan, elapsed: f64, cpu: f64) -> Value {
    let args = &plan.args;
    let answered = plan.answered.lock().unwrap();
    let failed = plan.failed.lock().unwrap();
    let refused = plan.refused.lock().unwrap();
    let reconnects_failed = plan.reconnects_failed.lock().unwrap();
    let errors: Vec<&String> = refused.iter().chain(failed.iter()).chain(reconnects_failed.iter()).collect();
    let mut ok: Vec<&Upload> = answered.iter().filter(|upload| upload.status == args.expect_status).collect();
    ok.sort_by_key(|upload| upload.acked);
    let millis = |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64() * 1e3;
    let latency = percentiles(ok.iter().map(|upload| millis(upload.sent, upload.acked)).collect());
    let lag = percentiles(answered.iter().map(|upload| millis(upload.due, upload.sent)).collect());
    let mut statuses = BTreeMap::<String, usize>::new();
    for upload in answered.iter() {
        *statuses.entry(upload.status.to_string()).or_default() += 1;
    }
    let last = ok.last();
    // Any upload whose request overlapped the last acknowledged one may
    // have been the one applied last.
    let mut last_candidates: Vec<u64> =
        ok.iter().filter(|upload| last.is_some_and(|last| upload.acked >= last.sent)).map(|upload| upload.k).collect();
    last_candidates.sort_unstable();
    let span = last.map(|last| last.acked.saturating_duration_since(plan.start).as_secs_f64()).unwrap_or(0.0);
    json!({
        "planned": plan.planned,
        "attempted": answered.len() + failed.len(),
        "ok": ok.len(),
        "errors": errors.len(),
        "error_samples": errors.iter().take(ERROR_SAMPLES).collect::<Vec<_>>(),
        "statuses": statuses,
        "rate_asked": args.rate,
        "duration_s": args.duration,
        "connections": args.connections,
        "elapsed_s": elapsed,
        "achieved_per_s": if span > 0.0 { ok.len() as f64 / span } else { 0.0 },
        "ok_per_s_of_duration": ok.len() as f64 / args.duration,
        "latency_ms": latency,
        "lag_ms": lag,
        "cpu_s": cpu,
        "cpu_pct": 100.0 * cpu / elapsed,
        "body_bytes": plan.bodies.first().map_or(0, Bytes::len),
        "last_k": last.map(|last| last.k),
        "last_candidates": last_candidates,
    })
}

/// p50, p90, p99, max and mean of `values`; quantile q is the value at
/// rank round((n - 1) q) of the sorted values.
fn percentiles(mut values: Vec<f64>) -> Value {
    values.sort_by(f64::total_cmp);
    let at = |quantile: f64| values.get(((values.len().max(1) - 1) as f64 * quantile).round() as usize).copied();
    let mean = (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    json!({ "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": values.last(), "mean": mean })
}

/// User and system CPU time of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one plain struct that we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let summary = percentiles((1..=101).rev().map(f64::from).collect());
        assert_eq!(summary["p50"], 51.0);
        assert_eq!(summary["p90"], 91.0);
        assert_eq!(summary["p99"], 100.0);
        assert_eq!(summary["max"], 101.0);
        assert_eq!(summary["mean"], 51.0);
        assert_eq!(percentiles(Vec::new())["p50"], Value::Null);
    }

    /// Answers HTTP/1.1 requests on one keep-alive connection: 200, or 422
    /// when the body holds "refuse".
    async fn answer(mut stream: TcpStream) {
        let mut buffer = Vec::new();
        loop {
            let Some(head_end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") else {
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => buffer.extend_from_slice(&chunk[..read]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
            let length: usize =
                head.lines().find_map(|line| line.strip_prefix("content-length:")).map_or(0, |value| value.trim().parse().unwrap());
            while buffer.len() < head_end + 4 + length {
                let mut chunk = [0u8; 4096];
                let read = stream.read(&mut chunk).await.unwrap();
                assert!(read > 0, "the client closed in the middle of a request");
                buffer.extend_from_slice(&chunk[..read]);
            }
            let body: Vec<u8> = buffer.drain(..head_end + 4 + length).skip(head_end + 4).collect();
            let status = if String::from_utf8_lossy(&body).contains("refuse") { "422 Unprocessable Entity" } else { "200 OK" };
            stream.write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes()).await.unwrap();
        }
    }

    #[tokio::test]
    async fn paced_uploads_are_counted_and_the_last_acknowledged_is_named() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream));
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let bodies = dir.path().join("bodies.jsonl");
        let lines: Vec<String> =
            (0..30).map(|index| if index == 7 { r#"{"refuse":1}"#.into() } else { format!(r#"{{"n":{index}}}"#) }).collect();
        std::fs::write(&bodies, lines.join("\n")).unwrap();
        let api = address.to_string();
        let bodies_arg = bodies.to_str().unwrap();
        let argv = ["apiload", "--api", &api, "--token", "t", "--path", "/x", "--bodies", bodies_arg, "--rate", "200", "--duration", "0.1"];
        let args = Args::parse_from(argv.iter().chain(&["--connections", "3", "--first-k", "100"]));
        let bodies = read_bodies(&args).unwrap();
        let result = run(args, bodies).await.unwrap();
        assert_eq!(result["planned"], 20);
        assert_eq!(result["attempted"], 20);
        assert_eq!(result["ok"], 19);
        assert_eq!(result["errors"], 1);
        assert!(result["error_samples"][0].as_str().unwrap().starts_with("k=107: HTTP 422"), "{result}");
        assert_eq!(result["statuses"], json!({ "200": 19, "422": 1 }));
        // The last upload due is sent last, so whichever was acknowledged
        // last, it overlapped it.
        let candidates = result["last_candidates"].as_array().unwrap();
        assert!(candidates.contains(&json!(119)) && candidates.contains(&result["last_k"]), "{result}");
    }

    #[test]
    fn too_few_bodies_for_the_plan_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let bodies = dir.path().join("bodies.jsonl");
        std::fs::write(&bodies, "{}\n{}\n").unwrap();
        let args =
            Args::parse_from(["apiload", "--api", "127.0.0.1:1", "--token", "t", "--path", "/x", "--bodies", bodies.to_str().unwrap()]);
        let error = read_bodies(&args).unwrap_err().to_string();
        assert!(error.contains("holds 2 bodies; 5000 uploads are planned"), "{error}");
    }
}
