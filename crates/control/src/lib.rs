//! The rules of the Pharos control plane, without I/O: what an operator
//! may declare and how it is checked ([`spec`], every error naming the
//! field to fix), the routing state those declarations make ([`State`],
//! changed by [`Change`]s that the operator's [`edit`]s compute, committed
//! in groups ([`group`])), latency
//! measurements checked before they are kept ([`check_measurements`]),
//! how replicas are probed and how probe results become up and down
//! ([`probe`], [`health`]), and how load reports become region
//! probabilities in timed rounds ([`load_control`], [`load`]); and the one builder of the snapshot the query path
//! answers from ([`snapshot`]). No sockets, threads or clocks: the server drives
//! these rules and passes the time in.

pub mod edit;
mod error;
pub mod group;
pub mod health;
pub mod load;
pub mod load_control;
mod measurement;
pub mod plane;
pub mod probe;
pub mod snapshot;
pub mod spec;
mod state;

pub use error::ControlError;
pub use measurement::{Measurement, check_measurements};
pub use spec::SpecError;
pub use state::{Change, State};
