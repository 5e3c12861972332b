//! The man pages' sections that clap cannot derive from the flags: the
//! REPL's keys and commands, the configuration keys, exit status,
//! environment, files and examples. The slash commands come from the REPL's
//! own `/help` text and the exit codes from `app`'s constants, so those cannot
//! drift; the tests below check that every config key and every command has
//! its line. It owns the words, not the rendering of the flag list (clap's).

use crate::app::{EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use crate::ui::repl::{bang, commands, mentions};
use clap_mangen::roff::{bold, italic, roman, Inline, Roff};

/// Editing and control keys of the REPL's input line, as (keys, meaning).
/// The slash commands and the keys that act on a running task are in
/// [`commands::HELP`], printed beside these.
const KEYS: &[(&str, &str)] = &[
    ("Enter", "send the input; while a task runs, steer it with the message"),
    ("Tab", "complete a /command or an @path; while a task runs, queue the message as a follow-up"),
    ("Alt-Enter, Shift-Enter, Ctrl-J", "a new line in the input (so does a line ending in \\)"),
    ("Esc", "interrupt the running task or ! command; close the completion menu"),
    ("Ctrl-C", "interrupt the running task, or clear the input"),
    ("Ctrl-D", "quit, on an empty input"),
    ("Ctrl-L", "clear the screen (the input and the conversation stay)"),
    ("Ctrl-O", "the sub-agents of the conversation and their tool calls (as /subagents)"),
    ("Up, Down, Ctrl-P, Ctrl-N", "the previous and next history entry (within a multi-line input, move between its lines)"),
    ("Alt-Up", "take the queued messages back into the input"),
    ("Ctrl-R", "search the history backwards; Ctrl-R again for older matches, Enter sends, Esc or Ctrl-G gives back the input"),
    ("Left, Right, Ctrl-B, Ctrl-F", "a character back or forward"),
    ("Alt-B, Alt-F, Ctrl-Left, Ctrl-Right", "a word back or forward"),
    ("Home, End, Ctrl-A, Ctrl-E", "the start or end of the input"),
    ("Ctrl-K, Ctrl-U, Ctrl-W", "cut to the end, to the start, the word before the cursor"),
    ("Ctrl-Y", "paste what was cut last"),
];

/// Every key of buddy.toml, as (section, key, meaning). `[models.NAME]` and
/// `[auth.PROVIDER]` stand for each such table.
pub(crate) const CONFIG_KEYS: &[(&str, &str, &str)] = &[
    (
        "agent",
        "model",
        "the active profile, one of the [models.NAME] tables",
    ),
    (
        "agent",
        "system_prompt",
        "extra instructions sent with the system prompt",
    ),
    (
        "agent",
        "max_turns",
        "model requests per run before it stops (default 20)",
    ),
    ("agent", "max_iterations", "the older name of max_turns"),
    (
        "agent",
        "max_total_tokens",
        "tokens (prompt + completion, summed over requests) per run",
    ),
    (
        "agent",
        "max_duration",
        "wall time per run: seconds, or text such as \"90s\", \"10m\"",
    ),
    (
        "agent",
        "temperature",
        "sampling temperature (unset: the server's default)",
    ),
    (
        "agent",
        "top_p",
        "nucleus sampling (unset: the server's default)",
    ),
    (
        "agent",
        "tool_execution",
        "the tool calls of one reply: \"parallel\" (default), \"sequential\" or \"batched\"",
    ),
    (
        "agent",
        "tool_batch_size",
        "calls at a time when \"batched\" (default 4)",
    ),
    (
        "agent",
        "parallel_tools",
        "the older switch for tool_execution (false: sequential)",
    ),
    (
        "agent",
        "steering_mode",
        "queued steering messages join \"one-at-a-time\" (default) or \"all\" at once",
    ),
    (
        "agent",
        "follow_up_mode",
        "queued follow-ups join \"one-at-a-time\" (default) or \"all\" at once",
    ),
    (
        "agent",
        "auto_compact",
        "compact the context on its own (default true)",
    ),
    (
        "agent",
        "compact_at",
        "share of the context window that triggers compaction, 0.1 to 0.95 (default 0.8)",
    ),
    ("agent", "compact_threshold", "the older name of compact_at"),
    (
        "agent",
        "subagent_max_turns",
        "model requests per sub-agent (the agent tool's child) run (default 20)",
    ),
    (
        "agent",
        "subagent_max_tokens",
        "tokens per sub-agent run (default 400000)",
    ),
    (
        "agent",
        "max_subagents",
        "sub-agents of one reply that run at the same time (default 4)",
    ),
    (
        "agent",
        "subagent_depth",
        "generations of sub-agents: 0 offers no agent tool, 1 (default) children without their own",
    ),
    (
        "models.NAME",
        "api_base_url",
        "the server's API base URL, e.g. http://127.0.0.1:8080/v1",
    ),
    ("models.NAME", "model", "the model id to ask for"),
    (
        "models.NAME",
        "api",
        "wire protocol: \"completions\" (default), \"responses\" or \"messages\" (Anthropic)",
    ),
    (
        "models.NAME",
        "auth",
        "\"api-key\" (default) or \"login\" (tokens from buddy login)",
    ),
    (
        "models.NAME",
        "provider",
        "whose login auth = \"login\" uses (default openai)",
    ),
    (
        "models.NAME",
        "api_key_env",
        "the environment variable holding the key",
    ),
    ("models.NAME", "api_key_file", "a file holding the key"),
    (
        "models.NAME",
        "api_key",
        "the key itself (at most one of the three; none: no Authorization header)",
    ),
    (
        "models.NAME",
        "context_limit",
        "the context window in tokens (default: buddy's model catalog)",
    ),
    (
        "models.NAME",
        "stream",
        "stream answers (default true; false for servers without SSE)",
    ),
    ("models.NAME", "max_tokens", "output cap per answer"),
    (
        "models.NAME",
        "prompt_cache",
        "mark prompt-cache breakpoints (default true for \"messages\")",
    ),
    (
        "models.NAME",
        "ca_file",
        "PEM file of CA certificates trusted for this server, on top of the system's",
    ),
    (
        "models.NAME",
        "images",
        "the model takes images: @shot.png, exec --image (default true; false refuses them before sending)",
    ),
    (
        "models.NAME",
        "price",
        "{ input = …, output = …, cached_input = … } in US dollars per million tokens, instead of buddy's price table (a loopback server without one is free)",
    ),
    (
        "tools",
        "shell_enabled",
        "offer run_shell (with background jobs: shell_output, shell_write, shell_kill), and in a tmux pane capture-pane and send-keys (default true)",
    ),
    (
        "tools",
        "shell_confirm",
        "ask before commands and file writes (default true)",
    ),
    (
        "tools",
        "auto_approve_read_only",
        "run command lines that only read (ls, git status, grep…) without asking (default true)",
    ),
    (
        "tools",
        "shell_denylist",
        "command patterns always refused, on top of the built-in rules",
    ),
    (
        "tools",
        "shell_timeout_secs",
        "default time limit of one command (default 120)",
    ),
    (
        "tools",
        "hide_env",
        "more environment variables commands never see (buddy's keys are always hidden)",
    ),
    (
        "tools",
        "sandbox",
        "Landlock confinement of local commands: \"workspace-write\", \"read-only\" or \"off\"",
    ),
    (
        "tools",
        "sandbox_network",
        "false also forbids sandboxed commands TCP (default true)",
    ),
    (
        "tools",
        "files_enabled",
        "offer read_file, write_file, grep, glob and edit_file or apply_patch (default true)",
    ),
    (
        "tools",
        "edit_format",
        "\"edit\" (edit_file), \"patch\" (apply_patch) or \"auto\": apply_patch for GPT, o-series and Codex models (default)",
    ),
    ("tools", "fetch_enabled", "offer fetch_url (default true)"),
    ("tools", "search_enabled", "offer web_search (default true)"),
    (
        "tools",
        "search_base_url",
        "the search endpoint (default DuckDuckGo's HTML one)",
    ),
    ("tools", "time_enabled", "offer time, the clock (default true)"),
    (
        "tools",
        "max_output_chars",
        "cap on every tool result, in characters",
    ),
    (
        "tools",
        "shell_max_output_chars",
        "cap on run_shell results",
    ),
    (
        "tools",
        "files_max_output_chars",
        "cap on read_file results",
    ),
    (
        "tools",
        "tool_search_after_bytes",
        "past this many bytes of MCP tool definitions, send one line each and a tool_search tool (0: always whole)",
    ),
    (
        "tools",
        "fetch_max_output_chars",
        "cap on fetch_url results",
    ),
    (
        "tools",
        "search_max_output_chars",
        "cap on web_search results",
    ),
    (
        "network",
        "api_timeout_secs",
        "longest wait for the model server to answer (default 120)",
    ),
    (
        "network",
        "fetch_timeout_secs",
        "time limit of fetch_url and web_search (default 20)",
    ),
    (
        "network",
        "max_retries",
        "retries of failed model requests, with backoff (default 3)",
    ),
    (
        "network",
        "idle_timeout_secs",
        "longest an answer may stream without new content (default 600)",
    ),
    (
        "network",
        "max_answer_bytes",
        "largest answer one reply may carry (default 8 MiB)",
    ),
    ("serve", "max_connections", "buddy serve: open connections (default 256; 503 past it)"),
    ("serve", "max_sessions", "sessions holding a live agent, running or kept (default 256)"),
    ("serve", "max_running", "sessions running a prompt at once (default 128)"),
    ("serve", "max_streams", "event streams open on one session (default 32)"),
    ("serve", "max_streams_total", "event streams open on the whole server (default 192)"),
    ("serve", "header_timeout_secs", "time to send a request's headers (default 10)"),
    ("serve", "idle_timeout_secs", "a connection with nothing moving is closed after this (default 60)"),
    ("serve", "agent_idle_secs", "a session's agent kept this long without a run (default 300)"),
    ("serve", "max_body_bytes", "largest request body, every endpoint (default 1 MiB; 413 past it)"),
    ("serve", "users", "[serve.users] NAME = \"sha256:HEX\": users with their own tokens, each seeing only their sessions"),
    ("serve", "users_file", "the file buddy serve add-user writes (default .buddyx/serve/users)"),
    ("serve", "user_max_running", "sessions one user may run at once (429 past it)"),
    ("serve", "user_daily_usd", "US dollars one user's runs may cost per UTC day (429 past it)"),
    ("serve", "audit_log", "the audit log (default .buddyx/serve/audit.log, written with users)"),
    ("serve", "audit_text", "also write prompts' text into the audit log (default false)"),
    ("serve", "audit_max_mib", "the audit log is rotated to audit.log.1 at this size (default 16)"),
    ("serve", "public_hosts", "host names a load balancer reaches buddy serve by, answered in Host and Origin (needs a token)"),
    ("serve", "trusted_proxies", "addresses or CIDR ranges whose X-Forwarded-For names the client (else ignored)"),
    ("serve", "store", "postgres://…: sessions in PostgreSQL, shared by several instances (default: files)"),
    ("serve", "lease_secs", "with a database store: a crashed instance's sessions are free after this (default 15)"),
    (
        "telemetry",
        "otlp_endpoint",
        "OTLP/HTTP receiver for trace spans, e.g. http://127.0.0.1:4318 (unset: no traces)",
    ),
    ("display", "color", "colour on a terminal (default true)"),
    (
        "display",
        "show_tokens",
        "token counts after each model call (default false)",
    ),
    (
        "display",
        "show_tool_calls",
        "tool calls and a preview of their results (default true)",
    ),
    (
        "ui",
        "notify_after",
        "seconds a REPL run must take for its end to notify (default 10); approvals always notify",
    ),
    (
        "ui",
        "notify",
        "[\"program\", \"arg\", ...] run with a JSON summary appended instead of OSC 9 or a bell",
    ),
    (
        "execution",
        "tmux",
        "run the REPL's shell commands in a shared tmux pane (default true)",
    ),
    (
        "execution",
        "tmux_session",
        "that tmux session's name (default buddy-DIRECTORY-HASH)",
    ),
    (
        "discovery",
        "local_servers",
        "loopback servers probed when the profile has no key; [] turns it off",
    ),
    (
        "discovery",
        "model",
        "the model to use when a found server lists it (else its first)",
    ),
    ("hooks", "PreToolUse", "[[hooks.PreToolUse]]: commands run before a tool call; exit 2 or {\"decision\":\"block\"} stops it (docs/HOOKS.md)"),
    ("hooks", "PostToolUse", "[[hooks.PostToolUse]]: commands run after a tool call; a block's reason joins the result"),
    ("hooks", "UserPromptSubmit", "[[hooks.UserPromptSubmit]]: commands run before a prompt is sent; may block it or add context"),
    ("hooks", "Stop", "[[hooks.Stop]]: commands run when the model answered; a block makes it go on"),
    ("hooks", "SessionStart", "[[hooks.SessionStart]]: commands run at a session's first prompt; their output is context"),
    ("hooks", "Notification", "[[hooks.Notification]]: commands run when an approval waits for the user"),
    ("hooks.EVENT", "matcher", "regular expression the whole tool name must match; empty or * matches all"),
    ("hooks.EVENT", "command", "run with sh -c, the event's JSON on stdin; not from an untrusted project file"),
    ("hooks.EVENT", "timeout_secs", "killed with its process group after this long (default 60)"),
    (
        "mcp_servers.NAME",
        "command",
        "the program of a stdio server (or set url)",
    ),
    ("mcp_servers.NAME", "args", "its arguments"),
    (
        "mcp_servers.NAME",
        "env",
        "variables set for it on top of the scrubbed environment; values are secrets",
    ),
    (
        "mcp_servers.NAME",
        "cwd",
        "its working directory, relative to buddy's (default: buddy's)",
    ),
    (
        "mcp_servers.NAME",
        "url",
        "the http:// endpoint of a Streamable HTTP server (or set command)",
    ),
    (
        "mcp_servers.NAME",
        "bearer_token_env",
        "the variable whose value is sent as Authorization: Bearer",
    ),
    (
        "mcp_servers.NAME",
        "headers",
        "more HTTP headers for a url server",
    ),
    (
        "mcp_servers.NAME",
        "client_id",
        "a pre-registered OAuth client for buddy mcp login",
    ),
    (
        "mcp_servers.NAME",
        "client_secret_env",
        "the variable holding that client's secret",
    ),
    (
        "mcp_servers.NAME",
        "client_metadata_url",
        "https URL of buddy's OAuth client metadata document, used as client_id",
    ),
    ("mcp_servers.NAME", "enabled", "start it (default true)"),
    (
        "mcp_servers.NAME",
        "startup_timeout_secs",
        "seconds to start and list tools (default 30)",
    ),
    (
        "mcp_servers.NAME",
        "tool_timeout_secs",
        "seconds one call may take (default 300)",
    ),
    (
        "mcp_servers.NAME",
        "question_timeout_secs",
        "seconds a question it asks the user waits for an answer, then cancelled (default 300)",
    ),
    (
        "mcp_servers.NAME",
        "enabled_tools",
        "offer only these of its tools (default all)",
    ),
    ("mcp_servers.NAME", "disabled_tools", "never offer these"),
    (
        "mcp_servers.NAME",
        "trust_read_only",
        "tools marked readOnlyHint run without asking (default false)",
    ),
    (
        "auth.PROVIDER",
        "issuer",
        "where buddy login signs in to that provider",
    ),
    (
        "auth.PROVIDER",
        "client_id",
        "the OAuth client id used there",
    ),
];

/// Environment variables buddy reads, as (names, meaning).
const ENVIRONMENT: &[(&str, &str)] = &[
    ("BUDDY_MODEL", "a profile name or model id, as -m (AGENT_MODEL when unset)"),
    ("BUDDY_BASE_URL", "the API base URL, as --base-url (AGENT_BASE_URL when unset)"),
    ("BUDDY_API_KEY", "the API key to send instead of the profile's own (AGENT_API_KEY when unset); not to a URL an untrusted project buddy.toml chose"),
    ("OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENROUTER_API_KEY", "the keys of the built-in profiles (their api_key_env); a profile may name any variable"),
    ("BUDDY_SERVE_TOKEN", "the token buddy serve requires when --token is not given"),
    ("BUDDY_MCP_SERVER_TOKEN", "the token buddy mcp-server --listen requires when --token is not given"),
    ("BUDDY_STORE", "the session database's postgres:// URL when --store is not given (serve, sessions, export, resume); keeps its password out of the process list"),
    ("NO_COLOR", "when set and not empty, no colour"),
    ("TERM", "dumb: the REPL and the session picker become plain line-by-line prompts"),
    ("XDG_CONFIG_HOME, HOME", "where buddy's own directory is: $XDG_CONFIG_HOME/buddy, else ~/.config/buddy"),
    ("SSL_CERT_FILE, SSL_CERT_DIR", "the CA certificates HTTPS trusts, instead of the system's store"),
    ("HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY", "proxies (also in lower case); list local servers in NO_PROXY when one is set"),
    ("TMPDIR", "writable under the workspace-write sandbox, beside /tmp, /var/tmp and /dev/shm"),
    ("XDG_RUNTIME_DIR", "where --ssh keeps its connection-sharing socket (else /tmp)"),
];

/// Files buddy reads and writes, as (path, meaning). CONFIG is
/// $XDG_CONFIG_HOME/buddy, else ~/.config/buddy.
const FILES: &[(&str, &str)] = &[
    ("CONFIG/buddy.toml", "the global configuration; written, documented, on the first run"),
    ("./buddy.toml, ./agent.toml", "a project's configuration, used instead of the global one; settings that could send a key elsewhere or lower safety are ignored until buddy trust"),
    ("~/.config/agent/agent.toml", "the older global configuration, read when there is no other"),
    ("CONFIG/auth.json", "login tokens per provider (mode 0600)"),
    ("CONFIG/trusted.json", "the project configurations trusted with buddy trust, by path and SHA-256"),
    ("CONFIG/approvals.toml", "the \"always\" rules remembered with r at an approval (mode 0600); /approve lists them"),
    ("CONFIG/seen-local-servers", "the local servers and models zero-config discovery has already introduced in full"),
    ("CONFIG/history", "the REPL's input history"),
    ("CONFIG/commands/NAME.md, .buddy/commands/NAME.md", "custom slash command /NAME: the file's text is the prompt, $ARGUMENTS and $1…$9 filled in; frontmatter description shows in the menu; the project's only when trusted"),
    ("CONFIG/skills/NAME/SKILL.md, .buddy/skills/, .agents/skills/", "skills: name and description (frontmatter) listed in the system prompt (50 and 8 KiB at most), the body read with the skill tool; the project's only when trusted (buddy trust)"),
    ("AGENTS.md", "project instructions, from the repository's root down to the working directory, added to the system prompt (64 KiB in all); a regular file inside the repository, or a symlink to one there"),
    (".buddyx/sessions/", "this directory's saved sessions (files 0600; an existing .agentx/ is used instead); .buddyx/.gitignore keeps them out of git"),
];

/// What a page's EXAMPLES section shows, as (command line, what it does).
fn examples(page: Option<&str>) -> &'static [(&'static str, &'static str)] {
    match page {
        None => &[
            ("buddy", "an interactive session in this directory"),
            ("buddy exec \"which process listens on port 8080?\"", "one answer, on stdout"),
            ("git diff | buddy exec \"write a commit message for this diff\"", "the prompt, then the piped text"),
            ("buddy --base-url http://127.0.0.1:8080/v1 exec hello", "a server of your choice; no key needed if it wants none"),
            ("buddy -m anthropic", "another profile of the configuration"),
            ("buddy --ssh admin@web1 exec \"why does nginx fail to start?\"", "tools run on a server over SSH"),
            ("buddy resume --last", "continue this directory's latest session"),
        ],
        Some("exec") => &[
            ("buddy exec \"summarise README.md in three bullet points\"", "the answer alone on stdout; everything else on stderr"),
            ("git diff | buddy exec \"write a commit message for this diff\"", "the prompt first, then the piped text between <stdin> and </stdin> lines (at most 8 MiB)"),
            ("buddy exec - < prompt.txt", "the prompt itself from stdin (so does a bare buddy exec with piped input)"),
            ("buddy exec -- \"--weird prompt\"", "a prompt that starts with a dash"),
            ("buddy exec --json \"list the files here\" | jq -r .type", "every event as a JSON line"),
            ("buddy exec --resume last \"and now the tests\"", "one more turn of the latest session"),
            ("buddy exec --max-turns 5 --timeout 2m \"fix the build\"", "limits on the run"),
            ("buddy exec --plan \"how would you add a --dry-run flag?\" > plan.md", "plan mode: only reads, prints the model's plan and exits 0"),
        ],
        Some("resume") => &[
            ("buddy resume", "pick one of this directory's sessions"),
            ("buddy resume --last", "the most recently used one"),
            ("buddy resume 3fa9", "the one whose id starts with 3fa9"),
            ("buddy resume --store postgres://buddy@db/buddy 3fa9", "one of a buddy serve database, under its lease"),
        ],
        Some("sessions") => &[
            ("buddy sessions", "id, age, messages, model and first prompt of each"),
            ("BUDDY_STORE=postgres://buddy@db/buddy buddy sessions", "the sessions of a buddy serve database instead"),
        ],
        Some("export") => &[
            ("buddy export --last > session.md", "the latest session as Markdown to read or share"),
            ("buddy export 3fa9 -o notes/3fa9.md", "one session to a file (0600)"),
            ("buddy export --last --format json | jq '.items[].role'", "the conversation's items as data"),
        ],
        Some("models") => &[
            ("buddy models", "the models the active profile's server offers"),
            ("buddy -m ollama models", "those of another profile's server"),
        ],
        Some("login") => &[
            ("buddy login", "sign in to OpenAI with a ChatGPT account"),
            ("buddy -m openai-login exec hello", "then use the profile that needs it"),
        ],
        Some("logout") => &[("buddy logout openai", "forget the stored login")],
        Some("serve") => &[
            ("buddy serve", "the web page and API at http://127.0.0.1:8421/"),
            ("BUDDY_SERVE_TOKEN=$(openssl rand -hex 16) buddy serve --listen 0.0.0.0:8421", "off loopback, a token is required"),
            ("buddy serve add-user ann", "a user with a token of their own (printed once, stored as a hash)"),
        ],
        Some("mcp") => &[
            ("buddy mcp add everything -- npx -y @modelcontextprotocol/server-everything", "a stdio server, into your config file"),
            ("buddy mcp add docs --url http://127.0.0.1:3001/mcp --bearer-token-env DOCS_TOKEN", "a Streamable HTTP server"),
            ("buddy mcp list", "every configured server"),
            ("buddy mcp get everything", "its settings and, started once, its tools"),
            ("buddy mcp call everything add '{\"a\": 2, \"b\": 3}'", "one tool by hand, its result printed"),
            ("buddy mcp remove docs", "out of the config file again"),
            ("buddy mcp login docs", "an OAuth login in the browser, kept for that server"),
            ("buddy mcp logout docs", "forget it"),
        ],
        Some("completions") => &[
            ("buddy completions bash > ~/.local/share/bash-completion/completions/buddy", "bash"),
            ("buddy completions fish > ~/.config/fish/completions/buddy.fish", "fish"),
        ],
        Some("man") => &[
            ("buddy man", "read this page (formatted on a terminal)"),
            ("buddy man exec", "one command's page"),
            ("buddy man > buddy.1", "the page as roff, for man or a file"),
            ("buddy man --out-dir /usr/local/share/man/man1", "install every page"),
        ],
        Some("trust") => &[
            ("buddy trust", "trust ./buddy.toml (or ./agent.toml) as it is now"),
            ("buddy trust path/to/buddy.toml", "another project's file"),
        ],
        Some("acp") => &[(
            "{\"agent_servers\": {\"buddy\": {\"type\": \"custom\", \"command\": \"buddy\", \"args\": [\"acp\"]}}}",
            "in Zed's settings.json: the editor starts buddy as its agent",
        )],
        Some("mcp-server") => &[
            (
                "claude mcp add buddy -- buddy mcp-server",
                "Claude Code calls buddy's `buddy` and `buddy-reply` tools",
            ),
            (
                "{\"mcpServers\": {\"buddy\": {\"command\": \"buddy\", \"args\": [\"mcp-server\"]}}}",
                "the same for a client that reads an mcpServers JSON file",
            ),
            (
                "buddy mcp-server --listen 127.0.0.1:8422",
                "the same tools over Streamable HTTP at http://127.0.0.1:8422/mcp",
            ),
            (
                "BUDDY_MCP_SERVER_TOKEN=$(openssl rand -hex 16) buddy mcp-server --listen 0.0.0.0:8422",
                "off loopback, a token is required (clients send it as a bearer token)",
            ),
        ],
        Some(_) => &[],
    }
}

