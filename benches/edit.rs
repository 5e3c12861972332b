//! Edit figures for docs/PERFORMANCE.md: how often `edit_file`'s matching
//! places an edit correctly, refuses it, or places it wrongly, over real
//! source files (this repository's `src/` and crate sources in the local
//! cargo registry) with the drift models produce; and the time of one
//! `edit_file` call on a 10 MB file.
//!
//! ```text
//! cargo bench --bench edit
//! ```
//!
//! Every case is generated from a real stretch of a real file, with its
//! expected outcome known from how it was made: the intended edit applied to
//! the file (the file's own indentation, line endings, quotes), or a refusal
//! where no single place is meant (a snippet found more than once, context
//! that is no longer in the file). Each case runs twice: exact matching
//! alone, and with the normalisation passes. A result is "applied
//! correctly" when the file becomes exactly the expected bytes, "refused"
//! when nothing changed, and "wrongly applied" otherwise.

use buddy::tools::edit::doc::Doc;
use buddy::tools::edit::engine::{self, Edit};
use buddy::tools::edit::lines::{self, Level};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Cases per drift kind.
const PER_KIND: usize = 40;

fn main() {
    let files = sources();
    eprintln!("{} source files", files.len());
    let cases = generate(&files);
    report(&cases, &files);
    time_big_file(&files);
}

// ---------------------------------------------------------------------------
// Sources
// ---------------------------------------------------------------------------

struct Source {
    path: PathBuf,
    text: String,
}

