//! `web_search`: DuckDuckGo's HTML endpoint (no key, no account), scraped with
//! plain string scanning. The base URL is configurable so tests can serve a page.

use super::fetch::get_text;
use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

pub const DEFAULT_BASE_URL: &str = "https://html.duckduckgo.com";
pub const MAX_RESULTS: usize = 8;
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 8_000;
/// DuckDuckGo serves its HTML results to browsers; other agents get a bot check.
const BROWSER_USER_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";

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
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// What to search for.
    query: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// Decodes the HTML entities search pages use.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp..];
        // Entities are short; `;` is ASCII, so its byte index is a char boundary.
        let Some(semi) = after.bytes().take(12).position(|b| b == b';') else {
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
            "eacute" => Some('é'),
            "hellip" => Some('…'),
            "mdash" => Some('—'),
            "ndash" => Some('–'),
            "lsquo" => Some('‘'),
            "rsquo" => Some('’'),
            "ldquo" => Some('“'),
            "rdquo" => Some('”'),
            "laquo" => Some('«'),
            "raquo" => Some('»'),
            "middot" => Some('·'),
            "copy" => Some('©'),
            "reg" => Some('®'),
            "trade" => Some('™'),
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

/// The value of attribute `name` in an opening tag (`<a class="x" href='y'>`),
/// entities decoded.
fn attr(tag: &str, name: &str) -> Option<String> {
    let bytes = tag.as_bytes();
    let mut from = 0;
    while let Some(found) = tag[from..].find(name) {
        let at = from + found;
        from = at + name.len();
        // A whole attribute name: preceded by whitespace, followed by `=`.
        if at == 0 || !bytes[at - 1].is_ascii_whitespace() {
            continue;
        }
        let rest = tag[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start();
        let value = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let inner = &rest[1..];
                &inner[..inner.find(q).unwrap_or(inner.len())]
            }
            _ => {
                let end = rest
                    .find(|c: char| c.is_ascii_whitespace() || c == '>')
                    .unwrap_or(rest.len());
                &rest[..end]
            }
        };
        return Some(decode_entities(value));
    }
    None
}

fn has_class(tag: &str, class: &str) -> bool {
    attr(tag, "class").is_some_and(|c| c.split_ascii_whitespace().any(|t| t == class))
}

/// The results page's address for a query, the query form-encoded as the
/// search form would send it (a space is `+`).
fn search_url(base_url: &str, query: &str) -> String {
    let query: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
    format!("{}/html/?q={query}", base_url.trim_end_matches('/'))
}

/// DuckDuckGo wraps result links as `//duckduckgo.com/l/?uddg=<real url>&...`.
fn real_url(href: &str) -> String {
    if href.contains("/l/?") {
        let query = href.split_once('?').map_or("", |(_, q)| q);
        // The query is form-encoded: `+` is a space, then `%XX` escapes.
        if let Some((_, target)) =
            form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "uddg")
        {
            return target.into_owned();
        }
    }
    if let Some(rest) = href.strip_prefix("//") {
        return format!("https://{rest}");
    }
    href.to_string()
}

/// An opening tag found by `tags`: its name, its text (without `<` and `>`), and
/// the byte offsets where it starts and where its content starts.
struct Tag<'a> {
    name: &'a str,
    text: &'a str,
    start: usize,
    content: usize,
}

/// Opening tags of `html` from byte `from`, in order.
fn tags(html: &str, from: usize) -> impl Iterator<Item = Tag<'_>> {
    let mut pos = from;
    std::iter::from_fn(move || loop {
        let start = pos + html.get(pos..)?.find('<')?;
        let end = start + html[start..].find('>')?;
        pos = end + 1;
        let text = &html[start + 1..end];
        let name_len = text
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(text.len());
        if name_len == 0 {
            continue; // a closing tag, comment or doctype
        }
        return Some(Tag {
            name: &text[..name_len],
            text,
            start,
            content: end + 1,
        });
    })
}

