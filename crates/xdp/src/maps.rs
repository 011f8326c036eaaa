//! The layout of the program's maps, as bpf/answer.bpf.c declares them.

use std::fmt;

/// Longest wire name (RFC 1035 section 3.1).
pub const MAX_NAME: usize = 255;
/// Longest reply body the kernel serves; larger ones pass up.
pub const MAX_BODY: usize = 1024;

/// The `answers` map's key: the question as the kernel reads it, in the
/// generation (0 or 1) of the snapshot it answers from.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    pub generation: u32,
    /// Lowercase wire name, zero-padded.
    pub name: [u8; MAX_NAME + 1],
    /// Type and class in network order.
    pub qtype: [u8; 2],
    pub qclass: [u8; 2],
}

/// The `answers` and `variants` maps' value: what follows the question
/// in the reply.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub len: u16,
    /// AA and the RCODE (at most 15: no extended RCODE).
    pub flags: u16,
    /// Answer, authority and additional counts, the OPT record aside.
    pub counts: [u16; 3],
    /// One's complement sum of `body[..len]` in 16-bit network-order
    /// words, folded: the program adds it to the UDP checksum.
    pub sum: u16,
    pub body: [u8; MAX_BODY],
}

/// Most variants a routed question has per class in the kernel.
pub const MAX_VARIANTS: usize = 16;
/// The class of clients whose region has no distribution of its own.
pub const EVERYONE: u32 = u32::MAX;
/// Bits of a class key before the address: generation and family.
pub const CLASS_PREFIX_BITS: u32 = 16;

/// The `classes` LPM trie's key data, after the prefix length: the
/// generation, the family (0: IPv4, address in the first 4 octets; 1:
/// IPv6), the address, two unused octets.
pub type ClassData = [u8; 20];

/// The `classes` trie's value: where user space's `locate` places the
/// block's clients, and the ECS scope it gives them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClassValue {
    pub region: u32,
    pub scope: u32,
}

/// The `draws` map's key: a routed question in a generation, and the
/// region whose distribution this is (or [`EVERYONE`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrawKey {
    pub question: AnswerKey,
    pub region: u32,
}

/// The `draws` map's value: variant `variants[i]` answers when the
/// kernel's 32-bit draw is at most `thresholds[i]` and above the ones
/// before it (the last threshold is `u32::MAX`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub count: u32,
    /// 1 when the reply's ECS scope is the client's class's (to a trusted
    /// Client Subnet), else 0: the answer is the same for every client.
    pub scoped: u32,
    pub thresholds: [u32; MAX_VARIANTS],
    pub variants: [u32; MAX_VARIANTS],
}

/// The `variants` map's key; its value is an [`Answer`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VariantKey {
    pub generation: u32,
    pub id: u32,
}

/// The `config` map's value, one per generation.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Config {
    /// The payload size the reply's OPT record advertises, and the
    /// largest reply to an EDNS query.
    pub udp_payload: u16,
    /// 1 when the snapshot has more static answers than the kernel has
    /// room for: the program then counts the questions it is asked in
    /// the `asked` map (keys in generation 0, per-CPU `u64` counts).
    pub count_asked: u16,
    /// 1 when every sender's Client Subnet is believed, else only those
    /// of senders in the `trusted` trie (keyed as `classes`, value 1).
    pub trust_all: u16,
    /// Aligns the filter; always 0.
    pub padding: u16,
    /// The routed-names filter: the bit of every name a draw is installed
    /// for ([`RoutedNames`]); a static miss for a name whose bit is clear
    /// skips the routed lookups.
    pub routed_names: [u64; ROUTED_FILTER_WORDS],
}

/// Words of the routed-names filter (keep in step with the C program).
pub const ROUTED_FILTER_WORDS: usize = 64;

/// The routed-names filter: a bit per name, at its FNV-1a hash (of the
/// lowercase wire name up to its root label, as the program reads it)
/// modulo the filter's size. Two names may share a bit: then a miss for
/// the other one also looks for a draw, and finds none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutedNames([u64; ROUTED_FILTER_WORDS]);

impl Default for RoutedNames {
    /// No name.
    fn default() -> RoutedNames {
        RoutedNames([0; ROUTED_FILTER_WORDS])
    }
}

impl RoutedNames {
    /// Sets the bit of `name`, a key's lowercase, zero-padded wire name.
    pub fn insert(&mut self, name: &[u8]) {
        let bit = (fnv1a(wire_name_of(name)) % (ROUTED_FILTER_WORDS as u64 * 64)) as usize;
        self.0[bit / 64] |= 1 << (bit % 64);
    }

