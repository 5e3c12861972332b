//! REPL editor figures for docs/PERFORMANCE.md: the time from a key event to a
//! finished redraw (bytes ready for the terminal), with a 10,000-entry history
//! loaded from a file.
//!
//! ```text
//! cargo bench --bench repl
//! ```

use buddy::ui::repl::commands::NAMES;
use buddy::ui::repl::editor::Editor;
use buddy::ui::repl::history::History;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use std::time::{Duration, Instant};

fn key(code: KeyCode) -> Event {
    Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn stats(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{label:<52} median {:7.1} µs   p99 {:7.1} µs   max {:7.1} µs   ({} keys)",
        us(samples[samples.len() / 2]),
        us(samples[samples.len() * 99 / 100]),
        us(samples[samples.len() - 1]),
        samples.len()
    );
}

fn main() {
    let path = std::env::temp_dir().join(format!("buddy-repl-bench-{}", std::process::id()));
    let text: String = (0..10_000)
        .map(|i| format!("history entry number {i} with some words about deploying service {i}\n"))
        .collect();
    std::fs::write(&path, text).expect("history file");
    let t0 = Instant::now();
    let history = History::load(Some(path.clone()));
    let load = t0.elapsed();
    println!(
        "loaded {} history entries in {:.2} ms",
        history.len(),
        load.as_secs_f64() * 1e3
    );
    let mut editor = Editor::new("> ".into(), history, NAMES, std::path::PathBuf::from("."));
    editor.set_width(100);
    let mut out = Vec::with_capacity(4096);
    let dim = |s: &str| s.to_string();

    // Typing a 300-character prompt (wrapping over 4 rows), one key at a time.
    let mut typing = Vec::new();
    for c in "please look at the deployment logs and tell me what failed "
        .chars()
        .cycle()
        .take(300)
    {
        let t = Instant::now();
        editor.handle(&key(KeyCode::Char(c)));
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        typing.push(t.elapsed());
    }
    stats("type a character + redraw (line up to 300 chars)", typing);

    let mut motion = Vec::new();
    for i in 0..2_000 {
        let code = if i % 2 == 0 {
            KeyCode::Left
        } else {
            KeyCode::Home
        };
        let t = Instant::now();
        editor.handle(&key(code));
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        motion.push(t.elapsed());
    }
    stats("cursor motion + redraw (300-char line)", motion);

    editor.buffer.clear();
    let mut recall = Vec::new();
    for i in 0..5_000 {
        let code = if i % 3 == 2 {
            KeyCode::Down
        } else {
            KeyCode::Up
        };
        let t = Instant::now();
        editor.handle(&key(code));
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        recall.push(t.elapsed());
    }
    stats("history Up/Down + redraw (10,000 entries)", recall);

    // The slash menu: `/`, a letter, Down, then erased again, each redrawn.
    editor.buffer.clear();
    let mut slash = Vec::new();
    for i in 0..4_000 {
        let code = match i % 4 {
            0 => KeyCode::Char('/'),
            1 => KeyCode::Char('s'),
            2 => KeyCode::Down,
            _ => KeyCode::Char('x'),
        };
        let t = Instant::now();
        editor.handle(&key(code));
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        slash.push(t.elapsed());
        if i % 4 == 3 {
            editor.buffer.clear();
        }
    }
    stats("slash menu: type, filter, move + redraw", slash);

    // `@` completion in a directory of 2,000 files (the listing is cached
    // per directory; the first key pays for reading it).
    let dir = std::env::temp_dir().join(format!("buddy-repl-bench-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    for i in 0..2_000 {
        std::fs::write(dir.join(format!("file-{i:04}.txt")), "").expect("bench file");
    }
    editor.set_cwd(dir.clone());
    editor.buffer.clear();
    let mut mention = Vec::new();
    for i in 0..3_000 {
        let code = match i % 6 {
            0 => KeyCode::Char('@'),
            1 => KeyCode::Char('f'),
            2 => KeyCode::Char('i'),
            3 => KeyCode::Char('l'),
            4 => KeyCode::Char('e'),
            _ => KeyCode::Char(' '),
        };
        let t = Instant::now();
        editor.handle(&key(code));
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        mention.push(t.elapsed());
    }
    stats("@ completion, 2,000-file directory + redraw", mention);
    let _ = std::fs::remove_dir_all(&dir);

    // Ctrl-R over 10,000 entries: each typed character searches again.
    editor.buffer.clear();
    let mut search = Vec::new();
    for i in 0..2_000 {
        let ev = match i % 5 {
            0 => Event::Key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL)),
            1 => key(KeyCode::Char('9')),
            2 => key(KeyCode::Char('9')),
            3 => Event::Key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL)),
            _ => key(KeyCode::Esc),
        };
        let t = Instant::now();
        editor.handle(&ev);
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        search.push(t.elapsed());
    }
    stats("Ctrl-R search + redraw (10,000 entries)", search);

    // Typing while a Markdown answer streams, as the REPL does it: per key a
    // 16-byte delta goes through the renderer (its finished lines printed
    // above the input area, colour on), the held text becomes the live
    // preview (at most 10 lines), then the key and a full redraw.
    editor.buffer.clear();
    editor.set_status(Some(
        "[task 1] ⠋ writing the answer · 3s · Enter steers, Tab queues a follow-up, Esc interrupts"
            .into(),
    ));
    let answer = "## A heading\n\nSome *prose* with `code`, one sentence per line.\nAnd a second line of the paragraph.\n\n- an item\n- another item\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n";
    let doc: String = answer.repeat(200);
    let mut md = buddy::ui::markdown::MarkdownRenderer::new(100, true);
    let mut streaming = Vec::new();
    let mut at = 0;
    for c in "while it streams i keep typing a follow-up "
        .chars()
        .cycle()
        .take(3_000)
    {
        let t = Instant::now();
        let mut end = (at + 16).min(doc.len());
        while !doc.is_char_boundary(end) {
            end += 1;
        }
        let done = md.push(&doc[at..end]);
        at = if end == doc.len() { 0 } else { end };
        if !done.is_empty() {
            out.clear();
            editor
                .print_above(&mut out, done.trim_end_matches('\n'), dim)
                .expect("print");
        }
        let held = md.held();
        let lines: Vec<&str> = held.split('\n').collect();
        editor.set_live(Some(lines[lines.len().saturating_sub(10)..].join("\n")));
        if c == ' ' && editor.buffer.chars().len() > 200 {
            editor.buffer.clear();
        }
        editor.handle(&key(KeyCode::Char(c)));
        out.clear();
        editor.redraw(&mut out, dim).expect("redraw");
        streaming.push(t.elapsed());
    }
    stats("type + redraw while a Markdown answer streams", streaming);
    let _ = std::fs::remove_file(path);
}
