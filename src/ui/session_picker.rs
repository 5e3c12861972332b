//! The full-screen list `buddy resume` opens when no session is named: one
//! row per saved session (age, size, first prompt), arrows to move, Enter
//! to resume, `/` to filter, Esc to cancel. Drawn on stderr in the alternate
//! screen, so the shell's screen comes back as it was; raw mode and the
//! screen are restored however it ends (a guard's `Drop`, panics included).
//! Also the numbered list for a terminal that cannot draw (`TERM=dumb`).
//!
//! It does not read session files: the caller hands it rows, already
//! summarised, and resumes whatever id comes back.

use crate::text::one_line;
use crate::ui::style::Style;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, queue, style::Print, terminal};
use std::io::{self, BufRead, Write};
use unicode_width::UnicodeWidthStr;

/// One saved session as the picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    /// Unix seconds of the last write.
    pub used: u64,
    pub messages: u64,
    pub bytes: u64,
    /// The first prompt (as saved: already one line, at most 60 characters).
    pub title: String,
    /// Why the file could not be read; such a row cannot be resumed.
    pub error: Option<String>,
}

/// How the picker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Picked {
    Session(String),
    /// Esc, `q` or Ctrl-D: the user changed their mind.
    Cancelled,
    /// Ctrl-C.
    Interrupted,
    /// SIGTERM or SIGHUP arrived (seen by the caller, which then calls
    /// `restore`): exit with this code.
    Signalled(i32),
}

/// The list, the selection and the filter; no terminal in here.
pub struct Picker {
    rows: Vec<Row>,
    now: u64,
    /// Indices of the rows the filter lets through.
    shown: Vec<usize>,
    /// Position in `shown`.
    selected: usize,
    /// The first position in `shown` on screen.
    top: usize,
    filter: String,
    filtering: bool,
    /// One line under the list: why Enter did nothing.
    note: Option<String>,
}

/// What a key asks of the loop.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Redraw,
    Done(Picked),
}

impl Picker {
    pub fn new(rows: Vec<Row>, now: u64) -> Picker {
        let shown = (0..rows.len()).collect();
        Picker {
            rows,
            now,
            shown,
            selected: 0,
            top: 0,
            filter: String::new(),
            filtering: false,
            note: None,
        }
    }

    fn refilter(&mut self) {
        let needle = self.filter.to_lowercase();
        self.shown = (0..self.rows.len())
            .filter(|&i| {
                let r = &self.rows[i];
                needle.is_empty()
                    || r.title.to_lowercase().contains(&needle)
                    || r.id.to_lowercase().contains(&needle)
            })
            .collect();
        self.selected = 0;
        self.top = 0;
    }

    fn key(&mut self, key: KeyEvent, page: usize) -> Step {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        self.note = None;
        let last = self.shown.len().saturating_sub(1);
        match key.code {
            KeyCode::Char('c') if ctrl => return Step::Done(Picked::Interrupted),
            KeyCode::Char('d') if ctrl => return Step::Done(Picked::Cancelled),
            KeyCode::Esc if self.filtering || !self.filter.is_empty() => {
                self.filtering = false;
                self.filter.clear();
                self.refilter();
            }
            KeyCode::Esc => return Step::Done(Picked::Cancelled),
            KeyCode::Enter => match self.shown.get(self.selected).map(|&i| &self.rows[i]) {
                Some(Row {
                    error: None, id, ..
                }) => return Step::Done(Picked::Session(id.clone())),
                Some(Row { error: Some(e), .. }) => {
                    self.note = Some(format!("cannot resume this one: {e}"))
                }
                None => self.note = Some("no session matches the filter".into()),
            },
            KeyCode::Backspace if self.filtering => {
                self.filter.pop();
                self.refilter();
            }
            KeyCode::Char(c) if self.filtering && !ctrl => {
                self.filter.push(c);
                self.refilter();
            }
            KeyCode::Char('/') => self.filtering = true,
            KeyCode::Char('q') => return Step::Done(Picked::Cancelled),
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.selected = (self.selected + 1).min(last),
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(page),
            KeyCode::PageDown => self.selected = (self.selected + page).min(last),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = last,
            _ => {}
        }
        Step::Redraw
    }

