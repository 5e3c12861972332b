//! buddy: a terminal AI agent for any OpenAI-compatible model.
//!
//! Layers, lowest first: `wire` (protocol types and decoders), `provider` (HTTP
//! client), `host` (where commands run: local, SSH, container), `shell`
//! (command lines read without running them: lexer, parser, read-only
//! classifier), `tools`
//! (registry and built-in tools), `agent` (the loop, history,
//! tokens, events), `session` (a conversation's on-disk journal), `config`, and
//! `ui` (front ends that render agent events). `text` makes outside text safe
//! to show on a terminal; `localfile` reads local files with a type check and
//! a size bound; `redact` keeps known secrets out of everything shown;
//! `background` runs housekeeping at a lower priority than live streams.
//! `cli` defines the command line; `main.rs` only wires these together.

pub mod agent;
pub mod app;
pub mod auth;
pub mod background;
pub mod cli;
pub mod clock;
pub mod config;
pub mod frontmatter;
pub mod host;
pub mod localfile;
pub mod mcp;
pub mod net;
pub mod procenv;
pub mod provider;
pub mod redact;
pub mod serve;
pub mod session;
pub mod shell;
pub mod text;
pub mod tools;
pub mod ui;
pub mod wire;
