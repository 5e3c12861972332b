//! Why an MCP server could not be started or could not answer: one line
//! each, for the tool result, the REPL and `buddy mcp` to show.

/// What went wrong with a server or a request to it. Texts from outside (a
/// server's message, its stderr) are already one bounded line here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("cannot start the MCP thread: {0}")]
    Thread(String),
    /// The entry cannot make a connection (a URL, a header, a token).
    #[error("{0}")]
    Setup(String),
    #[error("cannot run `{command}`: {reason}")]
    Spawn { command: String, reason: String },
    #[error("it did not start within {0} s (startup_timeout_secs)")]
    StartTimeout(u64),
    #[error("cannot list its tools: {0}")]
    ListTools(String),
    #[error("no answer within {0} s (tool_timeout_secs)")]
    AnswerTimeout(u64),
    /// The server's or the connection's own words.
    #[error("{0}")]
    Server(String),
    /// `/SERVER:PROMPT` arguments that do not fit the prompt.
    #[error(transparent)]
    Arguments(#[from] ArgumentsError),
    /// The REPL stopped waiting for a resource or a prompt.
    #[error("no answer within {0} s")]
    Wait(u64),
    #[error("the MCP server's task ended without an answer")]
    Gone,
    /// It refused buddy without (or with too narrow) a login.
    #[error("it needs a login: `buddy mcp login {0}`")]
    NeedsLogin(String),
}

/// `/SERVER:PROMPT` arguments that do not fit the prompt; `takes` is what it
/// takes ("NAME takes: city [state]").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    /// `key=value` with a key the prompt does not have (quoted on one line).
    #[error("no argument `{name}`; {takes}")]
    Unknown { name: String, takes: String },
    #[error("too many arguments; {takes}")]
    TooMany { takes: String },
    #[error("`{name}` is required; {takes}")]
    Missing { name: String, takes: String },
}
