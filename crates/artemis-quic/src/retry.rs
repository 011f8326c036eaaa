//! The Retry integrity tag a client checks (RFC 9001 5.8, RFC 9369 3.3.3):
//! AES-128-GCM under a key fixed per version, over the original
//! destination connection ID and the Retry packet.

use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::quic::Version;

const TAG_LEN: usize = 16;

/// Whether `payload` (the token, then the tag) ends with the right tag for
/// a Retry with this `header`, answering an Initial sent to `orig_dst_cid`.
pub(crate) fn is_valid(version: Version, orig_dst_cid: &[u8], header: &[u8], payload: &[u8]) -> bool {
    let Some((key, nonce)) = secrets(version) else { return false };
    let Some(token_len) = payload.len().checked_sub(TAG_LEN) else { return false };
    let (token, tag) = payload.split_at(token_len);
    let Ok(orig_len) = u8::try_from(orig_dst_cid.len()) else { return false };
    let mut pseudo_packet = Vec::with_capacity(1 + orig_dst_cid.len() + header.len() + token.len());
    pseudo_packet.push(orig_len);
    pseudo_packet.extend_from_slice(orig_dst_cid);
    pseudo_packet.extend_from_slice(header);
    pseudo_packet.extend_from_slice(token);
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &key).expect("a 16-byte AES-128 key"));
    // Opening an empty ciphertext checks the tag alone, in constant time.
    let mut tag = tag.to_vec();
    key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(pseudo_packet), &mut tag).is_ok()
}

/// The fixed key and nonce of each version's Retry tag.
fn secrets(version: Version) -> Option<([u8; 16], [u8; 12])> {
    match version {
        Version::V1 => Some((hex("be0c690b9f66575a1d766b54e368c84e")?, hex("461599d35d632bf2239825bb")?)),
        Version::V2 => Some((hex("8fb4b01b56ac48e260fbcbcead7ccc92")?, hex("d86969bc2d7c6d9990efb04a")?)),
        Version::V1Draft => Some((hex("ccce187ed09a09d05728155a6cb96be1")?, hex("e54930f97f2136f0530a8c1c")?)),
        _ => None,
    }
}

fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let mut bytes = [0; N];
    for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    (text.len() == 2 * N).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9001 A.4 and RFC 9369 A.4: the same Retry under each version.
    #[test]
    fn accepts_the_rfc_retries_and_refuses_any_change() {
        let orig_dst_cid: [u8; 8] = hex("8394c8f03e515708").unwrap();
        let cases = [
            (Version::V1, "ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba"),
            (Version::V2, "cf6b3343cf0008f067a5502a4262b5746f6b656ec8646ce8bfe33952d955543665dcc7b6"),
        ];
        for (version, packet) in cases {
            let packet: [u8; 36] = hex(packet).unwrap();
            let (header, payload) = packet.split_at(15);
            assert!(is_valid(version, &orig_dst_cid, header, payload), "{version:?}");
            let mut corrupted = payload.to_vec();
            corrupted[7] ^= 1;
            assert!(!is_valid(version, &orig_dst_cid, header, &corrupted), "{version:?}");
            assert!(!is_valid(version, &orig_dst_cid[1..], header, payload), "{version:?}");
            assert!(!is_valid(version, &orig_dst_cid, header, &payload[..10]), "{version:?}");
        }
    }
}
