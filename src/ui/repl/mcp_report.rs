//! `/mcp`'s listing: each MCP server's state, transport and protocol
//! revision, its tools, prompts and resources, and its last error, worded
//! for the terminal from the servers' own report (`mcp::ServerReport`).

/// `/mcp`'s text: a line per server, its tools and its last error under it.
/// Everything a server named is made safe for the terminal and redacted.
pub fn text(report: &[crate::mcp::ServerReport]) -> String {
    use crate::text::one_line;
    let mut out = Vec::new();
    for r in report {
        out.push(format!(
            "{}  {}  {}",
            one_line(&r.name, 60),
            r.status.as_str(),
            one_line(&r.transport, 120)
        ));
        if let Some(p) = &r.protocol {
            out.push(format!("  protocol: {}", one_line(p, 40)));
        }
        if !r.tools.is_empty() {
            out.push(format!("  tools: {}", one_line(&r.tools.join(", "), 1000)));
        }
        if !r.prompts.is_empty() {
            let named: Vec<String> = r
                .prompts
                .iter()
                .map(|p| format!("/{}:{p}", r.name))
                .collect();
            out.push(format!("  prompts: {}", one_line(&named.join(" "), 1000)));
        }
        if !r.resources.is_empty() {
            let named: Vec<String> = r
                .resources
                .iter()
                .map(|u| format!("@{}:{u}", r.name))
                .collect();
            out.push(format!("  resources: {}", one_line(&named.join(" "), 2000)));
        }
        if let Some(e) = &r.last_error {
            out.push(format!(
                "  last error: {}",
                crate::redact::text(&one_line(e, 400))
            ));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_connected_server_shows_the_revision_it_speaks() {
        let report = crate::mcp::ServerReport {
            name: "docs".into(),
            transport: "http http://127.0.0.1:1/mcp".into(),
            status: crate::mcp::Status::Ready,
            tools: vec!["mcp__docs__find".into()],
            resources: Vec::new(),
            prompts: Vec::new(),
            last_error: None,
            protocol: Some("2026-07-28".into()),
            warnings: Vec::new(),
        };
        let text = super::text(&[report]);
        assert!(text.contains("\n  protocol: 2026-07-28\n"), "{text}");
    }
}
