//! End-to-end tests of reading and searching without asking: `read_file`
//! windows, `grep` and `glob`, called by the scripted fake provider through
//! the real binary on this host, over SSH (a real sshd on loopback, where
//! `rg` is installed) and in a busybox container (no `rg`, no git: the
//! `find` + `grep` fallback). Every target must give the same answers.

use crate::support;

use serde_json::json;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};
use support::calls::{call, result_of};
use support::container::{engine_env, Container};
use support::fake_provider::{FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::sshd::{Sshd, USER};
use support::{fake_config, BuddyCmd, TempDir};

/// 2020-01-01 00:00 UTC: the tree's files are this many hours after it, so
/// `glob`'s newest-first order is known.
const BASE: u64 = 1_577_836_800;

/// The tree every target searches: (path, content, hours after [`BASE`]).
fn tree_files() -> Vec<(&'static str, Vec<u8>, u64)> {
    let big: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    vec![
        (
            "src/main.rs",
            b"fn main() {\n    needle();\n}\n".to_vec(),
            2,
        ),
        (
            "src/lib.rs",
            b"pub fn needle() {}\n// Needle, said twice: needle\n".to_vec(),
            3,
        ),
        ("notes.txt", b"a needle here\n".to_vec(), 1),
        ("docs/guide.md", b"nothing to find\n".to_vec(), 4),
        (".hidden/secret.rs", b"needle hidden\n".to_vec(), 5),
        ("blob.bin", b"needle\n\x00\x01\x02".to_vec(), 0),
        ("big.txt", big.into_bytes(), 0),
    ]
}

/// Writes the tree under `root` on this host, with its modification times.
fn write_tree(root: &Path) {
    for (path, content, hours) in tree_files() {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        let t = UNIX_EPOCH + Duration::from_secs(BASE + hours * 3600);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
}

/// One reply calling every search tool over `root` at once.
fn search_calls(root: &str) -> Reply {
    let spec = |id: &str, name: &str, args: serde_json::Value| {
        ToolCallSpec::new(id, name, args.to_string())
    };
    Reply::tool_calls(vec![
        spec(
            "window",
            "read_file",
            json!({"path": format!("{root}/big.txt"), "offset": 500, "limit": 3, "line_numbers": true}),
        ),
        spec("lines", "grep", json!({"pattern": "needle", "path": root})),
        spec(
            "counts",
            "grep",
            json!({"pattern": "NEEDLE", "path": root, "glob": "*.rs", "ignore_case": true, "output": "count"}),
        ),
        spec(
            "files",
            "grep",
            json!({"pattern": "ne+dle", "path": root, "output": "files"}),
        ),
        spec(
            "bounded",
            "grep",
            json!({"pattern": "needle", "path": root, "limit": 2}),
        ),
        spec(
            "single",
            "grep",
            json!({"pattern": "needle", "path": format!("{root}/notes.txt")}),
        ),
        spec("rs", "glob", json!({"pattern": "**/*.rs", "path": root})),
        spec(
            "newest",
            "glob",
            json!({"pattern": "*", "path": root, "limit": 3}),
        ),
    ])
}

/// Panics unless every search call answered as it must, whatever the target.
fn assert_search_results(reqs: &[RecordedRequest], root: &str) {
    assert_eq!(
        result_of(reqs, "window"),
        "   500\tline 500\n   501\tline 501\n   502\tline 502\n\
         [read_file: lines 500-502 of 1000; the next window starts at offset=503]"
    );
    // Sorted by path; hidden, ignored and binary files left out.
    assert_eq!(
        result_of(reqs, "lines"),
        "notes.txt:1:a needle here\n\
         src/lib.rs:1:pub fn needle() {}\n\
         src/lib.rs:2:// Needle, said twice: needle\n\
         src/main.rs:2:    needle();"
    );
    assert_eq!(result_of(reqs, "counts"), "src/lib.rs:2\nsrc/main.rs:1");
    assert_eq!(
        result_of(reqs, "files"),
        "notes.txt\nsrc/lib.rs\nsrc/main.rs"
    );
    assert_eq!(
        result_of(reqs, "bounded"),
        "notes.txt:1:a needle here\n\
         src/lib.rs:1:pub fn needle() {}\n\
         [grep: 2 more matches (2 of 4 matching lines shown, in 3 files); \
         narrow the pattern, path or glob, or raise limit (at most 1000)]"
    );
    assert_eq!(
        result_of(reqs, "single"),
        format!("{root}/notes.txt:1:a needle here")
    );
    assert_eq!(result_of(reqs, "rs"), "src/lib.rs\nsrc/main.rs");
    assert_eq!(
        result_of(reqs, "newest"),
        "docs/guide.md\nsrc/lib.rs\nsrc/main.rs\n\
         [glob: 3 more files (3 of 6 shown, newest first); \
         narrow the pattern or path, or raise limit (at most 2000)]"
    );
}

#[test]
fn read_file_windows_grep_and_glob_run_in_exec_without_approval() {
    let tree = TempDir::new("search-tree");
    write_tree(tree.path());
    // .gitignore holds outside a git repository too (as `rg --no-require-git`).
    std::fs::write(tree.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir_all(tree.join("build")).unwrap();
    std::fs::write(tree.join("build/out.rs"), "needle generated\n").unwrap();
    let root = tree.path().display().to_string();
    let p = FakeProvider::start(vec![
        search_calls(&root),
        // The same run has no approver: a write is denied, so the searches
        // above cannot have been approved by anyone.
        call(
            "write",
            "write_file",
            json!({"path": "x.txt", "content": "x"}),
        ),
        Reply::text("found them"),
    ]);
    // No shell_confirm = false, no --dangerously-auto-approve, no terminal.
    let cmd = BuddyCmd::new()
        .config(fake_config(&p))
        .args(["exec", "find the needle"]);
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "found them\n");
    let reqs = p.chat_requests();
    assert_search_results(&reqs, &root);
    assert!(
        result_of(&reqs, "write").starts_with("file not written"),
        "{}",
        result_of(&reqs, "write")
    );
    assert_eq!(
        out.stderr
            .matches("needs approval but there is no terminal")
            .count(),
        1,
        "only the write asked: {}",
        out.stderr
    );
    assert!(!cmd.work_dir().join("x.txt").exists());
    // The tools are offered to the model with their arguments.
    let tools = reqs[0].json()["tools"].to_string();
    for needle in ["\"grep\"", "\"glob\"", "\"offset\"", "\"line_numbers\""] {
        assert!(tools.contains(needle), "{needle} not offered: {tools}");
    }
}

#[test]
fn a_window_past_the_end_and_a_bad_pattern_are_one_clear_error_each() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![
            ToolCallSpec::new(
                "past",
                "read_file",
                json!({"path": "three.txt", "offset": 9}).to_string(),
            ),
            ToolCallSpec::new("bad", "grep", json!({"pattern": "fn ("}).to_string()),
            ToolCallSpec::new(
                "nowhere",
                "glob",
                json!({"pattern": "*.rs", "path": "missing-dir"}).to_string(),
            ),
        ]),
        Reply::text("ok"),
    ]);
    let cmd = BuddyCmd::new()
        .config(fake_config(&p))
        .args(["exec", "look"]);
    std::fs::write(cmd.work_dir().join("three.txt"), "a\nb\nc\n").unwrap();
    cmd.run().assert_success();
    let reqs = p.chat_requests();
    let past = result_of(&reqs, "past");
    assert!(
        past.starts_with("error: offset 9 is past the end of")
            && past.ends_with("(3 lines); the last window starts at offset 3"),
        "{past}"
    );
    let bad = result_of(&reqs, "bad");
    assert!(
        bad.starts_with("error: invalid arguments: `fn (` is not a valid regular expression"),
        "{bad}"
    );
    assert!(!bad.contains('\n'), "{bad}");
    let nowhere = result_of(&reqs, "nowhere");
    assert!(
        nowhere.starts_with("error: cannot list") && nowhere.contains("missing-dir"),
        "{nowhere}"
    );
}

