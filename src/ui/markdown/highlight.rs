//! Syntax colours for code blocks, in the terminal's own 16 ANSI colours so
//! they follow the user's palette (light or dark) instead of a bundled theme.
//!
//! Grammars are syntect's built-in Sublime syntaxes (Rust, Python, JS, shell,
//! JSON, YAML, Go, C/C++, HTML, diff and ~40 more). They are deserialised on
//! the first code block that needs them, never at start-up: `buddy --version`
//! and answers without code pay nothing. TOML has no built-in grammar, so a
//! small line scanner covers it; TypeScript borrows the JavaScript grammar.
//! Colours are picked from the scope stack directly (no syntect theme), which
//! keeps the theme machinery and its dumps out of the binary.

use super::render::{Paint, Span};
use std::sync::OnceLock;
use syntect::parsing::{ParseState, Scope, ScopeStack, ScopeStackOp, SyntaxSet};

// SGR foreground codes.
const RED: u8 = 31;
const GREEN: u8 = 32;
const YELLOW: u8 = 33;
const BLUE: u8 = 34;
const MAGENTA: u8 = 35;
const CYAN: u8 = 36;
const GREY: u8 = 90;

/// Lines longer than this are shown uncoloured: a regex grammar on a
/// minified megabyte line could take seconds, and colour adds little there.
const MAX_HIGHLIGHT_LINE: usize = 4096;

static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();

#[cfg(test)]
thread_local! {
    /// How often this thread asked for the grammars (tests check laziness).
    pub(crate) static SYNTAX_REQUESTS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The built-in grammars, loaded on first use (~370 KB compressed dump).
pub fn syntaxes() -> &'static SyntaxSet {
    #[cfg(test)]
    SYNTAX_REQUESTS.with(|c| c.set(c.get() + 1));
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// Scope prefix → paint; the innermost scope that matches a rule decides.
/// Rules with no colour (operators, punctuation) stop the search so a
/// surrounding scope does not colour them.
fn rules() -> &'static [(Scope, Paint)] {
    static RULES: OnceLock<Vec<(Scope, Paint)>> = OnceLock::new();
    RULES.get_or_init(|| {
        let fg = |c: u8| Paint {
            fg: Some(c),
            ..Paint::default()
        };
        let bold = Paint {
            bold: true,
            ..Paint::default()
        };
        [
            ("comment", fg(GREY)),
            ("punctuation.definition.comment", fg(GREY)),
            ("constant.character.escape", fg(CYAN)),
            ("string.regexp", fg(CYAN)),
            ("string", fg(GREEN)),
            ("constant.numeric", fg(CYAN)),
            ("constant.language", fg(MAGENTA)),
            ("constant", fg(CYAN)),
            ("keyword.operator", Paint::default()),
            ("keyword", fg(MAGENTA)),
            ("storage.type", fg(MAGENTA)),
            ("storage.modifier", fg(MAGENTA)),
            ("storage", fg(MAGENTA)),
            ("entity.name.function", fg(BLUE)),
            ("support.function", fg(BLUE)),
            ("variable.function", fg(BLUE)),
            ("entity.name.tag", fg(BLUE)),
            ("entity.other.attribute-name", fg(YELLOW)),
            ("entity.name", fg(YELLOW)),
            ("support.type", fg(YELLOW)),
            ("support.class", fg(YELLOW)),
            ("variable.language", fg(MAGENTA)),
            ("markup.inserted", fg(GREEN)),
            ("markup.deleted", fg(RED)),
            ("markup.changed", fg(YELLOW)),
            ("meta.diff.range", fg(CYAN)),
            ("meta.diff.header", bold),
            ("meta.diff.index", bold),
            ("markup.heading", bold),
            ("invalid", fg(RED)),
        ]
        .into_iter()
        .filter_map(|(s, p)| Scope::new(s).ok().map(|s| (s, p)))
        .collect()
    })
}

fn paint_for(stack: &ScopeStack) -> Paint {
    let rules = rules();
    for scope in stack.as_slice().iter().rev() {
        if let Some((_, p)) = rules.iter().find(|(r, _)| r.is_prefix_of(*scope)) {
            return *p;
        }
    }
    Paint::default()
}

