//! Helpers of the differential conformance suite (tests/suite/conformance.rs)
//! and of the differential fuzzer (tests/differential_fuzz.rs).
#![allow(dead_code)] // each test file uses its own subset

pub mod cases;
pub mod compare;
pub mod norm;
pub mod servers;
pub mod wire;
