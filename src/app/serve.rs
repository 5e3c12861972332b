//! `buddy serve`: the HTTP front end (`crate::serve`) wired to this
//! directory's session store and an agent built like exec's.

use super::hosted::Hosted;
use super::{workdir, AppError, Exit};
use crate::agent::allowlist::SharedAllowList;
use crate::agent::protocol::SessionSummary;
use crate::agent::{self, AgentHandle, HostedError};
use crate::cli::{ServeArgs, ServeCommand, TargetArgs};
use crate::config::{CliOverrides, ServeSection};
use crate::serve::{Backend, Limits, ServeOptions};
use crate::session::postgres::Pg;
use crate::session::{self, Store};
use crate::wire::Message;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub(crate) async fn serve(
    args: ServeArgs,
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    if let Some(ServeCommand::AddUser { name, file }) = &args.command {
        return add_user(name, file.as_deref(), overrides);
    }
    let (hosted, style) = Hosted::load(overrides, target_args, &workdir()).await?;
    let settings = &hosted.settings;
    let limits = limits(&args, &settings.serve)?;
    let team = team(&settings.serve, hosted.workdir())?;
    let users = team.users.len();
    let balancer = balancer(&args, &settings.serve)?;
    let token = args
        .token
        .clone()
        .or_else(|| crate::process::var(crate::config::SERVE_TOKEN_ENV))
        .filter(|t| !t.is_empty());
    let mut opts = ServeOptions {
        listen: args.listen,
        token: token.clone(),
        approval_timeout: args.approval_timeout,
        max_body: settings
            .serve
            .max_body_bytes
            .map_or(crate::serve::MAX_BODY, |b| {
                usize::try_from(b).unwrap_or(usize::MAX)
            }),
        limits,
        team,
        balancer,
    };
    super::remember_secrets(settings);
    crate::redact::remember(token.iter());
    // Many sessions share this process: agent builds and turn-end saves give
    // way to the streams being relayed.
    crate::background::yield_to_streams();
    let local = Store::for_workdir(hosted.workdir());
    let store_url =
        super::database::store_url(args.store.as_deref()).or_else(|| settings.serve.store.clone());
    let database = match store_url.as_deref() {
        None | Some("") => None,
        Some(url) => Some(database(url, &args, &settings.serve).await?),
    };
    // Owners, runs at once and spending shared by every instance.
    opts.team.shared = database
        .as_ref()
        .map(|pg| crate::serve::team_pg::TeamDb::new(pg));
    let backend = Arc::new(ServeBackend {
        store: local,
        database,
        secrets: crate::redact::known().all().to_vec(),
        hosted,
    });
    let backend_dir = backend.hosted.workdir().to_path_buf();
    let instance = backend.database.as_ref().map(|d| d.instance().to_string());
    let ready = |started: crate::serve::Started| {
        let addr = started.addr;
        // The URL alone on stdout, for scripts; the rest for people.
        println!("http://{addr}/");
        if started.connections < started.connections_asked {
            eprintln!(
                "{} the descriptor limit (ulimit -n {}) leaves room for {} connections, not {}: raise the hard limit (ulimit -Hn, LimitNOFILE=) for more",
                style.warning("warning:"),
                started.nofile,
                started.connections,
                started.connections_asked
            );
        }
        eprintln!(
            "{} serving {} on http://{addr}/ — Ctrl-C to stop",
            style.actor("buddy"),
            backend_dir.display()
        );
        if let Some(instance) = &instance {
            eprintln!(
                "{}",
                style.dim(&format!(
                    "sessions in PostgreSQL, shared with every instance on the same database; this one is {instance}"
                ))
            );
        }
        if users > 0 {
            eprintln!(
                "{}",
                style.dim(&format!(
                    "{users} users: each sees only their own sessions; every request needs a token"
                ))
            );
        }
        if token.is_some() {
            eprintln!(
                "{}",
                style.dim("clients must send the token: Authorization: Bearer <token>, or ?token=<token> in the page's URL")
            );
        }
    };
    crate::serve::run(opts, backend, ready, crate::serve::shutdown_signal()).await?;
    eprintln!("{}", style.dim("stopped; every session is saved"));
    Ok(Exit::Ok)
}

/// Where `buddy serve` keeps its own files for the directory it serves
/// (owners, users, the audit log): beside the sessions.
fn state_dir(workdir: &Path) -> PathBuf {
    let sessions = Store::for_workdir(workdir).dir().to_path_buf();
    sessions
        .parent()
        .map_or_else(|| workdir.join(session::DIR), Path::to_path_buf)
        .join("serve")
}

/// The users file: the config's `users_file` (relative to the served
/// directory), else `.buddyx/serve/users` there.
fn users_file(file: &ServeSection, workdir: &Path) -> PathBuf {
    match &file.users_file {
        Some(p) => workdir.join(p),
        None => state_dir(workdir).join("users"),
    }
}

