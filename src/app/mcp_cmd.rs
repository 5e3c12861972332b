//! `buddy mcp list|get|call|add|remove`: the configured MCP servers, read from
//! the config file buddy would load (plus a trusted `.mcp.json`), and added
//! to or removed from the user's own file (`--config PATH`, else the global
//! buddy.toml) with `toml_edit`, so its comments and layout stay. An edit is
//! parsed again as a whole before it is written, so a bad one never lands.

use super::{env, workdir, AppError, Exit, InputError, Unknown};
use crate::cli::{McpAddArgs, McpCommand};
use crate::config::{self, CliOverrides, ConfigError, McpServer};
use crate::text::one_line;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub async fn run(cmd: McpCommand, overrides: &CliOverrides) -> Result<Exit, AppError> {
    match cmd {
        McpCommand::List => list(overrides),
        McpCommand::Get { name } => get(&name, overrides).await,
        McpCommand::Call {
            name,
            tool,
            arguments,
            accept_defaults,
        } => {
            let asker = crate::mcp::HandAsker { accept_defaults };
            call(&name, &tool, arguments.as_deref(), asker, overrides).await
        }
        McpCommand::Add(args) => add(args, overrides),
        McpCommand::Remove { name } => remove(&name, overrides),
        McpCommand::Login { name } => login(&name, overrides).await,
        McpCommand::Logout { name } => logout(&name),
    }
}

/// `buddy mcp login NAME`: the browser login of `mcp::oauth`, kept for the
/// server's URL.
async fn login(name: &str, overrides: &CliOverrides) -> Result<Exit, AppError> {
    let (all, _) = servers(overrides)?;
    let Some((spec, _)) = all.get(name) else {
        return Err(Unknown::McpServer(name.into()).into());
    };
    let Some(url) = &spec.url else {
        return Err(Unknown::NotHttp(name.into()).into());
    };
    match crate::mcp::oauth::login(name, url, spec, None).await {
        Ok(()) => {
            eprintln!("logged in to {}", one_line(name, 60));
            Ok(Exit::Ok)
        }
        Err(e) => Err(AppError::Mcp(format!(
            "cannot log in to {}: {}",
            one_line(name, 60),
            crate::redact::text(&e.to_string())
        ))),
    }
}

/// `buddy mcp logout NAME`: forgets the kept tokens (the server itself is
/// not told; its tokens expire on their own).
fn logout(name: &str) -> Result<Exit, AppError> {
    match crate::mcp::oauth::logout(name) {
        Ok(true) => eprintln!("logged out of {}", one_line(name, 60)),
        Ok(false) => eprintln!("no login kept for {}", one_line(name, 60)),
        Err(e) => return Err(AppError::Mcp(e.to_string())),
    }
    Ok(Exit::Ok)
}

