//! DNS over QUIC to an upstream (RFC 9250): one connection, one stream per
//! query, so a lost packet holds up only its own query. Each query goes
//! with message ID 0 (section 4.2.1); its stream, not its ID, says which
//! answer is whose.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use pharos_wire::MAX_STREAM_MESSAGE;
use pharos_wire::causes;
use pharos_wire::framing::{LENGTH_LEN, framed, split_frame};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{Endpoint, VarInt};
use tokio::sync::mpsc;

use crate::error::{ConnectError, ForwardError, StreamError};
use crate::message::{response_id, set_id};
use crate::request::Request;
use crate::slot::{self, PoolSlot, Transport};
use crate::stats::{InFlight, InFlightQuery};
use crate::trust::ClientTls;

/// Error codes of RFC 9250 section 4.3.
const DOQ_NO_ERROR: VarInt = VarInt::from_u32(0x0);
const DOQ_REQUEST_CANCELLED: VarInt = VarInt::from_u32(0x3);
/// The largest stream: one message behind its length.
const MAX_STREAM: usize = LENGTH_LEN + MAX_STREAM_MESSAGE;

pub struct DoqTransport {
    address: SocketAddr,
    server_name: String,
    config: quinn::ClientConfig,
    tls: ClientTls,
    /// Made at the first connection, and kept for the next.
    endpoint: Option<Endpoint>,
}

impl DoqTransport {
    pub fn new(address: SocketAddr, server_name: &str, tls: ClientTls) -> Result<DoqTransport, ForwardError> {
        let crypto = QuicClientConfig::try_from(tls.config.clone()).map_err(ForwardError::Quic)?;
        let config = quinn::ClientConfig::new(Arc::new(crypto));
        Ok(DoqTransport { address, server_name: server_name.to_owned(), config, tls, endpoint: None })
    }

    fn endpoint(&mut self) -> Result<Endpoint, ConnectError> {
        if let Some(endpoint) = &self.endpoint {
            return Ok(endpoint.clone());
        }
        let unspecified = match self.address.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let endpoint = Endpoint::client(SocketAddr::new(unspecified, 0)).map_err(ConnectError::QuicSocket)?;
        Ok(self.endpoint.insert(endpoint).clone())
    }
}

impl Transport for DoqTransport {
    type Connection = quinn::Connection;

    async fn connect(&mut self) -> Result<(quinn::Connection, Duration), ConnectError> {
        let endpoint = self.endpoint()?;
        let connecting = endpoint.connect_with(self.config.clone(), self.address, &self.server_name)?;
        let connection = connecting.await.map_err(ConnectError::QuicHandshake)?;
        let round_trip = connection.rtt();
        Ok((connection, round_trip))
    }

    async fn serve(
        &mut self,
        connection: quinn::Connection,
        first: Request,
        queue: &mut mpsc::Receiver<Request>,
        slot: &PoolSlot,
    ) -> String {
        let mut silenced = slot.silenced();
        let in_flight = InFlight::new(slot.upstream.stats().clone());
        let mut batch = vec![first];
        let closed = loop {
            for request in batch.drain(..) {
                tokio::spawn(exchange(connection.clone(), request, slot.clone(), in_flight.enter()));
            }
            tokio::select! {
                received = queue.recv_many(&mut batch, slot::BATCH) => if received == 0 {
                    break slot::STOPPING;
                },
                _ = silenced.changed() => break slot::SILENT,
                error = connection.closed() => return error.to_string(),
            }
        };
        connection.close(DOQ_NO_ERROR, b"");
        closed.into()
    }

    fn certificates_verified(&self) -> u64 {
        self.tls.certificates_verified()
    }
}

/// Asks one query on a stream of its own, and hands over the answer.
async fn exchange(connection: quinn::Connection, mut request: Request, slot: PoolSlot, _in_flight: InFlightQuery) {
    match ask_on_stream(&connection, &mut request).await {
        Ok(Some(answer)) => slot.on_answer(request.answer(answer)),
        // The try was answered elsewhere or given up; the stream is cancelled.
        Ok(None) => {}
        Err(error) => tracing::debug!(upstream = %slot.upstream.spec, "DNS over QUIC stream failed: {}", causes(&error)),
    }
}

/// The answer to the request's query on a new stream; `None` if the
/// request is abandoned first.
async fn ask_on_stream(connection: &quinn::Connection, request: &mut Request) -> Result<Option<Vec<u8>>, StreamError> {
    set_id(&mut request.message, 0);
    // Opening waits while the upstream allows no more streams.
    let Some(opened) = request.unless_abandoned(connection.open_bi()).await else { return Ok(None) };
    let (mut send, mut receive) = opened?;
    request.mark_sent();
    send.write_all(&framed(&request.message)).await?;
    send.finish()?;
    let Some(stream) = request.unless_abandoned(receive.read_to_end(MAX_STREAM)).await else {
        let _ = receive.stop(DOQ_REQUEST_CANCELLED);
        return Ok(None);
    };
    answer_of_stream(stream?).map(Some)
}

/// The one DNS response a finished stream carries.
fn answer_of_stream(stream: Vec<u8>) -> Result<Vec<u8>, StreamError> {
    let Some(held) = stream.len().checked_sub(LENGTH_LEN) else { return Err(StreamError::EndsInLength) };
    let answer = match split_frame(&stream) {
        Ok((answer, [])) => answer,
        Ok((answer, _)) => return Err(StreamError::WrongLength { held, length: answer.len() }),
        Err(needed) => return Err(StreamError::WrongLength { held, length: held + needed }),
    };
    if response_id(answer).is_none() {
        return Err(StreamError::NotResponse);
    }
    Ok(answer.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_must_hold_exactly_one_response() {
        let response = [&[0, 0, 0x80, 0][..], &[0; 8]].concat();
        assert_eq!(answer_of_stream(framed(&response)).unwrap(), response);
        let query = [0; 12];
        let cases =
            [(vec![0], "inside the length"), (framed(&response)[..5].to_vec(), "after a length"), (framed(&query), "no DNS response")];
        for (stream, expected) in cases {
            let error = answer_of_stream(stream).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }
}