fn sources() -> Vec<Source> {
    let mut paths = Vec::new();
    rust_files(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path(),
        &mut paths,
    );
    let registry = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("registry").join("src"));
    if let Some(Ok(indexes)) = registry.map(std::fs::read_dir) {
        for index in indexes.flatten() {
            let Ok(crates) = std::fs::read_dir(index.path()) else {
                continue;
            };
            let mut crates: Vec<PathBuf> = crates.flatten().map(|c| c.path()).collect();
            crates.sort();
            for c in crates {
                let name = c
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if [
                    "tokio-",
                    "hyper-",
                    "serde_json-",
                    "clap_builder-",
                    "regex-",
                    "rustls-",
                ]
                .iter()
                .any(|p| name.starts_with(p))
                {
                    rust_files(&c.join("src"), &mut paths);
                }
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            // Files with CRLF already would blur the CRLF cases.
            (text.len() > 2_000 && text.len() < 200_000 && !text.contains('\r'))
                .then_some(Source { path, text })
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

/// A small deterministic generator, so every run makes the same cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Exact,
    TrailingSpace,
    Reindent,
    Crlf,
    CurlyQuotes,
    StaleContext,
    Ambiguous,
}

const KINDS: [Kind; 7] = [
    Kind::Exact,
    Kind::TrailingSpace,
    Kind::Reindent,
    Kind::Crlf,
    Kind::CurlyQuotes,
    Kind::StaleContext,
    Kind::Ambiguous,
];

struct Case {
    kind: Kind,
    file: usize,
    /// The file's bytes as the edit finds them.
    before: Vec<u8>,
    edit: Edit,
    /// The bytes the file should hold after the intended edit; `None`: no
    /// single place is meant (any change is wrong).
    expect: Option<Vec<u8>>,
    /// Whether the intended place is the only one like it: a refusal of a
    /// repeated one is right, not a miss.
    unique: bool,
}

fn generate(files: &[Source]) -> Vec<Case> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    for kind in KINDS {
        let mut made = 0;
        let mut tries = 0;
        while made < PER_KIND && tries < PER_KIND * 200 {
            tries += 1;
            let f = rng.below(files.len());
            if let Some(case) = make(kind, f, &files[f].text, &mut rng) {
                out.push(case);
                made += 1;
            }
        }
    }
    out
}

fn meaningful(line: &str) -> bool {
    line.chars().filter(|c| c.is_alphanumeric()).count() >= 8
}

/// Whether the lines `region` appear more than once in `all`, compared as
/// leniently as the matching ever does: then no single place is meant.
fn repeated(all: &[&str], region: &[&str]) -> bool {
    let key: Vec<_> = region
        .iter()
        .map(|l| Level::Punctuation.normalise(l).into_owned())
        .collect();
    let n = region.len();
    (0..=all.len() - n)
        .filter(|&s| (0..n).all(|i| Level::Punctuation.normalise(all[s + i]) == key[i]))
        .count()
        > 1
}

fn make(kind: Kind, file: usize, text: &str, rng: &mut Rng) -> Option<Case> {
    let all: Vec<&str> = text.lines().collect();
    if kind == Kind::Ambiguous {
        // A line that appears more than once, sent alone.
        let start = rng.below(all.len());
        let line = all.iter().skip(start).find(|l| {
            l.trim().len() >= 6 && all.iter().filter(|m| m.trim() == l.trim()).count() > 1
        })?;
        return Some(Case {
            kind,
            file,
            before: text.as_bytes().to_vec(),
            edit: Edit {
                old: line.trim().to_string(),
                new: format!("{} /* edited */", line.trim()),
                replace_all: false,
            },
            expect: None,
            unique: false,
        });
    }
    let n = 1 + rng.below(4);
    let s = rng.below(all.len().saturating_sub(n));
    let region: Vec<&str> = all.get(s..s + n)?.to_vec();
    let j = (0..n).find(|&i| meaningful(region[i]))?;
    let mut changed: Vec<String> = region.iter().map(|l| l.to_string()).collect();
    changed[j].push_str(" /* edited */");
    let intended: String = all[..s]
        .iter()
        .map(|l| l.to_string())
        .chain(changed.iter().cloned())
        .chain(all[s + n..].iter().map(|l| l.to_string()))
        .map(|l| l + "\n")
        .collect();
    let unique = !repeated(&all, &region);
    let joined = |ls: &[String]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
    let region_s: Vec<String> = region.iter().map(|l| l.to_string()).collect();
    let mut before = text.as_bytes().to_vec();
    let mut expect = Some(intended.clone().into_bytes());
    let (old, new) = match kind {
        Kind::Exact => (joined(&region_s), joined(&changed)),
        Kind::TrailingSpace => {
            let mut old = region_s.clone();
            for l in old.iter_mut() {
                if rng.below(2) == 0 {
                    l.push_str(if rng.below(2) == 0 { "  " } else { "\t" });
                }
            }
            old[j].push(' ');
            (joined(&old), joined(&changed))
        }
        Kind::Reindent => {
            // The model's copy: the base indentation dropped, and four
            // spaces per level turned into two (tabs too).
            let base = region
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| lines::indent(l).len())
                .min()?;
            if base == 0 && !region.iter().any(|l| !lines::indent(l).is_empty()) {
                return None;
            }
            let model = |l: &String| -> String {
                if l.trim().is_empty() {
                    return String::new();
                }
                let ind = lines::indent(l);
                let rest = &ind[base.min(ind.len())..];
                let rest = rest.replace("    ", "  ").replace('\t', "  ");
                format!("{rest}{}", l.trim_start())
            };
            let old: Vec<String> = region_s.iter().map(model).collect();
            let new: Vec<String> = changed.iter().map(model).collect();
            (joined(&old), joined(&new))
        }
        Kind::Crlf => {
            before = text.replace('\n', "\r\n").into_bytes();
            expect = expect.map(|e| {
                String::from_utf8_lossy(&e)
                    .replace('\n', "\r\n")
                    .into_bytes()
            });
            if rng.below(2) == 0 {
                (joined(&region_s), joined(&changed))
            } else {
                // The model copied the file's CRLF into its strings.
                (
                    joined(&region_s).replace('\n', "\r\n"),
                    joined(&changed).replace('\n', "\r\n"),
                )
            }
        }
        Kind::CurlyQuotes => {
            if !region
                .iter()
                .any(|l| l.contains('"') || l.contains('\'') || l.contains(" - "))
            {
                return None;
            }
            let mut open = true;
            let curl = |l: &String, open: &mut bool| -> String {
                l.chars()
                    .map(|c| match c {
                        '"' => {
                            *open = !*open;
                            if *open {
                                '\u{201d}'
                            } else {
                                '\u{201c}'
                            }
                        }
                        '\'' => '\u{2019}',
                        c => c,
                    })
                    .collect::<String>()
                    .replace(" - ", " \u{2013} ")
            };
            let old: Vec<String> = region_s.iter().map(|l| curl(l, &mut open)).collect();
            (joined(&old), joined(&changed))
        }
        Kind::StaleContext => {
            // The model remembers a line that is no longer there.
            let k = (0..n).find(|&i| meaningful(region[i]))?;
            let mut old = region_s.clone();
            let word = old[k]
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .find(|w| w.len() >= 3)?
                .to_string();
            old[k] = old[k].replacen(&word, &format!("{word}_v1"), 1);
            expect = None;
            (joined(&old), joined(&changed))
        }
        Kind::Ambiguous => unreachable!(),
    };
    Some(Case {
        kind,
        file,
        before,
        edit: Edit {
            old,
            new,
            replace_all: false,
        },
        unique: unique && kind != Kind::StaleContext,
        expect,
    })
}

// ---------------------------------------------------------------------------
// Running and reporting
// ---------------------------------------------------------------------------

#[derive(Default, Clone, Copy)]
struct Tally {
    correct: usize,
    refused: usize,
    /// Refused where refusing is the right answer.
    refused_rightly: usize,
    wrong: usize,
}

fn run(case: &Case, lenient: &[Level]) -> Option<Vec<u8>> {
    let doc = Doc::decode(&case.before)?;
    let (text, _) = engine::apply_at(&doc.text, std::slice::from_ref(&case.edit), lenient).ok()?;
    Some(doc.encode(&text))
}

