//! Pharos assembled, in layers that import only downwards:
//!
//! - [`config`]: the configuration file's schema and its checks, and
//!   [`artemis`]'s section of it with the addresses it gives services;
//! - [`data`]: the address and measurement data the routing core reads
//!   (BGP, GeoIP, latencies), loaded and described;
//! - [`status`]: what the node shows of its store and its kernel fast path,
//!   read by everyone; [`observe`]: what it has seen (the split delivered
//!   against the configured one, recent queries and events, the control
//!   thread's activity); [`published`]: all of it, and the state, as the
//!   control thread publishes it for readers that never wait on it;
//! - [`tasks`]: what runs beside the control thread: health and load
//!   probes, NOTIFYs to secondaries, the external region classifier, and
//!   the kernel fast path kept in step with every snapshot (the one module
//!   that calls `pharos-xdp`);
//! - [`driver`]: the control plane's I/O around its rules
//!   (`pharos_control::plane::Plane`): [`ControlShell`], which owns the
//!   store and the files and does what the rules decide; [`ControlThread`],
//!   the thread that runs the shell with the clock, and the handle the API
//!   talks to it through; zones' DNSSEC keys as the API and `pharos key`
//!   step them, the secrets a fleet shares, and a node's local copy of a
//!   shared store's state;
//! - `api`: the HTTP control API, its Prometheus metrics and the dashboard;
//! - [`run`]: starts the driver, the API, the dnstap query log and the
//!   transports of `pharos_transport` over one shared snapshot, gives up
//!   root (`privileges`), and reloads, drains and stops them on signals,
//!   telling the service manager each step (`service_manager`).
//!   [`scheduling`] gives the background threads their priority below the
//!   query path's;
//! - [`check`]: everything `run` would load, loaded without serving
//!   (`pharos check`, and before each reload).

mod api;
pub mod artemis;
pub mod check;
pub mod config;
pub mod data;
pub mod driver;
pub mod observe;
mod privileges;
pub mod published;
mod run;
mod scheduling;
mod service_manager;
pub mod status;
pub mod tasks;
mod updates;

pub use api::ApiStartError;
pub use config::Config;
pub use driver::shell::ControlShell;
pub use driver::thread::ControlThread;
pub use run::{Server, ServerError, run};

/// Whether this build carries the kernel fast path's XDP program (it is
/// left out where clang or libbpf-dev was missing at build time).
pub fn fast_path_built() -> bool {
    pharos_xdp::PROGRAM.is_some()
}
