//! Domain names in wire format.
//!
//! Pharos keeps every stored name as its uncompressed wire form in lower
//! case, so that comparison is a byte comparison and a hash of the bytes
//! is a hash of the name. Names as the client wrote them (0x20 case) are
//! only ever copied, never stored.

use std::fmt;

/// Longest name on the wire, RFC 1035 section 3.1.
pub const MAX_NAME_LEN: usize = 255;
/// Longest label, RFC 1035 section 3.1.
pub const MAX_LABEL_LEN: usize = 63;

/// Why a name could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// The message ended inside the name.
    Truncated,
    /// A label type other than a plain label or a pointer (RFC 6891 6.2).
    BadLabelType,
    /// More than 255 octets.
    TooLong,
    /// A compression pointer that does not point strictly backwards.
    BadPointer,
    /// A compression pointer where none is allowed (the question).
    UnexpectedPointer,
}

/// Length of the uncompressed name starting at `start`, which must not use
/// compression: a query's question name has nothing before it to point to.
pub fn uncompressed_len(msg: &[u8], start: usize) -> Result<usize, NameError> {
    let mut pos = start;
    loop {
        let len = *msg.get(pos).ok_or(NameError::Truncated)? as usize;
        match len & 0xC0 {
            0x00 => {}
            0xC0 => return Err(NameError::UnexpectedPointer),
            _ => return Err(NameError::BadLabelType),
        }
        pos += 1 + len;
        if pos - start > MAX_NAME_LEN {
            return Err(NameError::TooLong);
        }
        if len == 0 {
            return Ok(pos - start);
        }
        if pos > msg.len() {
            return Err(NameError::Truncated);
        }
    }
}

/// Offset just past a possibly compressed name that starts at `start`.
pub fn skip(msg: &[u8], start: usize) -> Result<usize, NameError> {
    let mut pos = start;
    let mut total = 0;
    loop {
        let len = *msg.get(pos).ok_or(NameError::Truncated)? as usize;
        match len & 0xC0 {
            0x00 if len == 0 => return Ok(pos + 1),
            0x00 => {
                total += len + 1;
                if total > MAX_NAME_LEN {
                    return Err(NameError::TooLong);
                }
                pos += 1 + len;
            }
            0xC0 => {
                let target = (len & 0x3F) << 8 | *msg.get(pos + 1).ok_or(NameError::Truncated)? as usize;
                if target >= pos {
                    return Err(NameError::BadPointer);
                }
                return Ok(pos + 2);
            }
            _ => return Err(NameError::BadLabelType),
        }
    }
}

/// Reads the possibly compressed name at `start` (RFC 1035 section
/// 4.1.4) into its uncompressed wire form in lower case, as Pharos stores
/// names. Returns it with the offset just past the name as written (past
/// its first pointer, if it has one). Every pointer must point strictly
/// backwards, so the walk ends.
pub fn read_lowercase(msg: &[u8], start: usize) -> Result<(Vec<u8>, usize), NameError> {
    let mut name = Vec::with_capacity(32);
    let mut pos = start;
    let mut end = None;
    loop {
        let len = *msg.get(pos).ok_or(NameError::Truncated)? as usize;
        match len & 0xC0 {
            0x00 => {
                let label = msg.get(pos..pos + 1 + len).ok_or(NameError::Truncated)?;
                if name.len() + label.len() > MAX_NAME_LEN {
                    return Err(NameError::TooLong);
                }
                name.extend(label.iter().map(u8::to_ascii_lowercase));
                pos += 1 + len;
                if len == 0 {
                    return Ok((name, end.unwrap_or(pos)));
                }
            }
            0xC0 => {
                let target = (len & 0x3F) << 8 | *msg.get(pos + 1).ok_or(NameError::Truncated)? as usize;
                if target >= pos {
                    return Err(NameError::BadPointer);
                }
                end.get_or_insert(pos + 2);
                pos = target;
            }
            _ => return Err(NameError::BadLabelType),
        }
    }
}

