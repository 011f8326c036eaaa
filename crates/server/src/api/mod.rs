//! The control API: HTTP/JSON over the control plane, described by the
//! OpenAPI document at `/openapi.json`, over plain HTTP or TLS (`listen`),
//! with bearer tokens: the bootstrap one and named ones with scopes
//! (`tokens`), checked and audited by `auth`.
//!
//! Every change goes through [`ControlShell::apply`]: it is validated whole,
//! committed to the store, and live in the snapshot before the reply.
//! MyXDNS's calls map to: Add_Region -> `POST /v1/regions` (returns the
//! id), Remove_Region -> `DELETE /v1/regions/{name}`, Update_Prob ->
//! `PUT /v1/services/{name}/probabilities` (the whole table at once).
//! Its Prometheus metrics are [`metrics`]'s; the operator's web page is
//! `dashboard`'s.

mod auth;
mod dashboard;
mod listen;
pub mod metrics;
mod tokens;
mod zones;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use pharos_control::edit;
use pharos_model::api::{DispatcherPick, ErrorReply, ExplainReply, MeasurementsKept, NewRegion, Probabilities, RegionAdded, ReplicaPatch};
use pharos_model::spec::{DataCenterSpec, RegionSpec, ServiceSpec, service_name};
use pharos_model::status::SecondaryStatus;
use pharos_model::{Change, ControlError};
use pharos_route::Family;
use pharos_route::latency::MeasurementSpec;
use pharos_transport::limit::SourceLimiter;
use pharos_transport::rrl::ResponseLimit;
use pharos_wire::types;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

use crate::api::auth::Author;
use crate::artemis::AddressView;
use crate::driver::keys::{KeyStep, KeyView};
use crate::driver::shell::{ControlShell, SecretError};
use crate::driver::thread::ControlThread;
use crate::observe::history::QueryHistory;

const OPENAPI: &str = include_str!("openapi.json");
const TOKEN_SETTING: &str = "api_token";

#[derive(Clone)]
struct Api {
    control: ControlThread,
    /// The SHA-256 of the bootstrap token (`admin`).
    bootstrap_sha256: Arc<str>,
    /// Sources failing to authenticate, slowed down.
    failures: Arc<auth::Failures>,
    /// The UDP rate limits, for what they refused.
    limits: UdpLimits,
    /// Queries per minute over the last hour.
    queries: Arc<QueryHistory>,
}

/// The rate limits of DNS over UDP that are configured, for the API and
/// the metrics to report what they refused.
#[derive(Debug, Clone, Default)]
pub struct UdpLimits {
    /// Per source address, on queries (`[fastpath.rate_limit]`).
    pub queries: Option<Arc<SourceLimiter>>,
    /// Per source network and response class (`[rrl]`).
    pub responses: Option<Arc<ResponseLimit>>,
}

/// An error reply: a status and `{"error": ..., "field": ...}`.
struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorReply { error: self.message, field: self.field })).into_response()
    }
}

impl From<ControlError> for ApiError {
    fn from(error: ControlError) -> ApiError {
        match error {
            ControlError::Invalid(spec) => {
                ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, message: spec.message, field: Some(spec.field) }
            }
            ControlError::NotFound(what) => ApiError { status: StatusCode::NOT_FOUND, message: format!("{what} not found"), field: None },
            ControlError::Conflict { field, message } => ApiError { status: StatusCode::CONFLICT, message, field: Some(field) },
            ControlError::Behind { .. } => {
                let message = format!("other nodes kept changing the state while this change was being made ({error}); try again");
                ApiError { status: StatusCode::CONFLICT, message, field: None }
            }
            ControlError::Store(_) | ControlError::Stopped => {
                ApiError { status: StatusCode::SERVICE_UNAVAILABLE, message: error.to_string(), field: None }
            }
            ControlError::Zones(_) => {
                ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, message: error.to_string(), field: Some("zone".into()) }
            }
        }
    }
}

