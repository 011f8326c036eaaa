//! The PROXY protocol (HAProxy's, versions 1 and 2): a header a proxy sends
//! first on every connection it opens, naming the client the connection
//! is really for. A listener configured for it requires the header and
//! never guesses whether one is there, as the specification asks; the
//! bytes after it are the client's own.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// Version 1 headers start with this.
const V1_PREFIX: &[u8] = b"PROXY ";
/// The longest version 1 header, CRLF included.
const V1_MAX: usize = 107;
/// Version 2 headers start with this.
const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
/// Version 2's fixed part: the signature, version and command, address
/// family and protocol, and the length of the rest.
const V2_FIXED: usize = 16;

/// How far a header has been read.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// The header is `length` octets long and names `client`, unless the
    /// proxy speaks for itself (a health check: version 1 `UNKNOWN`,
    /// version 2 `LOCAL`, or an address family other than IP).
    Header { length: usize, client: Option<IpAddr> },
    /// The header goes on past what was read.
    Incomplete,
}

/// Reads the PROXY header at the start of `stream`. Returns the client it
/// names, if any, and what was read past the header: the client's first
/// bytes.
pub async fn read_header(stream: &mut (impl AsyncRead + Unpin)) -> io::Result<(Option<IpAddr>, Bytes)> {
    let mut input = Vec::with_capacity(V1_MAX);
    loop {
        match parse(&input).map_err(|reason| io::Error::new(io::ErrorKind::InvalidData, reason))? {
            Parsed::Header { length, client } => return Ok((client, Bytes::from(input).slice(length..))),
            Parsed::Incomplete => {
                if stream.read_buf(&mut input).await? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
        }
    }
}

/// Reads a header of either version from the start of `input`.
fn parse(input: &[u8]) -> Result<Parsed, &'static str> {
    if V1_PREFIX.starts_with(&input[..input.len().min(V1_PREFIX.len())]) {
        parse_v1(input)
    } else if V2_SIGNATURE.starts_with(&input[..input.len().min(V2_SIGNATURE.len())]) {
        parse_v2(input)
    } else {
        Err("the connection does not start with a PROXY protocol header")
    }
}

/// Version 1: one line of text, `PROXY TCP4 client server client-port
/// server-port`, or `PROXY UNKNOWN` and anything up to the line's end.
fn parse_v1(input: &[u8]) -> Result<Parsed, &'static str> {
    let Some(end) = input.windows(2).take(V1_MAX - 1).position(|pair| pair == b"\r\n") else {
        return if input.len() < V1_MAX { Ok(Parsed::Incomplete) } else { Err("a PROXY version 1 header is longer than 107 octets") };
    };
    const MALFORMED: &str = "a PROXY version 1 header is not PROXY TCP4|TCP6 ADDRESS ADDRESS PORT PORT";
    let line = std::str::from_utf8(&input[V1_PREFIX.len()..end]).map_err(|_| MALFORMED)?;
    let fields: Vec<&str> = line.split(' ').collect();
    let client = match fields[..] {
        ["UNKNOWN", ..] => None,
        ["TCP4", client, server, client_port, server_port] => {
            check_v1_ports(client_port, server_port).ok_or(MALFORMED)?;
            let (client, _): (Ipv4Addr, Ipv4Addr) = (client.parse().map_err(|_| MALFORMED)?, server.parse().map_err(|_| MALFORMED)?);
            Some(client.into())
        }
        ["TCP6", client, server, client_port, server_port] => {
            check_v1_ports(client_port, server_port).ok_or(MALFORMED)?;
            let (client, _): (Ipv6Addr, Ipv6Addr) = (client.parse().map_err(|_| MALFORMED)?, server.parse().map_err(|_| MALFORMED)?);
            Some(client.to_canonical())
        }
        _ => return Err(MALFORMED),
    };
    Ok(Parsed::Header { length: end + 2, client })
}