fn report(cases: &[Case], files: &[Source]) {
    println!("edit benchmark: {} edit calls over {} files, each run with exact matching alone and with the normalisation passes", cases.len(), {
        let mut used: Vec<usize> = cases.iter().map(|c| c.file).collect();
        used.sort();
        used.dedup();
        used.len()
    });
    for (label, lenient) in [
        ("exact only", &[][..]),
        ("with normalisation", &Level::FUZZY[..]),
    ] {
        let mut total = Tally::default();
        println!("\n{label}:");
        println!(
            "  {:<14} {:>5} {:>9} {:>8} {:>8}",
            "drift", "cases", "applied", "refused", "wrong"
        );
        for kind in KINDS {
            let mut t = Tally::default();
            let mut n = 0;
            for case in cases.iter().filter(|c| c.kind == kind) {
                n += 1;
                match (run(case, lenient), &case.expect) {
                    (None, _) => {
                        t.refused += 1;
                        if !case.unique {
                            t.refused_rightly += 1;
                        }
                    }
                    (Some(got), Some(want)) if &got == want => t.correct += 1,
                    (Some(_), _) => {
                        t.wrong += 1;
                        eprintln!(
                            "WRONG ({label}, {kind:?}) in {}: {:?}",
                            files[case.file].path.display(),
                            case.edit.old
                        );
                    }
                }
            }
            println!(
                "  {:<14} {n:>5} {:>9} {:>8} {:>8}",
                format!("{kind:?}"),
                t.correct,
                t.refused,
                t.wrong
            );
            total.correct += t.correct;
            total.refused += t.refused;
            total.refused_rightly += t.refused_rightly;
            total.wrong += t.wrong;
        }
        println!(
            "  total: {} applied correctly, {} refused ({} of them rightly: repeated or stale text), {} wrongly applied",
            total.correct, total.refused, total.refused_rightly, total.wrong
        );
    }
}

/// One `edit_file` call, end to end (read, match, diff for the approval,
/// re-read, atomic write with fsync), on a 10 MB file.
fn time_big_file(files: &[Source]) {
    use buddy::tools::edit::EditFileTool;
    use buddy::tools::{approval::AlwaysApprove, Tool, ToolContext};
    let mut text = String::new();
    let mut i = 0;
    let mut marked = false;
    while text.len() < 10 << 20 {
        text.push_str(&files[i % files.len()].text);
        i += 1;
        // Once, half way through the bytes (not the file count: with many
        // sources 10 MB is reached before half of them).
        if !marked && text.len() >= 5 << 20 {
            text.push_str("    let bench_marker = 0;\n");
            marked = true;
        }
    }
    let dir = std::env::temp_dir().join(format!("buddy-edit-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("big.rs");
    std::fs::write(&path, &text).expect("write the big file");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ctx = ToolContext::local(dir.clone(), std::sync::Arc::new(AlwaysApprove));
    let tool = EditFileTool::new(16_000);
    let timed = |old: String, new: String| -> Duration {
        let start = Instant::now();
        let out = rt.block_on(tool.execute(
            serde_json::json!({"path": "big.rs", "old_string": old, "new_string": new}),
            &ctx,
        ));
        let took = start.elapsed();
        if let Err(e) = out {
            panic!("the timed edit failed: {e}");
        }
        took
    };
    let runs = 9;
    let mut exact = Vec::new();
    let mut drifted = Vec::new();
    for k in 0..runs {
        exact.push(timed(
            format!("let bench_marker = {k};"),
            format!("let bench_marker = {};", k + 1),
        ));
    }
    for k in runs..2 * runs {
        // Trailing blanks and no indentation: found by the line passes.
        drifted.push(timed(
            format!("let bench_marker = {k};  \n"),
            format!("let bench_marker = {};\n", k + 1),
        ));
    }
    // The same edit without the file system: decode, match, diff, encode.
    let bytes = std::fs::read(&path).expect("read the big file");
    let mut memory = Vec::new();
    for k in 2 * runs..3 * runs {
        let start = Instant::now();
        let doc = Doc::decode(&bytes).expect("text");
        let edit = Edit {
            old: format!("let bench_marker = {};", 2 * runs),
            new: format!("let bench_marker = {};", k + 1),
            replace_all: false,
        };
        let (text, _) = engine::apply(&doc.text, &[edit]).expect("placed");
        let diff = buddy::tools::diff::unified_excerpt("big.rs", &doc.text, &text);
        let out = doc.encode_owned(text);
        memory.push(start.elapsed());
        assert!(!diff.is_empty() && out.len() > 1);
    }
    let stats = |v: &mut Vec<Duration>| {
        v.sort();
        (v[0], v[v.len() / 2])
    };
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let (min, med) = stats(&mut exact);
    println!(
        "\nedit_file on a {:.1} MB file ({} lines), {runs} runs:",
        size as f64 / 1e6,
        text.lines().count()
    );
    println!(
        "  exact match:   min {:.1} ms, median {:.1} ms",
        ms(min),
        ms(med)
    );
    let (min, med) = stats(&mut drifted);
    println!(
        "  drifted match: min {:.1} ms, median {:.1} ms",
        ms(min),
        ms(med)
    );
    let (min, med) = stats(&mut memory);
    println!(
        "  in memory (decode, match, diff, encode; no read or write): min {:.1} ms, median {:.1} ms",
        ms(min),
        ms(med)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
