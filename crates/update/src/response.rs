//! The reply to an UPDATE (RFC 2136 section 3.8): the request's ID and
//! opcode, QR, the RCODE, the zone section echoed and the other sections
//! empty; with an OPT record carrying the Extended DNS Error (RFC 8914)
//! when the request had one, as Pharos's other answers do. Signing it
//! (TSIG) is the caller's, with `pharos_answer::tsig`.

use pharos_wire::edns::OPTION_EXTENDED_ERROR;
use pharos_wire::{HEADER_LEN, MessageWriter, flags, name, types};

/// The UDP payload size the reply's OPT record advertises: Pharos's
/// default (`pharos_answer::DEFAULT_UDP_PAYLOAD`, RFC 9715).
const UDP_PAYLOAD: u16 = 1232;

/// The longest EXTRA-TEXT a reply carries, in octets.
const MAX_EXTRA_TEXT: usize = 300;

/// The reply to `request` with `rcode` and, if the request had EDNS, the
/// Extended DNS Error `(INFO-CODE, EXTRA-TEXT)`. `None` when there is
/// nothing to reply to: no header, or itself a response.
pub fn response(request: &[u8], rcode: u16, extended_error: Option<(u16, &str)>) -> Option<Vec<u8>> {
    let header = request.get(..HEADER_LEN)?;
    let request_flags = u16::from_be_bytes([header[2], header[3]]);
    if request_flags & flags::QR != 0 {
        return None;
    }
    let mut reply = Vec::with_capacity(HEADER_LEN + 300);
    let mut writer = MessageWriter::new(&mut reply);
    writer.set_id(u16::from_be_bytes([header[0], header[1]]));
    writer.set_flags(flags::QR | (request_flags & flags::OPCODE_MASK) | (rcode & 0xF));
    let zone = zone_section(request);
    writer.question(zone.unwrap_or_default());
    let opt = request_has_opt(request, zone.map_or(HEADER_LEN, |zone| HEADER_LEN + zone.len()));
    if opt {
        write_opt(&mut writer, rcode, extended_error);
    }
    writer.set_counts([u16::from(zone.is_some()), 0, 0, u16::from(opt)]);
    Some(reply)
}

/// The request's zone section as sent, when it has exactly one entry
/// that can be read.
fn zone_section(request: &[u8]) -> Option<&[u8]> {
    if request[4..6] != [0, 1] {
        return None;
    }
    let name_len = name::uncompressed_len(request, HEADER_LEN).ok()?;
    request.get(HEADER_LEN..HEADER_LEN + name_len + 4)
}

/// Whether the request's additional section holds an OPT record, its
/// records read from `at` (past the zone section).
fn request_has_opt(request: &[u8], mut at: usize) -> bool {
    let count = |offset: usize| usize::from(u16::from_be_bytes([request[offset], request[offset + 1]]));
    let (before_additional, additional) = (count(6) + count(8), count(10));
    for index in 0..before_additional + additional {
        let Ok(end) = name::skip(request, at) else { return false };
        let Some(fixed) = request.get(end..end + 10) else { return false };
        if index >= before_additional && u16::from_be_bytes([fixed[0], fixed[1]]) == types::OPT {
            return true;
        }
        at = end + 10 + usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
    }
    false
}

/// An OPT record (RFC 6891 section 6.1.3): the upper RCODE bits, version
/// 0, and the Extended DNS Error if there is one.
fn write_opt(writer: &mut MessageWriter<'_>, rcode: u16, extended_error: Option<(u16, &str)>) {
    writer.raw(&[0]);
    writer.u16(types::OPT);
    writer.u16(UDP_PAYLOAD);
    writer.u32(u32::from(rcode >> 4) << 24);
    writer.length_prefixed(|options| {
        if let Some((info_code, text)) = extended_error {
            // Kept short: the reply must fit a datagram, whatever was refused.
            let cut = (0..=text.len().min(MAX_EXTRA_TEXT)).rev().find(|&at| text.is_char_boundary(at)).unwrap_or(0);
            let text = &text.as_bytes()[..cut];
            options.u16(OPTION_EXTENDED_ERROR);
            options.u16(2 + text.len() as u16);
            options.u16(info_code);
            options.raw(text);
        }
    });
}
