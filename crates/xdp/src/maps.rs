//! The layout of the program's maps, as bpf/answer.bpf.c declares them.

use std::fmt;

/// Longest wire name (RFC 1035 section 3.1).
pub const MAX_NAME: usize = 255;
/// Longest reply body the kernel serves; larger ones pass up.
pub const MAX_BODY: usize = 1024;

/// A question the kernel answers, as user space lists it: its lowercase
/// wire name, zero-padded, type and class in network order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    pub name: [u8; MAX_NAME + 1],
    pub qtype: [u8; 2],
    pub qclass: [u8; 2],
}

/// How the maps key a question: its generation (0 or 1), type and class,
/// and the FNV-1a hash of its lowercase wire name (up to its root label,
/// low 32 bits first), as the program computes it while reading the
/// name. Two names may share a hash: the [`Entry`] found holds the name,
/// and the program answers only when it matches.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuestionKey {
    pub generation: u32,
    pub qtype: [u8; 2],
    pub qclass: [u8; 2],
    pub name_hash: [u32; 2],
}

/// The `answers` map's value: the question's name, and its reply or,
/// with `routed` 1, an empty reply: the program draws among the
/// question's variants instead; and the hash of its replies' response
/// rate limiting class ([`crate::response_limit::response_class`]).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub name: [u8; MAX_NAME + 1],
    pub routed: u32,
    pub response_class: [u32; 2],
    pub reply: Answer,
}

/// The `variants` map's value, and a static [`Entry`]'s reply: what
/// follows the question in the reply.
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
    pub question: QuestionKey,
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

/// Variants per generation in the `variants` array: variant `id` of
/// `generation` is at `generation * ROUTED_VARIANTS + id`.
pub const ROUTED_VARIANTS: usize = 8192;

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
    /// Log2 of the bits per generation of the `first_labels` filter
    /// ([`crate::first_labels`]); 0 leaves the filter out.
    pub first_label_bits: u16,
    /// Which snapshot this is: a new one at every sync, so that the
    /// program's cache of client classes never answers from an earlier one.
    pub epoch: u32,
}

/// Words of the `ports` map's only value: a bit per UDP port.
pub const PORT_WORDS: usize = 65536 / 64;

/// The served ports as the `ports` map holds them: bit `p % 64` of word
/// `p / 64` set for port `p`.
pub fn port_set(ports: &[u16]) -> [u64; PORT_WORDS] {
    let mut words = [0; PORT_WORDS];
    for &port in ports {
        words[usize::from(port / 64)] |= 1 << (port % 64);
    }
    words
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

/// The `rrl_settings` map's only value: response rate limiting's
/// parameters in the program's units.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RrlSettings {
    /// Nanoseconds a token takes to come back: a second over the rate.
    pub interval_ns: u64,
    /// Nanoseconds of tokens a bucket holds: a second's worth.
    pub depth_ns: u64,
    /// Every `slip`th limited response is sent truncated; 0: none.
    pub slip: u32,
    /// 1 when responses are limited.
    pub enabled: u32,
    /// 1 when the whitelist trie has prefixes.
    pub whitelist: u32,
    /// Always 0.
    pub unused: u32,
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

// SAFETY: plain `repr(C)` data without padding (a u32, four octets, two
// u32), valid for any bit pattern.
unsafe impl aya::Pod for QuestionKey {}
// SAFETY: 256 octets, three u32 at 256, then an Answer (2-aligned, 1032
// octets) at 268: 1300 octets, a multiple of the 4-octet alignment.
unsafe impl aya::Pod for Entry {}
// SAFETY: 8 octets of u16 fields, then an even-sized byte array.
unsafe impl aya::Pod for Answer {}
// SAFETY: four u16, then a u32 at 8: no padding.
unsafe impl aya::Pod for Config {}
// SAFETY: a QuestionKey (12 octets, 4-aligned) and a u32: no padding.
unsafe impl aya::Pod for DrawKey {}
// SAFETY: 34 u32.
unsafe impl aya::Pod for Draw {}
// SAFETY: two u32.
unsafe impl aya::Pod for ClassValue {}
// SAFETY: two u64 then two u32: 24 octets, no padding.
unsafe impl aya::Pod for Limit {}
// SAFETY: two u64 then four u32: 32 octets, no padding.
unsafe impl aya::Pod for RrlSettings {}

impl AnswerKey {
    /// A question, `name` in lowercase wire form; `None` for a name longer
    /// than a wire name may be.
    pub fn new(name: &[u8], qtype: u16, qclass: u16) -> Option<AnswerKey> {
        let mut padded = [0; MAX_NAME + 1];
        padded.get_mut(..name.len()).filter(|_| name.len() <= MAX_NAME)?.copy_from_slice(name);
        Some(AnswerKey { name: padded, qtype: qtype.to_be_bytes(), qclass: qclass.to_be_bytes() })
    }

    /// The wire name, its root label included, without the padding.
    pub fn wire_name(&self) -> &[u8] {
        wire_name_of(&self.name)
    }

    /// How the maps key this question in `generation`.
    pub fn in_generation(&self, generation: u32) -> QuestionKey {
        let hash = fnv1a(wire_name_of(&self.name));
        QuestionKey { generation, qtype: self.qtype, qclass: self.qclass, name_hash: [hash as u32, (hash >> 32) as u32] }
    }
}

impl QuestionKey {
    /// The same question in `generation`.
    pub fn in_generation(self, generation: u32) -> QuestionKey {
        QuestionKey { generation, ..self }
    }
}

impl Entry {
    /// `question`'s entry answered by `reply`, of response class `response_class`.
    pub fn answered(question: &AnswerKey, reply: Answer, response_class: [u32; 2]) -> Entry {
        Entry { name: question.name, routed: 0, response_class, reply }
    }

    /// `question`'s entry sending the program to its draws.
    pub fn routed(question: &AnswerKey, response_class: [u32; 2]) -> Entry {
        Entry { name: question.name, routed: 1, response_class, reply: Answer::NONE }
    }
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answer").field("flags", &self.flags).field("counts", &self.counts).field("body", &self.body()).finish()
    }
}

impl Answer {
    /// No reply (length 0): the program passes the question up.
    pub const NONE: Answer = Answer { len: 0, flags: 0, counts: [0; 3], sum: 0, body: [0; MAX_BODY] };

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
    fn a_question_is_keyed_by_the_fnv1a_hash_of_its_name_up_to_its_root_label() {
        // FNV-1a of the root name's single zero octet.
        assert_eq!(fnv1a(&[0]), 0xaf63_bd4c_8601_b7df);
        let question = AnswerKey::new(b"\x03svc\x03tst\x00", 28, 1).unwrap();
        assert_eq!(wire_name_of(&question.name), b"\x03svc\x03tst\x00", "the padding is not hashed");
        let hash = fnv1a(b"\x03svc\x03tst\x00");
        let key = question.in_generation(1);
        assert_eq!(key.name_hash, [hash as u32, (hash >> 32) as u32]);
        assert_eq!((key.generation, key.qtype, key.qclass), (1, [0, 28], [0, 1]));
        assert_eq!(key.in_generation(0), question.in_generation(0));
    }
}
