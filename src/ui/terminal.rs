//! Facts about the process's terminal: which of stdin, stdout and stderr is
//! one, whether it is a dumb one (`TERM=dumb`) and whether `NO_COLOR` asks
//! for no colour. They are read once at start-up (`Terminal::detect`, called
//! by the app layer alone) and handed to the front ends as a value, so no
//! renderer asks the process again. The width is not here: it changes with
//! a resize, and the Markdown renderer reads it per block.

use std::io::IsTerminal;

/// The terminal as the process found it at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Terminal {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    /// `TERM=dumb`: understands no escape sequences at all, so it gets plain
    /// lines (no colour, no cursor movement, no spinner redraws).
    pub dumb: bool,
    /// `NO_COLOR` set and not empty.
    pub no_color: bool,
}

impl Terminal {
    /// Reads the facts from the process; buddy changes none of them while it
    /// runs, so once is enough.
    pub fn detect() -> Terminal {
        Terminal {
            stdin: std::io::stdin().is_terminal(),
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
            dumb: crate::process::var_os("TERM").is_some_and(|t| t == "dumb"),
            no_color: crate::process::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        }
    }

    /// Whether stderr may be painted at all.
    pub fn stderr_takes_colour(&self) -> bool {
        self.stderr && !self.dumb && !self.no_color
    }

    /// Whether stderr can take a redrawn spinner.
    pub fn stderr_redraws(&self) -> bool {
        self.stderr && !self.dumb
    }

    /// Whether the interactive editor can run: input and stderr are a
    /// terminal that takes cursor movement.
    pub fn editor(&self) -> bool {
        self.stdin && self.stderr && !self.dumb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dumb_terminal_or_no_color_paints_nothing_and_a_dumb_one_runs_no_editor() {
        let tty = Terminal {
            stdin: true,
            stdout: true,
            stderr: true,
            dumb: false,
            no_color: false,
        };
        assert!(tty.stderr_takes_colour() && tty.editor() && tty.stderr_redraws());
        let dumb = Terminal { dumb: true, ..tty };
        assert!(!dumb.stderr_takes_colour() && !dumb.editor() && !dumb.stderr_redraws());
        let no_color = Terminal {
            no_color: true,
            ..tty
        };
        assert!(!no_color.stderr_takes_colour() && no_color.editor());
        let piped = Terminal {
            stdin: false,
            ..tty
        };
        assert!(!piped.editor() && piped.stderr_takes_colour());
    }
}
