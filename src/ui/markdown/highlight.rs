//! Syntax colours for code blocks, in the terminal's own 16 ANSI colours so
//! they follow the user's palette (light or dark) instead of a bundled theme.
//!
//! A small hand-written lexer, not a grammar engine: per language a table of
//! keywords, types and constants, comment markers and string delimiters
//! (`Lang`), plus line-based scanners for diff and HTML/XML. It knows nothing
//! of nesting beyond what one state carried between lines needs (inside a
//! block comment, a multi-line string or an HTML tag), which is enough to
//! colour the code models write. Grammar engines cost ~4 MB of binary and a
//! measurable share of every start-up (docs/PERFORMANCE.md); this costs
//! neither. Each byte of a line is looked at a bounded number of times, so
//! untrusted text cannot make it slow. Owns the colouring only: making
//! control characters visible and wrapping stay with the renderer.

use super::paint::{Paint, Span};

// SGR foreground codes, the palette the rest of the renderer uses.
const RED: u8 = 31;
const GREEN: u8 = 32;
const YELLOW: u8 = 33;
const BLUE: u8 = 34;
const MAGENTA: u8 = 35;
const CYAN: u8 = 36;
const GREY: u8 = 90;

const KEYWORD: u8 = MAGENTA;
const STRING: u8 = GREEN;
const ESCAPE: u8 = CYAN;
const COMMENT: u8 = GREY;
const NUMBER: u8 = CYAN;
const CONSTANT: u8 = MAGENTA;
const TYPE: u8 = YELLOW;
const FUNCTION: u8 = BLUE;
const KEY: u8 = BLUE;

fn fg(c: u8) -> Paint {
    Paint {
        fg: Some(c),
        ..Paint::default()
    }
}

/// A string form: what opens and closes it, whether `\` escapes, and whether
/// it may run on past the end of a line (when not, an unclosed one ends
/// there, so a stray quote costs one line of colour, not the rest of the block).
struct Quote {
    open: &'static str,
    close: &'static str,
    escapes: bool,
    multiline: bool,
}

const fn q(open: &'static str, close: &'static str, escapes: bool, multiline: bool) -> Quote {
    Quote {
        open,
        close,
        escapes,
        multiline,
    }
}

/// What the lexer knows of one language.
struct Lang {
    keywords: &'static [&'static str],
    /// Coloured as types (YELLOW), like capitalised names where `caps_are_types`.
    types: &'static [&'static str],
    /// `true`, `null`, `self`…
    constants: &'static [&'static str],
    /// Commands and functions known by name (coloured like calls).
    builtins: &'static [&'static str],
    line_comments: &'static [&'static str],
    block_comment: Option<(&'static str, &'static str)>,
    nested_comments: bool,
    /// Longest opener first: `"""` must be tried before `"`.
    quotes: &'static [Quote],
    /// Words that, right before a quote, belong to the string (`r"…"`, `f'…'`).
    string_prefixes: &'static [&'static str],
    /// Characters allowed inside a name besides letters, digits and `_`.
    ident_extra: &'static str,
    ignore_case: bool,
    caps_are_types: bool,
    /// A name followed by `(` is a function.
    calls: bool,
    /// After these keywords the next name is a function / a type being defined.
    defines_function: &'static [&'static str],
    defines_type: &'static [&'static str],
    /// `#` and friends start a comment only at the start of a word (`$#` is not one).
    comment_needs_space: bool,
    /// Rust: `'a'` is a char, `'a` a lifetime.
    lifetimes: bool,
    /// C: `#include` at the start of a line is a keyword.
    preprocessor: bool,
    /// `@name` (decorators, annotations, CSS at-rules) in this colour.
    at_names: Option<u8>,
    /// A name at the start of a line followed by one of these is a key
    /// (YAML `key:`, TOML `key =`, make `target:`, CSS `color:`).
    key_separators: &'static str,
    /// `[table]` lines are headers (TOML, INI).
    table_headers: bool,
    /// `:name` is a constant (Ruby symbols).
    symbols: bool,
    /// `#fff` is a number (CSS colours).
    hash_numbers: bool,
    /// `name!(` is a macro call (Rust).
    macros: bool,
}

#[rustfmt::skip]
const BASE: Lang = Lang {
    keywords: &[],
    types: &[],
    constants: &[],
    builtins: &[],
    line_comments: &[],
    block_comment: None,
    nested_comments: false,
    quotes: &[],
    string_prefixes: &[],
    ident_extra: "",
    ignore_case: false,
    caps_are_types: false,
    calls: false,
    defines_function: &[],
    defines_type: &[],
    comment_needs_space: false,
    lifetimes: false,
    preprocessor: false,
    at_names: None,
    key_separators: "",
    table_headers: false,
    symbols: false,
    hash_numbers: false,
    macros: false,
};

const C_COMMENT: Option<(&str, &str)> = Some(("/*", "*/"));
const C_QUOTES: &[Quote] = &[q("\"", "\"", true, false), q("'", "'", true, false)];

#[rustfmt::skip]
const RUST: Lang = Lang {
    keywords: &[
        "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern",
        "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
        "ref", "return", "static", "struct", "trait", "type", "unsafe", "use", "where", "while",
        "union", "macro_rules", "yield",
    ],
    types: &[
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
        "f32", "f64", "bool", "char", "str",
    ],
    constants: &["true", "false", "self", "Self", "crate", "super"],
    line_comments: &["//"],
    block_comment: C_COMMENT,
    nested_comments: true,
    // Rust strings may span lines; chars are handled with lifetimes.
    quotes: &[q("\"", "\"", true, true)],
    string_prefixes: &["b", "r", "br", "c", "cr"],
    caps_are_types: true,
    calls: true,
    defines_function: &["fn"],
    defines_type: &["struct", "enum", "trait", "type", "union"],
    lifetimes: true,
    macros: true,
    ..BASE
};

