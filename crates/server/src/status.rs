//! What the node shows of itself, read by the API, the metrics and the
//! control thread alike, and written by the part each describes: the
//! store it keeps its state in (`/v1/store`, `pharos ctl status`: the
//! engine, whether the node follows the changes other nodes make to a
//! shared one, the last change batch it applied; kept up to date by the
//! store's follower and the control thread), and the kernel fast path
//! (`/v1/fastpath`, kept by `crate::tasks::fastpath`).

use pharos_store::Following;
use serde::Serialize;

use crate::config::StoreConfig;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreStatus {
    /// `postgresql`, `sqlite`, or `memory`.
    pub engine: &'static str,
    /// `local` (no other node writes to it), `connecting` (not listening
    /// for other nodes' changes yet), `following` (listening), or
    /// `reconnecting` (the listening connection is lost, see `reason`).
    pub state: &'static str,
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

impl StoreStatus {
    /// The status of the store `config` names, before it is followed.
    pub fn new(config: &StoreConfig) -> StoreStatus {
        let (engine, state) = match (&config.url, &config.path) {
            (Some(_), _) => ("postgresql", "connecting"),
            (None, Some(_)) => ("sqlite", "local"),
            (None, None) => ("memory", "local"),
        };
        StoreStatus { engine, state, reason: None, last_sequence: 0, catch_up_error: None, serving_cache: None }
    }

    /// Takes the follower's news about its listening connection.
    pub fn follow(&mut self, news: &Following) {
        match news {
            Following::Listening => (self.state, self.reason) = ("following", None),
            Following::Lost(why) => (self.state, self.reason) = ("reconnecting", Some(why.clone())),
            Following::Notified(..) | Following::Look => {}
        }
    }

    /// Whether the state is kept beyond the process (a file or a database).
    pub fn persistent(&self) -> bool {
        self.engine != "memory"
    }
}

/// What `GET /v1/fastpath` shows.
#[derive(Debug, Clone, Serialize)]
pub struct FastPathStatus {
    /// "off" (not configured), "on", "suspended" (everything passes up)
    /// or "failed" (could not start).
    pub state: &'static str,
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

#[derive(Debug, Clone, Serialize)]
pub struct InterfaceStatus {
    pub name: String,
    /// The mode asked for; once attached, the one the kernel gave
    /// ("native" or "generic").
    pub mode: String,
    pub attached: bool,
    /// Why the program is not attached here.
    pub error: Option<String>,
    /// What the program did with this interface's packets (only in
    /// `crate::tasks::fastpath::KernelFastPath::status_now`; none before the first packet).
    pub traffic: Option<Traffic>,
}

/// What the program did with one interface's packets since it was loaded.
#[derive(Debug, Clone, Default, Serialize)]
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

#[derive(Debug, Clone, Default, Serialize)]
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

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SyncCounts {
    pub installed: usize,
    pub updated: usize,
    pub removed: usize,
    /// Answers beyond `max_entries`, left to user space.
    pub left_out: usize,
}

impl Default for FastPathStatus {
    fn default() -> FastPathStatus {
        FastPathStatus {
            state: "off",
            reason: None,
            interfaces: Vec::new(),
            last_sync: SyncCounts::default(),
            totals: SyncCounts::default(),
            syncs: 0,
            entries: 0,
            capacity: 0,
            admission_threshold: 0,
            counters_error: None,
            user_space_rate_limited: None,
        }
    }
}
