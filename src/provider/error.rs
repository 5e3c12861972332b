//! Errors of the model client, each a one-line sentence a user can act on.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// Could not reach the server (refused, DNS, TLS, reset before a response).
    Connect { url: String, detail: String },
    /// The server's certificate was refused: retrying cannot change that.
    Tls { url: String, detail: String },
    /// No complete answer within the configured time.
    Timeout { url: String, secs: u64 },
    /// The server answered with a non-success status.
    Status { status: u16, message: String },
    /// A 4xx to a request that carried an image: most likely the model
    /// takes no images, or not this one; the line says so.
    ImageRejected { status: u16, message: String },
    /// The answer arrived but is not a valid completion.
    InvalidResponse(String),
    /// The stream broke off before the completion was finished.
    StreamInterrupted(String),
    /// No usable login: not logged in, or the refresh failed.
    Auth(String),
    /// The server refused for a reason no retry can fix (no quota or credit,
    /// a bad key, a blocked account), as an HTTP status or a stream event.
    Refused {
        status: Option<u16>,
        message: String,
    },
    /// The request is longer than the model's context window: sending it
    /// again as it is cannot help. `limit` is the window the server named,
    /// when it named one.
    ContextOverflow {
        status: Option<u16>,
        message: String,
        limit: Option<u64>,
    },
}

impl ApiError {
    /// Whether trying again may succeed: connection trouble, timeouts, 408, 409,
    /// 429 and 5xx. Other 4xx mean the request itself is wrong.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Connect { .. } | ApiError::Timeout { .. } => true,
            ApiError::Status { status, .. } => {
                matches!(status, 408 | 409 | 429) || (500..600).contains(status)
            }
            ApiError::Tls { .. }
            | ApiError::ImageRejected { .. }
            | ApiError::InvalidResponse(_)
            | ApiError::StreamInterrupted(_)
            | ApiError::Auth(_)
            | ApiError::Refused { .. }
            | ApiError::ContextOverflow { .. } => false,
        }
    }
}

/// The longest an error line gets, in characters.
const MAX_LINE_CHARS: usize = 1000;
/// How much of a server's own text an error quotes, in characters.
const MAX_QUOTE_CHARS: usize = 300;

/// Every error is shown as one visible line, however it was built: the
/// server's text inside it may hold newlines and escape sequences.
impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        self.render(&mut text)?;
        f.write_str(&crate::text::one_line(&text, MAX_LINE_CHARS))
    }
}

