//! Loading the program, attaching it, and keeping its maps in step with
//! snapshots through a double buffer.

use std::collections::{HashMap, hash_map};

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, HashMap as BpfHashMap, MapData, MapError, PerCpuArray, PerCpuHashMap, PerCpuValues};
use aya::programs::{ProgramError, Xdp, XdpMode};
use aya::{Ebpf, EbpfError, EbpfLoader};
use pharos_answer::Snapshot;

use crate::PROGRAM;
use crate::admission::{Demand, asked_room};
use crate::counters::{CounterValues, Counters, InterfaceCounters, SlotCounterValues};
use crate::fill::fill;
use crate::first_labels;
use crate::maps::{
    Answer, AnswerKey, ClassData, ClassValue, Config, Draw, DrawKey, Entry, Limit, PORT_WORDS, QuestionKey, ROUTED_VARIANTS, port_set,
};
use crate::mirror::Mirrored;
use crate::response_limit::response_class;
use crate::routed::{MAX_DRAWS, RoutedFill, fill_routed, prefix_keys, trusted_senders};
use crate::settings::{Attached, Mode, ResponseLimit, Settings, SettingsError};

/// The program's entry point, as bpf/answer.bpf.c names it.
const PROGRAM_NAME: &str = "answer";
/// The `live` value that makes the program pass everything up.
const SUSPENDED: u32 = 2;
/// `COUNTER_SLOTS` in bpf/answer.bpf.c.
const COUNTER_SLOTS: u32 = 64;

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
    #[error("this binary was built without the kernel fast path: clang and libbpf-dev were missing at build time")]
    NotBuilt,
    #[error("invalid fast path settings: {0}")]
    Settings(SettingsError),
    #[error("attaching XDP to {interface} ({mode}): {source}")]
    Attach { interface: String, mode: Mode, source: ProgramError },
}

/// What a [`FastPath::sync`] wrote into the generation it brought up (in
/// all its maps), compared with what that generation held before (two
/// syncs ago).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    pub installed: usize,
    pub updated: usize,
    pub removed: usize,
    /// Static answers and routed questions left out for want of room
    /// (they pass up).
    pub left_out: usize,
    /// With static answers left out, which are the least asked: the
    /// count (asked since the last sync, plus half the count before) of
    /// the least asked answer installed; no answer left out was asked
    /// more often. 0 when every static answer fits.
    pub threshold: u64,
}

/// How full the kernel's maps are, for the live snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// Pre-built replies installed.
    pub installed: usize,
    /// The most a snapshot may install.
    pub capacity: u32,
    /// Client address blocks the kernel classes routed clients by.
    pub routed_classes: usize,
    /// Pre-encoded routed replies.
    pub variants: usize,
    /// As in the last [`Synced`]: what was left out, and the count an
    /// answer needed to be installed.
    pub left_out: usize,
    pub threshold: u64,
}

/// The loaded program and its maps, each mirrored per generation.
pub struct FastPath {
    program: Ebpf,
    answers: Mirrored<BpfHashMap<MapData, QuestionKey, Entry>>,
    draws: Mirrored<BpfHashMap<MapData, DrawKey, Draw>>,
    variants: Mirrored<Array<MapData, Answer>>,
    classes: Mirrored<LpmTrie<MapData, ClassData, ClassValue>>,
    /// The senders whose Client Subnet is believed (value 1).
    trusted: Mirrored<LpmTrie<MapData, ClassData, u8>>,
    /// The first-label filter's words, and log2 of its bits per generation.
    first_labels: Mirrored<Array<MapData, u64>>,
    first_label_bits: u16,
    config: Array<MapData, Config>,
    live: Array<MapData, u32>,
    counters: PerCpuHashMap<MapData, u32, CounterValues>,
    /// The attached interfaces' counters (`counter_slots`).
    counter_slots: PerCpuArray<MapData, SlotCounterValues>,
    demand: Demand,
    capacity: u32,
    /// What the last sync left out, and its threshold.
    admission: (usize, u64),
    /// The generation the last sync brought up; the next sync fills the other.
    serving: u32,
    /// The last sync's snapshot epoch.
    epoch: u32,
}

