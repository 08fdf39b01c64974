//! A bounded buffer that keeps the tail of a stream: a command that prints gigabytes
//! costs at most `cap` bytes of memory.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The last `cap` bytes of a stream and how many bytes it had in all.
#[derive(Debug, Clone, Default)]
pub(crate) struct TailBuffer {
    cap: usize,
    buf: VecDeque<u8>,
    total: u64,
}

impl TailBuffer {
    /// An empty buffer keeping at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            buf: VecDeque::with_capacity(cap.min(8192)),
            total: 0,
        }
    }

    /// Appends `chunk`, dropping the oldest bytes beyond the cap.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total = self.total.saturating_add(chunk.len() as u64);
        if self.cap == 0 {
            return;
        }
        if chunk.len() >= self.cap {
            self.buf.clear();
            self.buf.extend(&chunk[chunk.len() - self.cap..]);
            return;
        }
        let overflow = (self.buf.len() + chunk.len()).saturating_sub(self.cap);
        self.buf.drain(..overflow);
        self.buf.extend(chunk);
    }

    /// True when bytes were dropped.
    pub(crate) fn truncated(&self) -> bool {
        self.total > self.buf.len() as u64
    }

    /// The kept bytes as text: the last `max` of them at most, starting on a character
    /// boundary, invalid UTF-8 replaced.
    pub(crate) fn tail_text(&self, max: usize) -> String {
        let skip = self.buf.len().saturating_sub(max);
        let bytes: Vec<u8> = self.buf.iter().skip(skip).copied().collect();
        let cut = skip > 0 || self.truncated();
        let start = if cut {
            // Do not start in the middle of a UTF-8 sequence.
            bytes
                .iter()
                .take(3)
                .position(|b| (b & 0xC0) != 0x80)
                .unwrap_or(0)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// All kept bytes as text.
    pub(crate) fn text(&self) -> String {
        self.tail_text(self.buf.len())
    }
}

/// A tail buffer shared between the task that fills it and those that read it.
pub(crate) type SharedTail = Arc<Mutex<TailBuffer>>;

/// A new shared tail buffer.
pub(crate) fn shared(cap: usize) -> SharedTail {
    Arc::new(Mutex::new(TailBuffer::new(cap)))
}

/// Locks a shared buffer (a poisoned lock still holds valid bytes).
pub(crate) fn lock(t: &SharedTail) -> std::sync::MutexGuard<'_, TailBuffer> {
    t.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `src` to its end into `dst` through a fixed 16 KiB chunk.
pub(crate) async fn drain(mut src: impl AsyncRead + Unpin, dst: SharedTail) {
    let mut chunk = vec![0_u8; 16 * 1024];
    loop {
        match src.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lock(&dst).push(&chunk[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_counts_everything() {
        let mut t = TailBuffer::new(4);
        t.push(b"ab");
        assert_eq!(t.text(), "ab");
        assert!(!t.truncated());
        t.push(b"cde");
        assert_eq!(t.text(), "bcde");
        assert!(t.truncated());
        t.push(b"0123456789");
        assert_eq!(t.text(), "6789");
        assert_eq!(t.total, 15);
        assert_eq!(t.tail_text(2), "89");
    }

    #[test]
    fn a_cut_never_starts_inside_a_character() {
        let mut t = TailBuffer::new(5);
        t.push("яяя".as_bytes()); // 6 bytes: the first byte kept is a continuation byte
        assert_eq!(t.text(), "яя");
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut t = TailBuffer::new(0);
        t.push(b"abc");
        assert_eq!(t.text(), "");
        assert!(t.truncated());
    }
}
