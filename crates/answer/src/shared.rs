//! The live snapshot every transport reads: published by the control
//! plane with one atomic pointer swap; readers never lock. Here, beside
//! [`Snapshot`], so that the control plane that writes it and the
//! transports that read it need not know each other.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::Snapshot;

/// The snapshot every transport reads.
pub type SharedSnapshot = Arc<ArcSwap<Snapshot>>;
