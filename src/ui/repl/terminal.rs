//! The REPL's terminal plumbing: raw mode, switched on at start and restored
//! on every way out (panics too); the terminal's events, read on a thread of
//! their own; and the buffered writer every frame goes through. The `impl
//! Repl` here is how the REPL writes to the screen: lines printed above the
//! input area, errors, clearing and redrawing. Drawing the input area is
//! `editor`'s; what the lines say is the other rooms'.

use super::Repl;
use crossterm::event::Event;
use std::io::Write;
use tokio::sync::mpsc;

/// Room for one frame of the input area: the largest live area (a picker,
/// a long input) fits, so a frame is one write.
const FRAME_BUFFER: usize = 64 * 1024;

/// Restores the terminal however the REPL ends, panics included.
pub(super) struct RawMode;

impl RawMode {
    pub(super) fn enable() -> std::io::Result<RawMode> {
        crossterm::terminal::enable_raw_mode()?;
        let _ = crossterm::execute!(std::io::stderr(), crossterm::event::EnableBracketedPaste);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        Ok(RawMode)
    }
}

fn restore_terminal() {
    let _ = crossterm::execute!(std::io::stderr(), crossterm::event::DisableBracketedPaste);
    let _ = crossterm::terminal::disable_raw_mode();
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Terminal events, read on a thread of their own (crossterm's read blocks).
pub(super) fn terminal_events() -> mpsc::UnboundedReceiver<std::io::Result<Event>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || loop {
        let ev = crossterm::event::read();
        let failed = ev.is_err();
        if tx.send(ev).is_err() || failed {
            return;
        }
    });
    rx
}

/// The terminal, buffered: stderr is unbuffered, and each piece of a frame
/// (a row, a character of the input) would otherwise be a write of its own,
/// O(length) system calls a keystroke and half-drawn frames on screen. Every
/// editor call flushes once at its end.
pub(super) struct Terminal<W: Write = std::io::Stderr>(Option<std::io::BufWriter<W>>);

impl Terminal {
    pub(super) fn new() -> Terminal {
        Terminal::on(std::io::stderr())
    }
}

impl<W: Write> Terminal<W> {
    fn on(w: W) -> Terminal<W> {
        Terminal(Some(std::io::BufWriter::with_capacity(FRAME_BUFFER, w)))
    }
}

impl<W: Write> Write for Terminal<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.0 {
            Some(w) => w.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.as_mut().map_or(Ok(()), |w| w.flush())
    }
}

impl<W: Write> Drop for Terminal<W> {
    /// A panic mid-frame leaves half a frame here, which begins by erasing
    /// the screen below the cursor: written during the unwind, it would wipe
    /// the panic message the hook has just printed. It is dropped unwritten.
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(w) = self.0.take() {
                drop(w.into_parts());
            }
        }
    }
}

impl Repl<'_> {
    pub(super) fn dim(&self) -> impl Fn(&str) -> String {
        let style = self.opts.style;
        move |s: &str| style.dim(s)
    }

    /// Follows the terminal's width before drawing: a resize can land while
    /// agent events are handled, before its own event arrives, and the
    /// editor must know the terminal re-wrapped the input area.
    pub(super) fn sync_size(&mut self) {
        if let Ok((w, h)) = crossterm::terminal::size() {
            self.height = h as usize;
            if w as usize != self.editor.width() {
                self.editor.set_width(w as usize);
                self.md.set_width(w as usize);
            }
        }
    }

    pub(super) fn say(&mut self, text: &str) {
        self.sync_size();
        let dim = self.dim();
        let _ = self.editor.print_above(&mut self.out, text, dim);
    }

    pub(super) fn say_error(&mut self, text: &str) {
        let e = self.opts.style.error(text);
        self.say(&e);
    }

    /// Ctrl-L and `/clear`: an empty screen with the input area on top.
    pub(super) fn clear_screen(&mut self) {
        self.sync_size();
        let dim = self.dim();
        let _ = self.editor.clear_screen(&mut self.out, dim);
    }

    pub(super) fn redraw(&mut self) {
        self.sync_size();
        let dim = self.dim();
        let _ = self.editor.redraw(&mut self.out, dim);
    }
}

#[cfg(test)]
mod tests {
    use super::Terminal;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A terminal stand-in that records what reaches it.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_reaches_the_terminal_at_its_flush_and_not_before() {
        let screen = Screen::default();
        let mut t = Terminal::on(screen.clone());
        t.write_all(b"\x1b[J row one\r\n").unwrap();
        t.write_all(b"row two").unwrap();
        assert!(screen.0.lock().unwrap().is_empty());
        t.flush().unwrap();
        assert_eq!(
            screen.0.lock().unwrap().as_slice(),
            b"\x1b[J row one\r\nrow two"
        );
        // What is left at an ordinary drop still goes out.
        t.write_all(b" and more").unwrap();
        drop(t);
        assert!(screen.0.lock().unwrap().ends_with(b" and more"));
    }

    #[test]
    fn half_a_frame_is_dropped_unwritten_when_drawing_panics() {
        let screen = Screen::default();
        let mut t = Terminal::on(screen.clone());
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            t.write_all(b"\x1b[J half a fr").unwrap();
            panic!("a bug while drawing");
        }));
        assert!(unwound.is_err());
        assert!(
            screen.0.lock().unwrap().is_empty(),
            "the erase would wipe the panic message"
        );
    }
}
