//! The loopback end of an authorization: a listener on 127.0.0.1 at a port
//! the system picks, which takes the one redirect carrying `code` and
//! `state`, answers the browser with a short page and hands the code over
//! when the state is ours. Also opens the browser. Does not build the
//! authorization URL or exchange the code (the flow's).

use super::OAuthError;
use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The path the redirect comes back to.
pub const CALLBACK_PATH: &str = "/callback";
/// A redirect's request head, at most: the browser sends a line and headers.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// What the redirect carried: the code, and the issuer it names (RFC 9207),
/// which the flow compares with the one it asked.
#[derive(Debug, PartialEq, Eq)]
pub struct Redirect {
    pub code: String,
    pub iss: Option<String>,
}

pub struct Listener {
    listener: TcpListener,
    pub redirect_uri: String,
}

/// Listens on a random loopback port.
pub async fn listen() -> Result<Listener, OAuthError> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| OAuthError::Flow(format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| OAuthError::Flow(format!("cannot listen on 127.0.0.1: {e}")))?
        .port();
    Ok(Listener {
        listener,
        redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
    })
}

fn page(status: &str, text: &str) -> Vec<u8> {
    let body = format!("<!doctype html><title>buddy</title><p>{text}</p>\n");
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl Listener {
    /// Waits for the redirect; its code and `iss` when its `state` is
    /// `state`. Requests for other paths (a favicon) are answered 404 and
    /// skipped.
    pub async fn redirect(self, state: &str) -> Result<Redirect, OAuthError> {
        loop {
            let (mut conn, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| OAuthError::Flow(format!("the loopback listener failed: {e}")))?;
            let mut head = Vec::new();
            let mut buf = [0u8; 2048];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head);
            let target = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or("");
            let url = Url::parse(&format!("http://127.0.0.1{target}")).ok();
            let Some(url) = url.filter(|u| u.path() == CALLBACK_PATH) else {
                let _ = conn.write_all(&page("404 Not Found", "Not here.")).await;
                continue;
            };
            let get = |k: &str| {
                url.query_pairs()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.into_owned())
            };
            if get("state").as_deref() != Some(state) {
                let _ = conn
                    .write_all(&page(
                        "400 Bad Request",
                        "This is not the login buddy started.",
                    ))
                    .await;
                return Err(OAuthError::Flow(
                    "the redirect's `state` is not the one buddy sent; login refused".into(),
                ));
            }
            if let Some(error) = get("error") {
                let _ = conn
                    .write_all(&page("200 OK", "Login refused. You can close this page."))
                    .await;
                let why = get("error_description").unwrap_or_default();
                return Err(OAuthError::Flow(format!(
                    "the authorization server refused: {}",
                    crate::text::one_line(&format!("{error} {why}"), 200)
                )));
            }
            let Some(code) = get("code") else {
                let _ = conn.write_all(&page("400 Bad Request", "No code.")).await;
                return Err(OAuthError::Flow("the redirect carried no code".into()));
            };
            let _ = conn
                .write_all(&page(
                    "200 OK",
                    "Logged in. You can close this page and return to buddy.",
                ))
                .await;
            return Ok(Redirect {
                code,
                iss: get("iss"),
            });
        }
    }
}

/// Opens `url` with `$BROWSER`, else `xdg-open` or `open`; the URL is also
/// printed on stderr, for when none of them works (a remote shell).
pub fn open_browser(url: &str) {
    eprintln!("Open this URL to log in (buddy waits for the redirect):\n  {url}");
    let mut programs: Vec<String> = crate::process::var("BROWSER")
        .filter(|b| !b.trim().is_empty())
        .into_iter()
        .collect();
    programs.extend(["xdg-open".to_string(), "open".to_string()]);
    for program in programs {
        // Not waited for: a browser may run as long as it likes; tokio
        // reaps the child when it exits.
        let spawned = tokio::process::Command::new(&program)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if spawned.is_ok() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(redirect: &str, query: &str) {
        let url = format!("{redirect}?{query}");
        let client = reqwest::Client::new();
        let _ = client.get(url).send().await;
    }

    #[tokio::test]
    async fn the_code_is_taken_only_with_our_state() {
        let l = listen().await.unwrap();
        let uri = l.redirect_uri.clone();
        assert!(uri.starts_with("http://127.0.0.1:"));
        let (got, _) = tokio::join!(
            l.redirect("s1"),
            get(&uri, "code=abc&state=s1&iss=https%3A%2F%2Fa")
        );
        let got = got.unwrap();
        assert_eq!(got.code, "abc");
        assert_eq!(got.iss.as_deref(), Some("https://a"));

        let l = listen().await.unwrap();
        let uri = l.redirect_uri.clone();
        let (code, _) = tokio::join!(l.redirect("s1"), get(&uri, "code=abc&state=forged"));
        assert!(code.unwrap_err().to_string().contains("state"));
    }
}