impl ApiError {
    fn render(&self, f: &mut String) -> fmt::Result {
        use std::fmt::Write;
        match self {
            ApiError::Connect { url, detail } => {
                write!(f, "cannot reach model server at {url}: {detail}")
            }
            ApiError::Tls { url, detail } => {
                write!(f, "cannot talk to model server at {url}: {detail}")
            }
            ApiError::Timeout { url, secs } => {
                write!(f, "model server at {url} did not answer within {secs} s")
            }
            ApiError::Status { status, message } if is_loading_model(*status, message) => write!(
                f,
                "the model server is still loading its model (HTTP {status} {}: {message}); try again in a moment",
                reason_phrase(*status)
            ),
            ApiError::Status { status, message } => {
                let reason = reason_phrase(*status);
                if message.is_empty() {
                    write!(f, "model server returned HTTP {status} {reason}")
                } else {
                    write!(f, "model server returned HTTP {status} {reason}: {message}")
                }
            }
            ApiError::ImageRejected { status, message } => {
                let reason = reason_phrase(*status);
                let cause = if *status == 413 {
                    "the attached image makes the request too large for this server; try a smaller one"
                } else {
                    "this model probably takes no images (or not this one); ask without it, or set images = false in its [models.NAME] profile"
                };
                write!(f, "model server returned HTTP {status} {reason} to a request with an image")?;
                if !message.is_empty() {
                    write!(f, " ({message})")?;
                }
                write!(f, ": {cause}")
            }
            ApiError::InvalidResponse(m) => write!(f, "invalid response from model server: {m}"),
            ApiError::StreamInterrupted(m) => write!(f, "model stream interrupted: {m}"),
            ApiError::Auth(m) => write!(f, "{m}"),
            ApiError::Refused {
                status: Some(status),
                message,
            } => write!(
                f,
                "model server returned HTTP {status} {}: {message}",
                reason_phrase(*status)
            ),
            ApiError::Refused {
                status: None,
                message,
            } => write!(f, "the model server refused the request: {message}"),
            ApiError::ContextOverflow {
                status,
                limit,
                message,
            } => {
                write!(f, "the conversation does not fit in the model's context window")?;
                if let Some(n) = limit {
                    write!(f, " of {n} tokens")?;
                }
                match (status, message.is_empty()) {
                    (Some(s), true) => write!(f, " (HTTP {s})"),
                    (Some(s), false) => write!(f, " (HTTP {s}: {message})"),
                    (None, false) => write!(f, " ({message})"),
                    (None, true) => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// This error as the answer to a request that carried an image: a 4xx
    /// that no retry or login fixes names the image as the likely cause.
    pub fn for_request_with_image(self) -> ApiError {
        match self {
            ApiError::Status { status, message }
                if (400..500).contains(&status)
                    && !matches!(status, 401 | 403 | 408 | 409 | 429) =>
            {
                ApiError::ImageRejected { status, message }
            }
            other => other,
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// Whether a status and the server's message say the model is still being
/// loaded: llama.cpp answers every request with 503 "Loading model" until it
/// is ready. Such a 503 is retried like any other; only the words differ.
pub fn is_loading_model(status: u16, message: &str) -> bool {
    status == 503 && message.to_ascii_lowercase().contains("loading model")
}

/// Pulls the human message out of an error body: OpenAI's `{"error":{"message"}}`,
/// a bare `{"error":"..."}` or `{"message":"..."}`, else the text itself, one line.
/// A router's generic message ("Provider returned error") is followed by the
/// upstream provider's own reason, which OpenRouter puts in `error.metadata.raw`.
pub fn error_message_from_body(body: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => error_message(&v).unwrap_or_else(|| one_line(body)),
        Err(_) => one_line(body),
    }
}

/// The message of an error value (a whole body, or its `error` object).
pub fn error_message(v: &serde_json::Value) -> Option<String> {
    let candidates = [
        v.pointer("/error/message"),
        v.get("error").filter(|e| e.is_string()),
        v.get("message"),
        v.get("detail"),
    ];
    let mut message = candidates
        .into_iter()
        .flatten()
        .find_map(|c| c.as_str())
        .map(one_line)?;
    let meta = v
        .pointer("/error/metadata")
        .or_else(|| v.get("metadata"))
        .filter(|m| m.is_object());
    if let Some(meta) = meta {
        if let Some(raw) = meta.get("raw") {
            // `raw` is the upstream body: JSON text with its own message, or prose.
            let upstream = match raw {
                serde_json::Value::String(text) => serde_json::from_str::<serde_json::Value>(text)
                    .ok()
                    .and_then(|inner| error_message(&inner))
                    .unwrap_or_else(|| one_line(text)),
                other => error_message(other).unwrap_or_else(|| one_line(&other.to_string())),
            };
            let provider = meta.get("provider_name").and_then(|p| p.as_str());
            if !upstream.is_empty() && upstream != message {
                message = match provider {
                    Some(p) => format!("{message} ({p}): {upstream}"),
                    None => format!("{message}: {upstream}"),
                };
            }
        }
    }
    Some(one_line(&message))
}

/// Codes and types servers use for a prompt longer than the context:
/// llama.cpp's `exceed_context_size_error`, OpenAI's `context_length_exceeded`.
const CONTEXT_OVERFLOW: &[&str] = &["exceed_context_size", "context_length_exceeded"];

/// What servers that give no such code say instead, lower-cased: Anthropic
/// ("prompt is too long: 210000 tokens > 200000 maximum"), Ollama, vLLM
/// ("maximum context length is 4096 tokens"), LM Studio, OpenRouter.
const CONTEXT_OVERFLOW_WORDS: &[&str] = &[
    "prompt is too long",
    "maximum context length",
    "context length exceeded",
    "exceeds the available context size",
    "exceeds the context window",
    "exceeds the maximum context",
    "context window exceeded",
    "input is too long",
    "too many tokens in the prompt",
    "requested tokens exceed context",
];

/// Whether an error body or event says the prompt is too long for the context.
pub fn is_context_overflow(v: &serde_json::Value) -> bool {
    let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    let coded = ["code", "type"].iter().any(|k| {
        err.get(*k)
            .and_then(|c| c.as_str())
            .is_some_and(|c| CONTEXT_OVERFLOW.iter().any(|p| c.contains(p)))
    });
    coded
        || err
            .get("message")
            .or_else(|| v.get("message"))
            .and_then(|m| m.as_str())
            .is_some_and(says_overflow)
}

fn says_overflow(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    CONTEXT_OVERFLOW_WORDS.iter().any(|w| text.contains(w))
}

/// The overflow error for a failed request's `status` and `body`, when the
/// body says the prompt did not fit (as JSON or, from some proxies, as
/// plain text); `message` is the one line already made of the body.
pub fn context_overflow(status: Option<u16>, body: &str, message: &str) -> Option<ApiError> {
    let json = serde_json::from_str::<serde_json::Value>(body).ok();
    let overflow = match &json {
        Some(v) => is_context_overflow(v),
        None => says_overflow(body),
    };
    overflow.then(|| ApiError::ContextOverflow {
        status,
        message: message.to_string(),
        limit: json
            .as_ref()
            .and_then(context_size_in)
            .or_else(|| context_size_in_words(message)),
    })
}

/// The window llama.cpp names in its error (`n_ctx`).
fn context_size_in(v: &serde_json::Value) -> Option<u64> {
    let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    err.get("n_ctx").and_then(serde_json::Value::as_u64)
}

/// The window named in words: "maximum context length is 8192 tokens"
/// (OpenAI, vLLM), "> 200000 maximum" (Anthropic), "context size (4096
/// tokens)" (llama.cpp).
fn context_size_in_words(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let number_after = |key: &str| {
        let at = lower.find(key)? + key.len();
        let digits: String = lower[at..]
            .trim_start_matches([' ', '(', ':'])
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse::<u64>().ok().filter(|n| *n > 0)
    };
    number_after("maximum context length is")
        .or_else(|| number_after("available context size"))
        .or_else(|| number_after("context window of"))
        .or_else(|| {
            // "… tokens > 200000 maximum"
            let at = lower.find(" maximum")?;
            let before = lower[..at].trim_end();
            let digits: String = before
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .collect::<String>()
                .chars()
                .rev()
                .collect();
            before[..before.len() - digits.len()]
                .trim_end()
                .ends_with('>')
                .then(|| digits.parse().ok())
                .flatten()
        })
}

/// Codes and types that mean no retry can succeed: no quota or credit left, a
/// bad or revoked key, a blocked account.
const PERMANENT: &[&str] = &[
    "insufficient_quota",
    "billing",
    "credit",
    "payment",
    "invalid_api_key",
    "authentication",
    "permission",
    "account_deactivated",
    "access_terminated",
    "unsupported_country",
];

/// Whether an error body or event names a condition no retry can fix.
pub fn is_permanent(v: &serde_json::Value) -> bool {
    let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    ["code", "type", "status"].iter().any(|k| {
        err.get(*k).and_then(|c| c.as_str()).is_some_and(|c| {
            let c = c.to_ascii_lowercase();
            PERMANENT.iter().any(|p| c.contains(p))
        })
    })
}

/// The error for an error a server sent inside a stream: refused at once when
/// it names a permanent condition, else an interrupted stream (which may be
/// retried if nothing was shown yet).
pub fn stream_error(v: &serde_json::Value, described: String) -> ApiError {
    if is_context_overflow(v) {
        ApiError::ContextOverflow {
            status: None,
            limit: context_size_in(v).or_else(|| context_size_in_words(&described)),
            message: described,
        }
    } else if is_permanent(v) {
        ApiError::Refused {
            status: None,
            message: described,
        }
    } else {
        ApiError::StreamInterrupted(format!("server reported an error: {described}"))
    }
}

fn one_line(s: &str) -> String {
    // A server may echo the key back (a 401 quoting the header); it goes
    // before the cut, so half a key cannot survive it.
    let s = crate::redact::text(s);
    crate::text::one_line(&s, MAX_QUOTE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_loading_its_model_says_so_and_is_retried() {
        let body = r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#;
        let err = ApiError::Status {
            status: 503,
            message: error_message_from_body(body),
        };
        assert!(err.is_retryable());
        assert_eq!(
            err.to_string(),
            "the model server is still loading its model (HTTP 503 Service Unavailable: Loading model); try again in a moment"
        );
        // Another 503 keeps its plain words.
        let busy = ApiError::Status {
            status: 503,
            message: "overloaded".into(),
        };
        assert_eq!(
            busy.to_string(),
            "model server returned HTTP 503 Service Unavailable: overloaded"
        );
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 599] {
            assert!(
                ApiError::Status {
                    status: s,
                    message: String::new()
                }
                .is_retryable(),
                "{s}"
            );
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(
                !ApiError::Status {
                    status: s,
                    message: String::new()
                }
                .is_retryable(),
                "{s}"
            );
        }
    }

    #[test]
    fn error_bodies_become_one_line() {
        assert_eq!(
            error_message_from_body(r#"{"error":{"message":"Rate limit\nreached","type":"x"}}"#),
            "Rate limit reached"
        );
        assert_eq!(error_message_from_body(r#"{"error":"nope"}"#), "nope");
        assert_eq!(error_message_from_body("plain\ntext"), "plain text");
    }

    #[test]
    fn every_error_displays_as_one_visible_line() {
        let page = "<html>\n<body>\x1b]0;pwned\x07\n\x1b[2J".repeat(50);
        for e in [
            ApiError::InvalidResponse(page.clone()),
            ApiError::StreamInterrupted(page.clone()),
            ApiError::Status {
                status: 502,
                message: error_message_from_body(&page),
            },
        ] {
            let shown = e.to_string();
            assert!(!shown.contains('\n'), "{shown}");
            assert!(!shown.contains('\x1b'), "{shown}");
            assert!(!shown.contains('\x07'), "{shown}");
            assert!(shown.chars().count() <= MAX_LINE_CHARS + 1, "{shown}");
        }
    }

    #[test]
    fn status_display_names_status_and_message() {
        let e = ApiError::Status {
            status: 500,
            message: "boom".into(),
        };
        assert_eq!(
            e.to_string(),
            "model server returned HTTP 500 Internal Server Error: boom"
        );
    }

    #[test]
    fn router_errors_show_the_upstream_reason() {
        let body = r#"{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"message\":\"Rate limit exceeded: free-models-per-day\"}}","provider_name":"Chutes"}}}"#;
        assert_eq!(
            error_message_from_body(body),
            "Provider returned error (Chutes): Rate limit exceeded: free-models-per-day"
        );
        let plain = r#"{"error":{"message":"Provider returned error","metadata":{"raw":"upstream timed out"}}}"#;
        assert_eq!(
            error_message_from_body(plain),
            "Provider returned error: upstream timed out"
        );
    }

    #[test]
    fn context_overflow_is_recognised_with_the_window_it_names() {
        // llama.cpp's llama-server, verbatim.
        let body = r#"{"error":{"code":400,"message":"request (6033 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":6033,"n_ctx":4096}}"#;
        let e = context_overflow(Some(400), body, &error_message_from_body(body)).unwrap();
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "the conversation does not fit in the model's context window of 4096 tokens (HTTP 400: request (6033 tokens) exceeds the available context size (4096 tokens), try increasing it)"
        );
        let cases = [
            (
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                Some(8192),
            ),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                Some(200_000),
            ),
            (
                r#"{"object":"error","message":"This model's maximum context length is 4,096 tokens. However, you requested 5000 tokens","type":"BadRequestError","code":400}"#,
                Some(4096),
            ),
            ("prompt is too long for this model", None),
        ];
        for (body, limit) in cases {
            let message = error_message_from_body(body);
            match context_overflow(Some(400), body, &message) {
                Some(ApiError::ContextOverflow { limit: l, .. }) => assert_eq!(l, limit, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
        let other = r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#;
        assert_eq!(context_overflow(Some(400), other, "bad"), None);
        let streamed: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(matches!(
            stream_error(&streamed, "x".into()),
            ApiError::ContextOverflow {
                limit: Some(4096),
                ..
            }
        ));
    }

    #[test]
    fn quota_and_billing_errors_are_permanent() {
        let quota: serde_json::Value = serde_json::json!({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}});
        assert!(is_permanent(&quota));
        let busy: serde_json::Value = serde_json::json!({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}});
        assert!(!is_permanent(&busy));
        let e = stream_error(&quota, "You exceeded your current quota".into());
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "the model server refused the request: You exceeded your current quota"
        );
        assert!(stream_error(&busy, "x".into())
            .to_string()
            .contains("server reported"));
    }
}
