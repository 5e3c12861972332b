//! Zero-config start: when the active profile has no key and the user chose
//! nothing, look for a model server on this machine (Ollama, llama.cpp,
//! LM Studio, vLLM) and use it instead of failing.
//!
//! The notice saying what was picked is shown in full once per server and
//! model (remembered in `seen-local-servers` in buddy's config directory),
//! then as one short line.
//!
//! Every server in `[discovery] local_servers` gets one `GET /v1/models`, all
//! at once; the config only admits loopback addresses, and the probe client
//! follows no redirects and uses no proxy, so nothing leaves the machine.

use super::AppError;
use crate::config::{self, CliOverrides, ConfigError, ConfigFile, LocalServer, Settings};
use crate::provider::error::{error_message_from_body, is_loading_model};
use crate::provider::models::{parse_model_list, ListedModel};
use crate::ui::style::Style;
use std::path::PathBuf;
use std::time::Duration;

/// A server on loopback either listens (and accepts at once) or refuses at
/// once; this only matters for a port a firewall drops silently.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(50);
/// A local server lists its models in milliseconds; anything slower is not
/// the server we are looking for (or too busy to be useful right now).
const ANSWER_TIMEOUT: Duration = Duration::from_millis(500);
/// A model list is a few kilobytes; a larger body is something else.
const MAX_LIST_BYTES: usize = 1024 * 1024;

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Nothing answered, or not with a model list.
    Silent,
    /// A model server; its models in its own order (maybe none).
    Models(Vec<ListedModel>),
    /// A model server still loading its model (llama.cpp's 503 "Loading
    /// model"): there, but not ready to list or answer yet.
    Loading,
    /// A server that failed the listing with a server error (5xx): the
    /// status and what it said. Reported as a failure of the server (exit
    /// 1), not as a missing key (exit 2) when nothing else answers.
    Failed(String),
}

/// Probes every server at once; results in the order of `servers`.
pub(crate) async fn probe_all(servers: &[String]) -> Vec<Probe> {
    let Ok(client) = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        // Plain HTTP on loopback only: no certificates to load.
        .tls_built_in_root_certs(false)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(ANSWER_TIMEOUT)
        .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
        .build()
    else {
        return vec![Probe::Silent; servers.len()];
    };
    let mut set = tokio::task::JoinSet::new();
    for (i, base) in servers.iter().enumerate() {
        let client = client.clone();
        let base = base.trim_end_matches('/').to_string();
        set.spawn(async move {
            let url = format!("{base}/models");
            let mut probe = probe_one(&client, &url).await;
            if let Probe::Models(models) = &mut probe {
                ollama_contexts(&client, &base, models).await;
            }
            (i, probe)
        });
    }
    let mut out = vec![Probe::Silent; servers.len()];
    // The client's timeouts bound each probe; this bounds them all, whatever
    // a misbehaving server does with its body.
    let all = async {
        while let Some(done) = set.join_next().await {
            if let Ok((i, probe)) = done {
                out[i] = probe;
            }
        }
    };
    let _ = tokio::time::timeout(ANSWER_TIMEOUT + CONNECT_TIMEOUT, all).await;
    out
}

async fn probe_one(client: &reqwest::Client, url: &str) -> Probe {
    let Ok(mut response) = client.get(url).send().await else {
        return Probe::Silent;
    };
    let status = response.status();
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) if body.len() + bytes.len() <= MAX_LIST_BYTES => {
                body.extend_from_slice(&bytes)
            }
            Ok(None) => break,
            _ => return Probe::Silent,
        }
    }
    if !status.is_success() {
        let message = error_message_from_body(&String::from_utf8_lossy(&body));
        return if is_loading_model(status.as_u16(), &message) {
            Probe::Loading
        } else if status.is_server_error() {
            let said = crate::text::visible(crate::text::head(message.trim(), 200).0).into_owned();
            Probe::Failed(match said.is_empty() {
                true => format!("HTTP {}", status.as_u16()),
                false => format!("HTTP {}: {said}", status.as_u16()),
            })
        } else {
            Probe::Silent
        };
    }
    match parse_model_list(&body) {
        Ok(models) => Probe::Models(models),
        Err(_) => Probe::Silent,
    }
}