/// True when the wire name at `start` is the root name.
pub fn is_root_at(msg: &[u8], start: usize) -> bool {
    msg.get(start) == Some(&0)
}

/// Copies an uncompressed wire name into `dst` in lower case.
/// Label length octets are below 64 and so never change under ASCII case.
pub fn lowercase_into(name: &[u8], dst: &mut [u8]) {
    for (out, byte) in dst.iter_mut().zip(name) {
        *out = byte.to_ascii_lowercase();
    }
}

/// Offsets at which each label of an uncompressed wire name starts,
/// from the full name down to (and including) the root label.
pub fn label_offsets(name: &[u8]) -> LabelOffsets<'_> {
    LabelOffsets { name, next: Some(0) }
}

/// Iterator returned by [`label_offsets`].
pub struct LabelOffsets<'a> {
    name: &'a [u8],
    next: Option<usize>,
}

impl Iterator for LabelOffsets<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        let at = self.next?;
        let len = *self.name.get(at)? as usize;
        self.next = if len == 0 { None } else { Some(at + 1 + len) };
        Some(at)
    }
}

/// Number of labels, not counting the root.
pub fn label_count(name: &[u8]) -> usize {
    label_offsets(name).count() - 1
}

/// True when `name` equals `ancestor` or lies below it. Both are lowercase
/// uncompressed wire names; the suffix must start on a label boundary.
pub fn is_at_or_below(name: &[u8], ancestor: &[u8]) -> bool {
    if ancestor.len() > name.len() {
        return false;
    }
    let start = name.len() - ancestor.len();
    name[start..] == *ancestor && label_offsets(name).any(|offset| offset == start)
}

/// The name with its first label removed, or `None` for the root.
pub fn parent(name: &[u8]) -> Option<&[u8]> {
    let len = *name.first()? as usize;
    if len == 0 { None } else { name.get(1 + len..) }
}

/// Writes a wire name in presentation format (`www.example.`), escaping
/// dots, backslashes and non-printable octets as RFC 1035 section 5.1 says.
pub struct Display<'a>(pub &'a [u8]);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pos = 0;
        let mut wrote_label = false;
        while let Some(&len) = self.0.get(pos) {
            if len == 0 || len & 0xC0 != 0 {
                break;
            }
            let label = self.0.get(pos + 1..pos + 1 + len as usize).unwrap_or(&[]);
            for &byte in label {
                match byte {
                    b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => write!(f, "\\{}", byte as char)?,
                    0x21..=0x7E => write!(f, "{}", byte as char)?,
                    _ => write!(f, "\\{byte:03}")?,
                }
            }
            write!(f, ".")?;
            wrote_label = true;
            pos += 1 + len as usize;
        }
        if !wrote_label {
            write!(f, ".")?;
        }
        Ok(())
    }
}

/// Builds a lowercase wire name from presentation format without escapes.
/// For configuration and tests; zone files go through the `domain` parser.
pub fn from_dotted(text: &str) -> Result<Vec<u8>, NameError> {
    dotted_into(text, &mut [0; MAX_NAME_LEN]).map(<[u8]>::to_vec)
}

