//! Markdown answers as HTML for the web page (`buddy serve`), safe to put
//! into a page whatever the model wrote.
//!
//! The writer is the safety boundary, so it is ours and small: it walks
//! pulldown-cmark's events (the same parser and options as the terminal
//! renderer) and writes only the handful of tags it knows, every one without
//! attributes except those it makes itself. Nothing from the source reaches
//! the output unescaped:
//!
//! - raw HTML, inline or as a block, is shown as the text it is (escaped),
//!   never passed through: `<script>` and `<img onerror=…>` read as typed;
//! - links keep their `href` only for `http:`, `https:` and `mailto:`; any
//!   other destination (`javascript:`, `data:`, relative paths) leaves the
//!   link's text alone;
//! - images are never loaded (a model could be talked into sending data out
//!   through an image URL): they become a link to the image with its alt text;
//! - control characters are made visible (`crate::text::visible`) as in the
//!   terminal, and code is coloured by the terminal's own lexer
//!   (`highlight.rs`), each colour a class (`hl-31`…), never a style
//!   attribute, so a strict Content-Security-Policy holds.
//!
//! Owns the HTML only; bounding the input is the caller's job (the writer is
//! linear in it, and colours at most [`HIGHLIGHT_BUDGET`] bytes of code).

use super::highlight::Highlighter;
use super::render::{fence_lang, Paint, HIGHLIGHT_BUDGET};
use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// `markdown` as an HTML fragment (no `<html>` or `<body>`).
pub fn to_html(markdown: &str) -> String {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    let mut w = Writer {
        out: String::with_capacity(markdown.len() + markdown.len() / 2),
        code: None,
        budget: HIGHLIGHT_BUDGET,
        links: Vec::new(),
        table: Vec::new(),
        cell: 0,
        in_head: false,
        image_alt: None,
    };
    for ev in Parser::new_ext(markdown, opts) {
        w.event(ev);
    }
    w.out
}

struct Writer {
    out: String,
    /// The code block being written: its lexer, and the text of a line not
    /// yet complete (the parser may hand a line over in pieces).
    code: Option<(Option<Highlighter>, String)>,
    /// Bytes of code that may still be coloured.
    budget: usize,
    /// For each open link: whether an `<a>` was written for it.
    links: Vec<bool>,
    /// The open table's column alignments.
    table: Vec<Alignment>,
    /// The column of the next cell.
    cell: usize,
    in_head: bool,
    /// Inside an image: its destination (if shown) and the alt text so far.
    image_alt: Option<(Option<String>, String)>,
}