/// Ollama's OpenAI-compatible list names no window, and Ollama cuts a
/// prompt that overflows its window without a word, so the window is asked
/// of its own API: `/api/ps` has the one each loaded model runs with, and
/// `/api/show` a model's `num_ctx` when its Modelfile sets one. Otherwise the
/// window depends on the server's settings and memory, and stays unknown
/// (nothing is cut to fit a guess). Only asked of a server that looks like
/// Ollama (its port, or the `library` owner it gives pulled models) whose
/// list named no window for the first model: another server might take
/// the POST for a request of its own.
async fn ollama_contexts(client: &reqwest::Client, base: &str, models: &mut [ListedModel]) {
    if models.first().is_none_or(|m| m.context.is_some()) {
        return;
    }
    let owned_by_ollama = models
        .iter()
        .any(|m| matches!(m.owned_by.as_deref(), Some("library" | "ollama")));
    if !owned_by_ollama && port_of(base) != Some(11434) {
        return;
    }
    let root = base.strip_suffix("/v1").unwrap_or(base);
    if let Some(body) = small_body(client.get(format!("{root}/api/ps"))).await {
        for (name, context) in loaded_contexts(&body) {
            for m in models.iter_mut().filter(|m| m.id == name) {
                m.context = m.context.or(Some(context));
            }
        }
    }
    let first = &mut models[0];
    if first.context.is_some() {
        return;
    }
    let show = client
        .post(format!("{root}/api/show"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::json!({ "model": first.id }).to_string());
    if let Some(body) = small_body(show).await {
        first.context = modelfile_context(&body);
    }
}

/// A successful answer's body, when it is no larger than a model list.
async fn small_body(request: reqwest::RequestBuilder) -> Option<Vec<u8>> {
    let mut response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    while let Some(bytes) = response.chunk().await.ok()? {
        if body.len() + bytes.len() > MAX_LIST_BYTES {
            return None;
        }
        body.extend_from_slice(&bytes);
    }
    Some(body)
}

/// (model, window) of each model in an `/api/ps` answer.
fn loaded_contexts(body: &[u8]) -> Vec<(String, u64)> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let models = value.get("models").and_then(|m| m.as_array());
    models
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let name = m.get("name").or_else(|| m.get("model"))?.as_str()?;
            let context = m.get("context_length")?.as_u64().filter(|n| *n > 0)?;
            Some((name.to_string(), context))
        })
        .collect()
}

/// The `num_ctx` a model's Modelfile sets, from an `/api/show` answer (its
/// `parameters` is the Modelfile's lines, `num_ctx 8192` among them).
fn modelfile_context(body: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let parameters = value.get("parameters")?.as_str()?;
    parameters
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next()? == "num_ctx").then(|| words.next()?.parse().ok())?
        })
        .filter(|n| *n > 0)
}

/// What people call the server at `base_url` that listed `models`: its own
/// word for itself first (llama.cpp and vLLM sign their models), else the
/// program that usually has that port.
pub(crate) fn server_name(base_url: &str, models: &[ListedModel]) -> &'static str {
    let owner = models.first().and_then(|m| m.owned_by.as_deref());
    match owner {
        Some("llamacpp") => return "llama.cpp",
        Some("vllm") => return "vLLM",
        Some("organization_owner") => return "LM Studio",
        _ => {}
    }
    match port_of(base_url) {
        Some(11434) => "Ollama",
        Some(8080) => "llama.cpp",
        Some(1234) => "LM Studio",
        Some(8000) => "vLLM",
        _ => "a local model server",
    }
}

