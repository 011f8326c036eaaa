//! One client connection: DNS over TLS (RFC 7858 framing, queries
//! pipelined) or DNS over HTTPS over HTTP/2 (RFC 8484 POST, one stream per
//! query, several at once).

use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use futures_util::future::join_all;
use pharos_wire::framing::{LENGTH_LEN, push_framed_with, split_frame};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, HandshakeKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::query::{MAX_QUERY_LEN, Query};
use crate::stats::Answers;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    Dot,
    Doh,
}

/// What every connection of one process shares.
pub struct Ctx {
    pub server: SocketAddr,
    pub proto: Proto,
    pub name: ServerName<'static>,
    /// Without a session cache: every handshake is a full one.
    pub tls_full: Arc<ClientConfig>,
    /// With rustls's in-memory session cache (TLS 1.3 tickets).
    pub tls_resume: Arc<ClientConfig>,
    /// Without a session cache, always verifying the certificate.
    pub tls_verify: Arc<ClientConfig>,
    pub queries: Vec<Query>,
    /// Source addresses, used in turn; empty: the kernel's choice.
    pub sources: Vec<Ipv4Addr>,
    pub next_source: AtomicUsize,
    /// Source of `probe` connections, outside `sources`.
    pub probe_source: Option<Ipv4Addr>,
    /// Every handshake and every batch of queries must finish in this.
    pub timeout: Duration,
    /// `https://server/path`, for DNS over HTTPS.
    pub uri: http::Uri,
}

impl Ctx {
    pub fn take_source(&self) -> Option<Ipv4Addr> {
        if self.sources.is_empty() {
            return None;
        }
        let index = self.next_source.fetch_add(1, Ordering::Relaxed);
        Some(self.sources[index % self.sources.len()])
    }

    /// Query `index` of the list (wrapping), as `id`, appended to `out`
    /// with a two-octet length in front when `framed`.
    fn encode(&self, index: usize, id: u16, framed: bool, out: &mut Vec<u8>) {
        let query = &self.queries[index % self.queries.len()];
        let append = |out: &mut Vec<u8>| {
            let at = out.len();
            out.resize(at + MAX_QUERY_LEN, 0);
            let length = query.encode_into(&mut out[at..], id, None);
            out.truncate(at + length);
            Some(())
        };
        if framed {
            push_framed_with(out, append);
        } else {
            append(out);
        }
    }
}

/// A TCP connection from `source` (any port: with IP_BIND_ADDRESS_NO_PORT
/// the port is picked at connect time for the whole 4-tuple, so each
/// source address has the full ephemeral range towards each server port).
pub async fn tcp_connect(source: Option<Ipv4Addr>, server: SocketAddr) -> Result<TcpStream> {
    let socket = TcpSocket::new_v4().context("socket")?;
    if let Some(source) = source {
        let one: libc::c_int = 1;
        // SAFETY: a valid socket and an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("IP_BIND_ADDRESS_NO_PORT");
        }
        socket.bind(SocketAddr::from((source, 0))).with_context(|| format!("bind {source}"))?;
    }
    let stream = socket.connect(server).await.context("connect")?;
    stream.set_nodelay(true).context("TCP_NODELAY")?;
    Ok(stream)
}

pub enum Conn {
    Dot(Box<DotConn>),
    Doh(DohConn),
}

pub struct DotConn {
    stream: TlsStream<TcpStream>,
    next_id: u16,
    out: Vec<u8>,
    frame: Vec<u8>,
}

pub struct DohConn {
    send: h2::client::SendRequest<Bytes>,
    driver: JoinHandle<()>,
}

/// What a handshake negotiated.
pub struct Opened {
    pub conn: Conn,
    pub handshake: Duration,
    pub resumed: bool,
    pub version: String,
    pub suite: String,
    pub alpn: Option<String>,
}

/// TCP connect + TLS handshake (+ the HTTP/2 preface for DNS over HTTPS).
pub async fn open(ctx: &Ctx, config: &Arc<ClientConfig>, source: Option<Ipv4Addr>) -> Result<Opened> {
    let started = Instant::now();
    let work = async {
        let tcp = tcp_connect(source, ctx.server).await?;
        let tls = TlsConnector::from(config.clone()).connect(ctx.name.clone(), tcp).await.context("TLS handshake")?;
        let handshake = started.elapsed();
        let (_, session) = tls.get_ref();
        let resumed = session.handshake_kind() == Some(HandshakeKind::Resumed);
        let version = session.protocol_version().map(|v| format!("{v:?}")).unwrap_or_default();
        let suite = session.negotiated_cipher_suite().map(|s| format!("{:?}", s.suite())).unwrap_or_default();
        let alpn = session.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
        let conn = match ctx.proto {
            Proto::Dot => Conn::Dot(Box::new(DotConn { stream: tls, next_id: 0, out: Vec::new(), frame: Vec::new() })),
            Proto::Doh => {
                ensure!(alpn.as_deref() == Some("h2"), "ALPN negotiated {alpn:?}, not h2");
                let (send, connection) = h2::client::Builder::new().handshake(tls).await.context("HTTP/2 handshake")?;
                let driver = tokio::spawn(async move {
                    let _ = connection.await;
                });
                Conn::Doh(DohConn { send, driver })
            }
        };
        Ok(Opened { conn, handshake, resumed, version, suite, alpn })
    };
    tokio::time::timeout(ctx.timeout, work).await.context("timed out")?
}

