use super::*;

fn render(doc: &str, width: usize, colour: bool) -> String {
    let mut r = MarkdownRenderer::new(width, colour);
    let mut out = r.push(doc);
    out.push_str(&r.finish());
    out
}

fn plain(doc: &str, width: usize) -> String {
    render(doc, width, false)
}

/// `s` without SGR sequences (the only escapes the renderer writes).
fn strip_sgr(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every escape in `s` is a well-formed SGR sequence (`ESC [ digits ; … m`).
fn only_sgr_escapes(s: &str) -> bool {
    let mut rest = s;
    while let Some(i) = rest.find('\x1b') {
        let after = &rest[i + 1..];
        let Some(body) = after.strip_prefix('[') else {
            return false;
        };
        let Some(end) = body.find('m') else {
            return false;
        };
        if !body[..end].chars().all(|c| c.is_ascii_digit() || c == ';') {
            return false;
        }
        rest = &body[end + 1..];
    }
    true
}

const CORPUS: &[&str] = &[
    "# Title\n\nSome *emphasis*, **strong** and ~~struck~~ text with `code` and a [link](https://example.com).\n\n## Steps\n\n1. First step\n2. Second step that is rather long and will need to wrap around the narrow width\n   - nested bullet\n   - another\n3. Third\n\n> A quote\n> that continues\n>\n> and a second paragraph\n\n---\n\nDone.\n",
    "Intro:\n\n```rust\nfn main() {\n    let x = \"hi\"; // comment\n\n    println!(\"{x}\");\n}\n```\n\nAfter the code.\n\n```\nno language\n```\n",
    "| Name | Value | Notes |\n|:-----|------:|:-----:|\n| a | 1 | short |\n| longer name | 12345 | a note that is long enough to need wrapping in a narrow table |\n\nText after.\n",
    "- item one\n\n  continued paragraph of item one\n\n- item two\n  ```sh\n  echo hi\n\n  echo there\n  ```\n- item three\n\nTrailing paragraph\nwith a soft break and a hard  \nbreak.\n",
    "Setext heading\n==============\n\nAnother\n-------\n\n* [ ] todo\n* [x] done\n\n1. one\n1. one again\n1. and again\n\n    indented code\n    more\n\n<div>html</div>\n\nA line with 漢字 and emoji 🎉 that wraps somewhere in the middle of the text.\n",
    "No trailing newline and an unclosed fence\n\n~~~python\ndef f():\n    return 1\n",
    "Control \x1b[31mred\x1b[0m and &#27;[2J entity and bell \x07\r\nCRLF line\r\n\r\nnext\n",
    "text\n- list interrupting\n- more\n# heading right after\nparagraph\n```js\nconst a = 1;\n```\n\n\n\nthree blank lines above\n",
];

#[test]
fn rendering_does_not_depend_on_chunking() {
    // A small xorshift generator: seeded, so a failure reproduces.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for doc in CORPUS {
        for (width, colour) in [(80, true), (24, true), (40, false), (12, false)] {
            let whole = render(doc, width, colour);
            for _ in 0..40 {
                let mut r = MarkdownRenderer::new(width, colour);
                let mut out = String::new();
                let mut rest: &str = doc;
                while !rest.is_empty() {
                    let mut n = (next() % 12) as usize;
                    while n < rest.len() && !rest.is_char_boundary(n) {
                        n += 1;
                    }
                    let (chunk, tail) = rest.split_at(n.min(rest.len()));
                    out.push_str(&r.push(chunk));
                    rest = tail;
                }
                out.push_str(&r.finish());
                assert_eq!(
                    out, whole,
                    "chunked render differs for {doc:?} at width {width}"
                );
            }
        }
    }
}

