//! The REPL's slash commands: their names, parsing of a typed line into one,
//! and which may run while a task is busy. Pure functions; acting on a
//! command is the REPL's job.

use std::time::Duration;

/// Every command the REPL knows, for completion and suggestions.
pub const NAMES: &[&str] = &[
    "/status",
    "/context",
    "/compact",
    "/ps",
    "/kill",
    "/timeout",
    "/approve",
    "/model",
    "/session",
    "/rewind",
    "/fork",
    "/clear",
    "/init",
    "/login",
    "/mcp",
    "/skills",
    "/help",
    "/quit",
    "/exit",
    "/q",
    "/export",
    "/jobs",
    "/subagents",
    "/plan",
];

/// The commands with one line each, in the order the completion menu lists
/// them (aliases of `/quit` left out).
pub const DESCRIBED: &[(&str, &str)] = &[
    ("/help", "list the commands and keys"),
    (
        "/status",
        "model, endpoint, tools, session and token counters",
    ),
    ("/context", "estimated context use and token totals"),
    (
        "/compact",
        "shrink the context now: /compact [what the summary should keep]",
    ),
    ("/model", "switch model profile or model id"),
    ("/approve", "shell approvals: ask, all, none or for a while"),
    (
        "/plan",
        "plan mode on or off: only read-only tools run until the plan is accepted",
    ),
    ("/session", "list, resume or start sessions"),
    (
        "/rewind",
        "take the code and/or conversation back to before a turn",
    ),
    (
        "/fork",
        "continue in a new session that shares this one's past",
    ),
    ("/clear", "clear the screen and start a fresh conversation"),
    ("/export", "write this session as Markdown: /export [file]"),
    ("/login", "log in to a provider"),
    ("/mcp", "MCP servers: state, tools and last error"),
    ("/skills", "the skills the model can read"),
    ("/ps", "running tasks"),
    ("/jobs", "background jobs the model started"),
    (
        "/subagents",
        "the sub-agents of this conversation and their tool calls",
    ),
    ("/kill", "cancel a task: /kill <id>"),
    ("/timeout", "give a task a deadline: /timeout 5m [id]"),
    ("/quit", "leave (also /exit, /q, Ctrl-D)"),
];

