//! The session's plan and plan mode, as tools the model calls: `todo_write`
//! replaces the plan (a short list of items with a status each, reported
//! whole as `EventKind::Plan`), and `exit_plan_mode`, offered only in plan
//! mode, shows the model's finished plan (`EventKind::PlanReady`) and asks
//! the user, through the approval gate, to switch to normal work.
//!
//! Plan mode is a flag (`PlanMode`) that `control` holds: its gate asks
//! `refusal` here about every request for consent. The plan tools read the
//! flag and clear it when the user accepts a plan. Journaling the plan is the agent loop's (`tool_round`),
//! which saves it after a `todo_write` that succeeded; front ends only render
//! the events.

use super::emitter::Emitter;
use super::protocol::{EventKind, PlanEntry};
use crate::tools::ToolSource;
use crate::tools::{parse_args, Approval, ApprovalRequest, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub const TODO_WRITE: &str = "todo_write";
pub const EXIT_PLAN_MODE: &str = "exit_plan_mode";

/// Most items a plan holds: a plan the user reads at a glance above the
/// input, and every event carries it whole.
pub const MAX_ENTRIES: usize = 50;
/// Longest item, in characters.
pub const MAX_CONTENT_CHARS: usize = 300;
/// Longest plan `exit_plan_mode` takes, in characters.
pub const MAX_PLAN_CHARS: usize = 20_000;

/// What the tools answer with: short, the plan is in the events.
const MAX_OUTPUT_CHARS: usize = 2_000;

#[derive(Deserialize)]
struct TodoArgs {
    todos: Vec<PlanEntry>,
}

#[derive(Deserialize)]
struct ExitArgs {
    plan: String,
}

/// Plan mode, shared by the op loop that sets it, the approval gate that
/// enforces it and the plan tools.
#[derive(Debug, Clone, Default)]
pub struct PlanMode(Arc<AtomicBool>);

impl PlanMode {
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }
}

/// What plan mode says to a request for consent: every tool that asks
/// would change something, so all are refused but a shell line that only
/// reads, a tool trusted to only read, and the question that ends planning.
pub fn refusal(request: &ApprovalRequest) -> Option<Approval> {
    let reads = request.read_only
        || request.tool == EXIT_PLAN_MODE
        || request.tool == "run_shell" && crate::shell::readonly::is_read_only(&request.command);
    if reads {
        return None;
    }
    let what = crate::text::one_line(&request.command, 200);
    Some(Approval::Refused {
        reason: format!(
            "plan mode: `{what}` is not read-only; only reading tools and read-only commands run while planning. Finish the plan with exit_plan_mode"
        ),
    })
}

/// The plan tools of one agent, with the plan they keep.
pub struct Planner {
    mode: PlanMode,
    emitter: Emitter,
    entries: Mutex<Vec<PlanEntry>>,
}

impl Planner {
    pub fn new(mode: PlanMode, emitter: Emitter) -> Arc<Planner> {
        Arc::new(Planner {
            mode,
            emitter,
            entries: Mutex::new(Vec::new()),
        })
    }

    pub fn entries(&self) -> Vec<PlanEntry> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts back a plan read from a session (or clears it).
    pub fn restore(&self, entries: Vec<PlanEntry>) {
        *self.entries.lock().unwrap_or_else(|p| p.into_inner()) = entries;
    }

    async fn todo_write(&self, args: Value) -> Result<ToolOutput, ToolError> {
        let TodoArgs { todos } = parse_args(args)?;
        let entries = checked(todos)?;
        let summary = summary(&entries);
        self.restore(entries.clone());
        self.emitter.emit(EventKind::Plan { entries }).await;
        Ok(ToolOutput::text(summary))
    }

    async fn exit_plan_mode(
        &self,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if !self.mode.is_on() {
            return Err(ToolError::Failed(
                "not in plan mode: go on with the work".into(),
            ));
        }
        let ExitArgs { plan } = parse_args(args)?;
        let plan = plan.trim().to_string();
        if plan.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`plan` is empty: send the plan as Markdown".into(),
            ));
        }
        if plan.chars().count() > MAX_PLAN_CHARS {
            return Err(ToolError::InvalidArguments(format!(
                "the plan is longer than {MAX_PLAN_CHARS} characters: make it shorter"
            )));
        }
        self.emitter
            .emit(EventKind::PlanReady {
                call_id: ctx.call_id.clone(),
                plan,
            })
            .await;
        let request = ApprovalRequest {
            call_id: ctx.call_id.clone(),
            tool: EXIT_PLAN_MODE.into(),
            actor: ctx.target.actor(),
            command: "leave plan mode and start the work as planned".into(),
            detail: None,
            read_only: false,
        };
        match ctx.approver.approve(request).await {
            Approval::Approved => {
                self.mode.set(false);
                self.emitter.emit(EventKind::PlanMode { on: false }).await;
                Ok(ToolOutput::text(
                    "The user approved the plan and plan mode is off: carry it out now.",
                ))
            }
            Approval::Denied { reason } | Approval::Refused { reason } => {
                Ok(ToolOutput::text(format!(
                    "Plan mode stays on ({reason}). Ask the user what to change, or revise the plan and call exit_plan_mode again."
                )))
            }
        }
    }
}

/// A `todo_write` call's arguments as the plan they make, if they make
/// one (for a view of a saved conversation).
pub fn parse_todos(arguments: &str) -> Option<Vec<PlanEntry>> {
    let args: TodoArgs = serde_json::from_str(arguments).ok()?;
    checked(args.todos).ok()
}

