//! The rules of the Pharos control plane, without I/O: what an operator
//! may declare and how it is checked ([`spec`], every error naming the
//! field to fix), the routing state those declarations make ([`State`],
//! changed by [`Change`]s), how replicas are probed and how probe results
//! become up and down ([`probe`]), and how load reports become region
//! probabilities ([`load_control`]). No sockets, threads or clocks: the
//! server drives these rules and passes the time in.

pub mod load_control;
pub mod probe;
pub mod spec;
mod state;

pub use spec::SpecError;
pub use state::{Change, State};
