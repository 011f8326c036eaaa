//! The PROXY protocol on the listeners: the DNS listeners take a header
//! from the sources the operator names (`[server] proxy_protocol_from`),
//! and require it of them; HTTP redirection reads one on every connection
//! when configured to (`[http] proxy_protocol`). The header itself is read
//! by [`pharos_wire::proxy`]; here it is read off a socket, and checked
//! against who may send it.
//!
//! A source named must start every datagram and connection with a header;
//! one that does not is refused. Any other source that starts one with a
//! header is refused too: a client must not choose the address it is
//! answered as. Either way the datagram is dropped or the connection
//! closed, never read as DNS, and counted
//! ([`crate::metrics::Counters::proxy_refusals`]).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pharos_route::prefix::PrefixMap;
use pharos_wire::proxy::{self, Announced, Parsed, ProxyError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use crate::metrics::{Counters, Mechanism, Refusal};

/// Room to read a header in: a version 1 header and then some, a version 2
/// header with its usual extensions.
const HEADER_ROOM: usize = 256;
/// Refusals are logged at most once per this interval: each is counted,
/// and a flood of them would otherwise be a flood of lines.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The sources whose PROXY headers a DNS listener takes (`[server]
/// proxy_protocol_from`).
#[derive(Debug)]
pub struct ProxySources {
    prefixes: PrefixMap<()>,
    started: Instant,
    /// Milliseconds since `started` before which no refusal is logged.
    next_log_ms: AtomicU64,
}

impl ProxySources {
    pub fn new(prefixes: PrefixMap<()>) -> ProxySources {
        ProxySources { prefixes, started: Instant::now(), next_log_ms: AtomicU64::new(0) }
    }

    fn sends_headers(&self, peer: IpAddr) -> bool {
        self.prefixes.lookup(peer.to_canonical()).value.is_some()
    }

    /// Where the DNS message of `datagram`, from `peer`, starts, and the
    /// client it is from: after a header from an allowed source (the
    /// header's client, or the proxy itself for a LOCAL one), at once from
    /// another. `None`: the datagram is refused, and counted.
    pub(crate) fn open_datagram(&self, peer: SocketAddr, datagram: &[u8], counters: &Counters) -> Option<(SocketAddr, usize)> {
        let refusal = if self.sends_headers(peer.ip()) {
            match proxy::parse_datagram(datagram) {
                Ok(header) => return Some((header.source.unwrap_or(peer), header.length)),
                Err(ProxyError::NoHeader) => Refusal::Missing,
                Err(_) => Refusal::Malformed,
            }
        } else if proxy::announces(datagram) == Announced::Header {
            Refusal::Unexpected
        } else {
            return Some((peer, 0));
        };
        self.refuse(Mechanism::Udp, peer, refusal, counters);
        None
    }

    /// Reads what starts `stream`, from `peer`: the header, from an allowed
    /// source, or enough to tell there is none, from another. Returns the
    /// client (the header's, or the peer) and the stream with what was read
    /// past the header put back; `None`: the connection is refused, and
    /// counted in `counters`, or was closed first.
    pub(crate) async fn open_stream<Stream: AsyncRead + Unpin>(
        &self,
        mut stream: Stream,
        peer: SocketAddr,
        counters: &Counters,
        mechanism: Mechanism,
    ) -> Option<(SocketAddr, Rewound<Stream>)> {
        let opened = if self.sends_headers(peer.ip()) {
            match read_header(&mut stream).await {
                Ok((source, ahead)) => Ok((source.unwrap_or(peer), ahead)),
                Err(HeaderError::Header(ProxyError::NoHeader)) => Err(Refusal::Missing),
                Err(HeaderError::Header(_)) => Err(Refusal::Malformed),
                Err(HeaderError::Io(_)) => return None,
            }
        } else {
            match read_unless_header(&mut stream).await.ok()? {
                Some(ahead) => Ok((peer, ahead)),
                None => Err(Refusal::Unexpected),
            }
        };
        match opened {
            Ok((client, ahead)) => Some((client, Rewound::new(ahead, stream))),
            Err(refusal) => {
                self.refuse(mechanism, peer, refusal, counters);
                None
            }
        }
    }

    /// Counts a refusal, and logs it if no other was logged lately.
    fn refuse(&self, mechanism: Mechanism, peer: SocketAddr, refusal: Refusal, counters: &Counters) {
        counters.count_proxy_refusal(mechanism, refusal);
        let now_ms = self.started.elapsed().as_millis() as u64;
        let due = self.next_log_ms.load(Ordering::Relaxed);
        let next = now_ms + REFUSAL_LOG_INTERVAL.as_millis() as u64;
        if now_ms >= due && self.next_log_ms.compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            let (transport, reason) = (mechanism.name(), refusal.name());
            tracing::warn!(%peer, transport, reason, "PROXY protocol: refused (counted in pharos_proxy_refused; logged once per 10 s)");
        }
    }
}