/// Colours one code block, line by line (grammars carry state across lines,
/// e.g. inside a block comment).
pub struct Highlighter {
    kind: Kind,
}

enum Kind {
    Grammar {
        state: Box<ParseState>,
        stack: ScopeStack,
    },
    Toml,
    Plain,
}

/// The grammar name syntect knows a fence's language tag by, for the tags
/// models commonly write that syntect does not resolve itself.
fn alias(lang: &str) -> &str {
    match lang {
        "ts" | "typescript" | "tsx" | "jsx" | "mjs" | "cjs" | "javascript" | "node" => "js",
        "shell" | "console" | "shellsession" | "zsh" | "ksh" | "sh" | "bash" => "bash",
        "py" | "python3" => "python",
        "golang" => "go",
        "patch" => "diff",
        "yml" => "yaml",
        "c++" | "cxx" | "hpp" => "cpp",
        "htm" | "xhtml" | "svg" => "html",
        "jsonc" | "json5" | "jsonl" => "json",
        other => other,
    }
}

impl Highlighter {
    /// A highlighter for a fence's language tag (`rust`, `py`, `ts`…).
    /// Unknown or empty tags colour nothing and load no grammar.
    pub fn new(lang: &str) -> Highlighter {
        let lang = lang.trim().to_ascii_lowercase();
        let kind = match alias(&lang) {
            "" | "text" | "txt" | "plain" | "plaintext" | "output" => Kind::Plain,
            "toml" | "ini" | "cfg" | "conf" => Kind::Toml,
            tag => {
                let set = syntaxes();
                match set.find_syntax_by_token(tag) {
                    Some(syntax) => Kind::Grammar {
                        state: Box::new(ParseState::new(syntax)),
                        stack: ScopeStack::new(),
                    },
                    None => Kind::Plain,
                }
            }
        };
        Highlighter { kind }
    }

    /// `line` (no newline, already made visible) as coloured pieces.
    pub fn line(&mut self, line: &str) -> Vec<Span> {
        if line.len() > MAX_HIGHLIGHT_LINE {
            return vec![(line.to_string(), Paint::default())];
        }
        match &mut self.kind {
            Kind::Plain => vec![(line.to_string(), Paint::default())],
            Kind::Toml => toml_line(line),
            Kind::Grammar { state, stack } => {
                let with_nl = format!("{line}\n");
                let ops = match state.parse_line(&with_nl, syntaxes()) {
                    Ok(ops) => ops,
                    Err(_) => {
                        // A grammar error is not the user's problem: stop colouring.
                        self.kind = Kind::Plain;
                        return vec![(line.to_string(), Paint::default())];
                    }
                };
                grammar_spans(line, &ops, stack)
            }
        }
    }
}

fn grammar_spans(line: &str, ops: &[(usize, ScopeStackOp)], stack: &mut ScopeStack) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut at = 0;
    let push = |text: &str, paint: Paint, out: &mut Vec<Span>| {
        if text.is_empty() {
            return;
        }
        match out.last_mut() {
            Some((t, p)) if *p == paint => t.push_str(text),
            _ => out.push((text.to_string(), paint)),
        }
    };
    for (pos, op) in ops {
        let pos = (*pos).min(line.len());
        if pos > at && line.is_char_boundary(pos) {
            push(&line[at..pos], paint_for(stack), &mut out);
            at = pos;
        }
        // A bad op (pop on an empty stack) only costs colour, never text.
        let _ = stack.apply(op);
    }
    if at < line.len() {
        push(&line[at..], paint_for(stack), &mut out);
    }
    out
}

