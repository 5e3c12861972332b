//! The tmux pane tools: `capture-pane` reads what a pane shows, `send-keys`
//! types keys and text into it, for driving interactive programs that
//! `run_shell` cannot. Both are registered only when shell work is
//! tmux-backed; text typed with `send-keys` reaches a shell, so it goes
//! through the same denylist and approval as `run_shell`.

use super::approval::{Approval, ApprovalRequest};
use super::shell::parse_duration;
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::host::tmux::{CaptureOptions, SendItem, TmuxTarget};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

fn pane_of(ctx: &ToolContext) -> Result<&TmuxTarget, ToolError> {
    ctx.pane.as_deref().ok_or_else(|| {
        ToolError::Failed("tmux-backed execution is off, so there is no pane to use".into())
    })
}

pub struct CapturePaneTool {
    max_output_chars: usize,
}

impl CapturePaneTool {
    pub fn new(max_output_chars: usize) -> Self {
        CapturePaneTool { max_output_chars }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaptureArgs {
    /// tmux target pane (e.g. %3 or session:window.pane); default the shared pane.
    #[serde(default)]
    pane: Option<String>,
    /// First line: 0 is the top of the screen, negative numbers reach into scrollback, "-" is the start of history.
    #[serde(default)]
    #[schemars(schema_with = "integer_or_string")]
    start: Option<Value>,
    /// Last line; "-" is the bottom of the screen.
    #[serde(default)]
    #[schemars(schema_with = "integer_or_string")]
    end: Option<Value>,
    /// Join lines the terminal wrapped.
    #[serde(default)]
    join_wrapped: bool,
    /// Capture the alternate screen (full-screen programs); falls back to the normal screen when there is none.
    #[serde(default)]
    alternate_screen: bool,
    /// Wait this long first (seconds or "2s"), for polling.
    #[serde(default)]
    #[schemars(schema_with = "crate::tools::shell::number_or_string")]
    delay: Option<Value>,
}

/// A line number, or `-` (read by `line_bound`).
fn integer_or_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["integer", "string"]})
}

/// A capture line bound: an integer, or `-` for the very start or end.
fn line_bound(name: &str, v: Option<Value>) -> Result<Option<String>, ToolError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.is_i64() => Ok(Some(n.to_string())),
        Some(Value::String(s)) if s == "-" || s.trim().parse::<i64>().is_ok() => {
            Ok(Some(s.trim().to_string()))
        }
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "invalid {name} {other}: use a line number (negative for scrollback) or \"-\""
        ))),
    }
}

#[async_trait]
impl Tool for CapturePaneTool {
    fn name(&self) -> &'static str {
        "capture-pane"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "capture-pane",
            "Show the text of a tmux pane (by default the shared pane's visible screen), to follow a command started with wait=false or an interactive program.",
            crate::tools::schema::of::<CaptureArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: CaptureArgs = parse_args(args)?;
        let pane = pane_of(ctx)?;
        let delay = match &args.delay {
            Some(v) => Some(parse_duration(v)?),
            None => None,
        };
        // Polling is for seconds, not hours.
        let delay = delay.map(|d| d.min(std::time::Duration::from_secs(300)));
        let opts = CaptureOptions {
            pane: args.pane,
            start: line_bound("start", args.start)?,
            end: line_bound("end", args.end)?,
            join_wrapped: args.join_wrapped,
            alternate: args.alternate_screen,
            delay,
        };
        let (text, note) = pane
            .capture(&opts)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let text = if text.trim().is_empty() {
            "(the pane is blank)".to_string()
        } else {
            text
        };
        Ok(ToolOutput::text(match note {
            Some(n) => format!("note: {n}\n{text}"),
            None => text,
        }))
    }
}

/// Typed text goes through the same approval (denylist included) as
/// `run_shell`; named keys alone do not.
pub struct SendKeysTool;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendArgs {
    /// tmux target pane; default the shared pane.
    #[serde(default)]
    pane: Option<String>,
    /// Literal text to type.
    #[serde(default)]
    text: Option<String>,
    /// Named keys: Enter, Escape, Tab, BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1..F12, C-c, C-d, C-z, M-x, or a single character.
    #[serde(default)]
    keys: Vec<String>,
    /// Press Enter at the end.
    #[serde(default)]
    enter: bool,
}

#[async_trait]
impl Tool for SendKeysTool {
    fn name(&self) -> &'static str {
        "send-keys"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "send-keys",
            "Type into a tmux pane (default the shared pane) to drive interactive programs: first `text` literally, then the named `keys` in order, then Enter if `enter` is true. Read the result with capture-pane.",
            crate::tools::schema::of::<SendArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        1000
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SendArgs = parse_args(args)?;
        let pane = pane_of(ctx)?;
        let mut items = Vec::new();
        if let Some(t) = args.text.as_ref().filter(|t| !t.is_empty()) {
            items.push(SendItem::Text(t.clone()));
        }
        for k in &args.keys {
            crate::host::tmux::check_key(k)
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
            items.push(SendItem::Key(k.clone()));
        }
        if args.enter {
            items.push(SendItem::Key("Enter".into()));
        }
        if items.is_empty() {
            return Err(ToolError::InvalidArguments(
                "nothing to send: give `text`, `keys` or `enter`".into(),
            ));
        }
        if let Some(text) = &args.text {
            // Typed text can run anything a shell command can.
            let request = ApprovalRequest {
                call_id: ctx.call_id.clone(),
                tool: "send-keys".into(),
                actor: ctx.target.actor(),
                command: text.clone(),
                detail: None,
                read_only: false,
            };
            match ctx.approver.approve(request).await {
                Approval::Approved => {}
                Approval::Denied { reason } => {
                    return Ok(ToolOutput::text(format!("text not sent: {reason}")))
                }
                Approval::Refused { reason } => {
                    return Err(ToolError::Failed(format!("text refused: {reason}")))
                }
            }
        }
        let sent = pane
            .send(args.pane.as_deref(), &items)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let what: Vec<String> = items
            .iter()
            .map(|i| match i {
                SendItem::Text(t) => format!("text {t:?}"),
                SendItem::Key(k) => k.clone(),
            })
            .collect();
        Ok(ToolOutput::text(format!(
            "sent to pane {sent}: {}; use capture-pane to see the effect",
            what.join(", ")
        )))
    }
}
