//! `buddy serve`: the HTTP front end (`crate::serve`) wired to this
//! directory's session store and an agent built like exec's.

use super::{agent_options, agent_setup, approval_rules, execution, load_settings, workdir};
use super::{AppError, Exit};
use crate::agent::allowlist::SharedAllowList;
use crate::agent::{self, AgentHandle, HostedError};
use crate::cli::{ServeArgs, TargetArgs};
use crate::config::{CliOverrides, Settings};
use crate::provider::http::Transports;
use crate::serve::{Backend, Limits, ServeOptions, SessionInfo};
use crate::session::{self, Store};
use crate::ui::style::Style;
use crate::wire::Message;
use std::sync::Arc;

/// Request bodies larger than this are refused.
const MAX_BODY: usize = 1024 * 1024;

pub(crate) async fn serve(
    args: ServeArgs,
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let (settings, _) = load_settings(overrides).await?;
    let style = Style::detect(settings.display.color);
    let choice = execution::SandboxChoice::new(&settings.tools, false);
    let mut execution =
        execution::open(target_args, &settings, false, choice.mode.is_some()).await?;
    execution::confine(&mut execution, choice, style)?;
    let limits = limits(&args);
    let token = args
        .token
        .or_else(|| std::env::var("BUDDY_SERVE_TOKEN").ok())
        .filter(|t| !t.is_empty());
    let opts = ServeOptions {
        listen: args.listen,
        token: token.clone(),
        approval_timeout: args.approval_timeout,
        max_body: MAX_BODY,
        limits,
    };
    super::remember_secrets(&settings);
    crate::redact::remember(token.iter());
    // Many sessions share this process: agent builds and turn-end saves give
    // way to the streams being relayed.
    crate::background::yield_to_streams();
    let backend = Arc::new(ServeBackend {
        store: Store::for_workdir(&workdir()),
        secrets: crate::redact::known().all().to_vec(),
        settings,
        execution,
        transports: Transports::default(),
    });
    let ready = |addr: std::net::SocketAddr| {
        // The URL alone on stdout, for scripts; the rest for people.
        println!("http://{addr}/");
        eprintln!(
            "{} serving {} on http://{addr}/ — Ctrl-C to stop",
            style.actor("buddy"),
            workdir().display()
        );
        if token.is_some() {
            eprintln!(
                "{}",
                style.dim("clients must send the token: Authorization: Bearer <token>, or ?token=<token> in the page's URL")
            );
        }
    };
    crate::serve::run(opts, backend, ready)
        .await
        .map_err(|e| AppError::Usage(e.to_string()))?;
    eprintln!("{}", style.dim("stopped; every session is saved"));
    Ok(Exit::Ok)
}

/// The server's caps: the defaults, or what the flags say.
fn limits(args: &ServeArgs) -> Limits {
    let d = Limits::default();
    let n = |v: Option<u32>, default: usize| v.map_or(default, |v| v as usize);
    Limits {
        connections: n(args.max_connections, d.connections),
        running: n(args.max_running, d.running),
        subscribers: n(args.max_streams, d.subscribers),
        header_timeout: args.header_timeout.unwrap_or(d.header_timeout),
    }
}

struct ServeBackend {
    store: Store,
    settings: Settings,
    secrets: Vec<String>,
    execution: execution::Execution,
    /// One HTTP client for every session's model requests.
    transports: Transports,
}

impl ServeBackend {
    fn info(&self) -> session::SessionInfo {
        session::SessionInfo {
            model: self.settings.api.model.clone(),
            profile: self.settings.api.profile.clone(),
            cwd: workdir().display().to_string(),
            secrets: self.secrets.clone(),
        }
    }
}

impl Backend for ServeBackend {
    fn create_session(&self) -> Result<String, HostedError> {
        // Created and released at once: every run takes it afresh.
        let (session, _warnings) = self.store.create(self.info())?;
        Ok(session.id().to_string())
    }

    fn resolve(&self, query: &str) -> Result<String, HostedError> {
        Ok(self.store.resolve(query)?)
    }

    fn list(&self) -> Result<Vec<SessionInfo>, HostedError> {
        let (list, _errors) = self.store.list()?;
        Ok(list
            .into_iter()
            .map(|s| SessionInfo {
                id: s.id,
                used: s.used,
                messages: s.messages,
                model: s.model,
                title: s.title,
            })
            .collect())
    }

    fn history(&self, id: &str) -> Result<Vec<Message>, HostedError> {
        Ok(self.store.read_history(id)?)
    }

    fn spawn(&self, allowed: SharedAllowList) -> Result<AgentHandle, HostedError> {
        // Approvals go to the HTTP client; nobody answering is the server's
        // timeout to decide, so the core always asks.
        let mut setup = agent_setup(
            &self.settings,
            &self.execution,
            approval_rules(&self.settings),
            agent_options(&self.settings),
            None,
            Some(&self.transports),
        )?;
        // The user's remembered rules hold in every served session too.
        super::approvals::load_into(&allowed);
        setup.allowed = allowed;
        Ok(agent::spawn(setup))
    }
}
