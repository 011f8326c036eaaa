//! The kernel fast path of Pharos (issue 14): an XDP program
//! (bpf/answer.bpf.c, compiled by build.rs with clang and embedded here as
//! [`PROGRAM`], left out where clang or libbpf-dev is missing) that answers
//! UDP queries in the kernel, for static names from a map of pre-built
//! replies and for routed names by drawing among pre-built variants of
//! the client's class (the client: a trusted sender's EDNS Client Subnet,
//! echoed with user space's scope, else the source), and passes
//! everything else up. [`fill`] derives the
//! static replies from a [`Snapshot`](pharos_answer::Snapshot), [`routed`]
//! the routed ones through the routing core's door ([`maps`] holds their
//! layout, shared with the C program); [`FastPath`] loads the program with
//! its [`Settings`] (ports, capacity, a per-source token bucket, response
//! rate limiting by [`response_limit`] class), attaches
//! it to interfaces, swaps snapshots in atomically (two generations of
//! entries, one live, each mirrored in user space so a sync writes only
//! what changed; above capacity, the most asked answers by the
//! program's counts of questions; a first-label filter passes up
//! at once what no question of the snapshot begins with) and reads its per-interface [`Counters`]; [`kernel_path`]
//! says, for `explain`, whether a question is answered in the kernel or
//! passes up, and why.

mod admission;
mod counters;
mod fastpath;
pub mod fill;
mod first_labels;
pub mod maps;
mod mirror;
mod path;
pub mod response_limit;
pub mod routed;
mod settings;

pub use counters::{Counters, InterfaceCounters};
pub use fastpath::{FastPath, FastPathError, Occupancy, Synced};
pub use path::{KernelPath, kernel_path};
pub use settings::{Attached, Mode, OverLimit, RateLimit, ResponseLimit, Settings, SettingsError};

/// The XDP program as an ELF object, aligned for the loader; `None` when
/// this crate was built without clang or libbpf-dev (build.rs warned).
#[cfg(pharos_xdp_program)]
pub static PROGRAM: Option<&[u8]> = Some(aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/answer.bpf.o")));
#[cfg(not(pharos_xdp_program))]
pub static PROGRAM: Option<&[u8]> = None;