    pub fn words(&self) -> [u64; ROUTED_FILTER_WORDS] {
        self.0
    }
}

/// The wire name at the start of `padded`, its root label included.
fn wire_name_of(padded: &[u8]) -> &[u8] {
    let mut at = 0;
    while let Some(&length) = padded.get(at) {
        at += 1 + usize::from(length);
        if length == 0 {
            break;
        }
    }
    &padded[..at.min(padded.len())]
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// The `limit` map's only value: the per-source token bucket, in
/// nanoseconds of credit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limit {
    /// What one answer costs: a second over the rate.
    pub emission_ns: u64,
    /// The most credit a source holds: `burst` answers.
    pub capacity_ns: u64,
    /// 1 when the limit applies.
    pub enabled: u32,
    /// 1 to drop queries over the limit, 0 to pass them up.
    pub drop: u32,
}

// SAFETY: plain `repr(C)` data without padding (a u32, then byte arrays
// of 260 octets in all), valid for any bit pattern.
unsafe impl aya::Pod for AnswerKey {}
// SAFETY: as above: 8 octets of u16 fields, then an even-sized byte array.
unsafe impl aya::Pod for Answer {}
// SAFETY: four u16 (the last one padding, written as 0), then u64s at 8: no implicit padding.
unsafe impl aya::Pod for Config {}
// SAFETY: an AnswerKey (264 octets, 4-aligned) and a u32: no padding.
unsafe impl aya::Pod for DrawKey {}
// SAFETY: 34 u32.
unsafe impl aya::Pod for Draw {}
// SAFETY: two u32.
unsafe impl aya::Pod for ClassValue {}
// SAFETY: two u32.
unsafe impl aya::Pod for VariantKey {}
// SAFETY: two u64 then two u32: 24 octets, no padding.
unsafe impl aya::Pod for Limit {}

impl AnswerKey {
    /// The key of a question in generation 0 (`name` in lowercase wire
    /// form); `None` for a name longer than a wire name may be.
    pub fn new(name: &[u8], qtype: u16, qclass: u16) -> Option<AnswerKey> {
        let mut padded = [0; MAX_NAME + 1];
        padded.get_mut(..name.len()).filter(|_| name.len() <= MAX_NAME)?.copy_from_slice(name);
        Some(AnswerKey { generation: 0, name: padded, qtype: qtype.to_be_bytes(), qclass: qclass.to_be_bytes() })
    }

    /// The same question in `generation`.
    pub fn in_generation(self, generation: u32) -> AnswerKey {
        AnswerKey { generation, ..self }
    }
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answer").field("flags", &self.flags).field("counts", &self.counts).field("body", &self.body()).finish()
    }
}

impl Answer {
    /// `None` when `body` is empty or longer than the kernel serves.
    pub fn new(flags: u16, counts: [u16; 3], body: &[u8]) -> Option<Answer> {
        if body.is_empty() || body.len() > MAX_BODY {
            return None;
        }
        let mut padded = [0; MAX_BODY];
        padded[..body.len()].copy_from_slice(body);
        Some(Answer { len: body.len() as u16, flags, counts, sum: ones_complement_sum(body), body: padded })
    }

    pub fn body(&self) -> &[u8] {
        &self.body[..usize::from(self.len)]
    }
}

/// The folded one's complement sum of `bytes` as network-order 16-bit
/// words, an odd last octet padded with zero (RFC 1071).
pub fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = bytes.chunks(2).map(|pair| u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_sets_the_bit_of_its_fnv1a_hash_up_to_its_root_label() {
        // FNV-1a of the root name's single zero octet.
        assert_eq!(fnv1a(&[0]), 0xaf63_bd4c_8601_b7df);
        let mut padded = [0u8; MAX_NAME + 1];
        padded[..9].copy_from_slice(b"\x03svc\x03tst\x00");
        assert_eq!(wire_name_of(&padded), b"\x03svc\x03tst\x00", "the padding is not hashed");
        let mut names = RoutedNames::default();
        names.insert(&padded);
        let bit = fnv1a(b"\x03svc\x03tst\x00") % (ROUTED_FILTER_WORDS as u64 * 64);
        let set: Vec<u64> =
            (0..ROUTED_FILTER_WORDS as u64 * 64).filter(|&at| names.words()[at as usize / 64] >> (at % 64) & 1 == 1).collect();
        assert_eq!(set, [bit]);
    }
}
