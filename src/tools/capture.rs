//! Bounded capture of a byte stream (a child's stdout, say): keeps a fixed-size
//! head and a fixed-size tail and counts everything, so a command printing
//! gigabytes costs the same memory as one printing a page. It does not read
//! pipes itself and knows nothing of processes; callers feed it chunks.

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

    /// Characters seen so far (UTF-8 character starts; an invalid byte counts as one).
    pub fn total_chars(&self) -> u64 {
        self.total_chars
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }

    /// The text, whole when it fits in the limit given at construction; otherwise
    /// its first and last halves around an omission line, with what was kept.
    pub fn render(&self) -> (String, Option<Truncation>) {
        self.render_within(self.limit_chars)
    }

    /// Like `render`, with a tighter limit (never looser than the construction
    /// limit, because more than that was not kept).
    pub fn render_within(&self, limit: usize) -> (String, Option<Truncation>) {
        let limit = limit.min(self.limit_chars);
        let total = self.total_chars as usize;
        let dropped_middle = (self.head.len() + self.tail.len()) as u64 != self.total_bytes;
        let (head_text, tail_text) = if dropped_middle {
            let tail: Vec<u8> = self.tail.iter().copied().collect();
            // The ring may start inside a character; skip its continuation bytes.
            let start = tail
                .iter()
                .take(3)
                .take_while(|&&b| b & 0xC0 == 0x80)
                .count();
            (
                String::from_utf8_lossy(&self.head).into_owned(),
                String::from_utf8_lossy(&tail[start..]).into_owned(),
            )
        } else {
            let mut whole = self.head.clone();
            whole.extend(self.tail.iter());
            let text = String::from_utf8_lossy(&whole).into_owned();
            if text.chars().count() <= limit {
                return (text, None);
            }
            (text.clone(), text)
        };
        let head_keep = limit / 2;
        let head: String = head_text.chars().take(head_keep).collect();
        let tail_count = tail_text.chars().count();
        let tail: String = tail_text
            .chars()
            .skip(tail_count.saturating_sub(limit - head_keep))
            .collect();
        let kept = head.chars().count() + tail.chars().count();
        let omitted = total.saturating_sub(kept);
        let sep_before = if head.ends_with('\n') || head.is_empty() {
            ""
        } else {
            "\n"
        };
        let text = format!("{head}{sep_before}[... {omitted} characters omitted ...]\n{tail}");
        // An invalid byte sequence can decode to more characters than were counted.
        let total = total.max(kept);
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
        assert_eq!(
            text,
            "00000\n0000\n[... 59980 characters omitted ...]\n998\n09999\n"
        );
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
    fn over_the_limit_but_all_kept_still_shows_both_ends() {
        // 30 bytes fit in the 64-byte head, yet exceed the 10-character limit.
        let mut c = BoundedCapture::new(10);
        c.push(b"abcdefghijklmnopqrstuvwxyz0123");
        let (text, cut) = c.render();
        assert_eq!(text, "abcde\n[... 20 characters omitted ...]\nz0123");
        assert_eq!(
            cut,
            Some(Truncation {
                kept: 10,
                total: 30
            })
        );
    }

    #[test]
    fn multibyte_chars_split_across_pushes() {
        let text = "ééé".repeat(100);
        let mut c = BoundedCapture::new(1000);
        for b in text.as_bytes() {
            c.push(std::slice::from_ref(b));
        }
        assert_eq!(c.total_chars(), 300);
        assert_eq!(c.total_bytes(), 600);
        assert_eq!(c.render().0, text);
    }

    #[test]
    fn multibyte_tail_starting_mid_character_renders_cleanly() {
        // Three-byte characters pushed in odd-sized chunks, far past the caps, so
        // both the head cut and the ring's start fall inside characters.
        let text = "€".repeat(10_000);
        let mut c = BoundedCapture::new(30);
        for chunk in text.as_bytes().chunks(7) {
            c.push(chunk);
        }
        let (out, cut) = c.render();
        assert!(!out.contains('\u{FFFD}'), "{out}");
        assert_eq!(
            out,
            format!(
                "{}\n[... 9970 characters omitted ...]\n{}",
                "€".repeat(15),
                "€".repeat(15)
            )
        );
        assert_eq!(
            cut,
            Some(Truncation {
                kept: 30,
                total: 10_000
            })
        );
    }

    #[test]
    fn tighter_render_limit_splits_again() {
        let mut c = BoundedCapture::new(100);
        c.push(b"0123456789");
        assert_eq!(c.render_within(1000).0, "0123456789");
        let (text, cut) = c.render_within(4);
        assert_eq!(text, "01\n[... 6 characters omitted ...]\n89");
        assert_eq!(cut, Some(Truncation { kept: 4, total: 10 }));
    }

    #[test]
    fn memory_stays_bounded() {
        let mut c = BoundedCapture::new(1000);
        let block = vec![b'a'; 1 << 20];
        for _ in 0..50 {
            c.push(&block);
        }
        assert!(c.head.len() <= 4000 && c.tail.len() <= 4000);
        assert!(c.tail.capacity() <= 8192, "{}", c.tail.capacity());
        assert_eq!(c.total_chars(), 50 << 20);
    }
}
