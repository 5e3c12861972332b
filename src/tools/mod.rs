//! Tool layer: the `Tool` trait, the registry the agent loop dispatches through, the
//! approval seam, and the bounding of every result. Individual tools live one per
//! file. This layer knows nothing of the agent loop, the API client or rendering.

pub mod approval;
pub mod capture;
pub mod checkpoint;
pub mod content;
pub mod deferred;
pub mod denylist;
pub mod diff;
pub mod door;
pub mod edit;
pub mod editor;
pub mod elicitation;
pub mod fetch;
pub mod files;
pub mod glob;
pub mod grep;
pub mod jobs;
pub mod live;
pub mod pane;
pub mod patch;
pub mod protect;
pub mod schema;
pub mod search;
pub mod shell;
pub mod skill;
pub mod terminal;
pub mod time;
pub mod window;

use crate::host::{LocalTarget, Target, TmuxTarget};
use crate::wire::{ToolDefinition, ToolList};
use async_trait::async_trait;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

pub use approval::{Approval, ApprovalRequest, Approver};

/// How much of a result was kept, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Truncation {
    pub kept: usize,
    pub total: usize,
}

/// A tool's answer. A tool that cut its own output (streaming capture, say) reports
/// the true original size in `truncated`; otherwise the registry cuts and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub truncated: Option<Truncation>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            truncated: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The model's arguments do not fit the tool's schema.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed (I/O error, timeout, refused request…).
    #[error("{0}")]
    Failed(String),
}

/// What a tool may use while it runs.
#[derive(Clone)]
pub struct ToolContext {
    /// Relative paths resolve against this directory.
    pub cwd: PathBuf,
    /// Asked before anything that needs the user's consent.
    pub approver: Arc<dyn Approver>,
    /// Where commands run and files live.
    pub target: Arc<dyn Target>,
    /// The shared tmux pane shell work goes through, when there is one.
    pub pane: Option<Arc<TmuxTarget>>,
    /// The id of the model's call being served (for approval requests).
    pub call_id: String,
    /// Where a tool that streams output (`run_shell`) sends the latest lines
    /// while it runs; none when nobody watches.
    pub progress: Option<live::ProgressFn>,
    /// The session's checkpoint store: every file change is announced to it
    /// first (`checkpoint_before_change`). None when nothing is saved.
    pub checkpoints: Option<Arc<dyn checkpoint::Checkpoints>>,
    /// The turn (user message) the call serves, which its checkpoints are
    /// kept under.
    pub turn: String,
    /// The editor's buffers, when buddy runs inside one that offers them
    /// (`buddy acp`): the file tools read and write this host's files
    /// through it (`content::editor_for`).
    pub editor: Option<Arc<dyn editor::EditorFiles>>,
    /// buddy's own files on this host, which a rewind does not write
    /// either (the file tools hold their own copy of the list).
    pub protected: Arc<protect::Protected>,
    /// The session's background jobs (`run_shell` with `background`),
    /// shared by every call's copy of the context; the agent stops them
    /// when the session ends or is cleared.
    pub jobs: Arc<jobs::JobTable>,
    /// The editor's terminals, when buddy runs inside one that offers them
    /// (`buddy acp`): `run_shell` runs this host's commands there.
    pub terminal: Option<Arc<dyn terminal::EditorTerminal>>,
}

impl ToolContext {
    /// On this host, in `cwd`.
    pub fn local(cwd: PathBuf, approver: Arc<dyn Approver>) -> ToolContext {
        ToolContext {
            cwd,
            approver,
            target: Arc::new(LocalTarget),
            pane: None,
            call_id: String::new(),
            progress: None,
            checkpoints: None,
            turn: String::new(),
            editor: None,
            protected: Default::default(),
            jobs: Default::default(),
            terminal: None,
        }
    }

