//! The REPL's input area: a prompt, the buffer being edited and an optional
//! status line above it, drawn in raw mode below everything printed so far.
//! Output from running tasks is printed *above* the input area
//! (`print_above`), so typing is never interrupted. Keys map to buffer and
//! history operations; a redraw touches only the input area, so its cost
//! depends on the input's length, not on history or scrollback.

use super::buffer::Buffer;
use super::history::History;
use super::menu::{self, Kind, Listing, Menu};
use crate::ui::style::visible_width;
use crossterm::cursor::{MoveTo, MoveToColumn, MoveUp};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::queue;
use crossterm::style::Print;
use crossterm::terminal::{Clear, ClearType};
use std::io::{self, Write};
use std::path::PathBuf;
use unicode_width::UnicodeWidthChar;

/// What a key did, for the REPL to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    Submit(String),
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D on an empty line.
    Eof,
    /// Ctrl-L: clear the screen, keep the input.
    ClearScreen,
    /// Ctrl-O: the sub-agents and their tool calls (as `/subagents`).
    ShowSubagents,
}

pub struct Editor {
    pub buffer: Buffer,
    pub history: History,
    prompt: String,
    prompt_width: usize,
    status: Option<String>,
    /// Text shown above the status line until it is final: the unfinished last
    /// line of a streaming answer, or a picker's list.
    live: Option<String>,
    /// Slash commands, for Tab completion and the inline hint.
    commands: Vec<&'static str>,
    /// Custom commands with their descriptions, for the menu.
    custom: Vec<(&'static str, &'static str)>,
    /// Rows between the top of the input area and the cursor after the last draw.
    cursor_row: usize,
    /// The last draw as the terminal holds it: the display width of each line
    /// ended by a newline above the cursor's line, and the cursor's column
    /// counted from the start of its own line. Terminals re-wrap lines on a
    /// resize, so this, not `cursor_row`, says where the top of the input
    /// area is afterwards.
    drawn: Vec<usize>,
    cursor_col: usize,
    width: usize,
    /// The completion menu, while the word at the cursor has completions.
    menu: Option<Menu>,
    /// The input Esc closed the menu at; it stays closed until that changes.
    menu_dismissed: Option<String>,
    /// The directory `@` completion last listed, reused while typing in it.
    listing: Option<Listing>,
    /// Where `@` paths are relative to.
    cwd: PathBuf,
    /// Ctrl-R reverse history search, while active.
    search: Option<Search>,
}

/// A Ctrl-R search in progress.
#[derive(Debug, Default)]
struct Search {
    query: String,
    /// The history index of the match shown.
    found: Option<usize>,
    /// The last search found nothing (shown as `failed`).
    failed: bool,
    /// The input before the search, given back on Esc or Ctrl-G.
    saved: String,
}

/// `line` cut into rows of at most `width` columns, at the last space that
/// fits where there is one (a space at a cut is dropped). ANSI colour
/// sequences take no room and are never cut; a colour carries over the cut.
pub fn wrap_rows(line: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut rows = Vec::new();
    let mut row = String::new();
    let mut w = 0;
    // Just after the row's last space: byte offset and width up to there.
    let mut space: Option<(usize, usize)> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            row.push(c);
            for d in chars.by_ref() {
                row.push(d);
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
            continue;
        }
        let cw = c.width().unwrap_or(0);
        if w + cw > width && w > 0 {
            match space {
                Some((at, upto)) if c != ' ' => {
                    let rest = row.split_off(at);
                    rows.push(row.trim_end_matches(' ').to_string());
                    row = rest;
                    w -= upto;
                }
                _ => {
                    rows.push(std::mem::take(&mut row));
                    w = 0;
                }
            }
            space = None;
            if c == ' ' {
                continue;
            }
        }
        row.push(c);
        w += cw;
        if c == ' ' {
            space = Some((row.len(), w));
        }
    }
    rows.push(row);
    rows
}

/// Rows a line of display width `w` takes on a terminal `width` columns wide
/// (one that exactly fills its last row waits there for the newline).
fn rows(w: usize, width: usize) -> usize {
    w.div_ceil(width).max(1)
}

