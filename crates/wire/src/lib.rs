//! DNS wire format for Pharos: parse a query, write a response.
//!
//! Everything here is a plain function over byte slices: no sockets, no
//! clocks, no allocation on the parse path. Record types, zone files and
//! presentation format live in the `domain` crate; this crate only does the
//! part that sits on the per-query hot path.
//!
//! It also holds the one way the workspace tells an error with its causes
//! ([`causes()`]), being the crate every other one depends on.

pub mod causes;
pub mod edns;
pub mod framing;
pub mod name;
pub mod proxy;
pub mod query;
pub mod response;
pub mod writer;

pub use causes::causes;
pub use edns::{ClientSubnet, Edns};
pub use query::{Query, Reject, parse_query, query_read};
pub use writer::MessageWriter;

/// Record types and other numbers the hot path needs by name.
pub mod types {
    pub const A: u16 = 1;
    pub const NS: u16 = 2;
    pub const CNAME: u16 = 5;
    pub const SOA: u16 = 6;
    pub const PTR: u16 = 12;
    pub const HINFO: u16 = 13;
    pub const MX: u16 = 15;
    pub const TXT: u16 = 16;
    pub const AAAA: u16 = 28;
    pub const SRV: u16 = 33;
    pub const DNAME: u16 = 39;
    pub const OPT: u16 = 41;
    pub const DS: u16 = 43;
    pub const RRSIG: u16 = 46;
    pub const NSEC: u16 = 47;
    pub const NSEC3: u16 = 50;
    pub const NSEC3PARAM: u16 = 51;
    pub const TSIG: u16 = 250;
    pub const IXFR: u16 = 251;
    pub const AXFR: u16 = 252;
    pub const MAILB: u16 = 253;
    pub const MAILA: u16 = 254;
    pub const ANY: u16 = 255;

    pub const CLASS_IN: u16 = 1;
    /// RFC 2136 section 1.3: the class of an UPDATE's "delete this RR"
    /// and "RRset does not exist" records.
    pub const CLASS_NONE: u16 = 254;
    pub const CLASS_ANY: u16 = 255;

    /// Meta types (RFC 6895 section 3.1): never stored, only asked about.
    pub fn is_meta(rtype: u16) -> bool {
        (128..=255).contains(&rtype) || rtype == OPT
    }
}

/// Response codes, including the extended ones carried in the OPT record.
pub mod rcode {
    pub const NOERROR: u16 = 0;
    pub const FORMERR: u16 = 1;
    pub const SERVFAIL: u16 = 2;
    pub const NXDOMAIN: u16 = 3;
    pub const NOTIMP: u16 = 4;
    pub const REFUSED: u16 = 5;
    pub const YXDOMAIN: u16 = 6;
    /// RFC 2136 section 2.2: an RRset that should not exist does.
    pub const YXRRSET: u16 = 7;
    /// RFC 2136 section 2.2: an RRset that should exist does not.
    pub const NXRRSET: u16 = 8;
    pub const NOTAUTH: u16 = 9;
    /// RFC 2136 section 2.2: a name outside the zone of the update.
    pub const NOTZONE: u16 = 10;
    pub const BADVERS: u16 = 16;
}

/// Header flag bits in the second 16-bit word of the header.
pub mod flags {
    pub const QR: u16 = 0x8000;
    pub const AA: u16 = 0x0400;
    pub const TC: u16 = 0x0200;
    pub const RD: u16 = 0x0100;
    pub const RA: u16 = 0x0080;
    pub const AD: u16 = 0x0020;
    pub const CD: u16 = 0x0010;
    pub const OPCODE_MASK: u16 = 0x7800;
}

/// Size of the fixed DNS header.
pub const HEADER_LEN: usize = 12;

/// Largest message a DNS-over-TCP frame can carry.
pub const MAX_STREAM_MESSAGE: usize = 65535;

/// Smallest UDP payload every client accepts (RFC 1035 section 4.2.1).
pub const MIN_UDP_PAYLOAD: u16 = 512;

pub(crate) fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}
