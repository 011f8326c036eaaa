//! Writing a response into a caller's buffer, with name compression
//! (RFC 1035 section 4.1.4).
//!
//! The writer never allocates beyond the buffer it is given; a buffer whose
//! capacity is reserved once is reused for every message.

use crate::name::{self, label_offsets};
use crate::{HEADER_LEN, types};

/// How many earlier names the compressor remembers. Past this, names are
/// still written correctly, just less compactly.
const COMPRESSION_SLOTS: usize = 48;
/// Pointers carry 14 bits of offset.
const MAX_POINTER_TARGET: usize = 0x3FFF;

/// Writes one DNS message at the end of a `Vec<u8>`.
pub struct MessageWriter<'b> {
    buf: &'b mut Vec<u8>,
    /// Where the message starts in `buf`: pointers are relative to it.
    base: usize,
    known_names: [u16; COMPRESSION_SLOTS],
    known_len: usize,
}

impl<'b> MessageWriter<'b> {
    /// Starts a message at the current end of `buf`, with a zeroed header.
    pub fn new(buf: &'b mut Vec<u8>) -> Self {
        let base = buf.len();
        buf.extend_from_slice(&[0; HEADER_LEN]);
        MessageWriter { buf, base, known_names: [0; COMPRESSION_SLOTS], known_len: 0 }
    }

    /// Length of the message so far.
    pub fn len(&self) -> usize {
        self.buf.len() - self.base
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message so far.
    pub fn message(&self) -> &[u8] {
        &self.buf[self.base..]
    }

    /// Cuts the message back to `len` octets, forgetting names past it.
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(self.base + len);
        let kept = self.known_names[..self.known_len].iter().take_while(|&&offset| (offset as usize) < len).count();
        self.known_len = kept;
    }

    pub fn set_id(&mut self, id: u16) {
        self.put_u16_at(0, id);
    }

    pub fn set_flags(&mut self, flags: u16) {
        self.put_u16_at(2, flags);
    }

    /// Sets QDCOUNT, ANCOUNT, NSCOUNT and ARCOUNT.
    pub fn set_counts(&mut self, counts: [u16; 4]) {
        for (index, count) in counts.into_iter().enumerate() {
            self.put_u16_at(4 + 2 * index, count);
        }
    }

    fn put_u16_at(&mut self, at: usize, value: u16) {
        self.buf[self.base + at..self.base + at + 2].copy_from_slice(&value.to_be_bytes());
    }

    /// Appends bytes that are already in wire form and hold no names the
    /// compressor should learn.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Writes a two-octet length, then whatever `body` writes, then sets
    /// the length to what was written.
    pub fn length_prefixed(&mut self, body: impl FnOnce(&mut Self)) {
        let length_at = self.len();
        self.u16(0);
        body(self);
        let length = (self.len() - length_at - 2) as u16;
        self.put_u16_at(length_at, length);
    }

    /// Appends `count` zero octets.
    pub fn zeros(&mut self, count: usize) {
        self.buf.resize(self.buf.len() + count, 0);
    }

    pub fn u16(&mut self, value: u16) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    pub fn u32(&mut self, value: u32) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    /// Writes a question section entry copied from the query, so the name
    /// goes back exactly as it was asked (RFC 1035 section 7.3; 0x20 case).
    pub fn question(&mut self, question: &[u8]) {
        let name_start = self.len();
        self.buf.extend_from_slice(question);
        if question.len() > 4 {
            self.remember_labels(name_start, &question[..question.len() - 4]);
        }
    }

    /// Writes an uncompressed wire name, compressed against the names
    /// already in the message.
    pub fn name(&mut self, wire_name: &[u8]) {
        for label_at in label_offsets(wire_name) {
            let suffix = &wire_name[label_at..];
            if suffix == [0] {
                break;
            }
            if let Some(target) = self.find(suffix) {
                self.write_labels(&wire_name[..label_at]);
                self.u16(0xC000 | target);
                return;
            }
        }
        self.write_labels(&wire_name[..wire_name.len() - 1]);
        self.buf.push(0);
    }

    /// Writes a resource record: owner, type, class, TTL and record data.
    /// Names inside the record data of the RFC 1035 types are compressed.
    pub fn record(&mut self, owner: &[u8], rtype: u16, class: u16, ttl: u32, rdata: &[u8]) {
        self.name(owner);
        self.record_after_owner(rtype, class, ttl, rdata);
    }

    /// Like [`Self::record`] with an owner that is already in the message at
    /// `owner_offset` (written as a pointer).
    pub fn record_at(&mut self, owner_offset: u16, rtype: u16, class: u16, ttl: u32, rdata: &[u8]) {
        self.u16(0xC000 | owner_offset);
        self.record_after_owner(rtype, class, ttl, rdata);
    }

    /// Writes an A (4 octets) or AAAA (16 octets) record owned by the
    /// name at `owner_offset`: a fixed layout, written in one copy.
    pub fn address_record_at(&mut self, owner_offset: u16, ttl: u32, address: &[u8]) {
        let rtype = if address.len() == 4 { types::A } else { types::AAAA };
        let mut record = [0u8; 12 + 16];
        record[..2].copy_from_slice(&(0xC000 | owner_offset).to_be_bytes());
        record[2..4].copy_from_slice(&rtype.to_be_bytes());
        record[4..6].copy_from_slice(&types::CLASS_IN.to_be_bytes());
        record[6..10].copy_from_slice(&ttl.to_be_bytes());
        record[10..12].copy_from_slice(&(address.len() as u16).to_be_bytes());
        record[12..12 + address.len()].copy_from_slice(address);
        self.buf.extend_from_slice(&record[..12 + address.len()]);
    }

