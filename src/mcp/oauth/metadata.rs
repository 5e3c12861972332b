//! What an MCP server and its authorization server say about themselves:
//! the `WWW-Authenticate: Bearer` challenge, protected-resource metadata
//! (RFC 9728) and authorization-server metadata (RFC 8414, or OpenID
//! discovery), the URLs each is looked for at, and the checks that tie them
//! together (the resource is the server we asked about, the issuer is the
//! one named). Parsing and checking only: the fetching is the flow's.

use super::OAuthError;
use reqwest::Url;
use serde::Deserialize;

/// A `WWW-Authenticate: Bearer …` challenge's parameters that matter here.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

/// The Bearer challenge in a `WWW-Authenticate` value, if there is one.
/// Parameters are `key=token` or `key="quoted"`; other schemes are skipped.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let start = header
        .char_indices()
        .find(|&(i, _)| {
            header[i..].len() >= 6
                && header[i..i + 6].eq_ignore_ascii_case("bearer")
                && (i == 0 || header[..i].ends_with([' ', ',']))
        })
        .map(|(i, _)| i + 6)?;
    let mut out = Challenge::default();
    let mut rest = header[start..].trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().trim_start_matches(',').trim();
        // A word without `=` before the next one starts another scheme.
        if key.contains(' ') {
            break;
        }
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        rest = rest.trim_start().trim_start_matches(',').trim_start();
        match key.to_ascii_lowercase().as_str() {
            "resource_metadata" => out.resource_metadata = Some(value),
            "scope" => out.scope = Some(value),
            "error" => out.error = Some(value),
            _ => {}
        }
    }
    Some(out)
}

/// `/.well-known/NAME` inserted between the origin and the path of `url`
/// (RFC 8414 §3.1, RFC 9728 §3.1); the path's trailing `/` dropped.
fn well_known(url: &Url, name: &str, with_path: bool) -> String {
    let path = url.path().trim_end_matches('/');
    let origin = url.origin().ascii_serialization();
    if with_path && !path.is_empty() {
        format!("{origin}/.well-known/{name}{path}")
    } else {
        format!("{origin}/.well-known/{name}")
    }
}

/// Where the server's protected-resource metadata may be: the challenge's
/// `resource_metadata` first, then the path-aware and root well-known URLs.
pub fn resource_metadata_urls(server: &Url, hint: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = hint.map(str::to_string).into_iter().collect();
    for with_path in [true, false] {
        let u = well_known(server, "oauth-protected-resource", with_path);
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// Where an issuer's metadata may be, in the order the MCP specification
/// gives: OAuth then OpenID, path-inserted, then OpenID path-appended.
pub fn auth_server_metadata_urls(issuer: &Url) -> Vec<String> {
    let mut out = vec![
        well_known(issuer, "oauth-authorization-server", true),
        well_known(issuer, "openid-configuration", true),
    ];
    let path = issuer.path().trim_end_matches('/');
    if !path.is_empty() {
        let origin = issuer.origin().ascii_serialization();
        out.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    out
}

/// RFC 9728 protected-resource metadata.
#[derive(Debug, Clone, Deserialize)]
pub struct ProtectedResource {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 authorization-server metadata (the parts a client uses).
#[derive(Debug, Clone, Deserialize)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// Absent means `client_secret_basic` (RFC 8414 §2).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// It takes an https URL as `client_id` and reads the client's
    /// metadata there (Client ID Metadata Documents).
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// Its redirects carry `iss` (RFC 9207), so one without it is refused.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
}

impl AuthServer {
    /// Whether it lists `scope` among its scopes.
    pub fn supports_scope(&self, scope: &str) -> bool {
        self.scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x == scope))
    }

    /// How a client with (or without) a secret authenticates at the token
    /// endpoint, of the methods this server takes: `client_secret_basic`
    /// first, as RFC 6749 asks servers to support it.
    pub fn auth_method(&self, has_secret: bool) -> &'static str {
        if !has_secret {
            return "none";
        }
        let offered = |m: &str| {
            self.token_endpoint_auth_methods_supported
                .as_ref()
                .is_none_or(|list| list.iter().any(|x| x == m))
        };
        if offered("client_secret_basic") {
            "client_secret_basic"
        } else if offered("client_secret_post") {
            "client_secret_post"
        } else {
            "client_secret_basic"
        }
    }
}

/// The metadata, if it names the server we asked about: same origin, and
/// the server's URL within the resource (RFC 9728 §3.3 is stricter; servers
/// commonly name their origin rather than the endpoint).
pub fn protected_resource(body: &[u8], server: &Url) -> Result<ProtectedResource, OAuthError> {
    let meta: ProtectedResource = serde_json::from_slice(body)
        .map_err(|e| OAuthError::Metadata(format!("protected-resource metadata: {e}")))?;
    let resource = Url::parse(&meta.resource)
        .map_err(|_| OAuthError::Metadata("protected-resource metadata: bad `resource`".into()))?;
    let within = server
        .as_str()
        .trim_end_matches('/')
        .starts_with(resource.as_str().trim_end_matches('/'));
    if resource.origin() != server.origin() || !within {
        return Err(OAuthError::Metadata(format!(
            "the protected-resource metadata is for {}, not {}",
            crate::text::one_line(&meta.resource, 100),
            server
        )));
    }
    if meta.authorization_servers.is_empty() {
        return Err(OAuthError::Metadata(
            "the protected-resource metadata names no authorization server".into(),
        ));
    }
    Ok(meta)
}

