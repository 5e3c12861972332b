//! Errors of the model client, each a one-line sentence a user can act on.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// Could not reach the server (refused, DNS, TLS, reset before a response).
    Connect { url: String, detail: String },
    /// No complete answer within the configured time.
    Timeout { url: String, secs: u64 },
    /// The server answered with a non-success status.
    Status { status: u16, message: String },
    /// The answer arrived but is not a valid completion.
    InvalidResponse(String),
    /// The stream broke off before the completion was finished.
    StreamInterrupted(String),
    /// No usable login: not logged in, or the refresh failed.
    Auth(String),
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
            ApiError::InvalidResponse(_) | ApiError::StreamInterrupted(_) | ApiError::Auth(_) => {
                false
            }
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Connect { url, detail } => {
                write!(f, "cannot reach model server at {url}: {detail}")
            }
            ApiError::Timeout { url, secs } => {
                write!(f, "model server at {url} did not answer within {secs} s")
            }
            ApiError::Status { status, message } => {
                let reason = reason_phrase(*status);
                if message.is_empty() {
                    write!(f, "model server returned HTTP {status} {reason}")
                } else {
                    write!(f, "model server returned HTTP {status} {reason}: {message}")
                }
            }
            ApiError::InvalidResponse(m) => write!(f, "invalid response from model server: {m}"),
            ApiError::StreamInterrupted(m) => write!(f, "model stream interrupted: {m}"),
            ApiError::Auth(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ApiError {}

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

/// Pulls the human message out of an error body: OpenAI's `{"error":{"message"}}`,
/// a bare `{"error":"..."}` or `{"message":"..."}`, else the text itself, one line.
pub fn error_message_from_body(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let candidates = [
            v.pointer("/error/message"),
            v.get("error").filter(|e| e.is_string()),
            v.get("message"),
            v.get("detail"),
        ];
        for c in candidates.into_iter().flatten() {
            if let Some(s) = c.as_str() {
                return one_line(s);
            }
        }
    }
    one_line(body)
}

fn one_line(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = joined.chars().take(300).collect();
    if joined.chars().count() > 300 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
