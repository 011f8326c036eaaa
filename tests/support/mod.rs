//! Helpers of the differential conformance suite (tests/conformance.rs).

pub mod cases;
pub mod compare;
pub mod norm;
pub mod servers;
pub mod wire;
