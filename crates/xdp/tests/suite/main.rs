//! The integration tests of pharos-xdp, one module per subject, in one
//! test binary (one link instead of one per file): the program run on
//! frames [`common`] builds, side by side on cargo's test threads.

mod common;

mod admission;
mod answer;
mod attached;
mod counters;
mod ecs;
mod fill;
mod rate_limit;
mod response_limit;
mod routed;
mod swap;