/// The list as the model sent it, if it fits the bounds.
fn checked(todos: Vec<PlanEntry>) -> Result<Vec<PlanEntry>, ToolError> {
    if todos.len() > MAX_ENTRIES {
        return Err(ToolError::InvalidArguments(format!(
            "{} items: a plan holds at most {MAX_ENTRIES}; merge some",
            todos.len()
        )));
    }
    let mut entries = Vec::with_capacity(todos.len());
    for mut e in todos {
        // One line each: the list is drawn one item per line.
        e.content = crate::text::one_line(e.content.trim(), MAX_CONTENT_CHARS);
        if e.content.is_empty() {
            return Err(ToolError::InvalidArguments(
                "an item has empty `content`".into(),
            ));
        }
        entries.push(e);
    }
    Ok(entries)
}

fn summary(entries: &[PlanEntry]) -> String {
    use super::protocol::PlanStatus;
    let count = |s: PlanStatus| entries.iter().filter(|e| e.status == s).count();
    format!(
        "plan updated: {} items ({} completed, {} in progress, {} pending)",
        entries.len(),
        count(PlanStatus::Completed),
        count(PlanStatus::InProgress),
        count(PlanStatus::Pending)
    )
}

fn todo_definition() -> ToolDefinition {
    ToolDefinition::function(
        TODO_WRITE,
        "Replace the session's plan, which the user sees: a short list of steps, each pending, in_progress or completed. Use it for work of several steps; keep exactly one item in_progress while working, and mark items completed as soon as they are done. Send the whole list each time.",
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "maxItems": MAX_ENTRIES,
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "maxLength": MAX_CONTENT_CHARS},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["content", "status"]
                    }
                }
            },
            "required": ["todos"]
        }),
    )
}

fn exit_definition() -> ToolDefinition {
    ToolDefinition::function(
        EXIT_PLAN_MODE,
        "You are in plan mode: only reading tools and read-only commands run. When the plan is ready, call this with the plan in Markdown; the user reads it and decides whether you start the work.",
        json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "description": "The plan, in Markdown."}
            },
            "required": ["plan"]
        }),
    )
}

#[async_trait]
impl ToolSource for Planner {
    /// buddy's own plan tools go whole, whatever the servers bring.
    fn deferrable(&self) -> bool {
        false
    }

    /// The definitions change only with plan mode.
    fn revision(&self) -> Option<u64> {
        Some(u64::from(self.mode.is_on()))
    }

    fn definitions(&self) -> Vec<ToolDefinition> {
        // Built once: asked for at every model request.
        static TODO: std::sync::OnceLock<ToolDefinition> = std::sync::OnceLock::new();
        static EXIT: std::sync::OnceLock<ToolDefinition> = std::sync::OnceLock::new();
        let mut defs = vec![TODO.get_or_init(todo_definition).clone()];
        if self.mode.is_on() {
            defs.push(EXIT.get_or_init(exit_definition).clone());
        }
        defs
    }

    fn max_output_chars(&self, name: &str) -> Option<usize> {
        let offered = name == TODO_WRITE || name == EXIT_PLAN_MODE && self.mode.is_on();
        offered.then_some(MAX_OUTPUT_CHARS)
    }

    async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match name {
            TODO_WRITE => self.todo_write(args).await,
            EXIT_PLAN_MODE => self.exit_plan_mode(args, ctx).await,
            _ => Err(ToolError::Failed(format!("unknown tool `{name}`"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(tool: &str, command: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: "c".into(),
            tool: tool.into(),
            actor: "me@here".into(),
            command: command.into(),
            detail: None,
            read_only: false,
        }
    }

    #[test]
    fn plan_mode_refuses_what_changes_and_lets_reading_through() {
        for (tool, command) in [
            ("write_file", "write_file a.txt (2 bytes, new file)"),
            ("run_shell", "touch made"),
            ("run_shell", "ls > list.txt"),
            ("apply_patch", "apply_patch: add a.txt"),
        ] {
            match refusal(&asking(tool, command)) {
                Some(Approval::Refused { reason }) => {
                    assert!(reason.starts_with("plan mode: "), "{reason}");
                    assert!(reason.contains("exit_plan_mode"), "{reason}");
                }
                other => panic!("{tool} {command}: {other:?}"),
            }
        }
        assert_eq!(refusal(&asking("run_shell", "git status")), None);
        assert_eq!(refusal(&asking(EXIT_PLAN_MODE, "leave plan mode")), None);
        let trusted = ApprovalRequest {
            read_only: true,
            ..asking("mcp_read", "mcp_read {}")
        };
        assert_eq!(refusal(&trusted), None);
    }

    #[test]
    fn a_plan_is_bounded_and_each_item_is_one_line() {
        let entry = |content: &str| PlanEntry {
            content: content.into(),
            status: super::super::protocol::PlanStatus::Pending,
        };
        let too_many = vec![entry("x"); MAX_ENTRIES + 1];
        assert!(checked(too_many).is_err());
        assert!(checked(vec![entry("  ")]).is_err());
        let long = "y".repeat(MAX_CONTENT_CHARS * 2);
        let kept = checked(vec![entry("a\nb"), entry(&long)]).unwrap();
        assert_eq!(kept[0].content, "a b");
        assert!(kept[1].content.chars().count() <= MAX_CONTENT_CHARS + 1);
        assert_eq!(
            parse_todos(r#"{"todos":[{"content":"a","status":"done"}]}"#),
            None
        );
    }
}