impl FastPath {
    /// Loads the program (root needed) with `settings`; it passes
    /// everything up until [`FastPath::sync`] fills it.
    pub fn load(settings: &Settings) -> Result<FastPath, FastPathError> {
        let capacity = checked_capacity(settings)?;
        if settings.ports.is_empty() {
            return Err(FastPathError::Settings(SettingsError::NoPort));
        }
        let limit = settings.rate_limit.map(|rate_limit| rate_limit.bucket()).transpose().map_err(FastPathError::Settings)?;
        let response_limit = settings.response_limit.as_ref();
        let rrl = response_limit.map(ResponseLimit::settings).transpose().map_err(FastPathError::Settings)?;
        let first_label_bits = first_labels::bits_for(u64::from(capacity) + MAX_DRAWS as u64);
        let mut program = EbpfLoader::new()
            .map_max_entries("answers", 2 * (capacity + MAX_DRAWS as u32))
            .map_max_entries("asked", asked_room(capacity))
            .map_max_entries("first_labels", first_labels::map_words(first_label_bits))
            .map_max_entries("rrl_buckets", response_limit.map_or(1, |limits| limits.table_size))
            .load(PROGRAM.ok_or(FastPathError::NotBuilt)?)?;
        let mut rrl_settings = Array::try_from(take(&mut program, "rrl_settings")?)?;
        rrl_settings.set(0, rrl.unwrap_or_default(), 0)?;
        let mut rrl_whitelist: LpmTrie<_, ClassData, u8> = LpmTrie::try_from(take(&mut program, "rrl_whitelist")?)?;
        for (prefix_len, data) in prefix_keys(response_limit.map_or(&[][..], |limits| &limits.whitelist)) {
            rrl_whitelist.insert(&Key::new(prefix_len, data), 1, 0)?;
        }
        let mut ports: Array<_, [u64; PORT_WORDS]> = Array::try_from(take(&mut program, "ports")?)?;
        ports.set(0, port_set(&settings.ports), 0)?;
        let mut limit_map: Array<_, Limit> = Array::try_from(take(&mut program, "limit")?)?;
        limit_map.set(0, limit.unwrap_or_default(), 0)?;
        let mut live = Array::try_from(take(&mut program, "live")?)?;
        live.set(0, SUSPENDED, 0)?;
        let answers = Mirrored::new(BpfHashMap::try_from(take(&mut program, "answers")?)?);
        let draws = Mirrored::new(BpfHashMap::try_from(take(&mut program, "draws")?)?);
        let variants = Mirrored::new(Array::try_from(take(&mut program, "variants")?)?);
        let classes = Mirrored::new(LpmTrie::try_from(take(&mut program, "classes")?)?);
        let trusted = Mirrored::new(LpmTrie::try_from(take(&mut program, "trusted")?)?);
        let first_labels = Mirrored::new(Array::try_from(take(&mut program, "first_labels")?)?);
        let config = Array::try_from(take(&mut program, "config")?)?;
        let counters = PerCpuHashMap::try_from(take(&mut program, "counters")?)?;
        let counter_slots = PerCpuArray::try_from(take(&mut program, "counter_slots")?)?;
        let demand = Demand::new(PerCpuHashMap::try_from(take(&mut program, "asked")?)?);
        let admission = (0, 0);
        let mut fast_path = FastPath {
            program,
            answers,
            draws,
            variants,
            classes,
            trusted,
            first_labels,
            first_label_bits,
            config,
            live,
            counters,
            counter_slots,
            demand,
            capacity,
            admission,
            serving: 0,
            epoch: 0,
        };
        fast_path.xdp_mut()?.load()?;
        Ok(fast_path)
    }

    /// The loaded XDP program, to attach or to test.
    pub fn program(&self) -> Result<&Xdp, FastPathError> {
        let program = self.program.program(PROGRAM_NAME).ok_or(FastPathError::Missing("answer program"))?;
        program.try_into().map_err(|error: ProgramError| error.into())
    }

    /// Attaches the program to `interface`; [`Mode::Auto`] tries native
    /// first and logs which mode it got. It stays attached until this
    /// value is dropped.
    pub fn attach(&mut self, interface: &str, mode: Mode) -> Result<Attached, FastPathError> {
        let used = match mode {
            Mode::Auto => match self.attach_in(interface, Mode::Native) {
                Ok(()) => Mode::Native,
                Err(native) => {
                    self.attach_in(interface, Mode::Generic)?;
                    tracing::info!("XDP on {interface}: generic mode, as native failed ({native})");
                    Mode::Generic
                }
            },
            fixed => {
                self.attach_in(interface, fixed)?;
                fixed
            }
        };
        tracing::info!("XDP attached to {interface} in {used} mode");
        self.claim_counter_slot(interface)?;
        Ok(Attached { interface: interface.into(), mode: used })
    }

