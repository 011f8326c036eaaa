//! Configuration: a TOML file, command-line flags, or both (flags win).

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pharos_bgp::OriginRules;
use pharos_model::spec::{DataCenterSpec, RegionSpec, ServiceSpec};
use pharos_route::prefix::{ListedPrefixError, prefix_set};
use pharos_transport::config::{HttpConfig, HttpConfigError, TcpConfig, TlsConfig};
use pharos_transport::cookies::CookieSecret;
use pharos_transport::dnstap;
use pharos_transport::limit::{RateLimit, SourceLimiter};
use pharos_transport::proxy::ProxySources;
use pharos_transport::rrl::ResponseLimit;
use serde::{Deserialize, Serialize};

/// What is wrong with the configuration: the file, the setting and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: invalid configuration", path.display())]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("--zone {0:?}: expected ORIGIN=FILE, e.g. example.test=zones/example.test.zone")]
    ZoneFlag(String),
    #[error("--zone {0:?}: both the origin and the file are needed")]
    ZoneFlagHalf(String),
    #[error("no listen address: give --listen ADDRESS:PORT or server.listen in the config file")]
    NoListen,
    #[error("no zones: give --zone ORIGIN=FILE or [[zone]] entries in the config file, or a [store] to keep zones in")]
    NoZones,
    #[error("zone {0}: give either file or primaries, not both")]
    FileAndPrimaries(String),
    #[error("zone {0}: give its file, or its primaries to copy it from")]
    NoSource(String),
    #[error("zone {0}: dnssec = true is for zones read from a file (a secondary zone is served as its primary signed it)")]
    SignedSecondary(String),
    #[error("zone {origin}: refresh_min_seconds {min} is 0 or above refresh_max_seconds {max}")]
    RefreshBounds { origin: String, min: u32, max: u32 },
    #[error("catalog.zone: {0:?} is not a domain name")]
    CatalogName(String),
    #[error("catalog.zone {0:?} is also a [[zone]]'s origin: the catalog is made by Pharos, give it a name of its own")]
    CatalogIsAZone(String),
    #[error("catalog.allow_transfer is empty: a catalog nobody may transfer has no consumer; list the secondaries' prefixes")]
    CatalogNotTransferred,
    #[error("store_zones.update: {0}")]
    UpdateRule(#[from] pharos_update::PolicyError),
    #[error(
        "dnssec.refresh_seconds = {refresh_seconds}: must be at least 1 and less than dnssec.validity_seconds ({validity_seconds}), or signatures expire before they are made again"
    )]
    Refresh { refresh_seconds: u32, validity_seconds: u32 },
    #[error("server.udp_payload = {0}: must be at least 512 (RFC 6891 section 6.2.5)")]
    UdpPayload(u16),
    #[error("tcp.max_connections and tcp.max_connections_per_client must be at least 1")]
    NoConnections,
    #[error("server.nsid is longer than 512 octets")]
    LongNsid,
    #[error("latency.max_age_seconds must be at least 1")]
    ZeroMaxAge,
    #[error("load.smoothing must be more than 0 and at most 1")]
    Smoothing,
    #[error("tls.certificate and tls.key go together: give both, or neither for a generated self-signed certificate")]
    HalfCertificate,
    #[error("store.path (SQLite) and store.url (PostgreSQL) are two stores: give one of them")]
    TwoStores,
    #[error("control.tls = true with no control.listen: there is no control API to serve over TLS")]
    TlsWithoutApi,
    #[error("bgp.min_prefix_length_v4: {0} is longer than an IPv4 address (32 bits)")]
    MinPrefixLengthV4(u8),
    #[error("bgp.min_prefix_length_v6: {0} is longer than an IPv6 address (128 bits)")]
    MinPrefixLengthV6(u8),
    #[error("health.node is empty: name the node, or leave it out for the host name and listen address")]
    EmptyNode,
    #[error("health.report_interval_ms = {0}: must be at least 100")]
    ReportInterval(u64),
    #[error(
        "health.stale_after_ms = {stale_after_ms}: must be at least twice health.report_interval_ms ({report_interval_ms}), or a live node that misses one report counts as gone"
    )]
    StaleAfter { stale_after_ms: u64, report_interval_ms: u64 },
    #[error("health.quorum = {0}: must be at least 0 and less than 1 (the share of live nodes that must see a replica down)")]
    Quorum(f64),
    #[error("health.probe_address: {0:?} is not \"service/replica\"")]
    ProbeAddress(String),
    #[error(
        "metrics.resolver_view = true needs metrics.counting: resolvers are tallied as routed answers are counted; turn counting on or the resolver view off"
    )]
    ResolverViewWithoutCounting,
    #[error(
        "metrics.listen = {0} is control.listen too: the control listener serves /metrics already (with its token); give the metrics listener an address of its own, or leave it out"
    )]
    MetricsOnControl(SocketAddr),
    #[error("metrics.listen = {0} is also a DNS address in server.listen (DNS over TCP takes it); give the metrics listener another port")]
    MetricsOnDns(SocketAddr),
    #[error("dnstap: give exactly one of socket = \"PATH\" (a Unix socket) or tcp = \"ADDRESS:PORT\"")]
    DnstapDestination,
    #[error("dnstap.sample must be at least 1 (1 logs every query, N one in N)")]
    DnstapSample,
    #[error("fastpath.interfaces[{index}]: {interface:?} is not an interface name (1 to 15 octets, no '/' or space)")]
    InterfaceName { index: usize, interface: String },
    #[error("fastpath.interfaces[{index}]: {interface:?} is named twice")]
    InterfaceTwice { index: usize, interface: String },
    #[error("fastpath.max_entries = {0}: must be 1 to {MAX_ENTRIES}", MAX_ENTRIES = MAX_ENTRIES)]
    MaxEntries(u32),
    #[error("fastpath.rate_limit.per_second must be at least 1 (to stop a source entirely, filter it elsewhere)")]
    ZeroPerSecond,
    #[error("fastpath.rate_limit.burst must be at least 1")]
    ZeroBurst,
    #[error(transparent)]
    Rrl(#[from] RrlError),
    #[error("cookies.rotation_hours = {0}: must be 1 (a cookie lives an hour) to {MAX_ROTATION_HOURS}", MAX_ROTATION_HOURS = MAX_ROTATION_HOURS)]
    RotationHours(u32),
    #[error(transparent)]
    Http(#[from] HttpConfigError),
    #[error(transparent)]
    ProxySources(ListedPrefixError),
}

/// What is wrong with `[rrl]`, or why its limiter cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum RrlError {
    #[error("rrl.rate must be at least 1 (responses per second to one source network)")]
    ZeroRate,
    #[error("rrl.slip = {0}: must be 0 (drop every limited response) to {MAX_SLIP}", MAX_SLIP = MAX_SLIP)]
    Slip(u32),
    #[error("rrl.table_size must be at least 1")]
    ZeroTableSize,
    #[error(transparent)]
    Whitelist(#[from] ListedPrefixError),
    #[error("no random numbers from the operating system")]
    NoRandom(#[source] rand::rand_core::OsError),
}

/// Everything `pharos serve` needs to know.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub tcp: TcpConfig,
    #[serde(default)]
    pub tls: TlsConfig,
    #[serde(default)]
    pub http: HttpConfig,
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneConfig>,
    /// What every zone kept in the store gets: transfers and NOTIFYs.
    #[serde(default)]
    pub store_zones: StoreZonesConfig,
    /// The catalog zone (RFC 9432) listing the zones served: none unless
    /// the section is there.
    pub catalog: Option<CatalogConfig>,
    /// Data centers replicas run in.
    #[serde(default, rename = "datacenter")]
    pub datacenters: Vec<DataCenterSpec>,
    /// Regions that routing policies tell apart.
    #[serde(default, rename = "region")]
    pub regions: Vec<RegionSpec>,
    /// Names inside the zones whose addresses a policy chooses.
    #[serde(default, rename = "service")]
    pub services: Vec<ServiceSpec>,
    #[serde(default)]
    pub geo: GeoConfig,
    #[serde(default)]
    pub bgp: BgpConfig,
    #[serde(default)]
    pub latency: LatencyConfig,
    #[serde(default)]
    pub load: LoadConfig,
    /// An external process that places clients no region rule places.
    pub classifier: Option<ClassifierConfig>,
    #[serde(default)]
    pub store: StoreConfig,
    /// Health by quorum, for nodes sharing a PostgreSQL store (read at start).
    #[serde(default)]
    pub health: HealthConfig,
    #[serde(default)]
    pub control: ControlConfig,
    /// The kernel fast path (XDP): off unless it names interfaces.
    #[serde(default)]
    pub fastpath: FastPathConfig,
    /// Response rate limiting on DNS over UDP: off unless the section is there.
    pub rrl: Option<RrlConfig>,
    /// DNS cookies on DNS over UDP, TCP and TLS: off unless the section is there.
    pub cookies: Option<CookiesConfig>,
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// The dnstap query log: off unless the section is there.
    pub dnstap: Option<DnstapConfig>,
    /// Artemis service addresses, for the API and `explain` (read at start).
    pub artemis: Option<crate::artemis::ArtemisConfig>,
    /// Signatures of the zones with `dnssec = true`.
    #[serde(default)]
    pub dnssec: DnssecConfig,
    /// The TSIG keys requests may be signed with: every signed query,
    /// transfers included, is checked against them.
    #[serde(default, rename = "tsig_key")]
    pub tsig_keys: Vec<TsigKeyConfig>,
    /// Zones given on the command line; kept across reloads of the file.
    #[serde(skip)]
    pub flag_zones: Vec<ZoneConfig>,
    /// The file this configuration was read from, re-read on reload.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// Address data for region rules beyond CIDR lists.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeoConfig {
    /// MaxMind DB file (GeoIP2/GeoLite2 Country or City, DB-IP) for
    /// regions by country and continent.
    pub database: Option<PathBuf>,
    /// IP-to-AS table for regions by AS number: ranges `first,last,asn,...`
    /// or prefixes `network/length asn`, plain or .gz.
    pub asn_table: Option<PathBuf>,
}

/// BGP routing tables for the shortest AS-path policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BgpConfig {
    /// A RIB dump: MRT TABLE_DUMP_V2 or TABLE_DUMP, or `bgpdump -m` text;
    /// plain, gzip or bzip2. Loaded in the background at start and reload;
    /// until it is, shortest-as-path services use their fallback.
    pub table: Option<PathBuf>,
    /// IPv4 routes shorter than this give no origin AS (default routes never do).
    pub min_prefix_length_v4: u8,
    /// IPv6 routes shorter than this give no origin AS.
    pub min_prefix_length_v6: u8,
    /// Take origins from routes into special-purpose space (RFC 6890:
    /// private, documentation, ...) too: for labs that route such space.
    pub special_purpose_origins: bool,
}

