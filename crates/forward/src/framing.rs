//! The two-octet length before each message on a stream: DNS over TCP and
//! TLS (RFC 1035 section 4.2.2, RFC 7858) and over QUIC (RFC 9250).

use tokio::io::{AsyncRead, AsyncReadExt};

/// `message` behind its length.
pub fn framed(message: &[u8]) -> Vec<u8> {
    [&(message.len() as u16).to_be_bytes()[..], message].concat()
}

/// Reads one length-framed message.
pub async fn read_frame(reader: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let length = reader.read_u16().await?;
    let mut message = vec![0; usize::from(length)];
    reader.read_exact(&mut message).await?;
    Ok(message)
}
