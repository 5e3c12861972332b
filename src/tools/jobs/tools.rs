//! The tools that follow a background job: `shell_output` (what it printed
//! since the last read, and whether it ended), `shell_write` (to its stdin)
//! and `shell_kill` (stop it). Jobs are started by `run_shell` with
//! `"background": true` and kept in the session's table (`ToolContext::jobs`);
//! these tools only look them up there. Writing and stopping act on a job
//! that was approved when it started, so they ask nobody again.

use super::{Ended, Job, JobTable, MAX_WAIT};
use crate::tools::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A job id as the model sends it: `"1"`, or the number 1.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum JobId {
    Text(String),
    Number(u64),
}

impl JobId {
    fn find(&self, table: &JobTable) -> Result<Arc<Job>, ToolError> {
        let id = match self {
            JobId::Text(s) => s.trim().to_string(),
            JobId::Number(n) => n.to_string(),
        };
        table.get(&id).ok_or_else(|| {
            let ids = table.ids();
            let known = if ids.is_empty() {
                "there are no background jobs in this session".to_string()
            } else {
                format!("the jobs are {}", ids.join(", "))
            };
            ToolError::InvalidArguments(format!(
                "no background job {}; {known}",
                crate::text::one_line(&id, 40)
            ))
        })
    }
}

/// The job id: the text run_shell returned when it started the job, such as "1".
fn job_id_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "integer"]})
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputArgs {
    /// The job's id, as run_shell returned it.
    #[schemars(schema_with = "job_id_schema")]
    job_id: JobId,
    /// With no new output yet, wait up to this many milliseconds for some (or for the job to end). At most 60000; default 0.
    #[serde(default)]
    wait_ms: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The job's id, as run_shell returned it.
    #[schemars(schema_with = "job_id_schema")]
    job_id: JobId,
    /// Text sent to the job's stdin as it is; end a line with \n.
    input: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KillArgs {
    /// The job's id, as run_shell returned it.
    #[schemars(schema_with = "job_id_schema")]
    job_id: JobId,
}

/// The state line every answer about a job starts with.
fn state_line(job: &Job, ended: Option<Ended>) -> String {
    match ended {
        None => format!("job {}: running", job.id),
        Some(e) => format!("job {}: {}", job.id, e.describe()),
    }
}

/// The job's state and what it printed since the last read, at most
/// `limit` bytes of it; `run_shell` uses this for what a job printed at once.
pub(crate) async fn report(job: &Job, wait: Duration, limit: usize) -> String {
    let read = job.read(wait, limit).await;
    let mut text = state_line(job, read.ended);
    let chunk = read.chunk;
    if chunk.dropped > 0 {
        text.push_str(&format!(
            "\n[{} bytes of older output were dropped: the job keeps the last {} KiB]",
            chunk.dropped,
            super::RING_BYTES / 1024
        ));
    }
    if chunk.bytes.is_empty() {
        text.push_str("\n(no new output)");
    } else {
        text.push_str("\noutput:\n");
        text.push_str(String::from_utf8_lossy(&chunk.bytes).trim_end_matches('\n'));
    }
    if chunk.more > 0 {
        text.push_str(&format!(
            "\n[{} more bytes waiting: call shell_output again]",
            chunk.more
        ));
    }
    text
}

pub struct ShellOutputTool {
    max_output_chars: usize,
}

impl ShellOutputTool {
    pub fn new(max_output_chars: usize) -> Self {
        ShellOutputTool { max_output_chars }
    }
}

/// Room for the state line and notes around a read's output.
const FRAMING: usize = 300;

#[async_trait]
impl Tool for ShellOutputTool {
    fn name(&self) -> &'static str {
        "shell_output"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "shell_output",
            "Read what a background job (run_shell with background: true) printed since the last read, stdout and stderr together, and whether it is still running or how it ended. With wait_ms, waits that long for new output first.",
            crate::tools::schema::of::<OutputArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: OutputArgs = parse_args(args)?;
        let job = args.job_id.find(&ctx.jobs)?;
        let wait = Duration::from_millis(args.wait_ms.unwrap_or(0)).min(MAX_WAIT);
        // Bytes, not characters, so a read never overruns the cap; the rest waits.
        let limit = self.max_output_chars.saturating_sub(FRAMING).max(100);
        Ok(ToolOutput::text(report(&job, wait, limit).await))
    }
}

pub struct ShellWriteTool;

#[async_trait]
impl Tool for ShellWriteTool {
    fn name(&self) -> &'static str {
        "shell_write"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "shell_write",
            "Send text to a background job's stdin (a job started by run_shell with background: true). Include \\n to end a line. Read the reply with shell_output.",
            crate::tools::schema::of::<WriteArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        1000
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_args(args)?;
        let job = args.job_id.find(&ctx.jobs)?;
        if let Some(e) = job.ended() {
            return Err(ToolError::Failed(format!(
                "job {} has ended ({}); its stdin is closed",
                job.id,
                e.describe()
            )));
        }
        job.write(args.input.as_bytes())
            .await
            .map_err(ToolError::Failed)?;
        Ok(ToolOutput::text(format!(
            "sent {} bytes to job {}",
            args.input.len(),
            job.id
        )))
    }
}

pub struct ShellKillTool;

#[async_trait]
impl Tool for ShellKillTool {
    fn name(&self) -> &'static str {
        "shell_kill"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "shell_kill",
            "Stop a background job (run_shell with background: true): TERM to its process group, then KILL if it has not ended within 2 s.",
            crate::tools::schema::of::<KillArgs>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        1000
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: KillArgs = parse_args(args)?;
        let job = args.job_id.find(&ctx.jobs)?;
        if let Some(e) = job.ended() {
            job.kill().await;
            return Ok(ToolOutput::text(format!(
                "job {} had already ended ({})",
                job.id,
                e.describe()
            )));
        }
        let ended = job.kill().await;
        Ok(ToolOutput::text(state_line(&job, ended)))
    }
}
