//! `grep`: a regular expression searched over a tree, read-only, asked of
//! nobody. On this host it is ripgrep's own machinery (the `ignore` crate's
//! parallel walker with .gitignore, .ignore and hidden-file rules,
//! `grep-regex`, `grep-searcher` with binary files skipped); on an SSH or
//! container target it runs there, through `rg` when the target has it and
//! `find` + `grep` otherwise, and the output is parsed back into the same
//! results, so every target answers in one shape: `path:line:text` (or
//! paths, or `path:count`), paths relative to the search root, sorted, and
//! bounded in matches and characters with a note of what was left out.
//!
//! Also owns what `glob` shares with it: the walker's set-up, the remote file
//! listing and how a path is shown. Not the tool's timeout policy (the shell
//! tool's) or how a call is drawn on screen (`ui::toolview`).

use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::host::{run_script, shell_quote};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 16_000;
/// Results shown when the model names no limit: enough to act on, few
/// enough that a broad pattern does not fill the context.
pub const DEFAULT_LIMIT: usize = 100;
/// The most the model may ask for; the character bound applies as well.
pub const MAX_LIMIT: usize = 1000;
/// A matching line longer than this is cut (minified files have megabyte lines).
const MAX_LINE_CHARS: usize = 300;
/// Characters kept free for the closing note.
const NOTE_ROOM: usize = 300;
/// Bytes of a remote search's output read back; past it the counts become
/// "at least".
pub const REMOTE_CAP: usize = 1 << 20;

pub struct GrepTool {
    max_output_chars: usize,
    timeout: Duration,
}

impl GrepTool {
    pub fn new(max_output_chars: usize) -> Self {
        GrepTool {
            max_output_chars,
            timeout: super::shell::DEFAULT_TIMEOUT,
        }
    }

    /// The shell tool's timeout, so every tool call ends in the same time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// What the answer lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `path:line:text` for each matching line.
    Content,
    /// The paths of files with a match.
    Files,
    /// `path:count` of matching lines per file.
    Count,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepArgs {
    /// Regular expression to search for.
    pattern: String,
    /// Directory or file to search (default: the working directory).
    path: Option<String>,
    /// Only files matching this glob, as rg -g: `*.rs` at any depth, `src/**/*.ts` from the searched path, `!*.min.js` to leave out.
    glob: Option<String>,
    /// Match case-insensitively (default false).
    ignore_case: Option<bool>,
    /// content: matching lines (default); files: paths of files with a match; count: matching lines per file.
    output: Option<Mode>,
    /// Most lines (content) or files shown (default 100).
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
}

/// One search, resolved from the model's arguments.
#[derive(Debug, Clone)]
pub struct Query {
    pub pattern: String,
    pub glob: Option<String>,
    pub ignore_case: bool,
    pub mode: Mode,
    /// Lines (content) or files (files, count) shown at most.
    pub limit: usize,
}

/// What one file contributed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Matching lines in the file.
    pub count: u64,
    /// The first of them, as (line number, text), while they are shown.
    pub lines: Vec<(u64, String)>,
}

/// Every file's contribution, counted in full but kept only as far as the
/// answer can show: the first `limit` lines (or files) in path order. Which
/// ones are kept does not depend on the order files were searched in.
#[derive(Debug)]
pub struct Results {
    mode: Mode,
    limit: usize,
    kept: BTreeMap<String, Found>,
    kept_lines: usize,
    pub files: u64,
    pub matches: u64,
    /// A remote search's output passed [`REMOTE_CAP`]: the totals are lower
    /// bounds.
    pub at_least: bool,
}

impl Results {
    pub fn new(mode: Mode, limit: usize) -> Results {
        Results {
            mode,
            limit,
            kept: BTreeMap::new(),
            kept_lines: 0,
            files: 0,
            matches: 0,
            at_least: false,
        }
    }

