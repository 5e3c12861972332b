//! The end-to-end suite, one test binary with a module per suite (one build
//! and one link instead of one per file; cargo runs the tests of a binary on
//! its threads as it ran each file's). A suite goes into its own binary only
//! when it must have a process of its own (none does today): say why there.
//!
//! Run one suite with `cargo test --profile suite --test suite -- repl::`.

mod support;

mod acp;
mod agent_control;
mod approvals;
mod architecture;
mod container;
mod custom;
mod denylist;
mod deploy;
mod discovery;
mod edit_tools;
mod events_json;
mod exec;
mod exec_input;
mod exec_scripting;
mod exit_codes;
mod export;
mod fake_provider_selftest;
mod hooks;
mod hostile_server;
mod images;
mod jobs;
mod live_output;
mod login;
mod mcp;
mod mcp_conformance;
mod mcp_oauth;
mod mcp_questions;
mod mcp_server;
mod mcp_server_http;
mod plan;
mod protocol_messages;
mod protocol_responses;
mod real_server;
mod repl;
mod repl_input;
mod repl_render;
mod resume_picker;
mod rewind;
mod safety;
mod sandbox;
mod search;
mod serve;
mod serve_browser;
mod serve_cluster;
mod serve_edge;
mod serve_store_outage;
mod serve_team;
mod sessions;
mod shell_help;
mod ssh;
mod startup;
mod startup_layout;
mod store_cli;
mod subagents;
mod telemetry;
mod tls_proxy;
mod tmux_exec;
mod wire_fixtures;
mod workdir;
