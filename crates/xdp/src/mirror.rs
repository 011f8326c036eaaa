//! A BPF map written only through here, with what each generation holds
//! in it mirrored in user space, so bringing a generation up to a new
//! snapshot writes only the entries that differ.

use std::collections::HashMap;
use std::hash::Hash;

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, HashMap as BpfHashMap, MapData, MapError};

use crate::Synced;
use crate::maps::{Answer, ClassData};

/// Writing and deleting one entry of a BPF map.
pub(crate) trait Table {
    type Key: Copy + Eq + Hash;
    type Value: Copy + PartialEq;
    fn put(&mut self, key: &Self::Key, value: &Self::Value) -> Result<(), MapError>;
    fn delete(&mut self, key: &Self::Key) -> Result<(), MapError>;
}

impl<K: aya::Pod + Eq + Hash, V: aya::Pod + PartialEq> Table for BpfHashMap<MapData, K, V> {
    type Key = K;
    type Value = V;

    fn put(&mut self, key: &K, value: &V) -> Result<(), MapError> {
        self.insert(key, value, 0)
    }

    fn delete(&mut self, key: &K) -> Result<(), MapError> {
        self.remove(key)
    }
}

/// A value an array map's index holds when it holds nothing.
pub(crate) trait Empty {
    const EMPTY: Self;
}

/// The `variants` array holds no answer where it holds [`Answer::NONE`].
impl Empty for Answer {
    const EMPTY: Answer = Answer::NONE;
}

/// The `first_labels` filter: a word of no bits.
impl Empty for u64 {
    const EMPTY: u64 = 0;
}

/// An array map by index; an index is emptied by writing
/// [`Empty::EMPTY`] there.
impl<V: aya::Pod + PartialEq + Empty> Table for Array<MapData, V> {
    type Key = u32;
    type Value = V;

    fn put(&mut self, &index: &u32, value: &V) -> Result<(), MapError> {
        self.set(index, value, 0)
    }

    fn delete(&mut self, &index: &u32) -> Result<(), MapError> {
        self.set(index, V::EMPTY, 0)
    }
}

/// The `classes` and `trusted` tries, keyed by (prefix length, data).
impl<V: aya::Pod + PartialEq> Table for LpmTrie<MapData, ClassData, V> {
    type Key = (u32, ClassData);
    type Value = V;

    fn put(&mut self, &(prefix_len, data): &(u32, ClassData), value: &V) -> Result<(), MapError> {
        self.insert(&Key::new(prefix_len, data), value, 0)
    }

    fn delete(&mut self, &(prefix_len, data): &(u32, ClassData)) -> Result<(), MapError> {
        self.remove(&Key::new(prefix_len, data))
    }
}

pub(crate) struct Mirrored<T: Table> {
    table: T,
    held: [HashMap<T::Key, T::Value>; 2],
}

impl<T: Table> Mirrored<T> {
    pub(crate) fn new(table: T) -> Mirrored<T> {
        Mirrored { table, held: [HashMap::new(), HashMap::new()] }
    }

    /// Makes `generation`'s entries (keys already in that generation)
    /// exactly `wanted`, counting what it wrote in `synced`. On an error
    /// the mirror still says what the map holds.
    pub(crate) fn bring_up(&mut self, generation: u32, wanted: HashMap<T::Key, T::Value>, synced: &mut Synced) -> Result<(), MapError> {
        let held = &mut self.held[generation as usize];
        // Removals first, so the map has room for what comes in.
        let gone: Vec<T::Key> = held.keys().filter(|key| !wanted.contains_key(key)).copied().collect();
        for key in gone {
            self.table.delete(&key)?;
            held.remove(&key);
            synced.removed += 1;
        }
        for (key, value) in wanted {
            match held.get(&key) {
                Some(current) if *current == value => continue,
                Some(_) => synced.updated += 1,
                None => synced.installed += 1,
            }
            self.table.put(&key, &value)?;
            held.insert(key, value);
        }
        Ok(())
    }

    /// How many entries `generation` holds.
    pub(crate) fn held(&self, generation: u32) -> usize {
        self.held[generation as usize].len()
    }
}
