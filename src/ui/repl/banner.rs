//! The lines the REPL shows above its first prompt: the model and server,
//! where tools run, the project instructions read and notes on custom
//! commands. The facts come from the caller; this file only lays them out.

use crate::ui::style::Style;

pub struct Banner<'a> {
    pub model: &'a str,
    pub base_url: &'a str,
    /// Who tools run as when not on this machine (`user@host`, a container).
    pub remote: Option<String>,
    /// How the tmux pane was attached, when one was.
    pub attach: Option<&'a str>,
    /// The project instruction files read (AGENTS.md…), as the user names them.
    pub instructions: Vec<String>,
    /// Notes from finding custom commands and skills.
    pub notes: &'a [String],
}

impl Banner<'_> {
    pub fn render(&self, style: Style) -> String {
        let mut banner = format!(
            "{} {} via {} — /help for commands, Ctrl-D to quit",
            style.actor("buddy"),
            self.model,
            self.base_url
        );
        if let Some(actor) = &self.remote {
            banner.push_str(&format!(
                "\n{}",
                style.dim(&format!("tools run on {actor}"))
            ));
        }
        if let Some(a) = self.attach {
            banner.push_str(&format!("\n{}", style.dim(a)));
        }
        if !self.instructions.is_empty() {
            banner.push_str(&format!(
                "\n{}",
                style.dim(&format!(
                    "project instructions from {}",
                    crate::text::visible(&self.instructions.join(", "))
                ))
            ));
        }
        for note in self.notes {
            banner.push_str(&format!("\n{}", style.dim(&format!("note: {note}"))));
        }
        banner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_names_the_model_and_only_the_facts_that_apply() {
        let style = Style { color: false };
        let bare = Banner {
            model: "m1",
            base_url: "http://127.0.0.1:1/v1",
            remote: None,
            attach: None,
            instructions: Vec::new(),
            notes: &[],
        }
        .render(style);
        assert_eq!(
            bare,
            "buddy m1 via http://127.0.0.1:1/v1 — /help for commands, Ctrl-D to quit"
        );
        let notes = vec!["skills/x: no description".to_string()];
        let full = Banner {
            model: "m1",
            base_url: "u",
            remote: Some("me@box".into()),
            attach: Some("attached to pane %3"),
            instructions: vec!["AGENTS.md".into(), "sub/AGENTS.md".into()],
            notes: &notes,
        }
        .render(style);
        let lines: Vec<&str> = full.lines().collect();
        assert_eq!(
            &lines[1..],
            [
                "tools run on me@box",
                "attached to pane %3",
                "project instructions from AGENTS.md, sub/AGENTS.md",
                "note: skills/x: no description",
            ]
        );
    }
}
