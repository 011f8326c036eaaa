//! The integration tests of pharos-artemis, one module per subject, in one
//! test binary (one link instead of one per file); their Initials come
//! from [`support`].

mod support;

mod address_manager;
mod dispatcher;
mod initial;
mod service_id;
