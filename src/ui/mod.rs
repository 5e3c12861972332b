//! Front ends: renderers of the agent's event stream. `exec` is the one-shot
//! front end, `repl` the interactive one; `style` decides colour and formats
//! previews.

pub mod exec;
pub mod repl;
pub mod style;
