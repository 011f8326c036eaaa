//! A node of a fleet keeps the last state it applied from the shared
//! database in local files in the state directory, with its sequence: a
//! node started while the database cannot be reached serves that state
//! (and says so) until the database is back, then catches up from its
//! sequence.
//!
//! The state is written whole (`pharos-state-cache.json`) only now and
//! then; between two such writes each batch that moves the sequence is
//! appended to a journal beside it (`pharos-state-cache.journal`, one
//! JSON line per batch). Writing a large state whole at every change cost
//! more than the change (the serializing, and a new file renamed over the
//! old one): an append costs what the batch holds. The state is written
//! whole again once the journal has grown as large as it, so the journal
//! never costs more to read than the state, and writing whole costs at
//! most as much, over time, as the appends before it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use pharos_model::{Change, State};
use serde::{Deserialize, Serialize};

use crate::config::Config;

/// Why the state cannot be cached, or the cached state read back.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error("cannot append to {}", path.display())]
    Append { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot replace {}", path.display())]
    Replace { path: PathBuf, source: std::io::Error },
    #[error("cannot empty {}", path.display())]
    Empty { path: PathBuf, source: std::io::Error },
    #[error("cannot read the cached state {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not a cached state", path.display())]
    NotState { path: PathBuf, source: serde_json::Error },
    #[error("cannot read the cache's journal {}", path.display())]
    Journal { path: PathBuf, source: std::io::Error },
}

const FILE_NAME: &str = "pharos-state-cache.json";
const JOURNAL_EXTENSION: &str = "journal";
/// The journal grows at least this far before the state is written whole,
/// so that a small state is not rewritten every few changes.
const JOURNAL_MIN_BYTES: u64 = 64 * 1024;

/// The cached state and the sequence of the last batch it holds; written
/// from a borrowed state (`Cached<&State>`): a copy of a large state
/// costs more than writing it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Cached<S = State> {
    pub sequence: u64,
    pub state: S,
}

/// One line of the journal: the changes that moved the cached state from
/// sequence `after` to `sequence`.
#[derive(Debug, Serialize, Deserialize)]
struct Entry<C> {
    after: u64,
    sequence: u64,
    changes: C,
}

/// Where a node on a shared database caches its state; `None` for a store
/// of its own (the store is the cache) or with no state directory.
pub fn path(config: &Config) -> Option<PathBuf> {
    config.store.url.as_ref()?;
    Some(config.state_directory()?.join(FILE_NAME))
}

/// The files the cache is kept in (for handing them to the user the
/// server runs as).
pub fn files(config: &Config) -> Vec<PathBuf> {
    path(config).map(|path| vec![journal_path(&path), path]).unwrap_or_default()
}

fn journal_path(path: &Path) -> PathBuf {
    path.with_extension(JOURNAL_EXTENSION)
}

/// The cache files of one node, as this process last wrote them.
pub struct StateCache {
    path: PathBuf,
    /// The journal open for appending, and the sequence its last line (or
    /// the state written whole, if none) ends at; none until the state is
    /// first written whole, and again after a write failed.
    journal: Option<(File, u64)>,
    written_whole_bytes: u64,
    journal_bytes: u64,
}

impl StateCache {
    /// The cache at `path`; the first [`StateCache::keep`] writes the
    /// state whole, whatever the files hold.
    pub fn new(path: PathBuf) -> StateCache {
        StateCache { path, journal: None, written_whole_bytes: 0, journal_bytes: 0 }
    }

    /// Caches `state` at `sequence`, which `changes` moved it to from the
    /// sequence cached last: appended to the journal, or the state
    /// written whole (the first time, once the journal has grown as large
    /// as the state, or if there are no changes to append). Nothing is
    /// written if the sequence has not moved. After a failure the next
    /// call writes the state whole.
    pub fn keep(&mut self, state: &State, sequence: u64, changes: &[Change]) -> Result<(), CacheError> {
        let cached = match &self.journal {
            Some((_, cached)) if *cached == sequence => return Ok(()),
            Some((_, cached)) => *cached,
            None => return self.write_whole(state, sequence),
        };
        let mut line = serde_json::to_vec(&Entry { after: cached, sequence, changes })?;
        line.push(b'\n');
        let grown = self.journal_bytes + line.len() as u64;
        if changes.is_empty() || grown > self.written_whole_bytes.max(JOURNAL_MIN_BYTES) {
            return self.write_whole(state, sequence);
        }
        let (journal, _) = self.journal.take().expect("matched above");
        let appended = append(journal, &line).map_err(|source| CacheError::Append { path: journal_path(&self.path), source })?;
        self.journal = Some((appended, sequence));
        self.journal_bytes = grown;
        Ok(())
    }

    /// Replaces the state whole (written beside it, then renamed over it,
    /// so a crash leaves the old one or the new one), then empties the
    /// journal: any line a crash leaves in it is at or below the new
    /// state's sequence, and skipped when read.
    fn write_whole(&mut self, state: &State, sequence: u64) -> Result<(), CacheError> {
        self.journal = None;
        let bytes = serde_json::to_vec(&Cached { sequence, state })?;
        let written = self.path.with_extension("json.new");
        std::fs::write(&written, &bytes).map_err(|source| CacheError::Write { path: written.clone(), source })?;
        std::fs::rename(&written, &self.path).map_err(|source| CacheError::Replace { path: self.path.clone(), source })?;
        let journal = journal_path(&self.path);
        let emptied = File::create(&journal).map_err(|source| CacheError::Empty { path: journal.clone(), source })?;
        self.journal = Some((emptied, sequence));
        (self.written_whole_bytes, self.journal_bytes) = (bytes.len() as u64, 0);
        Ok(())
    }
}

