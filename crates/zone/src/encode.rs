//! Turning an [`Answer`] into the bytes after the question, and cutting
//! those bytes to fit a client's payload size.
//!
//! Encoding records where each RRset ends, so a response that does not fit
//! is cut on an RRset boundary: never a partial RRset, and TC set only when
//! what was left out was required.

use pharos_wire::{MessageWriter, flags, types};

use crate::lookup::{Answer, Owner, Records, Rrsigs};

/// Where an RRset ends in an encoded body, and the section counts so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Offset just past the RRset, from the start of the body.
    pub end: u32,
    /// Answer, authority and additional counts up to here.
    pub counts: [u16; 3],
    /// Whether leaving this RRset out must set TC.
    pub required: bool,
    /// The TTL of the RRset's records.
    pub ttl: u32,
}

/// An encoded answer: everything after the question, plus what the header
/// needs. Built once at zone load for names that exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    /// AA, if set.
    pub flags: u16,
    pub rcode: u16,
    /// As [`Answer::compact_nxdomain`].
    pub compact_nxdomain: bool,
    pub bytes: Box<[u8]>,
    pub cuts: Box<[Cut]>,
}

/// How much of a body fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fitted {
    pub len: usize,
    pub counts: [u16; 3],
    pub truncated: bool,
}

/// Writes the sections of `answer` through `writer` (which already holds
/// the header and question), recording a cut after each RRset.
pub fn write_answer(answer: &Answer<'_>, writer: &mut MessageWriter<'_>, cuts: &mut Vec<Cut>) {
    let body_start = writer.len();
    let mut counts = [0u16; 3];
    for (section, entries) in answer.sections.iter().enumerate() {
        for entry in entries {
            counts[section] += write_rrset(writer, &entry.owner, entry.rtype, entry.ttl, &entry.records);
            counts[section] += write_rrsigs(writer, &entry.owner, entry.ttl, &entry.rrsigs);
            cuts.push(Cut { end: (writer.len() - body_start) as u32, counts, required: entry.required, ttl: entry.ttl });
        }
    }
}

fn write_rrset(writer: &mut MessageWriter<'_>, owner: &Owner<'_>, rtype: u16, ttl: u32, records: &Records<'_>) -> u16 {
    match records {
        Records::Stored(rrset) => write_records(writer, owner, rtype, ttl, &rrset.rdatas),
        Records::Made(rdata) => write_records(writer, owner, rtype, ttl, std::slice::from_ref(rdata)),
        Records::Signatures => 0,
    }
}

/// The RRSIG records over an RRset, right after it, with its owner and TTL.
fn write_rrsigs(writer: &mut MessageWriter<'_>, owner: &Owner<'_>, ttl: u32, rrsigs: &Rrsigs<'_>) -> u16 {
    write_records(writer, owner, types::RRSIG, ttl, rrsigs.as_slice())
}

fn write_records(writer: &mut MessageWriter<'_>, owner: &Owner<'_>, rtype: u16, ttl: u32, rdatas: &[Box<[u8]>]) -> u16 {
    for rdata in rdatas {
        match owner {
            Owner::Question => writer.record_at(pharos_wire::HEADER_LEN as u16, rtype, types::CLASS_IN, ttl, rdata),
            Owner::Stored(name) => writer.record(name, rtype, types::CLASS_IN, ttl, rdata),
            Owner::Made(name) => writer.record(name, rtype, types::CLASS_IN, ttl, rdata),
        }
    }
    rdatas.len() as u16
}

/// Header flags for an answer: AA when authoritative.
pub fn answer_flags(answer: &Answer<'_>) -> u16 {
    if answer.authoritative { flags::AA } else { 0 }
}

impl Body {
    /// Encodes `answer` as it would follow a question for `qname` (the
    /// lowercase wire name). Compression pointers into the question stay
    /// valid for any spelling of the name, since only case may differ.
    pub fn build(answer: &Answer<'_>, qname: &[u8]) -> Body {
        let mut buf = Vec::with_capacity(512);
        let mut writer = MessageWriter::new(&mut buf);
        writer.question(&[qname, &[0, 0, 0, 1]].concat());
        let body_start = writer.len();
        let mut cuts = Vec::new();
        write_answer(answer, &mut writer, &mut cuts);
        let (flags, rcode, compact_nxdomain) = (answer_flags(answer), answer.rcode, answer.compact_nxdomain);
        Body { flags, rcode, compact_nxdomain, bytes: buf[body_start..].into(), cuts: cuts.into() }
    }

    /// How much of this body fits in `room` octets.
    pub fn fit(&self, room: usize) -> Fitted {
        fit(&self.cuts, room)
    }

    /// The smallest TTL among the records `fitted` keeps of this body.
    pub fn smallest_ttl(&self, fitted: &Fitted) -> Option<u32> {
        smallest_ttl(&self.cuts, fitted)
    }
}

/// Keeps whole RRsets while they fit. Stops at the first that does not,
/// and sets TC if anything required was left out.
pub fn fit(cuts: &[Cut], room: usize) -> Fitted {
    let mut fitted = Fitted { len: 0, counts: [0; 3], truncated: false };
    for (index, cut) in cuts.iter().enumerate() {
        if cut.end as usize > room {
            fitted.truncated = cuts[index..].iter().any(|left_out| left_out.required);
            break;
        }
        fitted.len = cut.end as usize;
        fitted.counts = cut.counts;
    }
    fitted
}

/// The smallest TTL among the records of the RRsets that `fitted` keeps of
/// those `cuts` end; `None` when it keeps none. A response's cache
/// lifetime, known without reading the response back.
pub fn smallest_ttl(cuts: &[Cut], fitted: &Fitted) -> Option<u32> {
    cuts.iter().take_while(|cut| cut.end as usize <= fitted.len).map(|cut| cut.ttl).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cut whose RRset's TTL falls as `end` grows.
    fn cut(end: u32, counts: [u16; 3], required: bool) -> Cut {
        Cut { end, counts, required, ttl: 1000 - end }
    }

    #[test]
    fn fits_whole_rrsets_and_flags_required_losses() {
        let cuts = [cut(100, [1, 0, 0], true), cut(150, [1, 1, 0], true), cut(400, [1, 1, 3], false)];
        assert_eq!(fit(&cuts, 1000), Fitted { len: 400, counts: [1, 1, 3], truncated: false });
        assert_eq!(fit(&cuts, 200), Fitted { len: 150, counts: [1, 1, 0], truncated: false });
        assert_eq!(fit(&cuts, 120), Fitted { len: 100, counts: [1, 0, 0], truncated: true });
        assert_eq!(fit(&cuts, 50), Fitted { len: 0, counts: [0, 0, 0], truncated: true });
        let glue_last = [cut(100, [0, 1, 0], true), cut(300, [0, 1, 1], false), cut(350, [0, 1, 2], true)];
        assert!(fit(&glue_last, 200).truncated, "required glue after optional data");
    }

    #[test]
    fn the_smallest_ttl_is_of_the_rrsets_kept() {
        let cuts = [cut(100, [1, 0, 0], true), cut(150, [1, 1, 0], true), cut(400, [1, 1, 3], false)];
        let smallest_within = |room| smallest_ttl(&cuts, &fit(&cuts, room));
        assert_eq!([1000, 200, 120, 50].map(smallest_within), [Some(600), Some(850), Some(900), None]);
    }
}