/// Every server buddy would start here, by name, with where it came from.
type Servers = BTreeMap<String, (McpServer, &'static str)>;

/// The servers, and the credential variables no server may see (the one list
/// a session uses, `config::credential_env`).
fn servers(overrides: &CliOverrides) -> Result<(Servers, Vec<String>), AppError> {
    let cwd = workdir();
    let trust = config::trust::TrustStore::of_user(&env);
    let (file, _) = config::load_file(&cwd, &env, overrides, trust.as_deref())?;
    let mut hidden = config::credential_env(&file);
    if let Some(line) = file.untrusted.as_ref().and_then(super::trust::warning) {
        eprintln!("warning: {line}");
    }
    let mut out: Servers = file
        .mcp_servers
        .into_iter()
        .map(|(n, s)| (n, (s, "config")))
        .collect();
    let project = config::mcp::project_servers(&cwd, trust.as_deref());
    for (n, s) in project.servers {
        out.entry(n).or_insert((s, config::mcp::MCP_JSON));
    }
    if let Some((path, names)) = project.untrusted {
        eprintln!(
            "warning: not listed, from the untrusted {}: {} (`buddy trust {}`)",
            path.display(),
            one_line(&names.join(", "), 300),
            config::mcp::MCP_JSON
        );
    }
    if let Some(e) = project.error {
        eprintln!("warning: {e}");
    }
    // A project server's own token variable is a credential too.
    hidden.extend(out.values().filter_map(|(s, _)| s.bearer_token_env.clone()));
    hidden.sort();
    hidden.dedup();
    Ok((out, hidden))
}

fn reached(s: &McpServer) -> String {
    match (&s.command, &s.url) {
        (_, Some(url)) => format!("http {url}"),
        (Some(c), None) => {
            let mut words = vec![c.clone()];
            words.extend(s.args.iter().cloned());
            format!("stdio {}", words.join(" "))
        }
        (None, None) => String::new(),
    }
}

fn list(overrides: &CliOverrides) -> Result<Exit, AppError> {
    let (all, _) = servers(overrides)?;
    if all.is_empty() {
        eprintln!("no MCP servers configured; add one with `buddy mcp add NAME -- COMMAND [ARGS]`");
        return Ok(Exit::Ok);
    }
    for (name, (s, from)) in &all {
        let state = if s.enabled { "" } else { " (disabled)" };
        let from = if *from == "config" {
            String::new()
        } else {
            format!(" [{from}]")
        };
        println!(
            "{}\t{}{state}{from}",
            one_line(name, 80),
            one_line(&reached(s), 300)
        );
    }
    Ok(Exit::Ok)
}

async fn get(name: &str, overrides: &CliOverrides) -> Result<Exit, AppError> {
    let (all, hidden) = servers(overrides)?;
    let Some((s, from)) = all.get(name) else {
        return Err(Unknown::McpServer(name.into()).into());
    };
    println!("name: {}", one_line(name, 80));
    println!("from: {from}");
    println!("transport: {}", one_line(&reached(s), 300));
    if !s.env.is_empty() {
        // Values are secrets: names only.
        let keys: Vec<&str> = s.env.keys().map(String::as_str).collect();
        println!("env: {}", one_line(&keys.join(", "), 300));
    }
    if let Some(var) = &s.bearer_token_env {
        println!("bearer_token_env: {var}");
    }
    println!("enabled: {}", s.enabled);
    println!(
        "timeouts: start {} s, call {} s",
        s.startup_timeout_secs, s.tool_timeout_secs
    );
    println!("trust_read_only: {}", s.trust_read_only);
    if !s.enabled {
        return Ok(Exit::Ok);
    }
    // Started once to ask for its tools.
    let tools = start_one(name, s, hidden).await?;
    for r in tools.report() {
        println!("status: {}", r.status.as_str());
        if let Some(p) = &r.protocol {
            println!("protocol: {p}");
        }
        if let Some(e) = &r.last_error {
            println!("last error: {}", crate::redact::text(&one_line(e, 500)));
        }
        for t in &r.tools {
            println!("tool: {t}");
        }
    }
    Ok(Exit::Ok)
}

/// Starts server `name` alone, as a session would (the same scrubbed
/// environment, its secrets remembered), and waits until it is ready or
/// failed.
async fn start_one(
    name: &str,
    s: &McpServer,
    mut hidden: Vec<String>,
) -> Result<std::sync::Arc<crate::mcp::McpTools>, AppError> {
    hidden.extend(s.bearer_token_env.clone());
    crate::host::hide_env(hidden);
    crate::redact::remember(s.env.values().cloned());
    let one = BTreeMap::from([(name.to_string(), s.clone())]);
    let tools = crate::mcp::McpTools::start(
        &one,
        Default::default(),
        workdir(),
        crate::mcp::DEFAULT_MAX_OUTPUT_CHARS,
    )
    .map_err(|e| AppError::Failed(e.to_string()))?;
    tools.wait_ready().await;
    Ok(tools)
}

/// Logins one `buddy mcp call` starts at most: a server that keeps asking
/// for scope it never grants is not asked forever.
const MAX_LOGINS_PER_CALL: u32 = 3;

/// `buddy mcp call NAME TOOL [JSON]`: the result's text on stdout; a result
/// the server marked an error, or no result, is a failure. A server that
/// refuses buddy is logged in to first when a person can answer.
async fn call(
    name: &str,
    tool: &str,
    arguments: Option<&str>,
    asker: crate::mcp::HandAsker,
    overrides: &CliOverrides,
) -> Result<Exit, AppError> {
    let arguments = match arguments.map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::Map::new(),
        Some(Ok(serde_json::Value::Object(map))) => map,
        Some(Ok(_)) => {
            return Err(InputError::Invalid {
                what: "the arguments".into(),
                problem: "must be one JSON object, like {\"a\": 1}".into(),
            }
            .into())
        }
        Some(Err(e)) => {
            return Err(InputError::Invalid {
                what: "the arguments".into(),
                problem: format!("not JSON: {e}"),
            }
            .into())
        }
    };
    let (all, hidden) = servers(overrides)?;
    let Some((s, _)) = all.get(name) else {
        return Err(Unknown::McpServer(name.into()).into());
    };
    if !s.enabled {
        return Err(Unknown::McpDisabled(name.into()).into());
    }
    // Who can log in: a person at a terminal, or one whose $BROWSER opens
    // the page; a script without either gets the refusal at once.
    let may_login = s.url.is_some()
        && s.bearer_token_env.is_none()
        && (std::io::stderr().is_terminal()
            || crate::process::var_os("BROWSER").is_some_and(|b| !b.is_empty()));
    let asker = std::sync::Arc::new(asker);
    let mut logins = 0;
    let answer = loop {
        let tools = start_one(name, s, hidden.clone()).await?;
        let refused = tools
            .report()
            .iter()
            .any(|r| r.status == crate::mcp::Status::NeedsLogin);
        let answer = if refused {
            Err(crate::mcp::McpError::NeedsLogin(name.to_string()))
        } else {
            let Some(answer) = tools.call(name, tool, arguments.clone(), asker.clone()) else {
                return Err(AppError::Failed(format!(
                    "no MCP server `{}`",
                    one_line(name, 80)
                )));
            };
            // The answer comes on a std channel from the MCP thread.
            tokio::task::spawn_blocking(move || answer.recv())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(Err(crate::mcp::McpError::Gone))
        };
        let refusal = tools.refusal(name);
        tools.stop();
        // A refusal (no login, one that expired, or a 403 asking for more
        // scope) is answered with a login and the call made again, a
        // bounded number of times.
        let (Err(crate::mcp::McpError::NeedsLogin(_)), true, Some(url)) =
            (&answer, may_login, &s.url)
        else {
            break answer;
        };
        if logins == MAX_LOGINS_PER_CALL {
            break answer;
        }
        logins += 1;
        let more = refusal.as_ref().is_some_and(|r| r.forbidden);
        eprintln!(
            "{} asks for a login{}",
            one_line(name, 60),
            if more { " with more scope" } else { "" }
        );
        if let Err(e) = crate::mcp::oauth::login(name, url, s, refusal).await {
            return Err(AppError::Failed(format!(
                "cannot log in to {}: {}",
                one_line(name, 60),
                crate::redact::text(&e.to_string())
            )));
        }
    };
    match answer {
        Ok((text, false)) => {
            println!("{}", crate::redact::text(&text));
            Ok(Exit::Ok)
        }
        Ok((text, true)) => Err(AppError::Failed(format!(
            "`{}` answered with an error: {}",
            one_line(tool, 80),
            crate::redact::text(&one_line(&text, 2000))
        ))),
        Err(e) => Err(AppError::Failed(format!(
            "`{}` of `{}`: {}",
            one_line(tool, 80),
            one_line(name, 80),
            crate::redact::text(&e.to_string())
        ))),
    }
}

