//! DNS over QUIC (RFC 9250): ALPN "doq", one query per client-initiated
//! bidirectional stream, each message behind a two-octet length; the client
//! ends its stream after the query, the server after the answer. Streams
//! are answered concurrently, each as soon as its query is complete, so a
//! lost packet delays only its own query: no head-of-line blocking.
//!
//! Queries carry message ID 0 and answers echo it. What section 4.3.3
//! calls a protocol error closes the connection with DOQ_PROTOCOL_ERROR.
//! Connections count in the same registry as TCP's: one closed for being
//! idle gets DOQ_NO_ERROR, one shed to make room DOQ_EXCESSIVE_LOAD.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use pharos_answer::{Client, ResponseOptions, SharedSnapshot, Transport, respond_parsed};
use pharos_wire::framing::{LENGTH_LEN, push_framed_with, split_frame};
use pharos_wire::{MAX_STREAM_MESSAGE, Query, Reject, parse_query, query_read};
use quinn::crypto::rustls::QuicServerConfig;
use quinn::{Endpoint, Incoming, ReadToEndError, RecvStream, SendStream, TransportConfig, VarInt};
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::config::TcpConfig;
use crate::dnstap;
use crate::metrics::Mechanism;
use crate::registry::{Admission, Registry};

/// The protocol offered in the TLS handshake (RFC 9250 section 4.1).
pub const ALPN: &[u8] = b"doq";

/// Error codes of RFC 9250 section 4.3.
const DOQ_NO_ERROR: VarInt = VarInt::from_u32(0x0);
const DOQ_PROTOCOL_ERROR: VarInt = VarInt::from_u32(0x2);
const DOQ_EXCESSIVE_LOAD: VarInt = VarInt::from_u32(0x4);
const DOQ_UNSPECIFIED_ERROR: VarInt = VarInt::from_u32(0x5);

/// Responses to padded queries are padded (RFC 9250 section 5.4); the TCP
/// keepalive option is forbidden here (section 5.5.2).
const OPTIONS: ResponseOptions = ResponseOptions { keepalive: None, pad: true, cookie: None, now: 0 };

