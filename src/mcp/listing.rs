//! Listing a server's tools, resources or prompts, page by page, within
//! bounds: at most `MAX_PAGES` pages, the items kept capped as they arrive
//! (a list past its cap is not asked for further), and a deadline for the
//! whole listing (what was kept by then stands). An entry that is not what
//! its list holds is dropped and named, not the whole list with it. Owns
//! nothing else: which items are offered, and how, is `mod.rs`'s.

use rmcp::model::{ClientRequest, PaginatedRequestParams, RequestOptionalParam, ServerResult};
use rmcp::{Peer, RoleClient};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

/// Pages asked for in one listing at most: a server that pages on without
/// end is stopped here (and by the deadline) instead of filling memory.
pub const MAX_PAGES: usize = 100;
/// The longest freshness a server's `ttlMs` is taken for: a day.
const MAX_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Notes one listing keeps at most (the rest are counted).
const MAX_NOTES: usize = 10;

/// One of the three lists.
/// A page's items, the cursor of the next, and how long the server says
/// the list stays fresh (`ttlMs`, 2026-07-28).
pub type Page<T> = (Vec<T>, Option<String>, Option<u64>);

pub trait Listed: DeserializeOwned + Sized {
    /// The result's key holding the items, and what an item is called.
    const KEY: &'static str;
    const WHAT: &'static str;
    fn request(params: PaginatedRequestParams) -> ClientRequest;
    /// The page's items, next cursor and `ttlMs`, when the result is of
    /// this kind.
    fn page(result: ServerResult) -> Result<Page<Self>, Box<ServerResult>>;
}

impl Listed for rmcp::model::Tool {
    const KEY: &'static str = "tools";
    const WHAT: &'static str = "tool";
    fn request(params: PaginatedRequestParams) -> ClientRequest {
        ClientRequest::ListToolsRequest(RequestOptionalParam::with_param(params))
    }
    fn page(result: ServerResult) -> Result<Page<Self>, Box<ServerResult>> {
        match result {
            ServerResult::ListToolsResult(r) => Ok((r.tools, r.next_cursor, r.ttl_ms)),
            other => Err(Box::new(other)),
        }
    }
}

impl Listed for rmcp::model::Resource {
    const KEY: &'static str = "resources";
    const WHAT: &'static str = "resource";
    fn request(params: PaginatedRequestParams) -> ClientRequest {
        ClientRequest::ListResourcesRequest(RequestOptionalParam::with_param(params))
    }
    fn page(result: ServerResult) -> Result<Page<Self>, Box<ServerResult>> {
        match result {
            ServerResult::ListResourcesResult(r) => Ok((r.resources, r.next_cursor, r.ttl_ms)),
            other => Err(Box::new(other)),
        }
    }
}

impl Listed for rmcp::model::Prompt {
    const KEY: &'static str = "prompts";
    const WHAT: &'static str = "prompt";
    fn request(params: PaginatedRequestParams) -> ClientRequest {
        ClientRequest::ListPromptsRequest(RequestOptionalParam::with_param(params))
    }
    fn page(result: ServerResult) -> Result<Page<Self>, Box<ServerResult>> {
        match result {
            ServerResult::ListPromptsResult(r) => Ok((r.prompts, r.next_cursor, r.ttl_ms)),
            other => Err(Box::new(other)),
        }
    }
}

/// What a listing gave: the items kept, and what the user should know about
/// it (entries dropped, the list cut), one line each.
pub struct Listing<T> {
    pub items: Vec<T>,
    pub notes: Vec<String>,
    /// How long the list stays fresh, when the server said (its first
    /// page's `ttlMs`); none for an older server or one that did not say.
    pub ttl: Option<std::time::Duration>,
}

impl<T> Listing<T> {
    fn note(&mut self, dropped: &mut usize, line: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(line);
        } else {
            *dropped += 1;
        }
    }
}