    /// Gives `interface` its slot in `counter_slots` (see
    /// bpf/answer.bpf.c), unless another interface holds it: then its
    /// packets are counted in the `counters` hash map, as before a claim.
    fn claim_counter_slot(&mut self, interface: &str) -> Result<(), FastPathError> {
        let name = std::ffi::CString::new(interface).map_err(|_| FastPathError::Settings(SettingsError::InterfaceNul(interface.into())))?;
        // SAFETY: `name` is a NUL-terminated string that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Ok(()); // gone since the attach: nothing to count
        }
        let slot = ifindex % COUNTER_SLOTS;
        let held = self.counter_slots.get(&slot, 0)?;
        if let Some(holder) = held.iter().map(|values| values.ifindex).find(|holder| *holder != 0) {
            if holder != ifindex {
                tracing::info!("XDP counters of {interface}: slot {slot} is interface {holder}'s, counted in the hash map");
            }
            return Ok(());
        }
        let cpus = held.len();
        let claimed = PerCpuValues::try_from(vec![SlotCounterValues::claimed_by(ifindex); cpus]).map_err(MapError::from)?;
        self.counter_slots.set(slot, claimed, 0)?;
        Ok(())
    }

    fn attach_in(&mut self, interface: &str, mode: Mode) -> Result<(), FastPathError> {
        let xdp_mode = if mode == Mode::Native { XdpMode::Driver } else { XdpMode::Skb };
        let attach_error = |source| FastPathError::Attach { interface: interface.into(), mode, source };
        self.xdp_mut()?.attach(interface, xdp_mode).map_err(attach_error)?;
        Ok(())
    }

    fn xdp_mut(&mut self) -> Result<&mut Xdp, FastPathError> {
        let program = self.program.program_mut(PROGRAM_NAME).ok_or(FastPathError::Missing("answer program"))?;
        program.try_into().map_err(|error: ProgramError| error.into())
    }

    /// Makes the kernel answer exactly what `snapshot` answers from
    /// pre-built replies (static, and routed where the decision depends
    /// on the client's region only), atomically: brings the generation
    /// not being served up to `snapshot` (installing, rewriting and
    /// removing only what differs from what it held), then makes it live
    /// with one map update. A packet that read the live generation just
    /// before that update may still be answered from the snapshot just
    /// replaced. Above capacity, the most asked static answers are
    /// installed (the program counts questions
    /// while its snapshot is above capacity; before any count, the first
    /// ones [`fill`] yields) and the rest counted as left out (as are
    /// routed questions beyond the routed maps' room). After an error the kernel
    /// still serves the previous snapshot: [`FastPath::suspend`] stops that.
    pub fn sync(&mut self, snapshot: &Snapshot) -> Result<Synced, FastPathError> {
        let target = 1 - self.serving;
        self.demand.gather()?;
        let statics = fill(snapshot);
        let routed = fill_routed(snapshot);
        // Every question the kernel may answer, installed or not: those
        // left out must still reach the lookup to be counted as asked.
        let questions = statics.iter().map(|(question, _)| question).chain(&routed.questions);
        let labels = first_labels::words(questions, self.first_label_bits, target);
        let admitted = self.demand.admit(statics, self.capacity as usize);
        let (answers, collided) = keyed_entries(snapshot, target, admitted.entries, &routed);
        let left_out = admitted.left_out + routed.left_out + collided;
        let mut synced = Synced { left_out, threshold: admitted.threshold, ..Synced::default() };
        self.answers.bring_up(target, answers, &mut synced)?;
        let draws = routed.draws.into_iter().map(|(key, draw)| (DrawKey { question: key.question.in_generation(target), ..key }, draw));
        self.draws.bring_up(target, draws.collect(), &mut synced)?;
        let variants = routed.variants.into_iter().map(|(id, answer)| (target * ROUTED_VARIANTS as u32 + id, answer));
        self.variants.bring_up(target, variants.collect(), &mut synced)?;
        let in_target = |(prefix_len, mut data): (u32, ClassData)| {
            data[0] = target as u8;
            (prefix_len, data)
        };
        let classes = routed.classes.into_iter().map(|(prefix_len, data, class)| (in_target((prefix_len, data)), class));
        self.classes.bring_up(target, classes.collect(), &mut synced)?;
        let trusted = trusted_senders(snapshot);
        let trust_all = u16::from(trusted.is_none());
        let senders = trusted.unwrap_or_default().into_iter().map(|key| (in_target(key), 1));
        self.trusted.bring_up(target, senders.collect(), &mut synced)?;
        // The filter's words are no answers: what they took is not reported.
        self.first_labels.bring_up(target, labels, &mut Synced::default())?;
        let count_asked = u16::from(admitted.left_out > 0);
        let epoch = self.epoch.wrapping_add(1);
        let config =
            Config { udp_payload: snapshot.settings.udp_payload, count_asked, trust_all, first_label_bits: self.first_label_bits, epoch };
        self.config.set(target, config, 0)?;
        self.epoch = epoch;
        self.live.set(0, target, 0)?;
        self.serving = target;
        self.admission = (left_out, admitted.threshold);
        Ok(synced)
    }

    /// Makes the kernel pass everything up, until the next successful
    /// [`FastPath::sync`]: after a failed sync, so that no answer comes
    /// from a snapshot that is no longer live.
    pub fn suspend(&mut self) -> Result<(), FastPathError> {
        self.live.set(0, SUSPENDED, 0)?;
        Ok(())
    }

    /// What the program did with the packets of each interface it has
    /// seen, summed over the CPUs, by ifindex.
    pub fn counters(&self) -> Result<Counters, FastPathError> {
        let mut per_interface: HashMap<u32, Vec<CounterValues>> = HashMap::new();
        for entry in self.counters.iter() {
            let (ifindex, per_cpu) = entry?;
            per_interface.entry(ifindex).or_default().extend(per_cpu.iter().copied());
        }
        for slot in 0..COUNTER_SLOTS {
            for values in self.counter_slots.get(&slot, 0)?.iter().filter(|values| values.ifindex != 0) {
                per_interface.entry(values.ifindex).or_default().push(values.counts);
            }
        }
        let mut interfaces: Vec<InterfaceCounters> =
            per_interface.iter().map(|(ifindex, per_cpu)| InterfaceCounters::summed(*ifindex, per_cpu.iter())).collect();
        interfaces.sort_by_key(|counters| counters.ifindex);
        Ok(Counters { interfaces })
    }

    /// How full the maps are for the snapshot the last sync brought up.
    pub fn occupancy(&self) -> Occupancy {
        Occupancy {
            installed: self.answers.held(self.serving),
            capacity: self.capacity,
            routed_classes: self.classes.held(self.serving),
            variants: self.variants.held(self.serving),
            left_out: self.admission.0,
            threshold: self.admission.1,
        }
    }
}

