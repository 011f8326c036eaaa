//! Building query packets byte by byte and exchanging them over UDP and TCP.
//!
//! Queries are built by hand rather than with a message builder so that the
//! suite can send exactly what it means to, including packets no well-behaved
//! client would send (two OPT records, QR set, a truncated question, ...).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use pharos_wire::framing::{LENGTH_LEN, framed, split_frame};

/// An EDNS OPT pseudo-record to put in a query (RFC 6891 section 6.1.2).
#[derive(Clone, Debug)]
pub struct EdnsSpec {
    pub payload: u16,
    pub ext_rcode: u8,
    pub version: u8,
    pub dnssec_ok: bool,
    /// The 15 Z bits after DO (must be zero on the wire; sent to test that
    /// the server ignores them and does not echo them).
    pub z: u16,
    pub options: Vec<(u16, Vec<u8>)>,
}

impl Default for EdnsSpec {
    fn default() -> Self {
        EdnsSpec { payload: 1232, ext_rcode: 0, version: 0, dnssec_ok: false, z: 0, options: Vec::new() }
    }
}

impl EdnsSpec {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0); // owner: root
        out.extend_from_slice(&41u16.to_be_bytes());
        out.extend_from_slice(&self.payload.to_be_bytes());
        out.push(self.ext_rcode);
        out.push(self.version);
        let flags: u16 = (if self.dnssec_ok { 0x8000 } else { 0 }) | (self.z & 0x7fff);
        out.extend_from_slice(&flags.to_be_bytes());
        let rdlen: usize = self.options.iter().map(|(_, d)| 4 + d.len()).sum();
        out.extend_from_slice(&(rdlen as u16).to_be_bytes());
        for (code, data) in &self.options {
            out.extend_from_slice(&code.to_be_bytes());
            out.extend_from_slice(&(data.len() as u16).to_be_bytes());
            out.extend_from_slice(data);
        }
    }
}

/// A well-formed query (with optional deliberate oddities).
#[derive(Clone, Debug)]
pub struct QuerySpec {
    pub id: u16,
    /// Presentation-format name, case preserved (`\.` and `\DDD` escapes allowed).
    pub qname: String,
    pub qtype: u16,
    pub qclass: u16,
    pub opcode: u8,
    pub rd: bool,
    pub cd: bool,
    pub ad: bool,
    /// The reserved header Z bit (RFC 1035: must be zero).
    pub z: bool,
    pub edns: Option<EdnsSpec>,
    /// Append a second, identical OPT record (RFC 6891 section 6.1.1: FORMERR).
    pub second_opt: bool,
}

impl QuerySpec {
    pub fn new(qname: &str, qtype: u16) -> Self {
        QuerySpec {
            id: 0,
            qname: qname.to_string(),
            qtype,
            qclass: 1,
            opcode: 0,
            rd: false,
            cd: false,
            ad: false,
            z: false,
            edns: Some(EdnsSpec::default()),
            second_opt: false,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&self.id.to_be_bytes());
        let mut b2 = (self.opcode & 0x0f) << 3;
        if self.rd {
            b2 |= 0x01;
        }
        let mut b3 = 0u8;
        if self.z {
            b3 |= 0x40;
        }
        if self.ad {
            b3 |= 0x20;
        }
        if self.cd {
            b3 |= 0x10;
        }
        out.push(b2);
        out.push(b3);
        let arcount = match (&self.edns, self.second_opt) {
            (None, _) => 0u16,
            (Some(_), false) => 1,
            (Some(_), true) => 2,
        };
        for count in [1u16, 0, 0, arcount] {
            out.extend_from_slice(&count.to_be_bytes());
        }
        out.extend_from_slice(&encode_name(&self.qname));
        out.extend_from_slice(&self.qtype.to_be_bytes());
        out.extend_from_slice(&self.qclass.to_be_bytes());
        if let Some(edns) = &self.edns {
            edns.encode(&mut out);
            if self.second_opt {
                edns.encode(&mut out);
            }
        }
        out
    }
}

/// Encodes a presentation-format domain name to uncompressed wire format,
/// keeping the case of every letter. Panics on a malformed name: names come
/// from the suite's own case list.
pub fn encode_name(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if text == "." || text.is_empty() {
        out.push(0);
        return out;
    }
    let bytes = text.as_bytes();
    let mut label: Vec<u8> = Vec::new();
    let mut i = 0;
    let push_label = |label: &mut Vec<u8>, out: &mut Vec<u8>| {
        assert!(!label.is_empty(), "empty label in {text:?}");
        assert!(label.len() <= 63, "label longer than 63 octets in {text:?}");
        out.push(label.len() as u8);
        out.extend_from_slice(label);
        label.clear();
    };
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\\' {
            let rest = &bytes[i + 1..];
            if rest.len() >= 3 && rest[..3].iter().all(u8::is_ascii_digit) {
                let v: u32 = std::str::from_utf8(&rest[..3]).unwrap().parse().unwrap();
                assert!(v <= 255, "bad \\DDD escape in {text:?}");
                label.push(v as u8);
                i += 4;
            } else {
                label.push(rest[0]);
                i += 2;
            }
        } else if c == b'.' {
            push_label(&mut label, &mut out);
            i += 1;
        } else {
            label.push(c);
            i += 1;
        }
    }
    if !label.is_empty() {
        push_label(&mut label, &mut out);
    }
    out.push(0);
    assert!(out.len() <= 255, "name longer than 255 octets: {text:?}");
    out
}

