//! Query logs in dnstap, the DNS servers' common log format: each logged
//! exchange becomes two protobuf `Dnstap` messages, AUTH_QUERY and
//! AUTH_RESPONSE, written as Frame Streams data frames to a Unix socket or
//! a TCP address where a reader (`fstrm_capture`, a collector) listens.
//!
//! The query path never waits for the log: an exchange picked by the
//! thread's sampling counter is encoded on that thread and offered to a
//! bounded channel without blocking; when the channel is full the exchange
//! is dropped and counted ([`QueryLog::dropped`]). One writer thread drains the
//! channel, connects with the bidirectional Frame Streams handshake
//! (READY, ACCEPT, START), and when the reader goes away reconnects with a
//! doubling back-off, the channel filling (and dropping) meanwhile.
//!
//! The messages follow `dnstap.proto` of the dnstap project (dedicated to
//! the public domain under CC0 1.0), with the fields an authoritative
//! server fills in (a DoH exchange with its HTTP version, `http_protocol`);
//! the derives below name each field's number there.
//! A routed answer carries its decision in `extra`, as UTF-8 text that a
//! replay can parse: `pharos-route service=NAME region=ID replica=ID`
//! (the replica answered first; names are the operator's, without spaces).
//! Each server has a [`QueryLog`] of its own, which its transports share.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;

use pharos_answer::RoutedTo;
use prost::Message as _;

use crate::metrics::Mechanism;

/// The content type both ends of the stream agree on.
const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";
/// Exchanges waiting for the writer; past this the query path drops.
const CHANNEL_CAPACITY: usize = 4096;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const LONGEST_BACKOFF: Duration = Duration::from_secs(5);
/// How long the writer waits for the reader's handshake replies.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the log goes, and what it says about the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub destination: Destination,
    /// One exchange in `sample` is logged, counted per thread; 1 logs all.
    pub sample: u64,
    pub identity: Option<String>,
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// One query and the response it got, as a transport saw them.
pub struct Exchange<'a> {
    pub mechanism: Mechanism,
    pub client: SocketAddr,
    /// The server's address the query came to.
    pub server: SocketAddr,
    pub query: &'a [u8],
    pub response: &'a [u8],
    pub received: SystemTime,
    pub routed: Option<RoutedTo<'a>>,
    /// The HTTP version a DoH query came over; `None` for the others.
    pub http: Option<hyper::Version>,
}

struct Logger {
    queue: SyncSender<Vec<u8>>,
    sample: u64,
    identity: Option<Vec<u8>>,
    version: Option<Vec<u8>>,
}

/// One server's query log: the running log, if any, and the exchanges
/// it dropped. Owned by the server and shared by its transports, which
/// look here for the log, so that none needs telling when it starts.
#[derive(Default)]
pub struct QueryLog {
    logger: ArcSwapOption<Logger>,
    /// Whether `logger` holds a log: one relaxed load tells a query path
    /// with no log to go on, cheaper than loading `logger` for every query.
    logging: AtomicBool,
    dropped: AtomicU64,
}

