use super::*;
use crate::tools::approval::AlwaysApprove;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

fn tempdir(label: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("buddy-edit-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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

fn recording(answer: Approval) -> Arc<Recording> {
    Arc::new(Recording {
        asked: Default::default(),
        answer,
    })
}

#[tokio::test]
async fn crlf_bom_final_newline_and_mode_are_kept() {
    let d = tempdir("keep");
    let p = d.join("w.txt");
    std::fs::write(&p, "\u{feff}one\r\ntwo\r\nthree").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
    let ctx = ToolContext::local(d.clone(), Arc::new(AlwaysApprove));
    let out = EditFileTool::new(1000)
        .execute(
            json!({"path": "w.txt", "old_string": "two\n", "new_string": "2\n2b\n"}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        out.text,
        format!("edited {}: line 2 (exact match)", p.display())
    );
    assert_eq!(
        std::fs::read(&p).unwrap(),
        "\u{feff}one\r\n2\r\n2b\r\nthree".as_bytes()
    );
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o751
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[tokio::test]
async fn the_approval_shows_the_diff_and_a_denial_changes_nothing() {
    let d = tempdir("deny");
    let p = d.join("a.rs");
    let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&p, &text).unwrap();
    let approver = recording(Approval::Denied {
        reason: "not now".into(),
    });
    let ctx = ToolContext::local(d.clone(), approver.clone());
    let out = EditFileTool::new(1000)
        .execute(
            json!({"path": "a.rs", "old_string": "line 20\n", "new_string": "line twenty\n"}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(out.text, "file not changed: not now");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool, "edit_file");
    assert_eq!(
        asked[0].command,
        format!("edit_file {} (1 edit, +1 -1 lines)", p.display())
    );
    let diff = asked[0].detail.clone().unwrap();
    assert!(
        diff.contains(
            "@@ -17,7 +17,7 @@\n line 17\n line 18\n line 19\n-line 20\n+line twenty\n line 21\n"
        ),
        "{diff}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[tokio::test]
async fn a_failed_match_asks_nobody_and_buddys_files_are_refused() {
    let d = tempdir("refuse");
    std::fs::write(d.join("x.txt"), "a\nb\na\n").unwrap();
    std::fs::write(d.join("buddy.toml"), "[tools]\n").unwrap();
    let approver = recording(Approval::Approved);
    let ctx = ToolContext::local(d.clone(), approver.clone());
    let tool = EditFileTool::new(1000).protecting(
        crate::tools::protect::Protected::new().file("config file", &d.join("buddy.toml")),
    );
    let e = tool
        .execute(
            json!({"path": "x.txt", "old_string": "a", "new_string": "c"}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("matches 2 places"), "{e}");
    let e = tool
        .execute(
            json!({"path": "buddy.toml", "old_string": "[tools]", "new_string": "[agent]"}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("buddy's own config file"), "{e}");
    assert!(approver.asked.lock().unwrap().is_empty());
    assert_eq!(
        std::fs::read_to_string(d.join("buddy.toml")).unwrap(),
        "[tools]\n"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[tokio::test]
async fn an_edits_list_is_all_or_nothing_and_an_empty_old_string_creates() {
    let d = tempdir("list");
    let p = d.join("l.txt");
    std::fs::write(&p, "a = 1\nb = 2\n").unwrap();
    let ctx = ToolContext::local(d.clone(), Arc::new(AlwaysApprove));
    let tool = EditFileTool::new(1000);
    let e = tool
        .execute(
            json!({"path": "l.txt", "edits": [
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "nope", "new_string": "x"}
            ]}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("edit 2 of 2: old_string was not found"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "a = 1\nb = 2\n");
    let out = tool
        .execute(
            json!({"path": "l.txt", "edits": [
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "b = 2", "new_string": "b = 20"}
            ]}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(
        out.text
            .contains("line 1 (exact match); line 2 (exact match)"),
        "{}",
        out.text
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "a = 10\nb = 20\n");
    // Creating: only where nothing is.
    tool.execute(
        json!({"path": "new/n.txt", "old_string": "", "new_string": "hi"}),
        &ctx,
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(d.join("new/n.txt")).unwrap(), "hi");
    let e = tool
        .execute(
            json!({"path": "l.txt", "old_string": "", "new_string": "x"}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    let e = tool
        .execute(json!({"path": "l.txt", "old_string": "a"}), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(e, ToolError::InvalidArguments(_)), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
