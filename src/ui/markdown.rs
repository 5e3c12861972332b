//! Markdown answers rendered for the terminal while they stream; `html`
//! renders the same Markdown as safe HTML for the web page.
//!
//! [`MarkdownRenderer`] takes the answer's text deltas as they arrive and
//! hands back finished screen lines, each ending in `\n`, ready to print.
//! Only a TTY gets this: a pipe gets the model's text untouched.
//!
//! # Deciding on incomplete input
//!
//! Markdown is not line-local: a later line can turn the line before into a
//! heading (`===`), a table (`|---|`), or bold (a closing `**`). So nothing is
//! drawn from a line until the construct it belongs to can no longer change:
//!
//! - Input is consumed in whole source lines; a line without its `\n` waits.
//! - Lines collect into a *segment*, one top-level block. A segment ends at a
//!   blank line (unless the next line is indented and the segment is a list,
//!   whose item it continues), before a heading, a code fence, or a new
//!   top-level list item. Each of those lines starts something that cannot
//!   belong to what came before, so a finished segment renders the same on
//!   its own as inside the whole document. It is then parsed with
//!   pulldown-cmark and laid out in one go: a paragraph, table or list item
//!   appears when it is complete.
//! - A top-level fenced code block is the exception, because code is long
//!   and line-local: after its opening fence every line is coloured and shown
//!   as soon as it is complete, until the closing fence.
//! - Blank lines between segments are printed as they are in the source
//!   (leading and trailing ones dropped); inside a segment the blank source
//!   lines between two blocks are reproduced too.
//! - An ordered list split into one segment per item keeps counting (`1.`,
//!   `2.`…) across the split, as a single list would.
//! - Code is coloured by a small hand-written lexer (`highlight.rs`), linear
//!   per line. Still, only the first 64 KiB of code in an answer is
//!   coloured and the rest shown plain, a bound on what colour can cost
//!   whatever the model sends. A count of bytes, not a clock, so the output
//!   stays the same for the same text.
//!
//! Every decision depends only on the sequence of complete lines, so the
//! output is the same however the stream is chunked (a property test below
//! checks it). Each line is scanned once and each segment parsed once:
//! rendering is linear in the answer's length. One known difference from a
//! whole-document parse: a link reference definition (`[x]: url`) applies
//! only within its own segment.
//!
//! Text reaches the screen through `crate::text::visible`, so control
//! characters in the answer (including ones spelled as entities, `&#27;`)
//! are shown, never interpreted. Without colour no escape sequence is written
//! at all and the structure stays in plain characters: `#` before headings,
//! `-` bullets, `>` quotes, `|` tables and visible code fences.

mod highlight;
pub mod html;
mod paint;
mod render;

use render::{code_lines, fence_lang, fence_line, push_line, render_segment};

/// Width used when the terminal reports none.
const DEFAULT_WIDTH: usize = 80;

/// A progressive Markdown renderer for one answer at a time (reusable: it
/// starts afresh after [`finish`](Self::finish)).
pub struct MarkdownRenderer {
    width: usize,
    colour: bool,
    /// The current source line, until its `\n` arrives.
    partial: String,
    /// The current segment's source lines, each ending in `\n`.
    seg: String,
    seg_kind: SegKind,
    /// A fence opened inside a list segment: (character, length).
    inner_fence: Option<(char, usize)>,
    /// Blank lines seen after the last segment, not yet printed.
    blanks: usize,
    /// Whether anything was printed (leading blank lines are dropped).
    started: bool,
    /// The top-level code block being streamed.
    fence: Option<Fence>,
    /// Where an ordered list continues if the next segment is one of its items.
    next_ordered: Option<u64>,
    /// Bytes of code that may still be coloured in this answer.
    code_budget: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegKind {
    Empty,
    List,
    Other,
}

struct Fence {
    ch: char,
    len: usize,
    indent: usize,
    hl: Option<highlight::Highlighter>,
}

impl MarkdownRenderer {
    /// A renderer for a terminal `width` columns wide; `colour == false`
    /// (NO_COLOR, `--no-color`, TERM=dumb) writes no escape sequences.
    pub fn new(width: usize, colour: bool) -> MarkdownRenderer {
        MarkdownRenderer {
            width: if width == 0 { DEFAULT_WIDTH } else { width },
            colour,
            partial: String::new(),
            seg: String::new(),
            seg_kind: SegKind::Empty,
            inner_fence: None,
            blanks: 0,
            started: false,
            fence: None,
            next_ordered: None,
            code_budget: render::HIGHLIGHT_BUDGET,
        }
    }

