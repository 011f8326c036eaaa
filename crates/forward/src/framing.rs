//! Reading the two-octet length before each message on a stream: DNS
//! over TCP and TLS (RFC 1035 section 4.2.2, RFC 7858), with the framing
//! of `pharos_wire::framing`.

use pharos_wire::framing::{LENGTH_LEN, split_frame};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads one length-framed message.
pub async fn read_frame(reader: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut frame = Vec::new();
    while let Err(needed) = split_frame(&frame) {
        let filled = frame.len();
        frame.resize(filled + needed, 0);
        reader.read_exact(&mut frame[filled..]).await?;
    }
    frame.drain(..LENGTH_LEN);
    Ok(frame)
}
