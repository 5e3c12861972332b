//! Slash commands carried out: each parsed `Slash` (`commands` parses) becomes
//! an op to the agent, an answer printed here, or a picker (`pickers`); the
//! `/login` flow runs in the background from here; the replies to `/status`
//! and `/context` are worded here.

use super::approval::{describe, policy_from_arg, rules_listing, short_duration};
use super::commands::{self, ApproveArg, Slash};
use super::{mcp_report, LoggedIn, LoginError, LoginLines, LoginRun, Repl, Want};
use crate::agent::protocol::{Op, StatusReport};
use crate::text::visible;
use tokio::sync::mpsc;

impl Repl<'_> {
    /// The sub-agents of the conversation with their tool calls (Ctrl-O,
    /// `/subagents`).
    pub(super) fn show_subagents(&mut self) {
        let lines = super::subagents::report(&self.subagents);
        self.say(&lines.join("\n"));
    }

    pub(super) fn on_command(&mut self, cmd: Slash) -> bool {
        if self.task.is_some() && !cmd.allowed_while_busy() {
            self.say("a task is running; /model, /session new|resume, /compact and /quit wait until it ends (or /kill it)");
            return false;
        }
        match cmd {
            Slash::Quit => return true,
            Slash::Help => self.say(commands::HELP),
            Slash::Mcp => {
                let text = match self.services.mcp() {
                    Some(report) => mcp_report::text(&report),
                    None => "no MCP servers configured ([mcp_servers] in buddy.toml, or `buddy mcp add`)".into(),
                };
                self.say(&text);
            }
            Slash::Subagents => self.show_subagents(),
            Slash::Skills => {
                let text = if self.opts.skills.is_empty() {
                    "no skills: put folders with a SKILL.md in .buddy/skills/ (trusted projects) or ~/.config/buddy/skills/".to_string()
                } else {
                    self.opts
                        .skills
                        .iter()
                        .map(|(n, d)| format!("{}  {}", n, visible(d)))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                self.say(&text);
            }
            Slash::Init => {
                self.send(Op::Prompt {
                    text: commands::INIT_PROMPT.into(),
                    images: Vec::new(),
                });
            }
            Slash::Ps => {
                let text = match &self.task {
                    Some(t) => format!(
                        "task {}  {}  {}",
                        t.id,
                        t.state,
                        short_duration(t.started.elapsed())
                    ),
                    None => "no tasks running".into(),
                };
                self.say(&text);
            }
            Slash::Kill(id) => match &self.task {
                Some(t) if t.id == id => {
                    self.send(Op::Interrupt);
                    self.flush_partial();
                    self.say(&format!("cancelling task {id}…"));
                }
                _ => self.say(&format!("no running task {id} (see /ps)")),
            },
            Slash::Timeout { after, task } => match &self.task {
                Some(t) if task.is_none_or(|id| id == t.id) => {
                    // The agent keeps the time; its reply says it is set.
                    let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
                    self.send(Op::SetTimeout { after_ms });
                }
                _ => self.say(&match task {
                    Some(id) => format!("no running task {id} (see /ps)"),
                    None => "no task is running".into(),
                }),
            },
            Slash::Approve(arg) => self.on_approve(arg),
            // The agent keeps the mode; its `PlanMode` reply updates ours.
            Slash::Plan(on) => {
                let on = on.unwrap_or(!self.plan_mode);
                self.send(Op::SetPlanMode { on });
            }
            Slash::Status => self.ask(Op::Status, Want::Status),
            Slash::Context => self.ask(Op::Status, Want::Context),
            Slash::Compact(focus) => {
                self.send(Op::Compact { focus });
            }
            Slash::SessionList => {
                self.send(Op::ListSessions);
            }
            Slash::Jobs => {
                self.send(Op::ListJobs);
            }
            Slash::SessionNew => {
                self.send(Op::NewSession);
            }
            Slash::Clear => {
                self.clear_screen();
                self.send(Op::NewSession);
            }
            Slash::SessionResume(query) => {
                self.send(Op::Resume { query });
            }
            Slash::Rewind => self.ask(Op::Turns, Want::Turns),
            // The session file is written as the conversation goes, so it is
            // read as it stands, even while a task runs.
            Slash::Export(file) => match self.session_id.clone() {
                None => {
                    self.say("nothing to export yet: the session is saved from the first prompt on")
                }
                Some(id) => match self.services.export(&id, file.as_deref()) {
                    Ok(path) => self.say(&format!("exported session {id} to {}", path.display())),
                    Err(why) => self.say_error(&format!("export failed: {}", visible(&why))),
                },
            },
            Slash::Fork => {
                self.send(Op::Fork { query: None });
            }
            Slash::Login(target) => self.start_login(target.as_deref()),
            Slash::Model(choice) => match choice {
                None => self.open_model_picker(),
                // A number, a profile or a model id: the agent's switcher
                // tells them apart, in one place.
                Some(choice) => {
                    self.send(Op::SwitchModel { choice });
                }
            },
        }
        false
    }

    /// `/approve`: a rule dropped, a new policy asked of the agent, or the
    /// policy and the "always" rules listed.
    fn on_approve(&mut self, arg: Option<ApproveArg>) {
        match arg {
            Some(ApproveArg::Remove(n)) => match self.services.forget(n) {
                Ok(rule) => {
                    let left = self.opts.allowed.rules();
                    self.always.retain(|a| left.iter().any(|r| r.shown == *a));
                    self.say(&format!(
                        "dropped always `{}`{}",
                        visible(&rule.shown),
                        if rule.remembered {
                            " (also from the saved rules)"
                        } else {
                            ""
                        }
                    ));
                }
                Err(e) => self.say_error(&visible(&e.to_string())),
            },
            Some(arg) => {
                if let Some(policy) = policy_from_arg(&arg, crate::clock::now_unix_ms()) {
                    self.send(Op::SetApprovalPolicy { policy });
                }
            }
            None => {
                let text = format!(
                    "approval: {}{}",
                    describe(&self.policy),
                    rules_listing(&self.opts.allowed.rules(), &self.always)
                );
                self.say(&text);
            }
        }
    }

    /// Starts the device flow in the background; the code and link appear
    /// above the prompt, which stays usable.
    fn start_login(&mut self, target: Option<&str>) {
        if self.login.is_some() {
            self.say("a login is already in progress");
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let say: LoginLines = Box::new(move |line: &str| {
            let _ = tx.send(line.to_string());
        });
        let handle = tokio::spawn(self.services.login(target, say));
        self.login = Some(LoginRun { lines: rx, handle });
    }

    pub(super) fn on_login_done(
        &mut self,
        done: Result<Result<LoggedIn, LoginError>, tokio::task::JoinError>,
    ) {
        // Lines sent just before the end are still queued.
        if let Some(mut run) = self.login.take() {
            while let Ok(line) = run.lines.try_recv() {
                self.say(&line);
            }
        }
        match done {
            Ok(Ok(done)) => {
                self.say(&done.line());
                // The active profile picks up the new tokens.
                if self.services.uses_login(&self.profile) && self.task.is_none() {
                    let choice = self.profile.clone();
                    self.ask(Op::SwitchModel { choice }, Want::LoginSwitch);
                }
            }
            Ok(Err(e)) => self.say_error(&visible(&e.to_string())),
            Err(_) => self.say("login stopped"),
        }
    }

    pub(super) fn status_text(&self, r: &StatusReport) -> String {
        let tools = &self.opts.tools;
        let cache = crate::agent::tokens::cache_note(r.cache_read_tokens, r.cache_write_tokens);
        let cost = if r.local {
            "local: free".to_string()
        } else {
            match r.cost_usd {
                Some(usd) => format!("{} this session", crate::agent::tokens::format_usd(usd)),
                None => "unknown (no price known for this model; set price in its profile)".into(),
            }
        };
        format!(
            "model      {} (profile {})\nendpoint   {}\ntools      {}\nsession    {}\ntokens     {} prompt + {} completion = {} this session; last request {} + {}{}\ncost       {}",
            r.model,
            r.profile,
            r.base_url,
            if tools.is_empty() { "none".to_string() } else { tools.join(", ") },
            r.session.as_deref().unwrap_or("(not saved yet)"),
            r.total_prompt_tokens,
            r.total_completion_tokens,
            r.total_prompt_tokens + r.total_completion_tokens,
            r.last_prompt_tokens,
            r.last_completion_tokens,
            cache,
            cost
        )
    }

    pub(super) fn context_text(r: &StatusReport) -> String {
        let cache = crate::agent::tokens::cache_note(r.cache_read_tokens, r.cache_write_tokens);
        let fill = if r.context_limit == 0 {
            0.0
        } else {
            r.context_estimate as f64 / r.context_limit as f64
        };
        format!(
            "context    ~{} of {} tokens ({:.0}%) in {} messages\ntotals     {} prompt + {} completion tokens this session{}",
            r.context_estimate,
            r.context_limit,
            fill * 100.0,
            r.messages,
            r.total_prompt_tokens,
            r.total_completion_tokens,
            cache
        )
    }
}