/// Why no PROXY header could be read off a stream.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error(transparent)]
    Header(#[from] ProxyError),
    #[error("the connection failed before its PROXY header ended")]
    Io(#[from] io::Error),
}

/// Reads the PROXY header at the start of `stream`. Returns the client it
/// names, if any, and what was read past the header: the client's first
/// bytes.
pub async fn read_header(stream: &mut (impl AsyncRead + Unpin)) -> Result<(Option<SocketAddr>, Bytes), HeaderError> {
    let mut input = Vec::with_capacity(HEADER_ROOM);
    loop {
        match proxy::parse(&input)? {
            Parsed::Header(header) => return Ok((header.source, Bytes::from(input).slice(header.length..))),
            Parsed::Incomplete => {
                if stream.read_buf(&mut input).await? == 0 {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                }
            }
        }
    }
}

/// Reads the start of `stream` until it tells whether a PROXY header is
/// there: `None` if one is, else what was read.
async fn read_unless_header(stream: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Bytes>> {
    let mut input = Vec::with_capacity(HEADER_ROOM);
    loop {
        match proxy::announces(&input) {
            Announced::Header => return Ok(None),
            Announced::NotHeader => return Ok(Some(input.into())),
            // Closed this early: what there is goes to the listener, which
            // sees the end.
            Announced::Undecided => {
                if stream.read_buf(&mut input).await? == 0 {
                    return Ok(Some(input.into()));
                }
            }
        }
    }
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
    use pharos_route::prefix::prefix_set;
    use tokio::io::AsyncWriteExt;

    use super::*;

    const PROXY: &str = "10.0.0.1:40000";
    const STRANGER: &str = "192.0.2.9:40000";
    /// A plain DNS query's first octets.
    const QUERY: [u8; 12] = [0xAB, 0xCD, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];

    fn proxies() -> ProxySources {
        ProxySources::new(prefix_set("server.proxy_protocol_from", &["10.0.0.0/8".into(), "::1/128".into()]).unwrap())
    }

    fn header(command: u8, client: [u8; 4]) -> Vec<u8> {
        let mut header = proxy::V2_SIGNATURE.to_vec();
        header.extend([0x20 | command, 0x12, 0, 12]);
        header.extend(client);
        header.extend([10, 0, 0, 2, 0xDC, 0x04, 0, 53]);
        header
    }

    fn refused(counters: &Counters, mechanism: Mechanism) -> Vec<(&'static str, u64)> {
        let counted = counters.proxy_refusals().into_iter().filter(|&(over, _, count)| over == mechanism && count > 0);
        counted.map(|(_, refusal, count)| (refusal.name(), count)).collect()
    }

    #[test]
    fn a_datagram_from_a_proxy_is_from_the_client_its_header_names() {
        let (proxies, counters) = (proxies(), Counters::new(true, false));
        let datagram = [header(1, [198, 51, 100, 7]), QUERY.to_vec()].concat();
        let opened = proxies.open_datagram(PROXY.parse().unwrap(), &datagram, &counters);
        assert_eq!(opened, Some(("198.51.100.7:56324".parse().unwrap(), 28)));
        let local = [header(0, [198, 51, 100, 7]), QUERY.to_vec()].concat();
        assert_eq!(proxies.open_datagram(PROXY.parse().unwrap(), &local, &counters), Some((PROXY.parse().unwrap(), 28)), "LOCAL");
        assert_eq!(proxies.open_datagram(STRANGER.parse().unwrap(), &QUERY, &counters), Some((STRANGER.parse().unwrap(), 0)));
        let mapped_proxy = "[::ffff:10.0.0.1]:53".parse().unwrap();
        assert!(proxies.open_datagram(mapped_proxy, &datagram, &counters).is_some(), "a mapped address is its IPv4 one");
        assert!(refused(&counters, Mechanism::Udp).is_empty());
    }

    #[test]
    fn a_datagram_is_refused_for_a_header_from_a_stranger_or_none_from_a_proxy() {
        let (proxies, counters) = (proxies(), Counters::new(true, false));
        let datagram = [header(1, [198, 51, 100, 7]), QUERY.to_vec()].concat();
        assert_eq!(proxies.open_datagram(STRANGER.parse().unwrap(), &datagram, &counters), None);
        assert_eq!(proxies.open_datagram(PROXY.parse().unwrap(), &QUERY, &counters), None);
        assert_eq!(proxies.open_datagram(PROXY.parse().unwrap(), &datagram[..20], &counters), None);
        assert_eq!(proxies.open_datagram(PROXY.parse().unwrap(), b"PROXY TCP4 1.2.3.4 1.2.3.5 1 2\r\n", &counters), None);
        assert_eq!(refused(&counters, Mechanism::Udp), [("unexpected", 1), ("missing", 1), ("malformed", 2)]);
    }

    /// What `open_stream` makes of `sent` from `peer`: the client and the
    /// bytes read after, or `None`; and the refusals counted over TLS.
    async fn open(peer: &str, sent: &[u8]) -> (Option<(SocketAddr, Vec<u8>)>, Vec<(&'static str, u64)>) {
        let counters = Counters::new(true, false);
        let (mut client, server) = tokio::io::duplex(1024);
        client.write_all(sent).await.unwrap();
        drop(client);
        let opened = proxies().open_stream(server, peer.parse().unwrap(), &counters, Mechanism::Tls).await;
        let mut read = Vec::new();
        let opened = match opened {
            Some((client, mut stream)) => {
                stream.read_to_end(&mut read).await.unwrap();
                Some((client, read))
            }
            None => None,
        };
        (opened, refused(&counters, Mechanism::Tls))
    }

    #[tokio::test]
    async fn a_connection_is_from_the_client_its_proxy_names_and_refused_as_a_datagram_is() {
        let framed = [&[0, 12][..], &QUERY].concat();
        let v1 = [&b"PROXY TCP6 2001:db8::7 ::1 5353 853\r\n"[..], &framed].concat();
        assert_eq!(open(PROXY, &v1).await, (Some(("[2001:db8::7]:5353".parse().unwrap(), framed.clone())), vec![]));
        let v2 = [header(1, [198, 51, 100, 7]), framed.clone()].concat();
        assert_eq!(open("[::1]:40000", &v2).await, (Some(("198.51.100.7:56324".parse().unwrap(), framed.clone())), vec![]));
        assert_eq!(open(STRANGER, &framed).await, (Some((STRANGER.parse().unwrap(), framed.clone())), vec![]));
        assert_eq!(open(STRANGER, &v2).await, (None, vec![("unexpected", 1)]));
        assert_eq!(open(STRANGER, &v1).await, (None, vec![("unexpected", 1)]));
        assert_eq!(open(PROXY, &framed).await, (None, vec![("missing", 1)]));
        assert_eq!(open(PROXY, b"PROXY TCP4 x\r\n").await, (None, vec![("malformed", 1)]));
        assert_eq!(open(PROXY, &v2[..20]).await, (None, vec![]), "closed inside its header: nothing to refuse");
        assert_eq!(open(STRANGER, b"PRO").await, (Some((STRANGER.parse().unwrap(), b"PRO".to_vec())), vec![]), "closed undecided");
    }

    #[tokio::test]
    async fn the_bytes_after_the_header_are_read_first() {
        let (mut client, mut server) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"PROXY TCP4 198.51.100.7 192.0.2.1 1 2\r\nGET /").await.unwrap();
        let (proxied, ahead) = read_header(&mut server).await.unwrap();
        assert_eq!(proxied, Some("198.51.100.7:1".parse().unwrap()));
        tokio::io::AsyncWriteExt::write_all(&mut client, b" HTTP/1.1").await.unwrap();
        drop(client);
        let mut rest = String::new();
        Rewound::new(ahead, server).read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "GET / HTTP/1.1");
    }
}
