//! A running container, reached with `podman exec` or `docker exec` (whichever
//! is installed, or the engine the user names).

use super::{HostError, Target};
use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

pub struct ContainerTarget {
    engine: String,
    name: String,
    user: String,
}

/// The first of `podman` and `docker` found on `PATH`.
fn find_engine() -> Option<String> {
    let path = crate::process::var_os("PATH")?;
    ["podman", "docker"]
        .into_iter()
        .find(|e| std::env::split_paths(&path).any(|d| d.join(e).is_file()))
        .map(str::to_string)
}

impl ContainerTarget {
    /// Checks that the engine runs and the container answers; learns the user.
    pub async fn connect(name: &str, engine: Option<String>) -> Result<ContainerTarget, HostError> {
        let engine = match engine {
            Some(e) => e,
            None => find_engine().ok_or(HostError::NoEngine)?,
        };
        let mut target = ContainerTarget {
            engine,
            name: name.to_string(),
            user: String::new(),
        };
        let out = target
            .command("id -un 2>/dev/null || echo root", Path::new("."))
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|source| HostError::Engine {
                engine: target.engine.clone(),
                source,
            })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim();
            return Err(HostError::ContainerDown {
                name: name.to_string(),
                engine: target.engine.clone(),
                detail: last.to_string(),
            });
        }
        target.user = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(target)
    }
}

impl Drop for ContainerTarget {
    fn drop(&mut self) {
        // Let the stoppers of cancelled commands finish before buddy exits.
        super::remote_job::wait_for_stops(std::time::Duration::from_secs(3));
    }
}

impl Target for ContainerTarget {
    fn command(&self, script: &str, _cwd: &Path) -> Command {
        let mut c = Command::new(&self.engine);
        super::scrub(&mut c);
        // `--`: a name starting with `-` is a container name, not an option.
        c.arg("exec")
            .arg("-i")
            .arg("--")
            .arg(&self.name)
            .arg("sh")
            .arg("-c")
            .arg(script);
        c
    }

    fn actor(&self) -> String {
        format!("{}@{}", self.user, self.name)
    }

    fn description(&self) -> String {
        format!(
            "the container {} (via {} exec, as {}); commands and files are inside it, not on the user's host",
            self.name, self.engine, self.user
        )
    }

    fn is_local(&self) -> bool {
        false
    }
}

impl ContainerTarget {
    /// How the REPL prompt names this target.
    pub fn prompt_label(&self) -> String {
        format!("{} {}", self.engine, self.name)
    }

    /// What a person types in their own terminal to run `command`
    /// interactively inside the container.
    pub fn interactive_command(&self, command: &str) -> String {
        format!(
            "{} exec -it -- {} {command}",
            self.engine,
            super::shell_quote(&self.name)
        )
    }
}
