//! The REPL's slash commands: their names, parsing of a typed line into one,
//! and which may run while a task is busy. Pure functions; acting on a
//! command is the REPL's job.

use std::time::Duration;

/// Every command the REPL knows, for completion and suggestions.
pub const NAMES: &[&str] = &[
    "/status", "/context", "/compact", "/ps", "/kill", "/timeout", "/approve", "/model",
    "/session", "/login", "/help", "/quit", "/exit", "/q",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApproveArg {
    Ask,
    All,
    None,
    For(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    Status,
    Context,
    Compact,
    Ps,
    Kill(u64),
    Timeout {
        after: Duration,
        task: Option<u64>,
    },
    Approve(Option<ApproveArg>),
    Model(Option<String>),
    /// `/login [provider|profile]`
    Login(Option<String>),
    SessionList,
    SessionResume(String),
    SessionNew,
    Help,
    Quit,
}

impl Slash {
    /// What may run while a task is busy: everything but replacing the
    /// model or the conversation under it.
    pub fn allowed_while_busy(&self) -> bool {
        !matches!(
            self,
            Slash::Model(Some(_))
                | Slash::SessionNew
                | Slash::SessionResume(_)
                | Slash::Compact
                | Slash::Quit
        )
    }
}

/// `None` when `line` is not a slash command (an ordinary prompt); otherwise the
/// command or a one-line reason it is not one.
pub fn parse(line: &str) -> Option<Result<Slash, String>> {
    let line = line.trim();
    if !line.starts_with('/') {
        return None;
    }
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or("/");
    let args: Vec<&str> = words.collect();
    Some(parse_named(name, &args))
}

fn parse_named(name: &str, args: &[&str]) -> Result<Slash, String> {
    let no_args = |s: Slash| {
        if args.is_empty() {
            Ok(s)
        } else {
            Err(format!("{name} takes no arguments"))
        }
    };
    match name {
        "/status" => no_args(Slash::Status),
        "/context" => no_args(Slash::Context),
        "/compact" => no_args(Slash::Compact),
        "/ps" => no_args(Slash::Ps),
        "/help" => no_args(Slash::Help),
        "/quit" | "/exit" | "/q" => no_args(Slash::Quit),
        "/kill" => match args {
            [id] => task_id(id).map(Slash::Kill),
            _ => Err("usage: /kill <task id> (see /ps)".into()),
        },
        "/timeout" => match args {
            [d] => Ok(Slash::Timeout {
                after: duration(d)?,
                task: None,
            }),
            [d, id] => Ok(Slash::Timeout {
                after: duration(d)?,
                task: Some(task_id(id)?),
            }),
            _ => Err("usage: /timeout <duration> [task id], e.g. /timeout 5m".into()),
        },
        "/approve" => match args {
            [] => Ok(Slash::Approve(None)),
            ["ask"] => Ok(Slash::Approve(Some(ApproveArg::Ask))),
            ["all"] => Ok(Slash::Approve(Some(ApproveArg::All))),
            ["none"] => Ok(Slash::Approve(Some(ApproveArg::None))),
            [d] => duration(d)
                .map(|d| Slash::Approve(Some(ApproveArg::For(d))))
                .map_err(|_| "usage: /approve ask|all|none|<duration such as 10m>".to_string()),
            _ => Err("usage: /approve ask|all|none|<duration such as 10m>".into()),
        },
        "/model" => match args {
            [] => Ok(Slash::Model(None)),
            [m] => Ok(Slash::Model(Some(m.to_string()))),
            _ => Err("usage: /model [name|index]".into()),
        },
        "/login" => match args {
            [] => Ok(Slash::Login(None)),
            [t] => Ok(Slash::Login(Some(t.to_string()))),
            _ => Err("usage: /login [provider|profile]".into()),
        },
        "/session" => match args {
            [] => Ok(Slash::SessionList),
            ["new"] => Ok(Slash::SessionNew),
            ["resume", id] => Ok(Slash::SessionResume(id.to_string())),
            _ => Err("usage: /session | /session resume <id|last> | /session new".into()),
        },
        _ => Err(match nearest(name) {
            Some(n) => format!("unknown command {name}; did you mean {n}?"),
            None => format!("unknown command {name}; /help lists the commands"),
        }),
    }
}

fn task_id(s: &str) -> Result<u64, String> {
    s.trim_start_matches('#')
        .parse()
        .map_err(|_| format!("\"{s}\" is not a task id (see /ps)"))
}

/// `90`, `90s`, `500ms`, `10m`, `1h`, `1h30m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    crate::clock::parse_duration(s)
}

/// The known command closest to `name`, if it is close enough to be a typo.
pub fn nearest(name: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .map(|n| (edit_distance(name, n), *n))
        .filter(|(d, n)| *d <= 2.max(n.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

pub const HELP: &str = "\
/status                  model, endpoint, tools, session and token counters
/context                 estimated context use and token totals
/compact                 shrink the context now: old tool output, then a
                         summary of older turns
/ps                      running tasks
/kill <id>               cancel a task
/timeout <dur> [id]      give a task a deadline (e.g. /timeout 5m)
/approve ask|all|none|<dur>
                         shell approvals: ask each time, approve all, deny all,
                         or approve all for a while (e.g. /approve 10m)
/model [name|index]      switch model profile (no argument: pick from a list)
/login [provider]         log in to a provider (device code; default: this profile's)
/session                 list this directory's sessions
/session resume <id|last>
                         switch to a saved session
/session new             start a fresh session
/help                    this list
/quit, /exit, /q         leave (Ctrl-D on an empty line too)

While a task runs: Enter steers it (the message joins as soon as the running
tool finishes), Tab queues a follow-up for when it is done, Alt-Up takes queued
messages back, Esc or Ctrl-C interrupts.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_not_a_command() {
        assert_eq!(parse("hello /status"), None);
        assert_eq!(parse("  /ps "), Some(Ok(Slash::Ps)));
    }

    #[test]
    fn arguments_are_parsed_and_checked() {
        assert_eq!(parse("/kill 3"), Some(Ok(Slash::Kill(3))));
        assert_eq!(parse("/kill #3"), Some(Ok(Slash::Kill(3))));
        assert!(parse("/kill x").unwrap().is_err());
        assert_eq!(
            parse("/timeout 5m"),
            Some(Ok(Slash::Timeout {
                after: Duration::from_secs(300),
                task: None
            }))
        );
        assert_eq!(
            parse("/timeout 1h30m 2"),
            Some(Ok(Slash::Timeout {
                after: Duration::from_secs(5400),
                task: Some(2)
            }))
        );
        assert_eq!(
            parse("/approve 10m"),
            Some(Ok(Slash::Approve(Some(ApproveArg::For(
                Duration::from_secs(600)
            )))))
        );
        assert_eq!(
            parse("/approve all"),
            Some(Ok(Slash::Approve(Some(ApproveArg::All))))
        );
        assert!(parse("/approve sometimes").unwrap().is_err());
        assert_eq!(
            parse("/session resume last"),
            Some(Ok(Slash::SessionResume("last".into())))
        );
        assert_eq!(parse("/session new"), Some(Ok(Slash::SessionNew)));
        assert_eq!(parse("/model 2"), Some(Ok(Slash::Model(Some("2".into())))));
        assert!(parse("/status now").unwrap().is_err());
        assert_eq!(parse("/q"), Some(Ok(Slash::Quit)));
    }

    #[test]
    fn unknown_commands_suggest_the_nearest() {
        let e = parse("/stauts").unwrap().unwrap_err();
        assert_eq!(e, "unknown command /stauts; did you mean /status?");
        let e = parse("/xyzzyplugh").unwrap().unwrap_err();
        assert!(e.contains("/help"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(duration("0").is_err());
        assert!(duration("5x").is_err());
        assert!(duration("m").is_err());
    }

    #[test]
    fn only_task_commands_run_while_busy() {
        assert!(Slash::Ps.allowed_while_busy());
        assert!(Slash::Approve(None).allowed_while_busy());
        assert!(Slash::Help.allowed_while_busy());
        assert!(!Slash::Quit.allowed_while_busy());
        assert!(!Slash::SessionNew.allowed_while_busy());
    }
}