thread_local! {
    /// Exchanges this thread has seen, for its 1-in-N pick (of whichever
    /// server's log: each still logs one in N of its exchanges).
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// The log while it runs: [`Running::stop`] ends it.
pub struct Running {
    log: Arc<QueryLog>,
    writer: JoinHandle<()>,
}

/// Why a dnstap log cannot start.
#[derive(Debug, thiserror::Error)]
pub enum DnstapError {
    #[error("dnstap.sample must be at least 1 (1 logs every query), not 0")]
    ZeroSample,
    #[error(transparent)]
    Writer(#[from] io::Error),
    #[error("a dnstap log is already running for this server")]
    AlreadyRunning,
}

impl QueryLog {
    /// Starts the writer thread and turns logging on for every transport
    /// that shares this log: one log at a time.
    pub fn start(self: &Arc<QueryLog>, settings: Settings) -> Result<Running, DnstapError> {
        if settings.sample == 0 {
            return Err(DnstapError::ZeroSample);
        }
        let (queue, drained) = sync_channel(CHANNEL_CAPACITY);
        let logger = Logger {
            queue,
            sample: settings.sample,
            identity: settings.identity.map(String::into_bytes),
            version: settings.version.map(String::into_bytes),
        };
        let log = self.clone();
        let writer = std::thread::Builder::new().name("dnstap".into()).spawn(move || log.write_forever(&settings.destination, &drained))?;
        let replaced = self.logger.compare_and_swap(&None::<Arc<Logger>>, Some(Arc::new(logger)));
        if replaced.is_some() {
            return Err(DnstapError::AlreadyRunning);
        }
        self.logging.store(true, Ordering::Relaxed);
        Ok(Running { log: self.clone(), writer })
    }

    /// Whether a log runs: a batch of queries asks once, and skips the
    /// wall clock and the walk over its exchanges when none does.
    pub fn logging(&self) -> bool {
        self.logging.load(Ordering::Relaxed)
    }

    /// Exchanges dropped because the writer was behind or had no reader.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn count_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Logs `exchange` if logging is on and this thread's counter picks it.
    pub fn log(&self, exchange: &Exchange<'_>) {
        if !self.logging() {
            return;
        }
        let logger = self.logger.load();
        let Some(logger) = logger.as_deref() else { return };
        let picked = SEEN.with(|seen| {
            let count = seen.get();
            seen.set(count.wrapping_add(1));
            count % logger.sample == 0
        });
        if !picked {
            return;
        }
        match logger.queue.try_send(logger.frames(exchange)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.count_dropped(),
        }
    }
}

impl Running {
    /// Turns logging off, then waits for the writer to hand over what was
    /// queued and close the stream cleanly (STOP, then the reader's
    /// FINISH), or to give up on a reader that is gone.
    pub fn stop(self) {
        self.log.logging.store(false, Ordering::Relaxed);
        self.log.logger.store(None);
        let _ = self.writer.join();
    }
}

impl Logger {
    /// The exchange's two data frames, query then response, back to back.
    fn frames(&self, exchange: &Exchange<'_>) -> Vec<u8> {
        let responded = SystemTime::now();
        let (family, query_address, response_address) = addresses(exchange.client.ip(), exchange.server.ip());
        let message = |kind: MessageType| Message {
            r#type: kind as i32,
            socket_family: Some(family as i32),
            socket_protocol: Some(protocol(exchange.mechanism) as i32),
            query_address: Some(query_address.clone()),
            response_address: Some(response_address.clone()),
            query_port: Some(u32::from(exchange.client.port())),
            response_port: Some(u32::from(exchange.server.port())),
            query_time_sec: Some(crate::unix_seconds(exchange.received)),
            query_time_nsec: Some(nanoseconds(exchange.received)),
            query_message: (kind == MessageType::AuthQuery).then(|| exchange.query.to_vec()),
            response_time_sec: (kind == MessageType::AuthResponse).then(|| crate::unix_seconds(responded)),
            response_time_nsec: (kind == MessageType::AuthResponse).then(|| nanoseconds(responded)),
            response_message: (kind == MessageType::AuthResponse).then(|| exchange.response.to_vec()),
            http_protocol: exchange.http.map(|version| http_protocol(version) as i32),
        };
        let extra = exchange.routed.map(|routed| routing_extra(&routed).into_bytes());
        let mut frames = Vec::with_capacity(2 * (exchange.query.len() + exchange.response.len() + 128));
        for kind in [MessageType::AuthQuery, MessageType::AuthResponse] {
            let dnstap = Dnstap {
                identity: self.identity.clone(),
                version: self.version.clone(),
                extra: extra.clone(),
                r#type: DnstapType::Message as i32,
                message: Some(message(kind)),
            };
            frames.extend_from_slice(&(dnstap.encoded_len() as u32).to_be_bytes());
            dnstap.encode(&mut frames).expect("a Vec grows to fit");
        }
        frames
    }
}

/// The decision in `extra`: see the module's map for the format.
fn routing_extra(routed: &RoutedTo<'_>) -> String {
    let replica = &routed.service.replicas[routed.first_replica].id;
    format!("pharos-route service={} region={} replica={}", routed.service.name, routed.region, replica)
}

/// Both addresses in one family: an IPv4 client of a dual-stack socket
/// is logged with the IPv4 form of the server's address (0.0.0.0 for a
/// socket bound to [::], whose own address per query is not known).
fn addresses(client: IpAddr, server: IpAddr) -> (SocketFamily, Vec<u8>, Vec<u8>) {
    let server = match (client.to_canonical(), server) {
        (IpAddr::V4(_), IpAddr::V6(server)) if server.is_unspecified() => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        _ => server,
    };
    match (client.to_canonical(), server.to_canonical()) {
        (IpAddr::V4(client), IpAddr::V4(server)) => (SocketFamily::Inet, client.octets().to_vec(), server.octets().to_vec()),
        (client, server) => (SocketFamily::Inet6, v6_octets(client), v6_octets(server)),
    }
}

fn v6_octets(address: IpAddr) -> Vec<u8> {
    match address {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

fn protocol(mechanism: Mechanism) -> SocketProtocol {
    match mechanism {
        Mechanism::Udp => SocketProtocol::Udp,
        Mechanism::Tcp => SocketProtocol::Tcp,
        Mechanism::Tls => SocketProtocol::Dot,
        Mechanism::Https => SocketProtocol::Doh,
        Mechanism::Quic => SocketProtocol::Doq,
    }
}

fn http_protocol(version: hyper::Version) -> HttpProtocol {
    match version {
        hyper::Version::HTTP_2 => HttpProtocol::Http2,
        hyper::Version::HTTP_3 => HttpProtocol::Http3,
        _ => HttpProtocol::Http1,
    }
}

fn nanoseconds(time: SystemTime) -> u32 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.subsec_nanos())
}

/// The writer thread's work, counting what it drops in the log's count.
impl QueryLog {
    /// Connects, hands over frames, reconnects when the reader goes; ends
    /// when the log is stopped.
    fn write_forever(&self, destination: &Destination, drained: &Receiver<Vec<u8>>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match connect(destination) {
                Ok(mut stream) => {
                    backoff = FIRST_BACKOFF;
                    match self.forward(&mut *stream, drained) {
                        Ok(()) => return finish(&mut *stream),
                        Err(error) => tracing::warn!(%error, "dnstap reader went away; reconnecting"),
                    }
                }
                Err(error) => tracing::debug!(%error, ?destination, "dnstap reader not reachable"),
            }
            // Waiting with the channel unread: what the query threads offer
            // meanwhile fills it and is dropped there, and counted.
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(LONGEST_BACKOFF);
            match drained.try_recv() {
                Err(TryRecvError::Disconnected) => return,
                // An exchange from before the reader went: it cannot be sent.
                Ok(_) => self.count_dropped(),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Writes what the query threads queue until the log stops (Ok), or the
    /// reader fails or stops reading (Err). An exchange's two frames are
    /// written together.
    fn forward(&self, stream: &mut dyn Stream, drained: &Receiver<Vec<u8>>) -> io::Result<()> {
        for frames in drained {
            if let Err(error) = stream.write_all(&frames) {
                // Lost with the connection: a drop like any other.
                self.count_dropped();
                return Err(error);
            }
        }
        Ok(())
    }
}

/// Ends the stream as Frame Streams asks: STOP, then the reader's FINISH.
fn finish(stream: &mut dyn Stream) {
    let finished = stream.write_all(&control_frame(CONTROL_STOP)).and_then(|()| read_control_frame(stream));
    if let Err(error) = finished {
        tracing::debug!(%error, "dnstap reader did not finish cleanly");
    }
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn connect(destination: &Destination) -> io::Result<Box<dyn Stream>> {
    let mut stream: Box<dyn Stream> = match destination {
        Destination::Unix(path) => {
            let stream = UnixStream::connect(path)?;
            stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
            stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
            Box::new(stream)
        }
        Destination::Tcp(address) => {
            let stream = TcpStream::connect_timeout(address, HANDSHAKE_TIMEOUT)?;
            stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
            stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
            stream.set_nodelay(true)?;
            Box::new(stream)
        }
    };
    handshake(&mut *stream)?;
    Ok(stream)
}

/// Frame Streams control frame types.
const CONTROL_ACCEPT: u32 = 0x01;
const CONTROL_START: u32 = 0x02;
const CONTROL_STOP: u32 = 0x03;
const CONTROL_READY: u32 = 0x04;
const FIELD_CONTENT_TYPE: u32 = 0x01;

/// READY with our content type, the reader's ACCEPT naming it, then START.
fn handshake(stream: &mut dyn Stream) -> io::Result<()> {
    stream.write_all(&control_frame(CONTROL_READY))?;
    let (kind, payload) = read_control_frame(stream)?;
    if kind != CONTROL_ACCEPT || !content_types(&payload).any(|offered| offered == CONTENT_TYPE) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "the dnstap reader did not accept protobuf:dnstap.Dnstap"));
    }
    stream.write_all(&control_frame(CONTROL_START))
}

/// A control frame carrying our content type: escape, length, type, field.
fn control_frame(kind: u32) -> Vec<u8> {
    let mut payload = kind.to_be_bytes().to_vec();
    payload.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
    payload.extend_from_slice(&(CONTENT_TYPE.len() as u32).to_be_bytes());
    payload.extend_from_slice(CONTENT_TYPE);
    let mut frame = 0u32.to_be_bytes().to_vec();
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame
}

/// The largest control frame a reader may send: a few content types.
const LARGEST_CONTROL_FRAME: usize = 512;

fn read_control_frame(stream: &mut dyn Stream) -> io::Result<(u32, Vec<u8>)> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("dnstap reader: {what}"));
    if read_u32(stream)? != 0 {
        return Err(invalid("expected a control frame"));
    }
    let length = read_u32(stream)? as usize;
    if !(4..=LARGEST_CONTROL_FRAME).contains(&length) {
        return Err(invalid("control frame of impossible length"));
    }
    let mut frame = vec![0; length];
    stream.read_exact(&mut frame)?;
    let kind = u32::from_be_bytes(frame[..4].try_into().expect("four octets"));
    Ok((kind, frame.split_off(4)))
}