/// Both ports of a version 1 header are decimal numbers below 65536.
fn check_v1_ports(client: &str, server: &str) -> Option<()> {
    let port = |text: &str| text.bytes().all(|byte| byte.is_ascii_digit()).then(|| text.parse::<u16>().ok()).flatten();
    port(client).and(port(server)).map(|_| ())
}

/// Version 2: binary, the addresses after the fixed part, then optional
/// type-length-value fields, which are skipped.
fn parse_v2(input: &[u8]) -> Result<Parsed, &'static str> {
    let Some(fixed) = input.get(..V2_FIXED) else { return Ok(Parsed::Incomplete) };
    let (version, command, family) = (fixed[12] >> 4, fixed[12] & 0x0F, fixed[13] >> 4);
    let length = V2_FIXED + usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    if version != 2 {
        return Err("a binary PROXY header is not of version 2");
    }
    let Some(addresses) = input.get(V2_FIXED..length) else { return Ok(Parsed::Incomplete) };
    const SHORT: &str = "a PROXY version 2 header is too short for its addresses";
    let client = match (command, family) {
        // LOCAL: the proxy's own connection, a health check.
        (0, _) => None,
        (1, 1) => Some(IpAddr::from(<[u8; 4]>::try_from(addresses.get(..4).ok_or(SHORT)?).expect("four octets"))),
        (1, 2) => Some(Ipv6Addr::from(<[u8; 16]>::try_from(addresses.get(..16).ok_or(SHORT)?).expect("16 octets")).to_canonical()),
        // AF_UNSPEC and AF_UNIX: no IP address to go by.
        (1, 0 | 3) => None,
        (1, _) => return Err("a PROXY version 2 header has an unknown address family"),
        _ => return Err("a PROXY version 2 header has an unknown command"),
    };
    Ok(Parsed::Header { length, client })
}

/// A stream whose first bytes were read ahead (with a PROXY header): reads
/// return those first, then the stream's own.
pub struct Rewound<Stream> {
    ahead: Bytes,
    stream: Stream,
}

impl<Stream> Rewound<Stream> {
    pub fn new(ahead: Bytes, stream: Stream) -> Rewound<Stream> {
        Rewound { ahead, stream }
    }
}

impl<Stream: AsyncRead + Unpin> AsyncRead for Rewound<Stream> {
    fn poll_read(mut self: Pin<&mut Self>, context: &mut Context<'_>, buffer: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.ahead.is_empty() {
            return Pin::new(&mut self.stream).poll_read(context, buffer);
        }
        let length = self.ahead.len().min(buffer.remaining());
        buffer.put_slice(&self.ahead.split_to(length));
        Poll::Ready(Ok(()))
    }
}

impl<Stream: AsyncWrite + Unpin> AsyncWrite for Rewound<Stream> {
    fn poll_write(mut self: Pin<&mut Self>, context: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(context, data)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, context: &mut Context<'_>, data: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(context, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut header = V2_SIGNATURE.to_vec();
        header.extend([0x20 | command, family << 4 | 1]);
        header.extend((addresses.len() as u16).to_be_bytes());
        header.extend(addresses);
        header
    }

