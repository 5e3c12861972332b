//! One complete block of Markdown (a "segment", see the module above) to
//! terminal lines: pulldown-cmark's events laid out with container prefixes
//! (quote bars, list markers with hanging indent), prose wrapped to the width
//! by display width, tables fitted to the width, code coloured.

use super::highlight::Highlighter;
pub use super::paint::{Paint, Span};
use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

const GREY: u8 = 90;
const CYAN: u8 = 36;
const BLUE: u8 = 34;
const MAGENTA: u8 = 35;

/// Narrowest a table column is squeezed to before the table is shown as
/// records instead.
const MIN_COLUMN: usize = 4;

pub fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

/// Columns `c` adds after `prev`. Alone, a variation selector takes none;
/// VS16 (U+FE0F) after a character shown as text by default (⚠, ❤) asks
/// for its emoji form, two columns wide in terminals, so it adds the
/// difference. unicode-width knows which pairs widen.
pub fn char_width_after(prev: Option<char>, c: char) -> usize {
    match prev {
        Some(p) if c == VS16 => {
            let mut pair = [0u8; 8];
            let n = p.encode_utf8(&mut pair).len();
            let n = n + c.encode_utf8(&mut pair[n..]).len();
            let pair = std::str::from_utf8(&pair[..n]).unwrap_or_default();
            UnicodeWidthStr::width(pair).saturating_sub(char_width(p))
        }
        _ => char_width(c),
    }
}

/// Emoji presentation selector.
const VS16: char = '\u{FE0F}';

/// Columns of `c` with the selector that may follow it counted in, so a cut
/// never separates the two; the selector itself then takes none.
fn cluster_width(c: char, next: Option<char>) -> usize {
    match (c, next) {
        (VS16, _) => 0,
        (_, Some(VS16)) => char_width(c) + char_width_after(Some(c), VS16),
        _ => char_width(c),
    }
}

pub fn text_width(s: &str) -> usize {
    let mut prev = None;
    s.chars()
        .map(|c| {
            let w = char_width_after(prev, c);
            prev = Some(c);
            w
        })
        .sum()
}

fn spans_width(spans: &[Span]) -> usize {
    let mut prev = None;
    spans
        .iter()
        .flat_map(|(t, _)| t.chars())
        .map(|c| {
            let w = char_width_after(prev, c);
            prev = Some(c);
            w
        })
        .sum()
}

fn push_span(line: &mut Vec<Span>, text: &str, paint: Paint) {
    if text.is_empty() {
        return;
    }
    match line.last_mut() {
        Some((t, p)) if *p == paint => t.push_str(text),
        _ => line.push((text.to_string(), paint)),
    }
}

/// Appends one finished line: `prefix` then `content`, painted, then `\n`.
/// A line with no content loses the prefix's trailing spaces.
pub fn push_line(out: &mut String, prefix: &[Span], content: &[Span], colour: bool) {
    let mut pieces: Vec<&Span> = prefix.iter().chain(content.iter()).collect();
    let mut last_trimmed: Option<Span> = None;
    if content.iter().all(|(t, _)| t.is_empty()) {
        while let Some((t, p)) = pieces.last() {
            let trimmed = t.trim_end();
            if trimmed.is_empty() {
                pieces.pop();
                continue;
            }
            if trimmed.len() != t.len() {
                last_trimmed = Some((trimmed.to_string(), *p));
                pieces.pop();
            }
            break;
        }
    }
    for (text, paint) in pieces.into_iter().chain(last_trimmed.as_ref()) {
        if text.is_empty() {
            continue;
        }
        if colour && !paint.is_plain() {
            paint.sgr(out);
            out.push_str(text);
            out.push_str("\x1b[0m");
        } else {
            out.push_str(text);
        }
    }
    out.push('\n');
}

