//! The differential fuzzer's parts (tests/differential_fuzz.rs runs them):
//! queries generated from a seed (`generate`, from the names of `names`,
//! over zones of `zonegen` or tests/zones/), sent to every server at once
//! (`exchange`, driven by `bench`), judged with tests/suite/common/support/compare.rs
//! (`verdict`), each class of difference made as small as it goes
//! (`bench`) and reported once, with its reproduction (`classes`).

pub mod bench;
pub mod classes;
pub mod exchange;
pub mod generate;
pub mod names;
pub mod query;
pub mod tsig;
pub mod verdict;
pub mod zonegen;
