//! The kernel fast path of Pharos (issue 14): an XDP program
//! (bpf/answer.bpf.c, compiled by build.rs with clang and embedded here as
//! [`PROGRAM`], left out where clang or libbpf-dev is missing) that answers UDP queries for static names in the kernel
//! from a map of pre-built replies and passes everything else up.
//! [`fill`] derives those replies from a [`Snapshot`](pharos_answer::Snapshot)
//! ([`maps`] holds their layout, shared with the C program); [`FastPath`]
//! loads the program with its [`Settings`], attaches it to interfaces and
//! swaps snapshots in atomically (two generations of entries, one live),
//! limits each source with a token bucket in the kernel,
//! and reads the program's per-interface [`Counters`];
//! [`kernel_path`] says, for `explain`, whether a question is answered in
//! the kernel or passes up, and why.

mod counters;
mod fastpath;
pub mod fill;
pub mod maps;
mod path;
mod settings;

pub use counters::{Counters, InterfaceCounters};
pub use fastpath::{FastPath, FastPathError, Occupancy, Synced};
pub use path::{KernelPath, kernel_path};
pub use settings::{Attached, Mode, OverLimit, RateLimit, Settings};

/// The XDP program as an ELF object, aligned for the loader; `None` when
/// this crate was built without clang or libbpf-dev (build.rs warned).
#[cfg(pharos_xdp_program)]
pub static PROGRAM: Option<&[u8]> = Some(aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/answer.bpf.o")));
#[cfg(not(pharos_xdp_program))]
pub static PROGRAM: Option<&[u8]> = None;
