//! The `initial` target: a script of datagrams for the dispatcher's
//! Initial decoder and ClientHello reassembly table
//! (`pharos_artemis::client_hello`), with small caps so a short input can
//! reach them.
//!
//! Random bytes almost never decrypt, so most operations seal fuzzed
//! frames with the client's real Initial keys and the decoder sees them
//! decrypted. Each operation is one header byte `h`, then its body:
//!
//! - `h & 3 == 0`: raw datagram: a 2-byte length, then that many bytes;
//!   bit 4 pads it with zeros to 1200 bytes.
//! - `h & 3 == 1`: sealed Initial whose frames are the next (2-byte
//!   length) bytes.
//! - `h & 3 == 2`: sealed Initial with one CRYPTO frame: a 2-byte offset,
//!   a 2-byte length, the data.
//! - `h & 3 == 3`: the clock moves on by `(h >> 2) * 100` ms.
//!
//! For every operation bits 2-3 pick the client address; for sealed ones
//! bit 4 the version (v1, v2) and bits 5-6 the connection ID.
//!
//! Invariants: nothing panics; the table never holds more entries or
//! bytes than its caps; a dropped datagram never adds bytes; a completed
//! ClientHello hands back at least one datagram, and a name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use pharos_artemis::client_hello::{ClientHelloTable, Decoded, Limits};
use pharos_artemis::initial::{MIN_INITIAL_DATAGRAM, QUIC_V1, QUIC_V2};
use pharos_artemis::seal::{Sealed, crypto_frame};

/// Small caps: a few entries and a few ClientHellos' worth of bytes.
pub const LIMITS: Limits = Limits { entries: 4, bytes_per_entry: 6 * 1024, total_bytes: 16 * 1024, lifetime: Duration::from_secs(2) };
/// Sealed frames stay below the 14-bit Length of a sealed packet.
const MAX_FRAMES: usize = 8 * 1024;

const CLIENTS: [SocketAddr; 4] = [
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), 50000),
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), 50001),
    SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)), 443),
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)), 1),
];

const CONNECTION_IDS: [[u8; 8]; 4] = [[0x83; 8], [0x11; 8], [0xfe; 8], [0x00; 8]];

/// Runs one script (see the module's notes).
pub fn fuzz_initial(data: &[u8]) {
    let mut table = ClientHelloTable::new(LIMITS);
    let mut now = Instant::now();
    let mut script = Script(data);
    while let Some(header) = script.u8() {
        let client = CLIENTS[usize::from(header >> 2 & 3)];
        let datagram = match header & 3 {
            0 => raw(&mut script, header & 0x10 != 0),
            1 => sealed(header, script.chunk()),
            2 => {
                let offset = script.u16();
                sealed(header, crypto_frame(offset.into(), &script.chunk()))
            }
            _ => {
                now += Duration::from_millis(u64::from(header >> 2) * 100);
                continue;
            }
        };
        receive_and_check(&mut table, client, &datagram, now);
    }
}

fn receive_and_check(table: &mut ClientHelloTable, client: SocketAddr, datagram: &[u8], now: Instant) {
    let before = table.bytes();
    let result = table.receive(client, datagram, now);
    assert!(table.len() <= LIMITS.entries, "{} entries, cap {}", table.len(), LIMITS.entries);
    assert!(table.bytes() <= LIMITS.total_bytes, "{} bytes, cap {}", table.bytes(), LIMITS.total_bytes);
    match result {
        Err(_) => assert!(table.bytes() <= before, "a dropped datagram added bytes"),
        Ok(Decoded::Complete { hello, datagrams }) => {
            assert!(!datagrams.is_empty(), "a ClientHello completed with no datagram to forward");
            assert!(!hello.server_name.as_str().is_empty(), "an empty server name");
        }
        Ok(Decoded::Incomplete | Decoded::VersionNegotiation(_)) => {}
    }
}

fn raw(script: &mut Script, pad: bool) -> Vec<u8> {
    let mut datagram = script.chunk();
    if pad {
        datagram.resize(datagram.len().max(MIN_INITIAL_DATAGRAM), 0);
    }
    datagram
}

fn sealed(header: u8, mut frames: Vec<u8>) -> Vec<u8> {
    frames.truncate(MAX_FRAMES);
    let (version, first_byte) = if header & 0x10 == 0 { (QUIC_V1, 0xc3) } else { (QUIC_V2, 0xd3) };
    let dcid = CONNECTION_IDS[usize::from(header >> 5 & 3)].to_vec();
    Sealed { version, first_byte, dcid, ..Sealed::new(frames) }.seal()
}

/// The fuzz input, read front to back; missing bytes read as zero.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(first)
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8().unwrap_or(0), self.u8().unwrap_or(0)])
    }

    /// A 2-byte length, then up to that many bytes.
    fn chunk(&mut self) -> Vec<u8> {
        let length = usize::from(self.u16()).min(self.0.len());
        let (chunk, rest) = self.0.split_at(length);
        self.0 = rest;
        chunk.to_vec()
    }
}