    pub fn add(&mut self, path: String, found: Found) {
        if found.count == 0 {
            return;
        }
        self.files += 1;
        self.matches += found.count;
        self.kept_lines += found.lines.len();
        self.kept.insert(path, found);
        match self.mode {
            Mode::Content => {
                while self.kept_lines > self.limit {
                    let Some(mut last) = self.kept.last_entry() else {
                        break;
                    };
                    let lines = &mut last.get_mut().lines;
                    let drop = (self.kept_lines - self.limit).min(lines.len());
                    lines.truncate(lines.len() - drop);
                    self.kept_lines -= drop;
                    if lines.is_empty() {
                        last.remove();
                    }
                }
            }
            Mode::Files | Mode::Count => {
                while self.kept.len() > self.limit {
                    self.kept.pop_last();
                }
            }
        }
    }

    /// The answer: the kept results, then a note when anything was left out,
    /// within `max_chars` characters.
    pub fn render(&self, pattern: &str, root: &str, max_chars: usize) -> String {
        if self.files == 0 {
            return format!("no matches for `{pattern}` in {root}");
        }
        let budget = max_chars.saturating_sub(NOTE_ROOM).max(1);
        let mut out = String::new();
        let mut used = 0;
        let mut shown: u64 = 0;
        let mut push = |line: String| {
            let n = line.chars().count() + 1;
            if used + n > budget {
                return false;
            }
            used += n;
            out.push_str(&line);
            out.push('\n');
            shown += 1;
            true
        };
        'files: for (path, found) in &self.kept {
            match self.mode {
                Mode::Content => {
                    for (n, text) in &found.lines {
                        if !push(format!("{path}:{n}:{text}")) {
                            break 'files;
                        }
                    }
                }
                Mode::Files => {
                    if !push(path.clone()) {
                        break;
                    }
                }
                Mode::Count => {
                    if !push(format!("{path}:{}", found.count)) {
                        break;
                    }
                }
            }
        }
        let (total, unit) = match self.mode {
            Mode::Content => (self.matches, "matching lines"),
            Mode::Files | Mode::Count => (self.files, "files"),
        };
        if shown < total || self.at_least {
            let more = total - shown;
            let at_least = if self.at_least { "at least " } else { "" };
            let what = match self.mode {
                Mode::Content => format!(
                    "{at_least}{more} more matches ({shown} of {at_least}{total} {unit} shown, in {at_least}{} files)",
                    self.files
                ),
                _ => format!("{at_least}{more} more files ({shown} of {at_least}{total} shown)"),
            };
            out.push_str(&format!(
                "[grep: {what}; narrow the pattern, path or glob, or raise limit (at most {MAX_LIMIT})]"
            ));
        } else {
            // The last line's newline is the answer's end.
            out.pop();
        }
        out
    }
}

/// A matching line as shown: without its line ending, cut when very long.
fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches('\n').trim_end_matches('\r');
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The matcher for `pattern`: ripgrep's regex dialect, line by line.
pub fn matcher(pattern: &str, ignore_case: bool) -> Result<RegexMatcher, ToolError> {
    RegexMatcherBuilder::new()
        .case_insensitive(ignore_case)
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| {
            ToolError::InvalidArguments(format!(
                "`{pattern}` is not a valid regular expression: {}",
                crate::text::one_line(&e.to_string(), 300)
            ))
        })
}

/// The parallel walker over `root` with ripgrep's rules: hidden files and
/// directories skipped, .gitignore (inside a git repository or not, as
/// `rg --no-require-git`), .ignore and git's exclude files honoured,
/// symlinks not followed.
pub fn walker(root: &Path) -> ignore::WalkParallel {
    ignore::WalkBuilder::new(root)
        .hidden(true)
        .require_git(false)
        .threads(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(12),
        )
        .build_parallel()
}

/// Which files a `glob` argument keeps, read as `rg -g` reads it (`*.rs`
/// at any depth, `src/*.rs` from the root, `!` to leave out). It only chooses
/// among the files the ignore rules keep: unlike `rg -g`, a glob that
/// matches an ignored or hidden directory's name does not bring it back.
pub struct FileFilter(ignore::overrides::Override);

