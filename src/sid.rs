//! `pharos sid`: the service address Artemis clients compute for a name.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use pharos_artemis::service_id::{CanonicalName, ConflictList, ServiceIdMap, ServicePrefix};

#[derive(Args)]
pub struct SidArgs {
    /// The operator's service prefix, e.g. 192.0.2.0/24 or 2001:db8:5::/48.
    #[arg(long)]
    prefix: ServicePrefix,
    /// Conflict list: `NAME ADDRESS` lines, consulted before the hash.
    #[arg(long)]
    conflicts: Option<PathBuf>,
    /// The service's host name (internationalized names are fine).
    name: String,
}

/// Prints the address alone on one line, for scripts.
pub fn run(args: SidArgs) -> anyhow::Result<()> {
    let map = service_id_map(args.prefix, args.conflicts.as_deref())?;
    println!("{}", map.address_of(&CanonicalName::new(&args.name)?));
    Ok(())
}

/// The name -> address map of `prefix`, with the conflict list at `conflicts` if given.
pub fn service_id_map(prefix: ServicePrefix, conflicts: Option<&Path>) -> anyhow::Result<ServiceIdMap> {
    let conflicts = match conflicts {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            ConflictList::parse(&text, &prefix).with_context(|| format!("{}", path.display()))?
        }
        None => ConflictList::default(),
    };
    Ok(ServiceIdMap::new(prefix, conflicts))
}