/// Renders wire-format name bytes (no compression) as text, case preserved.
pub fn name_to_text(wire: &[u8]) -> String {
    let mut out = String::new();
    let mut pos = 0;
    while pos < wire.len() {
        let len = wire[pos] as usize;
        if len == 0 {
            break;
        }
        if len > 63 || pos + 1 + len > wire.len() {
            out.push_str("<bad>");
            return out;
        }
        for &b in &wire[pos + 1..pos + 1 + len] {
            match b {
                b'.' | b'\\' => {
                    out.push('\\');
                    out.push(b as char);
                }
                0x21..=0x7e => out.push(b as char),
                _ => out.push_str(&format!("\\{b:03}")),
            }
        }
        out.push('.');
        pos += 1 + len;
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// How a packet travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    Udp,
    Tcp,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Udp => "UDP",
            Transport::Tcp => "TCP",
        })
    }
}

/// What came back for one packet.
#[derive(Clone, Debug)]
pub enum Reply {
    Message(Vec<u8>),
    /// Nothing within the timeout (or, over TCP, the connection was closed
    /// without a reply).
    Silence,
    /// A local I/O error (connection refused, ...).
    Error(String),
}

/// Sends `packet` to `server` and waits up to `timeout` for one reply. Over
/// UDP, datagrams whose ID does not match the query's are discarded (the
/// first two octets of `packet` are the ID whenever it has two).
pub fn exchange(server: SocketAddr, transport: Transport, packet: &[u8], timeout: Duration) -> Reply {
    match transport {
        Transport::Udp => exchange_udp(server, packet, timeout),
        Transport::Tcp => exchange_tcp(server, packet, timeout),
    }
}

fn exchange_udp(server: SocketAddr, packet: &[u8], timeout: Duration) -> Reply {
    let sock = match UdpSocket::bind("127.0.0.1:0") {
        Ok(s) => s,
        Err(e) => return Reply::Error(format!("bind: {e}")),
    };
    if let Err(e) = sock.connect(server) {
        return Reply::Error(format!("connect: {e}"));
    }
    if let Err(e) = sock.send(packet) {
        return Reply::Error(format!("send: {e}"));
    }
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65535];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Reply::Silence;
        }
        sock.set_read_timeout(Some(deadline - now)).unwrap();
        match sock.recv(&mut buf) {
            Ok(n) => {
                if packet.len() >= 2 && n >= 2 && buf[..2] != packet[..2] {
                    continue; // a stray reply to something else
                }
                return Reply::Message(buf[..n].to_vec());
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Reply::Silence;
            }
            // ICMP port unreachable shows up as ConnectionRefused.
            Err(e) => return Reply::Error(format!("recv: {e}")),
        }
    }
}

fn exchange_tcp(server: SocketAddr, packet: &[u8], timeout: Duration) -> Reply {
    let mut stream = match TcpStream::connect_timeout(&server, timeout) {
        Ok(s) => s,
        Err(e) => return Reply::Error(format!("connect: {e}")),
    };
    let _ = stream.set_nodelay(true);
    if let Err(e) = stream.write_all(&framed(packet)) {
        return Reply::Error(format!("write: {e}"));
    }
    let deadline = Instant::now() + timeout;
    let mut read_exact = |buf: &mut [u8]| -> Result<bool, String> {
        let mut got = 0;
        while got < buf.len() {
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            stream.set_read_timeout(Some(deadline - now)).unwrap();
            match stream.read(&mut buf[got..]) {
                Ok(0) => return Ok(false), // closed
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Ok(false);
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(false),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        Ok(true)
    };
    let mut frame = Vec::new();
    while let Err(needed) = split_frame(&frame) {
        let filled = frame.len();
        frame.resize(filled + needed, 0);
        match read_exact(&mut frame[filled..]) {
            Ok(true) => {}
            Ok(false) if filled < LENGTH_LEN => return Reply::Silence,
            Ok(false) => return Reply::Error("connection closed in the middle of a reply".into()),
            Err(e) => return Reply::Error(e),
        }
    }
    frame.drain(..LENGTH_LEN);
    Reply::Message(frame)
}
