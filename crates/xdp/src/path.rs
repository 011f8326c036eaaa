//! Which path answers a question, and why: for `explain`.

use std::fmt;

use pharos_answer::Snapshot;
use pharos_route::Service;

use crate::fill::static_entry;
use crate::routed::{client_classes, routed_question};

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
/// holds it and has room for it. Queries with EDNS options other than
/// one Client Subnet (RFC 7871, scope 0) always pass up, and so do signed
/// queries (a TSIG record, RFC 8945), which user space checks and signs.
pub fn kernel_path(snapshot: &Snapshot, name: &[u8], qtype: u16) -> KernelPath {
    let name = name.to_ascii_lowercase();
    let path = match snapshot.routes.service(&name) {
        Some(service) => routed_path(snapshot, service, &name, qtype),
        None => static_entry(snapshot, &name, qtype).map(|_| KernelPath::Static).map_err(|reason| reason.to_string()),
    };
    path.unwrap_or_else(KernelPath::PassesUp)
}

/// How the kernel answers `service`'s question, or why it passes up.
fn routed_path(snapshot: &Snapshot, service: &Service, name: &[u8], qtype: u16) -> Result<KernelPath, String> {
    let routed = routed_question(service, name, qtype).map_err(|reason| reason.to_string())?;
    if routed.by_region() {
        client_classes(&snapshot.routes).map_err(|reason| reason.to_string())?;
    }
    Ok(KernelPath::Routed { classes: routed.classes.len(), variants: routed.variants() })
}
