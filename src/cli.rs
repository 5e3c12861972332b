//! The command line, declared with clap. Parsing only; `app` acts on it.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// What `buddy --version` prints: clap's own form, `NAME VERSION`.
pub const VERSION_LINE: &str = concat!("buddy ", env!("CARGO_PKG_VERSION"));

/// True for exactly `buddy --version` or `buddy -V`, which `main` answers
/// without building the clap command tree.
pub fn asks_only_version(args: &[std::ffi::OsString]) -> bool {
    args.len() == 2 && (args[1] == "--version" || args[1] == "-V")
}

/// `Cli::parse()` for the process's own arguments, without freeing clap's
/// command tree and matches afterwards: the process keeps them until it
/// exits, and dropping them was a tenth of a plain `buddy exec`'s
/// instructions (docs/PERFORMANCE.md). Errors and `--help` exit as
/// `parse()` does.
pub fn parse_args(args: Vec<std::ffi::OsString>) -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    if let Some(name) = named_subcommand(&command, &args) {
        command = only_subcommand(command, &name);
    }
    let parsed = command
        .try_get_matches_from_mut(args)
        .and_then(|mut matches| {
            let cli = Cli::from_arg_matches_mut(&mut matches);
            std::mem::forget(matches);
            cli
        })
        .map_err(|e| e.format(&mut command));
    match parsed {
        Ok(cli) => {
            std::mem::forget(command);
            cli
        }
        Err(e) => e.exit(),
    }
}

/// The subcommand a command line names, when every word before it is a
/// global option clap knows (with its value): `exec` in `buddy -m x exec
/// hi`. `None` for anything else (no subcommand, `--help`, `-V`, `help`, an
/// unknown or abbreviated option, clustered short flags, `--`): the whole
/// tree parses those, with its own errors and suggestions.
fn named_subcommand(command: &clap::Command, args: &[std::ffi::OsString]) -> Option<String> {
    let global = |pick: &dyn Fn(&clap::Arg) -> bool| {
        command
            .get_arguments()
            .find(|a| a.is_global_set() && pick(a))
    };
    // Whether the option's value is the next word (`--model x`), not only
    // after `=` (`--tmux=NAME`).
    let takes_next = |a: &clap::Arg| a.get_action().takes_values() && !a.is_require_equals_set();
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        let word = word.to_str()?;
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            let arg = global(&|a| a.get_long() == Some(name))?;
            if !inline && takes_next(arg) {
                words.next()?;
            }
        } else if let Some(short) = word.strip_prefix('-') {
            let mut chars = short.chars();
            let c = chars.next()?;
            let arg = global(&|a| a.get_short() == Some(c))?;
            // `-m x`, `-mx`, `-m`'s value in the word itself, or a flag
            // alone; flags clustered with others are left to the whole tree.
            let rest = chars.as_str();
            match (takes_next(arg), rest.is_empty()) {
                (true, true) => {
                    words.next()?;
                }
                (false, false) => return None,
                _ => {}
            }
        } else {
            return command
                .find_subcommand(word)
                .map(|s| s.get_name().to_string());
        }
    }
    None
}

/// `full` with `name` as its only subcommand. When clap builds a tree it
/// copies every global option into every subcommand: ten options into
/// fourteen subcommands was 161 KB of heap written and a tenth of a plain
/// `exec`'s instructions, for subcommands the line does not name. Parsing
/// against this tree gives the same `Cli`, help and errors for that
/// subcommand (`tests` below compares them with the whole tree's).
fn only_subcommand(full: clap::Command, name: &str) -> clap::Command {
    let Some(sub) = full.find_subcommand(name).cloned() else {
        return full;
    };
    let mut top = GlobalArgs::augment_args(clap::Command::new(full.get_name().to_string()))
        .version(env!("CARGO_PKG_VERSION"));
    if let Some(text) = full.get_about() {
        top = top.about(text.clone());
    }
    if let Some(text) = full.get_long_about() {
        top = top.long_about(text.clone());
    }
    if let Some(text) = full.get_after_help() {
        top = top.after_help(text.clone());
    }
    top.subcommand(sub)
}

