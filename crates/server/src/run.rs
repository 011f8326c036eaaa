//! Starting and stopping a server: sockets, threads, signals, reload.

use std::sync::Arc;
use std::time::Duration;

use pharos_answer::SharedSnapshot;
use pharos_model::ControlError;
use pharos_transport::dnstap::{self, DnstapError};
use pharos_transport::{StartError, Tls, Transports};

use crate::api::{self, ApiStartError, ApiThread};
use crate::check::{self, Depth};
use crate::config::{Config, ConfigError, RrlError};
use crate::driver::secrets::CookieSecretError;
use crate::driver::shell::{OpenError, SecretError};
use crate::driver::thread::{self, ControlThread};
use crate::privileges::{PrivilegeError, drop_privileges};
use crate::service_manager;
use crate::updates::UpdateApplier;
use pharos_wire::causes;

/// Why the server cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Token(#[from] SecretError),
    #[error(transparent)]
    Cookies(#[from] CookieSecretError),
    #[error("opening the control plane panicked")]
    Panicked(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Rrl(#[from] RrlError),
    #[error("cannot start the control thread")]
    ControlThread(#[source] std::io::Error),
    #[error(transparent)]
    Api(#[from] ApiStartError),
    #[error(transparent)]
    Dnstap(#[from] DnstapError),
    #[error(transparent)]
    Transports(#[from] StartError),
    /// The signals it stops or reloads on cannot be waited for.
    #[error(transparent)]
    Signals(std::io::Error),
    #[error(transparent)]
    Privileges(#[from] PrivilegeError),
}

/// A running server: its control plane, snapshot and transports.
pub struct Server {
    pub config: Config,
    pub control: ControlThread,
    pub snapshot: SharedSnapshot,
    pub transports: Transports,
    api: Option<ApiThread>,
    dnstap: Option<dnstap::Running>,
}

impl Server {
    /// Loads the zones, binds every address and starts serving. Must be
    /// called inside a tokio runtime (TCP runs on it).
    pub async fn start(config: Config) -> Result<Server, ServerError> {
        config.validate()?;
        // Opening the store and reading the files blocks: not on an async
        // worker (and a PostgreSQL store's own runtime cannot wait inside
        // this one).
        let opening = config.clone();
        let (mut shell, token, cookies) = tokio::task::spawn_blocking(move || -> Result<_, ServerError> {
            let mut shell = thread::open(opening)?;
            let token = shell.config().control.listen.map(|_| api::token(&mut shell)).transpose()?;
            let cookies = shell.config().cookies.map(|cookies| crate::driver::secrets::cookie_secret(&mut shell, cookies)).transpose()?;
            Ok((shell, token, cookies))
        })
        .await
        .map_err(ServerError::Panicked)??;
        shell.start_fast_path();
        let snapshot = shell.snapshot().clone();
        let observation = shell.published().observation.clone();
        let window = Duration::from_millis(config.control.commit_window_ms);
        let limits = api::UdpLimits { queries: config.udp_rate_limiter(), responses: config.response_rate_limit()? };
        let control = ControlThread::start(shell, window).map_err(ServerError::ControlThread)?;
        let api = match (config.control.listen, token) {
            (Some(address), Some(token)) => Some(api::ApiListener { address, token, tls: api_tls(&config)? }),
            _ => None,
        };
        let listeners = api::Listeners { api, metrics: config.metrics.listen };
        let api = api::start(listeners, control.clone(), limits.clone())?;
        // Logging before the first query can arrive.
        let dnstap = match &config.dnstap {
            Some(dnstap) => Some(observation.query_log.start(dnstap.settings()?)?),
            None => None,
        };
        let mut transport = config.transport(limits.queries, limits.responses, cookies)?;
        let applier = UpdateApplier::new(control.clone(), tokio::runtime::Handle::current(), &config);
        transport.updates = Some(Arc::new(applier));
        let transports = Transports::start(&transport, &snapshot, &observation).await?;
        // Every port is bound and the fast path attached: root is no
        // longer needed.
        drop_privileges(&config)?;
        Ok(Server { config, control, snapshot, transports, api, dnstap })
    }

    /// Re-reads the config and zone files and swaps the result in whole.
    /// On any error the old state keeps serving and the error is returned.
    /// Loading runs on the control thread, away from the TCP workers.
    pub async fn reload(&self) -> Result<(), ControlError> {
        self.control.reload().await
    }

    /// Stops the control API and the UDP workers, and waits for the
    /// workers; then hands the query log's last exchanges to its reader.
    pub fn stop(self) {
        if let Some(api) = self.api {
            api.stop();
        }
        self.transports.stop();
        if let Some(dnstap) = self.dnstap {
            dnstap.stop();
        }
    }
}

/// The acceptor of the control API with `[control] tls`: the certificate
/// of `[tls]`, the operator's or the one generated and kept.
fn api_tls(config: &Config) -> Result<Option<tokio_rustls::TlsAcceptor>, ServerError> {
    if !config.control.tls {
        return Ok(None);
    }
    // Only the certificate's settings matter here, not the rate limits.
    let tls = Tls::load(&config.transport(None, None, None)?).map_err(StartError::from)?;
    Ok(Some(tls.http1_acceptor().map_err(StartError::from)?))
}

/// The longest a stop waits for open connections to finish what their
/// clients sent.
const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// Runs a server until SIGINT or SIGTERM, reloading zones on SIGHUP, and
/// tells the service manager each step (see `service_manager`).
pub async fn run(config: Config) -> Result<(), ServerError> {
    use tokio::signal::unix::{SignalKind, signal};
    // Handlers first: a SIGHUP that arrived once queries are answered but
    // before its handler existed would kill the process.
    let mut hangup = signal(SignalKind::hangup()).map_err(ServerError::Signals)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(ServerError::Signals)?;
    let server = Server::start(config).await?;
    let zone_count = server.snapshot.load().zones.zones().len();
    tracing::info!(listen = ?server.config.server.listen, zones = zone_count, threads = server.config.threads(), "pharos serving");
    service_manager::ready(&format!("serving {zone_count} zones on {:?}", server.config.server.listen));
    if let Some(period) = service_manager::watchdog_period() {
        tokio::spawn(service_manager::watchdog(server.control.clone(), server.transports.heartbeats(), period));
    }
    // Signed zones are signed again, with a fresh window, by a reload.
    let refresh = std::time::Duration::from_secs(server.config.dnssec.refresh_seconds.into());
    let mut resign = tokio::time::interval_at(tokio::time::Instant::now() + refresh, refresh);
    let signs = server.config.all_zones().any(|zone| zone.dnssec);
    loop {
        tokio::select! {
            _ = hangup.recv() => reload_for_the_operator(&server).await,
            _ = resign.tick(), if signs => match server.reload().await {
                Ok(()) => tracing::info!("signed zones signed again"),
                Err(error) => tracing::error!("signing again failed, old signatures still serving: {}", causes(&error)),
            },
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    tracing::info!("stopping: answering the queries in flight");
    service_manager::stopping();
    let left = server.transports.drain(DRAIN_DEADLINE).await;
    if left > 0 {
        tracing::warn!("{left} connection(s) still open after {DRAIN_DEADLINE:?} of draining: closed");
    }
    server.stop();
    Ok(())
}

/// A reload asked for by SIGHUP: the service manager hears it begin, and
/// its outcome as the status; a refused one leaves the old state serving.
async fn reload_for_the_operator(server: &Server) {
    service_manager::reloading();
    if let Some(problems) = problems_before_reload(server).await {
        tracing::error!("reload failed, old configuration still serving: {}", problems.join("; "));
        let status = format!("reload refused, the old configuration still serving: {} error(s): {}", problems.len(), problems.join("; "));
        return service_manager::ready(&status);
    }
    let status = match server.reload().await {
        Ok(()) => {
            tracing::info!("zones reloaded");
            format!("reloaded: serving {} zones", server.snapshot.load().zones.zones().len())
        }
        Err(error) => {
            let why = causes(&error);
            tracing::error!("reload failed, old zones still serving: {why}");
            format!("reload refused, the old configuration still serving: {why}")
        }
    };
    service_manager::ready(&status);
}

/// What `pharos check` finds in the configuration file now, before a
/// reload swaps it in (the reload itself would stop at the first); none if
/// the server has no file.
async fn problems_before_reload(server: &Server) -> Option<Vec<String>> {
    let path = server.config.source.clone()?;
    let report = tokio::task::spawn_blocking(move || check::check(&path, Depth::BeforeReload)).await;
    let problems = match report {
        Ok(report) => report.problem_lines(),
        Err(panicked) => vec![format!("the check panicked: {panicked}")],
    };
    (!problems.is_empty()).then_some(problems)
}
