//! The kernel fast path of Pharos (issue 14), first increment: an XDP
//! program (bpf/answer.bpf.c, compiled by build.rs with clang and embedded
//! here as [`PROGRAM`]) that answers UDP queries for static names in the
//! kernel from a map of pre-built replies and passes everything else up;
//! [`fill`] derives those replies from a [`Snapshot`](pharos_answer::Snapshot)
//! ([`maps`] holds their layout, shared with the C program), and
//! [`FastPath`] loads the program, attaches it to interfaces and keeps
//! its maps in step with the snapshot.

mod fastpath;
pub mod fill;
pub mod maps;

pub use fastpath::{FastPath, FastPathError, Synced};

/// The XDP program as an ELF object, aligned for the loader.
pub static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/answer.bpf.o"));
