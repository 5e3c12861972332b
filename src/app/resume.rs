//! `buddy resume`: picks the saved session (by id, `--last`, or a picker on
//! a terminal) and hands it to the interactive start. Loading it is the
//! agent's (`Op::Resume`/`Op::Fork`); drawing the picker is `app::pick`'s.

use super::interactive::interactive;
use super::{load_settings, pick, AppError, Continue, Exit};
use crate::cli::{ResumeArgs, TargetArgs};
use crate::config::CliOverrides;
use std::io::IsTerminal;

/// `buddy resume`: the session's history, then the conversation on it.
/// Without an id on a terminal, a picker asks which session: Esc cancels
/// (exit 0, nothing was wrong), Ctrl-C interrupts (130). The settings are
/// resolved before the picker, so it draws with the one colour choice.
pub(super) async fn resume(
    args: ResumeArgs,
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let on_terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.last && args.id.is_none() && !on_terminal {
        return Err(AppError::Usage(
            "name the session to continue: `buddy resume ID` or `buddy resume --last` (`buddy sessions` lists them)".into(),
        ));
    }
    let url = super::database::store_url(args.store.as_deref());
    if url.is_some() && args.fork {
        return Err(AppError::Usage(
            "a session in the database cannot be forked (--fork with --store)".into(),
        ));
    }
    if url.is_some() && !args.last && args.id.is_none() {
        return Err(AppError::Usage(
            "name the session to continue: `buddy resume --store URL ID` or `--last` (`buddy sessions --store URL` lists them)".into(),
        ));
    }
    let resolved = load_settings(overrides, &super::workdir()).await?;
    // The lease is taken when the agent opens the session: refused, with
    // the instance that holds it, while a server runs a turn in it.
    let store = match url {
        Some(url) => Some(super::database::connect(&url, crate::session::postgres::LEASE).await?),
        None => None,
    };
    let query = match (args.last, args.id) {
        (true, _) => "last".to_string(),
        (false, Some(id)) => id,
        (false, None) => match pick::choose(resolved.style).await? {
            crate::ui::session_picker::Picked::Session(id) => id,
            crate::ui::session_picker::Picked::Cancelled => {
                eprintln!("no session resumed");
                return Ok(Exit::Ok);
            }
            crate::ui::session_picker::Picked::Interrupted => return Ok(Exit::Interrupted),
            crate::ui::session_picker::Picked::Signalled(code) => return Ok(Exit::Code(code)),
        },
    };
    let what = Continue {
        query,
        fork: args.fork,
        store,
    };
    interactive(resolved, Some(what), target_args, false).await
}