#[test]
fn lines_come_out_as_soon_as_their_block_is_complete() {
    let mut r = MarkdownRenderer::new(40, false);
    assert_eq!(r.push("# Head"), "");
    assert_eq!(r.push("ing\nA paragraph"), "# Heading\n");
    assert_eq!(r.push(" goes on\n"), "");
    assert_eq!(r.push("\n"), "A paragraph goes on\n");
    // Code streams line by line inside its fence.
    assert_eq!(r.push("```sh\necho one\n"), "\n```sh\necho one\n");
    assert_eq!(r.push("echo two\n"), "echo two\n");
    assert_eq!(r.push("```\n"), "```\n");
    assert_eq!(r.push("half a \x1b line"), "");
    assert_eq!(r.pending_line(), "half a ␛ line");
    assert_eq!(r.push("\n\n"), "half a ␛ line\n");
    assert_eq!(r.pending_line(), "");
    assert_eq!(r.finish(), "");
}

#[test]
fn plain_output_keeps_structure_without_escapes() {
    let out = plain(CORPUS[0], 40);
    assert!(!out.contains('\x1b'));
    assert_eq!(
        out,
        "# Title\n\
         \n\
         Some emphasis, strong and ~~struck~~\n\
         text with `code` and a link\n\
         (https://example.com).\n\
         \n\
         ## Steps\n\
         \n\
         1. First step\n\
         2. Second step that is rather long and\n   will need to wrap around the narrow\n   width\n\
         \x20  - nested bullet\n\
         \x20  - another\n\
         3. Third\n\
         \n\
         > A quote\n\
         > that continues\n\
         >\n\
         > and a second paragraph\n\
         \n\
         ----------------------------------------\n\
         \n\
         Done.\n"
    );
}

#[test]
fn colour_output_styles_inline_text_and_headings() {
    let out = render(
        "# Big\n\n*it* **bold** ~~gone~~ `x` [a](http://u)\n",
        80,
        true,
    );
    assert!(only_sgr_escapes(&out));
    assert!(!out.contains('#'), "no hashes with colour: {out:?}");
    assert!(out.contains("\x1b[1;4;35mBig\x1b[0m"));
    assert!(out.contains("\x1b[3mit\x1b[0m"));
    assert!(out.contains("\x1b[1mbold\x1b[0m"));
    assert!(out.contains("\x1b[9mgone\x1b[0m"));
    assert!(out.contains("\x1b[36mx\x1b[0m"));
    assert!(out.contains("\x1b[4;34ma\x1b[0m"));
    assert_eq!(strip_sgr(&out), "Big\n\nit bold gone x a (http://u)\n");
}

#[test]
fn blank_lines_between_blocks_are_shown_exactly() {
    assert_eq!(plain("one\n\n\n\ntwo\n", 40), "one\n\n\n\ntwo\n");
    assert_eq!(plain("# H\ntext\n", 40), "# H\ntext\n");
    assert_eq!(plain("\n\nlead\n\n\n", 40), "lead\n");
    assert_eq!(plain("- a\n\n  more\n- b\n", 40), "- a\n\n  more\n- b\n");
}

#[test]
fn nested_lists_wrap_with_a_hanging_indent() {
    let out = plain(
        "- outer item text that wraps\n  - inner item that also wraps\n",
        16,
    );
    assert_eq!(
        out,
        "- outer item\n  text that\n  wraps\n  - inner item\n    that also\n    wraps\n"
    );
    let out = render("- a\n  - b\n    - c\n", 40, true);
    assert_eq!(strip_sgr(&out), "• a\n  ◦ b\n    ▪ c\n");
}

#[test]
fn ordered_lists_keep_counting_across_items() {
    assert_eq!(plain("1. a\n1. b\n1. c\n", 40), "1. a\n2. b\n3. c\n");
    assert_eq!(plain("3. a\n\n4. b\n", 40), "3. a\n\n4. b\n");
    // A paragraph in between starts a new list, as in CommonMark.
    assert_eq!(
        plain("1. a\n\npara\n\n1. b\n", 40),
        "1. a\n\npara\n\n1. b\n"
    );
}

