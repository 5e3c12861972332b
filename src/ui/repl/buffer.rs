//! The text being typed at the REPL prompt and the cursor in it, with the
//! editing operations the keys map to. Text is kept as characters so the cursor
//! can never split one; display widths are the renderer's business.

use unicode_width::UnicodeWidthChar;

#[derive(Debug, Default, Clone)]
pub struct Buffer {
    chars: Vec<char>,
    /// Index into `chars`: the cursor sits before this character.
    cursor: usize,
    /// The last killed text, for Ctrl-Y.
    killed: Vec<char>,
}

fn is_zero_width(c: char) -> bool {
    c != '\n' && c.width().unwrap_or(0) == 0
}

impl Buffer {
    pub fn text(&self) -> String {
        self.chars.iter().collect()
    }

    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// Replaces the text and puts the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.chars = text.chars().collect();
        self.cursor = self.chars.len();
    }

    /// Puts the cursor before character `at` (at most the end).
    pub fn move_to(&mut self, at: usize) {
        self.cursor = at.min(self.chars.len());
    }

    pub fn clear(&mut self) {
        self.chars.clear();
        self.cursor = 0;
    }

    pub fn insert(&mut self, c: char) {
        self.chars.insert(self.cursor, c);
        self.cursor += 1;
    }

    /// Inserts pasted text as is (newlines included); `\r\n` and `\r` become `\n`.
    pub fn insert_str(&mut self, s: &str) {
        let text = s.replace("\r\n", "\n").replace('\r', "\n");
        let new: Vec<char> = text
            .chars()
            .filter(|c| *c == '\n' || *c == '\t' || !c.is_control())
            .collect();
        let n = new.len();
        self.chars.splice(self.cursor..self.cursor, new);
        self.cursor += n;
    }

    /// One step left, over a base character and the combining marks after it.
    pub fn left(&mut self) {
        while self.cursor > 0 {
            self.cursor -= 1;
            if !is_zero_width(self.chars[self.cursor]) {
                break;
            }
        }
    }

    pub fn right(&mut self) {
        if self.cursor < self.chars.len() {
            self.cursor += 1;
            while self.cursor < self.chars.len() && is_zero_width(self.chars[self.cursor]) {
                self.cursor += 1;
            }
        }
    }

    pub fn word_left(&mut self) {
        while self.cursor > 0 && self.chars[self.cursor - 1].is_whitespace() {
            self.cursor -= 1;
        }
        while self.cursor > 0 && !self.chars[self.cursor - 1].is_whitespace() {
            self.cursor -= 1;
        }
    }

    pub fn word_right(&mut self) {
        let n = self.chars.len();
        while self.cursor < n && self.chars[self.cursor].is_whitespace() {
            self.cursor += 1;
        }
        while self.cursor < n && !self.chars[self.cursor].is_whitespace() {
            self.cursor += 1;
        }
    }

    fn line_start(&self) -> usize {
        self.chars[..self.cursor]
            .iter()
            .rposition(|&c| c == '\n')
            .map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.chars[self.cursor..]
            .iter()
            .position(|&c| c == '\n')
            .map_or(self.chars.len(), |i| self.cursor + i)
    }

    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    pub fn end(&mut self) {
        self.cursor = self.line_end();
    }

    pub fn on_first_line(&self) -> bool {
        !self.chars[..self.cursor].contains(&'\n')
    }

    pub fn on_last_line(&self) -> bool {
        !self.chars[self.cursor..].contains(&'\n')
    }

    /// Moves to the previous line of a multi-line text, keeping the column.
    pub fn up(&mut self) {
        if self.on_first_line() {
            return;
        }
        let col = self.cursor - self.line_start();
        let prev_end = self.line_start() - 1;
        let prev_start = self.chars[..prev_end]
            .iter()
            .rposition(|&c| c == '\n')
            .map_or(0, |i| i + 1);
        self.cursor = prev_start + col.min(prev_end - prev_start);
    }

    pub fn down(&mut self) {
        if self.on_last_line() {
            return;
        }
        let col = self.cursor - self.line_start();
        let next_start = self.line_end() + 1;
        let next_end = self.chars[next_start..]
            .iter()
            .position(|&c| c == '\n')
            .map_or(self.chars.len(), |i| next_start + i);
        self.cursor = next_start + col.min(next_end - next_start);
    }

    pub fn backspace(&mut self) {
        let end = self.cursor;
        self.left();
        self.chars.drain(self.cursor..end);
    }

    pub fn delete(&mut self) {
        let start = self.cursor;
        self.right();
        self.chars.drain(start..self.cursor);
        self.cursor = start;
    }

    /// Ctrl-K: to the end of the line (or the newline itself at a line's end).
    pub fn kill_to_end(&mut self) {
        let mut end = self.line_end();
        if end == self.cursor && end < self.chars.len() {
            end += 1;
        }
        self.killed = self.chars.drain(self.cursor..end).collect();
    }

    /// Ctrl-U: to the start of the line.
    pub fn kill_to_start(&mut self) {
        let start = self.line_start();
        self.killed = self.chars.drain(start..self.cursor).collect();
        self.cursor = start;
    }

    /// Ctrl-W: the word before the cursor and the spaces after it.
    pub fn kill_word(&mut self) {
        let end = self.cursor;
        self.word_left();
        self.killed = self.chars.drain(self.cursor..end).collect();
    }

    pub fn yank(&mut self) {
        let k = self.killed.clone();
        let n = k.len();
        self.chars.splice(self.cursor..self.cursor, k);
        self.cursor += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(text: &str) -> Buffer {
        let mut b = Buffer::default();
        b.set(text);
        b
    }

    #[test]
    fn typing_and_moving() {
        let mut b = Buffer::default();
        for c in "hllo".chars() {
            b.insert(c);
        }
        b.home();
        b.right();
        b.insert('e');
        assert_eq!(b.text(), "hello");
        assert_eq!(b.cursor(), 2);
        b.end();
        b.backspace();
        assert_eq!(b.text(), "hell");
        b.home();
        b.delete();
        assert_eq!(b.text(), "ell");
        b.left();
        assert_eq!(b.cursor(), 0, "left at the start stays");
    }

    #[test]
    fn words_and_kills_with_yank() {
        let mut b = buf("git commit  -m msg");
        b.word_left();
        assert_eq!(b.cursor(), 15);
        b.word_left();
        b.word_left();
        assert_eq!(b.cursor(), 4);
        b.word_right();
        assert_eq!(b.cursor(), 10);
        b.kill_to_end();
        assert_eq!(b.text(), "git commit");
        b.home();
        b.yank();
        assert_eq!(b.text(), "  -m msggit commit");
        b.end();
        b.kill_word();
        assert_eq!(b.text(), "  -m msggit ");
        b.kill_to_start();
        assert_eq!(b.text(), "");
        b.yank();
        assert_eq!(b.text(), "  -m msggit ");
    }

    #[test]
    fn wide_and_multibyte_characters_are_single_steps() {
        let mut b = buf("日本語 é");
        b.left();
        b.left();
        b.backspace();
        assert_eq!(b.text(), "日本 é");
        // e + combining acute: one step, one deletion.
        let mut b = buf("ae\u{301}b");
        b.left();
        b.left();
        assert_eq!(b.cursor(), 1);
        b.delete();
        assert_eq!(b.text(), "ab");
        let mut b = buf("x😀");
        b.backspace();
        assert_eq!(b.text(), "x");
    }

    #[test]
    fn multiline_motion_keeps_the_column() {
        let mut b = buf("first line\nab\nthird line");
        assert!(b.on_last_line());
        b.up();
        assert_eq!(b.cursor(), 13, "column clamped to the short line");
        b.up();
        assert_eq!(b.cursor(), 2);
        assert!(b.on_first_line());
        b.down();
        b.down();
        assert_eq!(b.cursor(), 16);
        b.home();
        assert_eq!(b.cursor(), 14);
        b.end();
        b.up();
        b.end();
        b.kill_to_end();
        assert_eq!(
            b.text(),
            "first line\nabthird line",
            "Ctrl-K at a line end joins"
        );
    }

    #[test]
    fn paste_keeps_newlines_and_drops_control_characters() {
        let mut b = buf("[]");
        b.left();
        b.insert_str("a\r\nb\u{7}\tc");
        assert_eq!(b.text(), "[a\nb\tc]");
        assert_eq!(b.cursor(), 6);
    }
}