/// `buddy serve add-user NAME`: the new token on stdout (the only place it
/// ever appears), its hash in the users file.
fn add_user(name: &str, file: Option<&Path>, overrides: &CliOverrides) -> Result<Exit, AppError> {
    let cwd = workdir();
    let path = match file {
        Some(p) => cwd.join(p),
        None => {
            let env = crate::process::var;
            let trust = crate::config::trust::TrustStore::of_user(&env);
            let (config, _) = crate::config::load_file(&cwd, &env, overrides, trust.as_deref())?;
            users_file(&config.serve, &cwd)
        }
    };
    let token = crate::serve::add_user(&path, name).map_err(|e| AppError::Usage(e.to_string()))?;
    println!("{token}");
    eprintln!(
        "user {name} added to {}; the token above is shown once and stored only as a hash",
        path.display()
    );
    Ok(Exit::Ok)
}

/// Users, their limits and the audit log, from `[serve]` and the users file.
fn team(file: &ServeSection, workdir: &Path) -> Result<crate::serve::TeamOptions, AppError> {
    let usage = |e: crate::serve::UsersError| AppError::config(e.to_string());
    let mut users = crate::serve::Users::default();
    for (name, hash) in &file.users {
        users.insert(name, hash).map_err(usage)?;
    }
    users.load_file(&users_file(file, workdir)).map_err(usage)?;
    if file.user_max_running == Some(0) {
        return Err(AppError::config(
            "serve.user_max_running must be at least 1",
        ));
    }
    if let Some(usd) = file.user_daily_usd {
        if !usd.is_finite() || usd < 0.0 {
            return Err(AppError::config(
                "serve.user_daily_usd is US dollars, not negative",
            ));
        }
    }
    let state_dir = state_dir(workdir);
    let audit =
        (!users.is_empty() || file.audit_log.is_some()).then(|| crate::serve::AuditOptions {
            path: file
                .audit_log
                .as_ref()
                .map_or_else(|| state_dir.join("audit.log"), |p| workdir.join(p)),
            text: file.audit_text.unwrap_or(false),
            max_bytes: file
                .audit_max_mib
                .map_or(crate::serve::AUDIT_MAX_BYTES, |m| {
                    m.saturating_mul(1024 * 1024)
                }),
        });
    Ok(crate::serve::TeamOptions {
        users,
        state_dir: Some(state_dir),
        audit,
        user_max_running: file.user_max_running.map(|n| n as usize),
        user_daily_usd: file.user_daily_usd,
        shared: None,
    })
}