/// The metadata, if its issuer is the one named, character for character
/// (RFC 8414 §3.3: a document for another issuer must not be used), its
/// endpoints are http(s), and it does PKCE with S256 (which the MCP
/// specification requires a client to insist on).
pub fn auth_server(body: &[u8], issuer: &str) -> Result<AuthServer, OAuthError> {
    let meta: AuthServer = serde_json::from_slice(body)
        .map_err(|e| OAuthError::Metadata(format!("authorization-server metadata: {e}")))?;
    if meta.issuer != issuer {
        return Err(OAuthError::Metadata(format!(
            "the authorization server says it is {}, not {}",
            crate::text::one_line(&meta.issuer, 100),
            crate::text::one_line(issuer, 100)
        )));
    }
    for url in [&meta.authorization_endpoint, &meta.token_endpoint]
        .into_iter()
        .chain(meta.registration_endpoint.as_ref())
    {
        let ok = Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "https" | "http"));
        if !ok {
            return Err(OAuthError::Metadata(format!(
                "authorization-server metadata: `{}` is not an http(s) URL",
                crate::text::one_line(url, 100)
            )));
        }
    }
    let s256 = meta
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if !s256 {
        return Err(OAuthError::Metadata(
            "the authorization server does not offer PKCE with S256".into(),
        ));
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenge_gives_metadata_url_scope_and_error() {
        let c = parse_challenge(
            r#"Basic realm="x", Bearer error="insufficient_scope", scope="read write", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("read write"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        let bare = parse_challenge("Bearer resource_metadata=https://a/x").unwrap();
        assert_eq!(bare.resource_metadata.as_deref(), Some("https://a/x"));
        assert_eq!(parse_challenge("Basic realm=\"x\""), None);
    }

    #[test]
    fn well_known_urls_put_the_path_after_the_name() {
        let server = Url::parse("https://h.example:8443/api/mcp").unwrap();
        assert_eq!(
            resource_metadata_urls(&server, None),
            [
                "https://h.example:8443/.well-known/oauth-protected-resource/api/mcp",
                "https://h.example:8443/.well-known/oauth-protected-resource",
            ]
        );
        let issuer = Url::parse("https://auth.example/tenant1").unwrap();
        assert_eq!(
            auth_server_metadata_urls(&issuer),
            [
                "https://auth.example/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example/.well-known/openid-configuration/tenant1",
                "https://auth.example/tenant1/.well-known/openid-configuration",
            ]
        );
        let root = Url::parse("https://auth.example").unwrap();
        assert_eq!(auth_server_metadata_urls(&root).len(), 2);
    }

    fn as_json(issuer: &str, methods: &str) -> Vec<u8> {
        format!(
            r#"{{"issuer":"{issuer}","authorization_endpoint":"https://auth.example/authorize",
            "token_endpoint":"https://auth.example/token","code_challenge_methods_supported":{methods}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn issuer_mismatch_is_refused() {
        let ok = auth_server(
            &as_json("https://auth.example", r#"["S256"]"#),
            "https://auth.example",
        );
        assert_eq!(ok.unwrap().token_endpoint, "https://auth.example/token");
        // Not even a trailing slash is forgiven.
        let slash = auth_server(
            &as_json("https://auth.example/", r#"["S256"]"#),
            "https://auth.example",
        );
        assert!(slash.is_err());
        let err = auth_server(
            &as_json("https://evil.example", r#"["S256"]"#),
            "https://auth.example",
        )
        .unwrap_err();
        assert!(err.to_string().contains("evil.example"), "{err}");
    }

    #[test]
    fn metadata_without_s256_is_refused() {
        assert!(auth_server(&as_json("https://a", r#"["plain"]"#), "https://a").is_err());
        assert!(auth_server(&as_json("https://a", "null"), "https://a").is_err());
    }

    #[test]
    fn resource_metadata_must_name_this_server() {
        let server = Url::parse("https://h.example/mcp").unwrap();
        let body = br#"{"resource":"https://h.example/mcp","authorization_servers":["https://auth.example"]}"#;
        let meta = protected_resource(body, &server).unwrap();
        assert_eq!(meta.authorization_servers, ["https://auth.example"]);
        let other =
            br#"{"resource":"https://other.example/mcp","authorization_servers":["https://a"]}"#;
        assert!(protected_resource(other, &server).is_err());
        let none = br#"{"resource":"https://h.example/mcp"}"#;
        assert!(protected_resource(none, &server).is_err());
    }
}