fn port_of(base_url: &str) -> Option<u16> {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// `host:port` of a base URL, for naming what was tried.
fn host_port(base_url: &str) -> String {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// The model to use: the configured one when the server lists it (Ollama
/// lists `name:latest` for `name`), else the first listed.
pub(crate) fn pick_model(models: &[ListedModel], wanted: Option<&str>) -> Option<String> {
    if let Some(w) = wanted {
        let latest = format!("{w}:latest");
        if let Some(m) = models.iter().find(|m| m.id == w || m.id == latest) {
            return Some(m.id.clone());
        }
    }
    models.first().map(|m| m.id.clone())
}

/// The config file as start-up read it, which discovery resolves again
/// with the server it found rather than reading it again.
pub(super) struct Loaded {
    pub file: ConfigFile,
    pub source: Option<PathBuf>,
    pub trust: Option<std::sync::Arc<crate::config::trust::TrustStore>>,
}

/// Called when the active profile has no key: finds a local server and
/// returns settings for it (and the overrides that reproduce them, for model
/// switches later), or the missing-key error with what was tried.
pub(super) async fn instead_of_missing_key(
    cwd: &std::path::Path,
    env: &dyn Fn(&str) -> Option<String>,
    overrides: &CliOverrides,
    loaded: Loaded,
    missing: ConfigError,
    style: Style,
) -> Result<(Settings, CliOverrides), AppError> {
    let not_found = |notes: Vec<String>| AppError::MissingKey {
        message: missing.to_string(),
        config_dir: config::global_dir(env),
        notes,
    };
    let Loaded {
        file,
        source,
        trust,
    } = loaded;
    if !config::may_discover(&file, env, overrides) {
        return Err(not_found(Vec::new()));
    }
    let servers = file
        .discovery
        .servers()
        .map_err(|e| AppError::config(e.to_string()))?;
    if servers.is_empty() {
        return Err(not_found(Vec::new()));
    }
    let probes = probe_all(&servers).await;
    let found = servers
        .iter()
        .zip(&probes)
        .find_map(|(base, probe)| match probe {
            Probe::Models(models) => {
                pick_model(models, file.discovery.model.as_deref()).map(|m| (base, models, m))
            }
            Probe::Silent | Probe::Loading | Probe::Failed(_) => None,
        });
    let Some((base, models, model)) = found else {
        // A server that is there but still loading is the news, not the
        // missing key: say so first, and nothing about keys.
        if let Some((base, _)) = servers
            .iter()
            .zip(&probes)
            .find(|(_, p)| matches!(p, Probe::Loading))
        {
            return Err(AppError::Failed(format!(
                "{} at {base} is still loading its model (HTTP 503); run buddy again in a moment",
                server_name(base, &[])
            )));
        }
        // Likewise a server that is there and failed: its error, exit 1.
        if let Some((base, Probe::Failed(said))) = servers
            .iter()
            .zip(&probes)
            .find(|(_, p)| matches!(p, Probe::Failed(_)))
        {
            return Err(AppError::Failed(format!(
                "{} at {base} failed to list its models ({said})",
                server_name(base, &[])
            )));
        }
        let mut notes = Vec::new();
        if !probes.iter().any(|p| matches!(p, Probe::Loading)) {
            notes.push(format!(
                "no local model server answered at {} (GET /v1/models)",
                servers
                    .iter()
                    .map(|s| host_port(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (base, probe) in servers.iter().zip(&probes) {
            match probe {
                Probe::Models(m) if m.is_empty() => notes.push(format!(
                    "{} at {base} answers but offers no models; load or pull one first",
                    server_name(base, &[])
                )),
                Probe::Loading => notes.push(format!(
                    "{} at {base} is still loading its model (HTTP 503); run buddy again in a moment",
                    server_name(base, &[])
                )),
                _ => {}
            }
        }
        return Err(not_found(notes));
    };
    let name = server_name(base, models);
    let local = LocalServer {
        base_url: base.clone(),
        model: model.clone(),
        context_limit: models
            .iter()
            .find(|m| m.id == model)
            .and_then(|m| m.context),
    };
    let found_overrides = CliOverrides {
        local: Some(local),
        ..overrides.clone()
    };
    let settings = config::resolve_here(
        file,
        source.clone(),
        cwd,
        env,
        &found_overrides,
        trust.as_ref(),
    )
    .map_err(|e| match e {
        e @ ConfigError::MissingKey { .. } => not_found(vec![e.to_string()]),
        e => AppError::Config(e),
    })?;
    let file_path = source
        .or_else(|| config::global_dir(env).map(|d| d.join("buddy.toml")))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "buddy.toml".into());
    let profile = &settings.api.profile;
    let missing_profile = match &missing {
        ConfigError::MissingKey { profile, .. } => profile.clone(),
        _ => String::new(),
    };
    let seen = config::global_dir(env).map(|d| d.join(SEEN_FILE));
    let notice = if seen.as_deref().is_some_and(|p| was_seen(p, base, &model)) {
        format!("buddy: using {name} at {base} (model {model})")
    } else {
        if let Some(p) = &seen {
            remember(p, base, &model);
        }
        format!(
            "no API key for profile `{missing_profile}`, so using {name} at {base} with model {model}; \
             to make it permanent, add [models.{profile}] with api_base_url = \"{base}\" and model = \"{model}\" \
             to {file_path} and set model = \"{profile}\" under [agent]"
        )
    };
    eprintln!("{}", style.dim(&crate::text::visible(&notice)));
    Ok((settings, found_overrides))
}

/// The file in buddy's config directory that remembers which local server
/// and model the full zero-config notice was shown for: one `base model`
/// line each, so later runs say it in one line.
const SEEN_FILE: &str = "seen-local-servers";
/// Past this size the file is left alone (and the notice shown in full).
const MAX_SEEN_BYTES: u64 = 64 * 1024;

fn seen_line(base: &str, model: &str) -> String {
    // Neither a URL nor a model id holds a space or a newline worth keeping.
    let clean = |s: &str| s.replace(char::is_whitespace, "_");
    format!("{} {}", clean(base), clean(model))
}

fn was_seen(path: &std::path::Path, base: &str, model: &str) -> bool {
    let Ok(bytes) = crate::localfile::read_regular(path, MAX_SEEN_BYTES) else {
        return false;
    };
    let want = seen_line(base, model);
    String::from_utf8_lossy(&bytes).lines().any(|l| l == want)
}

/// Appends the line for `base` and `model`. Best effort: a failure only
/// means the full notice shows again next time.
fn remember(path: &std::path::Path, base: &str, model: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Only a regular file is appended to: a FIFO there would block the open.
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() || m.len() >= MAX_SEEN_BYTES {
            return;
        }
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| writeln!(f, "{}", seen_line(base, model)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(ids: &[&str], owner: Option<&str>) -> Vec<ListedModel> {
        ids.iter()
            .map(|id| ListedModel {
                context: None,
                id: id.to_string(),
                owned_by: owner.map(String::from),
            })
            .collect()
    }

    #[test]
    fn the_configured_model_wins_when_listed_else_the_first() {
        let m = listed(&["a", "b:latest", "c"], None);
        assert_eq!(pick_model(&m, None).as_deref(), Some("a"));
        assert_eq!(pick_model(&m, Some("c")).as_deref(), Some("c"));
        assert_eq!(pick_model(&m, Some("b")).as_deref(), Some("b:latest"));
        assert_eq!(pick_model(&m, Some("zzz")).as_deref(), Some("a"));
        assert_eq!(pick_model(&[], Some("a")), None);
    }

    #[test]
    fn servers_are_named_by_what_they_say_then_by_port() {
        let url = "http://127.0.0.1:41000/v1";
        assert_eq!(
            server_name(url, &listed(&["m"], Some("llamacpp"))),
            "llama.cpp"
        );
        assert_eq!(server_name(url, &listed(&["m"], Some("vllm"))), "vLLM");
        assert_eq!(
            server_name(
                "http://127.0.0.1:11434/v1",
                &listed(&["m"], Some("library"))
            ),
            "Ollama"
        );
        assert_eq!(server_name(url, &[]), "a local model server");
        assert_eq!(host_port("http://[::1]:8080/v1"), "[::1]:8080");
    }

    #[test]
    fn a_server_and_model_are_remembered_together() {
        let dir = std::env::temp_dir().join(format!("buddy-seen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("cfg").join(SEEN_FILE);
        let a = "http://127.0.0.1:8080/v1";
        assert!(!was_seen(&file, a, "m1"));
        remember(&file, a, "m1");
        assert!(was_seen(&file, a, "m1"));
        assert!(!was_seen(&file, a, "m2"), "another model is news");
        assert!(!was_seen(&file, "http://127.0.0.1:11434/v1", "m1"));
        remember(&file, a, "m2");
        assert!(was_seen(&file, a, "m1") && was_seen(&file, a, "m2"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_probe_of_closed_ports_is_silent() {
        // Ports that were just free: bind, note the port, let go.
        let ports: Vec<u16> = (0..4)
            .map(|_| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                l.local_addr().expect("addr").port()
            })
            .collect();
        let servers: Vec<String> = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}/v1"))
            .collect();
        let probes = probe_all(&servers).await;
        assert_eq!(probes, vec![Probe::Silent; 4]);
    }

    /// A loopback server answering like Ollama: `/v1/models` with no window,
    /// `/api/ps` and `/api/show` as given (404 when `None`). Serves until
    /// dropped; each connection one request.
    async fn fake_ollama(ps: Option<&'static str>, show: Option<&'static str>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 8192];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let body = if head.starts_with("GET /v1/models") {
                    Some(
                        r#"{"object":"list","data":[{"id":"qwen3:8b","object":"model","owned_by":"library"},{"id":"llama3:latest","object":"model","owned_by":"library"}]}"#,
                    )
                } else if head.starts_with("GET /api/ps") {
                    ps
                } else if head.starts_with("POST /api/show") {
                    assert!(head.contains(r#""model":"qwen3:8b""#), "{head}");
                    show
                } else {
                    None
                };
                let reply = match body {
                    Some(b) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
                        b.len()
                    ),
                    None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
                };
                let _ = sock.write_all(reply.as_bytes()).await;
            }
        });
        base
    }

    fn contexts(probe: &Probe) -> Vec<Option<u64>> {
        match probe {
            Probe::Models(m) => m.iter().map(|m| m.context).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn ollamas_window_is_the_loaded_models_then_the_modelfiles_num_ctx() {
        // Loaded: /api/ps says the window it runs with.
        let base = fake_ollama(
            Some(r#"{"models":[{"name":"qwen3:8b","model":"qwen3:8b","size":1,"context_length":32768}]}"#),
            Some(r#"{"parameters":"num_ctx 8192"}"#),
        )
        .await;
        let probe = &probe_all(std::slice::from_ref(&base)).await[0];
        assert_eq!(contexts(probe), [Some(32768), None]);
        // Not loaded: the Modelfile's num_ctx.
        let base = fake_ollama(
            Some(r#"{"models":[]}"#),
            Some("{\"parameters\":\"stop \\\"<|im_end|>\\\"\\nnum_ctx 8192\\ntemperature 0.6\"}"),
        )
        .await;
        let probe = &probe_all(std::slice::from_ref(&base)).await[0];
        assert_eq!(contexts(probe), [Some(8192), None]);
        // Neither: unknown, not guessed (the window depends on the server).
        let base = fake_ollama(
            None,
            Some(r#"{"parameters":"temperature 0.6","model_info":{"qwen3.context_length":40960}}"#),
        )
        .await;
        let probe = &probe_all(std::slice::from_ref(&base)).await[0];
        assert_eq!(contexts(probe), [None, None]);
    }
}