/// The sections that follow the flags on `page` (None: buddy's own page,
/// else a subcommand's).
pub(crate) fn sections(page: Option<&str>) -> Roff {
    let mut roff = Roff::new();
    if page.is_none() {
        roff.control("SH", ["INTERACTIVE USE"]);
        paragraph(&mut roff, "buddy with no command opens the REPL on a terminal (with input or output redirected, or TERM=dumb, it reads one prompt per line instead). A prompt runs as a background task; type on while it works.");
        let input = [
            (
                "@path".to_string(),
                format!(
                    "attaches a regular file of the local working directory for the model: at most {} KiB of a file, {} KiB per prompt; a missing path, a directory or a binary file stays plain text with a note",
                    mentions::PER_FILE / 1024,
                    mentions::TOTAL / 1024
                ),
            ),
            (
                "!command".to_string(),
                format!(
                    "runs the command at once with sh -c where the tools run, without approval (you typed it); the last {} lines are shown, and up to {} KiB of output reaches the model with the next prompt; Esc or Ctrl-C kills it, and so do {} minutes",
                    bang::SHOWN_LINES,
                    crate::agent::command::MAX_OUTPUT / 1024,
                    crate::agent::command::TIME_LIMIT.as_secs() / 60
                ),
            ),
            (
                "AGENTS.md".to_string(),
                "project instructions for the model, from the repository root down to the working directory; /init asks the model to write one".to_string(),
            ),
            (
                "approvals".to_string(),
                "command lines that only read (ls, cat, wc, grep, git status…, no redirection to a file, no substitution) run without asking ([tools] auto_approve_read_only); a command or file write that may change something asks, answered with one key: y, n, a (always: that command prefix, for the session, never with options that write files or run programs), r (remember that rule in approvals.toml in the config directory) or e (tell the model why not); /approve lists the rules, /approve remove N drops one".to_string(),
            ),
            (
                "the plan".to_string(),
                "the model's todo_write list shows above the input, the item in progress highlighted, and is saved with the session; plan mode (buddy --plan, /plan) runs only reading tools and read-only commands until the model shows its plan (exit_plan_mode) and you answer y to start the work".to_string(),
            ),
        ];
        for (tag, meaning) in &input {
            roff.control("TP", []);
            roff.text([bold(tag.as_str())]);
            roff.text([roman(meaning.as_str())]);
        }
        roff.control("SS", ["Keys"]);
        tagged(&mut roff, KEYS);
        roff.control("SS", ["Commands"]);
        paragraph(&mut roff, "As /help lists them:");
        verbatim(&mut roff, commands::HELP);

        roff.control("SH", ["CONFIGURATION"]);
        paragraph(&mut roff, "Settings come from the flags, then the environment, then the first configuration file found (see FILES), then built-in defaults. The file is TOML; unknown keys are an error. Each table and its keys:");
        let mut section = "";
        for (table, key, meaning) in CONFIG_KEYS {
            if *table != section {
                section = table;
                roff.control("SS", [format!("[{table}]").as_str()]);
            }
            roff.control("TP", []);
            roff.text([bold(*key)]);
            roff.text([roman(*meaning)]);
        }
    }

    roff.control("SH", ["EXIT STATUS"]);
    let status = [
        (EXIT_OK.to_string(), "success"),
        (EXIT_FAILURE.to_string(), "runtime failure: an API error after retries, a limit of the run reached, a failed login, buddy serve unable to listen"),
        (EXIT_USAGE.to_string(), "usage or configuration error: bad flags, invalid TOML, an unknown profile, a missing key, an unreachable --ssh host; a session unknown, damaged or in use"),
        (EXIT_INTERRUPTED.to_string(), "interrupted (Ctrl-C)"),
        ((128 + 1).to_string(), "the REPL ended by SIGHUP (its terminal left usable)"),
        ((128 + 15).to_string(), "the REPL ended by SIGTERM"),
    ];
    for (code, meaning) in &status {
        roff.control("TP", []);
        roff.text([bold(code.as_str())]);
        roff.text([roman(*meaning)]);
    }

    if page.is_none() {
        roff.control("SH", ["ENVIRONMENT"]);
        tagged(&mut roff, ENVIRONMENT);
        roff.control("SH", ["FILES"]);
        paragraph(&mut roff, "CONFIG stands for $XDG_CONFIG_HOME/buddy, else ~/.config/buddy. Tools never write buddy's own files, even when approved.");
        tagged(&mut roff, FILES);
    }

    let examples = examples(page);
    if !examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for (line, what) in examples {
            roff.control("TP", []);
            roff.text([bold(*line)]);
            roff.text([roman(*what)]);
        }
    }

    roff.control("SH", ["SEE ALSO"]);
    let mut refs: Vec<Inline> = Vec::new();
    match page {
        None => refs.extend([
            italic("buddy-exec"),
            roman("(1), "),
            italic("buddy-serve"),
            roman("(1), "),
        ]),
        Some(_) => refs.extend([italic("buddy"), roman("(1), ")]),
    }
    refs.push(roman("and in the sources: README.md, docs/USAGE.md, docs/CONFIG.md, docs/EVENTS.md (exec --json), docs/SERVE.md, docs/SECURITY.md, buddy.toml.example"));
    roff.text(refs);
    roff
}

