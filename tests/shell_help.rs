//! `buddy completions` and `buddy man`, checked by using them: bash loads the
//! completion script and completes real subcommands and flags; the man page
//! names every subcommand.

use crate::support;

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
    assert_eq!(
        complete(&out.stdout, &["buddy", "ex"]),
        vec!["exec", "export"]
    );
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

/// The sections clap cannot derive, on buddy's own page.
const SECTIONS: [&str; 6] = [
    "INTERACTIVE USE",
    "CONFIGURATION",
    "EXIT STATUS",
    "ENVIRONMENT",
    "FILES",
    "EXAMPLES",
];

#[test]
fn man_page_documents_keys_commands_config_environment_files_and_exit_status() {
    let out = BuddyCmd::new().arg("man").run();
    out.assert_success();
    let page = &out.stdout;
    for section in SECTIONS {
        assert!(
            page.contains(&format!(".SH \"{section}\""))
                || page.contains(&format!(".SH {section}\n")),
            "no {section} section"
        );
    }
    // Every command the REPL knows: one added without a line in /help fails here.
    for name in buddy::ui::repl::commands::NAMES {
        assert!(page.contains(name), "the REPL command {name} is missing");
    }
    for key in ["Ctrl\\-R", "Alt\\-Up", "Esc"] {
        assert!(page.contains(key), "the key {key} is missing");
    }
    for needle in [
        "[discovery]",
        "local_servers",
        "compact_at",
        "BUDDY_BASE_URL",
        "BUDDY_API_KEY",
        "NO_COLOR",
        "SSL_CERT_FILE",
        "BUDDY_SERVE_TOKEN",
        "auth.json",
        "trusted.json",
        "AGENTS.md",
        ".buddyx/sessions/",
        "git diff | buddy exec",
    ] {
        assert!(page.contains(needle), "{needle} is missing from the page");
    }
    for code in ["0", "1", "2", "130"] {
        assert!(
            page.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "exit status {code} is missing"
        );
    }

    let exec = BuddyCmd::new().args(["man", "exec"]).run();
    exec.assert_success();
    assert!(exec.stdout.contains(".SH EXAMPLES"), "{}", exec.stdout);
    assert!(
        exec.stdout.contains("<stdin>"),
        "the pipe's form is missing"
    );
    assert!(
        exec.stdout.contains("buddy exec \\-\\- "),
        "the `--` example is missing"
    );
}

/// groff, when installed, reads every page without a warning (with `-k`, the
/// UTF-8 preprocessing `man -l` does too).
#[test]
fn man_pages_render_without_warnings() {
    if Command::new("groff").arg("--version").output().is_err() {
        eprintln!("note: skipping: groff is not installed");
        return;
    }
    for args in [vec!["man"], vec!["man", "exec"], vec!["man", "serve"]] {
        let out = BuddyCmd::new().args(args.clone()).run();
        out.assert_success();
        let mut groff = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-rLL=80n", "-P-cbou"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run groff");
        std::io::Write::write_all(
            &mut groff.stdin.take().expect("stdin"),
            out.stdout.as_bytes(),
        )
        .expect("feed groff");
        let done = groff.wait_with_output().expect("groff ran");
        let text = String::from_utf8_lossy(&done.stdout);
        assert!(done.status.success(), "groff failed on {args:?}");
        assert_eq!(
            String::from_utf8_lossy(&done.stderr),
            "",
            "groff warned on {args:?}"
        );
        assert!(text.contains("EXIT STATUS"), "{text}");
    }
}

/// What a terminal shows of `text`: ANSI colour sequences and backspace
/// overstrikes (bold, underline) taken out, `\r\n` made `\n`.
fn shown(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ parameters final-byte
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
            }
            '\u{8}' => {
                out.pop();
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// On a terminal `buddy man` shows the manual, not its roff source: through
/// `man -l -` where man is installed, as plain text where it is not. Piped,
/// it stays roff (the other tests read it so).
#[test]
fn man_on_a_terminal_shows_the_page_not_roff() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("note: skipping: script (util-linux) is not installed");
        return;
    }
    let has_man = Command::new("man").arg("--version").output().is_ok();
    let buddy = support::buddy_bin();
    // `script` gives buddy a pseudo-terminal for stdout; `cat` as the pager
    // so nothing waits for a key.
    let mut cases = vec![("no man on PATH", "/nonexistent", "BUDDY(1)")];
    if has_man {
        cases.push(("man", "/usr/local/bin:/usr/bin:/bin", "buddy(1)"));
    }
    for (case, path, header) in cases {
        let out = Command::new("script")
            .args([
                "-qec",
                &format!("PATH={path} exec '{}' man", buddy.display()),
            ])
            .arg("/dev/null")
            .env("SHELL", "/bin/sh")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "80")
            .env("TERM", "xterm")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run script");
        let text = shown(&String::from_utf8_lossy(&out.stdout));
        assert!(out.status.success(), "{case}: {text}");
        let roff: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(".TH") || l.starts_with(".SH") || l.starts_with(".TP"))
            .collect();
        assert!(
            roff.is_empty(),
            "{case}: roff lines on the terminal: {roff:?}"
        );
        assert!(!text.contains("\\fB"), "{case}: a roff font escape: {text}");
        assert!(
            text.contains(header),
            "{case}: no {header} header in:\n{text}"
        );
        assert!(text.contains("EXIT STATUS"), "{case}: {text}");
    }
}

/// The date of buddy's list prices is the same in the code, docs/USAGE.md
/// and buddy.toml.example.
#[test]
fn the_price_table_date_agrees_everywhere() {
    let date = buddy::agent::tokens::PRICES_AS_OF;
    for (file, text) in [
        ("docs/USAGE.md", include_str!("../docs/USAGE.md")),
        ("buddy.toml.example", include_str!("../buddy.toml.example")),
    ] {
        assert!(
            text.contains(&format!("taken on {date}")) || text.contains(&format!("(taken {date})")),
            "{file} does not give the prices' date {date}"
        );
        // No other date beside the word `taken`.
        for (at, _) in text.match_indices("taken") {
            let near = &text[at..(at + 20).min(text.len())];
            if near.contains("20") {
                assert!(near.contains(date), "{file}: {near:?} is not {date}");
            }
        }
    }
}
