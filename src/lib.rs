//! buddy: a terminal AI agent for any OpenAI-compatible model.
//!
//! Layers, lowest first: `wire` (protocol types and decoders), `provider` (HTTP
//! client, with `auth` for `buddy login`), `host` (where commands run: local,
//! SSH, container), `shell` (command lines read without running them: lexer,
//! parser, read-only classifier), `tools` (registry and built-in tools), `mcp`
//! (tools, resources and prompts from MCP servers), `agent` (the loop,
//! history, tokens, events), `session` (a conversation's on-disk journal and
//! checkpoints), `config`, `ui` (front ends that render agent events), `serve`
//! (the HTTP API and web page), `mcp_server` (buddy's tools for other agents
//! over MCP) and `app` (the composition root: settings to a
//! running front end). Beside them: `text` makes outside text safe to show on
//! a terminal; `localfile` reads local files with a type check and a size
//! bound; `atomic_file` replaces a file's content all at once; `redact` keeps known secrets out of everything shown; `procenv`
//! scrubs keys from buddy's own environment block; `net` sets trust roots and
//! proxies; `http_guard` holds the checks of buddy's HTTP servers (Host,
//! Origin, token, bounded bodies); `frontmatter` reads prompt files' headers; `clock` does date and
//! duration maths; `background` runs housekeeping at a lower priority than
//! live streams; `drive` is the one loop every front end runs the agent
//! with. `cli` defines the command line; `main.rs` only wires these
//! together.

pub mod acp;
pub mod agent;
pub mod app;
pub mod atomic_file;
pub mod auth;
pub mod background;
pub mod cli;
pub mod clock;
pub mod config;
pub mod drive;
pub mod frontmatter;
pub mod host;
pub mod http_guard;
pub mod localfile;
pub mod mcp;
pub mod mcp_server;
pub mod net;
pub mod procenv;
pub mod process;
pub mod provider;
pub mod redact;
pub mod serve;
pub mod session;
pub mod shell;
pub mod telemetry;
pub mod text;
pub mod tools;
pub mod ui;
pub mod wire;
