//! `fetch_url`: an HTTP(S) GET of text content, with a time limit and a size cap.
//! Also the bounded GET that `web_search` uses.

use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput, Truncation};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// The http:// or https:// URL to fetch.
    url: String,
}

/// Built on first use, so runs that never fetch do not pay for TLS setup.
fn client() -> Result<&'static reqwest::Client, ToolError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(c) = CLIENT.get() {
        return Ok(c);
    }
    let c = crate::net::client_builder(&[])
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
    /// The body's size as the server announced it (`Content-Length`), if it did.
    pub announced_len: Option<u64>,
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

/// GETs `url` and returns its text, reading at most `max_bytes`. `user_agent`
/// replaces the client's own for this request.
pub async fn get_text(
    url: &str,
    timeout: Duration,
    max_bytes: usize,
    user_agent: Option<&str>,
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
        let mut request = client()?.get(parsed.clone());
        if let Some(ua) = user_agent {
            request = request.header(reqwest::header::USER_AGENT, ua);
        }
        let mut resp = request
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
            let reason = resp.status().canonical_reason().unwrap_or("");
            return Err(ToolError::Failed(
                format!("{url} answered HTTP {status} {reason}")
                    .trim_end()
                    .to_string(),
            ));
        }
        let announced_len = resp.content_length();
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
        if body.contains(&0) {
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
            announced_len,
        })
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        ToolError::Failed(format!(
            "fetching {url} timed out after {:.1} s",
            timeout.as_secs_f64()
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
            crate::tools::schema::of::<Args>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.opts.max_output_chars
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let f = get_text(
            args.url.trim(),
            self.opts.timeout,
            self.opts.max_bytes,
            None,
        )
        .await?;
        let content_type = if f.content_type.is_empty() {
            "no content type"
        } else {
            &f.content_type
        };
        let header = format!("HTTP {} {} ({content_type})\n\n", f.status, f.final_url);
        if !f.capped {
            return Ok(ToolOutput::text(format!("{header}{}", f.body)));
        }
        // Past the cap the size is known only if the server announced it; otherwise
        // report what was read plus one byte, the least the body can be.
        let body_total = f
            .announced_len
            .filter(|&n| n > f.bytes_read as u64)
            .map_or(format!("more than {} bytes", f.bytes_read), |n| {
                format!("{n} bytes")
            });
        let note = format!(
            "\n[fetch_url: the body is {body_total}; only the first {} bytes were downloaded]",
            f.bytes_read
        );
        let text = format!("{header}{}{note}", f.body);
        let total_bytes = f
            .announced_len
            .map_or(f.bytes_read as u64 + 1, |n| n.max(f.bytes_read as u64 + 1));
        let total = header.chars().count() + note.chars().count() + total_bytes as usize;
        Ok(ToolOutput {
            truncated: Some(Truncation {
                kept: text.chars().count(),
                total,
            }),
            text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::approval::AlwaysApprove;
    use serde_json::json;
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
        ToolContext::local(std::env::temp_dir(), Arc::new(AlwaysApprove))
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
        assert_eq!(out.text.matches('z').count(), 1000);
        assert!(
            out.text.ends_with(
                "[fetch_url: the body is 50000 bytes; only the first 1000 bytes were downloaded]"
            ),
            "{}",
            out.text
        );
        let cut = out.truncated.expect("cut");
        assert_eq!(cut.kept, out.text.chars().count());
        assert!(cut.total > 50_000 && cut.total < 50_300, "{cut:?}");
    }

    #[tokio::test]
    async fn nul_bytes_in_a_text_body_are_refused() {
        let url = serve(http("text/plain", b"looks\0binary")).await;
        let e = tool(1000)
            .execute(json!({"url": url}), &ctx())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("binary data (text/plain)"), "{e}");
    }

    #[tokio::test]
    async fn slow_servers_time_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(s);
        });
        let t = FetchTool::new(FetchOptions {
            timeout: Duration::from_millis(300),
            max_bytes: 100,
            max_output_chars: 100,
        });
        let e = t
            .execute(json!({"url": format!("http://{addr}/")}), &ctx())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("timed out after 0.3 s"), "{e}");
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
        assert!(e.to_string().contains("HTTP 404 Not Found"), "{e}");
    }
}
