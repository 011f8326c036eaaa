//! The tests of pharos-update, one module per subject, in one test binary
//! (one link instead of one per file).

mod apply;
mod common;
mod parse;
mod policy;
mod response;
