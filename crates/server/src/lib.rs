//! The parts of Pharos that touch the world: sockets, threads, signals and
//! files. Each transport (UDP, TCP, TLS, HTTPS, QUIC) is a loop that hands
//! bytes to [`pharos_answer::respond`] with the current [`Snapshot`].

mod api;
mod certificate;
mod classifier;
pub mod config;
pub mod control;
pub mod data;
mod descriptors;
mod doh;
mod doq;
pub mod health;
mod http;
pub mod plane;
mod prober;
mod redirect;
pub mod registry;
mod scheduling;
pub mod snapshot;
pub mod tcp;
mod tls;
pub mod udp;

mod run;

pub use config::Config;
pub use control::Control;
pub use plane::ControlHandle;
pub use redirect::redirect_target;
pub use run::{Server, run};
pub use snapshot::SharedSnapshot;
