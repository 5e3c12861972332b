//! `web_search`: DuckDuckGo's HTML endpoint (no key, no account), scraped with
//! plain string scanning. The base URL is configurable so tests can serve a page.

use super::fetch::get_text;
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

pub const DEFAULT_BASE_URL: &str = "https://html.duckduckgo.com";
pub const MAX_RESULTS: usize = 8;

#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub base_url: String,
    pub timeout: Duration,
    pub max_output_chars: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            base_url: DEFAULT_BASE_URL.to_string(),
            timeout: super::fetch::DEFAULT_TIMEOUT,
            max_output_chars: 8_000,
        }
    }
}

pub struct SearchTool {
    opts: SearchOptions,
}

impl SearchTool {
    pub fn new(opts: SearchOptions) -> Self {
        SearchTool { opts }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    query: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// Percent-encodes a query component (RFC 3986 unreserved characters pass).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes the HTML entities search pages use.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp..];
        let Some(semi) = after[..after.len().min(12)].find(';') else {
            out.push('&');
            rest = &after[1..];
            continue;
        };
        let entity = &after[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            e if e.starts_with("#x") || e.starts_with("#X") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32),
            e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &after[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Removes tags and collapses whitespace.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    decode_entities(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(decode_entities(&tag[start..end]))
}

/// DuckDuckGo wraps result links as `//duckduckgo.com/l/?uddg=<real url>&...`.
fn real_url(href: &str) -> String {
    if let Some(pos) = href.find("uddg=") {
        let value = &href[pos + 5..];
        let end = value.find('&').unwrap_or(value.len());
        return percent_decode(&value[..end]);
    }
    if let Some(rest) = href.strip_prefix("//") {
        return format!("https://{rest}");
    }
    href.to_string()
}

/// Extracts up to `MAX_RESULTS` results from a DuckDuckGo HTML page.
pub fn parse_results(html: &str) -> Vec<SearchResult> {
    const TITLE: &str = "class=\"result__a\"";
    const SNIPPET: &str = "class=\"result__snippet\"";
    let starts: Vec<usize> = html.match_indices(TITLE).map(|(i, _)| i).collect();
    let mut results = Vec::new();
    for (n, &pos) in starts.iter().enumerate() {
        let Some(tag_start) = html[..pos].rfind("<a") else {
            continue;
        };
        let Some(tag_end) = html[pos..].find('>').map(|e| pos + e) else {
            continue;
        };
        let tag = &html[tag_start..tag_end];
        let Some(close) = html[tag_end..].find("</a>").map(|e| tag_end + e) else {
            continue;
        };
        let title = strip_tags(&html[tag_end + 1..close]);
        let url = attr(tag, "href").map(|h| real_url(&h)).unwrap_or_default();
        let block_end = starts.get(n + 1).copied().unwrap_or(html.len());
        let snippet = html[close..block_end]
            .find(SNIPPET)
            .map(|s| close + s)
            .and_then(|s| {
                let open_end = html[s..block_end].find('>')? + s + 1;
                let end = ["</a>", "</td>", "</div>"]
                    .iter()
                    .filter_map(|t| html[open_end..block_end].find(t))
                    .min()
                    .map(|e| open_end + e)
                    .unwrap_or(block_end);
                Some(strip_tags(&html[open_end..end]))
            })
            .unwrap_or_default();
        if title.is_empty() || url.is_empty() || url.contains("duckduckgo.com/y.js") {
            continue; // empty or an ad
        }
        results.push(SearchResult {
            title,
            url,
            snippet,
        });
        if results.len() == MAX_RESULTS {
            break;
        }
    }
    results
}

#[async_trait]
impl Tool for SearchTool {
    fn name(&self) -> &'static str {
        "web_search"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "web_search",
            "Search the web (DuckDuckGo) and return up to 8 results with title, URL and snippet. Use fetch_url to read a result.",
            json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to search for."}},
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.opts.max_output_chars
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let query = args.query.trim();
        if query.is_empty() {
            return Err(ToolError::InvalidArguments("`query` is empty".into()));
        }
        let url = format!(
            "{}/html/?q={}",
            self.opts.base_url.trim_end_matches('/'),
            percent_encode(query)
        );
        let page = get_text(&url, self.opts.timeout, super::fetch::DEFAULT_MAX_BYTES).await?;
        let results = parse_results(&page.body);
        if results.is_empty() {
            return Ok(ToolOutput::text(format!("no results for \"{query}\"")));
        }
        let text = results
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{}. {}\n   {}\n   {}", i + 1, r.title, r.url, r.snippet))
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ToolOutput::text(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<html><body>
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust%2Dlang.org%2Flearn%3Fa%3D1%26b%3D2&amp;rut=abc">The <b>Rust</b> Programming Language</a>
    </h2>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">A language empowering everyone to build <b>reliable</b> &amp; efficient software &#x27;fast&#x27;.</a>
  </div>
</div>
<div class="result results_links results_links_deep web-result ">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://doc.rust-lang.org/book/">The Book &quot;TRPL&quot;</a></h2>
    <a class="result__snippet" href="https://doc.rust-lang.org/book/">Learn   Rust
    step by step.</a>
</div>
</body></html>"#;

    #[test]
    fn parses_titles_real_urls_and_snippets() {
        let r = parse_results(PAGE);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].title, "The Rust Programming Language");
        assert_eq!(r[0].url, "https://www.rust-lang.org/learn?a=1&b=2");
        assert_eq!(
            r[0].snippet,
            "A language empowering everyone to build reliable & efficient software 'fast'."
        );
        assert_eq!(r[1].title, "The Book \"TRPL\"");
        assert_eq!(r[1].snippet, "Learn Rust step by step.");
    }

    #[test]
    fn at_most_eight_results() {
        let one =
            r#"<a class="result__a" href="https://e.com/">T</a><a class="result__snippet">s</a>"#;
        assert_eq!(parse_results(&one.repeat(20)).len(), MAX_RESULTS);
    }

    #[test]
    fn encoding_round_trip() {
        assert_eq!(percent_encode("rust & c++ é"), "rust+%26+c%2B%2B+%C3%A9");
        assert_eq!(percent_decode("rust+%26+c%2B%2B+%C3%A9"), "rust & c++ é");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%é%zz"), "%é%zz");
    }

    #[tokio::test]
    async fn searches_a_served_page() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", PAGE.len());
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(PAGE.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let tool = SearchTool::new(SearchOptions {
            base_url: format!("http://{addr}"),
            ..Default::default()
        });
        let ctx = ToolContext {
            cwd: std::env::temp_dir(),
            approver: std::sync::Arc::new(crate::tools::approval::AlwaysApprove),
        };
        let out = tool
            .execute(json!({"query": "rust lang"}), &ctx)
            .await
            .unwrap();
        let request = server.await.unwrap();
        assert!(request.starts_with("GET /html/?q=rust+lang "), "{request}");
        assert!(
            out.text.starts_with(
                "1. The Rust Programming Language\n   https://www.rust-lang.org/learn?a=1&b=2"
            ),
            "{}",
            out.text
        );
        assert!(out.text.contains("2. The Book"));
    }
}
