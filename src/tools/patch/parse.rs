//! The patch format OpenAI's Codex models are trained to write, read into
//! plain operations: `*** Begin Patch`, then `*** Add File: P` (lines of
//! `+text`), `*** Delete File: P`, `*** Update File: P` (optionally
//! `*** Move to: Q`) with chunks of ` context`, `-removed`, `+added` lines,
//! each chunk optionally opened by `@@` or `@@ a line to find first` and
//! closed by `*** End of File` when it must match at the end; then
//! `*** End Patch`. Parsing only: nothing here reads or writes a file.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

impl Op {
    pub fn path(&self) -> &str {
        match self {
            Op::Add { path, .. } | Op::Delete { path } | Op::Update { path, .. } => path,
        }
    }
}

/// One run of changed lines in an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    /// The `@@ …` line: found first, the chunk matches after it.
    pub anchor: Option<String>,
    /// Context and removed lines: what the file holds now.
    pub old: Vec<String>,
    /// Context and added lines: what it holds after.
    pub new: Vec<String>,
    /// Marked `*** End of File`: the old lines end the file.
    pub at_eof: bool,
}

/// A patch that does not parse, with the patch line (from 1) that shows it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("patch line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

/// Reads a whole patch. Lenient where models slip without ambiguity
/// (spaces around the markers, CRLF, a blank context line sent without its
/// leading space), strict where a guess could change the wrong thing.
pub fn parse(input: &str) -> Result<Vec<Op>, ParseError> {
    let lines: Vec<&str> = input
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let err = |line: usize, message: String| ParseError {
        line: line + 1,
        message,
    };
    // Skip blank lines around the patch itself.
    let first = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
    let last = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .unwrap_or(0);
    if lines.get(first).map(|l| l.trim()) != Some(BEGIN) {
        return Err(err(first, format!("a patch starts with `{BEGIN}`")));
    }
    if last == first || lines[last].trim() != END {
        return Err(err(last, format!("a patch ends with `{END}`")));
    }
    let mut ops = Vec::new();
    let mut i = first + 1;
    while i < last {
        let line = lines[i];
        // Models indent headers now and then (`  *** Update File: a`);
        // Codex's parser takes them, and so do we: here, where a file's
        // operation is expected, nothing else could start with `***`.
        let header = line.trim();
        if header.is_empty() {
            i += 1;
            continue;
        }
        if let Some(path) = header.strip_prefix(ADD) {
            let path = file_path(path).ok_or_else(|| err(i, "Add File without a path".into()))?;
            let mut content = String::new();
            i += 1;
            while i < last && !lines[i].trim_start().starts_with("*** ") {
                match lines[i].strip_prefix('+') {
                    Some(text) => {
                        content.push_str(text);
                        content.push('\n');
                    }
                    None => {
                        return Err(err(
                            i,
                            format!("every line of an added file starts with `+` (in {path})"),
                        ))
                    }
                }
                i += 1;
            }
            ops.push(Op::Add { path, content });
        } else if let Some(path) = header.strip_prefix(DELETE) {
            let path =
                file_path(path).ok_or_else(|| err(i, "Delete File without a path".into()))?;
            ops.push(Op::Delete { path });
            i += 1;
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            let path =
                file_path(path).ok_or_else(|| err(i, "Update File without a path".into()))?;
            i += 1;
            let mut move_to = None;
            if let Some(dest) = lines.get(i).and_then(|l| l.trim_end().strip_prefix(MOVE)) {
                move_to =
                    Some(file_path(dest).ok_or_else(|| err(i, "Move to without a path".into()))?);
                i += 1;
            }
            let start = i;
            let (chunks, next) = chunks(&lines, i, last).map_err(|(at, m)| err(at, m))?;
            if chunks.is_empty() && move_to.is_none() {
                return Err(err(start, format!("the update of {path} has no changes")));
            }
            i = next;
            ops.push(Op::Update {
                path,
                move_to,
                chunks,
            });
        } else {
            return Err(err(
                i,
                format!(
                    "expected `{ADD}PATH`, `{DELETE}PATH` or `{UPDATE}PATH`, found {:?}",
                    crate::text::clip(line, 80)
                ),
            ));
        }
    }
    if ops.is_empty() {
        return Err(err(first, "the patch changes no file".into()));
    }
    Ok(ops)
}

fn file_path(s: &str) -> Option<String> {
    let p = s.trim();
    (!p.is_empty()).then(|| p.to_string())
}

