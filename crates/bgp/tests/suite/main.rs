//! The integration tests of pharos-bgp, one module per subject, in one
//! test binary (one link instead of one per file); what they share is in
//! [`common`].

mod common;

mod hand_made;
mod mrt_files;
mod real_files;