/// Greedy word wrap of styled text to `width` columns. Whitespace runs become
/// one space (dropped at line ends); `\n` in a span forces a break; a word
/// wider than the line is cut at character boundaries, never inside a wide
/// character.
pub fn wrap(spans: &[Span], width: usize) -> Vec<Vec<Span>> {
    let width = width.max(1);
    let mut lines: Vec<Vec<Span>> = Vec::new();
    let mut line: Vec<Span> = Vec::new();
    let mut line_w = 0;
    let mut word: Vec<Span> = Vec::new();
    let mut word_w = 0;
    let mut space: Option<Paint> = None;
    // The character before, for a selector that widens it.
    let mut prev: Option<char> = None;

    fn place_word(
        lines: &mut Vec<Vec<Span>>,
        line: &mut Vec<Span>,
        line_w: &mut usize,
        word: &mut Vec<Span>,
        word_w: &mut usize,
        space: &mut Option<Paint>,
        width: usize,
    ) {
        if word.is_empty() {
            return;
        }
        let gap = usize::from(!line.is_empty() && space.is_some());
        if *line_w + gap + *word_w <= width {
            if gap == 1 {
                push_span(line, " ", space.unwrap_or_default());
                *line_w += 1;
            }
        } else if !line.is_empty() {
            lines.push(std::mem::take(line));
            *line_w = 0;
        }
        if *line_w + *word_w <= width {
            for (t, p) in word.drain(..) {
                push_span(line, &t, p);
            }
            *line_w += *word_w;
        } else {
            // Too long for any line: cut it.
            let chars: Vec<(char, Paint)> = word
                .drain(..)
                .flat_map(|(t, p)| t.chars().map(move |c| (c, p)).collect::<Vec<_>>())
                .collect();
            for (i, &(c, p)) in chars.iter().enumerate() {
                let cw = cluster_width(c, chars.get(i + 1).map(|(n, _)| *n));
                if *line_w + cw > width && *line_w > 0 {
                    lines.push(std::mem::take(line));
                    *line_w = 0;
                }
                let mut buf = [0u8; 4];
                push_span(line, c.encode_utf8(&mut buf), p);
                *line_w += cw;
            }
        }
        *word_w = 0;
        *space = None;
    }

    for (text, paint) in spans {
        for c in text.chars() {
            if c == '\n' {
                place_word(
                    &mut lines,
                    &mut line,
                    &mut line_w,
                    &mut word,
                    &mut word_w,
                    &mut space,
                    width,
                );
                lines.push(std::mem::take(&mut line));
                line_w = 0;
                space = None;
            } else if c == ' ' || c == '\t' {
                place_word(
                    &mut lines,
                    &mut line,
                    &mut line_w,
                    &mut word,
                    &mut word_w,
                    &mut space,
                    width,
                );
                if !line.is_empty() {
                    space = Some(*paint);
                }
            } else {
                let mut buf = [0u8; 4];
                push_span(&mut word, c.encode_utf8(&mut buf), *paint);
                word_w += char_width_after(prev, c);
            }
            prev = Some(c);
        }
    }
    place_word(
        &mut lines,
        &mut line,
        &mut line_w,
        &mut word,
        &mut word_w,
        &mut space,
        width,
    );
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Cuts styled text (code) into lines of at most `width` columns, keeping
/// every character including spaces.
pub fn hard_wrap(spans: &[Span], width: usize) -> Vec<Vec<Span>> {
    let width = width.max(2);
    let mut lines = vec![Vec::new()];
    let mut w = 0;
    let chars: Vec<(char, Paint)> = spans
        .iter()
        .flat_map(|(t, p)| t.chars().map(move |c| (c, *p)))
        .collect();
    for (i, &(c, paint)) in chars.iter().enumerate() {
        let cw = cluster_width(c, chars.get(i + 1).map(|(n, _)| *n));
        if w + cw > width && w > 0 {
            lines.push(Vec::new());
            w = 0;
        }
        let mut buf = [0u8; 4];
        if let Some(line) = lines.last_mut() {
            push_span(line, c.encode_utf8(&mut buf), paint);
        }
        w += cw;
    }
    lines
}

/// Tabs to spaces (stops every 4 columns): a tab's width on screen is not
/// known, and wrapping needs it.
fn expand_tabs(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\t') {
        return line.into();
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut col = 0;
    for c in line.chars() {
        if c == '\t' {
            let n = 4 - col % 4;
            out.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            out.push(c);
            col += char_width(c);
        }
    }
    out.into()
}

/// Bytes of code coloured per answer; past this the code is shown
/// uncoloured. The lexer is linear, but colour still multiplies the bytes
/// written, and a bound holds whatever the model sends. Typical answers hold
/// far less code.
pub const HIGHLIGHT_BUDGET: usize = 64 * 1024;

/// One source line of code (no newline) as screen lines `width` wide.
/// `hl` is `None` without colour; code then keeps the default colour, as it
/// does once the answer's `budget` of coloured bytes is spent.
pub fn code_lines(
    hl: Option<&mut Highlighter>,
    line: &str,
    width: usize,
    budget: &mut usize,
) -> Vec<Vec<Span>> {
    let line = crate::text::visible(line);
    let line = expand_tabs(&line);
    let spans = match hl {
        Some(h) if *budget >= line.len() => {
            *budget -= line.len();
            h.line(&line)
        }
        _ => {
            *budget = 0;
            vec![(line.into_owned(), Paint::default())]
        }
    };
    hard_wrap(&spans, width)
}

/// The fence line shown above and below code: "```lang" / "```".
pub fn fence_line(info: &str) -> Vec<Span> {
    vec![(
        format!("```{}", crate::text::visible(info)),
        Paint::fg(GREY),
    )]
}

/// The first word of a fence's info string, as a language tag.
pub fn fence_lang(info: &str) -> &str {
    info.split(|c: char| c.is_whitespace() || c == ',' || c == '{' || c == '}')
        .find(|s| !s.is_empty())
        .map(|s| s.trim_start_matches('.'))
        .unwrap_or("")
}

/// What a container adds at the left of each line inside it.
struct Prefix {
    first: Vec<Span>,
    rest: Vec<Span>,
    width: usize,
    used: bool,
}

struct Writer<'o> {
    out: &'o mut String,
    prefixes: Vec<Prefix>,
    colour: bool,
    width: usize,
}