fn bad_request(field: &str, message: impl Into<String>) -> ApiError {
    ApiError { status: StatusCode::BAD_REQUEST, message: message.into(), field: Some(field.into()) }
}

type Reply<T> = Result<T, ApiError>;

/// How long stopping waits for requests in flight to finish.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The control API's thread, serving until stopped.
pub struct ApiThread {
    stop: oneshot::Sender<()>,
    stopped: mpsc::Receiver<()>,
}

impl ApiThread {
    /// Stops accepting requests and waits (at most [`STOP_GRACE`]) for
    /// those in flight.
    pub fn stop(self) {
        let _ = self.stop.send(());
        if self.stopped.recv_timeout(STOP_GRACE) == Err(RecvTimeoutError::Timeout) {
            tracing::warn!("the control API still had requests in flight after {STOP_GRACE:?}; stopping without them");
        }
    }
}

/// What the API's thread serves: the control API (asking for its token),
/// the metrics listener (asking for none), or both.
pub struct Listeners {
    pub api: Option<ApiListener>,
    pub metrics: Option<SocketAddr>,
}

/// Where the control API listens, with the bootstrap token and, if it is
/// served over TLS, the acceptor that presents the certificate.
pub struct ApiListener {
    pub address: SocketAddr,
    pub token: String,
    pub tls: Option<TlsAcceptor>,
}

/// A listener bound, whether it speaks TLS, and what it serves.
type Served<L> = (L, Option<TlsAcceptor>, Router);