    /// Keeps what is at `path` now in the session's checkpoint store before
    /// a tool changes it; an error (the store cannot be written) means the
    /// change must not happen, since it could not be taken back. `known` is
    /// what the tool just read there, if it did (a remote target's file is
    /// kept from it; one on this host is read by the store). `after` is
    /// what the change leaves there.
    pub async fn checkpoint_before_change(
        &self,
        path: &std::path::Path,
        known: checkpoint::Known<'_>,
        after: checkpoint::After,
    ) -> Result<(), ToolError> {
        self.checkpoint_before_changes(&[(path.to_path_buf(), known, after)])
            .await
    }

    /// `checkpoint_before_change` for several files in one durable write
    /// (a patch's files); a file already kept for this turn costs nothing.
    pub async fn checkpoint_before_changes(
        &self,
        files: &[(PathBuf, checkpoint::Known<'_>, checkpoint::After)],
    ) -> Result<(), ToolError> {
        let Some(store) = &self.checkpoints else {
            return Ok(());
        };
        if files.is_empty() {
            return Ok(());
        }
        let mut paths: Vec<PathBuf> = files.iter().map(|(p, ..)| p.clone()).collect();
        let after: Vec<checkpoint::After> = files.iter().map(|(.., a)| a.clone()).collect();
        let remote = if self.target.is_local() {
            None
        } else {
            let mut now = Vec::with_capacity(files.len());
            for (path, known, _) in files {
                now.push(door::prior(self, path, *known).await);
            }
            // Recorded where the write goes, as on this host (the store
            // resolves local paths itself): a rewind then refuses a path
            // that a symlink has moved since.
            for path in &mut paths {
                if let Some(real) =
                    door::resolve_remote(self.target.as_ref(), &self.cwd, path).await
                {
                    *path = real;
                }
            }
            Some(checkpoint::Remote {
                actor: self.target.actor(),
                now,
            })
        };
        store
            .before_change(&self.turn, &paths, &after, remote)
            .await
            .map_err(|e| {
                let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                ToolError::Failed(format!(
                    "not changed: could not keep a checkpoint of {} first ({e})",
                    shown.join(", ")
                ))
            })
    }

    /// A path as the target sees it: relative paths start from the working
    /// directory here, and from the login directory on a remote target.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = std::path::Path::new(path);
        if p.is_absolute() || !self.target.is_local() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    fn definition(&self) -> ToolDefinition;
    /// Upper bound, in characters, on the text this tool returns.
    fn max_output_chars(&self) -> usize;
    /// `args` is the model's argument object, already parsed from JSON.
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// The built-in tools that change files (and only files): what an
/// approval policy for edits approves.
pub const FILE_CHANGE_TOOLS: [&str; 3] = ["write_file", "edit_file", "apply_patch"];

pub fn is_file_change(tool: &str) -> bool {
    FILE_CHANGE_TOOLS.contains(&tool)
}

/// Parses a tool's argument object into its typed form.
pub fn parse_args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// Tools that come and go while the agent runs (an MCP server's, which start
/// in the background and may change their list): asked afresh for every model
/// request, and for a call whose name no fixed tool has.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// The tools offered now.
    fn definitions(&self) -> Vec<ToolDefinition>;
    /// Whether past the deferral bound these tools may go as one line each
    /// until `tool_search` loads them (servers' tools); buddy's own, such as
    /// the plan tools, always go whole.
    fn deferrable(&self) -> bool {
        true
    }
    /// A number that changes whenever `definitions` would, if the source
    /// can tell: the registry then reuses the list it built without asking
    /// for the definitions at all (they are asked at every model request).
    fn revision(&self) -> Option<u64> {
        None
    }
    /// Brings the tools up to date before a model request, when the source
    /// knows they may be stale (an MCP server's list past its `ttlMs`).
    /// Most sources have nothing to do.
    async fn refresh(&self) {}
    /// The cap on `name`'s result, when `name` is one of this source's tools.
    fn max_output_chars(&self, name: &str) -> Option<usize>;
    /// Waits, when `name` is not one of this source's tools yet but may be
    /// once something still starting has told its list (an MCP server whose
    /// start is under way); bounded by that start's own timeout. A model can
    /// name a tool it was offered in a session started elsewhere before this
    /// process has read the server's list: the call should wait, not fail.
    async fn settle(&self, _name: &str) {}
    async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    definitions: ToolList,
    sources: Vec<Arc<dyn ToolSource>>,
    editor: Option<Arc<dyn editor::EditorFiles>>,
    terminal: Option<Arc<dyn terminal::EditorTerminal>>,
    own: Arc<protect::Protected>,
    /// Which sources' tools go as one line each until `tool_search` loads them.
    deferral: Arc<deferred::Deferral>,
    /// The last list built with the sources' tools, with what they were:
    /// while they stay the same (the usual case, turn after turn), the list
    /// and its JSON are not built and encoded again.
    built: Arc<std::sync::Mutex<Option<BuiltList>>>,
}

/// What a list was built from (the sources' revisions and how many
/// deferred tools were loaded, when every source can tell; and the sources'
/// definitions), and the list.
type BuiltList = (Option<Vec<u64>>, Vec<ToolDefinition>, Arc<ToolList>);

/// The tools offered now: the registry's own list, or one built with the
/// sources' tools (kept, so the next request may share it).
pub enum ToolsNow<'a> {
    Fixed(&'a ToolList),
    Built(Arc<ToolList>),
}

impl std::ops::Deref for ToolsNow<'_> {
    type Target = ToolList;
    fn deref(&self) -> &ToolList {
        match self {
            ToolsNow::Fixed(list) => list,
            ToolsNow::Built(list) => list,
        }
    }
}

/// The outcome of one tool call, ready to become a `tool` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    pub text: String,
    pub is_error: bool,
    pub truncated: Option<Truncation>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.definitions.push(tool.definition());
        self.tools.push(tool);
    }

    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.sources.is_empty()
    }

    /// The file tools of the agent built with this registry go through the
    /// editor's buffers (`ToolContext::editor`).
    pub fn use_editor_files(&mut self, files: Arc<dyn editor::EditorFiles>) {
        self.editor = Some(files);
    }

    pub fn editor_files(&self) -> Option<Arc<dyn editor::EditorFiles>> {
        self.editor.clone()
    }

    /// `run_shell` in the agent built with this registry runs this host's
    /// commands in the editor's terminals (`ToolContext::terminal`).
    pub fn use_editor_terminal(&mut self, terminal: Arc<dyn terminal::EditorTerminal>) {
        self.terminal = Some(terminal);
    }

    pub fn editor_terminal(&self) -> Option<Arc<dyn terminal::EditorTerminal>> {
        self.terminal.clone()
    }

    /// buddy's own files, for the agent's `ToolContext::protected`.
    pub fn protect_own_files(&mut self, own: protect::Protected) {
        self.own = Arc::new(own);
    }

    pub fn own_files(&self) -> Arc<protect::Protected> {
        self.own.clone()
    }

    /// Past `bytes` of the sources' definitions (JSON), they are sent as
    /// one line each until `tool_search` loads them; 0 sends them whole.
    pub fn defer_tools_after(&mut self, bytes: usize) {
        self.deferral = Arc::new(deferred::Deferral::new(bytes));
    }

    /// The tools whose name `keep` accepts, and the sources (MCP servers'
    /// tools) when `sources`: what a sub-agent is given.
    pub fn filtered(&self, keep: impl Fn(&str) -> bool, sources: bool) -> ToolRegistry {
        let mut reg = ToolRegistry {
            editor: self.editor.clone(),
            own: self.own.clone(),
            // A child loads its own deferred tools, past the same bound.
            deferral: Arc::new(self.deferral.fresh()),
            ..ToolRegistry::default()
        };
        for tool in self.tools.iter().filter(|t| keep(t.name())) {
            reg.register(tool.clone());
        }
        if sources {
            reg.sources = self.sources.clone();
        }
        reg
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The fixed tools' definitions, then every source's as it is now
    /// (past the deferral bound: the loaded ones and `tool_search`).
    /// Lets each source bring its tools up to date (`ToolSource::refresh`)
    /// before the next `definitions`.
    pub async fn refresh(&self) {
        for s in &self.sources {
            s.refresh().await;
        }
    }

    /// Without sources, the registry's own list with its JSON encoded once;
    /// tools from MCP servers come and go, so with them the list is built
    /// (and encoded) per request.
    pub fn definitions(&self) -> ToolsNow<'_> {
        if self.sources.is_empty() {
            return ToolsNow::Fixed(&self.definitions);
        }
        let key: Option<Vec<u64>> = self
            .sources
            .iter()
            .map(|s| s.revision())
            .chain(std::iter::once(Some(self.deferral.loaded_count() as u64)))
            .collect();
        // A panic elsewhere cannot leave the cache half-written.
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(key), Some((Some(was), _, list))) = (&key, built.as_ref()) {
            if was == key {
                return ToolsNow::Built(list.clone());
            }
        }
        let mut extra = Vec::new();
        for s in self.sources.iter().filter(|s| !s.deferrable()) {
            extra.extend(s.definitions());
        }
        let theirs = self.source_definitions();
        if self.deferral.applies(&theirs) {
            extra.extend(self.deferral.shrink(theirs));
        } else {
            extra.extend(theirs);
        }
        if let Some((_, was, list)) = built.as_ref() {
            if *was == extra {
                let list = list.clone();
                *built = Some((key, extra, list.clone()));
                return ToolsNow::Built(list);
            }
        }
        let mut all = self.definitions.to_vec();
        all.extend(extra.iter().cloned());
        let list = Arc::new(ToolList::from(all));
        *built = Some((key, extra, list.clone()));
        ToolsNow::Built(list)
    }

    /// The deferrable sources' definitions (the servers' tools).
    fn source_definitions(&self) -> Vec<ToolDefinition> {
        let mut theirs = Vec::new();
        for s in self.sources.iter().filter(|s| s.deferrable()) {
            theirs.extend(s.definitions());
        }
        theirs
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name).cloned()
    }

    /// Runs one call from its raw JSON arguments. Never fails: unknown tools,
    /// malformed JSON and tool errors all become error text the model can read.
    pub async fn call(&self, name: &str, raw_args: &str, ctx: &ToolContext) -> CallResult {
        let tool = self.get(name);
        let find_source = || {
            self.sources
                .iter()
                .find_map(|s| s.max_output_chars(name).map(|limit| (s, limit)))
        };
        let mut source = match tool {
            Some(_) => None,
            None => find_source(),
        };
        if tool.is_none() && source.is_none() && name != deferred::TOOL_SEARCH {
            for s in &self.sources {
                s.settle(name).await;
            }
            source = find_source();
        }
        if tool.is_none() && source.is_none() && name == deferred::TOOL_SEARCH {
            let theirs = self.source_definitions();
            if self.deferral.applies(&theirs) {
                let query = serde_json::from_str::<Value>(raw_args)
                    .ok()
                    .and_then(|v| v.get("query").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                return CallResult {
                    text: self.deferral.search(&theirs, &query),
                    is_error: false,
                    truncated: None,
                };
            }
        }
        if tool.is_none() && source.is_none() {
            let known: Vec<String> = self
                .definitions()
                .iter()
                .map(|d| d.function.name.clone())
                .collect();
            let known = crate::text::one_line(&known.join(", "), 2000);
            return error_result(format!("unknown tool `{name}`; available tools: {known}"));
        }
        let args = if raw_args.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str::<Value>(raw_args) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => return error_result("invalid arguments: expected a JSON object".to_string()),
                Err(e) => {
                    return error_result(format!(
                        "invalid arguments: malformed JSON ({e}); send the arguments as one JSON object"
                    ))
                }
            }
        };
        let (limit, outcome) = match (&tool, source) {
            (Some(tool), _) => (tool.max_output_chars(), tool.execute(args, ctx).await),
            (None, Some((source, limit))) => (limit, source.execute(name, args, ctx).await),
            (None, None) => return error_result(format!("unknown tool `{name}`")),
        };
        // Known secrets leave before anything else sees the result: the model,
        // the events, the session file. Before cutting, so a key cut in half
        // by the limit is still recognised.
        let secrets = crate::redact::known();
        match outcome {
            Ok(out) => {
                let (text, cut) = truncate(&secrets.text(&out.text), limit);
                // Tools never write the marker themselves; they report what they cut.
                let truncated = match (out.truncated, cut) {
                    (None, c) => c,
                    (Some(own), None) => Some(own),
                    (Some(own), Some(c)) => Some(Truncation {
                        kept: c.kept.min(own.kept),
                        total: own.total,
                    }),
                };
                let text = match truncated {
                    Some(t) => format!("{text}\n{}", marker(t)),
                    None => text,
                };
                CallResult {
                    text,
                    is_error: false,
                    truncated,
                }
            }
            Err(e) => {
                let (text, _) = truncate(&secrets.text(&format!("error: {e}")), limit.max(200));
                error_result(text)
            }
        }
    }
}

