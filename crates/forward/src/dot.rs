//! DNS over TLS to an upstream (RFC 7858): queries pipelined on one
//! connection, each under a message ID of the forwarder's choosing, so that
//! clients that chose the same ID never get each other's answers; answers
//! matched by that ID, in whatever order they come (RFC 7766 section 7).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pharos_wire::framing::push_framed;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncWriteExt, BufReader, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::error::{ConnectError, ForwardError};
use crate::framing::read_frame;
use crate::ids::IdTable;
use crate::message::{response_id, set_id};
use crate::request::Request;
use crate::slot::{self, PoolSlot, Transport};
use crate::stats::{InFlight, InFlightQuery};
use crate::trust::ClientTls;

type Stream = TlsStream<TcpStream>;

pub struct DotTransport {
    address: SocketAddr,
    server_name: ServerName<'static>,
    tls: ClientTls,
}

impl DotTransport {
    pub fn new(address: SocketAddr, server_name: &str, tls: ClientTls) -> Result<DotTransport, ForwardError> {
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|source| ForwardError::ServerName { name: server_name.to_owned(), source })?;
        Ok(DotTransport { address, server_name, tls })
    }
}

/// A query on the wire, waiting for its answer.
struct Outstanding {
    request: Request,
    _in_flight: InFlightQuery,
}

type Table = Mutex<IdTable<Outstanding>>;

impl Transport for DotTransport {
    type Connection = Stream;

    async fn connect(&mut self) -> Result<(Stream, Duration), ConnectError> {
        let started = Instant::now();
        let tcp = TcpStream::connect(self.address).await.map_err(ConnectError::Tcp)?;
        // The SYN's round trip, as TCP itself would take it.
        let round_trip = started.elapsed();
        tcp.set_nodelay(true).map_err(ConnectError::Socket)?;
        let connector = TlsConnector::from(self.tls.config.clone());
        let stream = connector.connect(self.server_name.clone(), tcp).await.map_err(ConnectError::TlsHandshake)?;
        Ok((stream, round_trip))
    }

    async fn serve(&mut self, stream: Stream, first: Request, queue: &mut mpsc::Receiver<Request>, slot: &PoolSlot) -> String {
        let mut silenced = slot.silenced();
        // Reading and writing go on side by side: a connection that only
        // wrote while the upstream's answers piled up unread could stall.
        let (reader, writer) = tokio::io::split(stream);
        let table = Mutex::new(IdTable::new());
        let in_flight = InFlight::new(slot.upstream.stats().clone());
        tokio::select! {
            closed = send_queries(writer, first, queue, &table, &in_flight) => closed,
            closed = receive_answers(reader, &table, slot) => closed,
            _ = silenced.changed() => slot::SILENT.into(),
        }
        // Dropping the table drops the requests still in it: their tries
        // fail now and go on to their next.
    }

    fn certificates_verified(&self) -> u64 {
        self.tls.certificates_verified()
    }
}

/// Writes queries as they come, each batch of those already waiting in
/// one write, until the connection fails.
async fn send_queries(
    mut writer: WriteHalf<Stream>,
    first: Request,
    queue: &mut mpsc::Receiver<Request>,
    table: &Table,
    in_flight: &Arc<InFlight>,
) -> String {
    let mut batch = vec![first];
    loop {
        let mut frames = Vec::new();
        for request in batch.drain(..) {
            add_frame(request, &mut frames, table, in_flight);
        }
        let written = async {
            writer.write_all(&frames).await?;
            // TLS holds records back until flushed.
            writer.flush().await
        };
        if let Err(error) = written.await {
            return format!("cannot write to it: {error}");
        }
        if queue.recv_many(&mut batch, slot::BATCH).await == 0 {
            return slot::STOPPING.into();
        }
    }
}

/// Gives the request's query an ID of this connection's, files it, and
/// frames it onto `frames`. With every ID taken the request is dropped,
/// and its try goes elsewhere.
fn add_frame(mut request: Request, frames: &mut Vec<u8>, table: &Table, in_flight: &Arc<InFlight>) {
    let mut message = std::mem::take(&mut request.message);
    request.mark_sent();
    let outstanding = Outstanding { request, _in_flight: in_flight.enter() };
    let Some(id) = table.lock().expect("ID table").insert(outstanding, |outstanding| outstanding.request.is_abandoned()) else { return };
    set_id(&mut message, id);
    push_framed(frames, &message);
}

/// Reads answers and hands each to the query with its ID, until the
/// connection ends or the upstream sends what is no DNS response.
async fn receive_answers(reader: ReadHalf<Stream>, table: &Table, slot: &PoolSlot) -> String {
    let mut reader = BufReader::new(reader);
    loop {
        let message = match read_frame(&mut reader).await {
            Ok(message) => message,
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return "the upstream closed it".into(),
            Err(error) => return format!("cannot read from it: {error}"),
        };
        let Some(id) = response_id(&message) else { return "the upstream sent what is no DNS response".into() };
        // None for a query that was abandoned and swept away.
        let Some(outstanding) = table.lock().expect("ID table").take(id) else { continue };
        slot.on_answer(outstanding.request.answer(message));
    }
}