/// Binds the listeners and serves them on a thread of their own that
/// yields to the query threads (see `scheduling`) and keeps API requests
/// off the runtime that answers DNS over TCP, TLS and HTTPS. Returns once
/// they are listening, or why they cannot; `None` if there is none.
/// Why the control API or the metrics listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ApiStartError {
    /// `what` names the listener: the control API, or metrics.
    #[error("cannot listen for {what} on {address}")]
    Listen { what: &'static str, address: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Socket(std::io::Error),
    #[error("cannot start the control API's thread")]
    Thread(#[source] std::io::Error),
    #[error("the control API's thread ended while starting")]
    Ended(#[source] mpsc::RecvError),
    #[error("cannot build the control API's runtime")]
    Runtime(#[source] std::io::Error),
}

pub fn start(listeners: Listeners, control: ControlThread, limits: UdpLimits) -> Result<Option<ApiThread>, ApiStartError> {
    let mut served = Vec::new();
    // Marked before any request can ask for it.
    let queries = Arc::new(QueryHistory::starting_now(queries_received(&control)));
    let counted = control.clone();
    if let Some(ApiListener { address, token, tls }) = listeners.api {
        let listener = bind(address, if tls.is_some() { "the control API over TLS" } else { "the control API" })?;
        let bootstrap_sha256 = auth::sha256_hex(&token).into();
        let failures = Arc::default();
        let api = Api { control: control.clone(), bootstrap_sha256, failures, limits: limits.clone(), queries: queries.clone() };
        served.push((listener, tls, router(api)));
    }
    if let Some(address) = listeners.metrics {
        served.push((bind(address, "metrics")?, None, metrics_router(control, limits)));
    }
    if served.is_empty() {
        return Ok(None);
    }
    let (stop, stop_asked) = oneshot::channel();
    let (started, start_result) = mpsc::channel();
    let (stopped_sender, stopped) = mpsc::channel();
    std::thread::Builder::new()
        .name("api".into())
        .spawn(move || {
            crate::scheduling::yield_to_queries();
            let (runtime, served) = match runtime_listening_on(served) {
                Ok(listening) => listening,
                Err(error) => return drop(started.send(Err(error))),
            };
            let _ = started.send(Ok(()));
            runtime.spawn(async move { queries.mark_every_minute(|| queries_received(&counted)).await });
            runtime.block_on(serve_until(served, stop_asked));
            let _ = stopped_sender.send(());
        })
        .map_err(ApiStartError::Thread)?;
    start_result.recv().map_err(ApiStartError::Ended)??;
    Ok(Some(ApiThread { stop, stopped }))
}

/// A listener on `address` for `what`, logged.
fn bind(address: SocketAddr, what: &'static str) -> Result<std::net::TcpListener, ApiStartError> {
    let listener = std::net::TcpListener::bind(address).map_err(|source| ApiStartError::Listen { what, address, source })?;
    listener.set_nonblocking(true).map_err(ApiStartError::Socket)?;
    tracing::info!(%address, "{what} listening");
    Ok(listener)
}

/// Serves each router on its listener until `stop` is told.
async fn serve_until(served: Vec<Served<tokio::net::TcpListener>>, stop: oneshot::Receiver<()>) {
    let (stopping, stop_seen) = tokio::sync::watch::channel(false);
    let servers = served.into_iter().map(|(listener, tls, app)| {
        let mut stop_seen = stop_seen.clone();
        let shutdown = async move { drop(stop_seen.wait_for(|stopped| *stopped).await) };
        // The peer's address: failed authentications are counted per source.
        let app = app.into_make_service_with_connect_info::<listen::Peer>();
        match tls {
            Some(acceptor) => {
                let listener = listen::TlsListener::new(listener, acceptor);
                tokio::spawn(axum::serve(listener, app).with_graceful_shutdown(shutdown).into_future())
            }
            None => tokio::spawn(axum::serve(listener, app).with_graceful_shutdown(shutdown).into_future()),
        }
    });
    let servers: Vec<_> = servers.collect();
    let _ = stop.await;
    let _ = stopping.send(true);
    for server in servers {
        if let Ok(Err(error)) = server.await {
            tracing::error!(%error, "the control API stopped; DNS keeps being served");
        }
    }
}

/// A runtime for the calling thread, and the listeners registered with it.
fn runtime_listening_on(
    served: Vec<Served<std::net::TcpListener>>,
) -> Result<(tokio::runtime::Runtime, Vec<Served<tokio::net::TcpListener>>), ApiStartError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ApiStartError::Runtime)?;
    let served = {
        let _inside = runtime.enter();
        let registered = served.into_iter().map(|(listener, tls, app)| Ok((tokio::net::TcpListener::from_std(listener)?, tls, app)));
        registered.collect::<std::io::Result<_>>().map_err(ApiStartError::Socket)?
    };
    Ok((runtime, served))
}

/// The bootstrap token (`admin`, with every right): the configured one,
/// else the one kept in the store, else a new one (kept, and shown once).
/// Named tokens are made with it (`tokens`).
pub fn token(shell: &mut ControlShell) -> Result<String, SecretError> {
    if let Some(token) = shell.config().control.token.clone() {
        return Ok(token);
    }
    let (token, made_here) = shell.secret_setting(TOKEN_SETTING, 24)?;
    if made_here {
        eprintln!("pharos: control API token (shown once; kept in the store): {token}");
    }
    Ok(token)
}

fn router(api: Api) -> Router {
    let protected = Router::new()
        .route("/v1/datacenters", get(list_datacenters))
        .route("/v1/datacenters/{id}", get(get_datacenter).put(put_datacenter).delete(delete_datacenter))
        .route("/v1/regions", get(list_regions).post(add_region))
        .route("/v1/regions/{name}", get(get_region).put(put_region).delete(delete_region))
        .route("/v1/services", get(list_services))
        .route("/v1/services/{name}", get(get_service).put(put_service).delete(delete_service))
        .route("/v1/services/{name}/probabilities", put(put_probabilities))
        .route("/v1/services/{name}/replicas/{id}", axum::routing::patch(patch_replica))
        .route("/v1/explain", get(explain))
        .route("/v1/artemis", get(artemis_addresses))
        .route("/v1/export", get(export))
        .route("/v1/reload", post(reload))
        .route("/v1/measurements", post(post_measurements))
        .route("/v1/data", get(data_status))
        .route("/v1/health", get(health))
        .route("/v1/load", get(load_status))
        .route("/v1/fastpath", get(fastpath_status))
        .route("/v1/store", get(|State(api): State<Api>| async move { Json(api.control.store_status()) }))
        .route("/v1/split", get(|State(api): State<Api>| async move { Json(api.control.split()) }))
        .route(
            "/v1/queries",
            get(|State(api): State<Api>| async move { Json(json!({ "minutes": api.queries.per_minute(queries_received(&api.control)) })) }),
        )
        .route("/v1/events", get(|State(api): State<Api>| async move { Json(api.control.events()) }))
        .route("/v1/services/{name}/replicas/{id}/load", put(put_load))
        .route("/v1/rrl", get(rrl_status))
        .route("/v1/zones", get(zones::list).post(zones::make))
        .route("/v1/zones/{name}", get(zones::text).delete(zones::delete))
        .route("/v1/zones/{name}/rrsets", get(zones::rrsets).patch(zones::change_rrsets))
        .route("/v1/zones/{name}/keys", get(get_zone_keys).post(post_key_step))
        .route("/v1/secondary", get(|State(api): State<Api>| async move { Json(api.control.secondaries()) }))
        .route("/v1/zones/{name}/refresh", post(refresh_secondary))
        .route("/v1/tokens", get(tokens::list).post(tokens::make))
        .route("/v1/tokens/{name}", axum::routing::delete(tokens::revoke))
        .route("/metrics", get(|State(api): State<Api>, headers: HeaderMap| metrics(api.control, api.limits, headers)))
        .layer(middleware::from_fn_with_state(api.clone(), auth::require_token));
    Router::new()
        .route("/openapi.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) }))
        .merge(crate::api::dashboard::routes())
        .merge(protected)
        .with_state(api)
}

/// DNS queries received so far, over every transport.
fn queries_received(control: &ControlThread) -> u64 {
    control.observation().counters.totals().received.iter().sum()
}

/// The metrics listener's routes: `/metrics` and nothing else, without a token.
fn metrics_router(control: ControlThread, limits: UdpLimits) -> Router {
    Router::new().route("/metrics", get(move |headers: HeaderMap| metrics(control.clone(), limits.clone(), headers)))
}

/// One scrape: OpenMetrics to those that accept it (Prometheus asks for
/// it), the text format 0.0.4 to everyone else.
async fn metrics(control: ControlThread, limits: UdpLimits, headers: HeaderMap) -> Reply<Response> {
    let openmetrics = crate::api::metrics::render(&control, &limits).await?;
    let accepted = headers.get_all(header::ACCEPT).iter().filter_map(|value| value.to_str().ok());
    if accepted.into_iter().any(|value| value.contains("application/openmetrics-text")) {
        return Ok(([(header::CONTENT_TYPE, crate::api::metrics::OPENMETRICS)], openmetrics).into_response());
    }
    Ok(([(header::CONTENT_TYPE, crate::api::metrics::TEXT)], crate::api::metrics::to_text_format(&openmetrics)).into_response())
}

async fn list_datacenters(State(api): State<Api>) -> Json<Vec<DataCenterSpec>> {
    Json(api.control.state().datacenters.clone())
}

async fn get_datacenter(State(api): State<Api>, Path(id): Path<String>) -> Reply<Json<DataCenterSpec>> {
    let found = api.control.state().datacenters.iter().find(|datacenter| datacenter.id == id).cloned();
    found.map(Json).ok_or_else(|| ControlError::NotFound(format!("data center {id}")).into())
}

/// Queues `edit`, asked for by `author`, on the control plane; returns
/// once it is committed and live, with the changes it made.
async fn commit(
    api: &Api,
    Author(author): Author,
    edit: impl Fn(&pharos_model::State) -> Result<Vec<Change>, ControlError> + Send + 'static,
) -> Reply<Vec<Change>> {
    Ok(api.control.edit(author, Box::new(edit)).await?)
}

async fn put_datacenter(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Path(id): Path<String>,
    Json(datacenter): Json<DataCenterSpec>,
) -> Reply<StatusCode> {
    if datacenter.id != id {
        return Err(bad_request("id", format!("the body names data center {:?}, the path {id:?}", datacenter.id)));
    }
    commit(&api, author, move |_| Ok(vec![Change::PutDataCenter(datacenter.clone())])).await?;
    Ok(StatusCode::OK)
}

async fn delete_datacenter(State(api): State<Api>, Extension(author): Extension<Author>, Path(id): Path<String>) -> Reply<StatusCode> {
    commit(&api, author, move |state| edit::delete_datacenter(state, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_regions(State(api): State<Api>) -> Json<Vec<RegionSpec>> {
    Json(api.control.state().regions.clone())
}

async fn get_region(State(api): State<Api>, Path(name): Path<String>) -> Reply<Json<RegionSpec>> {
    let found = api.control.state().regions.iter().find(|region| region.name == name).cloned();
    found.map(Json).ok_or_else(|| ControlError::NotFound(format!("region {name}")).into())
}

/// MyXDNS Add_Region: the body names the region and its prefixes; the
/// reply carries the id it was given.
async fn add_region(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Json(new): Json<NewRegion>,
) -> Reply<(StatusCode, Json<RegionAdded>)> {
    let changes = commit(&api, author, move |state| edit::add_region(state, &new)).await?;
    let id = changes.iter().find_map(|change| if let Change::PutRegion(region) = change { Some(region.id) } else { None });
    Ok((StatusCode::CREATED, Json(RegionAdded { id })))
}

async fn put_region(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Path(name): Path<String>,
    Json(region): Json<RegionSpec>,
) -> Reply<StatusCode> {
    if region.name != name {
        return Err(bad_request("name", format!("the body names region {:?}, the path {name:?}", region.name)));
    }
    commit(&api, author, move |_| Ok(vec![Change::PutRegion(region.clone())])).await?;
    Ok(StatusCode::OK)
}

async fn delete_region(State(api): State<Api>, Extension(author): Extension<Author>, Path(name): Path<String>) -> Reply<StatusCode> {
    commit(&api, author, move |state| edit::delete_region(state, &name)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_services(State(api): State<Api>) -> Json<Vec<Arc<ServiceSpec>>> {
    Json(api.control.state().services.clone())
}

async fn get_service(State(api): State<Api>, Path(name): Path<String>) -> Reply<Json<ServiceSpec>> {
    Ok(Json(edit::find_service(&api.control.state(), &name)?.clone()))
}

async fn put_service(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Path(name): Path<String>,
    Json(service): Json<ServiceSpec>,
) -> Reply<StatusCode> {
    if service.name != name {
        return Err(bad_request("name", format!("the body names service {:?}, the path {name:?}", service.name)));
    }
    commit(&api, author, move |_| Ok(vec![Change::PutService(service.clone())])).await?;
    Ok(StatusCode::OK)
}

async fn delete_service(State(api): State<Api>, Extension(author): Extension<Author>, Path(name): Path<String>) -> Reply<StatusCode> {
    commit(&api, author, move |state| edit::delete_service(state, &name)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// MyXDNS Update_Prob: the whole table (table name -> replica -> entry).
async fn put_probabilities(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Path(name): Path<String>,
    Json(table): Json<Probabilities>,
) -> Reply<StatusCode> {
    // Refused here already if unknown, without queueing behind commits.
    if api.control.state().service(&name).is_none() {
        return Err(ControlError::NotFound(format!("service {name}")).into());
    }
    commit(&api, author, move |state| edit::set_probabilities(state, &name, &table)).await?;
    Ok(StatusCode::OK)
}

async fn patch_replica(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Path((name, id)): Path<(String, String)>,
    Json(patch): Json<ReplicaPatch>,
) -> Reply<StatusCode> {
    commit(&api, author, move |state| edit::patch_replica(state, &name, &id, &patch)).await?;
    Ok(StatusCode::OK)
}

#[derive(Deserialize)]
struct ExplainQuery {
    /// The service's name, or
    #[serde(default)]
    name: Option<String>,
    /// one of its Artemis service addresses: then the reply also says
    /// where the dispatcher would send this client's handshake.
    #[serde(default)]
    address: Option<IpAddr>,
    client: String,
    #[serde(default)]
    qtype: Option<String>,
}

async fn explain(State(api): State<Api>, Query(query): Query<ExplainQuery>) -> Reply<Json<ExplainReply>> {
    let (name, qtype) = match (query.name, query.address) {
        (Some(name), None) => (name, query.qtype.as_deref().unwrap_or("A").to_ascii_uppercase()),
        (None, Some(address)) if query.qtype.is_none() => {
            let artemis = api.control.artemis().ok_or_else(|| bad_request("address", "no [artemis] section: no service addresses"))?;
            let service =
                artemis.service_at(address).ok_or_else(|| ControlError::NotFound(format!("Artemis service address {address}")))?;
            (service.to_string(), if address.is_ipv4() { "A" } else { "AAAA" }.to_owned())
        }
        (None, Some(_)) => return Err(bad_request("qtype", "with an address, its family chooses the question")),
        _ => return Err(bad_request("name", "give a service name or an Artemis service address, one of them")),
    };
    let (family, qtype) = match qtype.as_str() {
        "A" => (Family::V4, types::A),
        "AAAA" => (Family::V6, types::AAAA),
        other => return Err(bad_request("qtype", format!("{other:?}: explain answers A or AAAA"))),
    };
    // A fixed seed: the explanation shows one draw, reproducibly.
    let mut rng = SmallRng::seed_from_u64(0);
    let snapshot = api.control.snapshot().load();
    let explained = crate::driver::shell::explain(&snapshot, &name, &query.client, family, &mut rng)?;
    let wire = service_name(&explained.service).map_err(|error| bad_request("name", error.to_string()))?;
    let fast_path = crate::tasks::fastpath::explain(&api.control.fastpath(), &snapshot, &wire, qtype);
    let artemis = query.address.map(|service_address| {
        let chosen = explained.answer.first();
        let datacenter = chosen.and_then(|(id, _)| {
            let replicas = &snapshot.routes.service(&wire)?.replicas;
            replicas.iter().find(|replica| &replica.id == id)?.datacenter.clone()
        });
        DispatcherPick {
            service_address,
            service: name,
            replica: chosen.map(|(id, _)| id.clone()),
            replica_address: chosen.map(|(_, address)| address.clone()),
            datacenter,
        }
    });
    let same_name = |name: &str| name.trim_end_matches('.').eq_ignore_ascii_case(explained.service.trim_end_matches('.'));
    let health = api.control.health().await?.into_iter().filter(|replica| same_name(&replica.service)).collect();
    Ok(Json(ExplainReply { explained, fast_path, artemis, health }))
}

/// The Address Manager's allocation of the `[artemis]` services' addresses.
async fn artemis_addresses(State(api): State<Api>) -> Reply<Json<AddressView>> {
    let artemis = api.control.artemis().ok_or_else(|| ControlError::NotFound("an [artemis] section in the config".into()))?;
    Ok(Json(artemis.view()))
}

/// The live regions and services in the config file's format: arrays of
/// tables only, never a bare key (an empty list is left out), so that the
/// text can be appended to any config file, after any table.
#[derive(Serialize)]
struct Declarations {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    datacenter: Vec<DataCenterSpec>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    region: Vec<RegionSpec>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    service: Vec<Arc<ServiceSpec>>,
}

async fn export(State(api): State<Api>) -> Reply<impl IntoResponse> {
    let state = api.control.state();
    let declarations =
        Declarations { datacenter: state.datacenters.clone(), region: state.regions.clone(), service: state.services.clone() };
    let text = toml::to_string(&declarations).map_err(|error| ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: error.to_string(),
        field: None,
    })?;
    Ok(([(header::CONTENT_TYPE, "application/toml")], text))
}

/// Artemis's LatencyMeasurement rows, in a batch: kept whole or refused
/// whole, and live in answers on return.
async fn post_measurements(State(api): State<Api>, Json(batch): Json<Vec<MeasurementSpec>>) -> Reply<Json<MeasurementsKept>> {
    let accepted = api.control.record_measurements(batch).await?;
    Ok(Json(MeasurementsKept { accepted }))
}

/// A replica's load, pushed: `{"load": 0.7}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadReport {
    load: f64,
}

async fn put_load(State(api): State<Api>, Path((name, id)): Path<(String, String)>, Json(report): Json<LoadReport>) -> Reply<StatusCode> {
    api.control.record_load(name, id, report.load).await?;
    Ok(StatusCode::OK)
}

async fn load_status(State(api): State<Api>) -> Reply<Json<pharos_control::load::LoadStatus>> {
    Ok(Json(api.control.load_status().await?))
}

/// Every probed replica: up or down, since when, and the last result.
async fn health(State(api): State<Api>) -> Reply<Json<Vec<pharos_control::health::ReplicaHealth>>> {
    Ok(Json(api.control.health().await?))
}

async fn data_status(State(api): State<Api>) -> Json<crate::data::DataStatus> {
    Json(api.control.data().as_ref().clone())
}

/// The kernel fast path: per interface, its counters; what the last sync
/// changed, how full its map is, and why it is off or suspended if it is.
async fn fastpath_status(State(api): State<Api>) -> Reply<Json<crate::status::FastPathStatus>> {
    let mut status = api.control.fastpath_now().await?;
    status.user_space_rate_limited = api.limits.queries.as_ref().map(|limiter| limiter.refused());
    Ok(Json(status))
}

/// Response rate limiting: whether it is on, and the UDP responses it
/// slipped (sent truncated) and dropped since the start.
async fn rrl_status(State(api): State<Api>) -> Json<serde_json::Value> {
    let counters = api.limits.responses.as_ref().map(|limit| limit.counters());
    Json(json!({
        "enabled": counters.is_some(),
        "slipped": counters.map_or(0, |counters| counters.slipped),
        "dropped": counters.map_or(0, |counters| counters.dropped),
    }))
}

async fn reload(State(api): State<Api>) -> Reply<StatusCode> {
    api.control.reload().await?;
    Ok(StatusCode::OK)
}

async fn get_zone_keys(State(api): State<Api>, Path(zone): Path<String>) -> Reply<Json<Vec<KeyView>>> {
    Ok(Json(api.control.zone_keys(zone, None).await?))
}

/// Asks a secondary zone to check its primaries now; answers with what
/// its timers stand at.
async fn refresh_secondary(State(api): State<Api>, Path(zone): Path<String>) -> Reply<Json<Vec<SecondaryStatus>>> {
    let origin = service_name(&zone).map_err(|error| ControlError::invalid("zone", error.to_string()))?;
    if !api.control.refresh_secondary(&origin) {
        return Err(ControlError::NotFound(format!("secondary zone {zone}")).into());
    }
    Ok(Json(api.control.secondaries()))
}

/// A key step: `{"step": "roll-zsk" | "roll-ksk" | "ds-changed"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyStepRequest {
    step: KeyStep,
}

async fn post_key_step(State(api): State<Api>, Path(zone): Path<String>, Json(request): Json<KeyStepRequest>) -> Reply<Json<Vec<KeyView>>> {
    Ok(Json(api.control.zone_keys(zone, Some(request.step)).await?))
}