/// The `answers` map's entries in `target`: the static answers, then a
/// routed mark per routed question; and how many questions were left out
/// because their key was taken (names whose hashes agree: they pass up).
fn keyed_entries(
    snapshot: &Snapshot,
    target: u32,
    statics: Vec<(AnswerKey, Answer)>,
    routed: &RoutedFill,
) -> (HashMap<QuestionKey, Entry>, usize) {
    let answered = statics.into_iter().map(|(question, reply)| {
        let class = response_class(snapshot, &question, Some(&reply));
        (question, Entry::answered(&question, reply, class))
    });
    let marked = routed.questions.iter().map(|question| (*question, Entry::routed(question, response_class(snapshot, question, None))));
    let mut entries = HashMap::new();
    let mut collided = 0;
    for (question, entry) in answered.chain(marked) {
        match entries.entry(question.in_generation(target)) {
            hash_map::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
            hash_map::Entry::Occupied(_) => collided += 1,
        }
    }
    (entries, collided)
}

/// The settings' answers per generation, if both generations fit the map
/// beside the routed questions.
fn checked_capacity(settings: &Settings) -> Result<u32, FastPathError> {
    let most = u32::MAX / 2 - MAX_DRAWS as u32;
    match settings.max_entries {
        0 => Err(FastPathError::Settings(SettingsError::NoEntries)),
        entries if entries > most => Err(FastPathError::Settings(SettingsError::TooManyEntries { entries, most })),
        entries => Ok(entries),
    }
}

fn take(program: &mut Ebpf, name: &'static str) -> Result<aya::maps::Map, FastPathError> {
    program.take_map(name).ok_or(FastPathError::Missing(name))
}