/// Commands that are only usage errors without an argument: picking one
/// from the menu with Enter leaves it in the input for the argument.
pub const NEED_ARGUMENTS: &[&str] = &["/kill", "/timeout"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApproveArg {
    Ask,
    All,
    None,
    For(Duration),
    /// `/approve remove N`: drop the Nth "always" rule `/approve` lists.
    Remove(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    Status,
    Context,
    /// `/compact [focus]`: compact now; the words after it (if any) are an
    /// instruction to the summariser.
    Compact(Option<String>),
    Ps,
    /// `/jobs`: the session's background jobs (`Op::ListJobs`).
    Jobs,
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
    /// `/clear`: a fresh conversation, as `/session new`, on a cleared screen.
    Clear,
    /// `/rewind`: pick a turn, restore the code, the conversation or both.
    Rewind,
    /// `/fork`: go on in a new session branched from this one.
    Fork,
    /// `/export [FILE]`: write this session's Markdown to FILE, or to
    /// `buddy-<id>.md` in the working directory.
    Export(Option<String>),
    Help,
    Quit,
    /// `/init`: ask the model to write the project's AGENTS.md.
    Init,
    /// `/mcp`: the MCP servers' state, tools and last errors.
    Mcp,
    /// `/skills`: list the skills found.
    Skills,
    /// `/subagents`: the children seen, with their tool calls.
    Subagents,
    /// `/plan [on|off]`: plan mode toggled, or set.
    Plan(Option<bool>),
}

impl Slash {
    /// What may run while a task is busy: everything but replacing the
    /// model or the conversation under it.
    pub fn allowed_while_busy(&self) -> bool {
        !matches!(
            self,
            Slash::Model(Some(_))
                | Slash::SessionNew
                | Slash::Clear
                | Slash::SessionResume(_)
                | Slash::Compact(_)
                | Slash::Rewind
                | Slash::Fork
                | Slash::Init
                | Slash::Quit
        )
    }
}

/// Why a typed slash command is not one the REPL can run; shown as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// A command that takes no arguments was given some.
    #[error("{0} takes no arguments")]
    NoArguments(String),
    /// Wrong arguments; holds the usage line.
    #[error("{0}")]
    Usage(&'static str),
    /// Not a task number.
    #[error("\"{0}\" is not a task id (see /ps)")]
    BadTaskId(String),
    /// Not a duration; holds the parser's reason.
    #[error("{0}")]
    BadDuration(String),
    /// No such command, with the nearest known one when it looks like a typo.
    #[error("unknown command {name}; {}", unknown_hint(*.nearest))]
    Unknown {
        name: String,
        nearest: Option<&'static str>,
    },
}

/// What follows "unknown command NAME": the likely typo, or where to look.
fn unknown_hint(nearest: Option<&str>) -> String {
    match nearest {
        Some(n) => format!("did you mean {n}?"),
        None => "/help lists the commands".to_string(),
    }
}

const APPROVE_USAGE: &str =
    "usage: /approve ask|all|none|<duration such as 10m> | /approve remove <n>";

/// `None` when `line` is not a slash command (an ordinary prompt); otherwise the
/// command or a one-line reason it is not one.
pub fn parse(line: &str) -> Option<Result<Slash, CommandError>> {
    let line = line.trim();
    if !line.starts_with('/') {
        return None;
    }
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or("/");
    let args: Vec<&str> = words.collect();
    Some(parse_named(name, &args))
}

fn parse_named(name: &str, args: &[&str]) -> Result<Slash, CommandError> {
    let no_args = |s: Slash| {
        if args.is_empty() {
            Ok(s)
        } else {
            Err(CommandError::NoArguments(name.to_string()))
        }
    };
    match name {
        "/status" => no_args(Slash::Status),
        "/context" => no_args(Slash::Context),
        // The words are joined with single spaces: an instruction, not
        // text whose layout matters.
        "/compact" => Ok(Slash::Compact((!args.is_empty()).then(|| args.join(" ")))),
        "/ps" => no_args(Slash::Ps),
        "/jobs" => no_args(Slash::Jobs),
        "/help" => no_args(Slash::Help),
        "/clear" => no_args(Slash::Clear),
        "/rewind" => no_args(Slash::Rewind),
        "/fork" => no_args(Slash::Fork),
        "/init" => no_args(Slash::Init),
        "/mcp" => no_args(Slash::Mcp),
        "/skills" => no_args(Slash::Skills),
        "/subagents" => no_args(Slash::Subagents),
        "/quit" | "/exit" | "/q" => no_args(Slash::Quit),
        "/kill" => match args {
            [id] => task_id(id).map(Slash::Kill),
            _ => Err(CommandError::Usage("usage: /kill <task id> (see /ps)")),
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
            _ => Err(CommandError::Usage(
                "usage: /timeout <duration> [task id], e.g. /timeout 5m",
            )),
        },
        "/approve" => match args {
            [] => Ok(Slash::Approve(None)),
            ["ask"] => Ok(Slash::Approve(Some(ApproveArg::Ask))),
            ["all"] => Ok(Slash::Approve(Some(ApproveArg::All))),
            ["none"] => Ok(Slash::Approve(Some(ApproveArg::None))),
            ["remove", n] => n
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .map(|n| Slash::Approve(Some(ApproveArg::Remove(n))))
                .ok_or(CommandError::Usage(APPROVE_USAGE)),
            [d] => duration(d)
                .map(|d| Slash::Approve(Some(ApproveArg::For(d))))
                .map_err(|_| CommandError::Usage(APPROVE_USAGE)),
            _ => Err(CommandError::Usage(APPROVE_USAGE)),
        },
        "/model" => match args {
            [] => Ok(Slash::Model(None)),
            [m] => Ok(Slash::Model(Some(m.to_string()))),
            _ => Err(CommandError::Usage("usage: /model [name|index]")),
        },
        "/login" => match args {
            [] => Ok(Slash::Login(None)),
            [t] => Ok(Slash::Login(Some(t.to_string()))),
            _ => Err(CommandError::Usage("usage: /login [provider|profile]")),
        },
        "/plan" => match args {
            [] => Ok(Slash::Plan(None)),
            ["on"] => Ok(Slash::Plan(Some(true))),
            ["off"] => Ok(Slash::Plan(Some(false))),
            _ => Err(CommandError::Usage("usage: /plan [on|off]")),
        },
        "/export" => match args {
            [] => Ok(Slash::Export(None)),
            [file] => Ok(Slash::Export(Some(file.to_string()))),
            _ => Err(CommandError::Usage("usage: /export [file]")),
        },
        "/session" => match args {
            [] => Ok(Slash::SessionList),
            ["new"] => Ok(Slash::SessionNew),
            ["resume", id] => Ok(Slash::SessionResume(id.to_string())),
            _ => Err(CommandError::Usage(
                "usage: /session | /session resume <id|last> | /session new",
            )),
        },
        _ => Err(CommandError::Unknown {
            name: name.to_string(),
            nearest: nearest(name),
        }),
    }
}

fn task_id(s: &str) -> Result<u64, CommandError> {
    s.trim_start_matches('#')
        .parse()
        .map_err(|_| CommandError::BadTaskId(s.to_string()))
}

/// A custom slash command: a Markdown prompt file (found by `app::custom`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Custom {
    /// `/name`.
    pub name: String,
    /// One line for the menu (frontmatter `description`).
    pub description: String,
    /// The prompt, frontmatter removed.
    pub body: String,
}

/// The prompt `line` stands for when it invokes one of `customs`
/// (`/name args`); `None` for anything else.
pub fn expand_custom(line: &str, customs: &[Custom]) -> Option<String> {
    let line = line.trim();
    let (name, args) = match line.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (line, ""),
    };
    let c = customs.iter().find(|c| c.name == name)?;
    Some(expand(&c.body, args))
}

