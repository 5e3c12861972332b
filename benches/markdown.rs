//! Markdown rendering figures for docs/PERFORMANCE.md: the cost of the first
//! coloured code block (the hand-written lexer in `src/ui/markdown/highlight.rs`;
//! nothing is loaded or compiled on first use) and render throughput for long
//! answers fed as small streamed deltas.
//!
//! ```text
//! cargo bench --bench markdown
//! ```

use buddy::ui::markdown::MarkdownRenderer;
use std::time::{Duration, Instant};

/// About `bytes` of a typical answer: prose, lists, a table, code blocks.
fn mixed_answer(bytes: usize) -> String {
    let section = "## Deploying the service\n\n\
        The **deploy** step builds the image, pushes it and rolls the pods one at a time; \
        if a pod fails its health check the rollout stops and the old version keeps serving. \
        See [the runbook](https://example.com/runbook) and `kubectl rollout status`.\n\n\
        1. Build the image with `docker build -t svc .`\n\
        2. Push it to the registry\n   - check the tag first\n   - then push\n\
        3. Roll out\n\n\
        | step | time | notes |\n|---|---:|---|\n| build | 42 s | cached layers help |\n| push | 8 s | |\n\n\
        ```rust\nfn main() {\n    let cfg = Config::load(\"buddy.toml\")?; // read once\n    \
        for pod in cfg.pods() {\n        roll(pod, Duration::from_secs(30));\n    }\n}\n```\n\n\
        > Note: a failed rollout never deletes the old replica set.\n\n";
    section.repeat(bytes / section.len() + 1)
}

/// Feeds `doc` in `chunk`-byte deltas (on character boundaries) and returns
/// the time taken and the output length.
fn feed(doc: &str, chunk: usize, width: usize, colour: bool) -> (Duration, usize) {
    let mut r = MarkdownRenderer::new(width, colour);
    let mut out = 0;
    let t = Instant::now();
    let mut rest = doc;
    while !rest.is_empty() {
        let mut n = chunk.min(rest.len());
        while !rest.is_char_boundary(n) {
            n += 1;
        }
        let (d, tail) = rest.split_at(n);
        out += r.push(d).len();
        rest = tail;
    }
    out += r.finish().len();
    (t.elapsed(), out)
}

fn report(label: &str, doc: &str, chunk: usize, colour: bool) {
    // Best of three: the machine is shared, the minimum is the code's cost.
    let best = (0..3)
        .map(|_| feed(doc, chunk, 100, colour).0)
        .min()
        .unwrap_or_default();
    let mb = doc.len() as f64 / 1e6;
    println!(
        "{label:<56} {:6.1} ms  {:6.1} MB/s  ({:.2} MB)",
        best.as_secs_f64() * 1e3,
        mb / best.as_secs_f64(),
        mb
    );
}

fn main() {
    // First code block: the first use of the lexer's keyword tables (static
    // data; nothing is deserialised or compiled, at start-up or here).
    let mut r = MarkdownRenderer::new(100, true);
    let t = Instant::now();
    let first = r.push("```rust\nfn main() {}\n");
    let first_block = t.elapsed();
    let t = Instant::now();
    let mut r2 = MarkdownRenderer::new(100, true);
    let second = r2.push("```python\ndef main(): pass\n");
    let second_block = t.elapsed();
    assert!(!first.is_empty() && !second.is_empty());
    println!(
        "first coloured code block                               {:6.2} ms",
        first_block.as_secs_f64() * 1e3
    );
    println!(
        "a later code block in another language                  {:6.2} ms",
        second_block.as_secs_f64() * 1e3
    );

    let mixed = mixed_answer(1 << 20);
    report(
        "1 MB mixed answer, colour, 16-byte deltas",
        &mixed,
        16,
        true,
    );
    report(
        "1 MB mixed answer, no colour, 16-byte deltas",
        &mixed,
        16,
        false,
    );
    let prose = "word ".repeat(200_000);
    report(
        "1 MB single paragraph, no newline, 16-byte deltas",
        &prose,
        16,
        true,
    );
    let code = format!(
        "```rust\n{}```\n",
        "    let value = compute(&input, 42); // a comment\n".repeat(20_000)
    );
    report(
        "1 MB code block (rust), colour, 64-byte deltas",
        &code,
        64,
        true,
    );
}
