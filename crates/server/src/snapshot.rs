//! The live snapshot every transport reads: published by the control
//! plane with one atomic pointer swap; readers never lock.

use std::sync::Arc;

use arc_swap::ArcSwap;
use pharos_answer::Snapshot;

/// The snapshot every transport reads.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;
