//! `glob`: the files under a directory whose path matches a pattern
//! (`**/*.rs`, `src/*.toml`), newest first, read-only and asked of nobody.
//! The same rules as `grep` (hidden files, .gitignore and .ignore left out;
//! the pattern read as `rg -g` reads it), on this host through the `ignore`
//! crate's walker and on SSH or container targets through `rg --files` or
//! the `find` listing `grep` uses, with `stat` for the times. Owns the
//! ordering and the bound; the walker and the listing are `grep.rs`'s.
//!
//! Newest first because the files a model looks for while working are most
//! often the ones just changed; equal times fall back to path order, so the
//! answer is the same from one call to the next.

use super::grep::{
    remote_glob_var, remote_list_function, remote_root, walker, FileFilter, REMOTE_CAP,
};
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::host::run_script;
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 16_000;
/// Files listed when the model names no limit.
pub const DEFAULT_LIMIT: usize = 200;
/// The most the model may ask for; the character bound applies as well.
pub const MAX_LIMIT: usize = 2000;
/// Characters kept free for the closing note.
const NOTE_ROOM: usize = 200;

pub struct GlobTool {
    max_output_chars: usize,
    timeout: Duration,
}

impl GlobTool {
    pub fn new(max_output_chars: usize) -> Self {
        GlobTool {
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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    /// Glob pattern, e.g. `**/*.rs` or `src/**/test_*.py`.
    pattern: String,
    /// Directory to list under (default: the working directory).
    path: Option<String>,
    /// Most files listed (default 200).
    #[schemars(range(min = 1, max = MAX_LIMIT))]
    limit: Option<usize>,
}

/// A listed file: newer first, then by path. `Ord` is that order, so the
/// heap below keeps the first `limit` of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    newer: Reverse<i64>,
    pub path: String,
}

/// The first `limit` files in listing order, and how many there were.
#[derive(Debug)]
pub struct Listing {
    limit: usize,
    heap: BinaryHeap<Entry>,
    pub total: u64,
    /// A remote listing passed [`REMOTE_CAP`]: the total is a lower bound.
    pub at_least: bool,
}

impl Listing {
    pub fn new(limit: usize) -> Listing {
        Listing {
            limit,
            heap: BinaryHeap::new(),
            total: 0,
            at_least: false,
        }
    }

    pub fn add(&mut self, path: String, mtime: i64) {
        self.total += 1;
        self.heap.push(Entry {
            newer: Reverse(mtime),
            path,
        });
        // A max-heap: the entry that sorts last goes first.
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    pub fn render(self, pattern: &str, root: &str, max_chars: usize) -> String {
        if self.total == 0 {
            return format!("no files match `{pattern}` in {root}");
        }
        let (total, at_least) = (self.total, self.at_least);
        let budget = max_chars.saturating_sub(NOTE_ROOM).max(1);
        let mut out = String::new();
        let mut used = 0;
        let mut shown: u64 = 0;
        for e in self.heap.into_sorted_vec() {
            let n = e.path.chars().count() + 1;
            if used + n > budget {
                break;
            }
            used += n;
            out.push_str(&e.path);
            out.push('\n');
            shown += 1;
        }
        if shown < total || at_least {
            let a = if at_least { "at least " } else { "" };
            out.push_str(&format!(
                "[glob: {a}{} more files ({shown} of {a}{total} shown, newest first); narrow the pattern or path, or raise limit (at most {MAX_LIMIT})]",
                total - shown
            ));
        } else {
            out.pop();
        }
        out
    }
}

fn mtime_of(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64)
}

/// Lists `root` on this host. Blocking; stops at `deadline`.
pub fn list_local(
    root: &Path,
    pattern: &str,
    limit: usize,
    deadline: Instant,
) -> Result<Listing, ToolError> {
    let meta = std::fs::metadata(root)
        .map_err(|e| ToolError::Failed(format!("cannot list {}: {e}", root.display())))?;
    if !meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is not a directory; glob lists the files under a directory",
            root.display()
        )));
    }
    let filter = FileFilter::new(pattern)?;
    let filter = &filter;
    let listing = Arc::new(Mutex::new(Listing::new(limit)));
    let timed_out = AtomicBool::new(false);
    let seen = AtomicU64::new(0);
    walker(root).run(|| {
        let listing = listing.clone();
        let (timed_out, seen) = (&timed_out, &seen);
        Box::new(move |entry| {
            // The clock is read every few hundred entries, not for each.
            if seen.fetch_add(1, Ordering::Relaxed) % 256 == 0 && Instant::now() > deadline {
                timed_out.store(true, Ordering::Relaxed);
                return ignore::WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            let path = super::grep::shown_path(root, entry.path(), ".");
            if !filter.keeps(&path) {
                return ignore::WalkState::Continue;
            }
            let mtime = entry.metadata().map_or(0, |m| mtime_of(&m));
            if let Ok(mut l) = listing.lock() {
                l.add(path, mtime);
            }
            ignore::WalkState::Continue
        })
    });
    if timed_out.load(Ordering::Relaxed) {
        return Err(ToolError::Failed(format!(
            "listing {} took too long; gave up (narrow the path)",
            root.display()
        )));
    }
    let listing = Arc::try_unwrap(listing)
        .map_err(|_| ToolError::Failed("listing threads still running".into()))?;
    listing
        .into_inner()
        .map_err(|_| ToolError::Failed("a listing thread failed".into()))
}