/// Where each character of `chars` starts and where the text ends, as (row,
/// column) after a prompt of `indent` columns, wrapping at `width`. Lines after
/// a newline start at `indent` too, so multi-line input stays aligned.
pub fn layout(
    chars: &[char],
    indent: usize,
    width: usize,
) -> (Vec<(usize, usize)>, (usize, usize)) {
    let width = width.max(indent + 2);
    let mut row = 0;
    let mut col = indent;
    let mut at = Vec::with_capacity(chars.len());
    for &c in chars {
        if c == '\n' {
            at.push((row, col));
            row += 1;
            col = indent;
            continue;
        }
        let w = c.width().unwrap_or(0);
        if col + w > width {
            row += 1;
            col = 0;
        }
        at.push((row, col));
        col += w;
        if col >= width {
            row += 1;
            col = 0;
        }
    }
    (at, (row, col))
}

impl Editor {
    /// Adds custom commands (name, description) to completion and the menu.
    pub fn add_commands(&mut self, custom: Vec<(&'static str, &'static str)>) {
        self.commands.extend(custom.iter().map(|(n, _)| *n));
        self.custom = custom;
    }

    /// `cwd` is where relative paths are completed from (the REPL's
    /// working directory, read once at start-up).
    pub fn new(
        prompt: String,
        history: History,
        commands: &[&'static str],
        cwd: PathBuf,
    ) -> Editor {
        Editor {
            buffer: Buffer::default(),
            history,
            prompt_width: visible_width(&prompt),
            prompt,
            status: None,
            live: None,
            commands: commands.to_vec(),
            custom: Vec::new(),
            cursor_row: 0,
            drawn: Vec::new(),
            cursor_col: 0,
            width: 80,
            menu: None,
            menu_dismissed: None,
            listing: None,
            cwd,
            search: None,
        }
    }

    /// Where `@` mentions are completed from (the working directory by default).
    pub fn set_cwd(&mut self, cwd: PathBuf) {
        self.cwd = cwd;
        self.listing = None;
    }

    /// Whether keys go to the completion menu or the history search, which
    /// take Esc and Tab before the REPL does.
    pub fn menu_open(&self) -> bool {
        self.menu.is_some() || self.search.is_some()
    }

    /// Opens, updates or closes the menu for the word at the cursor.
    fn refresh_menu(&mut self) {
        let text = self.buffer.text();
        if self.menu_dismissed.as_deref() == Some(text.as_str()) {
            self.menu = None;
            return;
        }
        self.menu_dismissed = None;
        let Some((kind, start, word)) = menu::word_at(self.buffer.chars(), self.buffer.cursor())
        else {
            self.menu = None;
            return;
        };
        let items = match kind {
            Kind::Slash => {
                let mut table = super::commands::DESCRIBED.to_vec();
                table.extend_from_slice(&self.custom);
                menu::slash_items(&word, &table)
            }
            Kind::Mention => {
                let (dir, _) = menu::split_mention(&word);
                let path = self.cwd.join(dir);
                if self.listing.as_ref().is_none_or(|l| l.dir != path) {
                    self.listing = Some(Listing::read(&path));
                }
                self.listing
                    .as_ref()
                    .map(|l| menu::path_items(&word, l))
                    .unwrap_or_default()
            }
        };
        self.menu = (!items.is_empty()).then_some(Menu {
            kind,
            start,
            items,
            selected: 0,
        });
    }

    /// Puts the menu's selection in place of the word. A command is followed
    /// by a space, a file by a space, a directory by nothing (its entries
    /// are offered next).
    fn accept(&mut self) {
        let Some(m) = self.menu.take() else {
            return;
        };
        let Some(item) = m.current() else {
            return;
        };
        let mut insert = item.insert.clone();
        if !insert.ends_with('/') || m.kind == Kind::Slash {
            insert.push(' ');
        }
        let chars = self.buffer.chars();
        let cursor = self.buffer.cursor();
        let mut text: String = chars[..m.start].iter().collect();
        text.push_str(&insert);
        let at = text.chars().count();
        text.extend(chars[cursor..].iter());
        self.buffer.set(&text);
        self.buffer.move_to(at);
        self.refresh_menu();
    }

    /// Keys while the menu is open; `None` passes the key on to editing.
    fn menu_key(&mut self, key: &KeyEvent) -> Option<Outcome> {
        let m = self.menu.as_mut()?;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Up | KeyCode::BackTab => m.prev(),
            KeyCode::Char('p') if ctrl => m.prev(),
            KeyCode::Down => m.next(),
            KeyCode::Char('n') if ctrl => m.next(),
            KeyCode::Tab => self.accept(),
            KeyCode::Esc => {
                self.menu = None;
                self.menu_dismissed = Some(self.buffer.text());
            }
            KeyCode::Enter if m.kind == Kind::Slash && key.modifiers.is_empty() => {
                // Enter runs the picked command, unless it needs an argument.
                let name = m.current().map(|i| i.insert.clone()).unwrap_or_default();
                if super::commands::NEED_ARGUMENTS.contains(&name.as_str()) {
                    self.accept();
                } else {
                    self.menu = None;
                    self.buffer.clear();
                    self.history.add(&name);
                    return Some(Outcome::Submit(name));
                }
            }
            KeyCode::Enter if key.modifiers.is_empty() => self.accept(),
            _ => return None,
        }
        Some(Outcome::Continue)
    }

