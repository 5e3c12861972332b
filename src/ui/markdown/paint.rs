//! How a run of rendered text is painted (colour and emphasis) and its SGR
//! escape; shared by the renderer and the code highlighter below it.

/// How a piece of text is painted. Without colour all of it is ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paint {
    pub fg: Option<u8>,
    pub bold: bool,
    pub italic: bool,
    pub underline: bool,
    pub strike: bool,
}

impl Paint {
    pub fn fg(c: u8) -> Paint {
        Paint {
            fg: Some(c),
            ..Paint::default()
        }
    }

    pub fn is_plain(&self) -> bool {
        *self == Paint::default()
    }

    pub fn sgr(&self, out: &mut String) {
        let mut codes: Vec<String> = Vec::with_capacity(4);
        if self.bold {
            codes.push("1".into());
        }
        if self.italic {
            codes.push("3".into());
        }
        if self.underline {
            codes.push("4".into());
        }
        if self.strike {
            codes.push("9".into());
        }
        if let Some(c) = self.fg {
            codes.push(c.to_string());
        }
        out.push_str("\x1b[");
        out.push_str(&codes.join(";"));
        out.push('m');
    }
}

/// A run of text with one paint. Text here has already been through
/// `crate::text::visible`, so it holds no control characters.
pub type Span = (String, Paint);
