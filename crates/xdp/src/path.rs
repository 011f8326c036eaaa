//! Which path answers a question, and why: for `explain`.

use std::fmt;

use pharos_answer::Snapshot;

use crate::fill::static_entry;
use crate::routed::{RoutedQuestion, client_classes, routed_question};

/// Where a question is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelPath {
    /// From a pre-built reply in the kernel.
    Static,
    /// From replies pre-built per class of clients, drawn in the kernel.
    Routed { classes: usize, variants: usize },
    /// Passed up to the user-space server, with the reason.
    PassesUp(String),
}

impl fmt::Display for KernelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelPath::Static => f.write_str("answered in the kernel (static reply)"),
            KernelPath::Routed { classes, variants } => {
                write!(f, "answered in the kernel (routed: {classes} classes, {variants} variants)")
            }
            KernelPath::PassesUp(reason) => write!(f, "passes up to user space: {reason}"),
        }
    }
}

/// Where `snapshot` answers a UDP question for `name` (wire form, any
/// case) and `qtype`, class IN, once a [`FastPath`](crate::FastPath)
/// holds it and has room for it. Queries with EDNS options (ECS among
/// them) always pass up.
pub fn kernel_path(snapshot: &Snapshot, name: &[u8], qtype: u16) -> KernelPath {
    let name = name.to_ascii_lowercase();
    if let Some(service) = snapshot.routes.service(&name) {
        let routed = routed_question(service, &name, qtype).map_err(|reason| reason.to_string());
        let classed = |routed: &RoutedQuestion| match routed.by_region() {
            true => client_classes(&snapshot.routes).map(|_| ()).map_err(|reason| reason.to_string()),
            false => Ok(()),
        };
        return match routed.and_then(|routed| classed(&routed).map(|()| routed)) {
            Ok(routed) => KernelPath::Routed { classes: routed.classes.len(), variants: routed.variants() },
            Err(reason) => KernelPath::PassesUp(reason),
        };
    }
    match static_entry(snapshot, &name, qtype) {
        Ok(_) => KernelPath::Static,
        Err(reason) => KernelPath::PassesUp(reason.to_string()),
    }
}