impl Writer<'_> {
    /// Columns left for content inside the current containers; deep nesting
    /// on a narrow terminal keeps a usable minimum and lets lines overflow.
    fn avail(&self) -> usize {
        let used: usize = self.prefixes.iter().map(|p| p.width).sum();
        self.width
            .saturating_sub(used)
            .max(self.width.min(10))
            .max(1)
    }

    fn line(&mut self, content: &[Span]) {
        let mut prefix: Vec<Span> = Vec::new();
        for p in &mut self.prefixes {
            if p.used {
                prefix.extend(p.rest.iter().cloned());
            } else {
                prefix.extend(p.first.iter().cloned());
                p.used = true;
            }
        }
        push_line(self.out, &prefix, content, self.colour);
    }

    fn blank(&mut self) {
        self.line(&[]);
    }
}

struct ListLevel {
    next: Option<u64>,
}

struct Table {
    aligns: Vec<Alignment>,
    head: Vec<Vec<Span>>,
    rows: Vec<Vec<Vec<Span>>>,
    row: Vec<Vec<Span>>,
}

struct Code {
    hl: Option<Highlighter>,
    pending: String,
}

/// Lays out one segment. Returns the number the next item of a following
/// ordered list continues from, when the segment ends with an ordered list.
pub fn render_segment(
    src: &str,
    width: usize,
    colour: bool,
    list_start: Option<u64>,
    budget: &mut usize,
    out: &mut String,
) -> Option<u64> {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    let mut r = Seg {
        src,
        w: Writer {
            out,
            prefixes: Vec::new(),
            colour,
            width,
        },
        colour,
        list_start,
        inline: Vec::new(),
        strong: 0,
        emph: 0,
        strike: 0,
        heading: None,
        links: Vec::new(),
        lists: Vec::new(),
        table: None,
        code: None,
        last_end: None,
        next_ordered: None,
        budget: *budget,
    };
    for (ev, range) in Parser::new_ext(src, opts).into_offset_iter() {
        r.event(ev, range);
    }
    r.flush_inline();
    *budget = r.budget;
    r.next_ordered
}