#[test]
fn search_over_ssh_runs_on_the_server_through_rg_with_the_same_answers() {
    assert!(
        std::process::Command::new("rg")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "this test needs ripgrep on the server side: apt-get install -y ripgrep"
    );
    let sshd = Sshd::start();
    // Under the remote user's home, readable by them; the same files this
    // host would search, so both answers can be compared.
    let tree = TempDir::new_in(Path::new(&format!("/home/{USER}")), "search");
    write_tree(tree.path());
    // Honoured by rg on the server; the find fallback (no git repository
    // here) would list build/out.rs, so its absence shows rg ran.
    std::fs::write(tree.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir_all(tree.join("build")).unwrap();
    std::fs::write(tree.join("build/out.rs"), "needle generated\n").unwrap();
    let root = tree.path().display().to_string();
    let p = FakeProvider::start(vec![search_calls(&root), Reply::text("done")]);
    let runtime = TempDir::new("xdg-runtime");
    let out = BuddyCmd::new()
        .config(fake_config(&p))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .arg("exec")
        .args(sshd.buddy_args())
        .arg("search there")
        .run();
    out.assert_success();
    assert_search_results(&p.chat_requests(), &root);
    assert!(sshd.connections() >= 1, "nothing went through sshd");
}

#[test]
fn search_in_a_container_without_rg_falls_back_to_find_and_grep_with_the_same_answers() {
    let ctr = Container::start();
    let root = "/tmp/tree with space";
    let mut script = String::from("set -e; ");
    for (path, content, hours) in tree_files() {
        let full = format!("{root}/{path}");
        let dir = &full[..full.rfind('/').unwrap()];
        let octal: String = content.iter().map(|b| format!("\\{b:03o}")).collect();
        // Hours 0-5 of 2020-01-01, as `touch -t` reads them.
        script.push_str(&format!(
            "mkdir -p '{dir}'; printf '{octal}' > '{full}'; touch -t 20200101{hours:02}00 '{full}'; "
        ));
    }
    let setup = ctr.exec(&script);
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    assert!(
        !ctr.exec("command -v rg").status.success(),
        "the busybox image has no rg"
    );
    let p = FakeProvider::start(vec![search_calls(root), Reply::text("done")]);
    let out = engine_env(BuddyCmd::new())
        .config(fake_config(&p))
        .args(["exec", "--container", ctr.name(), "search there"])
        .run();
    out.assert_success();
    assert_search_results(&p.chat_requests(), root);
}