impl Default for BgpConfig {
    fn default() -> Self {
        let rules = OriginRules::default();
        BgpConfig {
            table: None,
            min_prefix_length_v4: rules.min_length_v4,
            min_prefix_length_v6: rules.min_length_v6,
            special_purpose_origins: rules.special_purpose_origins,
        }
    }
}

impl BgpConfig {
    /// Which routes of the table may give an origin AS.
    pub fn origin_rules(&self) -> OriginRules {
        OriginRules {
            min_length_v4: self.min_prefix_length_v4,
            min_length_v6: self.min_prefix_length_v6,
            special_purpose_origins: self.special_purpose_origins,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.min_prefix_length_v4 > 32 {
            return Err(ConfigError::MinPrefixLengthV4(self.min_prefix_length_v4));
        }
        if self.min_prefix_length_v6 > 128 {
            return Err(ConfigError::MinPrefixLengthV6(self.min_prefix_length_v6));
        }
        Ok(())
    }
}

/// Latency measurements for the lowest-latency policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LatencyConfig {
    /// Measurements older than this many seconds are ignored, and dropped
    /// from the store.
    pub max_age_seconds: u64,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        LatencyConfig { max_age_seconds: 3600 }
    }
}

/// Replica load reports (pushed to the API or probed).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadConfig {
    /// Reports older than this many seconds are ignored.
    pub max_age_seconds: u64,
    /// Weight of each new report in the smoothed value (EWMA), 0 to 1.
    pub smoothing: f64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig { max_age_seconds: 30, smoothing: 0.5 }
    }
}

/// The external classifier (MyXDNS's Find_IP_Region as a process).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// TCP address of the process.
    pub address: SocketAddr,
    /// How long to wait for one answer before giving up on it.
    #[serde(default = "default_classifier_timeout")]
    pub timeout_ms: u64,
    /// Answers are asked for and cached per subnet of this size.
    #[serde(default = "default_v4_prefix")]
    pub v4_prefix: u8,
    #[serde(default = "default_v6_prefix")]
    pub v6_prefix: u8,
}

fn default_classifier_timeout() -> u64 {
    50
}
fn default_v4_prefix() -> u8 {
    24
}
fn default_v6_prefix() -> u8 {
    56
}

/// Where routing state is kept.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// SQLite database file, created on first start. Unset (and no `url`):
    /// state lives in memory only and is lost at exit.
    pub path: Option<PathBuf>,
    /// PostgreSQL connection string (libpq: `postgres://user@host1,host2/db`
    /// or `host=... dbname=...`), for a fleet of nodes sharing one state;
    /// of several hosts, the one taking writes is used.
    pub url: Option<String>,
}

/// How a node of a fleet (nodes sharing `store.url`) shares what its
/// probes see: a replica is down fleet-wide when most live nodes see it
/// down (see `pharos_control::quorum`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// This node's name in the fleet; by default the host name and the
    /// first DNS listen address ("dns1/192.0.2.53:53").
    pub node: Option<String>,
    /// How often (ms) the node reports to the store that it is alive, and
    /// reads the others' verdicts; a change in its own verdicts is
    /// reported at once.
    pub report_interval_ms: u64,
    /// A node that has not reported for this long (ms) is not counted; a
    /// node that cannot reach the store for this long serves its own
    /// probes' view.
    pub stale_after_ms: u64,
    /// A replica is down fleet-wide when more than this share (0 to 1,
    /// excluded) of the live nodes probing it see it down; 0.5, a majority,
    /// by default.
    pub quorum: f64,
    /// Where this node probes a replica instead of its declared address,
    /// by "service/replica": a node that reaches it by another path.
    pub probe_address: std::collections::HashMap<String, std::net::IpAddr>,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            node: None,
            report_interval_ms: 1000,
            stale_after_ms: 5000,
            quorum: pharos_control::quorum::MAJORITY,
            probe_address: Default::default(),
        }
    }
}

impl HealthConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.node.as_ref().is_some_and(|node| node.trim().is_empty()) {
            return Err(ConfigError::EmptyNode);
        }
        if self.report_interval_ms < 100 {
            return Err(ConfigError::ReportInterval(self.report_interval_ms));
        }
        if self.stale_after_ms < 2 * self.report_interval_ms {
            return Err(ConfigError::StaleAfter { stale_after_ms: self.stale_after_ms, report_interval_ms: self.report_interval_ms });
        }
        if !(0.0..1.0).contains(&self.quorum) {
            return Err(ConfigError::Quorum(self.quorum));
        }
        self.probe_addresses().map(drop)
    }

    /// The probe addresses by (service, replica).
    pub fn probe_addresses(&self) -> Result<pharos_control::health::ProbeAddresses, ConfigError> {
        let key = |named: &String| match named.split_once('/') {
            Some((service, replica)) if !service.is_empty() && !replica.is_empty() => Ok((service.to_owned(), replica.to_owned())),
            _ => Err(ConfigError::ProbeAddress(named.clone())),
        };
        self.probe_address.iter().map(|(named, address)| Ok((key(named)?, *address))).collect()
    }

    /// This node's name in the fleet (see [`HealthConfig::node`]).
    pub fn node_name(&self, server: &ServerConfig) -> String {
        if let Some(node) = &self.node {
            return node.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let listen = server.listen.first().map(ToString::to_string).unwrap_or_default();
        format!("{}/{listen}", host.trim())
    }
}