/// [`from_dotted`] into `buffer`, for names read per request (an HTTP
/// `Host`): no allocation. Returns the part of `buffer` the name fills.
pub fn dotted_into<'b>(text: &str, buffer: &'b mut [u8; MAX_NAME_LEN]) -> Result<&'b [u8], NameError> {
    let mut len = 0;
    for label in text.trim_end_matches('.').split('.').filter(|label| !label.is_empty()) {
        if label.len() > MAX_LABEL_LEN {
            return Err(NameError::TooLong);
        }
        // The label, its length octet and the root's must still fit.
        let end = len + 1 + label.len();
        if end >= MAX_NAME_LEN {
            return Err(NameError::TooLong);
        }
        buffer[len] = label.len() as u8;
        for (to, byte) in buffer[len + 1..end].iter_mut().zip(label.bytes()) {
            *to = byte.to_ascii_lowercase();
        }
        len = end;
    }
    buffer[len] = 0;
    Ok(&buffer[..=len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_uncompressed_names_and_rejects_pointers() {
        assert_eq!(uncompressed_len(b"\x03www\x07example\x00", 0), Ok(13));
        assert_eq!(uncompressed_len(b"\x00", 0), Ok(1));
        assert_eq!(uncompressed_len(b"\x03ww", 0), Err(NameError::Truncated));
        assert_eq!(uncompressed_len(b"\xC0\x0C", 0), Err(NameError::UnexpectedPointer));
        assert_eq!(uncompressed_len(b"\x41abc", 0), Err(NameError::BadLabelType));
        let long: Vec<u8> = std::iter::repeat_n([63u8; 64], 5).flatten().collect();
        assert_eq!(uncompressed_len(&long, 0), Err(NameError::TooLong));
    }

    #[test]
    fn skips_compressed_names_only_backwards() {
        let msg = b"\x03abc\x00\x01x\xC0\x00";
        assert_eq!(skip(msg, 5), Ok(9));
        assert_eq!(skip(b"\xC0\x00", 0), Err(NameError::BadPointer));
    }

    #[test]
    fn reads_compressed_names_in_lower_case() {
        let msg = b"\x03ABC\x00\x01X\xC0\x00\x01y\xC0\x05";
        assert_eq!(read_lowercase(msg, 0), Ok((b"\x03abc\x00".to_vec(), 5)));
        assert_eq!(read_lowercase(msg, 5), Ok((b"\x01x\x03abc\x00".to_vec(), 9)));
        assert_eq!(read_lowercase(msg, 9), Ok((b"\x01y\x01x\x03abc\x00".to_vec(), 13)), "a pointer to a pointer");
        assert_eq!(read_lowercase(b"\xC0\x00", 0), Err(NameError::BadPointer), "a loop");
        assert_eq!(read_lowercase(b"\x03ab", 0), Err(NameError::Truncated));
        assert_eq!(read_lowercase(b"\x81", 0), Err(NameError::BadLabelType));
        let mut long: Vec<u8> = std::iter::repeat_n([63u8; 64], 4).flatten().collect();
        long.push(0);
        assert_eq!(read_lowercase(&long, 0), Err(NameError::TooLong));
    }

    #[test]
    fn ancestry_respects_label_boundaries() {
        let name = from_dotted("www.example.test").unwrap();
        let zone = from_dotted("example.test").unwrap();
        assert!(is_at_or_below(&name, &zone));
        assert!(is_at_or_below(&zone, &zone));
        assert!(!is_at_or_below(&zone, &name));
        // One label "x\004test": its bytes end like "test." but not on a label boundary.
        assert!(!is_at_or_below(b"\x06x\x04test\x00", b"\x04test\x00"));
        assert!(is_at_or_below(&name, b"\x00"));
        assert_eq!(parent(&name), Some(&zone[..]));
        assert_eq!(label_count(&name), 3);
    }

    #[test]
    fn reads_dotted_names_up_to_255_octets() {
        assert_eq!(from_dotted("WWW.Example.test.").unwrap(), b"\x03www\x07example\x04test\x00");
        assert_eq!(from_dotted(".").unwrap(), b"\x00");
        let label = "a".repeat(63);
        let longest = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(from_dotted(&longest).unwrap().len(), MAX_NAME_LEN);
        assert_eq!(from_dotted(&format!("{longest}b")), Err(NameError::TooLong));
        assert_eq!(from_dotted(&"c".repeat(64)), Err(NameError::TooLong));
    }

    #[test]
    fn displays_with_escapes() {
        assert_eq!(Display(b"\x03a.b\x04test\x00").to_string(), "a\\.b.test.");
        assert_eq!(Display(b"\x00").to_string(), ".");
        assert_eq!(Display(b"\x02\x01z\x00").to_string(), "\\001z.");
    }
}
