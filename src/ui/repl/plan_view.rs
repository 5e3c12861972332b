//! The plan in the REPL: the list (`todo_write`) kept in the status area
//! above the input and redrawn when it changes, plan mode's notice, and a
//! finished plan (`exit_plan_mode`) printed as rendered Markdown before the
//! approval question that asks to start the work.

use super::Repl;
use crate::agent::protocol::{Event as AgentEvent, EventKind};
use crate::ui::markdown::MarkdownRenderer;

impl Repl<'_> {
    pub(super) fn on_plan_event(&mut self, ev: AgentEvent) {
        let st = self.opts.style;
        match ev.kind {
            EventKind::Plan { entries } => {
                self.plan = entries;
                self.update_status();
                self.redraw();
            }
            EventKind::PlanMode { on } => {
                if on != self.plan_mode {
                    self.flush_partial();
                    self.say(&st.dim(if on {
                        "plan mode on: only reading tools and read-only commands run (/plan to leave)"
                    } else {
                        "plan mode off"
                    }));
                }
                self.plan_mode = on;
                self.update_status();
                self.redraw();
            }
            EventKind::PlanReady { plan, .. } => {
                self.flush_partial();
                let mut md = MarkdownRenderer::new(self.editor.width(), st.color);
                let mut shown = md.push(&plan);
                shown.push_str(&md.finish());
                self.say(&st.accent("the plan:"));
                self.say(shown.trim_end_matches('\n'));
            }
            _ => {}
        }
    }

    /// The status area's plan lines: plan mode's mark, then the list.
    pub(super) fn plan_lines(&self) -> Vec<String> {
        let st = self.opts.style;
        let mut lines = Vec::new();
        if self.plan_mode {
            lines.push(
                st.warning("[plan mode]") + &st.dim(" read-only tools only · /plan to leave"),
            );
        }
        lines.extend(crate::ui::plan::lines(&self.plan, st, self.editor.width()));
        lines
    }
}