/// The HTTP/JSON control API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// Address to serve the API on; unset, there is no API.
    pub listen: Option<SocketAddr>,
    /// The bootstrap token (named `admin`, with every right): the bearer
    /// token clients send until named tokens are made with it. Unset: one
    /// is generated at first start, kept in the store and printed once.
    pub token: Option<String>,
    /// Serve the API over HTTPS only, presenting the certificate of `[tls]`
    /// (its `certificate` and `key`, else the self-signed one generated
    /// and kept beside the store).
    pub tls: bool,
    /// Under a storm of updates, commit at most once per this many
    /// milliseconds, each commit taking every update queued meanwhile. A
    /// lone update is committed at once.
    pub commit_window_ms: u64,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig { listen: None, token: None, tls: false, commit_window_ms: 10 }
    }
}

/// When the signatures of signed zones are valid, how often they are made
/// again, and what key rollovers wait on beyond the zone's own TTLs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DnssecConfig {
    /// How long a signature is valid after it is made, in seconds (an
    /// hour before is valid too, for validators whose clock is behind).
    pub validity_seconds: u32,
    /// How often the signed zones are signed again with a fresh window (a
    /// reload, as SIGHUP does), in seconds: less than the validity, so that
    /// no answer outlives its signatures.
    pub refresh_seconds: u32,
    /// How long a change takes to reach every server of a zone and of its
    /// parent, in seconds (RFC 7583's propagation delay).
    pub propagation_seconds: u32,
    /// The TTL of the zones' DS records at their parents, in seconds.
    pub ds_ttl_seconds: u32,
}

impl Default for DnssecConfig {
    /// Two weeks valid, refreshed every week: a validator sees a signature
    /// valid for at least a week, more than any TTL here. An hour for
    /// changes to propagate, a day for the DS (the TTL most TLDs give it).
    fn default() -> Self {
        DnssecConfig { validity_seconds: 14 * 86_400, refresh_seconds: 7 * 86_400, propagation_seconds: 3600, ds_ttl_seconds: 86_400 }
    }
}

/// Prometheus metrics: `GET /metrics` is on the control listener (with its
/// token) in any case, and here without a token, as scrapers expect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address of a listener serving `/metrics` only; unset, there is none.
    pub listen: Option<SocketAddr>,
    /// Count queries, responses, latency and routing decisions on the
    /// query path (on by default; off saves pipelined TCP its last few
    /// nanoseconds per query, and leaves those families out of a scrape).
    pub counting: bool,
    /// Tally routed answers per resolver, to show how resolvers' caches
    /// skew each split (a slot of a per-thread array per routed answer,
    /// 832 KiB per answering thread, and at most about 5 MB in the control
    /// plane): unset, on when counting is.
    pub resolver_view: Option<bool>,
}

impl Default for MetricsConfig {
    fn default() -> MetricsConfig {
        MetricsConfig { listen: None, counting: true, resolver_view: None }
    }
}

impl MetricsConfig {
    /// Whether routed answers are tallied per resolver.
    pub fn tallies_resolvers(&self) -> bool {
        self.resolver_view.unwrap_or(self.counting)
    }

    /// The metrics listener must not take an address another listener
    /// of Pharos's own holds.
    fn validate(&self, control: &ControlConfig, server: &ServerConfig) -> Result<(), ConfigError> {
        if self.resolver_view == Some(true) && !self.counting {
            return Err(ConfigError::ResolverViewWithoutCounting);
        }
        let Some(listen) = self.listen else { return Ok(()) };
        if control.listen == Some(listen) {
            return Err(ConfigError::MetricsOnControl(listen));
        }
        if server.listen.contains(&listen) {
            return Err(ConfigError::MetricsOnDns(listen));
        }
        Ok(())
    }
}

/// The dnstap query log: where the reader listens (a Unix socket or a TCP
/// address, exactly one), the share of queries logged, and how the server
/// names itself in each message.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnstapConfig {
    pub socket: Option<PathBuf>,
    pub tcp: Option<SocketAddr>,
    /// One query in `sample` is logged (counted per thread); 1 logs all.
    #[serde(default = "every_query")]
    pub sample: u64,
    pub identity: Option<String>,
    pub version: Option<String>,
}

fn every_query() -> u64 {
    1
}

impl DnstapConfig {
    pub fn settings(&self) -> Result<dnstap::Settings, ConfigError> {
        let destination = match (&self.socket, self.tcp) {
            (Some(path), None) => dnstap::Destination::Unix(path.clone()),
            (None, Some(address)) => dnstap::Destination::Tcp(address),
            _ => return Err(ConfigError::DnstapDestination),
        };
        if self.sample == 0 {
            return Err(ConfigError::DnstapSample);
        }
        Ok(dnstap::Settings { destination, sample: self.sample, identity: self.identity.clone(), version: self.version.clone() })
    }
}

/// The kernel fast path: an XDP program on each interface that answers
/// what it can in the kernel and passes everything else up.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastPathConfig {
    /// Network interfaces to attach to; empty: no fast path.
    pub interfaces: Vec<String>,
    pub mode: XdpMode,
    /// Most questions the kernel holds answers for.
    pub max_entries: u32,
    /// A per-source token bucket, in the kernel and in user space alike.
    pub rate_limit: Option<RateLimitConfig>,
}

impl Default for FastPathConfig {
    fn default() -> Self {
        FastPathConfig { interfaces: Vec::new(), mode: XdpMode::Auto, max_entries: 65536, rate_limit: None }
    }
}

/// How the program runs on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native where the driver supports it, else generic (the kernel picks).
    Auto,
    /// In the driver, before any socket buffer is allocated: the fast one.
    Native,
    /// In the network stack, where drivers have no XDP (e.g. `lo`).
    Generic,
}

impl XdpMode {
    /// As the config file spells it.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Auto => "auto",
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// Queries per second each source address (IPv6: each /64) may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Sustained rate.
    pub per_second: u32,
    /// Queries allowed at once above the rate.
    pub burst: u32,
    /// What the kernel does with a query over the limit.
    #[serde(default)]
    pub over_limit: OverLimit,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OverLimit {
    /// Up to user space, whose own bucket then decides.
    #[default]
    Pass,
    Drop,
}

/// The kernel's map holds two snapshots' answers, counted in a u32.
const MAX_ENTRIES: u32 = u32::MAX / 2;

/// Longest interface name Linux allows (IFNAMSIZ less the terminating NUL).
const MAX_INTERFACE_NAME: usize = 15;

impl FastPathConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        for (index, interface) in self.interfaces.iter().enumerate() {
            let bad = interface.is_empty()
                || interface.len() > MAX_INTERFACE_NAME
                || interface.bytes().any(|byte| byte == b'/' || byte == 0 || byte.is_ascii_whitespace());
            if bad {
                return Err(ConfigError::InterfaceName { index, interface: interface.clone() });
            }
            if self.interfaces[..index].contains(interface) {
                return Err(ConfigError::InterfaceTwice { index, interface: interface.clone() });
            }
        }
        if self.max_entries == 0 || self.max_entries > MAX_ENTRIES {
            return Err(ConfigError::MaxEntries(self.max_entries));
        }
        if let Some(limit) = &self.rate_limit {
            if limit.per_second == 0 {
                return Err(ConfigError::ZeroPerSecond);
            }
            if limit.burst == 0 {
                return Err(ConfigError::ZeroBurst);
            }
        }
        Ok(())
    }
}

