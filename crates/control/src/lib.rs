//! The rules of the Pharos control plane, without I/O. [`plane::Plane`] is
//! the state machine the server drives: each input (a commit, a probe
//! result, a load report, a batch of latency measurements, a timer) takes
//! the time and returns its effects. It is built from: the declarations and
//! their checks ([`spec`], built by [`build`], every error naming the field to fix), each
//! service built again only when what it is built from changed
//! ([`services`]); the routing state they make ([`State`], changed by [`Change`]s that the
//! operator's [`edit`]s compute, committed in groups by [`group`]); latency
//! measurements checked before they are kept ([`check_measurements`]);
//! probes and their hysteresis ([`probe`], [`health`]), weighed with the
//! other nodes' on a shared store ([`quorum`]); load control in
//! timed rounds ([`load_control`], [`load`]); and the one builder of the
//! snapshot the query path answers from, which moves a zone's serial when
//! what a secondary would transfer of it changes ([`snapshot`]). No sockets,
//! threads or clocks: times are Unix milliseconds, passed in.

pub mod build;
pub mod edit;
mod error;
pub mod group;
pub mod health;
pub mod load;
pub mod load_control;
mod measurement;
pub mod plane;
pub mod probabilities;
pub mod probe;
pub mod quorum;
pub mod services;
pub mod snapshot;
pub mod spec;
mod state;

pub use error::ControlError;
pub use error::SpecError;
pub use measurement::{Measurement, check_measurements};
pub use state::{Change, State};
