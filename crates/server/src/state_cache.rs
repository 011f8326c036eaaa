//! A node of a fleet keeps the last state it applied from the shared
//! database in a local file (`pharos-state-cache.json` in the state
//! directory), with its sequence, rewritten whenever the sequence moves. A
//! node started while the database cannot be reached serves that state
//! (and says so) until the database is back, then catches up from its
//! sequence.

use std::path::{Path, PathBuf};

use anyhow::Context;
use pharos_control::State;
use serde::{Deserialize, Serialize};

use crate::config::Config;

const FILE_NAME: &str = "pharos-state-cache.json";

/// The cached state and the sequence of the last batch it holds; written
/// from a borrowed state (`Cached<&State>`): a copy of a large state
/// costs more than writing it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Cached<S = State> {
    pub sequence: u64,
    pub state: S,
}

/// Where a node on a shared database caches its state; `None` for a store
/// of its own (the store is the cache) or with no state directory.
pub fn path(config: &Config) -> Option<PathBuf> {
    config.store.url.as_ref()?;
    Some(config.state_directory()?.join(FILE_NAME))
}

/// Replaces the cache at `path` whole: written beside it, then renamed
/// over it, so a crash leaves the old one or the new one.
pub fn write(path: &Path, cached: &Cached<&State>) -> anyhow::Result<()> {
    let written = path.with_extension("json.new");
    std::fs::write(&written, serde_json::to_vec(cached)?).with_context(|| format!("cannot write {}", written.display()))?;
    std::fs::rename(&written, path).with_context(|| format!("cannot replace {}", path.display()))
}

pub fn read(path: &Path) -> anyhow::Result<Cached> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read the cached state {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not a cached state", path.display()))
}