#[derive(Debug, Parser)]
#[command(
    name = "buddy",
    version,
    about = "A terminal AI agent for any OpenAI-compatible model",
    long_about = "A terminal AI agent for any OpenAI-compatible model.\n\nRun `buddy` for an interactive session or `buddy exec \"PROMPT\"` for a one-shot answer on stdout.",
    after_help = "Exit codes: 0 success, 1 runtime failure (API error after retries, iteration cap), 2 usage or config error, 130 interrupted."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

// The groups `--help` lists options in, so a reader can scan for a kind of
// option rather than read every line (exec has the most).
const HEADING_MODEL: &str = "Model and config";
const HEADING_TARGET: &str = "Where tools run";
const HEADING_INPUT: &str = "Prompt, session and approvals";
const HEADING_LIMITS: &str = "Limits";
const HEADING_OUTPUT: &str = "Output";

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = HEADING_MODEL)]
pub struct GlobalArgs {
    /// Use this config file (it must exist)
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Model profile name from the config, or a raw model id
    #[arg(short = 'm', long = "model", global = true, value_name = "NAME")]
    pub model: Option<String>,
    /// Override the API base URL (e.g. http://localhost:11434/v1)
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// Never use colour
    #[arg(long, global = true, help_heading = HEADING_OUTPUT)]
    pub no_color: bool,
    /// Start in plan mode: only read-only tools run until you accept the
    /// model's plan (`/plan` toggles it)
    #[arg(long, help_heading = HEADING_INPUT)]
    pub plan: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Where shell and file tools run.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = HEADING_TARGET)]
pub struct TargetArgs {
    /// Run tools on a server over SSH (the system `ssh` client, multiplexed)
    #[arg(long, global = true, value_name = "USER@HOST[:PORT]")]
    pub ssh: Option<String>,
    /// Extra option for ssh, as for `ssh -o` (repeatable)
    #[arg(
        long = "ssh-option",
        global = true,
        value_name = "OPTION",
        requires = "ssh"
    )]
    pub ssh_options: Vec<String>,
    /// Run tools inside a running container (podman or docker exec)
    #[arg(long, global = true, value_name = "NAME", conflicts_with = "ssh")]
    pub container: Option<String>,
    /// Container engine to use instead of the first of podman and docker found
    #[arg(long, global = true, value_name = "ENGINE", requires = "container")]
    pub container_engine: Option<String>,
    /// Run shell commands in a shared tmux pane (the default in the REPL when
    /// tmux is installed); `--tmux=NAME` picks the session
    #[arg(
        long,
        global = true,
        value_name = "SESSION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub tmux: Option<String>,
    /// Run shell commands directly, never in tmux
    #[arg(long, global = true, conflicts_with = "tmux")]
    pub no_tmux: bool,
}