/// Why a QUIC endpoint cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("TLS configuration unfit for QUIC")]
    Tls(#[source] quinn::crypto::rustls::NoInitialCipherSuite),
    #[error("tcp.idle_timeout_ms is too long for QUIC")]
    IdleTimeout(#[source] quinn::VarIntBoundsExceeded),
    #[error(transparent)]
    Bind(#[from] std::io::Error),
}

/// A QUIC endpoint on `address` presenting `tls`, which must offer TLS 1.3
/// and the "doq" protocol only.
pub fn endpoint(address: SocketAddr, tls: Arc<rustls::ServerConfig>, limits: &TcpConfig) -> Result<Endpoint, EndpointError> {
    let crypto = QuicServerConfig::try_from(tls).map_err(EndpointError::Tls)?;
    let mut transport = TransportConfig::default();
    // The registry closes connections that ask nothing for the idle
    // timeout; QUIC's own timeout catches peers that vanished altogether.
    transport.max_idle_timeout(Some(limits.idle_timeout().try_into().map_err(EndpointError::IdleTimeout)?));
    // Every DoQ stream is bidirectional (section 4.2).
    transport.max_concurrent_uni_streams(VarInt::from_u32(0));
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(Endpoint::server(config, address)?)
}

/// Serves DNS over QUIC on `endpoint` forever, one task per connection and
/// one per stream.
pub async fn serve(endpoint: Endpoint, snapshot: SharedSnapshot, registry: Arc<Registry>, mut rng: SmallRng) {
    // Unknown only for an endpoint already gone, whose queries are moot.
    let server = endpoint.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(serve_connection(incoming, server, snapshot.clone(), registry.clone(), SmallRng::from_rng(&mut rng)));
    }
}

/// What the streams of one connection share.
struct Connection {
    quic: quinn::Connection,
    client: Client,
    /// The endpoint's address, for the query log.
    server: SocketAddr,
    snapshot: SharedSnapshot,
    admission: Admission,
}

/// Completes the handshake, then answers each stream the client opens until
/// it closes the connection or the connection is shed.
async fn serve_connection(incoming: Incoming, server: SocketAddr, snapshot: SharedSnapshot, registry: Arc<Registry>, mut rng: SmallRng) {
    let quic = match incoming.await {
        Ok(quic) => quic,
        Err(error) => return tracing::debug!(%error, "QUIC handshake failed"),
    };
    registry.observation().counters.count_quic_handshake();
    // Admitted only now that the handshake has proved the client's address,
    // so that Initial packets from forged addresses shed no one. QUIC's own
    // idle timeout bounds a handshake that stalls.
    let admission = registry.admit(quic.remote_address().ip());
    let client = Client { address: quic.remote_address().ip(), transport: Transport::Stream };
    let connection = Arc::new(Connection { client, server, snapshot, admission, quic });
    loop {
        match connection.admission.unless_shed(connection.quic.accept_bi()).await {
            Some(Ok((send, receive))) => {
                tokio::spawn(answer_stream(connection.clone(), send, receive, SmallRng::from_rng(&mut rng)));
            }
            // The client closed the connection, or it timed out.
            Some(Err(_)) => return,
            None => {
                let code = if connection.admission.is_idle() { DOQ_NO_ERROR } else { DOQ_EXCESSIVE_LOAD };
                return connection.quic.close(code, b"");
            }
        }
    }
}

/// Reads the stream's query to its end, and answers it on the same stream.
async fn answer_stream(connection: Arc<Connection>, mut send: SendStream, mut receive: RecvStream, mut rng: SmallRng) {
    let stream = match receive.read_to_end(LENGTH_LEN + MAX_STREAM_MESSAGE).await {
        Ok(stream) => stream,
        Err(ReadToEndError::TooLong) => return connection.protocol_error("more than one message on a stream"),
        // The client cancelled the query, or the connection is gone.
        Err(ReadToEndError::Read(_)) => return,
    };
    let (query, parsed) = match query_of_stream(&stream) {
        Ok(read) => read,
        Err(violation) => return connection.protocol_error(violation),
    };
    let Some(response) = answer_counted(query, parsed, &connection, &mut rng) else {
        // Not a DNS query: over UDP or TCP it would get no answer; here its
        // stream ends without one.
        let _ = send.reset(DOQ_PROTOCOL_ERROR);
        return;
    };
    connection.admission.touch();
    match tokio::time::timeout(connection.admission.limits().write_timeout(), send.write_all(&response)).await {
        Ok(Ok(())) => {
            let _ = send.finish();
        }
        // A client that does not read its answer loses it, not the connection.
        _ => {
            let _ = send.reset(DOQ_UNSPECIFIED_ERROR);
        }
    }
}

/// The framed answer to `parsed`, if it deserves one, counted. Its
/// latency runs from the query read to the answer ready to send: the send
/// then waits on the client's flow control.
fn answer_counted(query: &[u8], parsed: Result<Query<'_>, Reject<'_>>, connection: &Connection, rng: &mut SmallRng) -> Option<Vec<u8>> {
    let observation = connection.admission.observation();
    let counting = observation.counters.counting(Mechanism::Quic);
    let received = SystemTime::now();
    let current = connection.snapshot.load();
    let mut response = Vec::new();
    let options = ResponseOptions { now: crate::unix_seconds(received), ..OPTIONS };
    let answered =
        push_framed_with(&mut response, |response| respond_parsed(parsed, &connection.client, &options, &current, rng, response));
    if let Some(counting) = counting {
        counting.exchange(answered.as_ref(), connection.client.address);
    }
    let answered = answered?;
    observation.query_log.log(&dnstap::Exchange {
        mechanism: Mechanism::Quic,
        client: connection.quic.remote_address(),
        server: connection.server,
        query,
        response: &response[LENGTH_LEN..],
        received,
        routed: answered.routed,
        http: None,
    });
    Some(response)
}

impl Connection {
    fn protocol_error(&self, violation: &str) {
        tracing::debug!(client = %self.client.address, violation, "DNS over QUIC protocol error");
        self.quic.close(DOQ_PROTOCOL_ERROR, violation.as_bytes());
    }
}

/// The message a finished stream carries and the query parsed from it,
/// once for the checks here and the answer, or the protocol error it
/// commits (RFC 9250 section 4.3.3).
fn query_of_stream(stream: &[u8]) -> Result<(&[u8], Result<Query<'_>, Reject<'_>>), &'static str> {
    let message = match split_frame(stream) {
        Ok((message, [])) => message,
        Ok(_) => return Err("more than one message on a stream"),
        Err(_) if stream.len() < LENGTH_LEN => return Err("the stream ended inside the length"),
        Err(_) => return Err("the stream ended before the message did"),
    };
    if message.get(..2).is_some_and(|id| id != [0, 0]) {
        return Err("a message ID other than 0 (RFC 9250 section 4.2.1)");
    }
    let parsed = parse_query(message);
    if carries_keepalive(&parsed) {
        return Err("the edns-tcp-keepalive option (RFC 9250 section 5.5.2)");
    }
    Ok((message, parsed))
}

fn carries_keepalive(parsed: &Result<Query<'_>, Reject<'_>>) -> bool {
    query_read(parsed).is_some_and(|query| query.edns.is_some_and(|edns| edns.wants_keepalive))
}

#[cfg(test)]
mod tests {
    use pharos_wire::framing::framed;

    use super::*;

    /// A query for `a.` with this ID and these EDNS options.
    fn query(id: u16, options: &[u8]) -> Vec<u8> {
        let mut message = id.to_be_bytes().to_vec();
        message.extend([1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, b'a', 0, 0, 1, 0, 1]);
        message.extend([0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
        message.extend((options.len() as u16).to_be_bytes());
        message.extend(options);
        message
    }

    #[test]
    fn a_stream_carries_exactly_one_query_with_id_zero() {
        let good = query(0, &[0, 12, 0, 0]);
        let message_of = |stream: &[u8]| query_of_stream(stream).map(|(message, _)| message.to_vec());
        assert_eq!(message_of(&framed(&good)), Ok(good.clone()));
        let cases: [(Vec<u8>, &str); 5] = [
            (vec![0], "inside the length"),
            (framed(&good)[..20].to_vec(), "before the message did"),
            ([framed(&good), framed(&good)].concat(), "more than one message"),
            (framed(&query(7, &[])), "message ID"),
            (framed(&query(0, &[0, 11, 0, 0])), "keepalive"),
        ];
        for (stream, expected) in cases {
            let violation = query_of_stream(&stream).unwrap_err();
            assert!(violation.contains(expected), "{violation}");
        }
        assert_eq!(message_of(&[0, 1, 0]), Ok(vec![0]), "too short for an ID: not a query, but no violation");
    }
}