    fn client_of(header: &[u8]) -> Result<Option<IpAddr>, &'static str> {
        match parse(header)? {
            Parsed::Header { length, client } if length == header.len() => Ok(client),
            other => panic!("{other:?} for a whole header of {} octets", header.len()),
        }
    }

    #[test]
    fn reads_version_1() {
        assert_eq!(client_of(b"PROXY TCP4 198.51.100.7 192.0.2.1 56324 80\r\n"), Ok(Some("198.51.100.7".parse().unwrap())));
        assert_eq!(client_of(b"PROXY TCP6 2001:db8::7 2001:db8::1 56324 443\r\n"), Ok(Some("2001:db8::7".parse().unwrap())));
        assert_eq!(client_of(b"PROXY TCP6 ::ffff:192.0.2.7 ::1 1 2\r\n"), Ok(Some("192.0.2.7".parse().unwrap())));
        assert_eq!(client_of(b"PROXY UNKNOWN ffff:f...f:ffff 65535 65535\r\n"), Ok(None));
        assert_eq!(client_of(b"PROXY UNKNOWN\r\n"), Ok(None));
        assert_eq!(parse(b"PROXY TCP4 198.51.100.7 192.0"), Ok(Parsed::Incomplete));
        assert_eq!(parse(b"PRO"), Ok(Parsed::Incomplete));
        for bad in [
            &b"PROXY TCP4 198.51.100.7 192.0.2.1 56324\r\n"[..],
            b"PROXY TCP4 2001:db8::7 192.0.2.1 1 2\r\n",
            b"PROXY TCP4 198.51.100.7 192.0.2.1 1 +2\r\n",
            b"PROXY TCP4 198.51.100.7 192.0.2.1 1 65536\r\n",
            b"PROXY TCP4  198.51.100.7 192.0.2.1 1 2\r\n",
            b"PROXY UDP4 198.51.100.7 192.0.2.1 1 2\r\n",
        ] {
            assert!(parse(bad).unwrap_err().contains("not PROXY TCP4"), "{}", String::from_utf8_lossy(bad));
        }
        assert!(parse(&[b"PROXY UNKNOWN ".as_slice(), &[b'x'; 100]].concat()).unwrap_err().contains("longer than 107"));
    }

    #[test]
    fn reads_version_2_and_skips_its_extensions() {
        let ipv4 = [198, 51, 100, 7, 192, 0, 2, 1, 0xDC, 0x04, 0, 80];
        assert_eq!(client_of(&v2(1, 1, &ipv4)), Ok(Some("198.51.100.7".parse().unwrap())));
        let with_tlv = [&ipv4[..], &[0x04, 0, 3, 1, 2, 3]].concat();
        assert_eq!(client_of(&v2(1, 1, &with_tlv)), Ok(Some("198.51.100.7".parse().unwrap())));
        let mut ipv6 = "2001:db8::7".parse::<Ipv6Addr>().unwrap().octets().to_vec();
        ipv6.extend([0; 20]);
        assert_eq!(client_of(&v2(1, 2, &ipv6)), Ok(Some("2001:db8::7".parse().unwrap())));
        assert_eq!(client_of(&v2(0, 0, &[])), Ok(None), "LOCAL");
        assert_eq!(client_of(&v2(1, 3, &[0; 216])), Ok(None), "AF_UNIX");
        let whole = v2(1, 1, &ipv4);
        assert_eq!(parse(&whole[..20]), Ok(Parsed::Incomplete));
        assert_eq!(parse(&whole[..5]), Ok(Parsed::Incomplete));
        assert!(parse(&v2(1, 1, &ipv4[..3])).unwrap_err().contains("too short"));
        assert!(parse(&v2(2, 1, &ipv4)).unwrap_err().contains("unknown command"));
        assert!(parse(&v2(1, 4, &ipv4)).unwrap_err().contains("unknown address family"));
        let mut version_1 = whole.clone();
        version_1[12] = 0x11;
        assert!(parse(&version_1).unwrap_err().contains("not of version 2"));
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(parse(b"GET / HTTP/1.1\r\n").unwrap_err().contains("does not start with a PROXY"));
        assert!(parse(b"\r\n\r\nx").is_err());
    }

    #[tokio::test]
    async fn the_bytes_after_the_header_are_read_first() {
        let (mut client, mut server) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"PROXY TCP4 198.51.100.7 192.0.2.1 1 2\r\nGET /").await.unwrap();
        let (proxied, ahead) = read_header(&mut server).await.unwrap();
        assert_eq!(proxied, Some("198.51.100.7".parse().unwrap()));
        tokio::io::AsyncWriteExt::write_all(&mut client, b" HTTP/1.1").await.unwrap();
        drop(client);
        let mut rest = String::new();
        Rewound::new(ahead, server).read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "GET / HTTP/1.1");
    }
}
