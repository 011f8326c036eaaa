//! What runs beside the control thread, started and fed by it.

pub(crate) mod classifier;
pub mod fastpath;
pub mod notify;
pub(crate) mod prober;
pub mod secondary;