impl FileFilter {
    pub fn new(glob: &str) -> Result<FileFilter, ToolError> {
        let bad = |e: ignore::Error| {
            ToolError::InvalidArguments(format!(
                "invalid glob `{glob}`: {}",
                crate::text::one_line(&e.to_string(), 200)
            ))
        };
        let mut o = ignore::overrides::OverrideBuilder::new("");
        o.add(glob).map_err(bad)?;
        o.build().map(FileFilter).map_err(bad)
    }

    /// Whether the file at `rel`, relative to the search root, is kept.
    pub fn keeps(&self, rel: &str) -> bool {
        !self.0.matched(rel, false).is_ignore()
    }
}

/// `path` as shown in results: relative to the search root, `/`-separated;
/// the root itself (a file searched alone) as the model named it.
pub fn shown_path(root: &Path, path: &Path, named: &str) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        _ => named.to_string(),
    }
}

/// Collects one file's matches.
struct FileSink {
    keep: usize,
    found: Found,
    binary: bool,
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.found.count += 1;
        if self.found.lines.len() < self.keep {
            self.found
                .lines
                .push((m.line_number().unwrap_or(0), line_text(m.bytes())));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, std::io::Error> {
        // As rg does in a tree: a file with a NUL byte is not text; none of
        // it is reported, not even matches found before the NUL.
        self.binary = true;
        Ok(false)
    }
}

/// Searches `root` (a directory or one file) on this host. Blocking: the
/// caller runs it off the runtime. Stops at `deadline`.
pub fn search_local(
    root: &Path,
    named: &str,
    q: &Query,
    deadline: Instant,
) -> Result<Results, ToolError> {
    let matcher = matcher(&q.pattern, q.ignore_case)?;
    let meta = std::fs::metadata(root)
        .map_err(|e| ToolError::Failed(format!("cannot search {}: {e}", root.display())))?;
    let results = Arc::new(Mutex::new(Results::new(q.mode, q.limit)));
    let timed_out = AtomicBool::new(false);
    let keep = if q.mode == Mode::Content { q.limit } else { 0 };
    // A file named outright is searched whatever its name, as rg does.
    let filter = match q.glob.as_deref().filter(|_| meta.is_dir()) {
        Some(g) => Some(FileFilter::new(g)?),
        None => None,
    };
    let filter = filter.as_ref();
    walker(root).run(|| {
        let matcher = matcher.clone();
        let results = results.clone();
        let timed_out = &timed_out;
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        Box::new(move |entry| {
            if Instant::now() > deadline {
                timed_out.store(true, Ordering::Relaxed);
                return ignore::WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            let shown = shown_path(root, entry.path(), named);
            if filter.is_some_and(|f| !f.keeps(&shown)) {
                return ignore::WalkState::Continue;
            }
            let mut sink = FileSink {
                keep,
                found: Found::default(),
                binary: false,
            };
            // An unreadable file is left out, as rg leaves it (with a message
            // nobody here would read).
            if searcher
                .search_path(&matcher, entry.path(), &mut sink)
                .is_ok()
                && !sink.binary
                && sink.found.count > 0
            {
                if let Ok(mut r) = results.lock() {
                    r.add(shown, sink.found);
                }
            }
            ignore::WalkState::Continue
        })
    });
    if timed_out.load(Ordering::Relaxed) {
        return Err(ToolError::Failed(format!(
            "searching {} took too long; gave up (narrow the path or glob)",
            root.display()
        )));
    }
    let results = Arc::try_unwrap(results)
        .map_err(|_| ToolError::Failed("search threads still running".into()))?;
    results
        .into_inner()
        .map_err(|_| ToolError::Failed("a search thread failed".into()))
}

/// A `rg -g` glob as a shell `case` pattern for the fallback listing, and
/// whether it applies to the whole relative path (it has a `/`) or the name.
/// `**/` at the start is any depth, as a name pattern is; a leading `/`
/// anchors to the root, which the relative path already is.
fn case_glob(glob: &str) -> (String, bool) {
    let mut g = glob;
    while let Some(rest) = g.strip_prefix("**/") {
        g = rest;
    }
    let g = g.strip_prefix('/').unwrap_or(g);
    // `src/**/*.rs` also matches `src/a.rs`; `case`'s `*` crosses `/`, so
    // `src/*.rs` matches both (and more, which the exact filter removes).
    let g = g.replace("/**/", "/");
    let slash = g.contains('/');
    (g, slash)
}

/// Whether the `case` pre-filter can stand for `glob`: it must keep every
/// file the glob keeps. A negated glob or braces cannot be said as a `case`
/// pattern, so those list everything and leave the choice to [`FileFilter`].
fn prefilter(glob: Option<&str>) -> Option<&str> {
    glob.filter(|g| !g.starts_with('!') && !g.contains('{') && !g.contains('\\'))
}

/// Shell code (a function `buddy_list`) that prints the files under the
/// current directory, relative, one a line: `rg --files` where there is rg,
/// else `git ls-files` inside a repository (so .gitignore holds) and `find`
/// elsewhere; hidden files and symlinks left out, `$g` (set by
/// [`remote_glob_var`]) as a `case` pattern that keeps at least what the
/// glob keeps. The caller filters exactly with [`FileFilter`].
pub fn remote_list_function(glob: Option<&str>) -> String {
    let filter = match prefilter(glob).map(case_glob) {
        None => String::new(),
        Some((_, true)) => "case \"$f\" in $g) ;; *) continue ;; esac; ".to_string(),
        Some((_, false)) => "case \"${f##*/}\" in $g) ;; *) continue ;; esac; ".to_string(),
    };
    format!(
        "buddy_list() {{ \
         if command -v rg >/dev/null 2>&1; then \
         rg --files --no-config --no-messages --no-require-git . | sed 's|^\\./||'; \
         elif command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
         git -c core.quotepath=off ls-files -co --exclude-standard -- . 2>/dev/null; \
         else find . -mindepth 1 -name '.*' -prune -o -type f -print 2>/dev/null | sed 's|^\\./||'; fi | \
         while IFS= read -r f; do \
         case \"/$f\" in */.*) continue ;; esac; \
         [ -f \"$f\" ] && [ ! -h \"$f\" ] || continue; \
         {filter}printf '%s\\n' \"$f\"; done; }}; "
    )
}

/// The `g=…` assignment the listing's filter reads.
pub fn remote_glob_var(glob: Option<&str>) -> String {
    let g = prefilter(glob).map(|g| case_glob(g).0).unwrap_or_default();
    format!("g={}; ", shell_quote(&g))
}

/// Goes to the search root on the target: `cd` into a directory, or sets
/// `single` to a file named alone; exit 24 with a message when it is neither.
pub fn remote_root(root: &str) -> String {
    let r = shell_quote(root);
    format!(
        "single=; if [ -d {r} ]; then cd -- {r} || exit 24; elif [ -f {r} ]; then single={r}; \
         else echo \"{}: no such file or directory\" >&2; exit 24; fi; ",
        root.replace(['"', '\\', '$', '`'], "?")
    )
}

/// The script that searches on a remote target and prints `path NUL rest`
/// lines, `rest` being `line:text` or a count; at most [`REMOTE_CAP`] + 1 bytes.
fn remote_script(root: &str, q: &Query) -> String {
    let i = if q.ignore_case { " -i" } else { "" };
    let (rg_mode, grep_each) = match q.mode {
        Mode::Content => (
            "-n",
            format!("grep -n{i} -E -e \"$p\" -- \"$f\" | while IFS= read -r l; do printf '%s\\000%s\\n' \"$f\" \"$l\"; done"),
        ),
        Mode::Files | Mode::Count => (
            "--count",
            format!("printf '%s\\000%s\\n' \"$f\" \"$(grep -c{i} -E -e \"$p\" -- \"$f\")\""),
        ),
    };
    // rg's -g would bring hidden files back; `!.*` keeps them out.
    let rg_glob = if q.glob.is_some() {
        " -g \"$rg_g\" -g '!.*'"
    } else {
        ""
    };
    format!(
        "p={p}; rg_g={rg_g}; {gvar}{list}{root}\
         if [ -n \"$single\" ]; then echo F; else echo D; fi; \
         if command -v rg >/dev/null 2>&1; then \
         if [ -n \"$single\" ]; then set -- \"$single\"; else set -- .; fi; \
         rg --no-config --no-messages --no-require-git --null --no-heading --with-filename \
         --color never{i} {rg_mode}{rg_glob} -e \"$p\" -- \"$1\"; \
         else \
         if [ -n \"$single\" ]; then printf '%s\\n' \"$single\"; else buddy_list; fi | \
         while IFS= read -r f; do \
         grep -q{i} -E -e \"$p\" -- \"$f\" 2>/dev/null || continue; \
         case \"$(head -c 8192 -- \"$f\" | tr -dc '\\000' | wc -c)\" in *[1-9]*) continue ;; esac; \
         {grep_each}; done; \
         fi | head -c {cap}",
        p = shell_quote(&q.pattern),
        rg_g = shell_quote(q.glob.as_deref().unwrap_or("")),
        gvar = remote_glob_var(q.glob.as_deref()),
        list = remote_list_function(q.glob.as_deref()),
        root = remote_root(root),
        cap = REMOTE_CAP + 1,
    )
}

/// Reads a remote search's output into results: a first line `D` (a
/// directory was searched: `filter` applies) or `F` (a file named alone),
/// then `path NUL rest` lines.
pub fn parse_remote(out: &[u8], mode: Mode, limit: usize, filter: Option<&FileFilter>) -> Results {
    let mut results = Results::new(mode, limit);
    let (kind, out) = match memchr::memchr(b'\n', out) {
        Some(i) => (&out[..i], &out[i + 1..]),
        None => (out, &out[out.len()..]),
    };
    let filter = filter.filter(|_| kind == b"D");
    let cut = out.len() > REMOTE_CAP;
    let out = &out[..out.len().min(REMOTE_CAP)];
    let mut lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
    // The last piece is empty after a final newline, or a line the cap cut.
    lines.pop();
    let keep = if mode == Mode::Content { limit } else { 0 };
    let mut current: Option<(String, Found)> = None;
    for line in lines {
        let Some(nul) = memchr::memchr(0, line) else {
            // rg's notes about binary files named outright, and the like.
            continue;
        };
        let path = String::from_utf8_lossy(&line[..nul]);
        let path = path.strip_prefix("./").unwrap_or(&path).to_string();
        // The fallback's `case` pattern only approximates the glob.
        if filter.is_some_and(|f| !f.keeps(&path)) {
            continue;
        }
        let rest = &line[nul + 1..];
        if current.as_ref().is_some_and(|(p, _)| *p != path) {
            if let Some((p, f)) = current.take() {
                results.add(p, f);
            }
        }
        let (_, found) = current.get_or_insert_with(|| (path, Found::default()));
        match mode {
            Mode::Content => {
                let colon = memchr::memchr(b':', rest).unwrap_or(rest.len());
                let Ok(n) = String::from_utf8_lossy(&rest[..colon]).parse::<u64>() else {
                    continue;
                };
                found.count += 1;
                if found.lines.len() < keep {
                    found
                        .lines
                        .push((n, line_text(rest.get(colon + 1..).unwrap_or_default())));
                }
            }
            Mode::Files | Mode::Count => {
                found.count += String::from_utf8_lossy(rest).trim().parse().unwrap_or(0);
            }
        }
    }
    if let Some((p, f)) = current {
        results.add(p, f);
    }
    results.at_least = cut;
    results
}

#[async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "grep",
            "Search file contents with a regular expression (ripgrep syntax; on a remote target without rg, POSIX extended). Read-only, needs no approval. Skips hidden files, binary files and what .gitignore/.ignore exclude. Answers `path:line:text` lines (paths relative to the searched path), or file paths, or `path:count`, sorted by path, and says how many more matches there were.",
            crate::tools::schema::of::<GrepArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GrepArgs = parse_args(args)?;
        if args.pattern.is_empty() {
            return Err(ToolError::InvalidArguments("the pattern is empty".into()));
        }
        let q = Query {
            pattern: args.pattern,
            glob: args.glob.filter(|g| !g.is_empty()),
            ignore_case: args.ignore_case.unwrap_or(false),
            mode: args.output.unwrap_or(Mode::Content),
            limit: args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
        };
        // A bad pattern is one clear error on every target, before anything runs.
        matcher(&q.pattern, q.ignore_case)?;
        if let Some(g) = &q.glob {
            FileFilter::new(g)?;
        }
        let named = args.path.unwrap_or_else(|| ".".to_string());
        let results = tokio::time::timeout(self.timeout, search(ctx, &named, &q, self.timeout))
            .await
            .map_err(|_| {
                ToolError::Failed(format!(
                    "searching {named} took longer than {} s; gave up (narrow the path or glob)",
                    self.timeout.as_secs()
                ))
            })??;
        // The closing note says what was left out; the registry's marker
        // would only repeat it.
        Ok(ToolOutput::text(results.render(
            &q.pattern,
            &named,
            self.max_output_chars,
        )))
    }
}

