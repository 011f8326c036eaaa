//! The kernel fast path as the server runs it: started with the server
//! (load, fill from the first snapshot, attach to each interface), kept in
//! step with every snapshot the control plane publishes, suspended when
//! that fails, detached when dropped. Every call into `pharos-xdp` is
//! here. The fast path is an optimisation: whatever goes wrong with it is
//! logged and shown in its status, and the server goes on answering from
//! user space.

use std::sync::Arc;

use pharos_answer::Snapshot;
use pharos_xdp::{FastPath, FastPathError, Mode, ResponseLimit, Settings, Synced};

use crate::config::{Config, FastPathConfig, OverLimit, RrlConfig, RrlError, XdpMode};
use crate::published::Published;
use crate::status::{FastPathState, FastPathStatus, InterfaceStatus, Misses, SyncCounts, Traffic};
use pharos_wire::causes;

/// What an interface's counters say the program did with its packets.
fn traffic(counters: &pharos_xdp::InterfaceCounters) -> Traffic {
    let misses = Misses {
        no_entry: counters.no_entry,
        too_large: counters.too_large,
        edns_unsupported: counters.edns_unsupported,
        not_a_plain_query: counters.not_a_plain_query,
        fragment_or_options: counters.fragment_or_options,
        adjust_tail_failed: counters.adjust_tail_failed,
        suspended: counters.suspended,
        bad_checksum: counters.bad_checksum,
    };
    let Misses {
        no_entry,
        too_large,
        edns_unsupported,
        not_a_plain_query,
        fragment_or_options,
        adjust_tail_failed,
        suspended,
        bad_checksum,
    } = misses;
    let passed_up = counters.not_for_us
        + counters.rate_limited_passed
        + no_entry
        + too_large
        + edns_unsupported
        + not_a_plain_query
        + fragment_or_options
        + adjust_tail_failed
        + suspended
        + bad_checksum;
    Traffic {
        answered_static: counters.answered_static,
        answered_routed: counters.answered_routed,
        rate_limited_passed: counters.rate_limited_passed,
        rate_limited_dropped: counters.rate_limited_dropped,
        rrl_slipped: counters.rrl_slipped,
        rrl_dropped: counters.rrl_dropped,
        passed_up,
        misses,
    }
}

/// What a sync changed in the kernel's answers.
fn sync_counts(synced: Synced) -> SyncCounts {
    SyncCounts { installed: synced.installed, updated: synced.updated, removed: synced.removed, left_out: synced.left_out }
}

/// The running fast path.
pub struct KernelFastPath {
    /// `None` when off: not configured, or it could not start.
    loaded: Option<FastPath>,
    status: FastPathStatus,
    /// Where readers that never queue find the status.
    published: Arc<Published>,
}

impl KernelFastPath {
    /// Starts the fast path `config` asks for, filled from `snapshot`. It
    /// never fails: a fast path that cannot run is logged once, with why,
    /// and shown in the status.
    pub fn start(config: &Config, snapshot: &Snapshot, published: Arc<Published>) -> KernelFastPath {
        let mut status = FastPathStatus { capacity: config.fastpath.max_entries, ..FastPathStatus::default() };
        let loaded = if config.fastpath.interfaces.is_empty() { None } else { load_and_attach(config, snapshot, &mut status) };
        published.fastpath.store(Arc::new(status.clone()));
        KernelFastPath { loaded, status, published }
    }

    /// The status with each interface's traffic read from the kernel now;
    /// if they cannot be read, the status says why in `counters_error`.
    pub fn status_now(&self) -> FastPathStatus {
        let mut status = self.status.clone();
        let Some(fast_path) = &self.loaded else { return status };
        match fast_path.counters() {
            Ok(counters) => {
                for interface in &mut status.interfaces {
                    let seen = counters.interfaces.iter().find(|counted| counted.interface.as_deref() == Some(interface.name.as_str()));
                    interface.traffic = seen.map(traffic);
                }
            }
            Err(error) => status.counters_error = Some(causes(&error)),
        }
        status
    }

    /// Makes the kernel answer what `snapshot` answers, in one swap;
    /// called right before user space serves `snapshot`. On failure the
    /// fast path is suspended (every query passes up: still exact, only
    /// slower) until a later snapshot is written whole.
    pub fn sync(&mut self, snapshot: &Snapshot) {
        let Some(fast_path) = &mut self.loaded else { return };
        match fast_path.sync(snapshot) {
            Ok(synced) => {
                if self.status.state == FastPathState::Suspended {
                    tracing::info!("kernel fast path answering again");
                }
                self.status.state = FastPathState::On;
                self.status.reason = None;
                record_sync(&mut self.status, synced, fast_path);
            }
            Err(error) => {
                let reason = format!("writing the new snapshot into the kernel failed: {}", causes(&error));
                tracing::error!("kernel fast path suspended, every query passes up to user space: {reason}");
                if let Err(error) = fast_path.suspend() {
                    // Unsure what the kernel would answer from: detach.
                    tracing::error!("cannot suspend the kernel fast path, detaching it: {}", causes(&error));
                    self.loaded = None;
                    self.status.interfaces.iter_mut().for_each(|interface| interface.attached = false);
                }
                self.status.fail(FastPathState::Suspended, reason);
            }
        }
        self.published.fastpath.store(Arc::new(self.status.clone()));
    }
}

