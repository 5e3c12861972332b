//! Renders the system prompt from the one compiled-in template. The only place
//! the prompt is assembled, so every front end sends the same instructions.

const TEMPLATE: &str = include_str!("../templates/system_prompt.txt");

pub struct PromptContext<'a> {
    /// Where commands run, e.g. "the local host (user@box)".
    pub target: &'a str,
    pub cwd: &'a str,
    pub tools: &'a [&'a str],
    /// Commands and files are on another machine or in a container.
    pub remote: bool,
    /// Shell commands go to a shared tmux pane.
    pub tmux: bool,
    /// Operator instructions from config, appended verbatim.
    pub instructions: Option<&'a str>,
    /// The project's own instructions (its AGENTS.md files), appended verbatim.
    pub project: Option<&'a str>,
    /// The skills the `skill` tool serves, one line each (bounded by the caller).
    pub skills: Option<&'a str>,
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
    let instructions = match ctx.project.map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => {
            format!("{instructions}\nProject instructions (AGENTS.md; follow them):\n{text}\n")
        }
        None => instructions,
    };
    let instructions = match ctx.skills.map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => format!("{instructions}\n{text}\n"),
        None => instructions,
    };
    let mut execution = String::new();
    if ctx.tmux {
        execution.push_str("- Shell commands run in a shared tmux pane the user may be watching. Start long-running\n  commands with `wait: false` (or a duration) and follow them with capture-pane; drive\n  interactive programs with send-keys. Each command runs in a fresh subshell\n  that starts in the working directory.\n");
    } else {
        execution.push_str(
            "- Shell commands run non-interactively with `sh -c`; they must not wait for input.\n",
        );
    }
    if ctx.remote {
        execution.push_str("- The target is remote: commands and paths refer to that machine, not the user's. Relative\n  paths start in the login directory there; the local working directory is not available.\n");
    } else {
        execution.push_str(&format!("- The working directory is {}.\n", ctx.cwd));
    }
    TEMPLATE
        .replace("{{execution}}", execution.trim_end())
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
            remote: false,
            tmux: false,
            instructions: Some("Be terse."),
            project: Some("From /srv/AGENTS.md:\nUse tabs."),
            skills: None,
        });
        assert!(!p.contains("{{"), "{p}");
        assert!(p.contains("run_shell, time"));
        assert!(p.contains("Operator instructions:\nBe terse."));
        assert!(p.contains("/srv"));
        assert!(p.contains(
            "Project instructions (AGENTS.md; follow them):\nFrom /srv/AGENTS.md:\nUse tabs."
        ));
        let remote = render(&PromptContext {
            target: "the remote host db1 over SSH",
            cwd: "/home/me",
            tools: &["run_shell"],
            remote: true,
            tmux: true,
            instructions: None,
            project: None,
            skills: None,
        });
        assert!(remote.contains("db1 over SSH"));
        assert!(remote.contains("The target is remote"));
        assert!(remote.contains("capture-pane"));
        assert!(!remote.contains("{{"));
    }
}
