//! Starting and stopping a server: sockets, threads, signals, reload.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use crate::api::ApiThread;
use crate::config::Config;
use crate::control::Control;
use crate::plane::ControlHandle;
use crate::registry::Registry;
use crate::snapshot::SharedSnapshot;
use crate::{api, descriptors, redirect, tcp, tls, udp};

/// A running server: its control plane, snapshot and UDP worker threads.
pub struct Server {
    pub config: Config,
    pub control: ControlHandle,
    pub snapshot: SharedSnapshot,
    pub registry: Arc<Registry>,
    stop: Arc<AtomicBool>,
    api: Option<ApiThread>,
    udp_workers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Loads the zones, binds every address and starts serving. Must be
    /// called inside a tokio runtime (TCP runs on it).
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        config.validate()?;
        let mut control = Control::open(config.clone())?;
        let snapshot = control.snapshot().clone();
        let token = config.control.listen.map(|_| api::token(&mut control)).transpose()?;
        let window = Duration::from_millis(config.control.commit_window_ms);
        let control = ControlHandle::start(control, window).context("cannot start the control thread")?;
        let api = match (config.control.listen, token) {
            (Some(address), Some(token)) => Some(api::start(address, control.clone(), token)?),
            _ => None,
        };
        let registry = Registry::new(descriptors::fit_connection_cap(&config)?);
        tokio::spawn(registry.clone().close_idle_connections());
        // Before UDP: once a server answers, all its listeners are there.
        tls::start(&config, &snapshot, &registry).await?;
        redirect::start(&config, &snapshot, &registry).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut udp_workers = Vec::new();
        for (index, &address) in config.server.listen.iter().enumerate() {
            udp_workers.extend(start_udp(&config, address, index, &snapshot, &stop)?);
            let listener = tokio::net::TcpListener::bind(address).await.with_context(|| format!("cannot listen on TCP {address}"))?;
            let rng = config.worker_rng(u64::MAX - index as u64);
            tokio::spawn(tcp::serve(listener, snapshot.clone(), registry.clone(), rng));
        }
        Ok(Server { config, control, snapshot, registry, stop, api, udp_workers })
    }

    /// Re-reads the config and zone files and swaps the result in whole.
    /// On any error the old state keeps serving and the error is returned.
    /// Loading runs on the control thread, away from the TCP workers.
    pub async fn reload(&self) -> anyhow::Result<()> {
        Ok(self.control.reload().await?)
    }

    /// Stops the control API and the UDP workers, and waits for the workers.
    pub fn stop(self) {
        if let Some(api) = self.api {
            api.stop();
        }
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.udp_workers {
            let _ = worker.join();
        }
    }
}

/// Starts the UDP workers of the `listen_index`th address.
fn start_udp(
    config: &Config,
    address: SocketAddr,
    listen_index: usize,
    snapshot: &SharedSnapshot,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let threads = config.threads();
    (0..threads)
        .map(|index| {
            let socket = udp::bind_socket(address).with_context(|| format!("cannot listen on UDP {address}"))?;
            let (snapshot, stop) = (snapshot.clone(), stop.clone());
            let rng = config.worker_rng((listen_index * threads + index) as u64);
            std::thread::Builder::new()
                .name(format!("udp-{index}"))
                .spawn(move || udp::serve(socket, snapshot, rng, stop))
                .context("cannot start a UDP worker thread")
        })
        .collect()
}

/// Runs a server until SIGINT or SIGTERM, reloading zones on SIGHUP.
pub async fn run(config: Config) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Handlers first: a SIGHUP that arrived once queries are answered but
    // before its handler existed would kill the process.
    let mut hangup = signal(SignalKind::hangup())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let server = Server::start(config).await?;
    let zone_count = server.snapshot.load().zones.zones().len();
    tracing::info!(listen = ?server.config.server.listen, zones = zone_count, threads = server.config.threads(), "pharos serving");
    loop {
        tokio::select! {
            _ = hangup.recv() => match server.reload().await {
                Ok(()) => tracing::info!("zones reloaded"),
                Err(error) => tracing::error!("reload failed, old zones still serving: {error:#}"),
            },
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    tracing::info!("stopping");
    server.stop();
    Ok(())
}