/// A page's items from a result rmcp could not type as a whole: each entry
/// read on its own, the ones that are not a `T` named in `bad`.
fn entries<T: Listed>(result: &ServerResult, bad: &mut Vec<String>) -> Page<T> {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let ttl = value.get("ttlMs").and_then(Value::as_u64);
    let cursor = value
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(list) = value.get(T::KEY).and_then(Value::as_array) else {
        bad.push(format!("its answer has no `{}` list", T::KEY));
        return (Vec::new(), None, ttl);
    };
    let mut items = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        match serde_json::from_value::<T>(entry.clone()) {
            Ok(t) => items.push(t),
            Err(e) => {
                let name = match entry.get("name").and_then(Value::as_str) {
                    Some(n) => format!("`{}`", crate::text::one_line(n, 60)),
                    None => format!("number {}", i + 1),
                };
                bad.push(format!(
                    "its {} {name} was dropped: {}",
                    T::WHAT,
                    crate::text::one_line(&e.to_string(), 120)
                ));
            }
        }
    }
    (items, cursor, ttl)
}

/// Lists every page until there is none left, `MAX_PAGES` have been asked
/// for, `max` items are kept (`keep` says which count), or `deadline`
/// passes. An error on the first page is the listing's error; a later one
/// ends it with what was kept.
pub async fn list<T: Listed>(
    peer: &Peer<RoleClient>,
    keep: impl Fn(&T) -> bool,
    max: usize,
    deadline: Instant,
) -> Result<Listing<T>, String> {
    let mut out = Listing {
        items: Vec::new(),
        notes: Vec::new(),
        ttl: None,
    };
    let mut unsaid = 0usize;
    let mut cursor: Option<String> = None;
    for page in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let answer = tokio::time::timeout_at(deadline, peer.send_request(T::request(params))).await;
        let result = match answer {
            Ok(Ok(r)) => r,
            Ok(Err(e)) if page == 0 => return Err(e.to_string()),
            Err(_) if page == 0 => return Err("no answer in time".into()),
            Ok(Err(e)) => {
                let line = format!(
                    "listing its {}s stopped at page {}: {}",
                    T::WHAT,
                    page + 1,
                    crate::text::one_line(&e.to_string(), 120)
                );
                out.note(&mut unsaid, line);
                break;
            }
            Err(_) => {
                let line = format!(
                    "listing its {}s took too long; {} kept",
                    T::WHAT,
                    out.items.len()
                );
                out.note(&mut unsaid, line);
                break;
            }
        };
        let (items, next, ttl) = match T::page(result) {
            Ok(page) => page,
            Err(other) => {
                let mut bad = Vec::new();
                let page = entries::<T>(&other, &mut bad);
                for line in bad {
                    out.note(&mut unsaid, line);
                }
                page
            }
        };
        if page == 0 {
            // Capped as the SDK's own cache caps it: a day.
            out.ttl = ttl
                .filter(|ms| *ms > 0)
                .map(|ms| std::time::Duration::from_millis(ms.min(MAX_TTL_MS)));
        }
        for item in items.into_iter().filter(|t| keep(t)) {
            if out.items.len() == max {
                let line = format!(
                    "it lists more than {max} {}s; the rest are left out",
                    T::WHAT
                );
                out.note(&mut unsaid, line);
                return Ok(finish(out, unsaid));
            }
            out.items.push(item);
        }
        match next {
            Some(_) if page + 1 == MAX_PAGES => {
                let line = format!(
                    "it lists its {}s in more than {MAX_PAGES} pages; the rest are left out",
                    T::WHAT
                );
                out.note(&mut unsaid, line);
            }
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Ok(finish(out, unsaid))
}

fn finish<T>(mut out: Listing<T>, unsaid: usize) -> Listing<T> {
    if unsaid > 0 {
        out.notes.push(format!("and {unsaid} more such notes"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_with_a_bad_entry_keeps_the_good_ones_and_names_the_bad() {
        let page = json!({"tools": [
            {"name": "good", "inputSchema": {"type": "object"}},
            {"name": "broken", "inputSchema": "not an object"},
            {"description": "no name", "inputSchema": {}}
        ], "nextCursor": "2"});
        let result: ServerResult = serde_json::from_value(page).unwrap();
        let result = match <rmcp::model::Tool as Listed>::page(result) {
            Ok(_) => panic!("typed as a whole despite its bad entries"),
            Err(other) => other,
        };
        let mut bad = Vec::new();
        let (items, cursor, _) = entries::<rmcp::model::Tool>(&result, &mut bad);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].name, "good");
        assert_eq!(cursor.as_deref(), Some("2"));
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(
            bad[0].starts_with("its tool `broken` was dropped: "),
            "{bad:?}"
        );
        assert!(
            bad[1].starts_with("its tool number 3 was dropped: "),
            "{bad:?}"
        );
    }
}