/// The line `explain` adds: whether the kernel answers `name` (wire form)
/// for `qtype` in `snapshot`, or why it passes it up, or that it is off.
pub fn explain(status: &FastPathStatus, snapshot: &Snapshot, name: &[u8], qtype: u16) -> String {
    if status.state != FastPathState::On {
        return "kernel fast path: off".into();
    }
    match pharos_xdp::kernel_path(snapshot, name, qtype) {
        pharos_xdp::KernelPath::PassesUp(reason) => format!("kernel fast path: passes up: {reason}"),
        answered => format!("kernel fast path: {answered}"),
    }
}

/// Loads the program, fills it from `snapshot` and attaches it to every
/// configured interface, recording each step in `status`; `None` when it
/// answers nowhere.
fn load_and_attach(config: &Config, snapshot: &Snapshot, status: &mut FastPathStatus) -> Option<FastPath> {
    let wanted = &config.fastpath;
    let loaded = settings(config).and_then(|settings| {
        let mut fast_path = FastPath::load(&settings)?;
        let synced = fast_path.sync(snapshot)?;
        Ok((fast_path, synced))
    });
    let mut fast_path = match loaded {
        Ok((fast_path, synced)) => {
            record_sync(status, synced, &fast_path);
            fast_path
        }
        Err(error) => {
            status.interfaces = wanted.interfaces.iter().map(|name| detached(name, wanted.mode, None)).collect();
            return off(status, format!("cannot load the XDP program: {}{}", causes(&error), root_hint()));
        }
    };
    status.interfaces = wanted.interfaces.iter().map(|name| attach(&mut fast_path, name, wanted.mode)).collect();
    let failures: Vec<String> =
        status.interfaces.iter().filter_map(|interface| Some(format!("{}: {}", interface.name, interface.error.as_ref()?))).collect();
    let attached: Vec<&str> =
        status.interfaces.iter().filter(|interface| interface.attached).map(|interface| interface.name.as_str()).collect();
    if attached.is_empty() {
        return off(status, format!("not attached to any interface: {}", failures.join("; ")));
    }
    if !failures.is_empty() {
        tracing::warn!("kernel fast path not attached to every interface, the others pass everything up: {}", failures.join("; "));
    }
    tracing::info!(interfaces = ?attached, entries = status.entries, "kernel fast path answering");
    status.state = FastPathState::On;
    Some(fast_path)
}

fn attach(fast_path: &mut FastPath, name: &str, wanted: XdpMode) -> InterfaceStatus {
    match fast_path.attach(name, mode(wanted)) {
        Ok(attached) => InterfaceStatus { name: name.into(), mode: attached.mode.to_string(), attached: true, error: None, traffic: None },
        Err(error) => detached(name, wanted, Some(causes(&error))),
    }
}

/// Records in `status` that the fast path could not start, and logs why,
/// once.
fn off(status: &mut FastPathStatus, reason: String) -> Option<FastPath> {
    tracing::warn!("kernel fast path off, serving from user space only: {reason}");
    status.fail(FastPathState::Failed, reason);
    None
}

/// Records in `status` what `synced` changed in the kernel's answers.
fn record_sync(status: &mut FastPathStatus, synced: Synced, fast_path: &FastPath) {
    let occupancy = fast_path.occupancy();
    status.record_sync(sync_counts(synced), occupancy.installed, occupancy.threshold);
}

/// An interface the program is not attached to, for `error` if any.
fn detached(name: &str, mode: XdpMode, error: Option<String>) -> InterfaceStatus {
    InterfaceStatus { name: name.to_string(), mode: mode.name().to_string(), attached: false, error, traffic: None }
}

/// Why the kernel fast path cannot be loaded.
#[derive(Debug, thiserror::Error)]
enum LoadError {
    /// `[rrl]`, which the program applies to its own answers too.
    #[error("invalid fast path settings")]
    ResponseLimit(#[source] RrlError),
    #[error(transparent)]
    FastPath(#[from] FastPathError),
}

/// What the kernel program takes of the configuration.
fn settings(config: &Config) -> Result<Settings, LoadError> {
    let FastPathConfig { max_entries, rate_limit, .. } = &config.fastpath;
    let mut ports: Vec<u16> = config.server.listen.iter().map(|address| address.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    let rate_limit = rate_limit.map(|limit| pharos_xdp::RateLimit {
        per_second: limit.per_second,
        burst: limit.burst,
        over_limit: match limit.over_limit {
            OverLimit::Pass => pharos_xdp::OverLimit::Pass,
            OverLimit::Drop => pharos_xdp::OverLimit::Drop,
        },
    });
    let response_limit = config.rrl.as_ref().map(response_limit).transpose()?;
    Ok(Settings { ports, max_entries: *max_entries, rate_limit, response_limit })
}

/// `[rrl]` as the kernel program applies it to its own answers.
fn response_limit(rrl: &RrlConfig) -> Result<ResponseLimit, LoadError> {
    let limits = rrl.limits().map_err(LoadError::ResponseLimit)?;
    let whitelist = limits.whitelist.prefixes().into_iter().map(|(network, length, ())| (network, length)).collect();
    Ok(ResponseLimit { rate: limits.rate.get(), slip: limits.slip, table_size: limits.table_size.get(), whitelist })
}

fn mode(mode: XdpMode) -> Mode {
    match mode {
        XdpMode::Auto => Mode::Auto,
        XdpMode::Native => Mode::Native,
        XdpMode::Generic => Mode::Generic,
    }
}

/// Loading BPF programs needs root (CAP_BPF and CAP_NET_ADMIN): said when
/// that is the likely cause.
fn root_hint() -> &'static str {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 { "" } else { " (not running as root: loading XDP programs needs CAP_BPF and CAP_NET_ADMIN)" }
}