/// Response rate limiting (as Knot DNS's `rrl` module and BIND's
/// `rate-limit` have it): alike UDP responses per second to one source
/// network (/24, /56), the rest dropped or slipped.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrlConfig {
    /// Alike responses per second to one source network.
    pub rate: u32,
    /// Every `slip`th limited response goes out empty with TC=1, so that
    /// real clients retry over TCP; 0 drops them all.
    #[serde(default = "RrlConfig::default_slip")]
    pub slip: u32,
    /// Buckets kept at most (each 24 octets).
    #[serde(default = "RrlConfig::default_table_size")]
    pub table_size: u32,
    /// Sources (CIDR prefixes) never limited.
    #[serde(default)]
    pub whitelist: Vec<String>,
}

/// Most slip BIND allows; more is hardly different from dropping.
const MAX_SLIP: u32 = 10;

impl RrlConfig {
    /// Knot DNS's and BIND's default: every other limited response slips.
    fn default_slip() -> u32 {
        2
    }

    fn default_table_size() -> u32 {
        1 << 18
    }

    /// The limits this section asks for, or why it is wrong.
    pub fn limits(&self) -> Result<pharos_rrl::Limits, RrlError> {
        let Some(rate) = NonZeroU32::new(self.rate) else {
            return Err(RrlError::ZeroRate);
        };
        if self.slip > MAX_SLIP {
            return Err(RrlError::Slip(self.slip));
        }
        let Some(table_size) = NonZeroU32::new(self.table_size) else {
            return Err(RrlError::ZeroTableSize);
        };
        let whitelist = pharos_route::prefix::prefix_set("rrl.whitelist", &self.whitelist)?;
        Ok(pharos_rrl::Limits { rate, slip: self.slip, table_size, whitelist })
    }
}

/// DNS cookies (RFC 7873, server cookies as RFC 9018 makes them): queries
/// with a cookie get a server cookie; one echoing a bad server cookie is
/// answered BADCOOKIE; one echoing a good one is exempt from `[rrl]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CookiesConfig {
    /// How long each secret is used: it is derived, per period, from a
    /// master secret in the store that every node sharing the store uses.
    #[serde(default = "CookiesConfig::default_rotation_hours")]
    pub rotation_hours: u32,
}

/// Longest secret period: a year.
const MAX_ROTATION_HOURS: u32 = 24 * 366;

impl CookiesConfig {
    fn default_rotation_hours() -> u32 {
        24
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_ROTATION_HOURS).contains(&self.rotation_hours) {
            return Err(ConfigError::RotationHours(self.rotation_hours));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Addresses to serve DNS on, over both UDP and TCP.
    pub listen: Vec<SocketAddr>,
    /// UDP worker threads per address (and TCP runtime threads); 0 means
    /// one per available core.
    pub threads: usize,
    /// Name server identifier (RFC 5001) returned when asked.
    pub nsid: Option<String>,
    /// Largest UDP response sent and advertised.
    pub udp_payload: u16,
    /// Seed for the random choices of routing policies, for reproducible
    /// tests; unset, each worker seeds itself from the operating system.
    pub random_seed: Option<u64>,
    /// Resolvers (CIDR prefixes) whose EDNS Client Subnet is believed.
    /// Unset: every sender's. From others, routing uses the packet source.
    pub client_subnet_trusted_from: Option<Vec<String>>,
    /// The user to run as once every port is bound and the kernel fast path
    /// attached, when started as root. Unset: a server started as root
    /// stays root (and says so at start).
    pub user: Option<String>,
    /// The group to run as with `user`; unset: the user's own group.
    pub group: Option<String>,
    /// Proxies (CIDR prefixes) that relay DNS with a PROXY protocol header
    /// naming the client (dnsdist's `useProxyProtocol`, HAProxy's
    /// `send-proxy-v2`): every datagram and connection from them must
    /// start with one, and none from anyone else may.
    pub proxy_protocol_from: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Vec::new(),
            threads: 0,
            nsid: None,
            udp_payload: pharos_answer::DEFAULT_UDP_PAYLOAD,
            random_seed: None,
            client_subnet_trusted_from: None,
            user: None,
            group: None,
            proxy_protocol_from: Vec::new(),
        }
    }
}

/// One zone: its origin and where its records come from: a master file,
/// or the primaries it is copied from (a secondary zone).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    pub origin: String,
    pub file: Option<PathBuf>,
    /// The primaries the zone is transferred from, tried in order; empty
    /// for a zone read from its file.
    #[serde(default)]
    pub primaries: Vec<PrimaryConfig>,
    /// The client prefixes (CIDR) a NOTIFY for a secondary zone is taken
    /// from; by default the primaries' addresses.
    pub notify_from: Option<Vec<String>>,
    /// The bounds (seconds) a secondary zone's SOA refresh and retry
    /// times are held to.
    #[serde(default = "default_refresh_min")]
    pub refresh_min_seconds: u32,
    #[serde(default = "default_refresh_max")]
    pub refresh_max_seconds: u32,
    /// Sign the zone's answers to DO=1 queries with the keys `pharos key
    /// generate` kept in the store.
    #[serde(default)]
    pub dnssec: bool,
    /// The client prefixes (CIDR) that may transfer the zone (AXFR, IXFR)
    /// over TCP or TLS; empty: nobody.
    #[serde(default)]
    pub allow_transfer: Vec<String>,
    /// The TSIG keys (`[[tsig_key]]` names) one of which must sign a
    /// transfer request besides; empty: none needed.
    #[serde(default)]
    pub transfer_keys: Vec<String>,
    /// How many versions back an IXFR can be answered with a difference
    /// (the zone's journal, in memory); older clients get the whole zone.
    #[serde(default = "default_journal_versions")]
    pub journal_versions: usize,
    /// Secondaries sent a NOTIFY whenever the zone's serial moves; empty:
    /// none.
    #[serde(default)]
    pub notify: Vec<std::net::SocketAddr>,
}

/// A primary of a secondary zone: where it answers, and the TSIG key
/// (a `[[tsig_key]]` name) the transfers are signed with.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PrimaryConfig {
    pub address: std::net::SocketAddr,
    pub key: Option<String>,
}

/// Where a zone's records come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneSource<'c> {
    File(&'c Path),
    Primaries(&'c [PrimaryConfig]),
}

impl ZoneConfig {
    /// Where the zone's records come from; `None` when the zone names
    /// both a file and primaries, or neither ([`Config::problems`] says so).
    pub fn source(&self) -> Option<ZoneSource<'_>> {
        match (&self.file, self.primaries.is_empty()) {
            (Some(file), true) => Some(ZoneSource::File(file)),
            (None, false) => Some(ZoneSource::Primaries(&self.primaries)),
            _ => None,
        }
    }

    /// What is wrong with the zone's declaration as a whole, if anything.
    fn problem(&self) -> Option<ConfigError> {
        let origin = || self.origin.clone();
        let (min, max) = (self.refresh_min_seconds, self.refresh_max_seconds);
        match (&self.file, self.primaries.is_empty()) {
            (Some(_), false) => Some(ConfigError::FileAndPrimaries(origin())),
            (None, true) => Some(ConfigError::NoSource(origin())),
            (None, false) if self.dnssec => Some(ConfigError::SignedSecondary(origin())),
            _ if min == 0 || min > max => Some(ConfigError::RefreshBounds { origin: origin(), min, max }),
            _ => None,
        }
    }
}

fn default_refresh_min() -> u32 {
    pharos_secondary::Clamps::default().min
}

fn default_refresh_max() -> u32 {
    pharos_secondary::Clamps::default().max
}

/// `[store_zones]`: the transfer and NOTIFY settings of every zone kept
/// in the store (made through the API, `ctl` or DNS UPDATE), which the
/// configuration does not name one by one; as a `[[zone]]`'s.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StoreZonesConfig {
    #[serde(default)]
    pub allow_transfer: Vec<String>,
    #[serde(default)]
    pub transfer_keys: Vec<String>,
    #[serde(default)]
    pub notify: Vec<std::net::SocketAddr>,
    /// Who may change which names of them by DNS UPDATE: each rule
    /// belongs to the store zone holding the name it covers. None: no
    /// UPDATE is allowed.
    #[serde(default)]
    pub update: Vec<pharos_update::RuleConfig>,
}

