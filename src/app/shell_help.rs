//! `buddy completions SHELL` and `buddy man`: both generated from the same
//! clap definitions as the parser, so they cannot drift from the real flags.
//! The man pages add what clap does not know (`manual.rs`): the REPL's keys
//! and commands, configuration keys, exit status, environment, files and
//! examples. On a terminal `buddy man` shows the page (through `man -l -`,
//! or as plain text from `plain.rs` where there is no `man`); piped or with
//! `--out-dir` it writes roff.

mod manual;
mod plain;

use super::{AppError, Exit};
use crate::cli::{Cli, ManArgs};
use clap::CommandFactory;
use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};

pub fn completions(shell: clap_complete::Shell) -> Result<Exit, AppError> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "buddy", &mut out);
    write_stdout(&out)
}

pub fn man_page(args: &ManArgs) -> Result<Exit, AppError> {
    if let Some(dir) = &args.out_dir {
        let failed = |e: std::io::Error| {
            AppError::Failed(format!("cannot write man pages to {}: {e}", dir.display()))
        };
        std::fs::create_dir_all(dir).map_err(failed)?;
        // One page per command, named as man expects: buddy.1, buddy-exec.1…
        let mut names = vec![None];
        names.extend(subcommands().into_iter().map(Some));
        for name in names {
            let page = render(name.as_deref())?;
            let file = match &name {
                None => "buddy.1".to_string(),
                Some(n) => format!("buddy-{n}.1"),
            };
            std::fs::write(dir.join(file), page).map_err(failed)?;
        }
        eprintln!("man pages written to {}", dir.display());
        return Ok(Exit::Ok);
    }
    let name = args.command.as_deref();
    if let Some(name) = name {
        if !subcommands().iter().any(|s| s == name) {
            return Err(super::Unknown::Command(name.into()).into());
        }
    }
    let page = render(name)?;
    // roff is for `man` and for files; a person at a terminal gets the page.
    if std::io::stdout().is_terminal() {
        if show_with_man(&page) {
            return Ok(Exit::Ok);
        }
        let text = plain::render(&String::from_utf8_lossy(&page));
        return write_stdout(text.as_bytes());
    }
    write_stdout(&page)
}

/// Shows the page through `man -l -` (formatted, in the user's pager).
/// False when there is no `man` or it could not show the page, so the
/// caller prints it as plain text instead.
fn show_with_man(page: &[u8]) -> bool {
    let child = Command::new("man")
        .args(["-l", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    // Written from a thread: man may read only part of the page before its
    // pager waits for the reader, and a full pipe must not block our wait.
    let writer = child.stdin.take().map(|mut stdin| {
        let page = page.to_vec();
        std::thread::spawn(move || {
            // A pager quit early closes the pipe; that is no error.
            let _ = stdin.write_all(&page);
        })
    });
    let status = child.wait();
    if let Some(w) = writer {
        let _ = w.join();
    }
    matches!(status, Ok(s) if s.success())
}

/// The commands that get a page of their own.
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect()
}

/// buddy's page (`None`) or a subcommand's, as roff.
fn render(name: Option<&str>) -> Result<Vec<u8>, AppError> {
    let root = Cli::command();
    let cmd = match name {
        None => root,
        Some(name) => root
            .find_subcommand(name)
            .ok_or_else(|| super::Unknown::Command(name.into()))?
            .clone()
            .name(format!("buddy-{name}"))
            .display_name(format!("buddy-{name}"))
            .version(env!("CARGO_PKG_VERSION")),
    };
    // The exit codes in `--help`'s footer get a section of their own here.
    let cmd = cmd.after_help(None::<&str>).after_long_help(None::<&str>);
    let mut flags = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut flags)
        .map_err(|e| AppError::Failed(format!("cannot render the man page: {e}")))?;
    let flags = String::from_utf8_lossy(&flags);
    let ours = manual::sections(name).render();
    // Ours go after the flag list and before the closing VERSION section.
    let page = match flags.find("\n.SH VERSION\n") {
        Some(at) => format!("{}\n{ours}{}", &flags[..at], &flags[at + 1..]),
        None => format!("{flags}{ours}"),
    };
    Ok(page.into_bytes())
}

fn write_stdout(bytes: &[u8]) -> Result<Exit, AppError> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|_| stdout.flush()) {
        // A reader that stopped early (`| head`) is not a failure.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(AppError::Failed(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(Exit::Ok),
    }
}
