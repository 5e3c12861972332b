//! `buddy trust [PATH]`, the question asked on a terminal when an untrusted
//! project config would be used, and the one warning line when it is used
//! untrusted. The rules themselves live in `config::trust`.

use super::{env, workdir, AppError, Exit};
use crate::config::trust::{hold_back, store_path, TrustStore, Untrusted};
use crate::config::{self, CliOverrides, ConfigFile};
use crate::text::one_line;
use crate::ui::style::Style;
use crate::ui::terminal::Terminal;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// `buddy trust [PATH]`: trusts the file (default: the project config here)
/// as it is now, and says which of its settings that lets through.
pub fn trust(path: Option<PathBuf>) -> Result<Exit, AppError> {
    let path = match path {
        Some(p) if p.is_dir() => return trust_dir(&p),
        Some(p) => p,
        None => match config::project_file(&workdir()) {
            Some((p, _)) => p,
            // No config file: the directory itself, for its prompt files.
            None => return trust_dir(&workdir()),
        },
    };
    let text = std::fs::read_to_string(&path).map_err(|e| config::ConfigError::Io {
        path: path.clone(),
        error: e.to_string(),
    })?;
    if path.file_name().is_some_and(|n| n == config::mcp::MCP_JSON) {
        return trust_mcp_json(&path, &text);
    }
    // A file that does not parse would be refused anyway; say so now.
    let mut file = config::parse(&text, Some(&path))?;
    let store = store()?;
    let canonical = store.trust(&path, text.as_bytes()).map_err(|e| {
        AppError::Failed(format!(
            "cannot write the trust list {}: {e}",
            store.path().display()
        ))
    })?;
    let env_key = config::KEY_ENV.iter().any(|n| env(n).is_some());
    let lets = hold_back(&mut file, &path, env_key).held_back;
    let what = if lets.is_empty() {
        String::new()
    } else {
        format!("; it may now set {}", lets.join(", "))
    };
    eprintln!(
        "trusted {} as it is now{what} (a change makes it untrusted again)",
        canonical.display()
    );
    Ok(Exit::Ok)
}

/// A project's `.mcp.json`: trusted as it is now, so its servers start.
fn trust_mcp_json(path: &Path, text: &str) -> Result<Exit, AppError> {
    let servers = config::mcp::parse_mcp_json(text).map_err(|e| {
        AppError::Config(config::ConfigError::Invalid {
            path: Some(path.to_path_buf()),
            message: e.to_string(),
        })
    })?;
    let store = store()?;
    let canonical = store.trust(path, text.as_bytes()).map_err(|e| {
        AppError::Failed(format!(
            "cannot write the trust list {}: {e}",
            store.path().display()
        ))
    })?;
    let names: Vec<&str> = servers.keys().map(String::as_str).collect();
    eprintln!(
        "trusted {} as it is now; its MCP servers {} will start (a change makes it untrusted again)",
        canonical.display(),
        one_line(&names.join(", "), 300)
    );
    Ok(Exit::Ok)
}

/// `buddy trust DIR`: the project's own commands and skills are used there.
fn trust_dir(dir: &Path) -> Result<Exit, AppError> {
    let store = store()?;
    let canonical = store.trust_dir(dir).map_err(|e| {
        AppError::Failed(format!(
            "cannot trust {}: {e} (trust list {})",
            dir.display(),
            store.path().display()
        ))
    })?;
    eprintln!(
        "trusted the directory {}: its .buddy/commands, .buddy/skills and .agents/skills are used",
        canonical.display()
    );
    Ok(Exit::Ok)
}

fn store() -> Result<TrustStore, AppError> {
    store_path(&env)
        .map(TrustStore::new)
        .ok_or_else(|| AppError::Usage("no config directory: set HOME or XDG_CONFIG_HOME".into()))
}

/// On a terminal, before settings are resolved: asks once whether to trust
/// the project config `file` (as start-up parsed it) when it has settings an
/// untrusted one may not use, remembered in `store`. True when the user trusted it just now, so the
/// caller reads it again with those settings.
pub fn ask_if_untrusted(
    file: &ConfigFile,
    overrides: &CliOverrides,
    style: Style,
    terminal: &Terminal,
    store: Option<&TrustStore>,
) -> bool {
    if overrides.config.is_some() || !(terminal.stdin && terminal.stderr) {
        return false;
    }
    let Some(u) = file.untrusted.as_ref().filter(|u| !u.held_back.is_empty()) else {
        return false;
    };
    let Ok(text) = std::fs::read(&u.path) else {
        return false;
    };
    eprint!(
        "{} {} comes with this directory and sets {}. Trust it? [y/N] ",
        style.warning("trust:"),
        u.path.display(),
        one_line(&u.held_back.join(", "), 300)
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        return false;
    }
    let Some(store) = store else { return false };
    match store.trust(&u.path, &text) {
        Ok(_) => true,
        Err(e) => {
            eprintln!(
                "{} cannot remember the trust: {e}",
                style.warning("warning:")
            );
            false
        }
    }
}

/// The one line said when an untrusted project config is used.
pub fn warning(u: &Untrusted) -> Option<String> {
    if u.held_back.is_empty() {
        return None;
    }
    Some(format!(
        "ignoring {} from the untrusted {}; run `buddy trust` if you mean them",
        one_line(&u.held_back.join(", "), 400),
        shown(&u.path)
    ))
}

fn shown(path: &Path) -> String {
    one_line(&path.display().to_string(), 200)
}
