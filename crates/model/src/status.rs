//! What a node shows of itself through the API and `pharos ctl`: the
//! store it keeps its state in (`/v1/store`), the kernel fast path
//! (`/v1/fastpath`), the proximity data (`/v1/data`) and its secondary
//! zones (`/v1/secondary`). The server
//! writes them, `pharos ctl` reads them back; each state is an enum whose
//! JSON is the word the API has always shown.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What `GET /v1/store` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreStatus {
    pub engine: StoreEngine,
    pub state: StoreState,
    /// Why the node is not following.
    pub reason: Option<String>,
    /// The sequence of the last change batch the node's state holds.
    pub last_sequence: u64,
    /// Why the batches after `last_sequence` could not be applied, if the
    /// last try failed.
    pub catch_up_error: Option<String>,
    /// Set while the node serves the state it cached locally, because the
    /// database could not be reached when it started: says so.
    pub serving_cache: Option<String>,
}

/// Where the routing state is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreEngine {
    /// A database shared by a fleet.
    PostgreSql,
    /// A file of this node's.
    Sqlite,
    /// Nowhere beyond the process.
    Memory,
}

impl StoreEngine {
    /// The word the API shows.
    pub fn name(self) -> &'static str {
        match self {
            StoreEngine::PostgreSql => "postgresql",
            StoreEngine::Sqlite => "sqlite",
            StoreEngine::Memory => "memory",
        }
    }
}

/// Whether a node follows the changes other nodes make to its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreState {
    /// No other node writes to the store.
    Local,
    /// Not listening for other nodes' changes yet.
    Connecting,
    /// Listening for them.
    Following,
    /// The listening connection is lost (the status's `reason` says why).
    Reconnecting,
}

impl StoreState {
    /// The word the API shows.
    pub fn name(self) -> &'static str {
        match self {
            StoreState::Local => "local",
            StoreState::Connecting => "connecting",
            StoreState::Following => "following",
            StoreState::Reconnecting => "reconnecting",
        }
    }
}

impl StoreStatus {
    /// The status of a store kept by `engine`, before it is followed.
    pub fn new(engine: StoreEngine) -> StoreStatus {
        let state = if engine == StoreEngine::PostgreSql { StoreState::Connecting } else { StoreState::Local };
        StoreStatus { engine, state, reason: None, last_sequence: 0, catch_up_error: None, serving_cache: None }
    }

    /// The node listens for the other nodes' changes.
    pub fn listening(&mut self) {
        (self.state, self.reason) = (StoreState::Following, None);
    }

    /// The node lost its listening connection, for `why`.
    pub fn lost(&mut self, why: String) {
        (self.state, self.reason) = (StoreState::Reconnecting, Some(why));
    }

    /// Whether the state is kept beyond the process (a file or a database).
    pub fn persistent(&self) -> bool {
        self.engine != StoreEngine::Memory
    }
}

/// What `GET /v1/fastpath` shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FastPathStatus {
    pub state: FastPathState,
    /// Why the fast path is suspended or failed.
    pub reason: Option<String>,
    pub interfaces: Vec<InterfaceStatus>,
    /// What the last snapshot changed in the kernel's answers.
    pub last_sync: SyncCounts,
    /// Every change since the start.
    pub totals: SyncCounts,
    pub syncs: u64,
    /// Questions the kernel answers, and how many it may hold.
    pub entries: usize,
    pub capacity: u32,
    /// Above capacity, the most asked answers are installed: how often the
    /// least asked of them was asked (recent counts weigh more). 0 when
    /// every answer fits.
    pub admission_threshold: u64,
    /// Why the interfaces' traffic counters could not be read, if so.
    pub counters_error: Option<String>,
    /// UDP queries user space dropped over their source's rate limit;
    /// `None` without `[fastpath.rate_limit]`.
    pub user_space_rate_limited: Option<u64>,
}

/// Whether the kernel answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FastPathState {
    /// Not configured.
    #[default]
    Off,
    On,
    /// Everything passes up to user space.
    Suspended,
    /// It could not start.
    Failed,
}

impl FastPathState {
    /// The word the API shows.
    pub fn name(self) -> &'static str {
        match self {
            FastPathState::Off => "off",
            FastPathState::On => "on",
            FastPathState::Suspended => "suspended",
            FastPathState::Failed => "failed",
        }
    }
}

impl FastPathStatus {
    /// The kernel answers what the last snapshot, `synced`, made it answer:
    /// `entries` questions, the least asked of them `admission_threshold`
    /// times if not all fit.
    pub fn record_sync(&mut self, synced: SyncCounts, entries: usize, admission_threshold: u64) {
        self.last_sync = synced;
        self.totals.add(synced);
        self.syncs += 1;
        self.entries = entries;
        self.admission_threshold = admission_threshold;
    }

