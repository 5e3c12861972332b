//! A background job's output: the newest bytes up to a fixed capacity, with
//! absolute offsets so a reader that fell behind learns how much it missed.
//! It owns no pipes and knows nothing of processes; the job's reader feeds
//! it and `shell_output` reads from it.

use std::collections::VecDeque;

/// What one read hands back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Bytes that were dropped (the ring was full) before the reader got them.
    pub dropped: u64,
    pub bytes: Vec<u8>,
    /// Bytes still waiting after this chunk (the read was cut to its limit).
    pub more: u64,
}

pub struct Ring {
    buf: VecDeque<u8>,
    capacity: usize,
    /// Bytes ever pushed; the buffer holds the last `buf.len()` of them.
    end: u64,
    /// The offset of the next byte the reader has not seen.
    read: u64,
}

impl Ring {
    pub fn new(capacity: usize) -> Ring {
        Ring {
            buf: VecDeque::with_capacity(capacity.min(64 * 1024)),
            capacity: capacity.max(1),
            end: 0,
            read: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.end += bytes.len() as u64;
        // Only the tail of a push larger than the whole ring can survive.
        let bytes = &bytes[bytes.len().saturating_sub(self.capacity)..];
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.capacity);
        self.buf.drain(..overflow);
        self.buf.extend(bytes);
    }

    /// Bytes pushed that the reader has not taken yet (dropped ones included).
    pub fn unread(&self) -> u64 {
        self.end - self.read
    }

    /// Takes at most `limit` bytes the reader has not seen, cut back so no
    /// UTF-8 character is split (unless one character is longer than the
    /// limit); the rest stays for the next read.
    pub fn read(&mut self, limit: usize) -> Chunk {
        let start = self.end - self.buf.len() as u64;
        let dropped = start.saturating_sub(self.read);
        let from = (self.read.max(start) - start) as usize;
        let available = self.buf.len() - from;
        let mut take = available.min(limit);
        if take < available {
            // Back off to a character boundary: a continuation byte must not start the next read.
            let mut cut = take;
            while cut > 0 && self.buf[from + cut] & 0xC0 == 0x80 {
                cut -= 1;
            }
            if cut > 0 {
                take = cut;
            }
        }
        let bytes: Vec<u8> = self.buf.range(from..from + take).copied().collect();
        self.read = start + (from + take) as u64;
        Chunk {
            dropped,
            bytes,
            more: (available - take) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_hand_back_only_what_is_new() {
        let mut r = Ring::new(16);
        r.push(b"one\n");
        assert_eq!(r.unread(), 4);
        let c = r.read(100);
        assert_eq!(
            (c.dropped, c.bytes.as_slice(), c.more),
            (0, &b"one\n"[..], 0)
        );
        assert_eq!(r.unread(), 0);
        assert!(r.read(100).bytes.is_empty());
        r.push(b"two\n");
        assert_eq!(r.read(100).bytes, b"two\n");
    }

    #[test]
    fn a_full_ring_drops_the_oldest_and_says_how_much() {
        let mut r = Ring::new(8);
        r.push(b"abcdef");
        r.push(b"ghijkl");
        let c = r.read(100);
        assert_eq!(c.dropped, 4);
        assert_eq!(c.bytes, b"efghijkl");
        // A single push bigger than the ring keeps its tail.
        r.push(b"0123456789xyz");
        let c = r.read(100);
        assert_eq!((c.dropped, c.bytes.as_slice()), (5, &b"56789xyz"[..]));
    }

    #[test]
    fn a_read_cut_to_its_limit_leaves_the_rest_and_keeps_characters_whole() {
        let mut r = Ring::new(64);
        r.push("aé€b".as_bytes()); // 1 + 2 + 3 + 1 bytes
        let c = r.read(4); // would split the euro sign
        assert_eq!(c.bytes, "aé".as_bytes());
        assert_eq!(c.more, 4);
        let c = r.read(100);
        assert_eq!(c.bytes, "€b".as_bytes());
        assert_eq!(c.more, 0);
    }
}
