//! The checkpoint of a turn that touches 100 files, for docs/PERFORMANCE.md:
//! the time the session's checkpoint store takes to keep (and sync) the
//! previous content of 100 source files of this repository before they are
//! changed. Two shapes: one call per file, as `write_file` makes them (a
//! sync each), and the 100 files in one call, as a multi-file change can
//! (one sync). Every round changes the files first, so each round stores
//! new content, as a real turn does.
//!
//! ```text
//! cargo bench --bench checkpoint [-- --rounds N]
//! ```

use buddy::session::checkpoint::CheckpointStore;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FILES: usize = 100;

/// Up to `FILES` `.rs` files of this repository, largest tree first.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.join("src")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out.truncate(FILES);
    out
}

fn stats(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<58} min {:>7.2} ms   median {:>7.2} ms   max {:>7.2} ms",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );
}

fn main() {
    let mut rounds = 20usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(rounds);
        }
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let originals = sources(&repo);
    assert_eq!(originals.len(), FILES, "this tree has fewer source files");
    let work = std::env::temp_dir().join(format!("buddy-bench-checkpoint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let tree = work.join("tree");
    std::fs::create_dir_all(&tree).expect("temp dir");
    let mut files = Vec::new();
    let mut bytes = 0;
    for (i, src) in originals.iter().enumerate() {
        let content = std::fs::read(src).expect("read source");
        bytes += content.len();
        let dest = tree.join(format!("{i:03}.rs"));
        std::fs::write(&dest, content).expect("copy source");
        files.push(dest);
    }
    println!(
        "machine: {} cores; {FILES} files, {} KB in all; {rounds} rounds",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        bytes / 1024
    );
    let touch = |round: usize| {
        for f in &files {
            let mut content = std::fs::read(f).expect("read");
            content.extend_from_slice(format!("// round {round}\n").as_bytes());
            std::fs::write(f, content).expect("write");
        }
    };
    let log = work.join("session.checkpoints");
    let store = CheckpointStore::new(log.clone());
    let mut each = Vec::new();
    let mut batched = Vec::new();
    for round in 0..rounds {
        touch(2 * round);
        let turn = format!("{:013}-{:04}", round * 2, 0);
        let start = Instant::now();
        for f in &files {
            store
                .keep(&turn, std::slice::from_ref(f), &[], None)
                .expect("checkpoint");
        }
        each.push(start.elapsed());
        touch(2 * round + 1);
        let turn = format!("{:013}-{:04}", round * 2 + 1, 0);
        let start = Instant::now();
        store.keep(&turn, &files, &[], None).expect("checkpoint");
        batched.push(start.elapsed());
    }
    stats(
        "checkpoint of 100 files, one call (and sync) per file",
        each,
    );
    stats("checkpoint of 100 files in one call (one sync)", batched);
    let size = std::fs::metadata(&log).map_or(0, |m| m.len());
    println!("store after {} turns: {} KB", 2 * rounds, size / 1024);
    let _ = std::fs::remove_dir_all(&work);
}