    /// A new terminal width, for lines not yet rendered.
    pub fn set_width(&mut self, width: usize) {
        self.width = if width == 0 { DEFAULT_WIDTH } else { width };
    }

    /// Feeds a text delta; returns the lines it completed (possibly none).
    pub fn push(&mut self, delta: &str) -> String {
        let mut out = String::new();
        // Only the new text can hold a newline: the held part has none.
        let mut scan = self.partial.len();
        self.partial.push_str(delta);
        let mut taken = 0;
        while let Some(i) = self.partial[scan..].find('\n') {
            let end = scan + i;
            let line = self.partial[taken..end].trim_end_matches('\r').to_string();
            self.line(&line, &mut out);
            taken = end + 1;
            scan = taken;
        }
        if taken > 0 {
            self.partial.drain(..taken);
        }
        out
    }

    /// The source line still waiting for its newline, made visible: for a
    /// live preview of the unfinished line (it is not rendered yet).
    pub fn pending_line(&self) -> std::borrow::Cow<'_, str> {
        crate::text::visible(&self.partial)
    }

    /// All source text not rendered yet (the lines of the block still open,
    /// then the unfinished line), made visible: a live preview for front ends
    /// that can redraw it until the rendered lines replace it.
    pub fn held(&self) -> String {
        let mut s = String::with_capacity(self.seg.len() + self.partial.len());
        s.push_str(&self.seg);
        s.push_str(&self.partial);
        crate::text::visible(&s).into_owned()
    }

    /// Ends the answer: renders whatever is held and resets for the next one.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(line.trim_end_matches('\r'), &mut out);
        }
        if self.fence.take().is_some() {
            self.emit(&mut out, &fence_line(""));
        }
        self.flush_segment(&mut out);
        *self = MarkdownRenderer::new(self.width, self.colour);
        out
    }

    fn emit(&mut self, out: &mut String, content: &[render::Span]) {
        push_line(out, &[], content, self.colour);
        self.started = true;
    }

    fn emit_blanks(&mut self, out: &mut String) {
        if self.started {
            for _ in 0..self.blanks {
                out.push('\n');
            }
        }
        self.blanks = 0;
    }

    fn flush_segment(&mut self, out: &mut String) {
        if self.seg.is_empty() {
            return;
        }
        let seg = std::mem::take(&mut self.seg);
        let start = if self.seg_kind == SegKind::List {
            self.next_ordered.take()
        } else {
            None
        };
        let before = out.len();
        self.next_ordered = render_segment(
            &seg,
            self.width,
            self.colour,
            start,
            &mut self.code_budget,
            out,
        );
        self.started |= out.len() > before;
        self.seg_kind = SegKind::Empty;
        self.inner_fence = None;
    }

    /// One complete source line (without its newline).
    fn line(&mut self, raw: &str, out: &mut String) {
        if let Some(f) = &mut self.fence {
            if is_fence_close(raw, f.ch, f.len) {
                self.fence = None;
                self.emit(out, &fence_line(""));
                return;
            }
            let code = strip_indent(raw, f.indent);
            let lines = code_lines(f.hl.as_mut(), code, self.width, &mut self.code_budget);
            for l in lines {
                self.emit(out, &l);
            }
            return;
        }
        let blank = raw.trim().is_empty();
        if self.inner_fence.is_some() {
            self.append(raw);
            return;
        }
        if blank {
            // Only a list item can continue past a blank line; anything else
            // is complete now.
            if self.seg_kind == SegKind::Other {
                self.flush_segment(out);
            }
            if !self.seg.is_empty() || self.started {
                self.blanks += 1;
            }
            return;
        }
        let indented = indent_of(raw) > 0;
        if !self.seg.is_empty() {
            if self.seg_kind == SegKind::List && indented {
                // Continues the list item (after blank lines, too).
                for _ in 0..self.blanks {
                    self.seg.push('\n');
                }
                self.blanks = 0;
                self.append(raw);
                return;
            }
            if self.blanks > 0 {
                self.flush_segment(out);
            } else {
                let marker = list_marker(raw);
                let splits = fence_open(raw).is_some()
                    || is_atx_heading(raw)
                    || marker.is_some_and(|m| self.seg_kind == SegKind::List || m.interrupts);
                if !splits {
                    self.append(raw);
                    return;
                }
                self.flush_segment(out);
            }
        }
        self.emit_blanks(out);
        // `raw` starts something new.
        if let Some((ch, len, indent, info)) = fence_open(raw) {
            self.next_ordered = None;
            self.emit(out, &fence_line(info));
            let hl = self
                .colour
                .then(|| highlight::Highlighter::new(fence_lang(info)));
            self.fence = Some(Fence {
                ch,
                len,
                indent,
                hl,
            });
            return;
        }
        self.seg_kind = if list_marker(raw).is_some() {
            SegKind::List
        } else {
            self.next_ordered = None;
            SegKind::Other
        };
        self.append(raw);
        if is_atx_heading(raw) {
            self.flush_segment(out);
        }
    }

    fn append(&mut self, raw: &str) {
        if self.seg_kind == SegKind::List {
            let t = raw.trim_start();
            match self.inner_fence {
                Some((ch, len)) if is_fence_close(t, ch, len) => self.inner_fence = None,
                Some(_) => {}
                None => {
                    if let Some((ch, len, _, _)) = fence_open(t) {
                        self.inner_fence = Some((ch, len));
                    }
                }
            }
        }
        self.seg.push_str(raw);
        self.seg.push('\n');
    }
}