#[rustfmt::skip]
const PYTHON: Lang = Lang {
    keywords: &[
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
        "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with",
        "yield", "match", "case",
    ],
    types: &[
        "int", "float", "str", "bool", "list", "dict", "set", "tuple", "bytes", "object", "type",
    ],
    constants: &["True", "False", "None", "self", "cls"],
    builtins: &["print", "len", "range", "open", "super", "isinstance"],
    line_comments: &["#"],
    quotes: &[
        q("\"\"\"", "\"\"\"", true, true),
        q("'''", "'''", true, true),
        q("\"", "\"", true, false),
        q("'", "'", true, false),
    ],
    string_prefixes: &[
        "r", "b", "f", "u", "rb", "br", "fr", "rf", "R", "B", "F", "U",
    ],
    caps_are_types: true,
    calls: true,
    defines_function: &["def"],
    defines_type: &["class"],
    at_names: Some(FUNCTION),
    ..BASE
};

#[rustfmt::skip]
const JS: Lang = Lang {
    keywords: &[
        "async", "await", "break", "case", "catch", "class", "const", "continue", "debugger",
        "default", "delete", "do", "else", "export", "extends", "finally", "for", "from",
        "function", "if", "import", "in", "instanceof", "let", "new", "of", "return", "static",
        "switch", "throw", "try", "typeof", "var", "void", "while", "with", "yield", "as",
        "interface", "type", "enum", "implements", "declare", "namespace", "keyof", "readonly",
        "private", "protected", "public", "abstract", "satisfies",
    ],
    types: &[
        "string", "number", "boolean", "any", "unknown", "never", "object", "bigint", "symbol",
    ],
    constants: &[
        "true", "false", "null", "undefined", "this", "super", "NaN", "Infinity",
    ],
    line_comments: &["//"],
    block_comment: C_COMMENT,
    quotes: &[
        q("`", "`", true, true),
        q("\"", "\"", true, false),
        q("'", "'", true, false),
    ],
    ident_extra: "$",
    caps_are_types: true,
    calls: true,
    defines_function: &["function"],
    defines_type: &["class", "interface", "type", "enum"],
    at_names: Some(FUNCTION),
    ..BASE
};

#[rustfmt::skip]
const SHELL: Lang = Lang {
    keywords: &[
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do", "done",
        "in", "function", "select", "return", "exit", "break", "continue", "local", "export",
        "readonly", "declare", "unset", "shift", "source", "alias", "set", "trap", "eval", "exec",
    ],
    builtins: &[
        "echo", "printf", "cd", "read", "test", "sudo", "cat", "grep", "sed", "awk", "ls", "mkdir",
        "rm", "cp", "mv", "curl", "git", "cargo", "npm", "pip", "docker", "make",
    ],
    constants: &["true", "false"],
    line_comments: &["#"],
    comment_needs_space: true,
    // Quoted arguments spanning lines are common (`sh -c '…'`).
    quotes: &[q("\"", "\"", true, true), q("'", "'", false, true)],
    ident_extra: "-",
    ..BASE
};

#[rustfmt::skip]
const C: Lang = Lang {
    keywords: &[
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
        "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
        "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
        "union", "unsigned", "void", "volatile", "while", "bool", "class", "namespace", "template",
        "typename", "public", "private", "protected", "virtual", "override", "new", "delete",
        "operator", "using", "try", "catch", "throw", "constexpr", "friend", "explicit",
        "noexcept", "mutable", "static_cast", "const_cast", "dynamic_cast", "reinterpret_cast",
    ],
    types: &[
        "size_t", "ssize_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
        "uint32_t", "uint64_t", "FILE", "std", "string", "vector",
    ],
    constants: &["true", "false", "NULL", "nullptr", "this"],
    line_comments: &["//"],
    block_comment: C_COMMENT,
    quotes: C_QUOTES,
    calls: true,
    defines_type: &["struct", "class", "enum", "union"],
    preprocessor: true,
    ..BASE
};

#[rustfmt::skip]
const GO: Lang = Lang {
    keywords: &[
        "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough",
        "for", "func", "go", "goto", "if", "import", "interface", "map", "package", "range",
        "return", "select", "struct", "switch", "type", "var",
    ],
    types: &[
        "bool", "byte", "complex64", "complex128", "error", "float32", "float64", "int", "int8",
        "int16", "int32", "int64", "rune", "string", "uint", "uint8", "uint16", "uint32", "uint64",
        "uintptr", "any",
    ],
    constants: &["true", "false", "nil", "iota"],
    line_comments: &["//"],
    block_comment: C_COMMENT,
    quotes: &[
        q("`", "`", false, true),
        q("\"", "\"", true, false),
        q("'", "'", true, false),
    ],
    calls: true,
    defines_function: &["func"],
    defines_type: &["type"],
    ..BASE
};

