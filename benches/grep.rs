//! The `grep` tool against ripgrep on the same tree, for docs/PERFORMANCE.md
//! (issue 31: within 2× of `rg`). The tool's search is called in process,
//! as the agent calls it (walk, search, sort, bound and render); `rg` runs as
//! a process with the same rules (`--no-require-git`, hidden files and
//! .gitignore as the tool) and its output thrown away. Runs alternate, so
//! load from other work on the machine falls on both alike.
//!
//! ```text
//! apt-get install -y ripgrep      # once
//! cargo bench --bench grep [-- TREE]   # TREE defaults to this repository
//! ```

use buddy::tools::grep::{search_local, Mode, Query};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 21;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn tool(root: &Path, pattern: &str) -> (Duration, String) {
    let q = Query {
        pattern: pattern.into(),
        glob: None,
        ignore_case: false,
        mode: Mode::Content,
        limit: buddy::tools::grep::DEFAULT_LIMIT,
    };
    let t = Instant::now();
    let r = search_local(root, ".", &q, Instant::now() + Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("grep tool failed: {e}"));
    let text = r.render(pattern, ".", buddy::tools::grep::DEFAULT_MAX_OUTPUT_CHARS);
    let elapsed = t.elapsed();
    std::hint::black_box(text);
    (elapsed, format!("{} lines in {} files", r.matches, r.files))
}

fn rg(root: &Path, pattern: &str) -> (Duration, usize) {
    let t = Instant::now();
    let out = Command::new("rg")
        .args([
            "--no-config",
            "--no-require-git",
            "-n",
            "--no-heading",
            "-e",
            pattern,
        ])
        .arg(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run rg ({e}); apt-get install -y ripgrep"));
    (t.elapsed(), out.stdout.split(|&b| b == b'\n').count() - 1)
}

fn main() {
    let root: PathBuf = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let version = Command::new("rg").arg("--version").output();
    let version = match version {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
        Err(e) => panic!("cannot run rg ({e}); apt-get install -y ripgrep"),
    };
    println!("tree: {} ({version})", root.display());
    println!("| pattern | matches | tool median | rg median | ratio |");
    println!("|---|---|---|---|---|");
    for pattern in [
        "ToolError",
        r"fn [a-z_]+\(",
        r"(?i)timeout",
        "xyzzy_absent_everywhere",
    ] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut found = String::new();
        let mut lines = 0;
        // One warm-up each: the page cache, not the first run, is measured.
        tool(&root, pattern);
        rg(&root, pattern);
        for _ in 0..RUNS {
            let (d, f) = tool(&root, pattern);
            ours.push(d);
            found = f;
            let (d, n) = rg(&root, pattern);
            theirs.push(d);
            lines = n;
        }
        let (a, b) = (median(ours), median(theirs));
        println!(
            "| `{pattern}` | {found} (rg: {lines}) | {} | {} | {:.2}× |",
            ms(a),
            ms(b),
            a.as_secs_f64() / b.as_secs_f64()
        );
    }
}
