//! Front ends: renderers of the agent's event stream. `exec` is the one-shot
//! front end; `style` decides colour and formats previews.

pub mod exec;
pub mod style;