#[test]
fn task_lists_and_quotes() {
    assert_eq!(
        plain("- [x] done\n- [ ] todo\n", 40),
        "- [x] done\n- [ ] todo\n"
    );
    assert_eq!(plain("> q1\n>\n> > q2\n", 40), "> q1\n>\n> > q2\n");
    let out = render("> quoted\n", 40, true);
    assert_eq!(strip_sgr(&out), "│ quoted\n");
}

#[test]
fn tables_fit_the_width_and_fall_back_to_records() {
    let doc = "| a | bb |\n|---|---:|\n| 1 | 2 |\n";
    assert_eq!(plain(doc, 40), "| a | bb |\n|---|----|\n| 1 |  2 |\n");
    assert_eq!(
        strip_sgr(&render(doc, 40, true)),
        "┌───┬────┐\n│ a │ bb │\n├───┼────┤\n│ 1 │  2 │\n└───┴────┘\n"
    );
    // Too wide: the long column wraps inside its cell.
    let doc = "| k | v |\n|---|---|\n| x | one two three four |\n";
    assert_eq!(
        plain(doc, 17),
        "| k | v         |\n|---|-----------|\n| x | one two   |\n|   | three     |\n|   | four      |\n"
    );
    // Hopeless: rows become `header: value` records.
    let doc = "| alpha | beta | gamma |\n|---|---|---|\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n";
    assert_eq!(
        plain(doc, 12),
        "alpha: 1\nbeta: 2\ngamma: 3\n\nalpha: 4\nbeta: 5\ngamma: 6\n"
    );
    for line in strip_sgr(&render(CORPUS[2], 30, true)).lines() {
        assert!(render::text_width(line) <= 30, "{line:?} is wider than 30");
    }
}

#[test]
fn an_emoji_with_vs16_takes_two_columns_in_a_table_cell() {
    // ⚠️ is U+26A0 U+FE0F: a terminal draws it two columns wide.
    let doc = "| s | what |\n|---|---|\n| \u{26a0}\u{fe0f} | low disk |\n| ok | fine |\n";
    assert_eq!(
        plain(doc, 40),
        "| s  | what     |\n|----|----------|\n| \u{26a0}\u{fe0f} | low disk |\n| ok | fine     |\n"
    );
    assert_eq!(render::text_width("\u{26a0}\u{fe0f}"), 2);
    // Already wide, or alone: the selector adds nothing.
    assert_eq!(render::text_width("\u{1f600}\u{fe0f}"), 2);
    assert_eq!(render::text_width("\u{fe0f}"), 0);
    // A cut never separates the selector from its character.
    let cut = render::hard_wrap(
        &[("ab\u{26a0}\u{fe0f}".into(), render::Paint::default())],
        3,
    );
    let rows: Vec<String> = cut
        .iter()
        .map(|l| l.iter().map(|(t, _)| t.as_str()).collect())
        .collect();
    assert_eq!(rows, ["ab", "\u{26a0}\u{fe0f}"]);
}

#[test]
fn links_show_their_address_once() {
    assert_eq!(
        plain("[docs](https://d.io) and <https://x.io>\n", 80),
        "docs (https://d.io) and https://x.io\n"
    );
    assert_eq!(plain("![logo](l.png)\n", 80), "[image: logo] (l.png)\n");
}

#[test]
fn code_blocks_plain_show_fences_colour_highlights() {
    let doc = "```rust\nlet x = 1; // c\n```\n";
    assert_eq!(plain(doc, 40), "```rust\nlet x = 1; // c\n```\n");
    let out = render(doc, 40, true);
    assert!(only_sgr_escapes(&out));
    assert!(out.contains("\x1b[35mlet\x1b[0m"), "{out:?}");
    assert!(out.contains("\x1b[90m// c\x1b[0m"), "{out:?}");
    assert_eq!(strip_sgr(&out), "```rust\nlet x = 1; // c\n```\n");
    // Long code lines are cut, not reflowed; tabs become spaces.
    assert_eq!(
        plain("```\nabcdefghij\n\tx\n```\n", 6),
        "```\nabcdef\nghij\n    x\n```\n"
    );
    // An unclosed fence is closed at the end.
    assert_eq!(plain("```\ncode", 40), "```\ncode\n```\n");
}

