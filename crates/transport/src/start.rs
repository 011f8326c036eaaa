//! Starting every transport the settings name: the listeners, the UDP
//! worker threads and the connection registry they share; and stopping
//! the threads.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pharos_answer::SharedSnapshot;

use crate::Observation;
use crate::certificate::CertificateError;
use crate::config::Settings;
use crate::descriptors::DescriptorError;
use crate::doq::EndpointError;
use crate::redirect::RedirectionError;
use crate::registry::Registry;
use crate::tcp::BindError;
use crate::tls::{Tls, TlsError};
use crate::udp::Lifeline;
use crate::{descriptors, doh, doq, dot, redirect, tcp, udp};

/// Worker numbers of the transports' random sources (see
/// [`Settings::worker_rng`]), clear of UDP's (counting up from 0) and TCP's
/// (counting down from `u64::MAX`).
const DOT_WORKERS: u64 = 1 << 60;
const DOH_WORKERS: u64 = 2 << 60;
const DOQ_WORKERS: u64 = 3 << 60;

/// The running transports' UDP worker threads, with their stop flag. The
/// tasks of the other transports, and of the connection registry they
/// share, run on the caller's tokio runtime as long as it does.
pub struct Transports {
    stop: Arc<AtomicBool>,
    /// The stream listeners' connections, drained at a stop.
    registry: Arc<Registry>,
    udp_workers: Vec<(JoinHandle<()>, Lifeline)>,
}

/// Why the transports cannot start, with the address or setting at fault.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Descriptors(#[from] DescriptorError),
    #[error(transparent)]
    Certificate(#[from] CertificateError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Redirection(#[from] RedirectionError),
    #[error("cannot listen on TCP {address}")]
    Tcp { address: SocketAddr, source: io::Error },
    #[error(transparent)]
    TcpFor(#[from] BindError),
    #[error("cannot listen on UDP {address}")]
    Udp { address: SocketAddr, source: io::Error },
    #[error("cannot listen for DNS over QUIC on UDP {address}")]
    Quic { address: SocketAddr, source: EndpointError },
    #[error("cannot start a UDP worker thread")]
    UdpThread(#[source] io::Error),
}

impl Transports {
    /// Binds every address of `settings` and starts serving `snapshot` on
    /// it, counting and logging into `observation`. Must be called inside a
    /// tokio runtime (all but UDP run on it).
    pub async fn start(settings: &Settings, snapshot: &SharedSnapshot, observation: &Arc<Observation>) -> Result<Transports, StartError> {
        let registry = Registry::new(descriptors::fit_connection_cap(settings)?, observation.clone());
        tokio::spawn(registry.clone().close_idle_connections());
        // Before UDP: once a server answers, all its listeners are there.
        // One certificate for every encrypted listener, loaded only if there is one.
        let needs_certificate = settings.tls.is_enabled() || !settings.http.https_listen.is_empty();
        let tls = needs_certificate.then(|| Tls::load(settings)).transpose()?;
        let serving = tcp::Serving {
            snapshot: snapshot.clone(),
            registry: registry.clone(),
            cookies: settings.cookies.clone(),
            proxies: settings.proxy_protocol_from.clone(),
            updates: settings.updates.clone(),
        };
        if let Some(tls) = tls.as_ref().filter(|_| settings.tls.is_enabled()) {
            start_encrypted(settings, tls, &serving, observation).await?;
        }
        redirect::start(settings, tls.as_ref(), snapshot, &registry).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut udp_workers: Vec<(JoinHandle<()>, Lifeline)> = Vec::new();
        for (index, &address) in settings.listen.iter().enumerate() {
            udp_workers.extend(start_udp(settings, address, index, snapshot, observation, &stop)?);
            let listener = tokio::net::TcpListener::bind(address).await.map_err(|source| StartError::Tcp { address, source })?;
            let rng = settings.worker_rng(u64::MAX - index as u64);
            tokio::spawn(tcp::serve(listener, serving.clone(), rng));
        }
        Ok(Transports { stop, registry, udp_workers })
    }

    /// Drains the stream transports: their listeners close, and each open
    /// connection answers what its client already sent, closing once it
    /// has been quiet for `DRAIN_QUIET`; waits for them all, up to
    /// `deadline`. Returns how many were still open then. UDP answers on
    /// meanwhile.
    pub async fn drain(&self, deadline: Duration) -> usize {
        self.registry.drain();
        let end = tokio::time::Instant::now() + deadline;
        let mut every = tokio::time::interval(Duration::from_millis(20));
        while self.registry.open_connections() > 0 && tokio::time::Instant::now() < end {
            every.tick().await;
        }
        self.registry.open_connections()
    }

    /// Stops the UDP workers and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for (worker, _) in self.udp_workers {
            let _ = worker.join();
        }
    }

    /// The UDP workers' heartbeats, for a watchdog.
    pub fn heartbeats(&self) -> Heartbeats {
        let turns = self.udp_workers.iter().map(|(_, lifeline)| lifeline.turns.clone()).collect();
        Heartbeats { turns, last_seen: Vec::new() }
    }
}

