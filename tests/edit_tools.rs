//! End-to-end tests of the in-place edit tools, `edit_file` and
//! `apply_patch`: the real binary, driven by the scripted fake provider,
//! editing real files in its working directory. Which tool a model gets,
//! what each call's result tells the model, and what the files hold after.

use crate::support;

use serde_json::json;
use support::calls::call;
use support::fake_provider::{tool_result, FakeProvider, RecordedRequest, Reply};
use support::{fake_config, BuddyCmd};

/// Approvals off, so the edits run without a terminal; `model` replaces
/// the fake profile's model id.
fn config(p: &FakeProvider, model: &str, extra: &str) -> String {
    fake_config(p).replace("\"fake-model\"", &format!("{model:?}"))
        + &format!("\n[tools]\nshell_confirm = false\n{extra}\n")
}

/// The tool names a request offered.
fn offered(req: &RecordedRequest) -> Vec<String> {
    req.json()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect()
}

/// The result of call `id`, from the request right after it.
fn result(p: &FakeProvider, id: &str) -> String {
    let reqs = p.chat_requests();
    let req = reqs
        .iter()
        .find(|r| {
            r.body_text()
                .contains(&format!("\"tool_call_id\":\"{id}\""))
        })
        .unwrap_or_else(|| panic!("no request carries the result of {id}"));
    tool_result(req, id)
}

const LIB: &str = "pub fn total(items: &[Item]) -> u32 {\n    let mut sum = 0;\n    for item in items {\n        sum += item.price;\n    }\n    sum\n}\n\npub fn count(items: &[Item]) -> usize {\n    let mut sum = 0;\n    for item in items {\n        sum += 1;\n    }\n    sum\n}\n";

#[test]
fn edit_file_places_exact_and_drifted_edits_and_refuses_ambiguous_and_missing_ones() {
    let p = FakeProvider::start(vec![
        call(
            "exact",
            "edit_file",
            json!({"path": "lib.rs", "old_string": "sum += item.price;", "new_string": "sum += item.price * item.qty;"}),
        ),
        // Re-indented by two spaces, trailing blanks, curly quotes: the
        // drift a model's copy of a file shows.
        call(
            "drifted",
            "edit_file",
            json!({"path": "lib.rs", "old_string": "pub fn count(items: &[Item]) -> usize {  \n  let mut sum = 0;\n", "new_string": "pub fn count(items: &[Item]) -> usize {\n  // how many\n  let mut sum = 0;\n"}),
        ),
        call(
            "ambiguous",
            "edit_file",
            json!({"path": "lib.rs", "old_string": "    sum\n}\n", "new_string": "    sum as u32\n}\n"}),
        ),
        call(
            "missing",
            "edit_file",
            json!({"path": "lib.rs", "old_string": "    for item in items.iter() {\n        sum += 1;\n", "new_string": "x"}),
        ),
        call(
            "crlf",
            "edit_file",
            json!({"path": "win.txt", "old_string": "second\nthird", "new_string": "2nd\nthird"}),
        ),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "fake-model", ""))
        .args(["exec", "edit please"]);
    std::fs::write(cmd.work_dir().join("lib.rs"), LIB).unwrap();
    std::fs::write(
        cmd.work_dir().join("win.txt"),
        "first\r\nsecond\r\nthird\r\n",
    )
    .unwrap();
    let out = cmd.run();
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
    let reqs = p.chat_requests();
    let tools = offered(&reqs[0]);
    assert!(tools.contains(&"edit_file".to_string()), "{tools:?}");
    assert!(!tools.contains(&"apply_patch".to_string()), "{tools:?}");

    let lib = cmd.work_dir().join("lib.rs");
    let shown = lib.display().to_string();
    assert_eq!(
        result(&p, "exact"),
        format!("edited {shown}: line 4 (exact match)")
    );
    assert_eq!(
        result(&p, "drifted"),
        format!("edited {shown}: line 9 (matched ignoring indentation and trailing whitespace)")
    );
    let ambiguous = result(&p, "ambiguous");
    assert!(
        ambiguous.contains("matches 2 places (exact match) at lines 6, 15; nothing was changed"),
        "{ambiguous}"
    );
    let missing = result(&p, "missing");
    assert!(missing.contains("old_string was not found"), "{missing}");
    assert!(
        missing.contains("12|     for item in items {\n13|         sum += 1;"),
        "{missing}"
    );
    // Only the two placed edits changed the file, the new line in the
    // file's own four-space indentation.
    let want = LIB
        .replace("sum += item.price;", "sum += item.price * item.qty;")
        .replace(
            "-> usize {\n    let mut sum",
            "-> usize {\n    // how many\n    let mut sum",
        );
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), want);
    assert_eq!(
        std::fs::read(cmd.work_dir().join("win.txt")).unwrap(),
        b"first\r\n2nd\r\nthird\r\n"
    );
}