/// The file `add` and `remove` edit: `--config PATH`, else the global one
/// (created from the template first, as any first run does).
fn user_file(overrides: &CliOverrides) -> Result<PathBuf, AppError> {
    if let Some(p) = &overrides.config {
        return Ok(p.clone());
    }
    config::ensure_global_config(&env);
    config::global_dir(&env)
        .map(|d| d.join("buddy.toml"))
        .ok_or_else(|| AppError::Usage("no config directory: set HOME or XDG_CONFIG_HOME".into()))
}

fn read_doc(path: &Path) -> Result<(String, toml_edit::DocumentMut), AppError> {
    let text = match crate::localfile::read_regular(path, config::MAX_CONFIG_BYTES) {
        Ok(b) => String::from_utf8(b).map_err(|_| invalid(path, "not UTF-8 text".into()))?,
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => {
            return Err(ConfigError::Io {
                path: path.to_path_buf(),
                error: e.to_string(),
            }
            .into())
        }
    };
    let doc = text
        .parse::<toml_edit::DocumentMut>()
        .map_err(|e| invalid(path, e.to_string()))?;
    Ok((text, doc))
}

/// `path` holds something buddy will not edit.
fn invalid(path: &Path, message: String) -> AppError {
    ConfigError::Invalid {
        path: Some(path.to_path_buf()),
        message,
    }
    .into()
}

