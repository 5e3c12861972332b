//! The names MCP tools are offered under: `mcp__SERVER__TOOL`, with every
//! character outside `[a-zA-Z0-9_-]` replaced by `_` and at most 64
//! characters (what the model APIs accept). Two tools that would get the same
//! name, or a name cut at 64, end in `_` and six hex digits of a hash of the
//! server's and tool's own names instead, so each name stays unique and the
//! same from run to run. The server's own tool name is what goes on the wire.

use std::collections::HashSet;

/// The longest tool name the model APIs take.
pub const MAX_NAME: usize = 64;
/// What every MCP tool's name starts with.
pub const PREFIX: &str = "mcp__";

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn suffix(server: &str, tool: &str) -> String {
    let mut input = Vec::with_capacity(server.len() + tool.len() + 1);
    input.extend_from_slice(server.as_bytes());
    input.push(0);
    input.extend_from_slice(tool.as_bytes());
    let d = ring::digest::digest(&ring::digest::SHA256, &input);
    d.as_ref()[..3].iter().map(|b| format!("{b:02x}")).collect()
}

/// What the names of `server`'s tools start with, as far as a name cut to
/// fit can be told apart by it.
pub fn server_prefix(server: &str) -> String {
    let mut p = format!("{PREFIX}{}__", clean(server));
    // A cut name keeps this much of its plain name (see `assign`).
    p.truncate(MAX_NAME - 7);
    p
}

/// Names for `tools`, pairs of (server, tool) in a stable order, in that
/// order; `taken` holds names already in use (the built-in tools').
pub fn assign(tools: &[(String, String)], taken: &HashSet<String>) -> Vec<String> {
    let plain: Vec<String> = tools
        .iter()
        .map(|(s, t)| format!("{PREFIX}{}__{}", clean(s), clean(t)))
        .collect();
    let mut count = std::collections::HashMap::<&str, usize>::new();
    for p in &plain {
        *count.entry(p.as_str()).or_default() += 1;
    }
    tools
        .iter()
        .zip(&plain)
        .map(|((server, tool), p)| {
            if p.len() <= MAX_NAME && count[p.as_str()] == 1 && !taken.contains(p) {
                return p.clone();
            }
            // 7 = `_` and six hex digits; the plain name is ASCII.
            let keep = p.len().min(MAX_NAME - 7);
            format!("{}_{}", &p[..keep], suffix(server, tool))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(pairs: &[(&str, &str)]) -> Vec<String> {
        let tools: Vec<(String, String)> = pairs
            .iter()
            .map(|(s, t)| (s.to_string(), t.to_string()))
            .collect();
        assign(&tools, &HashSet::new())
    }

    #[test]
    fn names_are_cleaned_and_prefixed() {
        assert_eq!(
            names(&[("every thing", "echo.v2"), ("fs", "read-file")]),
            ["mcp__every_thing__echo_v2", "mcp__fs__read-file"]
        );
    }

    #[test]
    fn long_and_colliding_names_get_a_stable_hash_and_stay_unique() {
        let long = "t".repeat(100);
        let got = names(&[("a.b", "x"), ("a_b", "x"), ("s", &long)]);
        assert!(got.iter().all(|n| n.len() <= MAX_NAME), "{got:?}");
        assert_ne!(got[0], got[1]);
        assert!(got[0].starts_with("mcp__a_b__x_"));
        assert_eq!(got, names(&[("a.b", "x"), ("a_b", "x"), ("s", &long)]));
        assert!(got.iter().all(|n| n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')));
    }

    #[test]
    fn a_built_in_name_is_never_taken() {
        let taken: HashSet<String> = ["mcp__s__t".to_string()].into();
        let got = assign(&[("s".into(), "t".into())], &taken);
        assert_ne!(got[0], "mcp__s__t");
    }
}