/// The catalog zone Pharos produces (RFC 9432): its name, the zones it
/// lists (`"all"` served, or only those the `"store"` keeps), and who
/// may transfer it and is told of its changes, as a `[[zone]]`'s.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    pub zone: String,
    #[serde(default)]
    pub members: pharos_model::zone::CatalogMembers,
    #[serde(default)]
    pub allow_transfer: Vec<String>,
    #[serde(default)]
    pub transfer_keys: Vec<String>,
    #[serde(default)]
    pub notify: Vec<std::net::SocketAddr>,
}

impl CatalogConfig {
    /// What is wrong with it that the transfer list's own checks
    /// (`response_settings`) do not see.
    fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        let origin = pharos_wire::name::from_dotted(&self.zone).map_err(|_| ConfigError::CatalogName(self.zone.clone()))?;
        if config.all_zones().any(|zone| pharos_wire::name::from_dotted(&zone.origin).is_ok_and(|zone| zone == origin)) {
            return Err(ConfigError::CatalogIsAZone(self.zone.clone()));
        }
        if self.allow_transfer.is_empty() {
            return Err(ConfigError::CatalogNotTransferred);
        }
        Ok(())
    }
}

fn default_journal_versions() -> usize {
    pharos_zone::journal::DEFAULT_JOURNAL_VERSIONS
}

/// A TSIG key (RFC 8945): its name, algorithm and secret (base64), given
/// in the file or in a file of its own.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TsigKeyConfig {
    pub name: String,
    #[serde(default = "default_tsig_algorithm")]
    pub algorithm: String,
    pub secret: Option<String>,
    /// A file holding the secret, base64, alone (blanks around it ignored).
    pub secret_file: Option<PathBuf>,
}

fn default_tsig_algorithm() -> String {
    "hmac-sha256".into()
}

impl ZoneConfig {
    /// Reads `ORIGIN=FILE` as given to `--zone`.
    pub fn from_flag(flag: &str) -> Result<ZoneConfig, ConfigError> {
        let Some((origin, file)) = flag.split_once('=') else {
            return Err(ConfigError::ZoneFlag(flag.to_owned()));
        };
        if origin.is_empty() || file.is_empty() {
            return Err(ConfigError::ZoneFlagHalf(flag.to_owned()));
        }
        Ok(ZoneConfig {
            origin: origin.to_string(),
            file: Some(PathBuf::from(file)),
            primaries: Vec::new(),
            notify_from: None,
            refresh_min_seconds: default_refresh_min(),
            refresh_max_seconds: default_refresh_max(),
            dnssec: false,
            allow_transfer: Vec::new(),
            transfer_keys: Vec::new(),
            journal_versions: default_journal_versions(),
            notify: Vec::new(),
        })
    }
}

impl Config {
    /// Reads a configuration file. Relative zone paths are taken relative
    /// to the file's directory, so a config works from any working directory.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let mut config: Config = toml::from_str(&text).map_err(|source| ConfigError::Parse { path: path.to_path_buf(), source })?;
        let directory = path.parent().unwrap_or(Path::new("."));
        for zone in &mut config.zones {
            if let Some(file) = zone.file.as_mut().filter(|file| file.is_relative()) {
                *file = directory.join(&*file);
            }
        }
        let relative_paths = [
            config.store.path.as_mut(),
            config.geo.database.as_mut(),
            config.geo.asn_table.as_mut(),
            config.bgp.table.as_mut(),
            config.tls.certificate.as_mut(),
            config.tls.key.as_mut(),
        ];
        let secret_files = config.tsig_keys.iter_mut().filter_map(|key| key.secret_file.as_mut());
        for path in relative_paths.into_iter().flatten().chain(secret_files).filter(|path| path.is_relative()) {
            *path = directory.join(&*path);
        }
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    /// The configuration as it is now on disk: the file re-read (if there
    /// is one), with this one's command-line zones. Listen addresses and
    /// other start-up settings keep their running values.
    pub fn reread(&self) -> Result<Config, ConfigError> {
        let Some(path) = &self.source else { return Ok(self.clone()) };
        // Every section is named, as reloaded or kept: one added to Config
        // does not compile until it says which, so none is forgotten.
        let Config {
            zones,
            store_zones,
            catalog,
            tsig_keys,
            datacenters,
            regions,
            services,
            geo,
            artemis,
            health,
            server: _,
            tcp: _,
            tls: _,
            http: _,
            bgp: _,
            latency: _,
            load: _,
            classifier: _,
            store: _,
            control: _,
            fastpath: _,
            rrl: _,
            cookies: _,
            metrics: _,
            dnstap: _,
            dnssec: _,
            flag_zones: _,
            source: _,
        } = Config::from_file(path)?;
        Ok(Config { zones, store_zones, catalog, tsig_keys, datacenters, regions, services, geo, artemis, health, ..self.clone() })
    }

    /// Zones from the file and from flags.
    pub fn all_zones(&self) -> impl Iterator<Item = &ZoneConfig> {
        self.zones.iter().chain(&self.flag_zones)
    }

    /// An empty configuration, for when everything comes from flags.
    pub fn empty() -> Config {
        Config::default()
    }

    /// Checks what cannot be checked field by field; the first problem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem that cannot be seen field by field, all at once (for
    /// `pharos check`).
    pub fn problems(&self) -> Vec<ConfigError> {
        let DnssecConfig { refresh_seconds, validity_seconds, .. } = self.dnssec;
        let wrong = [
            (self.server.listen.is_empty(), ConfigError::NoListen),
            (self.all_zones().next().is_none() && self.store.path.is_none() && self.store.url.is_none(), ConfigError::NoZones),
            (refresh_seconds == 0 || refresh_seconds >= validity_seconds, ConfigError::Refresh { refresh_seconds, validity_seconds }),
            (self.server.udp_payload < pharos_wire::MIN_UDP_PAYLOAD, ConfigError::UdpPayload(self.server.udp_payload)),
            (self.tcp.max_connections == 0 || self.tcp.max_connections_per_client == 0, ConfigError::NoConnections),
            (self.server.nsid.as_ref().is_some_and(|nsid| nsid.len() > 512), ConfigError::LongNsid),
            (self.latency.max_age_seconds == 0, ConfigError::ZeroMaxAge),
            (!(self.load.smoothing > 0.0 && self.load.smoothing <= 1.0), ConfigError::Smoothing),
            (self.tls.certificate.is_some() != self.tls.key.is_some(), ConfigError::HalfCertificate),
            (self.store.path.is_some() && self.store.url.is_some(), ConfigError::TwoStores),
            (self.control.tls && self.control.listen.is_none(), ConfigError::TlsWithoutApi),
        ];
        let sections = [
            self.bgp.validate(),
            self.health.validate(),
            self.fastpath.validate(),
            self.rrl.as_ref().map_or(Ok(()), |rrl| rrl.limits().map(drop).map_err(ConfigError::from)),
            self.cookies.as_ref().map_or(Ok(()), CookiesConfig::validate),
            self.metrics.validate(&self.control, &self.server),
            self.dnstap.as_ref().map_or(Ok(()), |dnstap| dnstap.settings().map(drop)),
            self.http.validate().map_err(ConfigError::from),
            self.proxy_sources().map(drop),
            self.update_rules_read(),
            self.catalog.as_ref().map_or(Ok(()), |catalog| catalog.validate(self)),
        ];
        let wrong = wrong.into_iter().filter_map(|(is_wrong, problem)| is_wrong.then_some(problem));
        let zones = self.all_zones().filter_map(ZoneConfig::problem);
        wrong.chain(sections.into_iter().filter_map(Result::err)).chain(zones).collect()
    }

    /// Refuses a `[[store_zones.update]]` rule that no zone could use;
    /// whether its name is inside a store zone is known only then.
    fn update_rules_read(&self) -> Result<(), ConfigError> {
        pharos_update::Policy::new(&[0], &self.store_zones.update).map(drop).map_err(ConfigError::from)
    }

