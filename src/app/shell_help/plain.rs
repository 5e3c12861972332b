//! buddy's man pages as plain text, for a terminal on a system without
//! `man`: headings flush left, text indented as man indents it, font changes
//! and escapes resolved. It knows only the few roff requests and escapes our
//! pages use (clap_mangen's and `manual.rs`'s); it does not fill or justify
//! lines (the terminal wraps them) and is no general roff formatter.

/// Where body text starts, and how much deeper a `.TP` item's text goes.
const INDENT: usize = 7;

/// `roff` as text for a terminal.
pub fn render(roff: &str) -> String {
    let mut out = String::new();
    let mut at = Place::default();
    for line in roff.lines() {
        let Some(request) = line.strip_prefix('.') else {
            at.text(&mut out, line);
            continue;
        };
        let (name, rest) = request.split_once(' ').unwrap_or((request, ""));
        let rest = unquote(rest.trim());
        match name {
            "TH" => {
                let title = rest.split_whitespace().next().unwrap_or("buddy");
                out.push_str(&format!("{}(1)\n", title.to_uppercase()));
            }
            "SH" | "SS" => {
                at = Place::default();
                let pad = if name == "SS" { INDENT / 2 } else { 0 };
                out.push_str(&format!("\n{}{}\n", " ".repeat(pad), escapes(rest)));
            }
            "TP" => {
                out.push('\n');
                at.tag_next = true;
                at.in_item = false;
            }
            "IP" => {
                out.push('\n');
                at.in_item = false;
                if !rest.is_empty() {
                    // `.IP \(bu 2`: the bullet, then the text on its line.
                    let bullet = rest.split_whitespace().next().unwrap_or("");
                    out.push_str(&" ".repeat(indent(at.depth, false)));
                    out.push_str(&escapes(bullet));
                    out.push(' ');
                    at.inline = true;
                }
            }
            "PP" | "P" | "LP" | "sp" => {
                at.in_item = false;
                out.push('\n');
            }
            "RS" => at.depth += 1,
            "RE" => at.depth = at.depth.saturating_sub(1),
            "B" | "I" | "BR" | "IR" | "RB" | "RI" | "BI" | "IB" => at.text(&mut out, rest),
            // `.br`, `.nf`, `.fi`: lines are kept as they are anyway;
            // `.ie`/`.el`/`.ds` and comments define nothing shown.
            _ => {}
        }
    }
    out.trim_start_matches('\n').to_string()
}

/// Where the next line of text goes.
#[derive(Default)]
struct Place {
    /// `.RS` levels.
    depth: usize,
    /// The next line is a `.TP` item's tag.
    tag_next: bool,
    /// Text after a tag: one level deeper.
    in_item: bool,
    /// The next text continues the current line (after an `.IP` bullet).
    inline: bool,
}

impl Place {
    fn text(&mut self, out: &mut String, line: &str) {
        if std::mem::take(&mut self.inline) {
            out.push_str(&escapes(line));
            out.push('\n');
            return;
        }
        let pad = if std::mem::take(&mut self.tag_next) {
            self.in_item = true;
            indent(self.depth, false)
        } else {
            indent(self.depth, self.in_item)
        };
        out.push_str(&" ".repeat(pad));
        out.push_str(&escapes(line));
        out.push('\n');
    }
}

fn indent(depth: usize, in_item: bool) -> usize {
    INDENT + depth * 4 + if in_item { INDENT } else { 0 }
}

/// A request's argument without the double quotes roff allows around it.
fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

/// Resolves the escapes our pages use: font changes go, named characters
/// become the characters.
fn escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // \fB, \fI, \fR, \fP and \f(XY: a font change, shown as nothing.
            Some('f') => {
                if chars.next() == Some('(') {
                    chars.next();
                    chars.next();
                }
            }
            // \(xy: a named character.
            Some('(') => {
                let name: String = chars.by_ref().take(2).collect();
                out.push_str(named(&name));
            }
            // \*(xy: a string; `Aq` (an apostrophe) is the only one we define.
            Some('*') => {
                if chars.peek() == Some(&'(') {
                    chars.next();
                    let name: String = chars.by_ref().take(2).collect();
                    out.push_str(if name == "Aq" { "'" } else { "" });
                } else {
                    chars.next();
                }
            }
            Some('-') => out.push('-'),
            Some('e') | Some('\\') => out.push('\\'),
            Some(' ') | Some('~') => out.push(' '),
            Some('&') | Some('c') | Some('%') | None => {}
            Some(other) => out.push(other),
        }
    }
    out
}

fn named(name: &str) -> &'static str {
    match name {
        "aq" => "'",
        "dq" => "\"",
        "bu" => "•",
        "em" => "—",
        "en" => "–",
        "hy" => "-",
        "lq" => "“",
        "rq" => "”",
        "co" => "©",
        "ga" => "`",
        "ti" => "~",
        "ha" => "^",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_items_and_escapes() {
        let roff = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH buddy 1  \"buddy 0.1.0\" \n\
            .SH NAME\nbuddy \\- an agent\n.SH OPTIONS\n.TP\n\\fB\\-\\-config\\fR \\fI<PATH>\\fR\n\
            Use this config file (it\\*(Aqs \\(aqyours\\(aq)\n.PP\nMore.\n.IP \\(bu 2\nOne point\n";
        let text = render(roff);
        assert_eq!(
            text,
            "BUDDY(1)\n\nNAME\n       buddy - an agent\n\nOPTIONS\n\n       --config <PATH>\n\
             \x20             Use this config file (it's 'yours')\n\n       More.\n\n       • One point\n"
        );
    }

    #[test]
    fn no_request_or_escape_is_left() {
        let page = super::super::render(None).expect("the page renders");
        let text = render(&String::from_utf8_lossy(&page));
        for line in text.lines() {
            assert!(!line.starts_with('.'), "a request is left: {line}");
            assert!(!line.contains("\\f"), "a font escape is left: {line}");
        }
        assert!(text.contains("\nEXIT STATUS\n") || text.contains("\nOPTIONS\n"));
    }
}