struct Seg<'s, 'o> {
    src: &'s str,
    w: Writer<'o>,
    colour: bool,
    list_start: Option<u64>,
    inline: Vec<Span>,
    strong: u32,
    emph: u32,
    strike: u32,
    heading: Option<HeadingLevel>,
    /// Open links: destination and where their text starts in `inline`.
    links: Vec<(String, usize)>,
    lists: Vec<ListLevel>,
    table: Option<Table>,
    code: Option<Code>,
    last_end: Option<usize>,
    next_ordered: Option<u64>,
    /// Coloured code bytes left for this answer.
    budget: usize,
}

/// Source lines between two blocks that are blank (quote markers aside):
/// only whole lines count, not the rest of the previous block's last line
/// nor the container markers before the next block.
fn blank_lines_between(src: &str, from: usize, to: usize) -> usize {
    if from >= to || to > src.len() {
        return 0;
    }
    let mut s = &src[from..to];
    if from > 0 && src.as_bytes()[from - 1] != b'\n' {
        match s.find('\n') {
            Some(i) => s = &s[i + 1..],
            None => return 0,
        }
    }
    s.split_inclusive('\n')
        .filter(|l| l.ends_with('\n') && l.trim_matches([' ', '\t', '>', '\n']).is_empty())
        .count()
}

impl Seg<'_, '_> {
    fn paint(&self) -> Paint {
        let mut p = Paint {
            bold: self.strong > 0,
            italic: self.emph > 0,
            strike: self.strike > 0,
            ..Paint::default()
        };
        if let Some(level) = self.heading {
            p.bold = true;
            match level {
                HeadingLevel::H1 => {
                    p.underline = true;
                    p.fg = Some(MAGENTA);
                }
                HeadingLevel::H2 => p.fg = Some(MAGENTA),
                HeadingLevel::H3 => p.fg = Some(CYAN),
                _ => {}
            }
        }
        if !self.links.is_empty() {
            p.fg = Some(BLUE);
            p.underline = true;
        }
        p
    }

    fn text(&mut self, t: &str, paint: Paint) {
        let t = crate::text::visible(t);
        push_span(&mut self.inline, &t, paint);
    }

    /// Blank source lines before a block at `start`, shown as blank lines.
    fn block_start(&mut self, start: usize) {
        self.flush_inline();
        if let Some(end) = self.last_end {
            for _ in 0..blank_lines_between(self.src, end, start) {
                self.w.blank();
            }
        }
        self.last_end = Some(start);
    }

