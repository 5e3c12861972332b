//! `fetch_url`: an HTTP(S) GET of text content, with a time limit and a size cap.
//! Also the bounded GET that `web_search` uses.

use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput, Truncation};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::Duration;

pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 16_000;
pub const DEFAULT_MAX_BYTES: usize = 2 * 1024 * 1024;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
pub struct FetchOptions {
    pub timeout: Duration,
    pub max_bytes: usize,
    pub max_output_chars: usize,
}

pub struct FetchTool {
    opts: FetchOptions,
}

impl FetchTool {
    pub fn new(opts: FetchOptions) -> Self {
        FetchTool { opts }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
}

/// Built on first use, so runs that never fetch do not pay for TLS setup.
fn client() -> Result<&'static reqwest::Client, ToolError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(c) = CLIENT.get() {
        return Ok(c);
    }
    let c = reqwest::Client::builder()
        .user_agent(concat!(
            "Mozilla/5.0 (X11; Linux x86_64) buddy/",
            env!("CARGO_PKG_VERSION")
        ))
        .redirect(reqwest::redirect::Policy::limited(5))
        .build()
        .map_err(|e| ToolError::Failed(format!("cannot build HTTP client: {e}")))?;
    Ok(CLIENT.get_or_init(|| c))
}

/// A fetched text body.
pub struct Fetched {
    pub status: u16,
    pub final_url: String,
    pub content_type: String,
    pub body: String,
    /// The body went past the byte cap and was cut there.
    pub capped: bool,
    pub bytes_read: usize,
}

fn is_texty(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.is_empty()
        || ct.starts_with("text/")
        || [
            "json",
            "xml",
            "javascript",
            "ecmascript",
            "yaml",
            "toml",
            "csv",
            "x-sh",
            "sql",
            "markdown",
        ]
        .iter()
        .any(|k| ct.contains(k))
}

/// GETs `url` and returns its text, reading at most `max_bytes`.
pub async fn get_text(
    url: &str,
    timeout: Duration,
    max_bytes: usize,
) -> Result<Fetched, ToolError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| ToolError::InvalidArguments(format!("invalid URL `{url}`: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ToolError::InvalidArguments(format!(
            "only http and https URLs can be fetched, not `{}`",
            parsed.scheme()
        )));
    }
    let work = async {
        let mut resp = client()?
            .get(parsed.clone())
            .send()
            .await
            .map_err(|e| ToolError::Failed(format!("cannot fetch {url}: {}", describe(&e))))?;
        let status = resp.status().as_u16();
        let final_url = resp.url().to_string();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !resp.status().is_success() {
            return Err(ToolError::Failed(format!("{url} answered HTTP {status}")));
        }
        if !is_texty(&content_type) {
            return Err(ToolError::Failed(format!(
                "{url} is binary content ({content_type}); fetch_url returns text only"
            )));
        }
        let mut body = Vec::new();
        let mut capped = false;
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| ToolError::Failed(format!("error reading {url}: {}", describe(&e))))?
        {
            let room = max_bytes - body.len();
            if chunk.len() >= room {
                body.extend_from_slice(&chunk[..room]);
                capped = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        if body[..body.len().min(8192)].contains(&0) {
            return Err(ToolError::Failed(format!(
                "{url} returned binary data ({}); fetch_url returns text only",
                if content_type.is_empty() {
                    "no content type"
                } else {
                    &content_type
                }
            )));
        }
        let bytes_read = body.len();
        Ok(Fetched {
            status,
            final_url,
            content_type,
            body: String::from_utf8_lossy(&body).into_owned(),
            capped,
            bytes_read,
        })
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        ToolError::Failed(format!(
            "fetching {url} timed out after {} s",
            timeout.as_secs()
        ))
    })?
}

fn describe(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg = format!("{msg}: {s}");
        source = s.source();
    }
    msg
}

#[async_trait]
impl Tool for FetchTool {
    fn name(&self) -> &'static str {
        "fetch_url"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "fetch_url",
            "Fetch a web page or text document with an HTTP GET and return its text (HTML is returned as-is). Binary content is refused; long bodies are truncated.",
            json!({
                "type": "object",
                "properties": {"url": {"type": "string", "description": "The http:// or https:// URL to fetch."}},
                "required": ["url"],
                "additionalProperties": false
            }),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.opts.max_output_chars
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let f = get_text(args.url.trim(), self.opts.timeout, self.opts.max_bytes).await?;
        let header = format!("HTTP {} {} ({})\n\n", f.status, f.final_url, f.content_type);
        let text = format!("{header}{}", f.body);
        let truncated = f.capped.then(|| Truncation {
            kept: text.chars().count(),
            // Unknown beyond the cap; at least what was read and one more byte.
            total: header.chars().count() + f.bytes_read + 1,
        });
        Ok(ToolOutput { text, truncated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::approval::AlwaysApprove;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-shot HTTP server on loopback answering every request with `response`.
    async fn serve(response: Vec<u8>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(&response).await;
                let _ = s.shutdown().await;
            }
        });
        format!("http://{addr}/page")
    }

    fn http(ct: &str, body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    fn ctx() -> ToolContext {
        ToolContext {
            cwd: std::env::temp_dir(),
            approver: Arc::new(AlwaysApprove),
        }
    }

    fn tool(max_bytes: usize) -> FetchTool {
        FetchTool::new(FetchOptions {
            timeout: Duration::from_secs(5),
            max_bytes,
            max_output_chars: 10_000,
        })
    }

    #[tokio::test]
    async fn fetches_text() {
        let url = serve(http("text/plain; charset=utf-8", b"hello page")).await;
        let out = tool(1000)
            .execute(json!({"url": url}), &ctx())
            .await
            .unwrap();
        assert!(out.text.starts_with("HTTP 200 "), "{}", out.text);
        assert!(out.text.ends_with("hello page"));
        assert_eq!(out.truncated, None);
    }

    #[tokio::test]
    async fn binary_is_refused_with_the_content_type() {
        let url = serve(http("image/png", b"\x89PNG\0\0")).await;
        let e = tool(1000)
            .execute(json!({"url": url}), &ctx())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("image/png"), "{e}");
    }

    #[tokio::test]
    async fn body_is_capped() {
        let url = serve(http("text/plain", &[b'z'; 50_000])).await;
        let out = tool(1000)
            .execute(json!({"url": url}), &ctx())
            .await
            .unwrap();
        assert!(out.truncated.is_some());
        assert_eq!(out.text.matches('z').count(), 1000);
    }

    #[tokio::test]
    async fn non_http_schemes_and_errors() {
        let e = tool(10)
            .execute(json!({"url": "file:///etc/passwd"}), &ctx())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("only http and https"), "{e}");
        let url = serve(
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
        )
        .await;
        let e = tool(10)
            .execute(json!({"url": url}), &ctx())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("404"), "{e}");
    }
}