/// The text inside the element whose opening tag is `tag`, tags stripped.
fn element_text(html: &str, tag: &Tag<'_>, limit: usize) -> String {
    let close = format!("</{}", tag.name);
    let end = html[tag.content..limit]
        .find(&close)
        .map_or(limit, |e| tag.content + e);
    strip_tags(&html[tag.content..end])
}

/// Extracts up to `MAX_RESULTS` results from a DuckDuckGo HTML page: each title
/// anchor (class `result__a`) and the first snippet (class `result__snippet`)
/// before the next title.
pub fn parse_results(html: &str) -> Vec<SearchResult> {
    let titles: Vec<Tag<'_>> = tags(html, 0)
        .filter(|t| t.name.eq_ignore_ascii_case("a") && has_class(t.text, "result__a"))
        .collect();
    let mut results: Vec<SearchResult> = Vec::new();
    for (n, tag) in titles.iter().enumerate() {
        let block_end = titles.get(n + 1).map_or(html.len(), |t| t.start);
        let href = attr(tag.text, "href").unwrap_or_default();
        // Ads link through DuckDuckGo's click tracker rather than `/l/`.
        if href.contains("duckduckgo.com/y.js") || href.contains("ad_provider=") {
            continue;
        }
        let url = real_url(&href);
        let title = element_text(html, tag, block_end);
        if title.is_empty() || url.is_empty() || results.iter().any(|r| r.url == url) {
            continue;
        }
        let snippet = tags(html, tag.content)
            .take_while(|t| t.start < block_end)
            .find(|t| has_class(t.text, "result__snippet"))
            .map(|t| element_text(html, &t, block_end))
            .unwrap_or_default();
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

/// Whether a page without results is DuckDuckGo's bot check rather than an
/// honest empty result list.
fn is_bot_check(html: &str) -> bool {
    html.contains("anomaly-modal") || html.contains("challenge-form")
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
            crate::tools::schema::of::<Args>(),
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
        let url = search_url(&self.opts.base_url, query);
        let page = get_text(
            &url,
            self.opts.timeout,
            super::fetch::DEFAULT_MAX_BYTES,
            Some(BROWSER_USER_AGENT),
        )
        .await?;
        let results = parse_results(&page.body);
        if results.is_empty() {
            if is_bot_check(&page.body) {
                return Err(ToolError::Failed(
                    "DuckDuckGo answered with a bot check instead of results; try again later, \
                     or fetch_url a site you already know"
                        .into(),
                ));
            }
            return Ok(ToolOutput::text(format!("no results for \"{query}\"")));
        }
        let text = results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut entry = format!("{}. {}\n   {}", i + 1, r.title, r.url);
                if !r.snippet.is_empty() {
                    entry.push_str(&format!("\n   {}", r.snippet));
                }
                entry
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ToolOutput::text(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// Shaped like a real results page: an ad first, a result with a class list
    /// and single quotes, a repeated URL, and a footer that is not a result.
    const BUSY_PAGE: &str = r#"<!DOCTYPE html>
<html><head><script>if (a < b && c > d) { x = "<a class=\"result__a\">"; }</script></head>
<body><div id="links" class="results">
<div class="result results_links results_links_deep result--ad ">
  <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_domain=shop.example&amp;ad_provider=bingv7aa&amp;u3=x">Buy Rust Now</a></h2>
  <a class="result__snippet" href="https://duckduckgo.com/y.js?x">Ad text.</a>
</div>
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel='nofollow' class='result__a js-result-title-link' data-href="https://wrong.example/" href='//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fcaf%C3%A9%3Fq%3Da%2Bb&amp;rut=0f1e'>Caf&eacute;s &amp; <b>crème</b> br&#xFB;l&#233;e — ünïcødé</a>
    </h2>
    <div class="result__extras"><a class="result__url" href="//duckduckgo.com/l/?uddg=x">example.org/café</a></div>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">Menu: <b>crème brûlée</b>, 3&lt;4 &gt; 2, &quot;ok&quot; &#39;fine&#39; &nbsp;end</a>
  </div>
</div>
<div class="result results_links web-result ">
  <h2 class="result__title"><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fcaf%C3%A9%3Fq%3Da%2Bb&amp;rut=zz">Same page again</a></h2>
</div>
<div class="result results_links web-result ">
  <h2 class="result__title"><a class="result__a" href="https://plain.example/no-snippet">No snippet here</a></h2>
</div>
<div class="nav-link"><form action="/html/" method="post"><input type="submit" class="btn" value="Next"></form></div>
</div></body></html>"#;

    #[test]
    fn skips_ads_and_duplicates_and_decodes_everything() {
        let r = parse_results(BUSY_PAGE);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].title, "Cafés & crème brûlée — ünïcødé");
        assert_eq!(r[0].url, "https://example.org/café?q=a+b");
        assert_eq!(
            r[0].snippet,
            "Menu: crème brûlée, 3<4 > 2, \"ok\" 'fine' end"
        );
        assert_eq!(r[1].title, "No snippet here");
        assert_eq!(r[1].url, "https://plain.example/no-snippet");
        assert_eq!(r[1].snippet, "");
    }

    #[test]
    fn entity_decoding_is_safe_on_multibyte_text() {
        assert_eq!(decode_entities("&abcdefghéé;x"), "&abcdefghéé;x");
        assert_eq!(decode_entities("ü&amp;ü&#x1F600;&"), "ü&ü😀&");
        assert_eq!(decode_entities("&#99999999;"), "&#99999999;");
    }

    #[test]
    fn attributes_are_matched_whole() {
        let tag = r#"a data-href="x" href = 'y' class=plain"#;
        assert_eq!(attr(tag, "href").as_deref(), Some("y"));
        assert_eq!(attr(tag, "class").as_deref(), Some("plain"));
        assert_eq!(attr(tag, "rel"), None);
    }

    #[test]
    fn empty_and_blocked_pages() {
        assert!(parse_results("<html><body>No results.</body></html>").is_empty());
        assert!(is_bot_check(
            r#"<div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>"#
        ));
        assert!(!is_bot_check(PAGE));
    }

    #[test]
    fn at_most_eight_results() {
        let page: String = (0..20)
            .map(|i| {
                format!(r#"<a class="result__a" href="https://e.com/{i}">T{i}</a><a class="result__snippet">s</a>"#)
            })
            .collect();
        let r = parse_results(&page);
        assert_eq!(r.len(), MAX_RESULTS);
        assert_eq!(r[7].title, "T7");
    }

    #[test]
    fn queries_go_out_form_encoded() {
        assert_eq!(
            search_url("https://html.duckduckgo.com/", "rust & c++ é"),
            "https://html.duckduckgo.com/html/?q=rust+%26+c%2B%2B+%C3%A9"
        );
    }

    #[test]
    fn wrapped_links_are_decoded() {
        let wrapped = "//duckduckgo.com/l/?uddg=https%3A%2F%2Fe.com%2Fa+b%3Fx%3D1%262&rut=9";
        assert_eq!(real_url(wrapped), "https://e.com/a b?x=1&2");
        // Broken escapes pass through as written rather than failing.
        assert_eq!(real_url("/l/?uddg=100%25%zz%"), "100%%zz%");
        assert_eq!(real_url("//e.com/x"), "https://e.com/x");
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
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                PAGE.len()
            );
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(PAGE.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let tool = SearchTool::new(SearchOptions {
            base_url: format!("http://{addr}"),
            ..Default::default()
        });
        let ctx = ToolContext::local(
            std::env::temp_dir(),
            std::sync::Arc::new(crate::tools::approval::AlwaysApprove),
        );
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