/// `body` with `$ARGUMENTS` (all of `args`) and `$1`…`$9` (its
/// whitespace-separated words; missing ones are empty) filled in. Arguments
/// a body never mentions are added after it, so none are lost.
pub fn expand(body: &str, args: &str) -> String {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + args.len());
    let mut used = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            used = true;
            rest = tail;
        } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let i = (d as u8 - b'1') as usize;
            out.push_str(words.get(i).copied().unwrap_or(""));
            used = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !used && !args.is_empty() {
        out.push_str("\n\n");
        out.push_str(args);
    }
    out
}

/// `90`, `90s`, `500ms`, `10m`, `1h`, `1h30m`.
pub fn duration(s: &str) -> Result<Duration, CommandError> {
    crate::clock::parse_duration(s).map_err(|e| CommandError::BadDuration(e.to_string()))
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

/// What `/init` asks of the model.
pub const INIT_PROMPT: &str = "Write an AGENTS.md file in the working directory for this project: \
instructions a coding agent needs to work here. Look at the project first (its layout, README, \
build files, CI configuration, tests) and then write, concisely: what the project is, how to \
build, test and lint it (exact commands), the code layout, and the conventions to follow. If an \
AGENTS.md exists, improve it instead of starting over. Keep it under 150 lines.";

pub const HELP: &str = "\
/status                  model, endpoint, tools, session and token counters
/context                 estimated context use and token totals
/compact                 shrink the context now: old tool output, then a
                         summary of older turns
/ps                      running tasks
/jobs                    background jobs the model started (run_shell with
                         background): id, state, command, run time; they
                         stop when buddy exits or the session is cleared
/subagents               the sub-agents of this conversation (the model's agent
                         tool) and their tool calls
/kill <id>               cancel a task
/timeout <dur> [id]      give a task a deadline (e.g. /timeout 5m)
/approve ask|all|none|<dur>
                         shell approvals: ask each time, approve all, deny all,
                         or approve all for a while (e.g. /approve 10m);
                         no argument: the policy and the numbered always-rules
                         (remembered ones are saved in approvals.toml)
/approve remove <n>      drop always-rule n, from the saved file too
/plan [on|off]           plan mode: only read-only tools run, and the model
                         ends it by showing a plan for you to accept
/model [name|index]      switch model profile, or model id for this profile
                         (no argument: pick from profiles and the server's models)
/login [provider]         log in to a provider (device code; default: this profile's)
/session                 list this directory's sessions
/session resume <id|last>
                         switch to a saved session
/session new             start a fresh conversation (the old one stays saved)
/rewind                  pick a turn and take the code (files the tools wrote),
                         the conversation, or both back to before it; shell
                         commands run since are listed, their effects stay
/fork                    go on in a new session that shares this one's past
                         (the original stays as it is: buddy resume ID)
/clear                   the same on a cleared screen (Ctrl-L clears the screen only)
/export [file]           write this session as Markdown to read (prompts, answers,
                         tool calls folded) to file, or buddy-ID.md here
/init                    have the model write AGENTS.md, instructions for this
                         project that every later session reads
/mcp                     MCP servers: state, tools and last error
/skills                  the skills found (.buddy/skills, ~/.config/buddy/skills)
/NAME [args]             a custom command: the prompt in .buddy/commands/NAME.md
                         or ~/.config/buddy/commands/NAME.md, $ARGUMENTS filled in
/help                    this list
/quit, /exit, /q         leave (Ctrl-D on an empty line too)

Input: / lists the commands, @path attaches a file (Tab completes both),
!command runs a command now and shows the model its output with your next
prompt, Ctrl-R searches the history, Ctrl-J or a trailing \\ starts a new line,
Ctrl-L clears the screen, Ctrl-O shows the sub-agents' tool calls.

While a task runs: Enter steers it (the message joins as soon as the running
tool finishes), Tab queues a follow-up for when it is done, Alt-Up takes queued
messages back, Esc or Ctrl-C interrupts.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_commands_fill_arguments_and_positions() {
        let c = vec![Custom {
            name: "/review".into(),
            description: "d".into(),
            body: "Review $1 against $2; all: $ARGUMENTS; cost $5 stays? $x".into(),
        }];
        assert_eq!(
            expand_custom("/review a.rs main", &c).as_deref(),
            Some("Review a.rs against main; all: a.rs main; cost  stays? $x")
        );
        assert_eq!(expand_custom("/reviewer x", &c), None);
        assert_eq!(expand("Fix it.", "now please"), "Fix it.\n\nnow please");
        assert_eq!(expand("Fix it.", ""), "Fix it.");
    }

    #[test]
    fn plain_text_is_not_a_command() {
        assert_eq!(parse("hello /status"), None);
        assert_eq!(parse("  /ps "), Some(Ok(Slash::Ps)));
        assert_eq!(parse("/jobs"), Some(Ok(Slash::Jobs)));
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
            parse("/approve remove 2"),
            Some(Ok(Slash::Approve(Some(ApproveArg::Remove(2)))))
        );
        assert!(parse("/approve remove 0").unwrap().is_err());
        assert!(parse("/approve remove x").unwrap().is_err());
        assert_eq!(
            parse("/session resume last"),
            Some(Ok(Slash::SessionResume("last".into())))
        );
        assert_eq!(parse("/session new"), Some(Ok(Slash::SessionNew)));
        assert_eq!(parse("/export"), Some(Ok(Slash::Export(None))));
        assert_eq!(parse("/plan"), Some(Ok(Slash::Plan(None))));
        assert_eq!(parse("/plan off"), Some(Ok(Slash::Plan(Some(false)))));
        assert!(parse("/plan maybe").is_some_and(|r| r.is_err()));
        assert_eq!(
            parse("/export notes/s.md"),
            Some(Ok(Slash::Export(Some("notes/s.md".into()))))
        );
        assert!(parse("/export a b").unwrap().is_err());
        assert_eq!(parse("/model 2"), Some(Ok(Slash::Model(Some("2".into())))));
        assert!(parse("/status now").unwrap().is_err());
        assert_eq!(parse("/q"), Some(Ok(Slash::Quit)));
    }

    #[test]
    fn compact_takes_the_rest_of_the_line_as_its_focus() {
        assert_eq!(parse("/compact"), Some(Ok(Slash::Compact(None))));
        assert_eq!(parse("/compact   "), Some(Ok(Slash::Compact(None))));
        assert_eq!(
            parse("/compact keep  the numbers "),
            Some(Ok(Slash::Compact(Some("keep the numbers".into()))))
        );
    }

    #[test]
    fn unknown_commands_suggest_the_nearest() {
        let e = parse("/stauts").unwrap().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown command /stauts; did you mean /status?"
        );
        let e = parse("/xyzzyplugh").unwrap().unwrap_err().to_string();
        assert!(e.contains("/help"), "{e}");
        let e = parse("/status now").unwrap().unwrap_err();
        assert_eq!(e.to_string(), "/status takes no arguments");
        let e = parse("/kill x").unwrap().unwrap_err();
        assert_eq!(e.to_string(), "\"x\" is not a task id (see /ps)");
        let e = parse("/approve sometimes").unwrap().unwrap_err();
        assert_eq!(e.to_string(), APPROVE_USAGE);
    }

    #[test]
    fn every_described_command_is_known() {
        for (name, _) in DESCRIBED {
            assert!(NAMES.contains(name), "{name}");
        }
        for name in NEED_ARGUMENTS {
            assert!(parse(name).unwrap().is_err(), "{name}");
        }
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
        assert!(Slash::Jobs.allowed_while_busy());
        assert!(Slash::Approve(None).allowed_while_busy());
        assert!(Slash::Help.allowed_while_busy());
        assert!(!Slash::Quit.allowed_while_busy());
        assert!(!Slash::SessionNew.allowed_while_busy());
        assert!(!Slash::Clear.allowed_while_busy());
    }
}
