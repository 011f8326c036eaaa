//! The integration tests of the `pharos` binary: one module per subject,
//! all in one test binary, since each test binary links the whole server
//! and one link per file was most of the build. One module runs by its
//! path, as in `cargo test --test suite transfer::`.
//!
//! Tests of different modules run side by side on cargo's test threads,
//! so none counts on being alone in the process: each starts its own
//! servers, on ports from [`common::free_port`], and reads their counters.
//! Apart, in tests/, stay the differential fuzzer (hand-run, `--ignored`,
//! its parts in tests/fuzz/) and the two tests that drive the benchmarks'
//! tools (tail.rs, xdpgen.rs).

mod common;

mod acme;
mod api;
mod artemis;
mod artemis_api;
mod artemis_netns;
mod catalog;
mod catch_up;
mod check;
mod conformance;
mod cookies;
mod dashboard;
mod dns_update;
mod dnssec;
mod dnstap;
mod docs;
mod encrypted;
mod fastpath;
mod fleet;
mod forward;
mod health;
mod help;
mod keys;
mod load;
mod metrics;
mod proximity;
mod proxy;
mod redirect;
mod rollover;
mod routing;
mod rrl;
mod secondary;
mod service;
mod sid;
mod store_zones;
mod tokens;
mod transfer;
mod transport;
mod tsig;
mod two_tier;
mod update_knot;
