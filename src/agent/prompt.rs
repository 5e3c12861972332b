//! Renders the system prompt from the one compiled-in template. The only place
//! the prompt is assembled, so every front end sends the same instructions.

const TEMPLATE: &str = include_str!("../templates/system_prompt.txt");

pub struct PromptContext<'a> {
    /// Where commands run, e.g. "the local host (user@box)".
    pub target: &'a str,
    pub cwd: &'a str,
    pub tools: &'a [&'a str],
    /// Operator instructions from config, appended verbatim.
    pub instructions: Option<&'a str>,
}

pub fn render(ctx: &PromptContext<'_>) -> String {
    let tools = if ctx.tools.is_empty() {
        "none (answer from your own knowledge)".to_string()
    } else {
        ctx.tools.join(", ")
    };
    let instructions = match ctx.instructions.map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => format!("\nOperator instructions:\n{text}\n"),
        None => String::new(),
    };
    TEMPLATE
        .replace("{{target}}", ctx.target)
        .replace("{{cwd}}", ctx.cwd)
        .replace("{{tools}}", &tools)
        .replace("{{instructions}}", &instructions)
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_all_filled() {
        let p = render(&PromptContext {
            target: "the local host",
            cwd: "/srv",
            tools: &["run_shell", "time"],
            instructions: Some("Be terse."),
        });
        assert!(!p.contains("{{"), "{p}");
        assert!(p.contains("run_shell, time"));
        assert!(p.contains("Operator instructions:\nBe terse."));
        assert!(p.contains("/srv"));
    }
}