    fn record_after_owner(&mut self, rtype: u16, class: u16, ttl: u32, rdata: &[u8]) {
        self.u16(rtype);
        self.u16(class);
        self.u32(ttl);
        self.length_prefixed(|writer| writer.rdata(rtype, rdata));
    }

    fn rdata(&mut self, rtype: u16, rdata: &[u8]) {
        match rtype {
            types::NS | types::CNAME | types::PTR => self.name(rdata),
            types::MX if rdata.len() > 2 => {
                self.raw(&rdata[..2]);
                self.name(&rdata[2..]);
            }
            types::SOA => {
                let mname_len = name::uncompressed_len(rdata, 0).unwrap_or(rdata.len());
                let rname_len = name::uncompressed_len(rdata, mname_len).unwrap_or(0);
                self.name(&rdata[..mname_len]);
                self.name(&rdata[mname_len..mname_len + rname_len]);
                self.raw(&rdata[mname_len + rname_len..]);
            }
            _ => self.raw(rdata),
        }
    }

    /// Writes labels (no terminating root) and remembers where each starts.
    fn write_labels(&mut self, labels: &[u8]) {
        let start = self.len();
        self.buf.extend_from_slice(labels);
        self.remember_labels(start, labels);
    }

    fn remember_labels(&mut self, start: usize, labels: &[u8]) {
        for label_at in label_offsets(labels) {
            let offset = start + label_at;
            if labels.get(label_at).is_none_or(|&len| len == 0) {
                break;
            }
            if offset > MAX_POINTER_TARGET || self.known_len == COMPRESSION_SLOTS {
                return;
            }
            self.known_names[self.known_len] = offset as u16;
            self.known_len += 1;
        }
    }

    /// The offset of a name already in the message equal (ignoring ASCII
    /// case) to `suffix`.
    fn find(&self, suffix: &[u8]) -> Option<u16> {
        let message = self.message();
        self.known_names[..self.known_len].iter().copied().find(|&offset| equals_name_at(message, offset as usize, suffix))
    }
}

/// Compares the possibly compressed name at `offset` in `message` with the
/// uncompressed lowercase `wire_name`.
fn equals_name_at(message: &[u8], mut offset: usize, wire_name: &[u8]) -> bool {
    let mut pos = 0;
    // Each pointer must go strictly backwards, so this many hops is plenty.
    for _ in 0..=name::MAX_NAME_LEN {
        let Some(&len) = message.get(offset) else { return false };
        if len & 0xC0 == 0xC0 {
            let Some(&low) = message.get(offset + 1) else { return false };
            offset = ((len as usize & 0x3F) << 8) | low as usize;
            continue;
        }
        if wire_name.get(pos) != Some(&len) {
            return false;
        }
        if len == 0 {
            return true;
        }
        let label_len = len as usize + 1;
        let (Some(ours), Some(theirs)) = (message.get(offset + 1..offset + label_len), wire_name.get(pos + 1..pos + label_len)) else {
            return false;
        };
        if !ours.eq_ignore_ascii_case(theirs) {
            return false;
        }
        offset += label_len;
        pos += label_len;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::from_dotted;

    #[test]
    fn compresses_against_the_question_ignoring_case() {
        let mut buf = Vec::new();
        let mut writer = MessageWriter::new(&mut buf);
        writer.question(b"\x03WWW\x07Example\x04test\x00\x00\x01\x00\x01");
        let question_end = writer.len();
        writer.name(&from_dotted("www.example.test").unwrap());
        assert_eq!(&writer.message()[question_end..], &[0xC0, 12]);
        let mail_at = writer.len();
        writer.name(&from_dotted("mail.example.test").unwrap());
        assert_eq!(&writer.message()[mail_at..], b"\x04mail\xC0\x10");
        let again_at = writer.len();
        writer.name(&from_dotted("mail.example.test").unwrap());
        assert_eq!(&writer.message()[again_at..], &[0xC0, mail_at as u8]);
    }

    #[test]
    fn compresses_names_inside_mx_and_soa_but_not_srv() {
        let mut buf = Vec::new();
        let mut writer = MessageWriter::new(&mut buf);
        writer.question(b"\x04test\x00\x00\x0f\x00\x01");
        let mx = [&[0, 10][..], &from_dotted("mx.test").unwrap()].concat();
        writer.record_at(12, types::MX, 1, 300, &mx);
        assert!(writer.message().ends_with(b"\x00\x0a\x02mx\xC0\x0C"));
        let srv = [&[0, 1, 0, 2, 0, 53][..], &from_dotted("ns.test").unwrap()].concat();
        writer.record_at(12, types::SRV, 1, 300, &srv);
        assert!(writer.message().ends_with(b"\x02ns\x04test\x00"));
    }

    #[test]
    fn the_root_name_is_one_octet() {
        let mut buf = Vec::new();
        let mut writer = MessageWriter::new(&mut buf);
        writer.name(b"\x00");
        assert_eq!(writer.message()[HEADER_LEN..], [0]);
    }

    #[test]
    fn address_records_match_the_general_writer() {
        for address in [&[192, 0, 2, 1][..], &[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1][..]] {
            let rtype = if address.len() == 4 { types::A } else { types::AAAA };
            let (mut fast, mut general) = (Vec::new(), Vec::new());
            MessageWriter::new(&mut fast).address_record_at(12, 300, address);
            MessageWriter::new(&mut general).record_at(12, rtype, types::CLASS_IN, 300, address);
            assert_eq!(fast, general);
        }
    }
}
