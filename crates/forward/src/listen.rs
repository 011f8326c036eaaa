//! The client side of the forwarder: DNS over UDP and TCP, as stub
//! resolvers speak it. Each query is answered in a task of its own, so a
//! TCP client's pipelined queries are answered in the order their answers
//! come (RFC 7766 section 6.2.1.1).

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pharos_wire::framing::framed;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{Semaphore, mpsc};

use crate::error::ForwardError;
use crate::forwarder::Forwarder;
use crate::framing::read_frame;
use crate::message::{ClientQuery, fit_for_udp};
use crate::stats::Stats;

/// Client queries being answered at once. Past this, UDP queries are
/// dropped (the stub asks again) and TCP clients wait.
const MAX_QUERIES_IN_PROGRESS: usize = 4096;
/// A TCP client that sends nothing for this long is closed (RFC 7766
/// section 6.2.3 suggests seconds).
const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Answers a TCP client's connection may have waiting to be written.
const ANSWERS_WAITING: usize = 64;

/// Binds UDP and TCP on `address` and serves both until the forwarder stops.
pub async fn serve(address: SocketAddr, forwarder: Arc<Forwarder>) -> Result<(), ForwardError> {
    let udp = UdpSocket::bind(address).await.map_err(|error| bind_error(error, "UDP", address))?;
    let tcp = TcpListener::bind(address).await.map_err(|error| bind_error(error, "TCP", address))?;
    if !address.ip().is_loopback() {
        tracing::warn!(%address, "not a loopback address: whoever reaches it can use this forwarder");
    }
    let in_progress = Arc::new(Semaphore::new(MAX_QUERIES_IN_PROGRESS));
    tokio::spawn(serve_udp(udp, forwarder.clone(), in_progress.clone()));
    tokio::spawn(serve_tcp(tcp, forwarder, in_progress));
    Ok(())
}

fn bind_error(source: std::io::Error, transport: &'static str, address: SocketAddr) -> ForwardError {
    let hint = if source.kind() == ErrorKind::PermissionDenied { " (ports below 1024 need root or CAP_NET_BIND_SERVICE)" } else { "" };
    ForwardError::Listen { transport, address, hint, source }
}

async fn serve_udp(socket: UdpSocket, forwarder: Arc<Forwarder>, in_progress: Arc<Semaphore>) {
    let socket = Arc::new(socket);
    let mut buffer = vec![0; 65535];
    loop {
        let (length, client) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(error) => {
                tracing::debug!(%error, "UDP receive failed");
                continue;
            }
        };
        let Some(query) = ClientQuery::read(&buffer[..length]) else { continue };
        let Ok(permit) = in_progress.clone().try_acquire_owned() else { continue };
        let (socket, forwarder) = (socket.clone(), forwarder.clone());
        tokio::spawn(async move {
            let answer = forwarder.answer(&query).await;
            let full_length = answer.len();
            let answer = fit_for_udp(answer, query.udp_limit());
            if answer.len() < full_length {
                Stats::count(&forwarder.stats().truncated);
            }
            if let Err(error) = socket.send_to(&answer, client).await {
                tracing::debug!(%client, %error, "UDP send failed");
            }
            drop(permit);
        });
    }
}

async fn serve_tcp(listener: TcpListener, forwarder: Arc<Forwarder>, in_progress: Arc<Semaphore>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_tcp_client(stream, forwarder.clone(), in_progress.clone()));
            }
            Err(error) => {
                // Out of descriptors and the like: keep serving those we have.
                tracing::warn!(%error, "TCP accept failed");
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Reads queries until the client closes or goes idle; each answer is
/// written when it comes, and the connection closes after the last.
async fn serve_tcp_client(stream: TcpStream, forwarder: Arc<Forwarder>, in_progress: Arc<Semaphore>) {
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    let (answers, waiting) = mpsc::channel(ANSWERS_WAITING);
    let writing = tokio::spawn(write_answers(writer, waiting));
    read_queries(reader, &forwarder, &in_progress, answers).await;
    let _ = writing.await;
}

async fn read_queries(reader: OwnedReadHalf, forwarder: &Arc<Forwarder>, in_progress: &Arc<Semaphore>, answers: mpsc::Sender<Vec<u8>>) {
    let mut reader = BufReader::new(reader);
    while let Ok(Ok(message)) = tokio::time::timeout(CLIENT_IDLE_TIMEOUT, read_frame(&mut reader)).await {
        let Some(query) = ClientQuery::read(&message) else { continue };
        let Ok(permit) = in_progress.clone().acquire_owned().await else { return };
        let (forwarder, answers) = (forwarder.clone(), answers.clone());
        tokio::spawn(async move {
            let _ = answers.send(forwarder.answer(&query).await).await;
            drop(permit);
        });
    }
}

/// Writes answers until the last is written, or the client stops reading.
async fn write_answers(mut writer: OwnedWriteHalf, mut answers: mpsc::Receiver<Vec<u8>>) {
    while let Some(answer) = answers.recv().await {
        if writer.write_all(&framed(&answer)).await.is_err() {
            return;
        }
    }
    let _ = writer.shutdown().await;
}