#[test]
fn prose_wraps_to_the_width_counting_wide_characters() {
    let doc = "漢字漢字 漢字 and words words words 🎉🎉 more words here\n";
    for width in [8, 11, 20] {
        let out = plain(doc, width);
        for line in out.lines() {
            assert!(
                render::text_width(line) <= width,
                "{line:?} wider than {width}"
            );
        }
        let words: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(words, doc.split_whitespace().collect::<Vec<_>>());
    }
}

#[test]
fn control_characters_never_reach_the_terminal() {
    let doc = "a \x1b[2J b &#27;[31m c\x07\n\n```\nx\x1b]0;t\x07\n```\n\n[l](http://\x1b[1m) `\x1b[5m` \u{202E}rev\n";
    let out = plain(doc, 80);
    assert!(!out.chars().any(crate::text::is_unsafe), "{out:?}");
    assert!(out.contains("␛[2J") && out.contains("␛[31m") && out.contains('␇'));
    let out = render(doc, 80, true);
    assert!(only_sgr_escapes(&out), "{out:?}");
    assert!(!strip_sgr(&out).chars().any(crate::text::is_unsafe));
    assert!(out.contains("<U+202E>rev"));
}

#[test]
fn crlf_line_ends_are_plain_newlines() {
    assert_eq!(plain("a\r\nb\r\n\r\nc\r\n", 40), "a\nb\n\nc\n");
}

#[test]
fn a_single_newline_inside_a_paragraph_stays_a_line_break() {
    // One sentence per line, as models write: shown as written, each line
    // still wrapped to the width on its own.
    assert_eq!(
        plain("First sentence.\nSecond one, longer than the width.\n", 20),
        "First sentence.\nSecond one, longer\nthan the width.\n"
    );
    assert_eq!(plain("- a\n  b\n", 20), "- a\n  b\n");
}

#[test]
fn held_text_is_what_is_not_rendered_yet() {
    let mut r = MarkdownRenderer::new(40, false);
    assert_eq!(r.push("para one\npara"), "");
    assert_eq!(r.held(), "para one\npara");
    assert_eq!(r.push(" two\n\n"), "para one\npara two\n");
    assert_eq!(r.held(), "");
}

#[test]
fn code_without_colour_has_no_escapes_in_any_language() {
    for lang in [
        "rust",
        "py",
        "sh",
        "html",
        "diff",
        "toml",
        "sql",
        "nosuchlang",
    ] {
        let doc = format!("```{lang}\nfn f() {{ \"s\" }} // c\n+<a href=\"x\"> # 1\n```\n");
        let out = render(&doc, 80, false);
        assert!(!out.contains('\x1b'), "{lang}: {out:?}");
        // With colour the same text is there, in SGR escapes only.
        let coloured = render(&doc, 80, true);
        assert!(only_sgr_escapes(&coloured));
        assert_eq!(strip_sgr(&coloured), out);
    }
}

#[test]
fn finish_resets_for_the_next_answer() {
    let mut r = MarkdownRenderer::new(40, false);
    r.push("1. one\n");
    assert_eq!(r.finish(), "1. one\n");
    assert_eq!(r.push("2. two\n\n"), "");
    assert_eq!(r.finish(), "2. two\n");
    r.set_width(5);
    r.push("aaa bbb\n");
    assert_eq!(r.finish(), "aaa\nbbb\n");
}

#[test]
fn code_past_the_colour_budget_is_shown_plain() {
    let line = "let x = 1;\n";
    let n = render::HIGHLIGHT_BUDGET / (line.len() - 1) + 10;
    let doc = format!("```rust\n{}```\n", line.repeat(n));
    let out = render(&doc, 80, true);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].contains("\x1b[35mlet"), "first line coloured");
    assert_eq!(lines[n], "let x = 1;", "last line plain");
    assert_eq!(strip_sgr(&out), plain(&doc, 80));
}