fn error_result(text: String) -> CallResult {
    CallResult {
        text,
        is_error: true,
        truncated: None,
    }
}

/// The line that ends every cut result.
pub fn marker(t: Truncation) -> String {
    format!(
        "[output truncated: kept {} of {} characters]",
        t.kept, t.total
    )
}

/// Cuts `text` to at most `limit` characters on a char boundary.
pub fn truncate(text: &str, limit: usize) -> (String, Option<Truncation>) {
    match text.char_indices().nth(limit) {
        None => (text.to_string(), None),
        Some((byte, _)) => {
            let total = text.chars().count();
            (
                text[..byte].to_string(),
                Some(Truncation { kept: limit, total }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_respects_char_boundaries() {
        let (t, cut) = truncate("héllo wörld", 4);
        assert_eq!(t, "héll");
        assert_eq!(cut, Some(Truncation { kept: 4, total: 11 }));
        assert_eq!(truncate("abc", 3), ("abc".to_string(), None));
    }

    /// A source whose definitions change with `rev`, counting the asks.
    struct Counted {
        rev: std::sync::atomic::AtomicU64,
        asked: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl ToolSource for Counted {
        fn definitions(&self) -> Vec<ToolDefinition> {
            use std::sync::atomic::Ordering::SeqCst;
            self.asked.fetch_add(1, SeqCst);
            let name = format!("t{}", self.rev.load(SeqCst));
            vec![ToolDefinition::function(&name, "d", serde_json::json!({}))]
        }
        fn max_output_chars(&self, _: &str) -> Option<usize> {
            None
        }
        fn revision(&self) -> Option<u64> {
            Some(self.rev.load(std::sync::atomic::Ordering::SeqCst))
        }
        async fn execute(
            &self,
            _: &str,
            _: Value,
            _: &ToolContext,
        ) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("x"))
        }
    }

    #[test]
    fn a_list_with_sources_is_built_again_only_when_a_source_changes() {
        use std::sync::atomic::Ordering::SeqCst;
        let source = Arc::new(Counted {
            rev: 1.into(),
            asked: 0.into(),
        });
        let mut reg = ToolRegistry::new();
        reg.add_source(source.clone());
        let first = reg.definitions();
        let ToolsNow::Built(a) = &first else {
            panic!("built")
        };
        let again = reg.definitions();
        let ToolsNow::Built(b) = &again else {
            panic!("built")
        };
        assert!(Arc::ptr_eq(a, b), "the same list, its JSON encoded once");
        assert_eq!(source.asked.load(SeqCst), 1, "not asked again");
        source.rev.store(2, SeqCst);
        let names: Vec<String> = reg
            .definitions()
            .iter()
            .map(|d| d.function.name.clone())
            .collect();
        assert_eq!(names, ["t2"]);
        assert_eq!(source.asked.load(SeqCst), 2);
    }
}