    /// Wraps and writes the collected inline text as a paragraph.
    fn flush_inline(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.inline);
        let avail = self.w.avail();
        for line in wrap(&spans, avail) {
            self.w.line(&line);
        }
    }

    fn event(&mut self, ev: Event<'_>, range: std::ops::Range<usize>) {
        if self.table.is_some()
            && !matches!(
                ev,
                Event::Start(Tag::Table(_) | Tag::TableHead | Tag::TableRow | Tag::TableCell)
                    | Event::End(
                        TagEnd::Table | TagEnd::TableHead | TagEnd::TableRow | TagEnd::TableCell
                    )
            )
        {
            // Cell content is inline only; it is laid out when the table ends.
            self.inline_event(ev, &range);
            return;
        }
        match ev {
            Event::Start(tag) => self.start(tag, range),
            Event::End(tag) => self.end(tag, range),
            Event::Rule => {
                self.block_start(range.start);
                let n = self.w.avail();
                let (c, paint) = if self.colour {
                    ('─', Paint::fg(GREY))
                } else {
                    ('-', Paint::default())
                };
                self.w.line(&[(std::iter::repeat_n(c, n).collect(), paint)]);
                self.last_end = Some(range.end);
            }
            Event::Text(t) if self.code.is_some() => self.code_text(&t),
            ev => self.inline_event(ev, &range),
        }
    }

    fn inline_event(&mut self, ev: Event<'_>, range: &std::ops::Range<usize>) {
        match ev {
            Event::Start(tag) => self.start_inline(tag),
            Event::End(tag) => self.end_inline(tag),
            Event::Text(t) => {
                let p = self.paint();
                self.text(&t, p);
            }
            Event::Code(t) => {
                if self.colour {
                    let mut p = self.paint();
                    p.fg = Some(CYAN);
                    self.text(&t, p);
                } else {
                    self.text(&format!("`{t}`"), Paint::default());
                }
            }
            // A single newline inside a paragraph stays a line break: models
            // write a sentence or a list-like run per line and mean it to be
            // read that way, as a plain-text view would show it.
            Event::SoftBreak => push_span(&mut self.inline, "\n", Paint::default()),
            Event::HardBreak => push_span(&mut self.inline, "\n", Paint::default()),
            Event::Html(t) | Event::InlineHtml(t) => {
                let t = t.trim_end_matches('\n');
                let p = if self.code.is_none() && self.heading.is_none() {
                    Paint::fg(GREY)
                } else {
                    self.paint()
                };
                self.text(t, p);
                if ends_line(range, self.src) {
                    push_span(&mut self.inline, "\n", Paint::default());
                }
            }
            Event::TaskListMarker(done) => {
                let mark = match (self.colour, done) {
                    (true, true) => "☑ ",
                    (true, false) => "☐ ",
                    (false, true) => "[x] ",
                    (false, false) => "[ ] ",
                };
                push_span(&mut self.inline, mark, Paint::default());
            }
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]"), Paint::default()),
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                let p = self.paint();
                self.text(&t, p);
            }
            Event::Rule => {}
        }
        self.last_end = Some(range.end.max(self.last_end.unwrap_or(0)));
    }

    fn start_inline(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Emphasis => self.emph += 1,
            Tag::Strong => self.strong += 1,
            Tag::Strikethrough => {
                self.strike += 1;
                if !self.colour {
                    push_span(&mut self.inline, "~~", Paint::default());
                }
            }
            Tag::Link { dest_url, .. } => {
                self.links.push((dest_url.to_string(), self.inline.len()));
            }
            Tag::Image { dest_url, .. } => {
                self.links.push((dest_url.to_string(), self.inline.len()));
                push_span(&mut self.inline, "[image: ", Paint::default());
            }
            _ => {}
        }
    }

    fn end_inline(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Emphasis => self.emph = self.emph.saturating_sub(1),
            TagEnd::Strong => self.strong = self.strong.saturating_sub(1),
            TagEnd::Strikethrough => {
                self.strike = self.strike.saturating_sub(1);
                if !self.colour {
                    push_span(&mut self.inline, "~~", Paint::default());
                }
            }
            TagEnd::Link | TagEnd::Image => {
                let Some((dest, from)) = self.links.pop() else {
                    return;
                };
                if tag == TagEnd::Image {
                    push_span(&mut self.inline, "]", Paint::default());
                }
                let shown: String = self.inline[from.min(self.inline.len())..]
                    .iter()
                    .map(|(t, _)| t.as_str())
                    .collect();
                let bare = dest.strip_prefix("mailto:").unwrap_or(&dest);
                if !dest.is_empty() && shown != dest && shown != bare {
                    let p = if self.colour {
                        Paint::fg(GREY)
                    } else {
                        Paint::default()
                    };
                    self.text(&format!(" ({dest})"), p);
                }
            }
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>, range: std::ops::Range<usize>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.block_start(range.start),
            Tag::Heading { level, .. } => {
                self.block_start(range.start);
                self.heading = Some(level);
                if !self.colour {
                    let marks = "#".repeat(level as usize);
                    self.w.prefixes.push(Prefix {
                        first: vec![(format!("{marks} "), Paint::default())],
                        rest: vec![(" ".repeat(marks.len() + 1), Paint::default())],
                        width: marks.len() + 1,
                        used: false,
                    });
                }
            }
            Tag::BlockQuote(_) => {
                self.block_start(range.start);
                let bar = if self.colour {
                    ("│ ".to_string(), Paint::fg(GREY))
                } else {
                    ("> ".to_string(), Paint::default())
                };
                self.w.prefixes.push(Prefix {
                    first: vec![bar.clone()],
                    rest: vec![bar],
                    width: 2,
                    used: false,
                });
            }
            Tag::CodeBlock(kind) => {
                self.block_start(range.start);
                let info = match &kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.w.line(&fence_line(&info));
                let hl = self.colour.then(|| Highlighter::new(fence_lang(&info)));
                self.code = Some(Code {
                    hl,
                    pending: String::new(),
                });
            }
            Tag::List(start) => {
                self.block_start(range.start);
                let start = match (start, self.lists.is_empty(), self.list_start.take()) {
                    (Some(_), true, Some(over)) => Some(over),
                    (s, _, _) => s,
                };
                self.lists.push(ListLevel { next: start });
            }
            Tag::Item => {
                self.block_start(range.start);
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut().and_then(|l| l.next.as_mut()) {
                    Some(n) => {
                        let m = format!("{n}.");
                        *n += 1;
                        m
                    }
                    None if self.colour => ["•", "◦", "▪"][depth % 3].to_string(),
                    None => "-".to_string(),
                };
                let width = text_width(&marker) + 1;
                let paint = if self.colour {
                    Paint::fg(GREY)
                } else {
                    Paint::default()
                };
                self.w.prefixes.push(Prefix {
                    first: vec![(format!("{marker} "), paint)],
                    rest: vec![(" ".repeat(width), Paint::default())],
                    width,
                    used: false,
                });
            }
            Tag::Table(aligns) => {
                self.block_start(range.start);
                self.table = Some(Table {
                    aligns,
                    head: Vec::new(),
                    rows: Vec::new(),
                    row: Vec::new(),
                });
            }
            Tag::TableHead | Tag::TableRow | Tag::TableCell => {}
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.block_start(range.start),
            inline => self.start_inline(inline),
        }
    }

    fn end(&mut self, tag: TagEnd, range: std::ops::Range<usize>) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => {
                self.flush_inline();
                self.last_end = Some(range.end);
            }
            TagEnd::Heading(_) => {
                self.flush_inline();
                self.heading = None;
                if !self.colour {
                    self.w.prefixes.pop();
                }
                self.last_end = Some(range.end);
            }
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.w.prefixes.pop();
            }
            TagEnd::CodeBlock => {
                if let Some(mut code) = self.code.take() {
                    if !code.pending.is_empty() {
                        let rest = std::mem::take(&mut code.pending);
                        self.code_line(&mut code, &rest);
                    }
                }
                self.w.line(&fence_line(""));
                self.last_end = Some(range.end);
            }
            TagEnd::List(_) => {
                self.flush_inline();
                if let Some(level) = self.lists.pop() {
                    if self.lists.is_empty() {
                        self.next_ordered = level.next;
                    }
                }
            }
            TagEnd::Item => {
                self.flush_inline();
                if let Some(p) = self.w.prefixes.pop() {
                    if !p.used {
                        // An empty item still shows its marker.
                        self.w.prefixes.push(p);
                        self.w.line(&[]);
                        self.w.prefixes.pop();
                    }
                }
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.inline);
                if let Some(t) = &mut self.table {
                    t.row.push(cell);
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.head = std::mem::take(&mut t.row);
                }
            }
            TagEnd::TableRow => {
                if let Some(t) = &mut self.table {
                    let row = std::mem::take(&mut t.row);
                    t.rows.push(row);
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.table(t);
                }
                self.last_end = Some(range.end);
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.flush_inline(),
            inline => self.end_inline(inline),
        }
    }

    fn code_text(&mut self, t: &str) {
        let Some(mut code) = self.code.take() else {
            return;
        };
        code.pending.push_str(t);
        while let Some(i) = code.pending.find('\n') {
            let line: String = code.pending.drain(..=i).collect();
            self.code_line(&mut code, &line[..i]);
        }
        self.code = Some(code);
    }

    fn code_line(&mut self, code: &mut Code, line: &str) {
        let avail = self.w.avail();
        for l in code_lines(code.hl.as_mut(), line, avail, &mut self.budget) {
            self.w.line(&l);
        }
    }

    fn table(&mut self, t: Table) {
        let cols = t
            .rows
            .iter()
            .map(Vec::len)
            .chain([t.head.len(), t.aligns.len()])
            .max()
            .unwrap_or(0);
        if cols == 0 {
            return;
        }
        let bold = Paint {
            bold: true,
            ..Paint::default()
        };
        let mut head = t.head;
        if self.colour {
            for (_, p) in head.iter_mut().flatten() {
                p.bold = true;
            }
        }
        let natural: Vec<usize> = (0..cols)
            .map(|c| {
                std::iter::once(&head)
                    .chain(t.rows.iter())
                    .filter_map(|r| r.get(c))
                    .map(|cell| {
                        wrap(cell, usize::MAX)
                            .iter()
                            .map(|l| spans_width(l))
                            .max()
                            .unwrap_or(0)
                    })
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let avail = self.w.avail();
        let overhead = 3 * cols + 1;
        let Some(widths) = fit_columns(&natural, avail.saturating_sub(overhead)) else {
            self.records(&head, &t.rows, bold);
            return;
        };
        let colour = self.colour;
        let border = |l: &str, m: &str, r: &str| -> Vec<Span> {
            let mut s = String::from(l);
            for (i, w) in widths.iter().enumerate() {
                if i > 0 {
                    s.push_str(m);
                }
                s.extend(std::iter::repeat_n(if colour { '─' } else { '-' }, w + 2));
            }
            s.push_str(r);
            vec![(s, Paint::fg(GREY))]
        };
        if colour {
            self.w.line(&border("┌", "┬", "┐"));
        }
        self.table_row(&head, &widths, &t.aligns);
        if colour {
            self.w.line(&border("├", "┼", "┤"));
        } else {
            self.w.line(&border("|", "|", "|"));
        }
        for row in &t.rows {
            self.table_row(row, &widths, &t.aligns);
        }
        if colour {
            self.w.line(&border("└", "┴", "┘"));
        }
    }

    fn table_row(&mut self, row: &[Vec<Span>], widths: &[usize], aligns: &[Alignment]) {
        let bar = if self.colour { "│" } else { "|" };
        let empty = Vec::new();
        let cells: Vec<Vec<Vec<Span>>> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| wrap(row.get(i).unwrap_or(&empty), *w))
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for l in 0..height {
            let mut line: Vec<Span> = Vec::new();
            for (i, w) in widths.iter().enumerate() {
                push_span(&mut line, &format!("{bar} "), Paint::fg(GREY));
                let content = cells[i].get(l).map(Vec::as_slice).unwrap_or(&[]);
                let pad = w.saturating_sub(spans_width(content));
                let (left, right) = match aligns.get(i) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                push_span(&mut line, &" ".repeat(left), Paint::default());
                for (t, p) in content {
                    push_span(&mut line, t, *p);
                }
                push_span(&mut line, &" ".repeat(right + 1), Paint::default());
            }
            push_span(&mut line, bar, Paint::fg(GREY));
            self.w.line(&line);
        }
    }

    /// A table too wide for the screen: each row as `header: value` lines.
    fn records(&mut self, head: &[Vec<Span>], rows: &[Vec<Vec<Span>>], bold: Paint) {
        let avail = self.w.avail();
        for (n, row) in rows.iter().enumerate() {
            if n > 0 {
                self.w.blank();
            }
            for (i, cell) in row.iter().enumerate() {
                let mut spans: Vec<Span> = head.get(i).cloned().unwrap_or_default();
                if spans.is_empty() {
                    spans.push((format!("{}", i + 1), bold));
                }
                push_span(
                    &mut spans,
                    ": ",
                    if self.colour { bold } else { Paint::default() },
                );
                spans.extend(cell.iter().cloned());
                for line in wrap(&spans, avail) {
                    self.w.line(&line);
                }
            }
        }
    }
}