fn read_u32(stream: &mut dyn Stream) -> io::Result<u32> {
    let mut octets = [0; 4];
    stream.read_exact(&mut octets)?;
    Ok(u32::from_be_bytes(octets))
}

/// The content types a control frame's fields name; stops at the first
/// field that does not fit.
fn content_types(mut fields: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        loop {
            let kind = u32::from_be_bytes(fields.get(..4)?.try_into().ok()?);
            let length = u32::from_be_bytes(fields.get(4..8)?.try_into().ok()?) as usize;
            let value = fields.get(8..8 + length)?;
            fields = &fields[8 + length..];
            if kind == FIELD_CONTENT_TYPE {
                return Some(value);
            }
        }
    })
}

/// `Dnstap` of dnstap.proto.
#[derive(Clone, PartialEq, prost::Message)]
struct Dnstap {
    #[prost(bytes = "vec", optional, tag = "1")]
    identity: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "2")]
    version: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "3")]
    extra: Option<Vec<u8>>,
    #[prost(message, optional, tag = "14")]
    message: Option<Message>,
    #[prost(enumeration = "DnstapType", required, tag = "15")]
    r#type: i32,
}

/// `Dnstap.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
enum DnstapType {
    Message = 1,
}

/// `Message` of dnstap.proto, without the fields only resolvers and
/// policies fill in.
#[derive(Clone, PartialEq, prost::Message)]
struct Message {
    #[prost(enumeration = "MessageType", required, tag = "1")]
    r#type: i32,
    #[prost(enumeration = "SocketFamily", optional, tag = "2")]
    socket_family: Option<i32>,
    #[prost(enumeration = "SocketProtocol", optional, tag = "3")]
    socket_protocol: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "4")]
    query_address: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    response_address: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "6")]
    query_port: Option<u32>,
    #[prost(uint32, optional, tag = "7")]
    response_port: Option<u32>,
    #[prost(uint64, optional, tag = "8")]
    query_time_sec: Option<u64>,
    #[prost(fixed32, optional, tag = "9")]
    query_time_nsec: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "10")]
    query_message: Option<Vec<u8>>,
    #[prost(uint64, optional, tag = "12")]
    response_time_sec: Option<u64>,
    #[prost(fixed32, optional, tag = "13")]
    response_time_nsec: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "14")]
    response_message: Option<Vec<u8>>,
    #[prost(enumeration = "HttpProtocol", optional, tag = "16")]
    http_protocol: Option<i32>,
}

