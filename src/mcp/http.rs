//! The Streamable HTTP side of an MCP server: the SDK's transport, given the
//! server's URL, its `headers` and the bearer token read from the variable
//! `bearer_token_env` names (registered as a secret, so it never reaches
//! the screen, events or sessions). The token is read when the server is
//! connected, so a changed variable takes effect on the next start.
//!
//! Only `http://` is reached for now: the SDK's HTTP client is built without
//! a TLS stack of its own (buddy's is another reqwest major version), and an
//! `https://` server is refused with a line saying so.

use crate::config::McpServer;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};
use rmcp::transport::StreamableHttpClientTransport;
use std::collections::HashMap;

/// The transport for `url`, or one line saying why not.
pub fn transport(
    url: &str,
    spec: &McpServer,
) -> Result<StreamableHttpClientTransport<impl StreamableHttpClient>, String> {
    if !url.starts_with("http://") {
        return Err(
            "only http:// MCP servers are supported in this build (https:// is not yet)".into(),
        );
    }
    let mut headers = HashMap::new();
    for (k, v) in &spec.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            format!(
                "headers: `{}` is not a header name",
                crate::text::one_line(k, 60)
            )
        })?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            format!(
                "headers.{}: not a valid header value",
                crate::text::one_line(k, 60)
            )
        })?;
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    if let Some(var) = &spec.bearer_token_env {
        let token = std::env::var(var)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| format!("bearer_token_env: ${var} is not set"))?;
        crate::redact::remember([token.clone()]);
        config = config.auth_header(token);
    }
    Ok(StreamableHttpClientTransport::from_config(config))
}