impl Conn {
    /// Sends `depth` queries at once (the list from `*next_query` on) and
    /// waits for all their answers, recording each in `answers`.
    pub async fn batch(&mut self, ctx: &Ctx, next_query: &mut usize, depth: usize, answers: &Answers) -> Result<()> {
        let work = async {
            match self {
                Conn::Dot(conn) => conn.batch(ctx, next_query, depth, answers).await,
                Conn::Doh(conn) => conn.batch(ctx, next_query, depth, answers).await,
            }
        };
        tokio::time::timeout(ctx.timeout, work).await.context("timed out waiting for answers")?
    }

    /// Closes politely: TLS close_notify then FIN; HTTP/2 GOAWAY.
    pub async fn close(self) {
        match self {
            Conn::Dot(mut conn) => {
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.stream.shutdown()).await;
            }
            Conn::Doh(conn) => {
                drop(conn.send);
                let mut driver = conn.driver;
                if tokio::time::timeout(Duration::from_secs(2), &mut driver).await.is_err() {
                    driver.abort();
                }
            }
        }
    }
}

impl DotConn {
    async fn batch(&mut self, ctx: &Ctx, next_query: &mut usize, depth: usize, answers: &Answers) -> Result<()> {
        ensure!((1..=64).contains(&depth), "depth must be 1..=64");
        self.out.clear();
        let base = self.next_id;
        for k in 0..depth {
            ctx.encode(*next_query, base.wrapping_add(k as u16), true, &mut self.out);
            *next_query += 1;
        }
        self.next_id = base.wrapping_add(depth as u16);
        let sent = Instant::now();
        self.stream.write_all(&self.out).await.context("write")?;
        self.stream.flush().await.context("flush")?;
        let mut seen = 0u64;
        for _ in 0..depth {
            self.frame.clear();
            while let Err(needed) = split_frame(&self.frame) {
                let filled = self.frame.len();
                self.frame.resize(filled + needed, 0);
                self.stream.read_exact(&mut self.frame[filled..]).await.context("read")?;
            }
            let answer = &self.frame[LENGTH_LEN..];
            ensure!(answer.len() >= 12, "short answer ({} octets)", answer.len());
            let id = u16::from_be_bytes([answer[0], answer[1]]);
            let slot = usize::from(id.wrapping_sub(base));
            ensure!(slot < depth && seen & (1 << slot) == 0, "answer with unexpected ID {id}");
            seen |= 1 << slot;
            answers.answer(sent.elapsed(), answer[3]);
        }
        Ok(())
    }
}

impl DohConn {
    async fn batch(&mut self, ctx: &Ctx, next_query: &mut usize, depth: usize, answers: &Answers) -> Result<()> {
        let requests = (0..depth).map(|_| {
            let mut body = Vec::with_capacity(64);
            // RFC 8484 section 4.1: ID 0, for caching.
            ctx.encode(*next_query, 0, false, &mut body);
            *next_query += 1;
            let (send, uri) = (self.send.clone(), ctx.uri.clone());
            async move {
                let sent = Instant::now();
                let rcode = doh_exchange(send, uri, Bytes::from(body)).await?;
                answers.answer(sent.elapsed(), rcode);
                anyhow::Ok(())
            }
        });
        join_all(requests).await.into_iter().collect()
    }
}

async fn doh_exchange(send: h2::client::SendRequest<Bytes>, uri: http::Uri, body: Bytes) -> Result<u8> {
    let mut send = send.ready().await.context("HTTP/2 stream")?;
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/dns-message")
        .header(http::header::ACCEPT, "application/dns-message")
        .body(())
        .expect("a valid request");
    let (response, mut stream) = send.send_request(request, false).context("HTTP/2 request")?;
    stream.send_data(body, true).context("HTTP/2 body")?;
    let response = response.await.context("HTTP/2 response")?;
    if response.status() != http::StatusCode::OK {
        bail!("HTTP status {}", response.status());
    }
    let mut body = response.into_body();
    let mut message = Vec::with_capacity(128);
    while let Some(chunk) = body.data().await {
        let chunk = chunk.context("HTTP/2 body")?;
        let _ = body.flow_control().release_capacity(chunk.len());
        message.extend_from_slice(&chunk);
    }
    ensure!(message.len() >= 12, "short answer ({} octets)", message.len());
    Ok(message[3])
}
