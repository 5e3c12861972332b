//! `!command` at the REPL prompt, as the user sees it: the agent runs it
//! (`Op::RunCommand`, `agent::command`); this shows what came back.

use crate::agent::protocol::CommandRun;

/// Lines of output shown on the screen (the last ones; the model gets all kept).
pub const SHOWN_LINES: usize = 40;

/// What the screen shows: the last `SHOWN_LINES` lines, sanitised.
pub fn screen_text(ran: &CommandRun) -> String {
    let lines: Vec<&str> = ran.output.lines().collect();
    let skip = lines.len().saturating_sub(SHOWN_LINES);
    let mut out = String::new();
    if skip > 0 {
        out.push_str(&format!("… {skip} earlier lines not shown\n"));
    }
    out.push_str(&lines[skip..].join("\n"));
    crate::text::visible(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_screen_shows_the_last_lines_with_control_characters_visible() {
        let ran = CommandRun {
            command: "x".into(),
            code: Some(0),
            output: (0..50).map(|i| format!("line {i}\n")).collect::<String>() + "\u{1b}[2J",
            dropped: 0,
            timed_out: false,
            error: None,
            stopped: false,
        };
        let s = screen_text(&ran);
        assert!(
            s.starts_with("… 11 earlier lines not shown\nline 11\n"),
            "{s}"
        );
        assert!(!s.contains('\u{1b}'), "{s}");
    }
}