fn paragraph(roff: &mut Roff, text: &str) {
    roff.control("PP", []);
    roff.text([roman(text)]);
}

fn tagged(roff: &mut Roff, rows: &[(&str, &str)]) {
    for (tag, meaning) in rows {
        roff.control("TP", []);
        roff.text([bold(*tag)]);
        roff.text([roman(*meaning)]);
    }
}

/// Text shown line for line, as the REPL shows it.
fn verbatim(roff: &mut Roff, text: &str) {
    roff.control("PP", []);
    roff.control("nf", []);
    for line in text.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigFile;

    /// The keys serde accepts in one table of the file, read from the error
    /// it gives for an unknown key ("expected one of `a`, `b`"), so the list
    /// comes from the structs themselves.
    fn accepted_keys(table: &str) -> Vec<String> {
        let doc = match table {
            "" => "no_such_key_xyz = 1\n".to_string(),
            t if t.starts_with("[[") => format!("{t}\nno_such_key_xyz = 1\n"),
            t => format!("[{t}]\nno_such_key_xyz = 1\n"),
        };
        let err = match toml::from_str::<ConfigFile>(&doc) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("[{table}] took an unknown key"),
        };
        let list = err
            .split_once("expected one of")
            .or_else(|| err.split_once("expected"))
            .unwrap_or_else(|| panic!("no key list in: {err}"))
            .1;
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn every_config_key_has_a_line_and_every_line_a_key() {
        let tables = [
            ("agent", "agent"),
            ("models.x", "models.NAME"),
            ("tools", "tools"),
            ("network", "network"),
            ("display", "display"),
            ("ui", "ui"),
            ("execution", "execution"),
            ("discovery", "discovery"),
            ("auth.x", "auth.PROVIDER"),
            ("mcp_servers.x", "mcp_servers.NAME"),
            ("hooks", "hooks"),
            ("[[hooks.Stop]]", "hooks.EVENT"),
            ("serve", "serve"),
            ("telemetry", "telemetry"),
        ];
        let documented = |t: &str| -> Vec<&str> {
            CONFIG_KEYS
                .iter()
                .filter(|(table, _, _)| *table == t)
                .map(|(_, k, _)| *k)
                .collect()
        };
        for (table, shown) in tables {
            let mut accepted = accepted_keys(table);
            let mut listed: Vec<String> = documented(shown).iter().map(|k| k.to_string()).collect();
            accepted.sort();
            listed.sort();
            assert_eq!(
                listed, accepted,
                "[{shown}] in the man page vs the config structs"
            );
        }
        // And no table the page does not know: the top level's keys.
        let mut top = accepted_keys("").into_iter().collect::<Vec<_>>();
        top.sort();
        let mut known: Vec<String> = tables
            .iter()
            .map(|(t, _)| {
                t.trim_start_matches('[')
                    .split('.')
                    .next()
                    .unwrap_or(t)
                    .to_string()
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        known.sort();
        assert_eq!(top, known, "a config table the man page does not list");
    }

    /// The words of `text`, where `_` and `-` belong to a word.
    fn words(text: &str) -> std::collections::BTreeSet<&str> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .filter(|w| !w.is_empty())
            .collect()
    }

    #[test]
    fn every_builtin_tool_is_named_by_a_tools_key_or_a_file() {
        // A user turns a tool off, or learns where it reads, from these lines.
        let mut text = String::new();
        for (table, key, meaning) in CONFIG_KEYS {
            if *table == "tools" && key.ends_with("_enabled") {
                text.push_str(meaning);
                text.push('\n');
            }
        }
        for (_, meaning) in FILES {
            text.push_str(meaning);
            text.push('\n');
        }
        let named = words(&text);
        for name in crate::app::setup::builtin_tool_names() {
            assert!(
                named.contains(name),
                "the man page names the tool `{name}` in no [tools] *_enabled line nor FILES entry"
            );
        }
    }

    #[test]
    fn every_wire_protocol_is_documented_and_replayed() {
        use crate::config::ApiProtocol;
        // An exhaustive match: a new protocol does not compile until it is
        // named here, and then must pass the checks below.
        let name = |p: ApiProtocol| match p {
            ApiProtocol::Completions => "completions",
            ApiProtocol::Responses => "responses",
            ApiProtocol::Messages => "messages",
        };
        let api_line = CONFIG_KEYS
            .iter()
            .find(|(table, key, _)| *table == "models.NAME" && *key == "api")
            .map(|(_, _, meaning)| *meaning)
            .unwrap_or_default();
        let fixtures = include_str!("../../../tests/fixtures/wire/expected.toml");
        let architecture = include_str!("../../../docs/ARCHITECTURE.md");
        for p in [
            ApiProtocol::Completions,
            ApiProtocol::Responses,
            ApiProtocol::Messages,
        ] {
            let n = name(p);
            #[derive(serde::Deserialize)]
            struct Api {
                api: ApiProtocol,
            }
            let parsed: Api = toml::from_str(&format!("api = \"{n}\"")).unwrap();
            assert_eq!(parsed.api, p, "`api = \"{n}\"` is another protocol");
            assert!(
                api_line.contains(&format!("\"{n}\"")),
                "the man page's `api` line does not offer \"{n}\": {api_line}"
            );
            assert!(
                fixtures.contains(&format!("api = \"{n}\"")),
                "no recorded fixture in tests/fixtures/wire/expected.toml speaks {n}"
            );
            assert!(
                architecture.contains(&format!("{n}.rs")),
                "docs/ARCHITECTURE.md does not name provider/{n}.rs"
            );
        }
    }

    #[test]
    fn every_subcommand_is_shown_in_the_user_docs() {
        use clap::CommandFactory;
        let docs = [
            include_str!("../../../README.md"),
            include_str!("../../../docs/USAGE.md"),
            include_str!("../../../docs/CONFIG.md"),
            include_str!("../../../docs/SERVE.md"),
            include_str!("../../../docs/MCP.md"),
            include_str!("../../../docs/HOOKS.md"),
        ];
        for sub in crate::cli::Cli::command().get_subcommands() {
            let shown = format!("buddy {}", sub.get_name());
            assert!(
                docs.iter().any(|d| d
                    .match_indices(&shown)
                    .any(|(at, _)| !d[at + shown.len()..]
                        .starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_'))),
                "`{shown}` is in none of README.md, docs/USAGE.md, docs/CONFIG.md, docs/SERVE.md, docs/MCP.md, docs/HOOKS.md"
            );
        }
    }

    #[test]
    fn every_subcommand_has_examples() {
        use clap::CommandFactory;
        for sub in crate::cli::Cli::command().get_subcommands() {
            assert!(
                !examples(Some(sub.get_name())).is_empty(),
                "`buddy {}` has no EXAMPLES in its man page",
                sub.get_name()
            );
        }
    }
}
