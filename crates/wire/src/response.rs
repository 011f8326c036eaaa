//! Reading back a response: what the answer path's summary of it
//! (`pharos_answer::Answered`) must agree with, as its tests and the fuzz
//! targets check. Transports never read back what they send.

use crate::{HEADER_LEN, name, read_u16, read_u32, types};

/// The smallest TTL among the records of `message`, the OPT and TSIG
/// pseudo-records aside (their TTLs are 0 and say nothing of caching);
/// `None` if it has no records or cannot be read.
pub fn smallest_ttl(message: &[u8]) -> Option<u32> {
    let [questions, answers, authorities, additionals] = [4, 6, 8, 10].map(|at| read_u16(message, at).unwrap_or(0) as usize);
    let mut pos = HEADER_LEN;
    for _ in 0..questions {
        pos = name::skip(message, pos).ok()? + 4;
    }
    let mut smallest: Option<u32> = None;
    for _ in 0..answers + authorities + additionals {
        pos = name::skip(message, pos).ok()?;
        let rtype = read_u16(message, pos)?;
        let ttl = read_u32(message, pos + 4)?;
        pos += 10 + read_u16(message, pos + 8)? as usize;
        if pos > message.len() {
            return None;
        }
        if rtype != types::OPT && rtype != types::TSIG {
            smallest = Some(smallest.map_or(ttl, |smallest| smallest.min(ttl)));
        }
    }
    smallest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MessageWriter;

    const OPT: [u8; 11] = [0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0];

    fn response(address_ttls: &[u32], claimed_records: u16) -> Vec<u8> {
        let mut out = Vec::new();
        let mut writer = MessageWriter::new(&mut out);
        writer.question(b"\x01a\x04test\x00\x00\x01\x00\x01");
        for &ttl in address_ttls {
            writer.address_record_at(12, ttl, &[192, 0, 2, 1]);
        }
        writer.raw(&OPT);
        writer.set_counts([1, claimed_records - 1, 0, 1]);
        out
    }

    #[test]
    fn finds_the_smallest_ttl_but_ignores_the_opt_and_tsig_records() {
        assert_eq!(smallest_ttl(&response(&[300, 60, 3600], 4)), Some(60));
        let mut signed = response(&[300], 2);
        signed.extend(b"\x01k\x00\x00\xfa\x00\xff\x00\x00\x00\x00\x00\x00");
        signed[11] = 2;
        assert_eq!(smallest_ttl(&signed), Some(300), "a TSIG record's TTL of 0");
        assert_eq!(smallest_ttl(&response(&[], 1)), None, "only the OPT record");
        assert_eq!(smallest_ttl(&response(&[300], 3)), None, "more records than the message holds");
    }
}