#[rustfmt::skip]
const JAVA: Lang = Lang {
    keywords: &[
        "abstract", "assert", "break", "case", "catch", "class", "continue", "default", "do",
        "else", "enum", "extends", "final", "finally", "for", "if", "implements", "import",
        "instanceof", "interface", "native", "new", "package", "private", "protected", "public",
        "return", "static", "super", "switch", "synchronized", "throw", "throws", "transient",
        "try", "var", "void", "volatile", "while", "record", "yield", "sealed", "permits",
        "boolean", "byte", "char", "double", "float", "int", "long", "short",
    ],
    constants: &["true", "false", "null", "this"],
    line_comments: &["//"],
    block_comment: C_COMMENT,
    quotes: &[
        q("\"\"\"", "\"\"\"", true, true),
        q("\"", "\"", true, false),
        q("'", "'", true, false),
    ],
    caps_are_types: true,
    calls: true,
    defines_type: &["class", "interface", "enum", "record"],
    at_names: Some(FUNCTION),
    ..BASE
};

#[rustfmt::skip]
const SQL: Lang = Lang {
    keywords: &[
        "select", "from", "where", "insert", "into", "values", "update", "set", "delete", "create",
        "table", "drop", "alter", "add", "column", "index", "view", "join", "inner", "left",
        "right", "outer", "full", "cross", "on", "as", "and", "or", "not", "is", "in", "exists",
        "between", "like", "group", "by", "order", "having", "limit", "offset", "union", "all",
        "distinct", "case", "when", "then", "else", "end", "primary", "key", "foreign",
        "references", "default", "unique", "check", "constraint", "begin", "commit", "rollback",
        "transaction", "with", "returning", "asc", "desc", "if", "replace",
    ],
    types: &[
        "int", "integer", "bigint", "smallint", "text", "varchar", "char", "boolean", "date",
        "timestamp", "real", "float", "double", "numeric", "decimal", "serial", "blob", "json",
        "jsonb", "uuid",
    ],
    constants: &["true", "false", "null"],
    line_comments: &["--"],
    block_comment: C_COMMENT,
    quotes: &[q("'", "'", true, false), q("\"", "\"", false, false)],
    ignore_case: true,
    calls: true,
    ..BASE
};

#[rustfmt::skip]
const RUBY: Lang = Lang {
    keywords: &[
        "alias", "and", "begin", "break", "case", "class", "def", "defined", "do", "else", "elsif",
        "end", "ensure", "for", "if", "in", "module", "next", "not", "or", "redo", "rescue",
        "retry", "return", "super", "then", "undef", "unless", "until", "when", "while", "yield",
        "require", "require_relative", "include", "extend", "attr_accessor", "attr_reader",
        "attr_writer",
    ],
    constants: &["true", "false", "nil", "self"],
    builtins: &["puts", "print", "p"],
    line_comments: &["#"],
    quotes: &[q("\"", "\"", true, false), q("'", "'", true, false)],
    caps_are_types: true,
    calls: true,
    defines_function: &["def"],
    defines_type: &["class", "module"],
    symbols: true,
    ..BASE
};

#[rustfmt::skip]
const LUA: Lang = Lang {
    keywords: &[
        "and", "break", "do", "else", "elseif", "end", "for", "function", "goto", "if", "in",
        "local", "not", "or", "repeat", "return", "then", "until", "while",
    ],
    constants: &["true", "false", "nil", "self"],
    line_comments: &["--"],
    // Tried before `--`, so `--[[` opens a block.
    block_comment: Some(("--[[", "]]")),
    quotes: &[
        q("[[", "]]", false, true),
        q("\"", "\"", true, false),
        q("'", "'", true, false),
    ],
    calls: true,
    defines_function: &["function"],
    ..BASE
};

#[rustfmt::skip]
const JSON: Lang = Lang {
    constants: &["true", "false", "null"],
    // JSONC's comments; plain JSON never has them.
    line_comments: &["//"],
    block_comment: C_COMMENT,
    quotes: &[q("\"", "\"", true, false)],
    ..BASE
};

#[rustfmt::skip]
const YAML: Lang = Lang {
    constants: &[
        "true", "false", "null", "yes", "no", "on", "off", "True", "False",
    ],
    line_comments: &["#"],
    comment_needs_space: true,
    quotes: &[q("\"", "\"", true, false), q("'", "'", false, false)],
    ident_extra: "-.",
    key_separators: ":",
    ..BASE
};

#[rustfmt::skip]
const TOML: Lang = Lang {
    constants: &["true", "false"],
    line_comments: &["#", ";"],
    quotes: &[
        q("\"\"\"", "\"\"\"", true, true),
        q("'''", "'''", false, true),
        q("\"", "\"", true, false),
        q("'", "'", false, false),
    ],
    ident_extra: "-.",
    key_separators: "=",
    table_headers: true,
    ..BASE
};

#[rustfmt::skip]
const CSS: Lang = Lang {
    keywords: &["important"],
    block_comment: C_COMMENT,
    quotes: &[q("\"", "\"", true, false), q("'", "'", true, false)],
    ident_extra: "-",
    calls: true,
    at_names: Some(KEYWORD),
    key_separators: ":",
    hash_numbers: true,
    ..BASE
};

#[rustfmt::skip]
const MAKE: Lang = Lang {
    keywords: &[
        "ifeq", "ifneq", "ifdef", "ifndef", "else", "endif", "include", "define", "endef",
        "export", "override", "unexport", "vpath",
    ],
    line_comments: &["#"],
    quotes: &[q("\"", "\"", true, false), q("'", "'", false, false)],
    ident_extra: "-.",
    key_separators: ":=",
    ..BASE
};

#[rustfmt::skip]
const DOCKERFILE: Lang = Lang {
    keywords: &[
        "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
        "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER",
        "AS",
    ],
    line_comments: &["#"],
    comment_needs_space: true,
    quotes: &[q("\"", "\"", true, false), q("'", "'", false, false)],
    ident_extra: "-",
    ..BASE
};

