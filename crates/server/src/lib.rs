//! Pharos assembled: the configuration ([`config`]), the driver of the
//! control plane whose rules are `pharos_control` (`control`, `plane`: its
//! thread, the store and the clock, with health and load probes in
//! `prober` and, on a shared store, health weighed by the fleet's quorum, address and measurement data in `data`, the external region
//! classifier in `classifier`, and their thread priorities in
//! `scheduling`), the kernel fast path it keeps in step with every
//! snapshot ([`fastpath`], the one module that calls `pharos-xdp`), what
//! the node knows of its store and of following it ([`following`]) and
//! its local copy of a shared store's state (`state_cache`), zones'
//! DNSSEC keys as the API and `pharos key` step them ([`keys`]), its
//! HTTP API (`api`) with its Prometheus metrics ([`metrics`]), the NOTIFYs
//! that tell secondaries a zone changed ([`notify`]), Artemis's
//! service addresses ([`artemis`]), the split delivered against the
//! configured one ([`split`]), the recent query rate and events
//! ([`history`]) and the operator's web page that shows them all
//! (`dashboard`), and [`run`], which starts the
//! control plane, the API, the dnstap query log and the transports of `pharos_transport` over
//! one shared snapshot, and reloads and stops them on signals.

mod api;
pub mod artemis;
mod classifier;
pub mod config;
pub mod control;
mod dashboard;
pub mod data;
pub mod fastpath;
pub mod following;
pub mod history;
pub mod keys;
pub mod metrics;
pub mod notify;
pub mod plane;
mod prober;
mod scheduling;
pub mod split;
mod state_cache;

mod run;

pub use config::Config;
pub use control::Control;
pub use plane::ControlHandle;
pub use run::{Server, run};
