//! Loading the program and keeping its maps in step with a snapshot.

use std::collections::HashMap;

use aya::maps::{Array, HashMap as BpfHashMap, MapData, MapError};
use aya::programs::{ProgramError, Xdp, XdpMode};
use aya::{Ebpf, EbpfError};
use pharos_answer::Snapshot;

use crate::PROGRAM;
use crate::fill::fill;
use crate::maps::{Answer, AnswerKey, Config};

/// The program's entry point, as bpf/answer.bpf.c names it.
const PROGRAM_NAME: &str = "answer";

#[derive(Debug, thiserror::Error)]
pub enum FastPathError {
    #[error("loading the XDP object: {0}")]
    Object(#[from] EbpfError),
    #[error("loading the XDP program (the verifier may have refused it): {0}")]
    Program(#[from] ProgramError),
    #[error("updating the XDP maps: {0}")]
    Map(#[from] MapError),
    #[error("the XDP object has no {0}")]
    Missing(&'static str),
}

/// What a [`FastPath::sync`] changed in the answers map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    pub installed: usize,
    pub updated: usize,
    pub removed: usize,
}

/// The loaded program and the answers it holds, mirrored here so a new
/// snapshot writes only the entries that changed.
pub struct FastPath {
    program: Ebpf,
    answers: BpfHashMap<MapData, AnswerKey, Answer>,
    config: Array<MapData, Config>,
    installed: HashMap<AnswerKey, Answer>,
}

impl FastPath {
    /// Loads the program (root needed) answering UDP queries to `ports`;
    /// it answers nothing until [`FastPath::sync`] fills it.
    pub fn load(ports: &[u16]) -> Result<FastPath, FastPathError> {
        let mut program = Ebpf::load(PROGRAM)?;
        let mut port_map: BpfHashMap<_, u16, u8> =
            BpfHashMap::try_from(program.map_mut("ports").ok_or(FastPathError::Missing("ports map"))?)?;
        for &port in ports {
            port_map.insert(port, 1, 0)?;
        }
        let answers = BpfHashMap::try_from(program.take_map("answers").ok_or(FastPathError::Missing("answers map"))?)?;
        let config = Array::try_from(program.take_map("config").ok_or(FastPathError::Missing("config map"))?)?;
        let mut fast_path = FastPath { program, answers, config, installed: HashMap::new() };
        fast_path.xdp_mut()?.load()?;
        Ok(fast_path)
    }

    /// The loaded XDP program, to attach or to test.
    pub fn program(&self) -> Result<&Xdp, FastPathError> {
        let program = self.program.program(PROGRAM_NAME).ok_or(FastPathError::Missing("answer program"))?;
        program.try_into().map_err(|error: ProgramError| error.into())
    }

    /// Attaches the program to `interface` in `mode` (generic, `Skb`,
    /// where the driver has no XDP support, e.g. `lo`). It stays attached
    /// until this value is dropped.
    pub fn attach(&mut self, interface: &str, mode: XdpMode) -> Result<(), FastPathError> {
        self.xdp_mut()?.attach(interface, mode)?;
        Ok(())
    }

    fn xdp_mut(&mut self) -> Result<&mut Xdp, FastPathError> {
        let program = self.program.program_mut(PROGRAM_NAME).ok_or(FastPathError::Missing("answer program"))?;
        program.try_into().map_err(|error: ProgramError| error.into())
    }

    /// Makes the kernel answer exactly what `snapshot` answers from
    /// pre-built replies: installs new questions, rewrites changed replies
    /// and removes questions that are gone. Not atomic: while it runs, the
    /// kernel answers from a mix of the old and new entries (a versioned
    /// swap is a later increment of issue 14).
    pub fn sync(&mut self, snapshot: &Snapshot) -> Result<Synced, FastPathError> {
        self.config.set(0, Config { udp_payload: snapshot.settings.udp_payload }, 0)?;
        let wanted: HashMap<AnswerKey, Answer> = fill(snapshot).into_iter().collect();
        let mut synced = Synced::default();
        let gone: Vec<AnswerKey> = self.installed.keys().filter(|key| !wanted.contains_key(key)).copied().collect();
        for key in gone {
            self.answers.remove(&key)?;
            self.installed.remove(&key);
            synced.removed += 1;
        }
        for (key, answer) in wanted {
            match self.installed.get(&key) {
                Some(current) if *current == answer => continue,
                Some(_) => synced.updated += 1,
                None => synced.installed += 1,
            }
            self.answers.insert(key, answer, 0)?;
            self.installed.insert(key, answer);
        }
        Ok(synced)
    }

    /// How many questions the kernel answers.
    pub fn len(&self) -> usize {
        self.installed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.installed.is_empty()
    }
}