/// The chunks of one update, from line `i` up to the next file header;
/// returns them and the line after.
fn chunks(
    lines: &[&str],
    mut i: usize,
    last: usize,
) -> Result<(Vec<Chunk>, usize), (usize, String)> {
    let mut out: Vec<Chunk> = Vec::new();
    let mut open = false;
    // Bare blank lines just read: context, unless they only separate this
    // update from the next header.
    let mut bare = 0;
    while i < last {
        let line = lines[i];
        if line.starts_with("*** ") && line.trim_end() != EOF_MARK {
            break;
        }
        if line.trim_end() == EOF_MARK {
            match out.last_mut() {
                Some(c) if open => c.at_eof = true,
                _ => return Err((i, format!("`{EOF_MARK}` outside a chunk"))),
            }
            open = false;
            bare = 0;
            i += 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix("@@") {
            bare = 0;
            let anchor = rest.trim();
            out.push(Chunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_string()),
                ..Chunk::default()
            });
            open = true;
            i += 1;
            continue;
        }
        if !open {
            // The first chunk may come without its `@@`.
            if !out.is_empty() {
                return Err((
                    i,
                    "a chunk after `*** End of File` needs its own `@@`".into(),
                ));
            }
            out.push(Chunk::default());
            open = true;
        }
        let Some(chunk) = out.last_mut() else {
            return Err((i, "a change line outside a chunk".into()));
        };
        bare = if line.is_empty() { bare + 1 } else { 0 };
        match line.chars().next() {
            Some(' ') => {
                chunk.old.push(line[1..].to_string());
                chunk.new.push(line[1..].to_string());
            }
            Some('-') => chunk.old.push(line[1..].to_string()),
            Some('+') => chunk.new.push(line[1..].to_string()),
            // A blank context line whose leading space was lost.
            None => {
                chunk.old.push(String::new());
                chunk.new.push(String::new());
            }
            Some(_) => {
                return Err((
                    i,
                    format!(
                        "a change line starts with ` `, `-` or `+`, found {:?}",
                        crate::text::clip(line, 80)
                    ),
                ))
            }
        }
        i += 1;
    }
    if let Some(c) = out.last_mut().filter(|_| open) {
        for _ in 0..bare {
            c.old.pop();
            c.new.pop();
        }
    }
    if out.iter().any(|c| c.old.is_empty() && c.new.is_empty()) {
        return Err((i.saturating_sub(1), "a chunk with no lines".into()));
    }
    Ok((out, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_parses() {
        let p = "*** Begin Patch\n*** Add File: new.txt\n+hello\n+\n*** Delete File: old.txt\n\
                 *** Update File: src/a.rs\n*** Move to: src/b.rs\n@@ fn main() {\n     let x = 1;\n-    old();\n+    new();\n\n*** End of File\n*** End Patch\n";
        let ops = parse(p).unwrap();
        assert_eq!(
            ops[0],
            Op::Add {
                path: "new.txt".into(),
                content: "hello\n\n".into()
            }
        );
        assert_eq!(
            ops[1],
            Op::Delete {
                path: "old.txt".into()
            }
        );
        let Op::Update {
            path,
            move_to,
            chunks,
        } = &ops[2]
        else {
            panic!("{ops:?}")
        };
        assert_eq!(
            (path.as_str(), move_to.as_deref()),
            ("src/a.rs", Some("src/b.rs"))
        );
        assert_eq!(chunks.len(), 1);
        let c = &chunks[0];
        assert_eq!(c.anchor.as_deref(), Some("fn main() {"));
        assert_eq!(c.old, ["    let x = 1;", "    old();", ""]);
        assert_eq!(c.new, ["    let x = 1;", "    new();", ""]);
        assert!(c.at_eof);
    }

    #[test]
    fn errors_name_the_line_and_what_was_expected() {
        let e = parse("*** Update File: a\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "patch line 1: a patch starts with `*** Begin Patch`"
        );
        let e = parse("*** Begin Patch\n*** Update File: a\n-x\n").unwrap_err();
        assert!(e.message.contains("ends with `*** End Patch`"), "{e}");
        let e =
            parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n?y\n*** End Patch").unwrap_err();
        assert_eq!(e.line, 5);
        assert!(e.message.contains("` `, `-` or `+`"), "{e}");
        let e = parse("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch").unwrap_err();
        assert!(e.message.contains("expected `*** Add File: PATH`"), "{e}");
        let e = parse("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse("*** Begin Patch\n*** Update File: a\n*** End Patch").unwrap_err();
        assert!(e.message.contains("has no changes"), "{e}");
        let e = parse("*** Begin Patch\n*** End Patch").unwrap_err();
        assert!(e.message.contains("changes no file"), "{e}");
    }

    #[test]
    fn crlf_blank_lines_around_and_indented_headers_are_tolerated() {
        let p = "*** Begin Patch\n  *** Add File: b.txt\n+b\n   *** Update File: a.txt\n-x\n+y\n*** End Patch\n";
        let ops = parse(p).unwrap();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert!(
            matches!(&ops[0], Op::Add { path, .. } if path == "b.txt"),
            "{ops:?}"
        );
        assert!(
            matches!(&ops[1], Op::Update { path, .. } if path == "a.txt"),
            "{ops:?}"
        );
        let p = "\n*** Begin Patch\r\n*** Update File: a\r\n-x\r\n+y\r\n*** End Patch\r\n\n";
        let ops = parse(p).unwrap();
        let Op::Update { chunks, .. } = &ops[0] else {
            panic!()
        };
        assert_eq!(
            (chunks[0].old.clone(), chunks[0].new.clone()),
            (vec!["x".to_string()], vec!["y".to_string()])
        );
    }
}