/// The lexer for a fence's language tag, with the aliases models write.
fn lang_for(tag: &str) -> Option<Kind> {
    let lang: &'static Lang = match tag {
        "rust" | "rs" => &RUST,
        "python" | "py" | "python3" | "py3" | "pyi" => &PYTHON,
        "javascript" | "js" | "jsx" | "mjs" | "cjs" | "node" | "typescript" | "ts" | "tsx"
        | "mts" => &JS,
        "sh" | "bash" | "shell" | "zsh" | "ksh" | "console" | "shellsession" | "fish" => &SHELL,
        "c" | "h" | "cpp" | "c++" | "cc" | "cxx" | "hpp" | "hh" | "objc" => &C,
        "go" | "golang" => &GO,
        "java" | "kotlin" | "kt" | "scala" | "csharp" | "cs" | "c#" => &JAVA,
        "sql" | "postgres" | "postgresql" | "mysql" | "sqlite" | "psql" => &SQL,
        "ruby" | "rb" => &RUBY,
        "lua" => &LUA,
        "json" | "jsonc" | "json5" | "jsonl" => &JSON,
        "yaml" | "yml" => &YAML,
        "toml" | "ini" | "cfg" | "conf" => &TOML,
        "css" | "scss" | "less" => &CSS,
        "makefile" | "make" | "mk" => &MAKE,
        "dockerfile" | "docker" | "containerfile" => &DOCKERFILE,
        "diff" | "patch" | "udiff" => return Some(Kind::Diff),
        "html" | "htm" | "xhtml" | "xml" | "svg" | "vue" | "svelte" => {
            return Some(Kind::Markup(Markup::Text))
        }
        _ => return None,
    };
    Some(Kind::Code {
        lang,
        state: State::Normal,
    })
}

/// Colours one code block, line by line (state carries across lines, e.g.
/// inside a block comment).
pub struct Highlighter {
    kind: Kind,
}

enum Kind {
    Code { lang: &'static Lang, state: State },
    Diff,
    Markup(Markup),
    Plain,
}

/// Where a line of code starts.
#[derive(Debug, Clone, PartialEq)]
enum State {
    Normal,
    /// Inside a block comment, `depth` deep (Rust's nest).
    Comment {
        depth: usize,
    },
    /// Inside a string that closes with `close`.
    Str {
        close: String,
        escapes: bool,
    },
}

/// Where a line of HTML/XML starts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Markup {
    Text,
    /// Between a tag's name and its `>`: attributes.
    Tag,
    Comment,
}

impl Highlighter {
    /// A highlighter for a fence's language tag (`rust`, `py`, `ts`…).
    /// Unknown or empty tags colour nothing.
    pub fn new(lang: &str) -> Highlighter {
        let tag = lang.trim().to_ascii_lowercase();
        Highlighter {
            kind: lang_for(&tag).unwrap_or(Kind::Plain),
        }
    }

    /// `line` (no newline, already made visible) as coloured pieces.
    pub fn line(&mut self, line: &str) -> Vec<Span> {
        let mut out = Out::default();
        match &mut self.kind {
            Kind::Plain => out.push(line, Paint::default()),
            Kind::Diff => diff_line(line, &mut out),
            Kind::Markup(state) => markup_line(line, state, &mut out),
            Kind::Code { lang, state } => code_line(lang, state, line, &mut out),
        }
        out.spans
    }
}

/// Spans being built; neighbours with the same paint are merged.
#[derive(Default)]
struct Out {
    spans: Vec<Span>,
}

