//! Colour decisions and the small text helpers every front end shares.

use super::terminal::Terminal;
use crossterm::style::Stylize;

/// How status text on stderr is painted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour only when config allows it, `NO_COLOR` is unset, stderr is a
    /// terminal and that terminal is not a dumb one (`terminal`, read once).
    pub fn detect(config_color: bool, terminal: &Terminal) -> Style {
        Style {
            color: config_color && terminal.stderr_takes_colour(),
        }
    }

    pub fn plain() -> Style {
        Style { color: false }
    }

    fn paint(
        &self,
        text: &str,
        f: impl Fn(String) -> crossterm::style::StyledContent<String>,
    ) -> String {
        if self.color {
            f(text.to_string()).to_string()
        } else {
            text.to_string()
        }
    }

    pub fn error(&self, t: &str) -> String {
        self.paint(t, |s| s.red().bold())
    }
    pub fn warning(&self, t: &str) -> String {
        self.paint(t, |s| s.yellow().bold())
    }
    pub fn tool(&self, t: &str) -> String {
        self.paint(t, |s| s.yellow())
    }
    pub fn dim(&self, t: &str) -> String {
        self.paint(t, |s| s.dark_grey())
    }
    pub fn accent(&self, t: &str) -> String {
        self.paint(t, |s| s.cyan())
    }
    pub fn actor(&self, t: &str) -> String {
        self.paint(t, |s| s.green().bold())
    }
    /// A line a diff adds.
    pub fn added(&self, t: &str) -> String {
        self.paint(t, |s| s.green())
    }
    /// A line a diff removes.
    pub fn removed(&self, t: &str) -> String {
        self.paint(t, |s| s.red())
    }
}

/// Spinner frames, shared by exec's spinner and the REPL's status line.
pub const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// One line of at most `max` characters: whitespace runs collapsed, `…` when cut.
pub fn preview(text: &str, max: usize) -> String {
    // One line, control characters made visible: a preview is a person's
    // glance at text from a model or a tool, never something to interpret.
    let flat = crate::text::one_line(text, usize::MAX);
    if flat.chars().count() <= max {
        return flat;
    }
    crate::text::clip(&flat, max.saturating_sub(1)).into_owned()
}

/// Display width of text that may hold ANSI colour sequences.
pub fn visible_width(s: &str) -> usize {
    let mut width = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ ... final byte in @..~
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
            continue;
        }
        width += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
    }
    width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_is_one_bounded_line() {
        assert_eq!(preview("a\n b\tc", 10), "a b c");
        assert_eq!(preview("abcdefghij", 5), "abcd…");
        assert_eq!(preview("ééééé", 5), "ééééé");
        assert_eq!(preview("a\x1b]0;title\x07b", 20), "a␛]0;title␇b");
    }

    #[test]
    fn plain_style_adds_no_escape_codes() {
        assert_eq!(Style::plain().error("x"), "x");
        assert!(Style { color: true }.error("x").contains('\u{1b}'));
    }
}