/// The script that lists on a remote target: `MTIME PATH` lines, at most
/// [`REMOTE_CAP`] + 1 bytes.
fn remote_script(root: &str, pattern: &str) -> String {
    format!(
        "{gvar}{list}{root}\
         if [ -n \"$single\" ]; then echo \"{shown}: not a directory; glob lists the files under a directory\" >&2; exit 24; fi; \
         buddy_list | tr '\\n' '\\000' | xargs -0 -r stat -c '%Y %n' -- 2>/dev/null | head -c {cap}",
        gvar = remote_glob_var(Some(pattern)),
        list = remote_list_function(Some(pattern)),
        root = remote_root(root),
        shown = root.replace(['"', '\\', '$', '`'], "?"),
        cap = REMOTE_CAP + 1,
    )
}

/// Reads `MTIME PATH` lines into a listing of the files `filter` keeps.
pub fn parse_remote(out: &[u8], limit: usize, filter: &FileFilter) -> Listing {
    let mut listing = Listing::new(limit);
    let cut = out.len() > REMOTE_CAP;
    let out = &out[..out.len().min(REMOTE_CAP)];
    let mut lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
    lines.pop();
    for line in lines {
        let line = String::from_utf8_lossy(line);
        let Some((t, path)) = line.split_once(' ') else {
            continue;
        };
        let Ok(t) = t.parse::<i64>() else {
            continue;
        };
        let path = path.strip_prefix("./").unwrap_or(path);
        if filter.keeps(path) {
            listing.add(path.to_string(), t);
        }
    }
    listing.at_least = cut;
    listing
}

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "glob",
            "List files whose path matches a glob pattern, newest first. Read-only, needs no approval. Skips hidden files and what .gitignore/.ignore exclude. `*.rs` or `**/*.rs` match at any depth, `src/*.rs` only directly in src. Paths are relative to the listed directory.",
            crate::tools::schema::of::<GlobArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: GlobArgs = parse_args(args)?;
        if args.pattern.is_empty() {
            return Err(ToolError::InvalidArguments("the pattern is empty".into()));
        }
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let named = args.path.unwrap_or_else(|| ".".to_string());
        // A bad pattern is one clear error on every target, before anything runs.
        let filter = FileFilter::new(&args.pattern)?;
        let list = async {
            if ctx.target.is_local() {
                let (root, pattern) = (ctx.resolve(&named), args.pattern.clone());
                let deadline = Instant::now() + self.timeout;
                tokio::task::spawn_blocking(move || list_local(&root, &pattern, limit, deadline))
                    .await
                    .map_err(|e| ToolError::Failed(format!("listing task failed: {e}")))?
            } else {
                let script = remote_script(&named, &args.pattern);
                let (code, out, err) = run_script(ctx.target.as_ref(), &script, &ctx.cwd, None)
                    .await
                    .map_err(|e| {
                        ToolError::Failed(format!("cannot reach {}: {e}", ctx.target.actor()))
                    })?;
                if code == Some(24) {
                    return Err(ToolError::Failed(format!(
                        "cannot list {named} on {}: {}",
                        ctx.target.actor(),
                        crate::text::one_line(String::from_utf8_lossy(&err).trim(), 300)
                    )));
                }
                Ok(parse_remote(&out, limit, &filter))
            }
        };
        let listing = tokio::time::timeout(self.timeout, list)
            .await
            .map_err(|_| {
                ToolError::Failed(format!(
                    "listing {named} took longer than {} s; gave up (narrow the path)",
                    self.timeout.as_secs()
                ))
            })??;
        Ok(ToolOutput::text(listing.render(
            &args.pattern,
            &named,
            self.max_output_chars,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn touch(p: &Path, secs_ago: u64) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x\n").unwrap();
        let t = SystemTime::now() - Duration::from_secs(secs_ago);
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    fn list(root: &Path, pattern: &str, limit: usize) -> String {
        list_local(
            root,
            pattern,
            limit,
            Instant::now() + Duration::from_secs(30),
        )
        .unwrap()
        .render(pattern, ".", 10_000)
    }

    #[test]
    fn files_are_listed_newest_first_without_ignored_or_hidden_ones() {
        let d = std::env::temp_dir().join(format!("buddy-glob-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        touch(&d.join("old.rs"), 300);
        touch(&d.join("src/new.rs"), 10);
        touch(&d.join("src/mid.rs"), 100);
        touch(&d.join("src/deep/same_a.rs"), 200);
        touch(&d.join("src/deep/same_b.rs"), 200);
        touch(&d.join("src/notes.txt"), 0);
        touch(&d.join("target/gen.rs"), 0);
        touch(&d.join(".cache/hidden.rs"), 0);
        std::fs::write(d.join(".gitignore"), "target/\n").unwrap();
        assert_eq!(
            list(&d, "**/*.rs", 100),
            "src/new.rs\nsrc/mid.rs\nsrc/deep/same_a.rs\nsrc/deep/same_b.rs\nold.rs"
        );
        assert_eq!(list(&d, "src/*.rs", 100), "src/new.rs\nsrc/mid.rs");
        assert_eq!(
            list(&d, "*.rs", 2),
            "src/new.rs\nsrc/mid.rs\n[glob: 3 more files (2 of 5 shown, newest first); narrow the pattern or path, or raise limit (at most 2000)]"
        );
        assert_eq!(list(&d, "*.py", 10), "no files match `*.py` in .");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn remote_listings_parse_into_the_same_order() {
        let rs = FileFilter::new("*.rs").unwrap();
        let l = parse_remote(b"100 ./b.rs\n300 ./a b.rs\n100 ./a.rs\n5 c.txt\n", 10, &rs);
        assert_eq!(l.render("*.rs", ".", 1000), "a b.rs\na.rs\nb.rs");
    }
}