/// `Message.Type`: the two an authoritative server logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
enum MessageType {
    AuthQuery = 1,
    AuthResponse = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
enum SocketFamily {
    Inet = 1,
    Inet6 = 2,
}

/// `HttpProtocol`: the HTTP version of a DoH exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
enum HttpProtocol {
    Http1 = 1,
    Http2 = 2,
    Http3 = 3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
enum SocketProtocol {
    Udp = 1,
    Tcp = 2,
    Dot = 3,
    Doh = 4,
    Doq = 7,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader's side of the handshake, answering READY with `accept`.
    fn handshake_against(accept: Vec<u8>) -> io::Result<()> {
        let (mut writer, mut reader) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let (kind, _) = read_control_frame(&mut reader).unwrap();
            assert_eq!(kind, CONTROL_READY);
            reader.write_all(&accept).unwrap();
            // START, if the writer goes on, then the writer's close.
            let _ = reader.read_to_end(&mut Vec::new());
        });
        writer.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).unwrap();
        let result = handshake(&mut writer);
        drop(writer);
        reader.join().unwrap();
        result
    }

    #[test]
    fn a_reader_must_accept_the_dnstap_content_type() {
        handshake_against(control_frame(CONTROL_ACCEPT)).unwrap();
        let mut other_type = control_frame(CONTROL_ACCEPT);
        let at = other_type.len() - 1;
        other_type[at] = b'X';
        let error = handshake_against(other_type).unwrap_err();
        assert!(error.to_string().contains("did not accept protobuf:dnstap.Dnstap"), "{error}");
        let mut huge = vec![0, 0, 0, 0];
        huge.extend_from_slice(&1_000_000u32.to_be_bytes());
        let error = handshake_against(huge).unwrap_err();
        assert!(error.to_string().contains("impossible length"), "{error}");
        let error = handshake_against(vec![0, 0, 0, 9]).unwrap_err();
        assert!(error.to_string().contains("expected a control frame"), "{error}");
    }

    #[test]
    fn an_exchange_is_a_query_frame_then_a_response_frame_with_the_decision_in_extra() {
        use pharos_route::Replica;
        use pharos_route::model::Answering;
        use pharos_route::{Policy, Service};
        let replicas = vec![Replica::new("fra", "192.0.2.10".parse().unwrap()), Replica::new("sin", "192.0.2.20".parse().unwrap())];
        let service = Service::new("svc.example.test.".into(), replicas, Policy::Static, Answering::plain(60, 0));
        let (queue, _drained) = sync_channel(1);
        let logger = Logger { queue, sample: 1, identity: Some(b"ns1".to_vec()), version: None };
        let exchange = Exchange {
            mechanism: Mechanism::Tcp,
            client: "[::ffff:198.51.100.7]:4242".parse().unwrap(),
            server: "[::]:53".parse().unwrap(),
            query: b"query",
            response: b"response",
            received: UNIX_EPOCH + Duration::new(1_700_000_000, 5),
            routed: Some(RoutedTo { service: &service, region: 3, first_replica: 1 }),
            http: None,
        };
        let frames = logger.frames(&exchange);
        let length = u32::from_be_bytes(frames[..4].try_into().unwrap()) as usize;
        let query = Dnstap::decode(&frames[4..4 + length]).unwrap();
        let response = Dnstap::decode(&frames[8 + length..]).unwrap();
        assert_eq!(u32::from_be_bytes(frames[4 + length..8 + length].try_into().unwrap()) as usize, frames.len() - 8 - length);
        for (dnstap, kind) in [(&query, MessageType::AuthQuery), (&response, MessageType::AuthResponse)] {
            assert_eq!(dnstap.identity.as_deref(), Some(&b"ns1"[..]));
            assert_eq!(dnstap.extra.as_deref(), Some(&b"pharos-route service=svc.example.test. region=3 replica=sin"[..]));
            let message = dnstap.message.as_ref().unwrap();
            assert_eq!(message.r#type, kind as i32);
            assert_eq!(message.socket_protocol, Some(SocketProtocol::Tcp as i32));
            assert_eq!(message.socket_family, Some(SocketFamily::Inet as i32), "a mapped client is logged as IPv4, the server too");
            assert_eq!(
                (message.query_address.as_deref(), message.response_address.as_deref()),
                (Some(&[198, 51, 100, 7][..]), Some(&[0; 4][..]))
            );
            assert_eq!((message.query_port, message.response_port), (Some(4242), Some(53)));
            assert_eq!((message.query_time_sec, message.query_time_nsec), (Some(1_700_000_000), Some(5)));
        }
        let (query, response) = (query.message.unwrap(), response.message.unwrap());
        assert_eq!((query.query_message.as_deref(), query.response_message), (Some(&b"query"[..]), None));
        assert_eq!((response.query_message, response.response_message.as_deref()), (None, Some(&b"response"[..])));
        assert!(response.response_time_sec.unwrap() > 1_700_000_000);
        assert_eq!(response.http_protocol, None, "no HTTP version over TCP");
    }

    #[test]
    fn a_doh_exchange_says_its_http_version() {
        let (queue, _drained) = sync_channel(1);
        let logger = Logger { queue, sample: 1, identity: None, version: None };
        for (version, protocol) in [
            (hyper::Version::HTTP_11, HttpProtocol::Http1),
            (hyper::Version::HTTP_2, HttpProtocol::Http2),
            (hyper::Version::HTTP_3, HttpProtocol::Http3),
        ] {
            let exchange = Exchange {
                mechanism: Mechanism::Https,
                client: "192.0.2.7:4242".parse().unwrap(),
                server: "192.0.2.53:443".parse().unwrap(),
                query: b"query",
                response: b"response",
                received: UNIX_EPOCH,
                routed: None,
                http: Some(version),
            };
            let frames = logger.frames(&exchange);
            let length = u32::from_be_bytes(frames[..4].try_into().unwrap()) as usize;
            let message = Dnstap::decode(&frames[4..4 + length]).unwrap().message.unwrap();
            assert_eq!(message.socket_protocol, Some(SocketProtocol::Doh as i32));
            assert_eq!(message.http_protocol, Some(protocol as i32), "{version:?}");
        }
    }

    #[test]
    fn a_sample_of_zero_is_refused() {
        let settings = Settings { destination: Destination::Unix("/nonexistent".into()), sample: 0, identity: None, version: None };
        let error = Arc::new(QueryLog::default()).start(settings).err().unwrap();
        assert!(error.to_string().contains("at least 1"), "{error}");
    }
}