/// Whether an HTML event ends its line in the source (block HTML keeps its
/// line structure; inline HTML flows with the text).
fn ends_line(range: &std::ops::Range<usize>, src: &str) -> bool {
    src.get(range.clone()).is_some_and(|s| s.ends_with('\n'))
}

/// Column widths that fit `target` columns of content: wide columns give up
/// space first (each capped at a common limit), or `None` when even
/// `MIN_COLUMN` each does not fit.
fn fit_columns(natural: &[usize], target: usize) -> Option<Vec<usize>> {
    if natural.iter().sum::<usize>() <= target {
        return Some(natural.to_vec());
    }
    let floor: usize = natural.iter().map(|n| (*n).min(MIN_COLUMN)).sum();
    if floor > target {
        return None;
    }
    // Largest cap L with sum(min(n, L)) <= target, by bisection.
    let (mut lo, mut hi) = (
        MIN_COLUMN,
        natural.iter().copied().max().unwrap_or(MIN_COLUMN),
    );
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if natural.iter().map(|n| (*n).min(mid)).sum::<usize>() <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut widths: Vec<usize> = natural.iter().map(|n| (*n).min(lo)).collect();
    let mut spare = target.saturating_sub(widths.iter().sum());
    for (w, n) in widths.iter_mut().zip(natural) {
        if spare == 0 {
            break;
        }
        if *w < *n {
            *w += 1;
            spare -= 1;
        }
    }
    Some(widths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Vec<Span>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.iter().map(|(t, _)| t.as_str()).collect())
            .collect()
    }

    fn text(s: &str) -> Vec<Span> {
        vec![(s.to_string(), Paint::default())]
    }

    #[test]
    fn wrap_breaks_at_spaces_within_width() {
        let lines = wrap(&text("the quick brown fox jumps over"), 10);
        assert_eq!(plain(&lines), ["the quick", "brown fox", "jumps over"]);
    }

    #[test]
    fn wrap_counts_wide_characters_as_two_columns() {
        // Six CJK characters are 12 columns: they cannot share a 10-column line.
        let lines = wrap(&text("漢字漢字漢字 ok"), 10);
        assert_eq!(plain(&lines), ["漢字漢字漢", "字 ok"]);
        for l in &lines {
            assert!(spans_width(l) <= 10);
        }
    }

    #[test]
    fn wrap_keeps_styles_across_the_break() {
        let bold = Paint {
            bold: true,
            ..Paint::default()
        };
        let spans = vec![
            ("aaa ".to_string(), Paint::default()),
            ("bbb ccc".to_string(), bold),
        ];
        let lines = wrap(&spans, 7);
        assert_eq!(plain(&lines), ["aaa bbb", "ccc"]);
        assert_eq!(lines[1], vec![("ccc".to_string(), bold)]);
    }

    #[test]
    fn columns_shrink_widest_first_or_give_up() {
        assert_eq!(fit_columns(&[5, 5], 20), Some(vec![5, 5]));
        assert_eq!(fit_columns(&[3, 40], 20), Some(vec![3, 17]));
        assert_eq!(fit_columns(&[30, 30, 2], 22), Some(vec![10, 10, 2]));
        assert_eq!(fit_columns(&[30, 30, 30], 6), None);
    }

    #[test]
    fn blank_lines_count_whole_lines_only() {
        let src = "a\n\n\nb";
        assert_eq!(blank_lines_between(src, 1, 4), 2);
        assert_eq!(blank_lines_between(src, 2, 4), 2);
        assert_eq!(blank_lines_between("> a\n>\n> b", 3, 9), 1);
        assert_eq!(blank_lines_between("a\nb", 1, 2), 0);
    }
}
