//! The integration tests of pharos-answer, one module per subject, in one
//! test binary (one link instead of one per file).

mod answers;
mod tsig;