impl Out {
    fn push(&mut self, text: &str, paint: Paint) {
        if text.is_empty() {
            return;
        }
        match self.spans.last_mut() {
            Some((t, p)) if *p == paint => t.push_str(text),
            _ => self.spans.push((text.to_string(), paint)),
        }
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident(c: char, extra: &str) -> bool {
    c.is_alphanumeric() || c == '_' || extra.contains(c)
}

fn in_list(list: &[&str], word: &str, ignore_case: bool) -> bool {
    if ignore_case {
        list.iter().any(|w| w.eq_ignore_ascii_case(word))
    } else {
        list.contains(&word)
    }
}

/// Length of the name starting `s` (which starts with a name character).
fn ident_len(s: &str, extra: &str) -> usize {
    s.find(|c: char| !is_ident(c, extra)).unwrap_or(s.len())
}

/// Length of the number starting `s`: digits, letters (hex, suffixes,
/// units), `_`, a `.` before a digit, and a sign after an exponent.
fn number_len(s: &str) -> usize {
    let b = s.as_bytes();
    let hex = b.len() > 1 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X');
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next_digit = b.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        let ok = c.is_ascii_alphanumeric()
            || c == b'_'
            || (c == b'.' && next_digit)
            || ((c == b'+' || c == b'-')
                && !hex
                && i > 0
                && (b[i - 1] == b'e' || b[i - 1] == b'E')
                && next_digit);
        if !ok {
            break;
        }
        i += 1;
    }
    i.max(1)
}

fn code_line(lang: &Lang, state: &mut State, line: &str, out: &mut Out) {
    let mut i = 0;
    if *state == State::Normal {
        i = line_start(lang, line, out);
    }
    // After `fn`/`class`…: the paint of the next name.
    let mut pending: Option<u8> = None;
    let first_word = line.len() - line.trim_start().len();
    while i < line.len() {
        let rest = &line[i..];
        match state {
            State::Comment { depth } => {
                i += comment_body(lang, rest, depth, out);
                if *depth == 0 {
                    *state = State::Normal;
                }
                continue;
            }
            State::Str { close, escapes } => {
                let (len, closed) = string_body(rest, close, *escapes, out);
                i += len;
                if closed {
                    *state = State::Normal;
                }
                continue;
            }
            State::Normal => {}
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c.is_whitespace() {
            let n = rest
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(rest.len());
            out.push(&rest[..n], Paint::default());
            i += n;
            continue;
        }
        if let Some((open, _)) = lang.block_comment {
            if rest.starts_with(open) {
                out.push(open, fg(COMMENT));
                i += open.len();
                *state = State::Comment { depth: 1 };
                continue;
            }
        }
        let word_start = i == 0 || line[..i].ends_with(char::is_whitespace);
        if lang
            .line_comments
            .iter()
            .any(|m| rest.starts_with(m) && (word_start || !lang.comment_needs_space))
        {
            out.push(rest, fg(COMMENT));
            break;
        }
        if lang.lifetimes && c == '\'' {
            i += quote_or_lifetime(rest, out);
            continue;
        }
        if let Some(quote) = lang.quotes.iter().find(|q| rest.starts_with(q.open)) {
            out.push(quote.open, fg(STRING));
            i += quote.open.len();
            let (len, closed) = string_body(&line[i..], quote.close, quote.escapes, out);
            i += len;
            if !closed && quote.multiline {
                *state = State::Str {
                    close: quote.close.to_string(),
                    escapes: quote.escapes,
                };
            }
            continue;
        }
        if c.is_ascii_digit() {
            let n = number_len(rest);
            out.push(&rest[..n], fg(NUMBER));
            i += n;
            continue;
        }
        if is_ident_start(c) {
            let n = ident_len(rest, lang.ident_extra);
            let word = &rest[..n];
            let after = &rest[n..];
            i += n;
            if in_list(lang.string_prefixes, word, false)
                && lang.quotes.iter().any(|q| after.starts_with(q.open))
            {
                out.push(word, fg(STRING));
                continue;
            }
            if let Some(len) = raw_string(lang, word, after) {
                // Rust's `r#"…"#`: the closing quote carries the same hashes.
                let hashes = len - 1;
                out.push(word, fg(STRING));
                out.push(&after[..len], fg(STRING));
                i += len;
                let close = format!("\"{}", "#".repeat(hashes));
                let (len, closed) = string_body(&line[i..], &close, false, out);
                i += len;
                if !closed {
                    *state = State::Str {
                        close,
                        escapes: false,
                    };
                }
                continue;
            }
            let paint = word_paint(lang, word, after, pending.take());
            out.push(word, paint);
            if lang.macros && after.starts_with('!') && paint == fg(FUNCTION) {
                out.push("!", paint);
                i += 1;
            }
            if in_list(lang.defines_function, word, lang.ignore_case) {
                pending = Some(FUNCTION);
            } else if in_list(lang.defines_type, word, lang.ignore_case) {
                pending = Some(TYPE);
            }
            continue;
        }
        if let Some(n) = marked_name(lang, c, rest, i <= first_word) {
            let paint = match c {
                '#' if lang.hash_numbers => fg(NUMBER),
                '#' => fg(KEYWORD),
                ':' => fg(CONSTANT),
                _ => fg(lang.at_names.unwrap_or(FUNCTION)),
            };
            out.push(&rest[..n], paint);
            i += n;
            continue;
        }
        out.push(&rest[..c.len_utf8()], Paint::default());
        i += c.len_utf8();
    }
}

/// Indentation, a TOML `[table]` header or a `key:` / `key =` at the start
/// of a line; returns how much of the line it coloured.
fn line_start(lang: &Lang, line: &str, out: &mut Out) -> usize {
    let body = line.trim_start();
    let indent = line.len() - body.len();
    if lang.table_headers && body.starts_with('[') {
        out.push(&line[..indent], Paint::default());
        let header = Paint {
            fg: Some(TYPE),
            bold: true,
            ..Paint::default()
        };
        out.push(body, header);
        return line.len();
    }
    if lang.key_separators.is_empty() {
        return 0;
    }
    // A YAML list item may start with a key: `- name: x`.
    let item = if body.starts_with("- ") { 2 } else { 0 };
    let key_at = indent + item;
    let key = &line[key_at..];
    if !key.starts_with(is_ident_start) {
        return 0;
    }
    let n = ident_len(key, lang.ident_extra);
    let after = key[n..].trim_start();
    let Some(sep) = after.chars().next() else {
        return 0;
    };
    let sep_ok = lang.key_separators.contains(sep)
        && (sep != ':'
            || after[1..].starts_with(|c: char| c.is_whitespace() || c == '=')
            || after.len() == 1);
    if !sep_ok {
        return 0;
    }
    out.push(&line[..key_at], Paint::default());
    out.push(&key[..n], fg(KEY));
    key_at + n
}

/// The colour of a name, given what follows it and what came just before.
fn word_paint(lang: &Lang, word: &str, after: &str, pending: Option<u8>) -> Paint {
    if let Some(c) = pending {
        return fg(c);
    }
    let ic = lang.ignore_case;
    if in_list(lang.keywords, word, ic) {
        fg(KEYWORD)
    } else if in_list(lang.constants, word, ic) {
        fg(CONSTANT)
    } else if in_list(lang.types, word, ic) {
        fg(TYPE)
    } else if in_list(lang.builtins, word, ic)
        || (lang.calls && after.starts_with('('))
        || (lang.macros && after.starts_with('!') && !after.starts_with("!="))
    {
        fg(FUNCTION)
    } else if lang.caps_are_types
        && word.starts_with(|c: char| c.is_uppercase())
        && word.chars().any(|c| c.is_lowercase())
    {
        fg(TYPE)
    } else {
        Paint::default()
    }
}

/// `@decorator`, `#include` at a line's start, `:symbol`, `#fff`: the
/// length of the marked name, or `None`.
fn marked_name(lang: &Lang, c: char, rest: &str, line_start: bool) -> Option<usize> {
    let applies = match c {
        '@' => lang.at_names.is_some(),
        '#' => lang.hash_numbers || (lang.preprocessor && line_start),
        ':' => lang.symbols && !rest.starts_with("::"),
        _ => false,
    };
    let name = &rest[1..];
    let starts = if lang.hash_numbers && c == '#' {
        name.starts_with(|c: char| c.is_ascii_hexdigit())
    } else {
        name.starts_with(is_ident_start)
    };
    (applies && starts).then(|| 1 + ident_len(name, lang.ident_extra))
}

/// Rust raw strings: `word` is a prefix with `r` and `after` opens with
/// `#`s and a quote; the length of the hashes and quote.
fn raw_string(lang: &Lang, word: &str, after: &str) -> Option<usize> {
    if !lang.string_prefixes.contains(&word) {
        return None;
    }
    let hashes = after.bytes().take_while(|b| *b == b'#').count();
    let raw = lang.lifetimes && word.contains('r');
    // Rust caps the hashes at 255; a longer run is not a raw string.
    if raw && hashes <= 255 && after[hashes..].starts_with('"') {
        return Some(hashes + 1);
    }
    None
}

/// The body of a string up to and including `close`, or to the end of the
/// line: (bytes consumed, closed).
fn string_body(s: &str, close: &str, escapes: bool, out: &mut Out) -> (usize, bool) {
    let mut from = 0;
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if escapes && rest.starts_with('\\') {
            out.push(&s[from..i], fg(STRING));
            let n = 1 + rest[1..].chars().next().map_or(0, char::len_utf8);
            out.push(&rest[..n], fg(ESCAPE));
            i += n;
            from = i;
            continue;
        }
        if rest.starts_with(close) {
            i += close.len();
            out.push(&s[from..i], fg(STRING));
            return (i, true);
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out.push(&s[from..], fg(STRING));
    (s.len(), false)
}

/// A block comment's body up to its close (or the line's end), following
/// nesting where the language nests; returns the bytes consumed.
fn comment_body(lang: &Lang, s: &str, depth: &mut usize, out: &mut Out) -> usize {
    let Some((open, close)) = lang.block_comment else {
        *depth = 0;
        return 0;
    };
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if rest.starts_with(close) {
            i += close.len();
            *depth -= 1;
            if *depth == 0 {
                break;
            }
        } else if lang.nested_comments && rest.starts_with(open) {
            i += open.len();
            *depth += 1;
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out.push(&s[..i], fg(COMMENT));
    i
}

/// Rust after a `'`: a char literal (`'a'`, `'\n'`, `'\u{1F600}'`), a
/// lifetime (`'a`), or a lone quote; returns the bytes consumed.
fn quote_or_lifetime(s: &str, out: &mut Out) -> usize {
    let body = &s[1..];
    let mut chars = body.char_indices();
    match chars.next() {
        Some((_, '\\')) => {
            // An escape is short; a quote further than this is not its end.
            if let Some(end) = body
                .char_indices()
                .take(12)
                .skip(2)
                .find(|(_, c)| *c == '\'')
            {
                let n = 1 + end.0 + 1;
                out.push("'", fg(STRING));
                string_body(&s[1..n], "'", true, out);
                return n;
            }
        }
        Some((_, c)) => {
            let after = c.len_utf8();
            if body[after..].starts_with('\'') {
                let n = 1 + after + 1;
                out.push(&s[..n], fg(STRING));
                return n;
            }
            if is_ident_start(c) {
                let n = 1 + ident_len(body, "");
                out.push(&s[..n], fg(KEYWORD));
                return n;
            }
        }
        None => {}
    }
    out.push("'", Paint::default());
    1
}

/// Unified diff, one line at a time: additions green, removals red, hunk
/// headers cyan, file headers bold.
fn diff_line(line: &str, out: &mut Out) {
    let bold = Paint {
        bold: true,
        ..Paint::default()
    };
    let paint = if line.starts_with("+++")
        || line.starts_with("---")
        || line.starts_with("diff ")
        || line.starts_with("index ")
    {
        bold
    } else if line.starts_with('+') {
        fg(GREEN)
    } else if line.starts_with('-') {
        fg(RED)
    } else if line.starts_with("@@") {
        fg(CYAN)
    } else {
        Paint::default()
    };
    out.push(line, paint);
}

/// HTML/XML: tag names blue, attribute names yellow, their values green,
/// comments grey, entities cyan. An open tag or comment carries to the
/// next line.
fn markup_line(line: &str, state: &mut Markup, out: &mut Out) {
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        let c = rest.chars().next().unwrap_or(' ');
        match *state {
            Markup::Comment => {
                let (n, closed) = match rest.find("-->") {
                    Some(at) => (at + 3, true),
                    None => (rest.len(), false),
                };
                out.push(&rest[..n], fg(COMMENT));
                i += n;
                if closed {
                    *state = Markup::Text;
                }
            }
            Markup::Text => {
                if rest.starts_with("<!--") {
                    out.push("<!--", fg(COMMENT));
                    i += 4;
                    *state = Markup::Comment;
                } else if c == '<' {
                    let mark = rest[1..]
                        .find(|c: char| !matches!(c, '/' | '!' | '?'))
                        .unwrap_or(rest.len() - 1);
                    let name_at = 1 + mark;
                    let name = &rest[name_at..];
                    if name.starts_with(|c: char| c.is_alphabetic()) {
                        let n = ident_len(name, "-:.");
                        out.push(&rest[..name_at], Paint::default());
                        out.push(&name[..n], fg(BLUE));
                        i += name_at + n;
                        *state = Markup::Tag;
                    } else {
                        out.push("<", Paint::default());
                        i += 1;
                    }
                } else if c == '&' {
                    let n = rest[1..]
                        .find(|c: char| !(c.is_alphanumeric() || c == '#'))
                        .map_or(1, |n| n + 1);
                    let n = if rest[n..].starts_with(';') { n + 1 } else { 1 };
                    out.push(&rest[..n], if n > 1 { fg(CYAN) } else { Paint::default() });
                    i += n;
                } else {
                    let n = rest.find(['<', '&']).unwrap_or(rest.len()).max(1);
                    out.push(&rest[..n], Paint::default());
                    i += n;
                }
            }
            Markup::Tag => {
                if c == '>' {
                    out.push(">", Paint::default());
                    i += 1;
                    *state = Markup::Text;
                } else if c == '"' || c == '\'' {
                    let n = rest[1..].find(c).map_or(rest.len(), |n| n + 2);
                    out.push(&rest[..n], fg(STRING));
                    i += n;
                } else if is_ident_start(c) {
                    let n = ident_len(rest, "-:.");
                    out.push(&rest[..n], fg(YELLOW));
                    i += n;
                } else {
                    out.push(&rest[..c.len_utf8()], Paint::default());
                    i += c.len_utf8();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The colour of the first span containing `text`.
    fn colour_of(spans: &[Span], text: &str) -> Option<u8> {
        spans
            .iter()
            .find(|(t, _)| t.contains(text))
            .and_then(|(_, p)| p.fg)
    }

    fn text(spans: &[Span]) -> String {
        spans.iter().map(|(t, _)| t.as_str()).collect()
    }

    #[test]
    fn rust_keywords_strings_comments_and_numbers_are_coloured() {
        let mut h = Highlighter::new("rust");
        let line = "fn main() { let s = \"hi\"; let n = 42u8; } // done";
        let spans = h.line(line);
        assert_eq!(colour_of(&spans, "fn"), Some(KEYWORD));
        assert_eq!(colour_of(&spans, "main"), Some(FUNCTION));
        assert_eq!(colour_of(&spans, "\"hi\""), Some(STRING));
        assert_eq!(colour_of(&spans, "42u8"), Some(NUMBER));
        assert_eq!(colour_of(&spans, "// done"), Some(COMMENT));
        assert_eq!(text(&spans), line);
        let spans = h.line("let v: Vec<&'static str> = vec!['a', '\\n'];");
        assert_eq!(colour_of(&spans, "Vec"), Some(TYPE));
        assert_eq!(colour_of(&spans, "'static"), Some(KEYWORD));
        assert_eq!(colour_of(&spans, "vec!"), Some(FUNCTION));
        assert_eq!(colour_of(&spans, "'a'"), Some(STRING));
        assert_eq!(colour_of(&spans, "\\n"), Some(ESCAPE));
    }

    #[test]
    fn python_keywords_strings_comments_and_numbers_are_coloured() {
        let mut h = Highlighter::new("py");
        let spans = h.line("def area(x): return x + 1.5e-3 if x else None  # why");
        assert_eq!(colour_of(&spans, "def"), Some(KEYWORD));
        assert_eq!(colour_of(&spans, "area"), Some(FUNCTION));
        assert_eq!(colour_of(&spans, "1.5e-3"), Some(NUMBER));
        assert_eq!(colour_of(&spans, "None"), Some(CONSTANT));
        assert_eq!(colour_of(&spans, "# why"), Some(COMMENT));
        let spans = h.line("s = f'{x}' + r\"\\d\"");
        assert_eq!(colour_of(&spans, "f'{x}'"), Some(STRING));
    }

    #[test]
    fn a_block_comment_spans_lines() {
        let mut h = Highlighter::new("c");
        let spans = h.line("int x; /* starts");
        assert_eq!(colour_of(&spans, "int"), Some(KEYWORD));
        assert_eq!(
            colour_of(&h.line("  still a comment"), "still"),
            Some(COMMENT)
        );
        let spans = h.line("ends */ return 0;");
        assert_eq!(colour_of(&spans, "ends */"), Some(COMMENT));
        assert_eq!(colour_of(&spans, "return"), Some(KEYWORD));
        // Rust's nest: one close leaves the outer comment open.
        let mut h = Highlighter::new("rust");
        h.line("/* outer /* inner */");
        assert_eq!(colour_of(&h.line("let"), "let"), Some(COMMENT));
        h.line("*/");
        assert_eq!(colour_of(&h.line("let"), "let"), Some(KEYWORD));
    }

    #[test]
    fn a_comment_marker_inside_a_string_is_string() {
        let mut h = Highlighter::new("js");
        let spans = h.line("const url = \"http://x.io/*\"; // real");
        assert_eq!(colour_of(&spans, "http://x.io/*"), Some(STRING));
        assert_eq!(colour_of(&spans, "// real"), Some(COMMENT));
        assert_eq!(colour_of(&h.line("let y = 1;"), "let"), Some(KEYWORD));
        let mut h = Highlighter::new("sh");
        let spans = h.line("echo \"a # b\" ${#arr[@]} # c");
        assert_eq!(colour_of(&spans, "a # b"), Some(STRING));
        assert_eq!(colour_of(&spans, "{#arr"), None);
        assert_eq!(colour_of(&spans, "# c"), Some(COMMENT));
    }

    #[test]
    fn strings_run_on_only_where_the_language_lets_them() {
        // An unclosed single-line string ends with its line.
        let mut h = Highlighter::new("python");
        h.line("print('oops)");
        assert_eq!(colour_of(&h.line("x = 1"), "1"), Some(NUMBER));
        // A triple-quoted one carries on until closed.
        h.line("doc = \"\"\"start");
        assert_eq!(colour_of(&h.line("still # inside"), "still"), Some(STRING));
        let spans = h.line("end\"\"\" # after");
        assert_eq!(colour_of(&spans, "# after"), Some(COMMENT));
        // Rust raw strings close only on their own number of hashes.
        let mut h = Highlighter::new("rs");
        h.line("let s = r#\"a \" quote");
        assert_eq!(colour_of(&h.line("\" still"), "still"), Some(STRING));
        let spans = h.line("end\"#; let t = 1;");
        assert_eq!(colour_of(&spans, "let"), Some(KEYWORD));
    }

    #[test]
    fn keys_tables_and_tags() {
        let mut h = Highlighter::new("toml");
        let spans = h.line("name = \"buddy\" # the name");
        assert_eq!(colour_of(&spans, "name"), Some(KEY));
        assert_eq!(colour_of(&spans, "\"buddy\""), Some(STRING));
        assert_eq!(colour_of(&spans, "# the name"), Some(COMMENT));
        assert_eq!(
            colour_of(&h.line("[profile.release]"), "profile"),
            Some(TYPE)
        );
        assert_eq!(colour_of(&h.line("lto = true"), "true"), Some(CONSTANT));
        let mut h = Highlighter::new("yml");
        let spans = h.line("  - image: rust:1.80 # pinned");
        assert_eq!(colour_of(&spans, "image"), Some(KEY));
        assert_eq!(colour_of(&spans, "# pinned"), Some(COMMENT));
        let mut h = Highlighter::new("html");
        let spans = h.line("<a href=\"/x\">A &amp; B</a> <!-- note");
        assert_eq!(colour_of(&spans, "a"), Some(BLUE));
        assert_eq!(colour_of(&spans, "href"), Some(YELLOW));
        assert_eq!(colour_of(&spans, "\"/x\""), Some(STRING));
        assert_eq!(colour_of(&spans, "&amp;"), Some(CYAN));
        assert_eq!(colour_of(&h.line("still -->"), "still"), Some(COMMENT));
    }

    #[test]
    fn diff_lines_are_red_and_green() {
        let mut h = Highlighter::new("diff");
        assert_eq!(colour_of(&h.line("+added"), "added"), Some(GREEN));
        assert_eq!(colour_of(&h.line("-removed"), "removed"), Some(RED));
        assert_eq!(colour_of(&h.line("@@ -1 +1 @@"), "@@"), Some(CYAN));
    }

    #[test]
    fn every_listed_language_colours_and_unknown_ones_do_not() {
        for tag in [
            "rust",
            "python",
            "js",
            "ts",
            "jsx",
            "tsx",
            "sh",
            "bash",
            "shell",
            "zsh",
            "console",
            "json",
            "toml",
            "yaml",
            "c",
            "cpp",
            "h",
            "go",
            "java",
            "sql",
            "html",
            "xml",
            "css",
            "diff",
            "dockerfile",
            "ruby",
            "lua",
            "makefile",
            "py",
            "rs",
            "yml",
        ] {
            assert!(
                !matches!(Highlighter::new(tag).kind, Kind::Plain),
                "{tag} is plain"
            );
        }
        for tag in ["", "text", "nosuchlang"] {
            let mut h = Highlighter::new(tag);
            let spans = h.line("fn main() { \"x\" } // 1");
            assert_eq!(
                spans,
                vec![("fn main() { \"x\" } // 1".to_string(), Paint::default())]
            );
        }
    }

    #[test]
    fn text_is_kept_whole_whatever_the_input() {
        let lines = [
            "'",
            "r#",
            "r###\"",
            "\"\\",
            "'\\",
            "'\\u{1F600}'",
            "/*/",
            "<",
            "</",
            "<!-",
            "&",
            "é'ü' \"ö\\é\" 1e+ 0x1e+2 ..1",
            "#",
            "@",
            ":",
            "- ",
            "a:",
            "[",
        ];
        for tag in [
            "rust", "py", "js", "sh", "c", "toml", "yaml", "html", "css", "ruby", "lua",
        ] {
            let mut h = Highlighter::new(tag);
            for line in lines {
                assert_eq!(text(&h.line(line)), line, "{tag}: {line:?}");
            }
        }
    }

    #[test]
    fn a_100_kb_line_takes_linear_time() {
        // Inputs that would make a backtracking scanner rescan: unclosed
        // quotes, comment openers, hash runs, entity starts.
        let pieces = ["\"a", "/*", "r####", "'\\", "&amp", "<a ", "x(", "1e"];
        for tag in ["rust", "python", "js", "html", "css", "sql"] {
            for piece in pieces {
                let line = piece.repeat(100_000 / piece.len());
                let start = std::time::Instant::now();
                let spans = Highlighter::new(tag).line(&line);
                assert_eq!(text(&spans).len(), line.len());
                let took = start.elapsed();
                // Linear work is far under the bound; quadratic would be seconds.
                assert!(took.as_millis() < 500, "{tag} {piece:?}: {took:?}");
            }
        }
    }
}
