use super::*;

fn one(old: &str, new: &str) -> Edit {
    Edit {
        old: old.into(),
        new: new.into(),
        replace_all: false,
    }
}

fn edit(text: &str, old: &str, new: &str) -> Result<(String, Level), Failure> {
    apply(text, &[one(old, new)])
        .map(|(t, c)| (t, c[0].level))
        .map_err(|e| e.failure)
}

const RUST: &str =
    "fn main() {\n    let x = 1;\n    if x > 0 {\n        println!(\"positive\");\n    }\n}\n";

#[test]
fn an_exact_unique_match_is_replaced() {
    let (t, level) = edit(RUST, "let x = 1;", "let x = 2;").unwrap();
    assert_eq!(level, Level::Exact);
    assert_eq!(t, RUST.replace("let x = 1;", "let x = 2;"));
}

#[test]
fn trailing_whitespace_drift_matches_at_the_first_level() {
    let old = "    let x = 1;   \n    if x > 0 {\t\n";
    let (t, level) = edit(RUST, old, "    let x = 3;\n    if x > 1 {\n").unwrap();
    assert_eq!(level, Level::TrailingWhitespace);
    assert_eq!(
        t,
        RUST.replace("let x = 1;", "let x = 3;")
            .replace("x > 0", "x > 1")
    );
}

#[test]
fn reindented_text_matches_and_the_new_text_takes_the_files_indentation() {
    // The model dropped the function's indentation and used 2 spaces.
    let old = "if x > 0 {\n  println!(\"positive\");\n}\n";
    let new = "if x > 0 {\n  println!(\"positive\");\n  done();\n}\n";
    let (t, level) = edit(RUST, old, new).unwrap();
    assert_eq!(level, Level::Whitespace);
    assert_eq!(
        t,
        RUST.replace(
            "        println!(\"positive\");\n",
            "        println!(\"positive\");\n        done();\n"
        )
    );
    // Tabs in the file stay tabs.
    let tabbed = "fn f() {\n\tif a {\n\t\tb();\n\t}\n}\n";
    let (t, _) = edit(
        tabbed,
        "if a {\n    b();\n}",
        "if a {\n    b();\n    c();\n}",
    )
    .unwrap();
    assert_eq!(t, "fn f() {\n\tif a {\n\t\tb();\n\t\tc();\n\t}\n}\n");
}

#[test]
fn flattened_nesting_is_not_taken_for_the_file() {
    // Every line at one depth: matching it would re-indent new code wrongly.
    let old = "if x > 0 {\nprintln!(\"positive\");\n}\n";
    assert!(matches!(
        edit(RUST, old, "if x > 0 {\nprintln!(\"p\");\n}\n"),
        Err(Failure::Missing { .. })
    ));
}

#[test]
fn curly_quotes_and_dashes_fold_and_the_files_own_characters_stay() {
    let text = "msg = \u{201c}it\u{2019}s fine\u{201d}\nrange = 1\u{2013}2\nother\n";
    // The model wrote ASCII for the quotes of a fragment.
    let (t, level) = edit(text, "\"it's fine\"", "\"it's great\"").unwrap();
    assert_eq!(level, Level::Punctuation);
    assert_eq!(t, "msg = \"it's great\"\nrange = 1\u{2013}2\nother\n");
    // A whole-line needle: the unchanged line keeps its en dash.
    let (t, level) = edit(text, "range = 1-2\nother\n", "range = 1-2\nchanged\n").unwrap();
    assert_eq!(level, Level::Punctuation);
    assert_eq!(
        t,
        "msg = \u{201c}it\u{2019}s fine\u{201d}\nrange = 1\u{2013}2\nchanged\n"
    );
    // Non-breaking spaces.
    let (t, _) = edit("a\u{a0}=\u{a0}1\n", "a = 1", "a = 2").unwrap();
    assert_eq!(t, "a = 2\n");
}

#[test]
fn an_ambiguous_match_changes_nothing_and_lists_every_line() {
    let text = "x = 1\ny = 2\nx = 1\n";
    let e = apply(text, &[one("x = 1", "x = 3")]).unwrap_err();
    assert_eq!(
        e.failure,
        Failure::Ambiguous {
            level: Level::Exact,
            lines: vec![1, 3]
        }
    );
    let shown = e.to_string();
    assert!(shown.contains("at lines 1, 3"), "{shown}");
    // Ambiguous at a lenient level too: reported, not guessed.
    let text = "  x = 1\ny = 2\n\tx = 1\n";
    let e = edit(text, "x = 1 \n", "x = 3\n").unwrap_err();
    assert_eq!(
        e,
        Failure::Ambiguous {
            level: Level::Whitespace,
            lines: vec![1, 3]
        }
    );
    // Overlapping occurrences count.
    assert!(matches!(
        edit("aaa", "aa", "b"),
        Err(Failure::Ambiguous { .. })
    ));
}

#[test]
fn replace_all_changes_every_match() {
    let (t, c) = apply(
        "x = 1\ny = 2\nx = 1\n",
        &[Edit {
            old: "x = 1".into(),
            new: "x = 9".into(),
            replace_all: true,
        }],
    )
    .unwrap();
    assert_eq!(t, "x = 9\ny = 2\nx = 9\n");
    assert_eq!(c[0].count, 2);
}

