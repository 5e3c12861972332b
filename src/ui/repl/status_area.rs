//! The status area above the input line: the task's state, spinner and
//! elapsed time, what waits in the agent's queues, the running tool calls'
//! latest output, a hint naming the keys that work now, and above them the
//! plan and plan mode (`plan_view`).

use super::approval::short_duration;
use super::Repl;
use crate::ui::style::{preview, SPINNER};

impl Repl<'_> {
    pub(super) fn on_tick(&mut self) {
        if self.task.is_some() {
            self.spin = (self.spin + 1) % SPINNER.len();
            self.update_status();
            self.redraw();
        }
    }

    /// The status area: the task's state, then what waits in the queues.
    pub(super) fn update_status(&mut self) {
        let st = self.opts.style;
        let mut lines = Vec::new();
        if let Some(t) = &self.task {
            lines.push(st.dim(&format!(
                "[task {}] {} · {} {}",
                t.id,
                t.state,
                SPINNER[self.spin],
                short_duration(t.started.elapsed())
            )));
        }
        for text in &self.queued.0 {
            lines.push(st.dim(&format!("  ↳ steering: {}", preview(text, 60))));
        }
        for text in &self.queued.1 {
            lines.push(st.dim(&format!("  ↳ queued: {}", preview(text, 60))));
        }
        let hint = if !self.queued.0.is_empty() || !self.queued.1.is_empty() {
            lines.push(st.dim("    (Alt-Up takes them back)"));
            None
        } else if let Some(hint) = self.form_hint() {
            Some(hint)
        } else if self.approval.as_ref().is_some_and(|p| p.explaining) {
            Some(" · Enter sends the reason, Esc goes back")
        } else if let Some(p) = &self.approval {
            // Name only the keys the question offers.
            Some(if p.always.is_some() {
                " · y, n, a, r or e answers, Esc interrupts"
            } else {
                " · y, n or e answers, Esc interrupts"
            })
        } else {
            Some(" · Enter steers, Tab queues a follow-up, Esc interrupts")
        };
        if let (Some(first), Some(hint), true) = (lines.first_mut(), hint, self.task.is_some()) {
            first.push_str(&st.dim(hint));
        }
        let lines = [self.plan_lines(), self.tool_output_lines(), lines].concat();
        self.editor
            .set_status((!lines.is_empty()).then(|| lines.join("\n")));
    }

    /// The running calls' latest output, dim, each line fitted to the width.
    fn tool_output_lines(&self) -> Vec<String> {
        let width = self.editor.width();
        self.tool_output
            .iter()
            .flat_map(|(_, tail)| crate::ui::toolview::live_lines(tail, "  │ ", width))
            .map(|l| self.opts.style.dim(&l))
            .collect()
    }

    pub(super) fn set_state(&mut self, state: &str) {
        if let Some(t) = &mut self.task {
            if t.state != state {
                t.state = state.to_string();
            }
        }
        self.update_status();
    }
}
