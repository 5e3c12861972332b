//! `/mcp`'s listing: each MCP server's state and transport, its tools,
//! prompts and resources, and its last error, worded for the terminal from
//! the servers' own report (`mcp::ServerReport`).

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
