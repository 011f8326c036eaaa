//! What the node shows of itself, read by the API, the metrics and the
//! control thread alike, and written by the part each describes: the
//! store it keeps its state in (`/v1/store`, `pharos ctl status`: the
//! engine, whether the node follows the changes other nodes make to a
//! shared one, the last change batch it applied; kept up to date by the
//! store's follower and the control thread), and the kernel fast path
//! (`/v1/fastpath`, kept by `crate::tasks::fastpath`). The types are
//! `pharos_model`'s, which `pharos ctl` reads them back with.

pub use pharos_model::status::{
    FastPathState, FastPathStatus, InterfaceStatus, Misses, StoreEngine, StoreState, StoreStatus, SyncCounts, Traffic,
};
use pharos_store::Following;

use crate::config::StoreConfig;

/// The engine that keeps the store `config` names.
pub fn store_engine(config: &StoreConfig) -> StoreEngine {
    match (&config.url, &config.path) {
        (Some(_), _) => StoreEngine::PostgreSql,
        (None, Some(_)) => StoreEngine::Sqlite,
        (None, None) => StoreEngine::Memory,
    }
}

/// Takes the follower's news about its listening connection into `status`.
pub fn follow(status: &mut StoreStatus, news: &Following) {
    match news {
        Following::Listening => status.listening(),
        Following::Lost(why) => status.lost(why.clone()),
        Following::Notified(..) | Following::Look => {}
    }
}
