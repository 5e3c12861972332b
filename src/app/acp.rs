//! `buddy acp`: the ACP front end (`crate::acp`) wired to the settings, the
//! session store of each session's working directory (data the session
//! carries: the process's directory never changes), and agents built
//! like serve's: approvals always go to the client (there is no terminal),
//! the client's MCP servers start beside the configured ones, and the file
//! tools go through the client's buffers when it offers them.

use super::hosted::Hosted;
use super::{AppError, Exit};
use crate::acp::{Backend, BackendError, ClientSide, Command, Listed, Spawned};
use crate::cli::TargetArgs;
use crate::config::{CliOverrides, McpServer};
use crate::session::{SessionInfo, Store};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) async fn acp(
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let workdir = super::workdir();
    let (hosted, _style) = Hosted::load(overrides, target_args, &workdir).await?;
    super::remember_secrets(&hosted.settings);
    eprintln!(
        "buddy {} speaking ACP on stdin/stdout ({} via {})",
        env!("CARGO_PKG_VERSION"),
        hosted.settings.api.model,
        hosted.settings.api.base_url
    );
    let backend = Arc::new(AcpBackend {
        secrets: crate::redact::known().all().to_vec(),
        hosted,
        workdir,
    });
    crate::acp::run(backend)
        .await
        .map_err(|e| AppError::Failed(e.to_string()))?;
    Ok(Exit::Ok)
}

struct AcpBackend {
    hosted: Hosted,
    secrets: Vec<String>,
    /// Where `buddy acp` started: the sessions a list without a `cwd` shows.
    workdir: PathBuf,
}

fn failed(e: impl std::fmt::Display) -> BackendError {
    BackendError(e.to_string())
}

impl Backend for AcpBackend {
    fn create(&self, cwd: &Path) -> Result<String, BackendError> {
        let settings = &self.hosted.settings;
        let info = SessionInfo {
            model: settings.api.model.clone(),
            profile: settings.api.profile.clone(),
            cwd: cwd.display().to_string(),
            secrets: self.secrets.clone(),
            origin: Some("editor".into()),
        };
        // Created and released at once: the agent takes it with its resume.
        let (session, _warnings) = Store::for_workdir(cwd).create(info).map_err(failed)?;
        Ok(session.id().to_string())
    }

    fn spawn(
        &self,
        cwd: &Path,
        servers: BTreeMap<String, McpServer>,
        client: ClientSide,
    ) -> Result<Spawned, BackendError> {
        let settings = &self.hosted.settings;
        // The session's directory is data: its tools, project files and
        // session store are its own, whatever another session works in.
        let mut setup = self.hosted.setup_in(cwd).map_err(failed)?;
        if let Some(sessions) = setup.sessions.as_mut() {
            sessions.set_origin("editor");
        }
        if let Some(files) = client.files {
            setup.tools.use_editor_files(files);
        }
        if let Some(terminal) = client.terminal {
            setup.tools.use_editor_terminal(terminal);
        }
        let servers: BTreeMap<String, McpServer> = servers
            .into_iter()
            .filter(|(name, _)| {
                let clash = settings.mcp_servers.contains_key(name);
                if clash {
                    eprintln!("buddy: the client's MCP server `{name}` has the name of a configured one; the configured one is used");
                }
                !clash
            })
            .collect();
        let mut started = None;
        if !servers.is_empty() {
            crate::redact::remember(
                servers
                    .values()
                    .flat_map(|s| s.env.values().chain(s.headers.values()).cloned()),
            );
            let taken: HashSet<String> =
                setup.tools.names().iter().map(|s| s.to_string()).collect();
            let max = settings
                .tools
                .max_output_chars
                .unwrap_or(crate::mcp::DEFAULT_MAX_OUTPUT_CHARS)
                .max(100);
            let tools = crate::mcp::McpTools::start(&servers, taken, cwd.to_path_buf(), max)
                .map_err(failed)?;
            setup.tools.add_source(tools.clone());
            started = Some(tools);
        }
        Ok(Spawned {
            agent: crate::agent::spawn(setup),
            servers: started,
        })
    }

    fn list(&self, cwd: Option<&Path>) -> Result<Vec<Listed>, BackendError> {
        let cwd = cwd.unwrap_or(&self.workdir).to_path_buf();
        // Files that cannot be read are left out: a listing shows what opens.
        let (summaries, _unreadable) = Store::for_workdir(&cwd).list().map_err(failed)?;
        Ok(summaries
            .into_iter()
            .map(|s| Listed {
                id: s.id,
                cwd: cwd.clone(),
                title: s.title,
                updated: s.used,
            })
            .collect())
    }

    fn commands(&self, cwd: &Path) -> Vec<Command> {
        let found = super::setup::custom_files(&self.hosted.settings, cwd);
        let mut out: Vec<Command> = found
            .commands
            .into_iter()
            .map(|c| Command {
                name: c.name.trim_start_matches('/').to_string(),
                description: c.description,
                body: c.body,
            })
            .collect();
        // A skill is offered as a command that asks the model to use it; a
        // custom command of the same name wins.
        for skill in found.skills {
            if out.iter().any(|c| c.name == skill.name) {
                continue;
            }
            out.push(Command {
                body: format!(
                    "Use the skill `{}` (read it with the skill tool first).\n\n$ARGUMENTS",
                    skill.name
                ),
                name: skill.name,
                description: skill.description,
            });
        }
        out
    }
}