/// Public names and trusted proxies: the flags when any is given, else the
/// config's `[serve]` lists; each checked.
fn balancer(
    args: &ServeArgs,
    file: &ServeSection,
) -> Result<crate::serve::BalancerOptions, AppError> {
    let pick = |flags: &Vec<String>, config: &Vec<String>| {
        if flags.is_empty() {
            config.clone()
        } else {
            flags.clone()
        }
    };
    let public_hosts = pick(&args.public_hosts, &file.public_hosts)
        .iter()
        .map(|n| crate::serve::public_name(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AppError::Usage(format!("serve.public_hosts: {e}")))?;
    let trusted_proxies =
        crate::serve::TrustedProxies::parse(&pick(&args.trusted_proxies, &file.trusted_proxies))
            .map_err(|e| AppError::Usage(format!("serve.trusted_proxies: {e}")))?;
    Ok(crate::serve::BalancerOptions {
        public_hosts,
        trusted_proxies,
    })
}

/// The server's caps: a flag, else the config file's `[serve]`, else the
/// default. A zero in the file is refused: it would refuse every client.
fn limits(args: &ServeArgs, file: &ServeSection) -> Result<Limits, AppError> {
    let zero = [
        ("max_connections", file.max_connections.map(u64::from)),
        ("max_sessions", file.max_sessions.map(u64::from)),
        ("max_running", file.max_running.map(u64::from)),
        ("max_streams", file.max_streams.map(u64::from)),
        ("max_streams_total", file.max_streams_total.map(u64::from)),
        ("header_timeout_secs", file.header_timeout_secs),
        ("idle_timeout_secs", file.idle_timeout_secs),
        ("agent_idle_secs", file.agent_idle_secs),
        ("max_body_bytes", file.max_body_bytes),
        ("audit_max_mib", file.audit_max_mib),
    ]
    .into_iter()
    .find(|(_, v)| *v == Some(0));
    if let Some((key, _)) = zero {
        return Err(AppError::config(format!("serve.{key} must be at least 1")));
    }
    let d = Limits::default();
    let n = |flag: Option<u32>, file: Option<u32>, default: usize| {
        flag.or(file).map_or(default, |v| v as usize)
    };
    let t = |flag: Option<Duration>, secs: Option<u64>, default: Duration| {
        flag.or(secs.map(Duration::from_secs)).unwrap_or(default)
    };
    Ok(Limits {
        connections: n(args.max_connections, file.max_connections, d.connections),
        sessions: n(args.max_sessions, file.max_sessions, d.sessions),
        running: n(args.max_running, file.max_running, d.running),
        subscribers: n(args.max_streams, file.max_streams, d.subscribers),
        subscribers_total: n(
            args.max_streams_total,
            file.max_streams_total,
            d.subscribers_total,
        ),
        header_timeout: t(
            args.header_timeout,
            file.header_timeout_secs,
            d.header_timeout,
        ),
        idle_timeout: t(args.idle_timeout, file.idle_timeout_secs, d.idle_timeout),
        agent_idle: t(args.agent_idle, file.agent_idle_secs, d.agent_idle),
    })
}

/// Connects to the session database at `url` (a password in it is kept out
/// of every log and session, as API keys are).
async fn database(url: &str, args: &ServeArgs, file: &ServeSection) -> Result<Arc<Pg>, AppError> {
    if file.lease_secs == Some(0) || args.lease.is_some_and(|d| d.is_zero()) {
        return Err(AppError::Usage(
            "config error: the lease must be at least 1 s".into(),
        ));
    }
    let lease = args
        .lease
        .or(file.lease_secs.map(Duration::from_secs))
        .unwrap_or(crate::session::postgres::LEASE);
    super::database::connect(url, lease).await
}

struct ServeBackend {
    /// The session files, and where a database's sessions keep their
    /// images and checkpoints.
    store: Store,
    /// Sessions in PostgreSQL instead of files (`--store`).
    database: Option<Arc<Pg>>,
    hosted: Hosted,
    secrets: Vec<String>,
}

impl ServeBackend {
    fn info(&self) -> session::SessionInfo {
        session::SessionInfo {
            model: self.hosted.settings.api.model.clone(),
            profile: self.hosted.settings.api.profile.clone(),
            cwd: self.hosted.workdir().display().to_string(),
            secrets: self.secrets.clone(),
            origin: Some("serve".into()),
        }
    }
}

impl Backend for ServeBackend {
    fn create_session(&self, owner: Option<&str>) -> Result<String, HostedError> {
        // Created and released at once: every run takes it afresh.
        if let Some(pg) = &self.database {
            return Ok(pg.create_owned(self.info(), owner)?.id().to_string());
        }
        let (session, _warnings) = self.store.create(self.info())?;
        Ok(session.id().to_string())
    }

    fn resolve(&self, query: &str) -> Result<String, HostedError> {
        if let Some(pg) = &self.database {
            return Ok(pg.resolve(query)?);
        }
        Ok(self.store.resolve(query)?)
    }

    fn list(&self) -> Result<Vec<SessionSummary>, HostedError> {
        if let Some(pg) = &self.database {
            return Ok(super::sessions::list_database(pg)?.sessions);
        }
        Ok(super::sessions::list(self.hosted.workdir())?.sessions)
    }

    fn history(&self, id: &str) -> Result<Vec<Message>, HostedError> {
        if let Some(pg) = &self.database {
            return Ok(pg.read_history(id)?);
        }
        Ok(self.store.read_history(id)?)
    }

    #[allow(clippy::type_complexity)]
    fn transcript(
        &self,
        id: &str,
    ) -> Result<(Vec<Message>, Vec<(String, Vec<Message>)>), HostedError> {
        if let Some(pg) = &self.database {
            return Ok(pg.read_transcript(id)?);
        }
        Ok(self.store.read_transcript(id)?)
    }

    fn relay(&self) -> Option<Arc<dyn crate::serve::relay::Relay>> {
        let pg = self.database.clone()?;
        Some(Arc::new(super::serve_pg::PgRelay(pg)))
    }

    fn about(&self) -> crate::serve::About {
        let info = self.info();
        crate::serve::About {
            model: info.model,
            profile: info.profile,
            cwd: info.cwd,
        }
    }

    fn delete(&self, id: &str) -> Result<(), HostedError> {
        if let Some(pg) = &self.database {
            return Ok(pg.delete(id)?);
        }
        Ok(self.store.delete(id)?)
    }

    fn spawn(&self, allowed: SharedAllowList) -> Result<AgentHandle, HostedError> {
        // Approvals go to the HTTP client; nobody answering is the server's
        // timeout to decide, so the core always asks.
        let mut setup = self.hosted.setup()?;
        if let Some(pg) = &self.database {
            setup.sessions = Some(Box::new(super::serve_pg::PgSessions {
                pg: pg.clone(),
                cwd: self.hosted.workdir().display().to_string(),
                secrets: self.secrets.clone(),
                origin: None,
            }));
        }
        if let Some(sessions) = setup.sessions.as_mut() {
            sessions.set_origin("serve");
        }
        // The user's remembered rules hold in every served session too.
        super::approvals::load_into(&allowed);
        setup.allowed = allowed;
        Ok(agent::spawn(setup))
    }
}
