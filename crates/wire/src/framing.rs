//! The two-octet length before each DNS message on a stream: over TCP and
//! TLS (RFC 1035 section 4.2.2, RFC 7766, RFC 7858) and over QUIC (RFC
//! 9250 section 4.2). Sans-IO: writers append frames to a buffer (or open
//! one, write its message and close it), readers split what they have
//! read, and learn how much more a frame needs.

/// Octets of the length before each message.
pub const LENGTH_LEN: usize = 2;

/// `message` behind its length.
pub fn framed(message: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(LENGTH_LEN + message.len());
    push_framed(&mut frame, message);
    frame
}

/// Appends `message` to `out` behind its length.
pub fn push_framed(out: &mut Vec<u8>, message: &[u8]) {
    push_framed_with(out, |out| {
        out.extend_from_slice(message);
        Some(())
    });
}

/// Appends a frame to `out` whose message `write` appends, and returns
/// what `write` returns. When that is `None`, `out` is left as it was: no
/// message, no frame. The message must fit the length (65535 octets).
pub fn push_framed_with<T>(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> Option<T>) -> Option<T> {
    let frame = open_frame(out);
    let written = write(out);
    close_frame(out, frame, written.is_some());
    written
}

/// A frame begun at the end of a buffer, its length not yet known.
#[must_use = "a frame left open has no length"]
pub struct OpenFrame {
    start: usize,
}

/// Begins a frame at the end of `out`: its message goes after, then
/// [`close_frame`] writes its length. For a loop that writes the message
/// itself and wants what the writer returns where it is, not moved
/// through [`push_framed_with`].
pub fn open_frame(out: &mut Vec<u8>) -> OpenFrame {
    let start = out.len();
    out.extend_from_slice(&[0; LENGTH_LEN]);
    OpenFrame { start }
}

/// Ends `frame`: everything after its length in `out` is its message, if
/// one was `written`; if not, `out` is left as it was before the frame.
/// The message must fit the length (65535 octets).
pub fn close_frame(out: &mut Vec<u8>, frame: OpenFrame, written: bool) {
    let OpenFrame { start } = frame;
    if !written {
        out.truncate(start);
        return;
    }
    let length = out.len() - start - LENGTH_LEN;
    debug_assert!(length <= usize::from(u16::MAX), "a framed message of {length} octets");
    out[start..start + LENGTH_LEN].copy_from_slice(&(length as u16).to_be_bytes());
}

/// The first message of `buffer` and what follows its frame; or, if the
/// frame is not all there, how many more octets are needed to learn more:
/// the rest of the length, else the rest of the message.
pub fn split_frame(buffer: &[u8]) -> Result<(&[u8], &[u8]), usize> {
    let Some((length, after)) = buffer.split_first_chunk::<LENGTH_LEN>() else {
        return Err(LENGTH_LEN - buffer.len());
    };
    let length = usize::from(u16::from_be_bytes(*length));
    after.split_at_checked(length).ok_or_else(|| length - after.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_length_and_split_back() {
        let mut stream = framed(b"abc");
        push_framed(&mut stream, b"");
        assert_eq!(stream, [0, 3, b'a', b'b', b'c', 0, 0]);
        let (first, rest) = split_frame(&stream).unwrap();
        assert_eq!((first, rest), (&b"abc"[..], &[0, 0][..]));
        assert_eq!(split_frame(rest), Ok((&[][..], &[][..])));
    }

    #[test]
    fn a_partial_frame_says_what_it_needs() {
        let stream = framed(&[7; 300]);
        assert_eq!(split_frame(&[]), Err(2));
        assert_eq!(split_frame(&stream[..1]), Err(1));
        assert_eq!(split_frame(&stream[..2]), Err(300));
        assert_eq!(split_frame(&stream[..299]), Err(3));
        assert_eq!(split_frame(&stream), Ok((&[7; 300][..], &[][..])));
    }

    #[test]
    fn a_frame_not_written_leaves_nothing() {
        let mut out = vec![9];
        assert_eq!(
            push_framed_with(&mut out, |out| {
                out.push(1);
                None::<()>
            }),
            None
        );
        assert_eq!(out, [9]);
        let written = push_framed_with(&mut out, |out| {
            out.push(1);
            Some("written")
        });
        assert_eq!((written, out), (Some("written"), vec![9, 0, 1, 1]));
    }

    #[test]
    fn an_open_frame_closes_with_its_length_or_leaves_nothing() {
        let mut out = vec![9];
        let frame = open_frame(&mut out);
        out.extend_from_slice(b"ab");
        close_frame(&mut out, frame, false);
        assert_eq!(out, [9]);
        let frame = open_frame(&mut out);
        out.extend_from_slice(&[7; 258]);
        close_frame(&mut out, frame, true);
        assert_eq!(split_frame(&out[1..]), Ok((&[7; 258][..], &[][..])));
    }
}
