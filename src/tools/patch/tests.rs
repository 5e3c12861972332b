use super::*;
use crate::tools::approval::AlwaysApprove;
use serde_json::json;
use std::sync::Mutex;

fn tempdir(label: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("buddy-patch-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn chunk(anchor: Option<&str>, old: &[&str], new: &[&str]) -> Chunk {
    Chunk {
        anchor: anchor.map(String::from),
        old: old.iter().map(|s| s.to_string()).collect(),
        new: new.iter().map(|s| s.to_string()).collect(),
        at_eof: false,
    }
}

#[test]
fn chunks_apply_in_order_with_context_and_anchors() {
    let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
    // Without an anchor the context fits twice: refused, with both lines.
    let e = update(text, &[chunk(None, &["    x();"], &["    y();"])])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fit 2 places") && e.contains("at lines 2, 5"),
        "{e}"
    );
    // The @@ line says which.
    let (t, level) = update(
        text,
        &[chunk(Some("fn b() {"), &["    x();"], &["    y();"])],
    )
    .unwrap();
    assert_eq!(level, Level::Exact);
    assert_eq!(t, "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n");
    // Two chunks, the second after the first.
    let (t, _) = update(
        text,
        &[
            chunk(None, &["fn a() {", "    x();"], &["fn a() {", "    a();"]),
            chunk(None, &["    x();"], &["    b();"]),
        ],
    )
    .unwrap();
    assert_eq!(t, "fn a() {\n    a();\n}\nfn b() {\n    b();\n}\n");
}

#[test]
fn drifted_context_matches_leniently_and_keeps_the_files_lines() {
    let text = "def f():\n\tif a:   \n\t\treturn \u{201c}x\u{201d}\n";
    // Spaces for tabs, straight quotes, no trailing spaces.
    let (t, level) = update(
        text,
        &[chunk(
            None,
            &["    if a:", "        return \"x\""],
            &["    if a:", "        return \"x\"", "    return None"],
        )],
    )
    .unwrap();
    assert_eq!(level, Level::Punctuation);
    assert_eq!(
        t,
        "def f():\n\tif a:   \n\t\treturn \u{201c}x\u{201d}\n\treturn None\n"
    );
}

#[test]
fn a_missing_chunk_shows_the_closest_region() {
    let text: String = (1..=10).map(|i| format!("item {i}\n")).collect();
    let e = update(
        &text,
        &[chunk(None, &["item 4", "item five", "item 6"], &["x"])],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("were not found") && e.contains("\n5| item 5\n"),
        "{e}"
    );
    let e = update(&text, &[chunk(Some("nowhere"), &["item 4"], &["x"])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("the @@ line \"nowhere\" was not found"), "{e}");
}

#[test]
fn additions_only_go_after_the_anchor_or_at_the_end() {
    let (t, _) = update("a\nb", &[chunk(None, &[], &["c"])]).unwrap();
    assert_eq!(t, "a\nb\nc\n");
    let (t, _) = update("a\nb\n", &[chunk(Some("a"), &[], &["between"])]).unwrap();
    assert_eq!(t, "a\nbetween\nb\n");
}

/// Records what it was asked and answers with `answer`.
struct Recording {
    asked: Mutex<Vec<ApprovalRequest>>,
    answer: Approval,
}

#[async_trait]
impl crate::tools::Approver for Recording {
    async fn approve(&self, request: ApprovalRequest) -> Approval {
        self.asked.lock().unwrap().push(request);
        self.answer.clone()
    }
}

#[tokio::test]
async fn one_approval_for_every_file_and_all_or_nothing() {
    let d = tempdir("all");
    std::fs::write(d.join("a.txt"), "one\r\ntwo\r\n").unwrap();
    std::fs::write(d.join("gone.txt"), "bye\n").unwrap();
    std::fs::write(d.join("old.txt"), "moving\n").unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n one\n-two\n+2\n*** Add File: sub/new.txt\n+fresh\n\
                 *** Delete File: gone.txt\n*** Update File: old.txt\n*** Move to: moved.txt\n-moving\n+moved\n*** End Patch";
    let approver = Arc::new(Recording {
        asked: Default::default(),
        answer: Approval::Denied {
            reason: "no".into(),
        },
    });
    let ctx = ToolContext::local(d.clone(), approver.clone());
    let out = ApplyPatchTool::new(4000)
        .execute(json!({"input": patch}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.text, "no file changed: no");
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let p = |n: &str| d.join(n).display().to_string();
    assert_eq!(
        asked[0].command,
        format!(
            "apply_patch: update {}; add {}; delete {}; move {} to {}",
            p("a.txt"),
            p("sub/new.txt"),
            p("gone.txt"),
            p("old.txt"),
            p("moved.txt")
        )
    );
    let detail = asked[0].detail.clone().unwrap();
    for part in ["-two\n+2\n", "+fresh\n", "(deleted)", "-moving\n+moved\n"] {
        assert!(detail.contains(part), "{part:?} in {detail}");
    }
    assert!(!d.join("sub").exists() && d.join("gone.txt").exists());

    // Approved: every file as the patch says, CRLF kept.
    let ctx = ToolContext::local(d.clone(), Arc::new(AlwaysApprove));
    ApplyPatchTool::new(4000)
        .execute(json!({"input": patch}), &ctx)
        .await
        .unwrap();
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"one\r\n2\r\n");
    assert_eq!(
        std::fs::read_to_string(d.join("sub/new.txt")).unwrap(),
        "fresh\n"
    );
    assert!(!d.join("gone.txt").exists() && !d.join("old.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("moved.txt")).unwrap(),
        "moved\n"
    );

    // One chunk that does not fit: no file changes at all.
    let bad = "*** Begin Patch\n*** Update File: a.txt\n-2\n+3\n*** Update File: moved.txt\n-nothing like it\n+x\n*** End Patch";
    let e = ApplyPatchTool::new(4000)
        .execute(json!({"input": bad}), &ctx)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("cannot update"), "{e}");
    assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"one\r\n2\r\n");
    // A file that does not parse says where.
    let e = ApplyPatchTool::new(4000)
        .execute(
            json!({"input": "*** Begin Patch\n*** Update File: a.txt\n?\n*** End Patch"}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the patch does not parse: patch line 3:"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[tokio::test]
async fn buddys_own_files_are_refused_before_anything() {
    let d = tempdir("own");
    std::fs::write(d.join("buddy.toml"), "[tools]\n").unwrap();
    let ctx = ToolContext::local(d.clone(), Arc::new(AlwaysApprove));
    let tool = ApplyPatchTool::new(1000).protecting(
        crate::tools::protect::Protected::new().file("config file", &d.join("buddy.toml")),
    );
    let patch =
        "*** Begin Patch\n*** Add File: fine.txt\n+x\n*** Delete File: buddy.toml\n*** End Patch";
    let e = tool
        .execute(json!({"input": patch}), &ctx)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("buddy's own config file"), "{e}");
    assert!(d.join("buddy.toml").exists() && !d.join("fine.txt").exists());
    std::fs::remove_dir_all(&d).unwrap();
}
