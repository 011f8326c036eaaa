//! RFC 7766 two-byte length framing for DNS over TCP: reassembly of
//! messages from arbitrarily split reads, in a fixed buffer.

use pharos_wire::MAX_STREAM_MESSAGE;
use pharos_wire::framing::{LENGTH_LEN, split_frame};

/// Largest possible frame: 2-byte length prefix plus a 65535-byte message.
const MAX_FRAME: usize = LENGTH_LEN + MAX_STREAM_MESSAGE;

/// Accumulates bytes read from a stream and yields complete messages.
pub struct FrameReader {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl FrameReader {
    /// A reader whose buffer holds at least one maximum-size frame.
    pub fn new(capacity: usize) -> FrameReader {
        FrameReader { buf: vec![0; capacity.max(MAX_FRAME)].into_boxed_slice(), start: 0, end: 0 }
    }

    /// Free space to read into. Moves buffered bytes to the front when the
    /// tail is too short to finish the partial frame, so it is never empty
    /// while a frame is incomplete.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.start < MAX_FRAME {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// Marks `n` bytes of [`spare`](Self::spare) as filled.
    pub fn filled(&mut self, n: usize) {
        debug_assert!(self.end + n <= self.buf.len());
        self.end += n;
    }

    /// Copies `data` in (for callers that do not read in place); `data`
    /// must fit in the spare space.
    #[cfg(test)]
    pub fn push(&mut self, data: &[u8]) {
        let spare = self.spare();
        spare[..data.len()].copy_from_slice(data);
        self.filled(data.len());
    }

    /// The next complete message (without its length prefix), if any.
    pub fn next_frame(&mut self) -> Option<&[u8]> {
        let (message, rest) = split_frame(&self.buf[self.start..self.end]).ok()?;
        self.start = self.end - rest.len();
        Some(message)
    }

    /// Bytes buffered but not yet returned as a frame.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Discards everything buffered (after a reconnect).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(msgs: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in msgs {
            pharos_wire::framing::push_framed(&mut out, m);
        }
        out
    }

    fn msgs() -> Vec<Vec<u8>> {
        vec![(0..40u8).collect(), vec![], vec![0xab; 1], (0..=255u8).cycle().take(3000).collect(), vec![7; 12]]
    }

    /// Feeds `stream` in pieces given by `sizes` (cycled) and collects frames.
    fn reassemble(stream: &[u8], sizes: &[usize], cap: usize) -> Vec<Vec<u8>> {
        let mut r = FrameReader::new(cap);
        let mut got = Vec::new();
        let mut pos = 0;
        let mut k = 0;
        while pos < stream.len() {
            let n = sizes[k % sizes.len()].min(stream.len() - pos).min(r.spare().len());
            k += 1;
            r.push(&stream[pos..pos + n]);
            pos += n;
            while let Some(f) = r.next_frame() {
                got.push(f.to_vec());
            }
        }
        assert_eq!(r.pending(), 0);
        got
    }

    #[test]
    fn one_byte_at_a_time() {
        let m = msgs();
        assert_eq!(reassemble(&frames(&m), &[1], 0), m);
    }

    #[test]
    fn split_inside_length_prefix_and_body() {
        let m = msgs();
        let s = frames(&m);
        // 1 byte: split inside the first length prefix; 3, 41...: in bodies.
        for sizes in [&[1, 3][..], &[41, 2, 1], &[2], &[3], &[43, 5, 1000], &[7, 11, 13]] {
            assert_eq!(reassemble(&s, sizes, 0), m, "sizes {sizes:?}");
        }
    }

    #[test]
    fn many_frames_in_one_read() {
        let m = msgs();
        let s = frames(&m);
        assert_eq!(reassemble(&s, &[s.len()], 0), m);
    }

    #[test]
    fn compaction_keeps_partial_frame() {
        // Repeatedly leave a partial frame near the end of the buffer so
        // that spare() must move it to the front.
        let big: Vec<u8> = (0..60000u32).map(|i| i as u8).collect();
        let m: Vec<Vec<u8>> = (0..20).map(|i| if i % 2 == 0 { big.clone() } else { vec![i as u8; 5] }).collect();
        let s = frames(&m);
        assert_eq!(reassemble(&s, &[50000, 17, 33333], 0), m);
    }

    #[test]
    fn incomplete_frame_yields_nothing() {
        let mut r = FrameReader::new(0);
        r.push(&[0]);
        assert!(r.next_frame().is_none());
        r.push(&[3, 1, 2]);
        assert!(r.next_frame().is_none());
        r.push(&[3, 0]);
        assert_eq!(r.next_frame().unwrap(), &[1, 2, 3]);
        assert!(r.next_frame().is_none());
        assert_eq!(r.pending(), 1);
        r.clear();
        assert_eq!(r.pending(), 0);
    }
}