    /// Keys during a Ctrl-R search; `None` ends the search with the match in
    /// the input and passes the key on (as bash does for movement keys).
    fn search_key(&mut self, key: &KeyEvent) -> Option<Outcome> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let s = self.search.as_mut()?;
        match key.code {
            KeyCode::Char('r') if ctrl => {
                let before = s.found.unwrap_or(self.history.len());
                match self.history.search(&s.query, before) {
                    Some(i) => {
                        s.found = Some(i);
                        s.failed = false;
                    }
                    None => s.failed = true,
                }
            }
            KeyCode::Esc => self.end_search(false),
            KeyCode::Char('g') | KeyCode::Char('c') if ctrl => self.end_search(false),
            KeyCode::Char(c) if !ctrl => {
                s.query.push(c);
                Self::research(s, &self.history);
            }
            KeyCode::Backspace => {
                s.query.pop();
                Self::research(s, &self.history);
            }
            KeyCode::Enter => {
                self.end_search(true);
                let text = self.buffer.text();
                self.buffer.clear();
                self.history.add(&text);
                return Some(Outcome::Submit(text));
            }
            _ => {
                self.end_search(true);
                return None;
            }
        }
        Some(Outcome::Continue)
    }

    /// Searches again from the newest entry after the query changed.
    fn research(s: &mut Search, history: &History) {
        if s.query.is_empty() {
            s.found = None;
            s.failed = false;
            return;
        }
        match history.search(&s.query, history.len()) {
            Some(i) => {
                s.found = Some(i);
                s.failed = false;
            }
            None => s.failed = true,
        }
    }

    /// Leaves the search with the match in the input (`take`) or the input
    /// as it was before.
    fn end_search(&mut self, take: bool) {
        let Some(s) = self.search.take() else {
            return;
        };
        let text = match s.found.and_then(|i| self.history.entry(i)) {
            Some(e) if take => e.to_string(),
            _ => s.saved,
        };
        self.buffer.set(&text);
    }

    /// The search line shown in place of the prompt.
    fn search_line(&self) -> Option<String> {
        let s = self.search.as_ref()?;
        let found = s
            .found
            .and_then(|i| self.history.entry(i))
            .unwrap_or_default()
            .replace('\n', " ↵ ");
        let failed = if s.failed { "failed " } else { "" };
        Some(format!("({failed}reverse-i-search)'{}': {found}", s.query))
    }

    pub fn set_prompt(&mut self, prompt: String) {
        self.prompt_width = visible_width(&prompt);
        self.prompt = prompt;
    }

    /// A new terminal width. A reflowing terminal (tmux, VTE, kitty,
    /// alacritty, iTerm2…) has already re-wrapped the input area, so the
    /// cursor's row in it is worked out again from the lines drawn; erasing
    /// with the old row count would climb into the transcript (wider) or
    /// leave a stale copy of the input area behind (narrower).
    pub fn set_width(&mut self, width: usize) {
        let width = width.max(10);
        if width != self.width {
            self.cursor_row =
                self.drawn.iter().map(|&w| rows(w, width)).sum::<usize>() + self.cursor_col / width;
        }
        self.width = width;
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn set_status(&mut self, status: Option<String>) {
        self.status = status;
    }

    pub fn set_live(&mut self, live: Option<String>) {
        self.live = live.filter(|l| !l.is_empty());
    }

    /// The rest of the single slash command the input is a prefix of.
    pub fn hint(&self) -> Option<String> {
        let text = self.buffer.text();
        if !text.starts_with('/')
            || text.contains(char::is_whitespace)
            || self.buffer.cursor() != self.buffer.chars().len()
        {
            return None;
        }
        let mut matches = self
            .commands
            .iter()
            .filter(|c| c.starts_with(&text) && c.len() > text.len());
        let first = matches.next()?;
        if matches.next().is_some() {
            return None;
        }
        Some(first[text.len()..].to_string())
    }

    /// Tab: completes a unique command (with a space), or the longest common prefix.
    fn complete(&mut self) {
        let text = self.buffer.text();
        if !text.starts_with('/') || text.contains(char::is_whitespace) {
            return;
        }
        let matches: Vec<&str> = self
            .commands
            .iter()
            .copied()
            .filter(|c| c.starts_with(&text))
            .collect();
        match matches.as_slice() {
            [] => {}
            [one] => self.buffer.set(&format!("{one} ")),
            many => {
                let mut common = many[0].to_string();
                for m in &many[1..] {
                    let n = common
                        .chars()
                        .zip(m.chars())
                        .take_while(|(a, b)| a == b)
                        .count();
                    common.truncate(n);
                }
                if common.len() > text.len() {
                    self.buffer.set(&common);
                }
            }
        }
    }

    pub fn handle(&mut self, event: &Event) -> Outcome {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.key(key),
            Event::Paste(text) => {
                self.end_search(true);
                self.buffer.insert_str(text);
                self.refresh_menu();
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    fn key(&mut self, key: &KeyEvent) -> Outcome {
        if self.search.is_some() {
            if let Some(outcome) = self.search_key(key) {
                return outcome;
            }
        }
        if let Some(outcome) = self.menu_key(key) {
            return outcome;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let navigation = matches!(key.code, KeyCode::Up | KeyCode::Down)
            || (ctrl && matches!(key.code, KeyCode::Char('p') | KeyCode::Char('n')));
        let outcome = self.edit_key(key, ctrl, alt);
        // Recalled history is not typed text: no menu pops up over it.
        if navigation {
            self.menu = None;
        } else if outcome == Outcome::Continue {
            self.refresh_menu();
        }
        outcome
    }

    fn edit_key(&mut self, key: &KeyEvent, ctrl: bool, alt: bool) -> Outcome {
        let b = &mut self.buffer;
        match key.code {
            KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => b.insert('\n'),
            // Ctrl-J is a line feed: a newline in the input, as in readline's
            // multi-line modes and Codex.
            KeyCode::Char('j') if ctrl => b.insert('\n'),
            // A trailing backslash continues the prompt on the next line
            // instead of sending it (the backslash itself is dropped).
            KeyCode::Enter if b.cursor() == b.chars().len() && b.chars().last() == Some(&'\\') => {
                b.backspace();
                b.insert('\n');
            }
            KeyCode::Char('r') if ctrl => {
                self.search = Some(Search {
                    saved: b.text(),
                    ..Search::default()
                });
                self.menu = None;
            }
            KeyCode::Enter => {
                let text = b.text();
                b.clear();
                self.history.add(&text);
                return Outcome::Submit(text);
            }
            KeyCode::Char('c') if ctrl => {
                b.clear();
                return Outcome::Interrupt;
            }
            KeyCode::Char('l') if ctrl => return Outcome::ClearScreen,
            KeyCode::Char('o') if ctrl => return Outcome::ShowSubagents,
            KeyCode::Char('d') if ctrl => {
                if b.is_empty() {
                    return Outcome::Eof;
                }
                b.delete();
            }
            KeyCode::Char('a') if ctrl => b.home(),
            KeyCode::Char('e') if ctrl => b.end(),
            KeyCode::Char('b') if ctrl => b.left(),
            KeyCode::Char('f') if ctrl => b.right(),
            KeyCode::Char('k') if ctrl => b.kill_to_end(),
            KeyCode::Char('u') if ctrl => b.kill_to_start(),
            KeyCode::Char('w') if ctrl => b.kill_word(),
            KeyCode::Char('y') if ctrl => b.yank(),
            KeyCode::Char('p') if ctrl => self.older(),
            KeyCode::Char('n') if ctrl => self.newer(),
            KeyCode::Char('b') if alt => b.word_left(),
            KeyCode::Char('f') if alt => b.word_right(),
            KeyCode::Char(c) if !ctrl => b.insert(c),
            KeyCode::Left if ctrl || alt => b.word_left(),
            KeyCode::Right if ctrl || alt => b.word_right(),
            KeyCode::Left => b.left(),
            KeyCode::Right => b.right(),
            KeyCode::Home => b.home(),
            KeyCode::End => b.end(),
            KeyCode::Backspace => b.backspace(),
            KeyCode::Delete => b.delete(),
            KeyCode::Up if !b.on_first_line() => b.up(),
            KeyCode::Down if !b.on_last_line() => b.down(),
            KeyCode::Up => self.older(),
            KeyCode::Down => self.newer(),
            KeyCode::Tab => self.complete(),
            _ => {}
        }
        Outcome::Continue
    }

    fn older(&mut self) {
        let current = self.buffer.text();
        if let Some(e) = self.history.older(&current) {
            let e = e.to_string();
            self.buffer.set(&e);
        }
    }

    fn newer(&mut self) {
        if let Some(e) = self.history.newer() {
            self.buffer.set(&e);
        }
    }

    /// Moves to the top of the input area and clears it.
    fn erase(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.cursor_row > 0 {
            queue!(out, MoveUp(self.cursor_row as u16))?;
        }
        // Not one "clear to the end of the screen" from column 0: at the
        // screen's top-left (after Ctrl-L) tmux takes that for clearing the
        // whole screen and pushes it into its scrollback, a line per
        // keystroke. The first row is cleared alone, the rest from column 1.
        queue!(
            out,
            MoveToColumn(0),
            Clear(ClearType::CurrentLine),
            MoveToColumn(1),
            Clear(ClearType::FromCursorDown),
            MoveToColumn(0)
        )?;
        self.cursor_row = 0;
        self.drawn.clear();
        self.cursor_col = 0;
        Ok(())
    }

    /// Draws the status line, prompt, input and hint, and places the cursor.
    pub fn redraw(&mut self, out: &mut impl Write, dim: impl Fn(&str) -> String) -> io::Result<()> {
        self.erase(out)?;
        self.drawn.clear();
        let mut top = 0;
        // The lines above the prompt are cut into rows here, each ended by a
        // newline, rather than left to the terminal's wrapping: a wider
        // terminal then has nothing of the input area to re-join, so the
        // cursor's row stays right even before the resize is reported.
        let mut above: Vec<String> = Vec::new();
        if let Some(live) = &self.live {
            above.extend(live.split('\n').flat_map(|l| wrap_rows(l, self.width)));
        }
        if let Some(status) = &self.status {
            above.extend(status.split('\n').flat_map(|l| wrap_rows(l, self.width)));
        }
        if let Some(m) = &self.menu {
            above.extend(
                m.render(self.width, &dim)
                    .iter()
                    .flat_map(|l| wrap_rows(l, self.width)),
            );
        }
        for row in &above {
            queue!(out, Print(row), Print("\r\n"))?;
            // A row that exactly fills the width waits there for the
            // newline instead of wrapping: one row each.
            top += 1;
            self.drawn.push(visible_width(row));
        }
        if let Some(line) = self.search_line() {
            // The search replaces the prompt line; cut to one row so the
            // cursor's row is known.
            let line: String = crate::text::visible(&line)
                .chars()
                .take(self.width.saturating_sub(1))
                .collect();
            queue!(out, Print(&line))?;
            self.cursor_row = top;
            self.cursor_col = visible_width(&line);
            return out.flush();
        }
        queue!(out, Print(&self.prompt))?;
        let chars = self.buffer.chars();
        let (at, end) = layout(chars, self.prompt_width, self.width);
        let indent = " ".repeat(self.prompt_width);
        for (i, &c) in chars.iter().enumerate() {
            if c == '\n' {
                queue!(out, Print("\r\n"), Print(&indent))?;
            } else {
                // Wrapping is left to the terminal, except where a wide
                // character does not fit and must start the next row.
                if i > 0 && at[i].1 == 0 && at[i - 1].0 != at[i].0 && chars[i - 1] != '\n' {
                    let prev_end = at[i - 1].1 + chars[i - 1].width().unwrap_or(0);
                    if prev_end < self.width {
                        queue!(out, Print("\r\n"))?;
                    }
                }
                queue!(out, Print(c))?;
            }
        }
        let mut end_row = end.0;
        if end.1 == 0 && end.0 > 0 && chars.last().is_some_and(|&c| c != '\n') {
            // The text filled its last row exactly: leave the pending wrap.
            queue!(out, Print("\r\n"))?;
        } else if let Some(h) = self.hint() {
            queue!(out, Print(dim(&h)))?;
        }
        if chars.is_empty() {
            end_row = 0;
        }
        let cursor = self.buffer.cursor();
        let (row, col) = if cursor < at.len() { at[cursor] } else { end };
        if end_row > row {
            queue!(out, MoveUp((end_row - row) as u16))?;
        }
        queue!(out, MoveToColumn(col as u16))?;
        self.cursor_row = top + row;
        // The input's own lines, for a later resize.
        let mut line_width = self.prompt_width;
        for &c in &chars[..cursor.min(chars.len())] {
            if c == '\n' {
                self.drawn.push(line_width);
                line_width = self.prompt_width;
            } else {
                line_width += c.width().unwrap_or(0);
            }
        }
        self.cursor_col = line_width;
        out.flush()
    }

    /// Prints `text` (whole lines) above the input area, then redraws it.
    pub fn print_above(
        &mut self,
        out: &mut impl Write,
        text: &str,
        dim: impl Fn(&str) -> String,
    ) -> io::Result<()> {
        self.erase(out)?;
        // Every piece is a line, empty ones included, so blank lines between
        // paragraphs survive.
        for line in text.split('\n') {
            queue!(out, Print(line), Print("\r\n"))?;
        }
        self.redraw(out, dim)
    }

    /// Clears the whole screen (the scrollback stays) and draws the input
    /// area at its top, as a shell's Ctrl-L does.
    pub fn clear_screen(
        &mut self,
        out: &mut impl Write,
        dim: impl Fn(&str) -> String,
    ) -> io::Result<()> {
        queue!(out, Clear(ClearType::All), MoveTo(0, 0))?;
        self.cursor_row = 0;
        self.drawn.clear();
        self.cursor_col = 0;
        self.redraw(out, dim)
    }

    /// Clears the input area for good (before leaving or handing the terminal over).
    pub fn finish(&mut self, out: &mut impl Write) -> io::Result<()> {
        self.erase(out)?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEvent;

    fn key(code: KeyCode, mods: KeyModifiers) -> Event {
        Event::Key(KeyEvent::new(code, mods))
    }

    fn typed(e: &mut Editor, s: &str) {
        for c in s.chars() {
            e.handle(&key(KeyCode::Char(c), KeyModifiers::NONE));
        }
    }

    fn editor() -> Editor {
        Editor::new(
            "> ".into(),
            History::load(None),
            super::super::commands::NAMES,
            PathBuf::from("."),
        )
    }

    #[test]
    fn enter_submits_and_alt_enter_inserts_a_newline() {
        let mut e = editor();
        typed(&mut e, "one");
        e.handle(&key(KeyCode::Enter, KeyModifiers::ALT));
        typed(&mut e, "two");
        assert_eq!(
            e.handle(&key(KeyCode::Enter, KeyModifiers::NONE)),
            Outcome::Submit("one\ntwo".into())
        );
        assert!(e.buffer.is_empty());
        // Up recalls it.
        e.handle(&key(KeyCode::Up, KeyModifiers::NONE));
        assert_eq!(e.buffer.text(), "one\ntwo");
    }

    #[test]
    fn ctrl_d_exits_only_on_an_empty_line_and_ctrl_c_clears() {
        let mut e = editor();
        assert_eq!(
            e.handle(&key(KeyCode::Char('d'), KeyModifiers::CONTROL)),
            Outcome::Eof
        );
        typed(&mut e, "ab");
        e.handle(&key(KeyCode::Home, KeyModifiers::NONE));
        assert_eq!(
            e.handle(&key(KeyCode::Char('d'), KeyModifiers::CONTROL)),
            Outcome::Continue
        );
        assert_eq!(e.buffer.text(), "b");
        assert_eq!(
            e.handle(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Outcome::Interrupt
        );
        assert!(e.buffer.is_empty());
    }

    #[test]
    fn tab_completes_commands_and_the_hint_shows_the_rest() {
        let mut e = editor();
        typed(&mut e, "/sta");
        assert_eq!(e.hint().as_deref(), Some("tus"));
        e.handle(&key(KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(e.buffer.text(), "/status ");
        let mut e = editor();
        typed(&mut e, "/exi");
        e.handle(&key(KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(e.buffer.text(), "/exit ");
        let mut e = editor();
        typed(&mut e, "/q");
        assert_eq!(e.hint().as_deref(), Some("uit"));
    }

    #[test]
    fn paste_is_one_insertion() {
        let mut e = editor();
        assert_eq!(e.handle(&Event::Paste("a\nb".into())), Outcome::Continue);
        assert_eq!(e.buffer.text(), "a\nb");
    }

    #[test]
    fn layout_wraps_long_lines_and_wide_characters() {
        let chars: Vec<char> = "abcdefgh".chars().collect();
        let (at, end) = layout(&chars, 2, 5);
        assert_eq!(at[2], (0, 4));
        assert_eq!(at[3], (1, 0));
        assert_eq!(end, (2, 0));
        // A wide character that does not fit moves to the next row whole.
        let chars: Vec<char> = "ab日".chars().collect();
        let (at, end) = layout(&chars, 2, 5);
        assert_eq!(at[2], (1, 0));
        assert_eq!(end, (1, 2));
        let chars: Vec<char> = "x\ny".chars().collect();
        let (at, end) = layout(&chars, 2, 80);
        assert_eq!(at[2], (1, 2));
        assert_eq!(end, (1, 3));
        assert_eq!(visible_width("\u{1b}[32m> \u{1b}[0m"), 2);
    }

    #[test]
    fn lines_above_the_prompt_are_cut_into_rows_at_spaces() {
        assert_eq!(wrap_rows("one two three", 8), ["one two", "three"]);
        assert_eq!(wrap_rows("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap_rows("ab 漢字漢字", 5), ["ab", "漢字", "漢字"]);
        assert_eq!(wrap_rows("", 5), [""]);
        let dim = "\u{1b}[90mone two\u{1b}[39m";
        assert_eq!(wrap_rows(dim, 4), ["\u{1b}[90mone", "two\u{1b}[39m"]);
    }

    #[test]
    fn a_resize_finds_the_top_of_the_input_area_in_the_rewrapped_lines() {
        let mut e = editor();
        e.set_width(40);
        e.set_live(Some("x".repeat(30)));
        e.set_status(Some("s".repeat(50)));
        typed(&mut e, &"y".repeat(45));
        let mut out = Vec::new();
        e.redraw(&mut out, |s| s.to_string()).unwrap();
        // 1 live row, 2 status rows (cut by the editor), then "> " + 45
        // characters: cursor on row 1 of the input.
        assert_eq!(e.cursor_row, 4);
        // Wider: the cut rows stay rows, the input re-joins.
        e.set_width(100);
        assert_eq!(e.cursor_row, 3);
        // Narrower: rows of 30, 40 and 10 → 2 + 2 + 1, the cursor at column 47 → row 2.
        e.set_width(20);
        assert_eq!(e.cursor_row, 7);
        // Redrawing erases from exactly that many rows up.
        let mut out = Vec::new();
        e.redraw(&mut out, |s| s.to_string()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("\u{1b}[7A"), "{s:?}");
    }

    #[test]
    fn redraw_places_the_cursor_inside_the_text() {
        let mut e = editor();
        e.set_width(80);
        typed(&mut e, "hello");
        e.handle(&key(KeyCode::Left, KeyModifiers::NONE));
        let mut out = Vec::new();
        e.redraw(&mut out, |s| s.to_string()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("> hello"), "{s:?}");
        // Column 6: after "> hell".
        assert!(s.ends_with("\u{1b}[7G"), "{s:?}");
    }
}
