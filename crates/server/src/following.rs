//! What a node knows of the store it keeps its state in (`/v1/store`,
//! `pharos ctl status`): the engine, whether the node follows the changes
//! other nodes make to a shared one, and the last change batch it applied.
//! The store's follower (its listening connection) and the control thread
//! each keep their part up to date.

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