    /// The screen as lines, `cols` wide at most, `lines` of them at most.
    fn render(&mut self, heading: &str, cols: usize, lines: usize, st: Style) -> Vec<String> {
        let list_rows = lines.saturating_sub(3).max(1);
        if self.selected < self.top {
            self.top = self.selected;
        } else if self.selected >= self.top + list_rows {
            self.top = self.selected + 1 - list_rows;
        }
        let mut out = vec![st.accent(&fit(heading, cols))];
        out.push(if self.filtering || !self.filter.is_empty() {
            fit(
                &format!("filter: {}▏ (Esc clears)", one_line(&self.filter, 200)),
                cols,
            )
        } else {
            st.dim(&fit(
                "↑/↓ PgUp/PgDn move · Enter resume · / filter · Esc cancel",
                cols,
            ))
        });
        for pos in self.top..(self.top + list_rows).min(self.shown.len()) {
            let row = &self.rows[self.shown[pos]];
            let line = fit(&row_text(row, self.now, pos == self.selected), cols);
            out.push(match (pos == self.selected, &row.error) {
                (true, _) => st.actor(&line),
                (false, Some(_)) => st.warning(&line),
                (false, None) => line,
            });
        }
        if self.shown.is_empty() {
            out.push(st.dim("  (no session matches)"));
        }
        let footer = match &self.note {
            Some(n) => st.error(&fit(n, cols)),
            None => st.dim(&fit(
                &format!(
                    "{} of {} session{}",
                    self.shown.len().min(self.selected + 1),
                    self.shown.len(),
                    if self.shown.len() == 1 { "" } else { "s" }
                ),
                cols,
            )),
        };
        out.push(footer);
        out
    }
}

/// `› 3 min ago     12 msgs   48 KB  fix the login bug`.
fn row_text(row: &Row, now: u64, selected: bool) -> String {
    let mark = if selected { "›" } else { " " };
    let age = long_age(row.used, now);
    match &row.error {
        None => format!(
            "{mark} {age:<14} {:>5} msg{} {:>7}  {}",
            row.messages,
            if row.messages == 1 { " " } else { "s" },
            size(row.bytes),
            one_line(&row.title, 500)
        ),
        Some(e) => format!("{mark} {age:<14} unreadable: {}", one_line(e, 500)),
    }
}

/// `s` cut to `cols` display columns, `…` when cut.
fn fit(s: &str, cols: usize) -> String {
    if s.width() <= cols {
        return s.to_string();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if w + cw + 1 > cols {
            break;
        }
        w += cw;
        out.push(c);
    }
    out.push('…');
    out
}

/// `just now`, `3 min ago`, `1 hour ago`, `2 days ago`, `5 months ago`.
pub fn long_age(then: u64, now: u64) -> String {
    let s = now.saturating_sub(then);
    let (n, unit) = match s {
        0..=59 => return "just now".to_string(),
        60..=3_599 => (s / 60, "min"),
        3_600..=86_399 => (s / 3_600, "hour"),
        86_400..=5_183_999 => (s / 86_400, "day"),
        5_184_000..=31_535_999 => (s / 2_592_000, "month"),
        _ => (s / 31_536_000, "year"),
    };
    let plural = if n == 1 || unit == "min" { "" } else { "s" };
    format!("{n} {unit}{plural} ago")
}

/// `812 B`, `48 KB`, `3.1 MB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        0..=1_023 => format!("{bytes} B"),
        1_024..=1_048_575 => format!("{} KB", bytes.div_ceil(1_024)),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

/// Raw mode and the alternate screen, given back on drop.
struct Screen;

