//! Which path answers a question, and why: for `explain`.

use std::fmt;

use pharos_answer::Snapshot;

use crate::fill::static_entry;

/// Where a question is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelPath {
    /// From a pre-built reply in the kernel.
    Static,
    /// Passed up to the user-space server, with the reason.
    PassesUp(String),
}

impl fmt::Display for KernelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelPath::Static => f.write_str("answered in the kernel (static reply)"),
            KernelPath::PassesUp(reason) => write!(f, "passes up to user space: {reason}"),
        }
    }
}

/// Where `snapshot` answers a UDP question for `name` (wire form, any
/// case) and `qtype`, class IN, without EDNS options, once a
/// [`FastPath`](crate::FastPath) holds it and has room for it.
pub fn kernel_path(snapshot: &Snapshot, name: &[u8], qtype: u16) -> KernelPath {
    let name = name.to_ascii_lowercase();
    if snapshot.routes.service(&name).is_some() {
        return KernelPath::PassesUp("the name is a service answered by policy; routed answers are not in the kernel yet".into());
    }
    match static_entry(snapshot, &name, qtype) {
        Ok(_) => KernelPath::Static,
        Err(reason) => KernelPath::PassesUp(reason.to_string()),
    }
}
