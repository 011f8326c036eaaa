//! The first-label filter (`first_labels` in bpf/answer.bpf.c): per
//! generation, one bit per hashed first label of the questions that
//! generation's snapshot may answer in the kernel. The program reads a
//! query's first eight name octets and passes it up at once when their
//! bit is clear, so a miss costs neither reading and hashing the whole
//! name nor searching the answers map: what a flood of names the zone
//! does not hold (a random-subdomain attack) mostly is. A set bit only
//! sends the query on to the exact lookup, so a collision costs time,
//! never a wrong answer.

use std::collections::HashMap;

use crate::maps::AnswerKey;

/// `MIN_FIRST_LABEL_BITS` and `MAX_FIRST_LABEL_BITS` in the program.
const MIN_BITS: u16 = 12;
const MAX_BITS: u16 = 26;
/// Bits per question the kernel may hold: at most one in sixteen of the
/// bits set when every question has a first label of its own.
const BITS_PER_QUESTION: u64 = 16;
/// `FIBONACCI_MULTIPLIER` in the program: 2^64 over the golden ratio,
/// which spreads keys that differ in a few octets over the whole table.
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// The filter's size for `questions` questions per generation, as log2
/// of its bits per generation.
pub(crate) fn bits_for(questions: u64) -> u16 {
    match questions.saturating_mul(BITS_PER_QUESTION).checked_next_power_of_two() {
        Some(wanted) => (wanted.trailing_zeros() as u16).clamp(MIN_BITS, MAX_BITS),
        None => MAX_BITS,
    }
}

/// The `first_labels` map's length: two generations of 64-bit words.
pub(crate) fn map_words(bits: u16) -> u32 {
    2 << (bits - 6)
}

/// The filter's words for `generation` (by index in the map, the zero
/// words left out) with a bit for each of `questions`.
pub(crate) fn words<'a>(questions: impl Iterator<Item = &'a AnswerKey>, bits: u16, generation: u32) -> HashMap<u32, u64> {
    let mut words = HashMap::new();
    for question in questions {
        let bit = first_label_key(question.wire_name()).wrapping_mul(FIBONACCI_MULTIPLIER) >> (64 - bits);
        let word = (generation << (bits - 6)) + (bit >> 6) as u32;
        *words.entry(word).or_insert(0) |= 1 << (bit & 63);
    }
    words
}

/// The key the program computes from a query: the first eight octets of
/// the lowercase wire `name`, zero past its first label, little-endian.
fn first_label_key(name: &[u8]) -> u64 {
    let first_label = name.iter().take(usize::from(name[0]) + 1).take(8);
    first_label.enumerate().fold(0, |key, (i, &octet)| key | u64::from(octet) << (8 * i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_the_first_label_alone() {
        assert_eq!(first_label_key(b"\x03www\x07example\x00"), u64::from_le_bytes(*b"\x03www\0\0\0\0"));
        assert_eq!(first_label_key(b"\x00"), 0, "the root");
        assert_eq!(first_label_key(b"\x0anx00001-12\x04test\x00"), u64::from_le_bytes(*b"\x0anx00001"), "cut at eight octets");
    }

    #[test]
    fn sizes_follow_the_questions_within_bounds() {
        assert_eq!(bits_for(0), MIN_BITS);
        assert_eq!(bits_for(4096), 16);
        assert_eq!(bits_for(65536 + 32768), 21);
        assert_eq!(bits_for(u64::MAX), MAX_BITS);
        assert_eq!(map_words(16), 2048);
    }

    #[test]
    fn each_question_sets_its_bit_in_its_generation() {
        let www = AnswerKey::new(b"\x03www\x07example\x00", 1, 1).unwrap();
        let mail = AnswerKey::new(b"\x04mail\x07example\x00", 1, 1).unwrap();
        let www_aaaa = AnswerKey::new(b"\x03www\x07example\x00", 28, 1).unwrap();
        let zero = words([&www, &mail, &www_aaaa].into_iter(), 12, 0);
        let one = words([&www, &mail, &www_aaaa].into_iter(), 12, 1);
        let bits = |words: &HashMap<u32, u64>| words.values().map(|word| word.count_ones()).sum::<u32>();
        assert_eq!(bits(&zero), 2, "one bit per first label");
        assert!(zero.keys().all(|&word| word < 64) && one.keys().all(|&word| (64..128).contains(&word)));
        assert_eq!(bits(&one), 2);
    }
}