/// Each subcommand's own arguments are built only when it is the one
/// parsed (`defer`), also when the whole tree parses (`--help`, a typo):
/// building all of them was ~100K instructions at every start.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Answer one prompt and exit; the answer alone goes to stdout
    Exec(ExecArgs),
    /// Continue a saved session of this directory
    Resume(ResumeArgs),
    /// List this directory's saved sessions, most recently used first
    Sessions(SessionsArgs),
    /// Write a saved session as Markdown to read or as JSON data
    Export(ExportArgs),
    /// List the models the active profile's server offers (* marks the one in use)
    Models,
    /// Log in to a provider (device code flow); tokens go to auth.json
    Login(LoginArgs),
    /// Remove a provider's stored login
    Logout(LogoutArgs),
    /// Serve the agent over HTTP (JSON + Server-Sent Events) with a web page
    Serve(ServeArgs),
    /// Print a shell completion script: `buddy completions bash > /etc/bash_completion.d/buddy`
    Completions(CompletionsArgs),
    /// Show a man page: `buddy man`, `buddy man exec` (formatted on a
    /// terminal, roff when piped or with --out-dir)
    Man(ManArgs),
    /// Trust a project's buddy.toml as it is now, so buddy uses all of its
    /// settings (keys sent to its URLs, approvals off, …) until it changes
    Trust(TrustArgs),
    /// List, show, add or remove MCP servers (`[mcp_servers]` in your config)
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Serve buddy to other agents over MCP on stdin/stdout (or Streamable
    /// HTTP with --listen): tools `buddy` (run a task, get the answer and a
    /// session id) and `buddy-reply`
    McpServer(McpServerArgs),
    /// Speak the Agent Client Protocol on stdin/stdout, for editors (Zed's
    /// `agent_servers`); approvals are asked in the editor
    Acp,
}