/// TOML/INI by hand: comments, `[tables]`, keys, strings, numbers, booleans.
/// Line-local (multi-line strings are shown uncoloured after their first line).
fn toml_line(line: &str) -> Vec<Span> {
    let fg = |c: u8| Paint {
        fg: Some(c),
        ..Paint::default()
    };
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let mut out: Vec<Span> = Vec::new();
    if !indent.is_empty() {
        out.push((indent.to_string(), Paint::default()));
    }
    if trimmed.starts_with('#') || trimmed.starts_with(';') {
        out.push((trimmed.to_string(), fg(GREY)));
        return out;
    }
    if trimmed.starts_with('[') {
        out.push((
            trimmed.to_string(),
            Paint {
                fg: Some(YELLOW),
                bold: true,
                ..Paint::default()
            },
        ));
        return out;
    }
    let (key, value) = match trimmed.find('=') {
        Some(i) if !trimmed[..i].contains(['"', '\'']) || trimmed.starts_with(['"', '\'']) => {
            (&trimmed[..i], &trimmed[i..])
        }
        _ => ("", trimmed),
    };
    if !key.is_empty() {
        out.push((key.to_string(), fg(BLUE)));
    }
    let mut rest = value;
    while !rest.is_empty() {
        let c = rest.chars().next().unwrap_or(' ');
        let (len, paint) = if c == '#' {
            (rest.len(), fg(GREY))
        } else if c == '"' || c == '\'' {
            let end = rest[1..].find(c).map(|i| i + 2).unwrap_or(rest.len());
            (end, fg(GREEN))
        } else if c.is_ascii_alphanumeric() || c == '-' || c == '+' {
            let end = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || "-+_.:".contains(ch)))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            let paint = if word == "true" || word == "false" {
                fg(MAGENTA)
            } else if word.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+') {
                fg(CYAN)
            } else {
                Paint::default()
            };
            (end.max(c.len_utf8()), paint)
        } else {
            (c.len_utf8(), Paint::default())
        };
        let (piece, tail) = rest.split_at(len);
        match out.last_mut() {
            Some((t, p)) if *p == paint => t.push_str(piece),
            _ => out.push((piece.to_string(), paint)),
        }
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coloured(spans: &[Span], text: &str) -> Option<u8> {
        spans
            .iter()
            .find(|(t, _)| t.contains(text))
            .and_then(|(_, p)| p.fg)
    }

    #[test]
    fn rust_keywords_strings_and_comments_get_distinct_colours() {
        let mut h = Highlighter::new("rust");
        let spans = h.line("fn main() { let s = \"hi\"; } // done");
        assert_eq!(coloured(&spans, "fn"), Some(MAGENTA));
        assert_eq!(coloured(&spans, "\"hi\""), Some(GREEN));
        assert_eq!(coloured(&spans, "// done"), Some(GREY));
        let text: String = spans.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(text, "fn main() { let s = \"hi\"; } // done");
    }

    #[test]
    fn state_carries_across_lines() {
        let mut h = Highlighter::new("py");
        h.line("x = \"\"\"start of a");
        let spans = h.line("still inside\"\"\"");
        assert_eq!(coloured(&spans, "still"), Some(GREEN));
    }

    #[test]
    fn common_tags_resolve_to_a_grammar() {
        for tag in [
            "rust", "python", "js", "ts", "sh", "bash", "json", "yaml", "go", "c", "cpp", "html",
            "diff", "java", "ruby", "sql",
        ] {
            assert!(
                matches!(Highlighter::new(tag).kind, Kind::Grammar { .. }),
                "{tag} has no grammar"
            );
        }
        assert!(matches!(Highlighter::new("toml").kind, Kind::Toml));
        assert!(matches!(Highlighter::new("nosuchlang").kind, Kind::Plain));
    }

    #[test]
    fn diff_lines_are_red_and_green() {
        let mut h = Highlighter::new("diff");
        assert_eq!(coloured(&h.line("+added"), "added"), Some(GREEN));
        assert_eq!(coloured(&h.line("-removed"), "removed"), Some(RED));
    }

    #[test]
    fn toml_keys_values_and_tables() {
        let spans = toml_line("name = \"buddy\" # the name");
        assert_eq!(coloured(&spans, "name "), Some(BLUE));
        assert_eq!(coloured(&spans, "\"buddy\""), Some(GREEN));
        assert_eq!(coloured(&spans, "# the name"), Some(GREY));
        assert_eq!(
            coloured(&toml_line("[profile.release]"), "profile"),
            Some(YELLOW)
        );
        assert_eq!(coloured(&toml_line("lto = true"), "true"), Some(MAGENTA));
        assert_eq!(coloured(&toml_line("opt = 3"), "3"), Some(CYAN));
        let text: String = spans.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(text, "name = \"buddy\" # the name");
    }
}