/// Writes `line` at the end of `journal`; the file is handed back only if
/// the whole line was written.
fn append(mut journal: File, line: &[u8]) -> std::io::Result<File> {
    journal.write_all(line)?;
    Ok(journal)
}

/// The cached state at `path`, with the journal's batches after it
/// applied in order. Reading stops, with a warning, at a line that cannot
/// be read or does not follow the sequence reached (a line cut short by
/// a crash): the state up to there is whole, and the node catches up
/// from its sequence once the database is back.
pub fn read(path: &Path) -> Result<Cached, CacheError> {
    let bytes = std::fs::read(path).map_err(|source| CacheError::Read { path: path.to_path_buf(), source })?;
    let mut cached: Cached = serde_json::from_slice(&bytes).map_err(|source| CacheError::NotState { path: path.to_path_buf(), source })?;
    let journal = journal_path(path);
    let lines = match std::fs::read(&journal) {
        Ok(lines) => lines,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(cached),
        Err(source) => return Err(CacheError::Journal { path: journal, source }),
    };
    for (number, line) in lines.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()).enumerate() {
        let entry: Entry<Vec<Change>> = match serde_json::from_slice(line) {
            Ok(entry) => entry,
            Err(error) => {
                tracing::warn!(
                    "{} line {}: not a batch ({error}); the cache stops at sequence {}",
                    journal.display(),
                    number + 1,
                    cached.sequence
                );
                break;
            }
        };
        if entry.sequence <= cached.sequence {
            continue; // written before the state was written whole
        }
        if entry.after != cached.sequence {
            tracing::warn!(
                "{} line {}: a batch after sequence {}, not {}; the cache stops there",
                journal.display(),
                number + 1,
                entry.after,
                cached.sequence
            );
            break;
        }
        cached.state.apply(&entry.changes);
        cached.sequence = entry.sequence;
    }
    Ok(cached)
}

#[cfg(test)]
mod tests {
    use pharos_model::spec::{ReplicaSpec, ServiceSpec};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn service(name: &str, address: [u8; 4]) -> Change {
        let replica = ReplicaSpec::new("a", std::net::Ipv4Addr::from(address).into());
        Change::PutService(ServiceSpec::new(name, "static", vec![replica]))
    }

    /// Random changes to a few services, as batches moving the sequence.
    fn batches(rng: &mut SmallRng, count: usize) -> Vec<Vec<Change>> {
        (0..count)
            .map(|_| {
                (0..rng.random_range(1..4))
                    .map(|_| {
                        let name = format!("s{}.example.test", rng.random_range(0..20));
                        if rng.random_ratio(1, 10) { Change::DeleteService(name) } else { service(&name, rng.random()) }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_state_read_back_is_the_state_kept_whether_written_whole_or_journaled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut cache = StateCache::new(path.clone());
        let mut rng = SmallRng::seed_from_u64(16);
        let mut state = State::default();
        let (mut journaled, mut whole) = (0, 0);
        for (sequence, changes) in (1..).zip(batches(&mut rng, 3000)) {
            state.apply(&changes);
            let before = cache.journal_bytes;
            cache.keep(&state, sequence, &changes).unwrap();
            if cache.journal_bytes > before {
                journaled += 1
            } else {
                whole += 1
            }
            if sequence % 97 == 0 {
                let read = read(&path).unwrap();
                assert_eq!((read.sequence, &read.state), (sequence, &state), "after batch {sequence}");
            }
        }
        assert!(journaled > 2500 && whole > 2, "{journaled} appended, {whole} written whole");
        assert!(std::fs::metadata(journal_path(&path)).unwrap().len() <= JOURNAL_MIN_BYTES);
        // The same sequence again writes nothing.
        let written = std::fs::metadata(journal_path(&path)).unwrap().len();
        cache.keep(&state, 3000, &[]).unwrap();
        assert_eq!(std::fs::metadata(journal_path(&path)).unwrap().len(), written);
    }

    #[test]
    fn a_journal_cut_short_or_out_of_sequence_ends_the_state_at_the_last_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut cache = StateCache::new(path.clone());
        let first = vec![service("a.example.test", [192, 0, 2, 1])];
        let mut state = State::default().with(&first);
        cache.keep(&state, 1, &first).unwrap();
        let second = vec![service("b.example.test", [192, 0, 2, 2])];
        state.apply(&second);
        cache.keep(&state, 2, &second).unwrap();
        let journal = journal_path(&path);
        let whole = std::fs::read(&journal).unwrap();
        // Cut short by a crash: the batch is not read, the state before it is.
        std::fs::write(&journal, &whole[..whole.len() - 5]).unwrap();
        assert_eq!(read(&path).unwrap().sequence, 1);
        // A batch that does not follow (a line lost before it) is not applied.
        let mut skipping = serde_json::to_vec(&Entry { after: 5, sequence: 6, changes: &second }).unwrap();
        skipping.push(b'\n');
        std::fs::write(&journal, skipping).unwrap();
        let read = read(&path).unwrap();
        assert_eq!((read.sequence, read.state.services.len()), (1, 1));
        // A cache that is no state at all is refused, named.
        std::fs::write(&path, "{").unwrap();
        let error = super::read(&path).unwrap_err().to_string();
        assert!(error.contains("is not a cached state"), "{error}");
    }
}
