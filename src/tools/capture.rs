//! Bounded capture of a byte stream (a child's stdout, say): keeps a fixed-size
//! head and a fixed-size tail and counts everything, so a command printing
//! gigabytes costs the same memory as one printing a page.

use super::Truncation;
use std::collections::VecDeque;

pub struct BoundedCapture {
    limit_chars: usize,
    cap_bytes: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total_bytes: u64,
    total_chars: u64,
}

impl BoundedCapture {
    /// Keeps enough bytes on each side to render `limit_chars` characters of any
    /// UTF-8 text (at most four bytes a character).
    pub fn new(limit_chars: usize) -> Self {
        let cap_bytes = limit_chars.saturating_mul(4).max(64);
        BoundedCapture {
            limit_chars,
            cap_bytes,
            head: Vec::new(),
            tail: VecDeque::new(),
            total_bytes: 0,
            total_chars: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        // UTF-8 continuation bytes are 0b10xxxxxx; every other byte starts a character.
        self.total_chars += bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u64;
        if self.head.len() < self.cap_bytes {
            let take = (self.cap_bytes - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.cap_bytes {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.cap_bytes..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.cap_bytes);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    pub fn total_chars(&self) -> u64 {
        self.total_chars
    }

    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }

    /// The text, whole when it fits in the limit; otherwise its first and last
    /// halves around an omission line, with what was kept.
    pub fn render(&self) -> (String, Option<Truncation>) {
        let total = self.total_chars as usize;
        if self.tail.is_empty() {
            let text = String::from_utf8_lossy(&self.head).into_owned();
            let count = text.chars().count();
            if count <= self.limit_chars {
                return (text, None);
            }
        }
        let mut whole = self.head.clone();
        let contiguous = (self.head.len() + self.tail.len()) as u64 == self.total_bytes;
        if contiguous {
            whole.extend(self.tail.iter());
            let text = String::from_utf8_lossy(&whole).into_owned();
            if text.chars().count() <= self.limit_chars {
                return (text, None);
            }
        }
        let head_text = String::from_utf8_lossy(&self.head);
        let tail_bytes: Vec<u8> = if contiguous {
            whole[self.head.len()..].to_vec()
        } else {
            self.tail.iter().copied().collect()
        };
        let tail_text = String::from_utf8_lossy(&tail_bytes);
        let half = self.limit_chars / 2;
        let head: String = head_text.chars().take(half).collect();
        let tail_count = tail_text.chars().count();
        let tail: String = tail_text
            .chars()
            .skip(tail_count.saturating_sub(self.limit_chars - half))
            .collect();
        let kept = head.chars().count() + tail.chars().count();
        let omitted = total.saturating_sub(kept);
        let text = format!("{head}\n[... {omitted} characters omitted ...]\n{tail}");
        (text, Some(Truncation { kept, total }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = BoundedCapture::new(100);
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.render(), ("hello world".to_string(), None));
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_counts_all() {
        let mut c = BoundedCapture::new(20);
        for i in 0..10_000 {
            c.push(format!("{i:05}\n").as_bytes());
        }
        let (text, cut) = c.render();
        assert!(text.starts_with("00000\n"), "{text}");
        assert!(text.ends_with("09999\n"), "{text}");
        assert_eq!(
            cut,
            Some(Truncation {
                kept: 20,
                total: 60_000
            })
        );
        assert!(c.head.len() <= 80 && c.tail.len() <= 80);
    }

    #[test]
    fn multibyte_chars_split_across_pushes() {
        let text = "ééé".repeat(100);
        let mut c = BoundedCapture::new(1000);
        for b in text.as_bytes() {
            c.push(std::slice::from_ref(b));
        }
        assert_eq!(c.total_chars(), 300);
        assert_eq!(c.render().0, text);
    }

    #[test]
    fn memory_stays_bounded() {
        let mut c = BoundedCapture::new(1000);
        let block = vec![b'a'; 1 << 20];
        for _ in 0..50 {
            c.push(&block);
        }
        assert!(c.head.len() <= 4000 && c.tail.len() <= 4000);
        assert_eq!(c.total_chars(), 50 << 20);
    }
}
