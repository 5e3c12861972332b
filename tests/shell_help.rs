//! `buddy completions` and `buddy man`, checked by using them: bash loads the
//! completion script and completes real subcommands and flags; the man page
//! names every subcommand.

mod support;

use std::process::Command;
use support::BuddyCmd;

/// What bash's completion function offers for `words`, the last one being
/// the word under the cursor.
fn complete(script: &str, words: &[&str]) -> Vec<String> {
    let dir = support::TempDir::new("completions");
    let path = dir.join("buddy.bash");
    std::fs::write(&path, script).expect("write script");
    let cur = words.last().copied().unwrap_or("");
    let prev = words
        .get(words.len().saturating_sub(2))
        .copied()
        .unwrap_or("");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _buddy buddy '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &program])
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_their_flags() {
    let out = BuddyCmd::new().args(["completions", "bash"]).run();
    out.assert_success();
    assert_eq!(complete(&out.stdout, &["buddy", "ex"]), vec!["exec"]);
    assert_eq!(
        complete(&out.stdout, &["buddy", "exec", "--dang"]),
        vec!["--dangerously-auto-approve"]
    );
    let subs = complete(&out.stdout, &["buddy", ""]);
    for sub in ["exec", "resume", "sessions", "serve", "completions", "man"] {
        assert!(subs.iter().any(|s| s == sub), "{sub} missing from {subs:?}");
    }
}

#[test]
fn zsh_and_fish_scripts_are_generated() {
    let zsh = BuddyCmd::new().args(["completions", "zsh"]).run();
    zsh.assert_success();
    assert!(zsh.stdout.starts_with("#compdef buddy"), "{}", zsh.stdout);
    let fish = BuddyCmd::new().args(["completions", "fish"]).run();
    fish.assert_success();
    assert!(fish.stdout.contains("complete -c buddy"), "{}", fish.stdout);
    let bad = BuddyCmd::new().args(["completions", "tcsh"]).run();
    bad.assert_code(2);
}

#[test]
fn man_pages_cover_buddy_and_each_subcommand() {
    let out = BuddyCmd::new().arg("man").run();
    out.assert_success();
    assert!(out.stdout.contains(".TH buddy 1"), "{}", out.stdout);
    for sub in [
        "exec",
        "resume",
        "sessions",
        "models",
        "login",
        "serve",
        "completions",
    ] {
        assert!(out.stdout.contains(sub), "{sub} missing from the main page");
    }
    let exec = BuddyCmd::new().args(["man", "exec"]).run();
    exec.assert_success();
    assert!(exec.stdout.contains(".TH buddy-exec 1"), "{}", exec.stdout);
    assert!(
        exec.stdout.contains("dangerously"),
        "exec's flags are missing"
    );
    BuddyCmd::new().args(["man", "nope"]).run().assert_code(2);

    let cmd = BuddyCmd::new();
    let dir = cmd.work_dir().join("man1");
    let all = cmd.rerun(["man", "--out-dir", dir.to_str().expect("utf-8 path")]);
    all.assert_success();
    for page in ["buddy.1", "buddy-exec.1", "buddy-serve.1"] {
        assert!(dir.join(page).is_file(), "{page} not written");
    }
}