#[derive(Debug, Clone, Subcommand)]
#[command(defer = true)]
pub enum McpCommand {
    /// Every configured server: its name, how it is reached, whether enabled
    List,
    /// One server's settings, then its tools (it is started to ask)
    Get {
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Call one tool of a server by hand (no model, no approval) and print
    /// its result: to try a server
    Call {
        #[arg(value_name = "NAME")]
        name: String,
        /// The tool's own name on the server (not mcp__NAME__TOOL)
        #[arg(value_name = "TOOL")]
        tool: String,
        /// Its arguments, one JSON object (default: {})
        #[arg(value_name = "JSON")]
        arguments: Option<String>,
        /// Answer the server's questions with their forms' defaults (a
        /// form with a required field that has none is declined); without
        /// it every question is declined
        #[arg(long)]
        accept_defaults: bool,
    },
    /// Add a server to your config file: a program after `--`, or --url
    Add(McpAddArgs),
    /// Remove a server from your config file
    Remove {
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Log in to an HTTP server that asks for OAuth (opens a browser)
    Login {
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Forget the login kept for a server
    Logout {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct McpAddArgs {
    /// The server's name (its tools become mcp__NAME__TOOL)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// A Streamable HTTP server's URL, instead of a program
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub url: Option<String>,
    /// The variable holding the bearer token for --url
    #[arg(long, value_name = "VAR", requires = "url")]
    pub bearer_token_env: Option<String>,
    /// A variable for the program, KEY=VALUE (repeatable)
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// An HTTP header for --url, NAME=VALUE (repeatable)
    #[arg(long = "header", value_name = "NAME=VALUE", requires = "url")]
    pub headers: Vec<String>,
    /// The program and its arguments, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (default: buddy's own)
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
    /// Write every page (buddy.1, buddy-exec.1, …) into this directory instead
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Args)]
pub struct McpServerArgs {
    /// Let a caller with approval "full" work in a filesystem root or in a
    /// directory that holds buddy's own files (your home, with the config)
    #[arg(long)]
    pub allow_any_cwd: bool,
    /// Serve over Streamable HTTP at http://ADDR/mcp instead of stdin/stdout;
    /// anything but loopback needs a token
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// With --listen: require this token on every request (else
    /// BUDDY_MCP_SERVER_TOKEN)
    #[arg(long, value_name = "TOKEN", requires = "listen")]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct TrustArgs {
    /// The config file (default: buddy.toml or agent.toml in this directory)
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// Address to listen on; anything but loopback needs a token
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8421")]
    pub listen: std::net::SocketAddr,
    /// Require this token on every request (else BUDDY_SERVE_TOKEN)
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Deny an approval nobody answers within this long
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::clock::parse_duration)]
    pub approval_timeout: std::time::Duration,
    /// Most connections open at once; more get 503 [default: 256]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Most sessions with a live agent (running or idle); the agent idle
    /// longest makes room, else 503 [default: 256]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions: Option<u32>,
    /// Most sessions running a prompt at once; more get 503 [default: 128]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_running: Option<u32>,
    /// Most event streams open on one session; more get 503 [default: 32]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: Option<u32>,
    /// Most event streams open on the whole server; more get 503 [default: 192]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams_total: Option<u32>,
    /// Close a connection that has not sent a request's headers within this
    /// long (a new one, or a kept-alive one left idle) [default: 10s]
    #[arg(long, value_name = "DURATION", value_parser = crate::clock::parse_duration)]
    pub header_timeout: Option<std::time::Duration>,
    /// Close a connection on which nothing moved either way for this long
    /// [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = crate::clock::parse_duration)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Close a session's agent after this long without a run; the next
    /// prompt builds a new one [default: 5m]
    #[arg(long, value_name = "DURATION", value_parser = crate::clock::parse_duration)]
    pub agent_idle: Option<std::time::Duration>,
    /// Answer to this host name too (behind a load balancer), in Host and
    /// Origin; repeatable; needs a token [default: serve.public_hosts]
    #[arg(long = "public-host", value_name = "NAME")]
    pub public_hosts: Vec<String>,
    /// Believe X-Forwarded-For from this address or CIDR range (a load
    /// balancer); repeatable [default: serve.trusted_proxies]
    #[arg(long = "trusted-proxy", value_name = "ADDR")]
    pub trusted_proxies: Vec<String>,
    /// Keep sessions in PostgreSQL (postgres://USER@HOST:PORT/DB), shared
    /// by every instance given the same URL [default: session files]
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// With --store: a crashed instance's sessions are free after this
    /// [default: 15s]
    #[arg(long, value_name = "DURATION", value_parser = crate::clock::parse_duration)]
    pub lease: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ServeCommand {
    /// Add a user (or give one a new token): prints the new token once, on
    /// stdout, and stores only its hash in the users file (0600)
    AddUser {
        #[arg(value_name = "NAME")]
        name: String,
        /// The users file [default: serve.users_file, else
        /// .buddyx/serve/users here]
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct LoginArgs {
    /// A provider (e.g. openai) or a profile whose provider to log in to
    #[arg(value_name = "PROVIDER|PROFILE")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct LogoutArgs {
    /// The provider to log out of (default openai)
    #[arg(value_name = "PROVIDER")]
    pub provider: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    /// Session id, or a unique prefix of one (see `buddy sessions`); without
    /// one, on a terminal, a list of this directory's sessions to pick from
    #[arg(value_name = "ID")]
    pub id: Option<String>,
    /// Continue the most recently used session
    #[arg(long, conflicts_with = "id")]
    pub last: bool,
    /// Branch the session into a new one that shares its past and goes on
    /// separately; the original is left as it is
    #[arg(long)]
    pub fork: bool,
    /// Use the sessions in this PostgreSQL database (postgres://USER@HOST/DB,
    /// as `buddy serve --store`; else BUDDY_STORE) instead of this
    /// directory's files
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct SessionsArgs {
    /// Use the sessions in this PostgreSQL database (postgres://USER@HOST/DB,
    /// as `buddy serve --store`; else BUDDY_STORE) instead of this
    /// directory's files
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Session id, or a unique prefix of one (see `buddy sessions`); without
    /// one, the most recently used
    #[arg(value_name = "SESSION")]
    pub id: Option<String>,
    /// Export the most recently used session
    #[arg(long, conflicts_with = "id")]
    pub last: bool,
    /// `markdown` to read (prompts, answers, tool calls folded) or `json`,
    /// the conversation's items as data
    #[arg(long, value_enum, default_value_t = ExportFormat::Markdown)]
    pub format: ExportFormat,
    /// Write to FILE (replaced whole, owner-only) instead of stdout
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Use the sessions in this PostgreSQL database (postgres://USER@HOST/DB,
    /// as `buddy serve --store`; else BUDDY_STORE) instead of this
    /// directory's files
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Markdown,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// The prompt (its words are joined with spaces); `-`, or nothing with
    /// piped stdin, reads it from stdin. With a prompt given, piped stdin is
    /// added after it as a `<stdin>` block. `--` before a prompt that starts
    /// with a dash.
    // Flags are flags wherever they stand, so a mistyped one is an error
    // with a suggestion, never words of the prompt.
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,
    /// Run shell commands without asking for approval
    #[arg(long, help_heading = HEADING_INPUT)]
    pub dangerously_auto_approve: bool,
    /// Continue a saved session (an id, a unique prefix, or `last`) and add this turn to it
    #[arg(long, value_name = "ID|last", help_heading = HEADING_INPUT)]
    pub resume: Option<String>,
    /// Plan mode: only read-only tools run; the plan the model ends with
    /// (exit_plan_mode) is printed on stdout and exec exits 0
    #[arg(long, help_heading = HEADING_INPUT)]
    pub plan: bool,
    /// Stop after this many model requests (default: agent.max_turns)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = HEADING_LIMITS)]
    pub max_turns: Option<u32>,
    /// Stop once the run has used this many tokens (prompt + completion)
    #[arg(long, value_name = "N", help_heading = HEADING_LIMITS)]
    pub max_tokens: Option<u64>,
    /// Write every agent event to stdout as a JSON line (schema: docs/EVENTS.md)
    #[arg(long, help_heading = HEADING_OUTPUT)]
    pub json: bool,
    /// Stop the run after this long (e.g. 90s, 10m, 1h)
    #[arg(long, value_name = "DURATION", value_parser = crate::clock::parse_duration, help_heading = HEADING_LIMITS)]
    pub timeout: Option<std::time::Duration>,
    /// Attach an image (PNG, JPEG, GIF or WebP, at most 20 MiB) to the prompt; repeatable
    #[arg(long = "image", value_name = "FILE", help_heading = HEADING_INPUT)]
    pub images: Vec<std::path::PathBuf>,
    /// The answer must be JSON matching this JSON Schema: sent to the model
    /// as its structured output, checked (one retry), and printed alone
    #[arg(long, value_name = "FILE", help_heading = HEADING_OUTPUT)]
    pub output_schema: Option<PathBuf>,
    /// Write the final answer to this file as well (replaced atomically, 0600)
    #[arg(short = 'o', long = "output-last-message", value_name = "FILE", help_heading = HEADING_OUTPUT)]
    pub output_last_message: Option<PathBuf>,
    /// Stop once the run has cost this many US dollars (price table or the
    /// profile's `price`)
    #[arg(long, value_name = "USD", value_parser = parse_usd, help_heading = HEADING_LIMITS)]
    pub max_cost: Option<f64>,
}

/// A `--max-cost` that is not a dollar amount above zero, as typed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an amount of dollars above zero (e.g. 0.50)")]
pub struct NotDollars(String);

/// A dollar amount: a finite number above zero (`0.50`, `2`).
fn parse_usd(text: &str) -> Result<f64, NotDollars> {
    let t = text.trim().trim_start_matches('$');
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(NotDollars(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    fn words(line: &str) -> Vec<std::ffi::OsString> {
        std::iter::once("buddy")
            .chain(line.split(' ').filter(|w| !w.is_empty()))
            .map(Into::into)
            .collect()
    }

    /// What parsing `line` against `command` gives: the `Cli`, or the text
    /// clap would print (an error, or help).
    fn outcome(command: clap::Command, line: &str) -> String {
        match command
            .try_get_matches_from(words(line))
            .and_then(|m| Cli::from_arg_matches(&m))
        {
            Ok(cli) => format!("{cli:?}"),
            Err(e) => format!("{:?}: {}", e.kind(), e.render()),
        }
    }

    #[test]
    fn the_named_subcommand_is_the_first_word_after_known_global_options() {
        let c = Cli::command();
        let named = |line: &str| named_subcommand(&c, &words(line));
        assert_eq!(named("exec hi").as_deref(), Some("exec"));
        assert_eq!(named("-m x exec hi").as_deref(), Some("exec"));
        assert_eq!(named("-mx exec hi").as_deref(), Some("exec"));
        // `exec` is the model's name here.
        assert_eq!(named("--model exec sessions").as_deref(), Some("sessions"));
        assert_eq!(
            named("--config=a.toml --no-color serve").as_deref(),
            Some("serve")
        );
        // --tmux takes a value only after `=`.
        assert_eq!(named("--tmux serve").as_deref(), Some("serve"));
        assert_eq!(named("--tmux=work serve").as_deref(), Some("serve"));
        assert_eq!(
            named("--ssh h --ssh-option A=b mcp list").as_deref(),
            Some("mcp")
        );
        for line in [
            "",
            "-m x",
            "--help exec",
            "-h exec",
            "-V exec",
            "--version exec",
            "help exec",
            "--bogus exec",
            "--mod x exec",
            "-- exec",
            "nosuch hi",
            "-z exec",
            "--model",
        ] {
            assert_eq!(named(line), None, "{line:?}");
        }
    }

    #[test]
    fn the_tree_with_one_subcommand_parses_and_fails_as_the_whole_tree() {
        for line in [
            "exec hi",
            "-m x exec --max-turns 3 hi",
            "exec --max-turn 3 hi",
            "exec -- --weird prompt",
            "--ssh a exec --container b hi",
            "exec --ssh-option x hi",
            "exec --container-engine podman hi",
            "exec --help",
            "exec -h",
            "--model m serve --help",
            "exec --model a --model b hi",
            "exec --max-cost -1 hi",
            "exec --json --resume last -o out.txt hi",
            "--no-color exec --tmux hi",
            "exec --tmux=w --no-tmux hi",
            "--base-url http://127.0.0.1:1/v1 exec hi",
            "--model -x exec hi",
            "-m -x exec hi",
            "-m=x exec hi",
            "resume last",
            "resume --help",
            "sessions",
            "sessions extra",
            "models",
            "login --help",
            "logout",
            "serve --port 0",
            "completions bash",
            "completions nosuch",
            "man exec",
            "trust buddy.toml",
            "mcp",
            "mcp bogus",
            "mcp list",
            "mcp add --help",
            "mcp add name -- prog arg",
            "mcp get name",
            "mcp remove name",
            "mcp-server",
            "acp",
            "acp extra",
        ] {
            let c = Cli::command();
            let Some(name) = named_subcommand(&c, &words(line)) else {
                panic!("{line:?} names no subcommand");
            };
            assert_eq!(
                outcome(only_subcommand(Cli::command(), &name), line),
                outcome(Cli::command(), line),
                "{line:?}"
            );
        }
    }

    #[test]
    fn exec_help_lists_its_options_under_group_headings() {
        let help = outcome(Cli::command(), "exec --help");
        let at = |text: &str| {
            help.find(text)
                .unwrap_or_else(|| panic!("no {text:?} in:\n{help}"))
        };
        // Each heading comes before the options of its group.
        for (heading, option) in [
            ("Model and config:", "--model"),
            ("Where tools run:", "--ssh"),
            ("Prompt, session and approvals:", "--resume"),
            ("Limits:", "--max-turns"),
            ("Output:", "--json"),
        ] {
            assert!(at(heading) < at(option), "{heading} {option}:\n{help}");
        }
        // The limits are together, not spread among other options: a group
        // ends at a blank line.
        let limits = &help[at("Limits:")..];
        let limits = &limits[..limits.find("\n\n").unwrap_or(limits.len())];
        for option in ["--max-turns", "--max-tokens", "--timeout", "--max-cost"] {
            assert!(limits.contains(option), "{option}:\n{help}");
        }
    }
}