#[test]
fn a_missing_match_shows_the_closest_region_with_line_numbers() {
    let text: String = (1..=40).map(|i| format!("line number {i}\n")).collect();
    // Stale context: the model remembers line 21 differently.
    let old = "line number 20\nline number twenty-one\nline number 22\n";
    let e = apply(&text, &[one(old, "x\n")]).unwrap_err();
    let Failure::Missing {
        closest: Some(region),
    } = &e.failure
    else {
        panic!("{e:?}")
    };
    assert!(
        region.contains("20| line number 20\n21| line number 21\n22| line number 22"),
        "{region}"
    );
    assert!(region.contains("line 2 of old_string"), "{region}");
    assert!(region.contains("line 21 of the file"), "{region}");
    assert!(e.to_string().contains("nothing was changed"));
    // Nothing like it at all.
    let e = edit(&text, "completely different\n", "x").unwrap_err();
    assert_eq!(e, Failure::Missing { closest: None });
}

#[test]
fn edits_apply_in_order_all_or_nothing_and_must_not_overlap() {
    let text = "a = 1\nb = 2\nc = 3\n";
    // The second edit sees the first's result; separate spots are fine.
    let (t, changes) = apply(text, &[one("a = 1", "a = 10"), one("c = 3", "c = 30")]).unwrap();
    assert_eq!(t, "a = 10\nb = 2\nc = 30\n");
    assert_eq!(changes.len(), 2);
    let (t, _) = apply(text, &[one("a = 1", "a = 10"), one("b = 2", "b = 2 + a")]).unwrap();
    assert_eq!(t, "a = 10\nb = 2 + a\nc = 3\n");
    // An edit whose match includes text an earlier edit wrote is refused.
    for edits in [
        [
            one("a = 1", "a = 10"),
            one("a = 10\nb = 2", "a = 10\nb = 20"),
        ],
        [one("b = 2", "b = 20"), one("b = 20\nc", "b = 21\nc")],
    ] {
        let e = apply(text, &edits).unwrap_err();
        assert_eq!(e.failure, Failure::Overlap { earlier: 0 }, "{edits:?}");
        assert!(
            e.to_string().contains("overlaps the text edit 1 wrote"),
            "{e}"
        );
    }
    // A later failure is the whole call's failure.
    let e = apply(text, &[one("a = 1", "a = 10"), one("zzz", "y")]).unwrap_err();
    assert_eq!((e.index, e.of), (1, 2));
    assert!(e.to_string().starts_with("edit 2 of 2: "), "{e}");
}

#[test]
fn crlf_text_in_a_mixed_file_keeps_each_lines_ending() {
    // Mixed endings (not normalised by Doc): lines keep theirs.
    let text = "a\r\nb\r\nc\nd\n";
    let (t, level) = edit(text, "a\nb\n", "a\nB\n").unwrap();
    assert_eq!(level, Level::TrailingWhitespace);
    assert_eq!(t, "a\r\nB\r\nc\nd\n");
}

#[test]
fn whole_line_edits_can_delete_lines_and_keep_the_rest() {
    let text = "one\n  two  \nthree\n";
    let (t, _) = edit(text, "two\n", "").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(t, "one\nthree\n");
}

#[test]
fn empty_and_unchanged_edits_are_refused() {
    assert_eq!(edit("a", "", "b").unwrap_err(), Failure::EmptyOld);
    assert_eq!(edit("a", "a", "a").unwrap_err(), Failure::Unchanged);
    // Blank needles never match leniently.
    assert!(matches!(
        edit("a\n\nb\n", "  \n", "x"),
        Err(Failure::Missing { .. })
    ));
}

/// Lines a generated file or needle is made of: repeated, indented and
/// trailing-blank variants of a few statements, CRLF endings, blank lines.
fn drift_line() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    (
        prop::sample::select(vec!["", " ", "    ", "\t", "  "]),
        prop::sample::select(vec![
            "let counter = 1;",
            "let counter = 2;",
            "return counter;",
            "}",
            "",
            "if counter > limit {",
        ]),
        prop::sample::select(vec!["", " ", "\t", "\r"]),
    )
        .prop_map(|(lead, body, trail)| format!("{lead}{body}{trail}"))
}

proptest::proptest! {
    /// The memmem-anchored search finds exactly the windows the full scan
    /// of every line finds, in the same order, at both whitespace levels.
    #[test]
    fn anchored_windows_agree_with_the_full_scan(
        file in proptest::collection::vec(drift_line(), 0..40),
        needle in proptest::collection::vec(drift_line(), 1..4),
        final_newline in proptest::bool::ANY,
    ) {
        let mut text = file.join("\n");
        if final_newline && !text.is_empty() {
            text.push('\n');
        }
        let needle: Vec<&str> = needle.iter().map(String::as_str).collect();
        let index = lines::index(&text);
        for level in [Level::TrailingWhitespace, Level::Whitespace] {
            let full: Vec<usize> = windows(&text, &index, &needle, level, 0..index.len())
                .into_iter()
                .map(|s| index[s].start)
                .collect();
            if let Some(found) = anchored_windows(&text, &needle, level) {
                let starts: Vec<usize> = found.iter().map(|w| w[0].start).collect();
                proptest::prop_assert_eq!(&starts, &full);
                for w in &found {
                    let at = index.iter().position(|l| l.start == w[0].start).unwrap();
                    proptest::prop_assert_eq!(&w[..], &index[at..at + needle.len()]);
                }
            }
        }
    }
}