impl Screen {
    fn enter() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let guard = Screen;
        crossterm::execute!(io::stderr(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back (cursor, normal screen, cooked mode); for a
/// caller that ends the process while `pick` still waits for a key.
pub fn restore() {
    let _ = crossterm::execute!(io::stderr(), cursor::Show, terminal::LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
}

/// Runs the picker on the terminal until a choice; blocking (crossterm's
/// reads block), so async callers run it on a blocking thread.
pub fn pick(rows: Vec<Row>, now: u64, heading: &str, st: Style) -> io::Result<Picked> {
    let mut picker = Picker::new(rows, now);
    let _screen = Screen::enter()?;
    // Buffered, so a screen is one write rather than one a line.
    let mut err = io::BufWriter::with_capacity(64 * 1024, io::stderr());
    loop {
        let (cols, lines) = terminal::size().unwrap_or((80, 24));
        let screen = picker.render(heading, cols as usize, lines as usize, st);
        queue!(err, terminal::Clear(terminal::ClearType::All))?;
        for (i, line) in screen.iter().enumerate() {
            queue!(err, cursor::MoveTo(0, i as u16), Print(line))?;
        }
        err.flush()?;
        let page = (lines as usize).saturating_sub(4).max(1);
        loop {
            match crossterm::event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => match picker.key(k, page) {
                    Step::Done(p) => return Ok(p),
                    Step::Redraw => break,
                },
                Event::Resize(..) => break,
                _ => {}
            }
        }
    }
}

/// For a terminal that cannot draw: a numbered list on `err` (stderr) and a
/// number read from `input`. Empty input or end of input cancels.
pub fn pick_by_number(
    rows: &[Row],
    now: u64,
    heading: &str,
    input: &mut dyn BufRead,
    err: &mut dyn Write,
) -> io::Result<Picked> {
    writeln!(err, "{heading}")?;
    for (i, row) in rows.iter().enumerate() {
        writeln!(err, "{:>3}{}", i + 1, &row_text(row, now, false)[1..])?;
    }
    loop {
        write!(err, "resume which? (number, Enter to cancel): ")?;
        err.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 || line.trim().is_empty() {
            return Ok(Picked::Cancelled);
        }
        match line
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|n| rows.get(n.wrapping_sub(1)))
        {
            Some(Row {
                error: None, id, ..
            }) => return Ok(Picked::Session(id.clone())),
            Some(Row { error: Some(e), .. }) => {
                writeln!(err, "cannot resume that one: {}", one_line(e, 300))?
            }
            None => writeln!(err, "no session numbered {}", one_line(line.trim(), 20))?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, title: &str) -> Row {
        Row {
            id: id.into(),
            used: 1_000,
            messages: 4,
            bytes: 2_000,
            title: title.into(),
            error: None,
        }
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn rows() -> Vec<Row> {
        let mut broken = row("c", "");
        broken.error = Some("session file c.jsonl is damaged at line 1".into());
        vec![
            row("a", "fix the login bug"),
            row("b", "write docs"),
            broken,
        ]
    }

    #[test]
    fn arrows_move_enter_picks_and_escape_cancels() {
        let mut p = Picker::new(rows(), 1_000);
        assert_eq!(p.key(key(KeyCode::Down), 10), Step::Redraw);
        assert_eq!(
            p.key(key(KeyCode::Enter), 10),
            Step::Done(Picked::Session("b".into()))
        );
        p.key(key(KeyCode::End), 10);
        p.key(key(KeyCode::Down), 10);
        // The unreadable row says why instead of resuming.
        assert_eq!(p.key(key(KeyCode::Enter), 10), Step::Redraw);
        assert!(p.note.as_deref().unwrap().contains("damaged"));
        p.key(key(KeyCode::Home), 10);
        assert_eq!(p.selected, 0);
        assert_eq!(p.key(key(KeyCode::Esc), 10), Step::Done(Picked::Cancelled));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(p.key(ctrl_c, 10), Step::Done(Picked::Interrupted));
    }

    #[test]
    fn slash_filters_by_prompt_and_escape_clears_the_filter_first() {
        let mut p = Picker::new(rows(), 1_000);
        for c in "/DOCS".chars() {
            p.key(key(KeyCode::Char(c)), 10);
        }
        assert_eq!(p.shown, vec![1]);
        assert_eq!(p.key(key(KeyCode::Esc), 10), Step::Redraw);
        assert_eq!(p.shown.len(), 3);
        assert_eq!(
            p.key(key(KeyCode::Char('q')), 10),
            Step::Done(Picked::Cancelled)
        );
    }

    #[test]
    fn the_list_scrolls_to_keep_the_selection_on_screen_and_fits_the_width() {
        let many: Vec<Row> = (0..50)
            .map(|i| row(&format!("s{i}"), &"long ".repeat(40)))
            .collect();
        let mut p = Picker::new(many, 1_000);
        p.key(key(KeyCode::PageDown), 7);
        p.key(key(KeyCode::PageDown), 7);
        let screen = p.render("sessions", 60, 10, Style::plain());
        assert_eq!(screen.len(), 10);
        assert!(screen.iter().all(|l| l.width() <= 60), "{screen:#?}");
        assert!(screen.iter().any(|l| l.starts_with('›')), "{screen:#?}");
        assert_eq!(screen.last().unwrap(), "15 of 50 sessions");
    }

    #[test]
    fn ages_and_sizes_read_as_words() {
        assert_eq!(long_age(0, 30), "just now");
        assert_eq!(long_age(0, 180), "3 min ago");
        assert_eq!(long_age(0, 3_600), "1 hour ago");
        assert_eq!(long_age(0, 2 * 86_400 + 5), "2 days ago");
        assert_eq!(size(812), "812 B");
        assert_eq!(size(48 * 1024), "48 KB");
        assert_eq!(size(3_250_000), "3.1 MB");
    }

    #[test]
    fn by_number_skips_bad_answers_and_empty_input_cancels() {
        let mut input = io::Cursor::new("x\n3\n2\n");
        let mut shown = Vec::new();
        let got = pick_by_number(&rows(), 1_000, "sessions", &mut input, &mut shown).unwrap();
        assert_eq!(got, Picked::Session("b".into()));
        let shown = String::from_utf8(shown).unwrap();
        assert!(shown.contains("  2 just now"), "{shown}");
        assert!(shown.contains("no session numbered x"), "{shown}");
        assert!(shown.contains("cannot resume that one"), "{shown}");
        let mut input = io::Cursor::new("\n");
        let got = pick_by_number(&rows(), 1_000, "sessions", &mut input, &mut Vec::new()).unwrap();
        assert_eq!(got, Picked::Cancelled);
    }
}