#[test]
fn gpt_models_get_apply_patch_and_a_patch_changes_every_file_or_none() {
    let patch = "*** Begin Patch\n*** Update File: lib.rs\n@@ pub fn count(items: &[Item]) -> usize {\n     let mut sum = 0;\n     for item in items {\n-        sum += 1;\n+        sum += item.qty;\n*** Add File: notes/todo.md\n+- ship it\n*** Delete File: old.txt\n*** End Patch";
    let broken = "*** Begin Patch\n*** Update File: lib.rs\n-    sum\n+    sum + 1\n*** Add File: other.md\n+x\n*** End Patch";
    let p = FakeProvider::start(vec![
        call("bad", "apply_patch", json!({ "input": broken })),
        call("good", "apply_patch", json!({ "input": patch })),
        Reply::text("patched"),
    ]);
    let cmd = BuddyCmd::new()
        .config(config(&p, "gpt-5.1-codex", ""))
        .args(["exec", "patch please"]);
    let dir = cmd.work_dir();
    std::fs::write(dir.join("lib.rs"), LIB).unwrap();
    std::fs::write(dir.join("old.txt"), "obsolete\n").unwrap();
    let out = cmd.run();
    out.assert_success();
    let tools = offered(&p.chat_requests()[0]);
    assert!(tools.contains(&"apply_patch".to_string()), "{tools:?}");
    assert!(!tools.contains(&"edit_file".to_string()), "{tools:?}");

    // The first patch's chunk fits twice: nothing at all was written,
    // not even the file it would have added.
    let bad = result(&p, "bad");
    assert!(
        bad.contains("fit 2 places") && bad.contains("at lines 6, 14"),
        "{bad}"
    );
    assert!(!dir.join("other.md").exists());

    let good = result(&p, "good");
    assert!(good.starts_with("applied the patch: update "), "{good}");
    let want = LIB.replace("sum += 1;", "sum += item.qty;");
    assert_eq!(std::fs::read_to_string(dir.join("lib.rs")).unwrap(), want);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes/todo.md")).unwrap(),
        "- ship it\n"
    );
    assert!(!dir.join("old.txt").exists());

    // The config picks edit_file for the same model.
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let out = BuddyCmd::new()
        .config(config(&p, "gpt-5.1-codex", "edit_format = \"edit\""))
        .args(["exec", "hi"])
        .run();
    out.assert_success();
    let tools = offered(&p.chat_requests()[0]);
    assert!(
        tools.contains(&"edit_file".to_string()) && !tools.contains(&"apply_patch".to_string()),
        "{tools:?}"
    );
}

#[test]
fn a_denied_edit_or_patch_changes_nothing_and_tells_the_model() {
    let delete =
        "*** Begin Patch\n*** Delete File: lib.rs\n*** Update File: b.txt\n-b\n+c\n*** End Patch";
    for (model, tool, args, told) in [
        (
            "fake-model",
            "edit_file",
            json!({"path": "lib.rs", "old_string": "pub fn total", "new_string": "pub fn sum"}),
            "file not changed: ",
        ),
        (
            "gpt-5",
            "apply_patch",
            json!({ "input": delete }),
            "no file changed: ",
        ),
    ] {
        let p = FakeProvider::start(vec![call("c", tool, args), Reply::text("ok")]);
        // Approvals on, and no terminal to ask: the gate says no.
        let toml = fake_config(&p).replace("\"fake-model\"", &format!("{model:?}"));
        let cmd = BuddyCmd::new().config(toml).args(["exec", "edit"]);
        std::fs::write(cmd.work_dir().join("lib.rs"), LIB).unwrap();
        std::fs::write(cmd.work_dir().join("b.txt"), "b\n").unwrap();
        let out = cmd.run();
        out.assert_success();
        let r = result(&p, "c");
        assert!(r.starts_with(told), "{tool}: {r}");
        assert_eq!(
            std::fs::read_to_string(cmd.work_dir().join("lib.rs")).unwrap(),
            LIB
        );
        assert_eq!(
            std::fs::read_to_string(cmd.work_dir().join("b.txt")).unwrap(),
            "b\n"
        );
    }
}