/// Columns of leading whitespace (a tab counts as reaching the next stop of 4).
fn indent_of(line: &str) -> usize {
    let mut col = 0;
    for c in line.chars() {
        match c {
            ' ' => col += 1,
            '\t' => col += 4 - col % 4,
            _ => break,
        }
    }
    col
}

/// `line` without up to `n` leading spaces (a fence's own indentation).
fn strip_indent(line: &str, n: usize) -> &str {
    let spaces = line.bytes().take(n).take_while(|b| *b == b' ').count();
    &line[spaces..]
}

/// An opening code fence: (character, length, indentation, info string).
fn fence_open(line: &str) -> Option<(char, usize, usize, &str)> {
    let indent = indent_of(line);
    if indent > 3 {
        return None;
    }
    let t = line.trim_start();
    let ch = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = t.chars().take_while(|c| *c == ch).count();
    if len < 3 {
        return None;
    }
    let info = t[len..].trim();
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some((ch, len, indent, info))
}

fn is_fence_close(line: &str, ch: char, len: usize) -> bool {
    if indent_of(line) > 3 {
        return false;
    }
    let t = line.trim();
    t.chars().count() >= len && t.chars().all(|c| c == ch)
}

fn is_atx_heading(line: &str) -> bool {
    if indent_of(line) > 3 {
        return false;
    }
    let t = line.trim_start();
    let hashes = t.chars().take_while(|c| *c == '#').count();
    (1..=6).contains(&hashes)
        && t[hashes..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
}

/// `---`, `* * *`, `___`: a rule, which wins over a list marker.
fn is_thematic_break(line: &str) -> bool {
    let t: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(ch) = t.chars().next() else {
        return false;
    };
    matches!(ch, '-' | '*' | '_') && t.len() >= 3 && t.chars().all(|c| c == ch)
}

struct ListMarker {
    /// Whether it may interrupt a paragraph (CommonMark: not empty, and an
    /// ordered one only when it starts at 1).
    interrupts: bool,
}

/// A list item's marker starting `line`: `- `, `* `, `+ `, `1. `, `1) `.
fn list_marker(line: &str) -> Option<ListMarker> {
    if indent_of(line) > 3 || is_thematic_break(line) {
        return None;
    }
    let t = line.trim_start();
    let (rest, first) = if let Some(r) = t.strip_prefix(['-', '*', '+']) {
        (r, true)
    } else {
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let r = t[digits..].strip_prefix(['.', ')'])?;
        (r, t[..digits].parse::<u64>().ok() == Some(1))
    };
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some(ListMarker {
        interrupts: first && !rest.trim().is_empty(),
    })
}

#[cfg(test)]
mod tests;