    /// The fast path answers nothing any more (`state`), for `reason`.
    pub fn fail(&mut self, state: FastPathState, reason: String) {
        self.state = state;
        self.reason = Some(reason);
        self.entries = 0;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InterfaceStatus {
    pub name: String,
    /// The mode asked for; once attached, the one the kernel gave
    /// ("native" or "generic").
    pub mode: String,
    pub attached: bool,
    /// Why the program is not attached here.
    pub error: Option<String>,
    /// What the program did with this interface's packets (only when the
    /// counters were read just now; none before the first packet).
    pub traffic: Option<Traffic>,
}

/// What the program did with one interface's packets since it was loaded.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Traffic {
    pub answered_static: u64,
    pub answered_routed: u64,
    /// Over the source's rate limit: passed up, or dropped.
    pub rate_limited_passed: u64,
    pub rate_limited_dropped: u64,
    /// Over the response rate limit (`[rrl]`): sent truncated, or dropped.
    pub rrl_slipped: u64,
    pub rrl_dropped: u64,
    /// Every packet passed up, whatever the reason (the rate-limited ones
    /// passed up included).
    pub passed_up: u64,
    /// The DNS queries among them, by why the kernel did not answer.
    pub misses: Misses,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Misses {
    /// No reply for the question in the kernel's map.
    pub no_entry: u64,
    /// The reply is larger than the client takes.
    pub too_large: u64,
    /// EDNS version above 0, EDNS options, or more than one additional
    /// record (a signed query's OPT and TSIG records).
    pub edns_unsupported: u64,
    /// A response, another opcode, a compressed or malformed question, an
    /// additional record other than OPT (a signed query's TSIG alone).
    pub not_a_plain_query: u64,
    /// IPv4 fragments or options, IPv6 extension headers.
    pub fragment_or_options: u64,
    /// The packet could not be grown to the reply's length.
    pub adjust_tail_failed: u64,
    /// The fast path was suspended.
    pub suspended: u64,
    /// The query's UDP checksum was wrong (or absent over IPv6).
    pub bad_checksum: u64,
}

impl Misses {
    /// Each count with its name in the JSON, the names in alphabetical
    /// order.
    pub fn named(&self) -> [(&'static str, u64); 8] {
        [
            ("adjust_tail_failed", self.adjust_tail_failed),
            ("bad_checksum", self.bad_checksum),
            ("edns_unsupported", self.edns_unsupported),
            ("fragment_or_options", self.fragment_or_options),
            ("no_entry", self.no_entry),
            ("not_a_plain_query", self.not_a_plain_query),
            ("suspended", self.suspended),
            ("too_large", self.too_large),
        ]
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SyncCounts {
    pub installed: usize,
    pub updated: usize,
    pub removed: usize,
    /// Answers beyond `max_entries`, left to user space.
    pub left_out: usize,
}

impl SyncCounts {
    pub fn add(&mut self, other: SyncCounts) {
        self.installed += other.installed;
        self.updated += other.updated;
        self.removed += other.removed;
        self.left_out += other.left_out;
    }
}

/// What an operator sees of the proximity data (`GET /v1/data`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DataStatus {
    pub bgp: BgpStatus,
    pub latency: LatencyStatus,
    /// The MaxMind DB in use, if one is configured.
    pub geo: Option<DataFile>,
    /// The IP-to-AS table in use, if one is configured.
    pub asn_table: Option<DataFile>,
}

/// A data file read at start or reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataFile {
    pub file: PathBuf,
    /// When the data was made (Unix seconds): a MaxMind DB's build time,
    /// else the file's modification time.
    pub made_at: u64,
    /// When this server read it (Unix seconds).
    pub loaded_at: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BgpStatus {
    pub state: BgpState,
    pub file: Option<PathBuf>,
    /// The table serving now.
    pub loaded: Option<BgpSummary>,
    /// Why the last load failed.
    pub error: Option<String>,
}

/// Where the BGP tables are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BgpState {
    #[default]
    #[serde(rename = "not configured")]
    NotConfigured,
    Loading,
    Loaded,
    /// The last good table, if any, keeps serving.
    Failed,
}

impl BgpState {
    /// The word the API shows.
    pub fn name(self) -> &'static str {
        match self {
            BgpState::NotConfigured => "not configured",
            BgpState::Loading => "loading",
            BgpState::Loaded => "loaded",
            BgpState::Failed => "failed",
        }
    }
}

impl BgpStatus {
    /// The state before any load of `table` (if one is configured) has
    /// finished.
    pub fn configured(table: Option<PathBuf>) -> BgpStatus {
        let state = if table.is_some() { BgpState::Loading } else { BgpState::NotConfigured };
        BgpStatus { state, file: table, loaded: None, error: None }
    }
}

/// The numbers of a loaded BGP table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BgpSummary {
    pub file: PathBuf,
    pub routes: u64,
    pub prefixes_v4: usize,
    pub prefixes_v6: usize,
    pub ases: usize,
    pub links: usize,
    pub origin_conflicts: u64,
    pub as_set_paths: u64,
    /// Routes that gave no origin AS, by the rule that dropped them.
    pub routes_without_origin: RoutesWithoutOrigin,
    pub memory_bytes: usize,
    pub load_seconds: f64,
    pub loaded_at: u64,
}

/// Routes a table holds that name no one's clients.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoutesWithoutOrigin {
    pub default_routes: u64,
    /// Shorter than `bgp.min_prefix_length_v4` or `_v6`.
    pub too_short: u64,
    /// In special-purpose space (RFC 6890).
    pub special_purpose: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LatencyStatus {
    /// Fresh measurements in use.
    pub measurements: usize,
    pub max_age_seconds: u64,
    /// When the oldest one in use stops counting (Unix seconds).
    pub next_expiry: Option<u64>,
}

impl LatencyStatus {
    /// How old the oldest measurement in use is at `now` (Unix seconds).
    pub fn oldest_age(&self, now: u64) -> Option<u64> {
        let measured_at = self.next_expiry?.saturating_sub(self.max_age_seconds);
        Some(now.saturating_sub(measured_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_measurement_was_taken_its_maximum_age_before_it_expires() {
        let latency = LatencyStatus { measurements: 2, max_age_seconds: 30, next_expiry: Some(1_000_010) };
        assert_eq!(latency.oldest_age(1_000_000), Some(20));
        assert_eq!(LatencyStatus::default().oldest_age(1_000_000), None, "no measurement, no age");
    }

    /// The JSON of `states` and their names, which must be the same words.
    fn words<T: Serialize + Copy>(states: &[T], name: fn(T) -> &'static str) -> (Vec<String>, Vec<&'static str>) {
        let json = states.iter().map(|state| serde_json::to_value(state).unwrap().as_str().unwrap().to_owned()).collect();
        (json, states.iter().map(|state| name(*state)).collect())
    }

    #[test]
    fn each_state_is_the_word_the_api_has_always_shown() {
        let engines = words(&[StoreEngine::PostgreSql, StoreEngine::Sqlite, StoreEngine::Memory], StoreEngine::name);
        assert_eq!(engines, (["postgresql", "sqlite", "memory"].map(String::from).to_vec(), vec!["postgresql", "sqlite", "memory"]));
        let states = [StoreState::Local, StoreState::Connecting, StoreState::Following, StoreState::Reconnecting];
        let expected = ["local", "connecting", "following", "reconnecting"];
        assert_eq!(words(&states, StoreState::name), (expected.map(String::from).to_vec(), expected.to_vec()));
        let states = [FastPathState::Off, FastPathState::On, FastPathState::Suspended, FastPathState::Failed];
        let expected = ["off", "on", "suspended", "failed"];
        assert_eq!(words(&states, FastPathState::name), (expected.map(String::from).to_vec(), expected.to_vec()));
        let states = [BgpState::NotConfigured, BgpState::Loading, BgpState::Loaded, BgpState::Failed];
        let expected = ["not configured", "loading", "loaded", "failed"];
        assert_eq!(words(&states, BgpState::name), (expected.map(String::from).to_vec(), expected.to_vec()));
    }

    #[test]
    fn the_misses_are_named_as_their_fields_in_alphabetical_order() {
        let misses = Misses { no_entry: 1, too_large: 2, bad_checksum: 3, ..Misses::default() };
        let json = serde_json::to_value(&misses).unwrap();
        let named: Vec<(String, u64)> = misses.named().iter().map(|(name, count)| (name.to_string(), *count)).collect();
        let fields: Vec<(String, u64)> =
            json.as_object().unwrap().iter().map(|(name, count)| (name.clone(), count.as_u64().unwrap())).collect();
        assert_eq!(named, fields, "serde_json's map is ordered by name");
    }
}

/// One secondary zone, as `GET /v1/secondary` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondaryStatus {
    /// The zone's origin.
    pub zone: String,
    /// The serial of the copy served (the primary's); `None` before the
    /// first transfer.
    pub serial: Option<u32>,
    /// When a primary last gave or confirmed the copy (Unix ms).
    pub last_refresh: Option<u64>,
    /// When the primaries are next asked (Unix ms); `None` while asking.
    pub next_check: Option<u64>,
    /// No copy, or none confirmed within the SOA's expire time: the
    /// zone is answered SERVFAIL.
    pub expired: bool,
    /// Why the last check or transfer failed, until one succeeds.
    pub last_error: Option<String>,
}
