//! A fake issuer on 127.0.0.1 for login tests, shaped like OpenAI's: a
//! device-code endpoint, a poll endpoint that answers 403 until the user
//! "approved" and then hands over an authorization code, and the OAuth token
//! endpoint (authorization-code and refresh grants). Every request body is
//! recorded (JSON bodies flattened into the same map as forms).
//!
//! The first `pending_polls` polls are pending; the exchange then gives
//! `at-1`/`rt-1` and an ID token naming account `acct-42`. Each refresh
//! answers `at-<n+1>`/`rt-<n+1>`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub const USER_CODE: &str = "WXYZ-2468";

#[derive(Default)]
struct State {
    forms: Vec<(String, BTreeMap<String, String>)>,
    polls: usize,
    issued: usize,
}

pub struct FakeIssuer {
    port: u16,
    state: Arc<Mutex<State>>,
    pending_polls: usize,
}

fn parse_form(body: &str) -> BTreeMap<String, String> {
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl FakeIssuer {
    pub fn start(pending_polls: usize) -> FakeIssuer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state, pending_polls);
                });
            }
        });
        FakeIssuer {
            port,
            state,
            pending_polls,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `[auth.openai]` pointing here.
    pub fn config(&self) -> String {
        format!(
            "[auth.openai]\nissuer = \"{}\"\nclient_id = \"buddy-test-client\"\n",
            self.url()
        )
    }

    /// Every form posted, with the path it went to.
    pub fn forms(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.state.lock().expect("lock").forms.clone()
    }

    /// How many refresh grants were made.
    pub fn refreshes(&self) -> usize {
        self.forms()
            .iter()
            .filter(|(_, f)| f.get("grant_type").map(String::as_str) == Some("refresh_token"))
            .count()
    }

    pub fn pending_polls(&self) -> usize {
        self.pending_polls
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, pending_polls: usize) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let text = String::from_utf8_lossy(&body).into_owned();
    let form = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(m)) => m
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map_or(v.to_string(), str::to_string)))
            .collect(),
        _ => parse_form(&text),
    };
    let (status, reply) = {
        let mut st = state.lock().expect("lock");
        st.forms.push((path.clone(), form.clone()));
        match (path.as_str(), form.get("grant_type").map(String::as_str)) {
            ("/api/accounts/deviceauth/usercode", _) => (
                200,
                format!(
                    r#"{{"device_auth_id":"dev-auth-1","user_code":"{USER_CODE}","interval":"1"}}"#
                ),
            ),
            ("/api/accounts/deviceauth/token", _) => {
                st.polls += 1;
                if form.get("device_auth_id").map(String::as_str) != Some("dev-auth-1")
                    || form.get("user_code").map(String::as_str) != Some(USER_CODE)
                {
                    (400, r#"{"error":"bad_request"}"#.to_string())
                } else if st.polls <= pending_polls {
                    (
                        403,
                        r#"{"error":"deviceauth_authorization_pending"}"#.to_string(),
                    )
                } else {
                    (
                        200,
                        r#"{"authorization_code":"auth-code-1","code_verifier":"verifier-1","code_challenge":"x"}"#
                            .to_string(),
                    )
                }
            }
            ("/oauth/token", Some("authorization_code")) => {
                let ok = form.get("code").map(String::as_str) == Some("auth-code-1")
                    && form.get("code_verifier").map(String::as_str) == Some("verifier-1")
                    && form
                        .get("redirect_uri")
                        .is_some_and(|r| r.ends_with("/deviceauth/callback"));
                if ok {
                    st.issued = 1;
                    // An unsigned ID token: header.payload.signature, base64url.
                    // The URL-shaped key is only the name of OpenAI's claim
                    // namespace inside the token; nothing ever connects to it.
                    let id_token = format!(
                        "e30.{}.sig",
                        b64url(
                            r#"{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-42"}}"#
                        )
                    );
                    (
                        200,
                        format!(
                            r#"{{"access_token":"at-1","refresh_token":"rt-1","id_token":"{id_token}","expires_in":3600}}"#
                        ),
                    )
                } else {
                    (400, r#"{"error":"invalid_grant"}"#.to_string())
                }
            }
            ("/oauth/token", Some("refresh_token")) => {
                let n: usize = form
                    .get("refresh_token")
                    .and_then(|t| t.strip_prefix("rt-"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if n == 0 {
                    (400, r#"{"error":"invalid_grant"}"#.to_string())
                } else {
                    (
                        200,
                        format!(
                            r#"{{"access_token":"at-{m}","refresh_token":"rt-{m}","expires_in":3600}}"#,
                            m = n + 1
                        ),
                    )
                }
            }
            _ => (404, r#"{"error":"not_found"}"#.to_string()),
        }
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    )?;
    out.flush()
}

fn b64url(text: &str) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}