/// How long a UDP worker may go without turning its loop before a
/// watchdog calls it stuck: an idle one turns every `udp::STOP_CHECK`.
pub const STUCK_AFTER: Duration = Duration::from_secs(2);

/// What a watchdog sees of the UDP workers: each one's turns when they
/// last moved.
pub struct Heartbeats {
    turns: Vec<Arc<AtomicU64>>,
    last_seen: Vec<(u64, Instant)>,
}

impl Heartbeats {
    /// How many workers have not turned their loop for [`STUCK_AFTER`]
    /// by `now`.
    pub fn stuck(&mut self, now: Instant) -> usize {
        if self.last_seen.is_empty() {
            self.last_seen = self.turns.iter().map(|turns| (turns.load(Ordering::Relaxed), now)).collect();
        }
        let mut stuck = 0;
        for (turns, (seen, at)) in self.turns.iter().zip(&mut self.last_seen) {
            let current = turns.load(Ordering::Relaxed);
            if current != *seen {
                (*seen, *at) = (current, now);
            } else if now.duration_since(*at) >= STUCK_AFTER {
                stuck += 1;
            }
        }
        stuck
    }
}

/// Binds every DNS over TLS, HTTPS and QUIC listener of `settings` and
/// serves each in its own task.
async fn start_encrypted(settings: &Settings, tls: &Tls, serving: &tcp::Serving, observation: &Arc<Observation>) -> Result<(), StartError> {
    let dot = tls.dns_acceptor()?;
    for (index, &address) in (0..).zip(&settings.tls.listen) {
        let listener = tcp::bind(address, "DNS over TLS").await?;
        let rng = settings.worker_rng(DOT_WORKERS + index);
        tokio::spawn(dot::serve(listener, dot.clone(), serving.clone(), rng));
    }
    let doh = tls.https_acceptor()?;
    for (index, &address) in (0..).zip(&settings.tls.https_listen) {
        let listener = tcp::bind(address, "DNS over HTTPS").await?;
        let rng = settings.worker_rng(DOH_WORKERS + index);
        tokio::spawn(doh::serve(listener, doh.clone(), serving.clone(), rng));
    }
    let doq = tls.quic_config(observation)?;
    for (index, &address) in (0..).zip(&settings.tls.quic_listen) {
        let endpoint = doq::endpoint(address, doq.clone(), &settings.tcp).map_err(|source| StartError::Quic { address, source })?;
        tracing::info!(%address, "serving DNS over QUIC");
        let rng = settings.worker_rng(DOQ_WORKERS + index);
        tokio::spawn(doq::serve(endpoint, serving.snapshot.clone(), serving.registry.clone(), rng));
    }
    Ok(())
}

/// Starts the UDP workers of the `listen_index`th address.
fn start_udp(
    settings: &Settings,
    address: SocketAddr,
    listen_index: usize,
    snapshot: &SharedSnapshot,
    observation: &Arc<Observation>,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<(JoinHandle<()>, Lifeline)>, StartError> {
    let threads = settings.udp_threads;
    (0..threads)
        .map(|index| {
            let socket = udp::bind_socket(address).map_err(|source| StartError::Udp { address, source })?;
            let updates = match &settings.updates {
                Some(applier) => {
                    let replies = socket.try_clone().map_err(|source| StartError::Udp { address, source })?;
                    Some(udp::UdpUpdates { applier: applier.clone(), replies: Arc::new(replies.into()) })
                }
                None => None,
            };
            let (snapshot, observation) = (snapshot.clone(), observation.clone());
            let lifeline = Lifeline { stop: stop.clone(), ..Lifeline::default() };
            let worker_lifeline = lifeline.clone();
            let defences = udp::Defences {
                proxies: settings.proxy_protocol_from.clone(),
                queries: settings.udp_rate_limit.clone(),
                cookies: settings.cookies.clone(),
                responses: settings.response_rate_limit.clone(),
                updates,
            };
            let rng = settings.worker_rng((listen_index * threads + index) as u64);
            std::thread::Builder::new()
                .name(format!("udp-{index}"))
                .spawn(move || udp::serve(socket, snapshot, observation, rng, defences, worker_lifeline))
                .map(|worker| (worker, lifeline))
                .map_err(StartError::UdpThread)
        })
        .collect()
}