async fn search(
    ctx: &ToolContext,
    named: &str,
    q: &Query,
    timeout: Duration,
) -> Result<Results, ToolError> {
    if ctx.target.is_local() {
        let root: PathBuf = ctx.resolve(named);
        let (q, named, deadline) = (q.clone(), named.to_string(), Instant::now() + timeout);
        return tokio::task::spawn_blocking(move || search_local(&root, &named, &q, deadline))
            .await
            .map_err(|e| ToolError::Failed(format!("search task failed: {e}")))?;
    }
    let script = remote_script(named, q);
    let (code, out, err) = run_script(ctx.target.as_ref(), &script, &ctx.cwd, None)
        .await
        .map_err(|e| ToolError::Failed(format!("cannot reach {}: {e}", ctx.target.actor())))?;
    if code == Some(24) || (out.is_empty() && !err.is_empty() && code != Some(0)) {
        return Err(ToolError::Failed(format!(
            "cannot search {named} on {}: {}",
            ctx.target.actor(),
            crate::text::one_line(String::from_utf8_lossy(&err).trim(), 300)
        )));
    }
    let filter = match q.glob.as_deref() {
        Some(g) => Some(FileFilter::new(g)?),
        None => None,
    };
    Ok(parse_remote(&out, q.mode, q.limit, filter.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("buddy-grep-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for (path, content) in [
            ("src/main.rs", "fn main() {\n    needle();\n}\n"),
            ("src/lib.rs", "pub fn needle() {}\n// Needle in a comment\n"),
            ("notes.txt", "a needle here\n"),
            ("target/build.rs", "needle in ignored output\n"),
            (".hidden/secret.rs", "needle hidden\n"),
            (".gitignore", "target/\n"),
        ] {
            let p = d.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        let mut bin = b"needle\n".to_vec();
        bin.extend_from_slice(&[0, 1, 2]);
        std::fs::write(d.join("blob.bin"), bin).unwrap();
        d
    }

    fn query(pattern: &str, mode: Mode) -> Query {
        Query {
            pattern: pattern.into(),
            glob: None,
            ignore_case: false,
            mode,
            limit: DEFAULT_LIMIT,
        }
    }

    fn run(root: &Path, q: &Query) -> String {
        search_local(root, ".", q, Instant::now() + Duration::from_secs(30))
            .unwrap()
            .render(&q.pattern, ".", 10_000)
    }

    #[test]
    fn matches_are_path_line_text_sorted_and_skip_ignored_hidden_and_binary_files() {
        let d = tree("shape");
        assert_eq!(
            run(&d, &query("needle", Mode::Content)),
            "notes.txt:1:a needle here\nsrc/lib.rs:1:pub fn needle() {}\nsrc/main.rs:2:    needle();"
        );
        let mut q = query("needle", Mode::Files);
        q.ignore_case = true;
        assert_eq!(run(&d, &q), "notes.txt\nsrc/lib.rs\nsrc/main.rs");
        q.mode = Mode::Count;
        q.glob = Some("*.rs".into());
        assert_eq!(run(&d, &q), "src/lib.rs:2\nsrc/main.rs:1");
        assert_eq!(
            run(&d, &query("absent", Mode::Content)),
            "no matches for `absent` in ."
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_named_alone_is_shown_as_named() {
        let d = tree("single");
        let q = query("needle", Mode::Content);
        let r = search_local(
            &d.join("notes.txt"),
            "notes.txt",
            &q,
            Instant::now() + Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(
            r.render("needle", "notes.txt", 1000),
            "notes.txt:1:a needle here"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_limit_keeps_the_first_lines_in_path_order_and_counts_the_rest() {
        let d = std::env::temp_dir().join(format!("buddy-grep-limit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for f in 0..20 {
            let body: String = (0..10).map(|i| format!("hit {f} {i}\n")).collect();
            std::fs::write(d.join(format!("f{f:02}.txt")), body).unwrap();
        }
        let mut q = query("hit", Mode::Content);
        q.limit = 15;
        let out = run(&d, &q);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 16, "{out}");
        assert_eq!(lines[0], "f00.txt:1:hit 0 0");
        assert_eq!(lines[14], "f01.txt:5:hit 1 4");
        assert_eq!(
            lines[15],
            "[grep: 185 more matches (15 of 200 matching lines shown, in 20 files); narrow the pattern, path or glob, or raise limit (at most 1000)]"
        );
        // The character bound holds whatever the limit.
        q.limit = 1000;
        let r = search_local(&d, ".", &q, Instant::now() + Duration::from_secs(30)).unwrap();
        let text = r.render("hit", ".", 1000);
        assert!(text.chars().count() <= 1000, "{}", text.len());
        assert!(text.ends_with("or raise limit (at most 1000)]"), "{text}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_patterns_and_globs_are_one_clear_error() {
        let e = matcher("fn (", false).unwrap_err().to_string();
        assert!(
            e.contains("`fn (` is not a valid regular expression"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let e = FileFilter::new("a{b").err().unwrap().to_string();
        assert!(e.contains("invalid glob `a{b`"), "{e}");
    }

    #[test]
    fn remote_output_parses_into_the_same_shape() {
        let out = b"D\n./src/main.rs\x002:    needle();\n./notes.txt\x001:a needle here\nbinary file matches\n./src/lib.rs\x001:pub fn needle() {}\n";
        let r = parse_remote(out, Mode::Content, 100, None);
        assert_eq!(
            r.render("needle", ".", 1000),
            "notes.txt:1:a needle here\nsrc/lib.rs:1:pub fn needle() {}\nsrc/main.rs:2:    needle();"
        );
        let r = parse_remote(
            b"D\na.rs\x003\nb.rs\x000\nc/a.txt\x001\n",
            Mode::Count,
            100,
            None,
        );
        assert_eq!(r.render("x", ".", 1000), "a.rs:3\nc/a.txt:1");
        // The glob is applied here too, exactly, whatever the target matched.
        let rs = FileFilter::new("*.rs").unwrap();
        let out = b"D\na.rs\x003\nc/a.txt\x001\n";
        let r = parse_remote(out, Mode::Count, 100, Some(&rs));
        assert_eq!(r.render("x", ".", 1000), "a.rs:3");
        // A file named alone is not filtered.
        let r = parse_remote(b"F\nx/a.txt\x001\n", Mode::Count, 100, Some(&rs));
        assert_eq!(r.render("x", ".", 1000), "x/a.txt:1");
        // A cut output: the partial last line is dropped and the totals are
        // lower bounds.
        let mut big = b"D\n".to_vec();
        while big.len() <= REMOTE_CAP {
            big.extend_from_slice(b"f.txt\x001:x\n");
        }
        let r = parse_remote(&big, Mode::Content, 10, None);
        assert!(r.at_least);
        assert!(r.render("x", ".", 10_000).contains("at least"));
    }

    #[test]
    fn globs_become_case_patterns_for_the_fallback() {
        assert_eq!(case_glob("**/*.rs"), ("*.rs".to_string(), false));
        assert_eq!(case_glob("src/**/*.rs"), ("src/*.rs".to_string(), true));
        assert_eq!(prefilter(Some("!*.min.js")), None);
        assert_eq!(prefilter(Some("*.{rs,toml}")), None);
        assert_eq!(case_glob("/Cargo.toml"), ("Cargo.toml".to_string(), false));
    }
}
