//! `buddy completions SHELL` and `buddy man`: both generated from the same
//! clap definitions as the parser, so they cannot drift from the real flags.

use super::{AppError, Exit};
use crate::cli::{Cli, ManArgs};
use clap::CommandFactory;
use std::io::Write;

pub fn completions(shell: clap_complete::Shell) -> Result<Exit, AppError> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "buddy", &mut out);
    write_stdout(&out)
}

pub fn man_page(args: &ManArgs) -> Result<Exit, AppError> {
    let root = Cli::command();
    if let Some(dir) = &args.out_dir {
        let failed = |e: std::io::Error| {
            AppError::Failed(format!("cannot write man pages to {}: {e}", dir.display()))
        };
        std::fs::create_dir_all(dir).map_err(failed)?;
        // One page per command, named as man expects: buddy.1, buddy-exec.1…
        clap_mangen::generate_to(root, dir).map_err(failed)?;
        eprintln!("man pages written to {}", dir.display());
        return Ok(Exit::Ok);
    }
    let page = match &args.command {
        None => root,
        Some(name) => {
            let sub = root
                .get_subcommands()
                .find(|c| c.get_name() == name)
                .ok_or_else(|| AppError::Usage(format!("no such command: {name}")))?;
            sub.clone()
                .name(format!("buddy-{name}"))
                .display_name(format!("buddy-{name}"))
                .version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| AppError::Failed(format!("cannot render the man page: {e}")))?;
    write_stdout(&out)
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