fn write_doc(path: &Path, doc: &toml_edit::DocumentMut) -> Result<(), AppError> {
    let text = doc.to_string();
    // The whole file must still load: never write one buddy would refuse.
    config::parse(&text, Some(path))?;
    crate::atomic_file::replace(path, text.as_bytes(), crate::atomic_file::PRIVATE)
        .map_err(|e| AppError::Failed(format!("cannot write {}: {e}", path.display())))
}

fn pairs(items: &[String], what: &str) -> Result<BTreeMap<String, String>, AppError> {
    items
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| {
                    AppError::Usage(format!(
                        "{what} `{}`: expected NAME=VALUE",
                        one_line(kv, 80)
                    ))
                })
        })
        .collect()
}

fn add(a: McpAddArgs, overrides: &CliOverrides) -> Result<Exit, AppError> {
    let env_vars = pairs(&a.env, "--env")?;
    let headers = pairs(&a.headers, "--header")?;
    let server = match (&a.url, a.command.split_first()) {
        (Some(url), None) => McpServer {
            bearer_token_env: a.bearer_token_env.clone(),
            headers: headers.clone(),
            ..McpServer::http(url.clone())
        },
        (None, Some((program, args))) => McpServer {
            env: env_vars.clone(),
            ..McpServer::stdio(program.clone(), args.to_vec())
        },
        _ => {
            return Err(AppError::Usage(
                "name the server's program after `--` (buddy mcp add NAME -- npx -y PACKAGE) or give --url".into(),
            ))
        }
    };
    server
        .check(&a.name)
        .map_err(|e| AppError::Usage(e.to_string()))?;
    let path = user_file(overrides)?;
    let (_, mut doc) = read_doc(&path)?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| invalid(&path, "mcp_servers is not a table".into()))?;
    if servers.contains_key(&a.name) {
        return Err(AppError::Usage(format!(
            "an MCP server `{}` is already in {}; remove it first",
            one_line(&a.name, 80),
            path.display()
        )));
    }
    let mut t = toml_edit::Table::new();
    if let Some(c) = &server.command {
        t["command"] = toml_edit::value(c.as_str());
        let mut arr = toml_edit::Array::new();
        for x in &server.args {
            arr.push(x.as_str());
        }
        t["args"] = toml_edit::value(arr);
    }
    if let Some(u) = &server.url {
        t["url"] = toml_edit::value(u.as_str());
    }
    if let Some(v) = &server.bearer_token_env {
        t["bearer_token_env"] = toml_edit::value(v.as_str());
    }
    for (key, map) in [("env", &server.env), ("headers", &server.headers)] {
        if !map.is_empty() {
            let mut it = toml_edit::InlineTable::new();
            for (k, v) in map {
                it.insert(k.as_str(), v.as_str().into());
            }
            t[key] = toml_edit::value(it);
        }
    }
    // The new table goes after everything in the file, comments included:
    // placed by toml_edit's default it lands before the trailing comments of
    // the last table (buddy.toml.example's commented `[execution]` keys), and
    // uncommenting one of those later puts it in the wrong table.
    t.set_position(usize::MAX);
    let trailing = doc.trailing().as_str().unwrap_or_default().to_string();
    if !trailing.trim().is_empty() {
        let sep = if trailing.ends_with('\n') {
            "\n"
        } else {
            "\n\n"
        };
        t.decor_mut().set_prefix(format!("{trailing}{sep}"));
    }
    doc.set_trailing("");
    let servers = doc
        .get_mut("mcp_servers")
        .and_then(|s| s.as_table_mut())
        .ok_or_else(|| invalid(&path, "mcp_servers is not a table".into()))?;
    servers.insert(&a.name, toml_edit::Item::Table(t));
    write_doc(&path, &doc)?;
    eprintln!(
        "added MCP server `{}` to {}",
        one_line(&a.name, 80),
        path.display()
    );
    Ok(Exit::Ok)
}

fn remove(name: &str, overrides: &CliOverrides) -> Result<Exit, AppError> {
    let path = user_file(overrides)?;
    let (_, mut doc) = read_doc(&path)?;
    let removed = doc
        .get_mut("mcp_servers")
        .and_then(|s| s.as_table_like_mut())
        .and_then(|s| s.remove(name))
        .is_some();
    if !removed {
        return Err(Unknown::McpServerIn {
            name: name.into(),
            path,
        }
        .into());
    }
    write_doc(&path, &doc)?;
    eprintln!(
        "removed MCP server `{}` from {}",
        one_line(name, 80),
        path.display()
    );
    Ok(Exit::Ok)
}