impl Writer {
    fn event(&mut self, ev: Event<'_>) {
        if let Some((_, alt)) = &mut self.image_alt {
            // An image's alt text is plain text, whatever markup it holds.
            match ev {
                Event::End(TagEnd::Image) => self.end_image(),
                Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                    alt.push_str(&t)
                }
                _ => {}
            }
            return;
        }
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => {
                if self.code.is_some() {
                    self.code_text(&t);
                } else {
                    self.text(&t);
                }
            }
            Event::Code(t) => {
                self.out.push_str("<code>");
                self.text(&t);
                self.out.push_str("</code>");
            }
            // Raw HTML from the source is text, never markup.
            Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            Event::FootnoteReference(t) => {
                self.out.push('[');
                self.text(&t);
                self.out.push(']');
            }
            Event::SoftBreak => self.out.push('\n'),
            Event::HardBreak => self.out.push_str("<br>\n"),
            Event::Rule => self.out.push_str("<hr>\n"),
            Event::TaskListMarker(done) => {
                self.out.push_str(if done { "☑ " } else { "☐ " });
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.out.push_str("<p>"),
            Tag::Heading { level, .. } => {
                self.out.push_str(&format!("<h{}>", heading(level)));
            }
            Tag::BlockQuote(_) => self.out.push_str("<blockquote>\n"),
            Tag::CodeBlock(kind) => {
                let lang = match &kind {
                    CodeBlockKind::Fenced(info) => fence_lang(info).to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.out.push_str("<pre><code");
                if !lang.is_empty() {
                    // A class name the page can style; only safe characters.
                    let clean: String = lang
                        .chars()
                        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
                        .take(32)
                        .collect();
                    if !clean.is_empty() {
                        self.out.push_str(" class=\"language-");
                        self.out.push_str(&clean);
                        self.out.push('"');
                    }
                }
                self.out.push('>');
                let hl = (!lang.is_empty()).then(|| Highlighter::new(&lang));
                self.code = Some((hl, String::new()));
            }
            // The block's raw HTML comes as text events, shown as typed.
            Tag::HtmlBlock => self.out.push_str("<p class=\"raw\">"),
            Tag::List(Some(1)) => self.out.push_str("<ol>\n"),
            Tag::List(Some(n)) => self.out.push_str(&format!("<ol start=\"{n}\">\n")),
            Tag::List(None) => self.out.push_str("<ul>\n"),
            Tag::Item => self.out.push_str("<li>"),
            Tag::Table(align) => {
                self.table = align;
                self.out.push_str("<table>\n");
            }
            Tag::TableHead => {
                self.in_head = true;
                self.cell = 0;
                self.out.push_str("<thead><tr>");
            }
            Tag::TableRow => {
                self.cell = 0;
                self.out.push_str("<tr>");
            }
            Tag::TableCell => {
                let el = if self.in_head { "th" } else { "td" };
                self.out.push('<');
                self.out.push_str(el);
                match self.table.get(self.cell) {
                    Some(Alignment::Left) => self.out.push_str(" class=\"al-l\""),
                    Some(Alignment::Center) => self.out.push_str(" class=\"al-c\""),
                    Some(Alignment::Right) => self.out.push_str(" class=\"al-r\""),
                    _ => {}
                }
                self.out.push('>');
                self.cell += 1;
            }
            Tag::Emphasis => self.out.push_str("<em>"),
            Tag::Strong => self.out.push_str("<strong>"),
            Tag::Strikethrough => self.out.push_str("<del>"),
            Tag::Superscript => self.out.push_str("<sup>"),
            Tag::Subscript => self.out.push_str("<sub>"),
            Tag::Link { dest_url, .. } => {
                let shown = safe_url(&dest_url);
                if let Some(url) = shown {
                    self.out.push_str("<a href=\"");
                    self.out.push_str(&escape(url));
                    self.out
                        .push_str("\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
                }
                self.links.push(shown.is_some());
            }
            Tag::Image { dest_url, .. } => {
                let url = safe_url(&dest_url).map(str::to_string);
                self.image_alt = Some((url, String::new()));
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition => self.out.push_str("<div>"),
            Tag::MetadataBlock(_) => self.out.push_str("<pre>"),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.out.push_str("</p>\n"),
            TagEnd::Heading(level) => {
                self.out.push_str(&format!("</h{}>\n", heading(level)));
            }
            TagEnd::BlockQuote(_) => self.out.push_str("</blockquote>\n"),
            TagEnd::CodeBlock => {
                if let Some((hl, rest)) = self.code.take() {
                    let mut hl = hl;
                    if !rest.is_empty() {
                        self.code_line(hl.as_mut(), &rest);
                    }
                }
                self.out.push_str("</code></pre>\n");
            }
            TagEnd::HtmlBlock => self.out.push_str("</p>\n"),
            TagEnd::List(true) => self.out.push_str("</ol>\n"),
            TagEnd::List(false) => self.out.push_str("</ul>\n"),
            TagEnd::Item => self.out.push_str("</li>\n"),
            TagEnd::Table => {
                self.out.push_str("</tbody></table>\n");
                self.table.clear();
            }
            TagEnd::TableHead => {
                self.in_head = false;
                self.out.push_str("</tr></thead><tbody>\n");
            }
            TagEnd::TableRow => self.out.push_str("</tr>\n"),
            TagEnd::TableCell => self
                .out
                .push_str(if self.in_head { "</th>" } else { "</td>" }),
            TagEnd::Emphasis => self.out.push_str("</em>"),
            TagEnd::Strong => self.out.push_str("</strong>"),
            TagEnd::Strikethrough => self.out.push_str("</del>"),
            TagEnd::Superscript => self.out.push_str("</sup>"),
            TagEnd::Subscript => self.out.push_str("</sub>"),
            TagEnd::Link => {
                if self.links.pop() == Some(true) {
                    self.out.push_str("</a>");
                }
            }
            TagEnd::Image => self.end_image(),
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition => self.out.push_str("</div>\n"),
            TagEnd::MetadataBlock(_) => self.out.push_str("</pre>\n"),
        }
    }

    /// An image as a link to it (never loaded), labelled with its alt text.
    fn end_image(&mut self) {
        let Some((url, alt)) = self.image_alt.take() else {
            return;
        };
        let label = if alt.trim().is_empty() {
            "image".to_string()
        } else {
            alt
        };
        match url {
            Some(url) => {
                self.out.push_str("<a class=\"image\" href=\"");
                self.out.push_str(&escape(&url));
                self.out
                    .push_str("\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
                self.text(&format!("[{label}]"));
                self.out.push_str("</a>");
            }
            None => self.text(&format!("[{label}]")),
        }
    }

    /// Prose text: made visible, then escaped.
    fn text(&mut self, t: &str) {
        self.out.push_str(&escape(&crate::text::visible(t)));
    }

    /// Code text: complete lines are coloured as they come; a partial line
    /// waits for the rest (the lexer's state runs line by line).
    fn code_text(&mut self, t: &str) {
        let Some((mut hl, mut pending)) = self.code.take() else {
            return;
        };
        pending.push_str(t);
        let mut rest = pending.as_str();
        while let Some(i) = rest.find('\n') {
            self.code_line(hl.as_mut(), &rest[..i]);
            self.out.push('\n');
            rest = &rest[i + 1..];
        }
        let left = rest.to_string();
        self.code = Some((hl, left));
    }

    fn code_line(&mut self, hl: Option<&mut Highlighter>, line: &str) {
        let line = crate::text::visible(line);
        match hl {
            Some(h) if self.budget >= line.len() => {
                self.budget -= line.len();
                for (text, paint) in h.line(&line) {
                    match class_of(paint) {
                        Some(class) => {
                            self.out.push_str("<span class=\"");
                            self.out.push_str(&class);
                            self.out.push_str("\">");
                            self.out.push_str(&escape(&text));
                            self.out.push_str("</span>");
                        }
                        None => self.out.push_str(&escape(&text)),
                    }
                }
            }
            _ => {
                // Past the budget the rest of the answer's code is plain, as
                // on the terminal.
                self.budget = 0;
                self.out.push_str(&escape(&line));
            }
        }
    }
}

fn heading(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// The classes for a lexer colour: `hl-N` for the terminal's SGR colour N
/// (the page gives each a light and a dark shade), `hl-b` for bold.
fn class_of(p: Paint) -> Option<String> {
    let mut classes = Vec::new();
    if let Some(fg) = p.fg {
        classes.push(format!("hl-{fg}"));
    }
    if p.bold {
        classes.push("hl-b".to_string());
    }
    (!classes.is_empty()).then(|| classes.join(" "))
}

/// A link destination the page may point at: web and mail addresses only.
fn safe_url(url: &str) -> Option<&str> {
    let url = url.trim();
    let scheme = url.split_once(':')?.0.to_ascii_lowercase();
    (matches!(scheme.as_str(), "http" | "https" | "mailto") && !url.chars().any(char::is_control))
        .then_some(url)
}

/// `s` with the five characters that mean something in HTML text or a
/// quoted attribute replaced by their entities.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_script_are_shown_as_text() {
        let html =
            to_html("<script>alert(1)</script>\n\nand <img src=x onerror=alert(2)> inline\n");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(2)&gt;"),
            "{html}"
        );
    }

    #[test]
    fn a_table_becomes_a_table_with_its_alignments() {
        let html = to_html("| Name | Size |\n|:--|--:|\n| a <b> | 1 |\n");
        assert!(html.starts_with("<table>"), "{html}");
        assert!(
            html.contains(
                "<thead><tr><th class=\"al-l\">Name</th><th class=\"al-r\">Size</th></tr></thead>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<td class=\"al-l\">a &lt;b&gt;</td><td class=\"al-r\">1</td>"),
            "{html}"
        );
        assert!(html.trim_end().ends_with("</tbody></table>"), "{html}");
    }

    #[test]
    fn lists_emphasis_and_inline_code() {
        let html = to_html("1. **one**\n2. `x<y`\n\n3) *three*\n- [x] done\n");
        assert!(
            html.contains("<ol>\n<li><strong>one</strong></li>"),
            "{html}"
        );
        assert!(html.contains("<code>x&lt;y</code>"), "{html}");
        assert!(html.contains("<ol start=\"3\">"), "{html}");
        assert!(html.contains("<ul>\n<li>☑ done</li>"), "{html}");
    }

    #[test]
    fn code_is_coloured_by_the_terminal_lexer_as_classes() {
        let html = to_html("```rust\nfn main() { let s = \"<hi>\"; } // done\n```\n");
        assert!(
            html.starts_with("<pre><code class=\"language-rust\">"),
            "{html}"
        );
        // Magenta keywords, green strings, grey comments: the terminal's SGR
        // colours, as classes.
        assert!(html.contains("<span class=\"hl-35\">fn</span>"), "{html}");
        assert!(
            html.contains("<span class=\"hl-32\">&quot;&lt;hi&gt;&quot;</span>"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"hl-90\">// done</span>"),
            "{html}"
        );
        assert!(!html.contains("style="), "{html}");
        // A diff: additions green, removals red.
        let html = to_html("```diff\n-old\n+new\n```\n");
        assert!(
            html.contains("<span class=\"hl-31\">-old</span>\n<span class=\"hl-32\">+new</span>"),
            "{html}"
        );
        // An unknown language is plain, its text escaped.
        let html = to_html("```nosuch\n<b>x</b>\n```\n");
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;\n</code>"), "{html}");
        assert!(!html.contains("<span"), "{html}");
    }

    #[test]
    fn only_web_links_keep_their_target_and_images_are_not_loaded() {
        let html = to_html("[ok](https://example.com/a?b=\"c\") [bad](javascript:alert(1)) ![pic](https://example.com/p.png \"t\")");
        assert!(
            html.contains("<a href=\"https://example.com/a?b=&quot;c&quot;\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">ok</a>"),
            "{html}"
        );
        assert!(!html.contains("javascript"), "{html}");
        assert!(html.contains(" bad "), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("class=\"image\" href=\"https://example.com/p.png\""),
            "{html}"
        );
        assert!(html.contains(">[pic]</a>"), "{html}");
        let html = to_html("![x](data:image/png;base64,AAAA)");
        assert!(!html.contains("data:"), "{html}");
        assert!(html.contains("[x]"), "{html}");
    }

    #[test]
    fn control_characters_are_made_visible() {
        let html = to_html("red \x1b[31m here\x07 and `\x1b[2J`\n");
        assert!(!html.contains('\x1b') && !html.contains('\x07'), "{html}");
        assert!(html.contains("␛[31m"), "{html}");
    }
}
