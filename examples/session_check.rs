//! Checks the session files a `scripts/kill-campaign` trial left behind:
//!
//! ```text
//! session_check SESSIONS_DIR [NEEDLE…]
//! ```
//!
//! Every `*.jsonl` file must load (as `buddy resume` would read it) into a
//! valid history: every tool call answered right after its reply, no result
//! without its call. Each NEEDLE (the end marker of an answer the user saw
//! whole) must be in an assistant message. Prints one line,
//! `files=N corrupt=N lost=N`, plus a line per problem on stderr; exits 1 on
//! any problem.

use buddy::session::Store;
use buddy::wire::{Message, Role};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: session_check SESSIONS_DIR [NEEDLE…]");
        return ExitCode::from(2);
    };
    let needles: Vec<String> = args.collect();
    let store = Store::at(&dir);
    let ids = match store.ids() {
        Ok(ids) => ids,
        Err(e) => {
            eprintln!("session_check: {e}");
            return ExitCode::from(2);
        }
    };
    let (mut corrupt, mut histories) = (0, Vec::new());
    for (id, _) in &ids {
        match store.read_history(id) {
            Ok(h) => match invalid(&h) {
                None => histories.push(h),
                Some(why) => {
                    eprintln!("corrupt: {id}: {why}");
                    corrupt += 1;
                }
            },
            Err(e) => {
                eprintln!("corrupt: {e}");
                corrupt += 1;
            }
        }
    }
    let mut lost = 0;
    for needle in &needles {
        let found = histories
            .iter()
            .flatten()
            .any(|m| m.role == Role::Assistant && m.text().contains(needle.as_str()));
        if !found {
            eprintln!("lost: no answer with {needle}");
            lost += 1;
        }
    }
    println!("files={} corrupt={corrupt} lost={lost}", ids.len());
    if corrupt + lost > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Why `h` is not a history a provider accepts, if it is not.
fn invalid(h: &[Message]) -> Option<String> {
    let mut open: Vec<String> = Vec::new();
    for (i, m) in h.iter().enumerate() {
        match m.role {
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                match open.iter().position(|c| *c == id) {
                    Some(p) => {
                        open.remove(p);
                    }
                    None => return Some(format!("message {i}: a result for unknown call {id}")),
                }
            }
            _ if !open.is_empty() => {
                return Some(format!("message {i}: calls {open:?} have no result"));
            }
            Role::Assistant => open = m.calls().iter().map(|c| c.id.clone()).collect(),
            _ => {}
        }
    }
    if open.is_empty() {
        None
    } else {
        Some(format!("calls {open:?} at the end have no result"))
    }
}
