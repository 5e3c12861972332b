//! `buddy acp`: the ACP front end (`crate::acp`) wired to the settings, the
//! session store of each session's working directory (data the session
//! carries: the process's directory never changes), and agents built
//! like serve's: approvals always go to the client (there is no terminal),
//! the client's MCP servers start beside the configured ones, and the file
//! tools go through the client's buffers when it offers them.

use super::hosted::Hosted;
use super::{AppError, Exit};
use crate::acp::{Backend, BackendError, ClientFiles, Spawned};
use crate::cli::TargetArgs;
use crate::config::{CliOverrides, McpServer};
use crate::session::{SessionInfo, Store};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

pub(crate) async fn acp(
    overrides: &CliOverrides,
    target_args: &TargetArgs,
) -> Result<Exit, AppError> {
    let (hosted, _style) = Hosted::load(overrides, target_args, &super::workdir()).await?;
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
    });
    crate::acp::run(backend)
        .await
        .map_err(|e| AppError::Failed(e.to_string()))?;
    Ok(Exit::Ok)
}

struct AcpBackend {
    hosted: Hosted,
    secrets: Vec<String>,
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
        files: Option<Arc<dyn ClientFiles>>,
    ) -> Result<Spawned, BackendError> {
        let settings = &self.hosted.settings;
        // The session's directory is data: its tools, project files and
        // session store are its own, whatever another session works in.
        let mut setup = self.hosted.setup_in(cwd).map_err(failed)?;
        if let Some(sessions) = setup.sessions.as_mut() {
            sessions.set_origin("editor");
        }
        if let Some(files) = files {
            setup.tools.use_editor_files(files);
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
}
