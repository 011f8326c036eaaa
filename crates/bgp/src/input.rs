//! Opening a routing table file: compression and format are told by the
//! first bytes, not by the name, since dumps are often renamed or fetched
//! under names that say nothing.

use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use crate::LoadError;

/// How the file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip, possibly several members (RFC 1952).
    Gzip,
    /// bzip2, possibly several streams.
    Bzip2,
}

/// What the (decompressed) file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// MRT TABLE_DUMP_V2 or TABLE_DUMP (RFC 6396).
    Mrt,
    /// The text `bgpdump -m` prints: `TABLE_DUMP2|time|B|peer|peer AS|prefix|AS path|...`.
    BgpdumpText,
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "uncompressed",
            Compression::Gzip => "gzip",
            Compression::Bzip2 => "bzip2",
        })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Mrt => "MRT RIB dump",
            Format::BgpdumpText => "bgpdump -m text",
        })
    }
}

/// Why a file's first bytes do not start a RIB dump Pharos can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unreadable {
    Empty,
    Updates,
    Unknown,
}

/// A shared count of the bytes read from the file so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct ByteCount(Rc<Cell<u64>>);

impl ByteCount {
    pub(crate) fn get(&self) -> u64 {
        self.0.get()
    }
}

/// Counts what passes through, for progress reports.
struct Counting<R> {
    inner: R,
    count: ByteCount,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.count.0.set(self.count.0.get() + read as u64);
        Ok(read)
    }
}

/// A routing table file, opened, decompressed and recognised.
pub(crate) struct Input {
    pub(crate) compression: Compression,
    pub(crate) format: Format,
    pub(crate) size: u64,
    pub(crate) bytes_read: ByteCount,
    pub(crate) reader: Box<dyn BufRead>,
}

/// How many leading bytes tell the formats apart: one MRT common header.
const SNIFF_LENGTH: u64 = 12;

/// Opens `path`, decompresses it and recognises its format.
pub(crate) fn open(path: &Path) -> Result<Input, LoadError> {
    let io_error = |source| LoadError::Io { path: path.to_owned(), source };
    let file = File::open(path).map_err(io_error)?;
    let size = file.metadata().map_err(io_error)?.len();
    let bytes_read = ByteCount::default();
    let mut raw = BufReader::new(Counting { inner: file, count: bytes_read.clone() });
    let compression = compression_of(raw.fill_buf().map_err(io_error)?);
    let mut decompressed: Box<dyn Read> = match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(raw)),
    };
    let mut head = Vec::new();
    (&mut decompressed).take(SNIFF_LENGTH).read_to_end(&mut head).map_err(|error| LoadError::Corrupt {
        path: path.to_owned(),
        at: "start of file".into(),
        detail: format!("{compression}: {error}"),
    })?;
    let format = format_of(&head).map_err(|unreadable| {
        let path = path.to_owned();
        match unreadable {
            Unreadable::Empty => LoadError::Empty { path },
            Unreadable::Updates => LoadError::UpdatesNotRib { path },
            Unreadable::Unknown => LoadError::UnknownFormat { path },
        }
    })?;
    let reader = Box::new(BufReader::with_capacity(1 << 16, io::Cursor::new(head).chain(decompressed)));
    Ok(Input { compression, format, size, bytes_read, reader })
}

fn compression_of(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(b"BZh") {
        Compression::Bzip2
    } else {
        Compression::None
    }
}

/// MRT types (RFC 6396 section 4) by the 16-bit type field at offset 4.
const MRT_BGP: u16 = 5;
const MRT_TABLE_DUMP: u16 = 12;
const MRT_TABLE_DUMP_V2: u16 = 13;
const MRT_BGP4MP: u16 = 16;
const MRT_BGP4MP_ET: u16 = 17;

fn format_of(head: &[u8]) -> Result<Format, Unreadable> {
    if head.is_empty() {
        return Err(Unreadable::Empty);
    }
    if head.starts_with(b"TABLE_DUMP") {
        return Ok(Format::BgpdumpText);
    }
    if head.starts_with(b"BGP4MP") {
        return Err(Unreadable::Updates);
    }
    match head.get(4..6).map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]])) {
        Some(MRT_TABLE_DUMP | MRT_TABLE_DUMP_V2) => Ok(Format::Mrt),
        Some(MRT_BGP | MRT_BGP4MP | MRT_BGP4MP_ET) => Err(Unreadable::Updates),
        _ => Err(Unreadable::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_content() {
        assert_eq!(format_of(b"TABLE_DUMP2|1277971199|B|"), Ok(Format::BgpdumpText));
        assert_eq!(format_of(b"TABLE_DUMP|1|B|"), Ok(Format::BgpdumpText));
        assert_eq!(format_of(b"BGP4MP|1470931200|A|"), Err(Unreadable::Updates));
        assert_eq!(format_of(&[0x53, 0x88, 0xfe, 0x20, 0, 13, 0, 1, 0, 0, 0, 70]), Ok(Format::Mrt));
        assert_eq!(format_of(&[0x53, 0x88, 0xfe, 0x20, 0, 16, 0, 4, 0, 0, 0, 70]), Err(Unreadable::Updates));
        assert_eq!(format_of(b"1.0.0.0/24\r\n1.0.4.0/22\r\n"), Err(Unreadable::Unknown));
        assert_eq!(format_of(b""), Err(Unreadable::Empty));
    }

    #[test]
    fn compression_is_told_by_magic_bytes() {
        assert_eq!(compression_of(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(compression_of(b"BZh91AY&SY"), Compression::Bzip2);
        assert_eq!(compression_of(b"TABLE_DUMP2|"), Compression::None);
    }
}