    /// The catalog zone `[catalog]` asks for, configured at `now` (Unix
    /// milliseconds): its first serial.
    pub fn produced_catalog(&self, now: u64) -> Result<Option<pharos_control::catalog::Catalog>, pharos_model::ControlError> {
        let catalog = self.catalog.as_ref();
        catalog.map(|catalog| pharos_control::catalog::Catalog::new(&catalog.zone, catalog.members, now)).transpose()
    }

    /// Where state files are kept: beside the store file, else beside the
    /// configuration file; `None` when there is neither.
    pub fn state_directory(&self) -> Option<&Path> {
        let beside = self.store.path.as_deref().or(self.source.as_deref())?;
        Some(beside.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new(".")))
    }

    /// The per-source limiter of DNS over UDP that `[fastpath.rate_limit]`
    /// asks for (it applies whether or not the kernel path runs).
    pub fn udp_rate_limiter(&self) -> Option<Arc<SourceLimiter>> {
        let limit = self.fastpath.rate_limit?;
        let limit = RateLimit { per_second: NonZeroU32::new(limit.per_second)?, burst: NonZeroU32::new(limit.burst)? };
        Some(Arc::new(SourceLimiter::new(limit)))
    }

    /// The response rate limit that `[rrl]` asks for, with buckets keyed by
    /// a random hash, so that no one can aim keys at one bucket.
    pub fn response_rate_limit(&self) -> Result<Option<Arc<ResponseLimit>>, RrlError> {
        let Some(rrl) = &self.rrl else { return Ok(None) };
        use rand::TryRngCore;
        let random = || rand::rngs::OsRng.try_next_u64().map_err(RrlError::NoRandom);
        let limiter = pharos_rrl::Limiter::new(rrl.limits()?, (random()?, random()?));
        Ok(Some(Arc::new(ResponseLimit::new(limiter))))
    }

    /// The sources whose PROXY headers the DNS listeners take, if any are
    /// configured.
    pub fn proxy_sources(&self) -> Result<Option<Arc<ProxySources>>, ConfigError> {
        let from = &self.server.proxy_protocol_from;
        if from.is_empty() {
            return Ok(None);
        }
        let prefixes = prefix_set("server.proxy_protocol_from", from).map_err(ConfigError::ProxySources)?;
        Ok(Some(Arc::new(ProxySources::new(prefixes))))
    }

    /// Worker threads to run: the configured number, or one per core.
    pub fn threads(&self) -> usize {
        match self.server.threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            threads => threads,
        }
    }

    /// What the transports take of this configuration, with the UDP
    /// rate limiters made from it (see [`Config::udp_rate_limiter`] and
    /// [`Config::response_rate_limit`]).
    pub fn transport(
        &self,
        udp_rate_limit: Option<Arc<SourceLimiter>>,
        response_rate_limit: Option<Arc<ResponseLimit>>,
        cookies: Option<Arc<CookieSecret>>,
    ) -> Result<pharos_transport::Settings, ConfigError> {
        Ok(pharos_transport::Settings {
            listen: self.server.listen.clone(),
            udp_threads: self.threads(),
            tcp: self.tcp.clone(),
            tls: self.tls.clone(),
            http: self.http.clone(),
            state_directory: self.state_directory().map(Path::to_path_buf),
            random_seed: self.server.random_seed,
            other_listeners: usize::from(self.control.listen.is_some()),
            udp_rate_limit,
            response_rate_limit,
            cookies,
            proxy_protocol_from: self.proxy_sources()?,
            // Given by the server once its control plane runs.
            updates: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pharos_wire::causes;

    #[test]
    fn reads_a_config_file_with_paths_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        std::fs::write(
            &path,
            "[server]\nlisten = [\"127.0.0.1:5300\"]\nnsid = \"a\"\n[[zone]]\norigin = \"example.test\"\nfile = \"z.zone\"\n",
        )
        .unwrap();
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.zones[0].file, Some(dir.path().join("z.zone")));
        assert_eq!(config.tcp.idle_timeout_ms, 10_000);
        config.validate().unwrap();
    }

    #[test]
    fn reads_the_tls_section_with_paths_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let tls = "[tls]\nlisten = [\"127.0.0.1:853\"]\nquic_listen = [\"[::1]:853\"]\ncertificate = \"c.pem\"\nkey = \"k.pem\"\n";
        std::fs::write(&path, format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n{tls}[[zone]]\norigin = \"t\"\nfile = \"z\"\n")).unwrap();
        let config = Config::from_file(&path).unwrap();
        assert!(config.tls.is_enabled() && config.tls.https_listen.is_empty());
        assert_eq!(config.tls.key, Some(dir.path().join("k.pem")));
        assert_eq!(config.state_directory(), Some(dir.path()));
        config.validate().unwrap();
        let api_over_tls = Config { control: ControlConfig { tls: true, ..ControlConfig::default() }, ..config.clone() };
        let error = api_over_tls.validate().unwrap_err().to_string();
        assert!(error.contains("control.tls = true with no control.listen"), "{error}");
        let half = Config { tls: TlsConfig { key: None, ..config.tls.clone() }, ..config };
        let error = half.validate().unwrap_err().to_string();
        assert!(error.contains("tls.certificate and tls.key go together"), "{error}");
    }

    #[test]
    fn reads_the_metrics_section_and_names_its_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_metrics = |metrics: &str| {
            let head = "[server]\nlisten = [\"127.0.0.1:5300\"]\n[control]\nlisten = \"127.0.0.1:8053\"\n";
            std::fs::write(&path, format!("{head}[[zone]]\norigin = \"t\"\nfile = \"z\"\n[metrics]\n{metrics}\n")).unwrap();
            Config::from_file(&path).and_then(|config| config.validate().map(|()| config))
        };
        assert_eq!(with_metrics("listen = \"127.0.0.1:9153\"").unwrap().metrics.listen, Some("127.0.0.1:9153".parse().unwrap()));
        assert_eq!(with_metrics("").unwrap().metrics.listen, None, "no listener of its own unless asked");
        assert!(with_metrics("").unwrap().metrics.counting, "counting is on unless turned off");
        assert!(!with_metrics("counting = false").unwrap().metrics.counting);
        let tallies = |metrics| with_metrics(metrics).unwrap().metrics.tallies_resolvers();
        assert!(tallies(""), "the resolver view is on with counting");
        assert!(!tallies("counting = false"), "and off without it, unless asked");
        assert!(!tallies("resolver_view = false"));
        for (metrics, expected) in [
            ("listen = \"127.0.0.1:8053\"", "metrics.listen = 127.0.0.1:8053 is control.listen too"),
            ("listen = \"127.0.0.1:5300\"", "metrics.listen = 127.0.0.1:5300 is also a DNS address"),
            ("listen = \"localhost:9153\"", "invalid socket address syntax"),
            ("port = 9153", "unknown field `port`"),
            ("counting = false\nresolver_view = true", "metrics.resolver_view = true needs metrics.counting"),
            ("counting = \"no\"", "invalid type: string \"no\", expected a boolean"),
        ] {
            let error = causes(&with_metrics(metrics).unwrap_err());
            assert!(error.contains(expected), "{metrics}: {error}");
        }
    }

    #[test]
    fn takes_a_sqlite_path_or_a_postgresql_url_not_both() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_store = |store: &str| {
            std::fs::write(
                &path,
                format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[store]\n{store}\n[[zone]]\norigin = \"t\"\nfile = \"z\"\n"),
            )
            .unwrap();
            Config::from_file(&path).unwrap()
        };
        let url = "url = \"postgres://pharos@db1,db2/pharos\"";
        assert_eq!(with_store(url).store.url.as_deref(), Some("postgres://pharos@db1,db2/pharos"));
        with_store(url).validate().unwrap();
        with_store("path = \"state.db\"").validate().unwrap();
        let error = with_store(&format!("path = \"state.db\"\n{url}")).validate().unwrap_err().to_string();
        assert!(error.contains("store.path (SQLite) and store.url (PostgreSQL)"), "{error}");
    }

    #[test]
    fn a_zone_is_read_from_its_file_or_copied_from_its_primaries_never_both() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_zone = |zone: &str| {
            std::fs::write(&path, format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[[zone]]\norigin = \"t\"\n{zone}\n")).unwrap();
            Config::from_file(&path).unwrap().problems().iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        let primaries = "primaries = [{ address = \"192.0.2.53:53\", key = \"k\" }]";
        assert_eq!(with_zone(primaries), Vec::<String>::new());
        assert_eq!(with_zone(&format!("{primaries}\nfile = \"z\"")), ["zone t: give either file or primaries, not both"]);
        assert_eq!(with_zone(""), ["zone t: give its file, or its primaries to copy it from"]);
        assert!(with_zone(&format!("{primaries}\ndnssec = true"))[0].contains("dnssec = true is for zones read from a file"));
        let bounds = with_zone(&format!("{primaries}\nrefresh_min_seconds = 10\nrefresh_max_seconds = 5"));
        assert_eq!(bounds, ["zone t: refresh_min_seconds 10 is 0 or above refresh_max_seconds 5"]);
    }

    #[test]
    fn reads_the_health_section_and_names_its_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_health = |health: &str| {
            let text = format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[health]\n{health}\n[[zone]]\norigin = \"t\"\nfile = \"z\"\n");
            std::fs::write(&path, text).unwrap();
            Config::from_file(&path).unwrap()
        };
        let config = with_health("node = \"fra-1\"\nprobe_address = { \"www.t/a\" = \"192.0.2.9\" }");
        config.validate().unwrap();
        assert_eq!(config.health.node_name(&config.server), "fra-1");
        let addresses = config.health.probe_addresses().unwrap();
        assert_eq!(addresses[&("www.t".to_owned(), "a".to_owned())], "192.0.2.9".parse::<std::net::IpAddr>().unwrap());
        let unnamed = with_health("");
        assert!(unnamed.health.node_name(&unnamed.server).ends_with("/127.0.0.1:5300"), "the host name and the listen address");
        for (health, expected) in [
            ("node = \" \"", "health.node is empty"),
            ("report_interval_ms = 10", "health.report_interval_ms = 10: must be at least 100"),
            ("stale_after_ms = 1500", "health.stale_after_ms = 1500: must be at least twice"),
            ("quorum = 1.0", "health.quorum = 1: must be at least 0 and less than 1"),
            ("probe_address = { \"www.t\" = \"192.0.2.9\" }", "\"www.t\" is not \"service/replica\""),
        ] {
            let error = with_health(health).validate().unwrap_err().to_string();
            assert!(error.contains(expected), "{health}: {error}");
        }
    }

    #[test]
    fn reads_the_dnstap_section_and_names_its_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_dnstap = |dnstap: &str| {
            std::fs::write(
                &path,
                format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[[zone]]\norigin = \"t\"\nfile = \"z\"\n[dnstap]\n{dnstap}\n"),
            )
            .unwrap();
            Config::from_file(&path).and_then(|config| config.validate().map(|()| config))
        };
        let config = with_dnstap("socket = \"/run/dnstap.sock\"\nsample = 10\nidentity = \"ns1\"").unwrap();
        let settings = config.dnstap.unwrap().settings().unwrap();
        assert_eq!(settings.destination, dnstap::Destination::Unix("/run/dnstap.sock".into()));
        assert_eq!((settings.sample, settings.identity.as_deref(), settings.version), (10, Some("ns1"), None));
        let config = with_dnstap("tcp = \"127.0.0.1:6000\"").unwrap();
        assert_eq!(config.dnstap.unwrap().settings().unwrap().sample, 1, "every query unless sampled");
        for (dnstap, expected) in [
            ("", "give exactly one of socket"),
            ("socket = \"/s\"\ntcp = \"127.0.0.1:6000\"", "give exactly one of socket"),
            ("socket = \"/s\"\nsample = 0", "dnstap.sample must be at least 1"),
            ("tcp = \"localhost:6000\"", "invalid socket address syntax"),
            ("unix = \"/s\"", "unknown field `unix`"),
        ] {
            let error = causes(&with_dnstap(dnstap).unwrap_err());
            assert!(error.contains(expected), "{dnstap}: {error}");
        }
    }

    #[test]
    fn reads_the_dnssec_settings_and_refuses_a_refresh_after_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_dnssec = |dnssec: &str| {
            let zone = "[[zone]]\norigin = \"t\"\nfile = \"z\"\ndnssec = true\n";
            std::fs::write(&path, format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[dnssec]\n{dnssec}\n{zone}")).unwrap();
            Config::from_file(&path).and_then(|config| config.validate().map(|()| config))
        };
        let config = with_dnssec("").unwrap();
        assert!(config.zones[0].dnssec);
        assert_eq!((config.dnssec.validity_seconds, config.dnssec.refresh_seconds), (1_209_600, 604_800));
        assert_eq!(with_dnssec("validity_seconds = 7200\nrefresh_seconds = 3600").unwrap().dnssec.refresh_seconds, 3600);
        let rollover = with_dnssec("propagation_seconds = 2\nds_ttl_seconds = 5").unwrap().dnssec;
        assert_eq!((rollover.propagation_seconds, rollover.ds_ttl_seconds), (2, 5));
        for (dnssec, expected) in [
            ("validity_seconds = 3600\nrefresh_seconds = 3600", "dnssec.refresh_seconds = 3600: must be at least 1 and less than"),
            ("refresh_seconds = 0", "dnssec.refresh_seconds = 0"),
            ("validity = 3600", "unknown field `validity`"),
        ] {
            let error = causes(&with_dnssec(dnssec).unwrap_err());
            assert!(error.contains(expected), "{dnssec}: {error}");
        }
    }

    #[test]
    fn reads_the_http_section_and_names_its_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let zone = "[[zone]]\norigin = \"t\"\nfile = \"z\"\n";
        let with_http = |http: &str| {
            std::fs::write(&path, format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[http]\n{http}\n{zone}")).unwrap();
            Config::from_file(&path).and_then(|config| config.validate().map(|()| config))
        };
        let config = with_http("listen = [\"[::]:80\"]\ntrusted_proxies = [\"10.0.0.0/8\"]\nproxy_protocol = true").unwrap();
        assert_eq!((config.http.listen.len(), config.http.proxy_protocol), (1, true));
        for (http, expected) in [
            ("listen = [\"[::]:80\"]\ntrusted_proxies = [\"10.0.0.1/8\"]", "http.trusted_proxies[0]: 10.0.0.1/8 has bits set past /8"),
            ("listen = [\"[::]:80\"]\nproxy_protocol = true", "http.proxy_protocol needs http.trusted_proxies"),
            ("trusted_proxies = [\"10.0.0.0/8\"]", "need http.listen or http.https_listen"),
            ("listen = [\"localhost\"]", "invalid socket address syntax"),
        ] {
            let error = causes(&with_http(http).unwrap_err());
            assert!(error.contains(expected), "{http}: {error}");
        }
    }

    #[test]
    fn reads_the_rrl_section_and_names_its_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let with_rrl = |rrl: &str| {
            std::fs::write(
                &path,
                format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[[zone]]\norigin = \"t\"\nfile = \"z\"\n[rrl]\n{rrl}\n"),
            )
            .unwrap();
            Config::from_file(&path).and_then(|config| config.validate().map(|()| config))
        };
        let config = with_rrl("rate = 20\nwhitelist = [\"192.0.2.0/24\", \"2001:db8::/32\"]").unwrap();
        let limits = config.rrl.as_ref().unwrap().limits().unwrap();
        assert_eq!((limits.rate.get(), limits.slip, limits.table_size.get()), (20, 2, 1 << 18), "Knot's slip by default");
        assert!(limits.whitelist.lookup("192.0.2.77".parse().unwrap()).value.is_some());
        assert!(config.response_rate_limit().unwrap().is_some());
        let config = with_rrl("rate = 5\nslip = 0\ntable_size = 100").unwrap();
        assert_eq!(config.rrl.unwrap().limits().unwrap().slip, 0);
        let off = Config::default();
        assert!(off.rrl.is_none() && off.response_rate_limit().unwrap().is_none(), "off unless configured");
        for (rrl, expected) in [
            ("rate = 0", "rrl.rate must be at least 1"),
            ("rate = 1\nslip = 11", "rrl.slip = 11: must be 0 (drop every limited response) to 10"),
            ("rate = 1\ntable_size = 0", "rrl.table_size must be at least 1"),
            ("rate = 1\nwhitelist = [\"192.0.2.0/33\"]", "rrl.whitelist"),
            ("slip = 1", "missing field `rate`"),
            ("rate = 1\nwindow = 2", "unknown field `window`"),
        ] {
            let error = causes(&with_rrl(rrl).unwrap_err());
            assert!(error.contains(expected), "{rrl}: {error}");
        }
    }

    #[test]
    fn reads_the_cookies_section_and_names_its_bad_values() {
        let parse = |text: &str| -> Result<Config, Box<dyn std::error::Error>> {
            let config = toml::from_str::<Config>(text)?;
            config.validate()?;
            Ok(config)
        };
        let zone = "[server]\nlisten = [\"127.0.0.1:5300\"]\n[[zone]]\norigin = \"t\"\nfile = \"z\"\n";
        assert_eq!(parse(&format!("{zone}[cookies]\n")).unwrap().cookies.unwrap().rotation_hours, 24);
        assert_eq!(parse(&format!("{zone}[cookies]\nrotation_hours = 1\n")).unwrap().cookies.unwrap().rotation_hours, 1);
        assert!(parse(zone).unwrap().cookies.is_none(), "off unless configured");
        for (cookies, expected) in [
            ("rotation_hours = 0", "cookies.rotation_hours = 0: must be 1 (a cookie lives an hour) to 8784"),
            ("rotation_hours = 9000", "cookies.rotation_hours = 9000"),
            ("secret = \"x\"", "unknown field `secret`"),
        ] {
            let error = causes(parse(&format!("{zone}[cookies]\n{cookies}\n")).unwrap_err().as_ref());
            assert!(error.contains(expected), "{cookies}: {error}");
        }
    }

    #[test]
    fn reads_the_catalog_section_and_names_its_bad_values() {
        let with_catalog = |catalog: &str| -> Result<Config, Box<dyn std::error::Error>> {
            let text =
                format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n[[zone]]\norigin = \"t.test\"\nfile = \"z\"\n[catalog]\n{catalog}\n");
            let config = toml::from_str::<Config>(&text)?;
            config.validate()?;
            crate::driver::response_settings::from_config(&config)?;
            Ok(config)
        };
        let catalog = with_catalog("zone = \"catalog.test.\"\nallow_transfer = [\"127.0.0.1/32\"]").unwrap().catalog.unwrap();
        assert_eq!(catalog.members, pharos_model::zone::CatalogMembers::All, "every zone unless told");
        let long = "a".repeat(64);
        for (section, expected) in [
            ("zone = \"T.test\"\nallow_transfer = [\"127.0.0.1/32\"]", "catalog.zone \"T.test\" is also a [[zone]]'s origin"),
            ("zone = \"catalog.test.\"", "catalog.allow_transfer is empty"),
            (&format!("zone = \"{long}.test\"\nallow_transfer = [\"127.0.0.1/32\"]"), "catalog.zone: \"aaaa"),
            ("zone = \"c.test\"\nmembers = \"some\"\nallow_transfer = [\"127.0.0.1/32\"]", "unknown variant `some`"),
            (
                "zone = \"c.test\"\nallow_transfer = [\"127.0.0.1/32\"]\ntransfer_keys = [\"k\"]",
                "catalog transfer_keys[0]: no [[tsig_key]]",
            ),
            ("zone = \"c.test\"\nallow_transfer = [\"127.0.0.1/33\"]", "catalog allow_transfer[0]"),
        ] {
            let error = causes(with_catalog(section).unwrap_err().as_ref());
            assert!(error.contains(expected), "{section}: {error}");
        }
    }

    #[test]
    fn takes_proxy_protocol_headers_only_from_the_prefixes_named() {
        let with_proxies = |from: &str| {
            let text =
                format!("[server]\nlisten = [\"127.0.0.1:5300\"]\nproxy_protocol_from = {from}\n[[zone]]\norigin = \"t\"\nfile = \"z\"\n");
            toml::from_str::<Config>(&text).unwrap()
        };
        assert!(with_proxies("[]").proxy_sources().unwrap().is_none(), "off unless configured");
        let config = with_proxies("[\"10.0.0.0/8\", \"::1/128\"]");
        config.validate().unwrap();
        assert!(config.proxy_sources().unwrap().is_some());
        let error = causes(&with_proxies("[\"10.0.0.0/33\"]").validate().unwrap_err());
        assert!(error.contains("server.proxy_protocol_from[0]: prefix length \"33\" must be 0 to 32"), "{error}");
    }

    #[test]
    fn reads_the_fastpath_section_and_names_its_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        let zone = "[[zone]]\norigin = \"t\"\nfile = \"z\"\n";
        let with_fastpath = |fastpath: &str| {
            std::fs::write(&path, format!("[server]\nlisten = [\"127.0.0.1:5300\"]\n{zone}[fastpath]\n{fastpath}\n")).unwrap();
            Config::from_file(&path).and_then(|config| config.validate().map(|()| config))
        };
        let config =
            with_fastpath("interfaces = [\"veth0\"]\nmode = \"native\"\n[fastpath.rate_limit]\nper_second = 100\nburst = 20").unwrap();
        assert_eq!((config.fastpath.interfaces.as_slice(), config.fastpath.mode), (&["veth0".to_string()][..], XdpMode::Native));
        assert_eq!(config.fastpath.max_entries, 65536);
        assert_eq!(config.fastpath.rate_limit, Some(RateLimitConfig { per_second: 100, burst: 20, over_limit: OverLimit::Pass }));
        let defaults = with_fastpath("").unwrap().fastpath;
        assert!(defaults.interfaces.is_empty() && defaults.mode == XdpMode::Auto && defaults.rate_limit.is_none());
        for (fastpath, expected) in [
            ("mode = \"fast\"", "unknown variant `fast`"),
            ("interfaces = [\"a\", \"\"]", "fastpath.interfaces[1]: \"\" is not an interface name"),
            ("interfaces = [\"a-very-long-interface\"]", "fastpath.interfaces[0]"),
            ("interfaces = [\"a\", \"a\"]", "fastpath.interfaces[1]: \"a\" is named twice"),
            ("max_entries = 0", "fastpath.max_entries = 0: must be 1 to 2147483647"),
            ("max_entries = 4000000000", "fastpath.max_entries = 4000000000: must be 1 to"),
            ("[fastpath.rate_limit]\nper_second = 0\nburst = 1", "fastpath.rate_limit.per_second must be at least 1"),
            ("[fastpath.rate_limit]\nper_second = 1\nburst = 0", "fastpath.rate_limit.burst must be at least 1"),
            ("[fastpath.rate_limit]\nper_second = 1\nburst = 1\nover_limit = \"reject\"", "unknown variant `reject`"),
            ("[fastpath.rate_limit]\nburst = 1", "missing field `per_second`"),
        ] {
            let error = causes(&with_fastpath(fastpath).unwrap_err());
            assert!(error.contains(expected), "{fastpath}: {error}");
        }
    }

    #[test]
    fn rejects_unknown_keys_and_bad_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pharos.toml");
        std::fs::write(&path, "[server]\nlisten = []\nlsiten = 1\n").unwrap();
        let err = causes(&Config::from_file(&path).unwrap_err());
        assert!(err.contains("lsiten"), "{err}");
        assert!(ZoneConfig::from_flag("example.test").is_err());
        assert!(ZoneConfig::from_flag("=file").is_err());
        assert!(Config::empty().validate().is_err());
    }
}
