//! What the store, the control plane, the API and `pharos ctl` share: the
//! declarations an operator makes (data centers, regions, services, their
//! probes and load control) with the checks that need nothing but the
//! declaration itself, the routing state they make and the changes that
//! move it, latency measurements as posted and kept, why a declaration or
//! a change is refused, the control API's tokens, the zones the store keeps, and what a node shows of itself through the API.
//! Plain serde data; building routes from it is `pharos_control`'s.

pub mod api;
pub mod error;
pub mod fleet;
pub mod load_control;
mod measurement;
pub mod probabilities;
pub mod probe;
pub mod spec;
mod state;
pub mod status;
pub mod token;
pub mod zone;

pub use error::{ControlError, SpecError};
pub use measurement::{Measurement, check_measurements};
pub use state::{Change, State};
