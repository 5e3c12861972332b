//! A text file as the edit tools see it: its bytes decoded once into text the
//! matching works on, and encoded back with what the file had and the model
//! never sees: a UTF-8 byte-order mark, CRLF line endings, whether it ends in
//! a newline. Nothing here matches or changes lines; `engine` does that.

use std::borrow::Cow;

/// The UTF-8 byte-order mark.
const BOM: &str = "\u{feff}";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc<'a> {
    /// The text, without the BOM, with CRLF turned into LF when every line
    /// of the file ended in CRLF (a file that mixes both is kept as it is,
    /// so lines nobody edits keep their own endings). Borrowed from the
    /// file's bytes unless CRLF had to be turned into LF: a fresh copy of a
    /// 10 MB file is 2,560 first-touch page faults, a third of such an
    /// edit's time on this machine (docs/PERFORMANCE.md).
    pub text: Cow<'a, str>,
    pub bom: bool,
    pub crlf: bool,
    /// Whether the file ended in a line ending (an empty file: no).
    pub final_newline: bool,
}

impl<'a> Doc<'a> {
    /// Decodes a file's bytes; `None` when they are not UTF-8 text (NUL
    /// bytes, invalid sequences): such a file is not edited as text.
    pub fn decode(bytes: &'a [u8]) -> Option<Doc<'a>> {
        if memchr::memchr(0, bytes).is_some() {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        // Most files hold no CR at all: one quick scan settles it, with no
        // counting of every line ending.
        let crlf = memchr::memchr(b'\r', text.as_bytes()).is_some() && {
            let lf = memchr::memchr_iter(b'\n', text.as_bytes()).count();
            lf > 0 && memchr::memmem::find_iter(text.as_bytes(), b"\r\n").count() == lf
        };
        let text = if crlf {
            Cow::Owned(text.replace("\r\n", "\n"))
        } else {
            Cow::Borrowed(text)
        };
        let final_newline = text.ends_with('\n');
        Some(Doc {
            text,
            bom,
            crlf,
            final_newline,
        })
    }

    /// A new file's document: LF, no BOM.
    pub fn new_file() -> Doc<'static> {
        Doc {
            text: Cow::Borrowed(""),
            bom: false,
            crlf: false,
            final_newline: true,
        }
    }

    /// The bytes for `text`, an edited version of this document's text:
    /// the final newline as the file had it (an edit never adds or drops
    /// it), then CRLF and the BOM put back.
    pub fn encode(&self, text: &str) -> Vec<u8> {
        // Built in one buffer: a 10 MB file is not copied more than once.
        let mut body = text;
        let mut add_newline = false;
        if !text.is_empty() {
            let ends = text.ends_with('\n');
            if self.final_newline && !ends {
                add_newline = true;
            } else if !self.final_newline && ends && !self.text.is_empty() {
                body = &body[..body.len() - 1];
                body = body.strip_suffix('\r').unwrap_or(body);
            }
        }
        let mut out = Vec::with_capacity(body.len() + body.len() / 32 + 4);
        if self.bom {
            out.extend_from_slice(BOM.as_bytes());
        }
        let mut push = |part: &[u8]| {
            if !self.crlf {
                return out.extend_from_slice(part);
            }
            let mut at = 0;
            for nl in memchr::memchr_iter(b'\n', part) {
                out.extend_from_slice(&part[at..nl]);
                out.extend_from_slice(b"\r\n");
                at = nl + 1;
            }
            out.extend_from_slice(&part[at..]);
        };
        push(body.as_bytes());
        if add_newline {
            push(b"\n");
        }
        out
    }
}

impl Doc<'_> {
    /// The document with its text its own, no longer tied to the bytes it
    /// was decoded from.
    pub fn into_owned(self) -> Doc<'static> {
        Doc {
            text: Cow::Owned(self.text.into_owned()),
            bom: self.bom,
            crlf: self.crlf,
            final_newline: self.final_newline,
        }
    }

    /// `encode` for a text the caller gives up: a file that is plain LF
    /// text without a BOM (most are) gets the text's own buffer back, no
    /// copy.
    pub fn encode_owned(&self, text: String) -> Vec<u8> {
        let ends = text.ends_with('\n');
        // When `encode` would neither add nor drop a final newline.
        let as_is = text.is_empty()
            || !((self.final_newline && !ends)
                || (!self.final_newline && ends && !self.text.is_empty()));
        if !self.bom && !self.crlf && as_is {
            return text.into_bytes();
        }
        self.encode(&text)
    }
}

/// Model text in the document's terms: CRLF (which a model may copy from a
/// file) read as LF when the document holds LF-only text.
pub fn plain_newlines(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains("\r\n") {
        std::borrow::Cow::Owned(s.replace("\r\n", "\n"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_bom_and_final_newline_round_trip() {
        let raw = "\u{feff}a\r\nb\r\n".as_bytes();
        let d = Doc::decode(raw).unwrap();
        assert!(d.bom && d.crlf && d.final_newline);
        assert_eq!(d.text, "a\nb\n");
        assert_eq!(d.encode(&d.text), raw);
        assert_eq!(d.encode("a\nc"), "\u{feff}a\r\nc\r\n".as_bytes());

        // Mixed endings stay as they are; no final newline stays so.
        let d = Doc::decode(b"a\r\nb\nc").unwrap();
        assert!(!d.crlf && !d.final_newline);
        assert_eq!(d.text, "a\r\nb\nc");
        assert_eq!(d.encode("a\r\nb\nd\n"), b"a\r\nb\nd");
        assert_eq!(Doc::decode(b"x\0y"), None);
        // The owned form gives the same bytes, whatever the file's shape.
        for raw in [
            &b"a\nb\n"[..],
            b"a\nb",
            b"\xef\xbb\xbfa\r\n",
            b"",
            b"x\r\ny",
        ] {
            let d = Doc::decode(raw).unwrap();
            for text in ["", "a\nc\n", "a\nc", "\n"] {
                assert_eq!(
                    d.encode_owned(text.to_string()),
                    d.encode(text),
                    "{raw:?} {text:?}"
                );
            }
        }
        assert_eq!(Doc::decode(b"caf\xe9"), None);
    }
}
