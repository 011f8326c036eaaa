//! The integration tests of pharos-control, one module per subject, in
//! one test binary (one link instead of one per file).

mod catalog;
mod incremental;
mod proximity;
mod signed_routes;
mod versions;
