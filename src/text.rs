//! Text from outside (models, tools, servers, files) made safe to show on a
//! terminal. A terminal interprets escape sequences, so a model or a command's
//! output could otherwise move the cursor, erase what the user is reading
//! (an approval prompt showing `ls` while `touch evil` runs) or retitle the
//! window. Everything from outside passes through here before it is printed:
//! control characters become visible stand-ins and are never interpreted.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as itself: C0 and C1 controls
/// (escape, carriage return, backspace, bell…), DEL, and the Unicode format
/// characters that reorder or hide text (bidirectional overrides and
/// isolates, the zero-width joiners and spaces used to hide text), and the
/// line and paragraph separators U+2028/U+2029, which terminals draw as
/// nothing at all.
pub fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The visible stand-in for an unsafe character: C0 controls and DEL as their
/// Unicode control pictures (`␛`, `␍`, `␡`), the rest as `<U+202E>`.
fn stand_in(c: char, out: &mut String) {
    match c as u32 {
        n @ 0x00..=0x1F => out.push(char::from_u32(0x2400 + n).unwrap_or('?')),
        0x7F => out.push('\u{2421}'),
        n => out.push_str(&format!("<U+{n:04X}>")),
    }
}

/// `s` with every unsafe character made visible; newlines and tabs kept, and
/// a `\r\n` line end taken as a newline. Borrowed when nothing changes.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if is_unsafe(c) {
            stand_in(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as one visible line of at most `max_chars` characters: whitespace runs
/// (newlines included) become one space, unsafe characters are made visible,
/// and a longer text ends in `…`. For error messages that quote a server.
pub fn one_line(s: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut pending_space = false;
    for c in s.trim().chars() {
        if c.is_whitespace() && !is_unsafe(c) || c == '\r' {
            pending_space = true;
            continue;
        }
        if pending_space {
            out.push(' ');
            count += 1;
            pending_space = false;
        }
        if count >= max_chars {
            out.push('…');
            return out;
        }
        if is_unsafe(c) {
            stand_in(c, &mut out);
        } else {
            out.push(c);
        }
        count += 1;
    }
    out
}

/// `s` cut to at most `max_chars` characters, marked with `…` when cut.
pub fn clip(s: &str, max_chars: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max_chars) {
        None => Cow::Borrowed(s),
        Some((at, _)) => Cow::Owned(format!("{}…", &s[..at])),
    }
}

/// The first `max` bytes of `s` (at a character boundary) and how many
/// bytes were left out.
pub fn head(s: &str, max: usize) -> (&str, usize) {
    if s.len() <= max {
        return (s, 0);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], s.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_visible_and_plain_text_is_borrowed() {
        let cmd = "touch evil # \x1b[1K \x1b[999Dls -la";
        let shown = visible(cmd);
        assert_eq!(shown, "touch evil # ␛[1K ␛[999Dls -la");
        assert!(!shown.contains('\x1b'));
        assert!(matches!(visible("ls -la\n\tok"), Cow::Borrowed(_)));
    }

    #[test]
    fn carriage_returns_bells_and_c1_are_shown() {
        assert_eq!(visible("a\r\nb"), "a\nb");
        assert_eq!(visible("50%\r100%"), "50%␍100%");
        assert_eq!(visible("\x07\x08\x7f"), "␇␈␡");
        assert_eq!(visible("x\u{9b}31m"), "x<U+009B>31m");
        assert_eq!(visible("abc\u{202E}fed"), "abc<U+202E>fed");
        // Line and paragraph separators are drawn as nothing by terminals.
        assert_eq!(visible("a\u{2028}b\u{2029}c"), "a<U+2028>b<U+2029>c");
        // An OSC title change loses its power.
        assert_eq!(visible("\x1b]0;pwned\x07"), "␛]0;pwned␇");
    }

    #[test]
    fn one_line_collapses_trims_and_bounds() {
        assert_eq!(
            one_line("  <html>\n <body>\r\n\x1b[2J oops </body>  ", 100),
            "<html> <body> ␛[2J oops </body>"
        );
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line("", 3), "");
    }

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("héllo", 5), "héllo");
    }
}
