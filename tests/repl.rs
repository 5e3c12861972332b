//! End-to-end tests of the interactive REPL: the real binary in a real tmux pane
//! (its own tmux server per test), typed at with `send-keys` and read back with
//! `capture-pane`, against the fake provider.

use crate::support;

use serde_json::{json, Value};
use support::fake_provider::{tool_result, FakeProvider, RecordedRequest, Reply, ToolCallSpec};
use support::tmux::Tmux;
use support::{fake_config, BuddyCmd};

const CANCELLED: &str = "operation cancelled by user";

fn shell(id: &str, command: &str) -> ToolCallSpec {
    ToolCallSpec::new(id, "run_shell", json!({ "command": command }).to_string())
}

fn no_confirm(p: &FakeProvider) -> String {
    format!("{}\n[tools]\nshell_confirm = false\n", fake_config(p))
}

fn messages(req: &RecordedRequest) -> Vec<Value> {
    req.json()["messages"].as_array().expect("messages").clone()
}

fn last_user(req: &RecordedRequest) -> String {
    messages(req)
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Starts the REPL and waits for its first prompt.
fn repl(cmd: &BuddyCmd, args: &[&str]) -> Tmux {
    let t = Tmux::start(cmd, args);
    t.wait_for("the prompt", |s| {
        s.lines().any(|l| l.starts_with("> ")) || s.contains("\n>")
    });
    t
}

#[test]
fn a_prompt_streams_its_answer_above_a_fresh_prompt() {
    let p = FakeProvider::start(vec![Reply::text("first line\nsecond line of the answer")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("hello there");
    let screen = t.wait_text("second line of the answer");
    let lines: Vec<&str> = screen.lines().collect();
    let asked = lines
        .iter()
        .position(|l| *l == "> hello there")
        .expect("echo");
    assert_eq!(lines[asked + 1], "first line");
    assert_eq!(lines[asked + 2], "second line of the answer");
    t.wait_for("an empty prompt", |s| s.lines().nth(asked + 3) == Some(">"));
    assert_eq!(last_user(&p.chat_requests()[0]), "hello there");
}

#[test]
fn history_is_recalled_with_up_and_kept_across_runs() {
    let p = FakeProvider::start_repeating(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("the first prompt");
    t.wait_text("ok");
    t.line("the second prompt");
    t.wait_for("two answers", |s| s.matches("\nok").count() >= 2);
    t.keys(&["Up", "Up"]);
    t.wait_for("recall", |_| t.cursor_line() == "> the first prompt");
    t.keys(&["Down"]);
    t.wait_for("newer entry", |_| t.cursor_line() == "> the second prompt");
    t.keys(&["C-u", "C-d"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    drop(t);
    let again = repl(&cmd, &[]);
    again.keys(&["Up"]);
    again.wait_for("recall from the file", |_| {
        again.cursor_line() == "> the second prompt"
    });
}

#[test]
fn alt_enter_makes_a_multi_line_prompt() {
    let p = FakeProvider::start(vec![Reply::text("got both lines")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.type_text("line one");
    t.keys(&["M-Enter"]);
    t.type_text("line two");
    t.wait_text("  line two");
    t.keys(&["Enter"]);
    t.wait_text("got both lines");
    assert_eq!(last_user(&p.chat_requests()[0]), "line one\nline two");
}

#[test]
fn tab_completes_slash_commands() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd, &[]);
    t.type_text("/he");
    t.wait_for("the hint", |_| t.cursor_line() == "> /help");
    t.keys(&["Tab", "Enter"]);
    t.wait_text("/session new");
    t.line("/stauts");
    t.wait_text("did you mean /status?");
}

#[test]
fn a_long_task_shows_in_ps_and_kill_cancels_it_with_a_valid_history() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", "sleep 30")]),
        Reply::text("after the kill"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &[]);
    t.line("take a nap");
    t.wait_text("[task 1] running run_shell");
    t.line("/ps");
    t.wait_text("task 1  running run_shell");
    // Help and status work while a task runs.
    t.line("/help");
    t.wait_text("/session new");
    t.line("/kill 1");
    t.wait_text("task 1 cancelled");
    t.line("are you back?");
    t.wait_text("after the kill");
    let req = &p.chat_requests()[1];
    assert_eq!(tool_result(req, "nap"), CANCELLED);
    assert_eq!(last_user(req), "are you back?");
}

#[test]
fn approvals_answered_yes_and_no_reach_the_model() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "expr approved-output")]),
        Reply::tool_calls(vec![shell("two", "expr never-runs")]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("do two things");
    t.wait_for("the first approval", |_| {
        t.cursor_line()
            .contains("$ expr approved-output -- approve?")
    });
    t.line("y");
    t.wait_for("the second approval", |_| {
        t.cursor_line().contains("$ expr never-runs -- approve?")
    });
    t.line("n");
    t.wait_text("finished");
    let reqs = p.chat_requests();
    assert!(tool_result(&reqs[1], "one").contains("approved-output"));
    let denied = tool_result(&reqs[2], "two");
    assert!(denied.contains("denied"), "{denied}");
}

#[test]
fn approve_all_runs_commands_without_asking() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "echo ran-unasked")]),
        Reply::text("done"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("/approve all");
    t.wait_text("approval: approve every shell command");
    t.line("go");
    t.wait_text("done");
    assert!(t.screen().contains("auto-approved: echo ran-unasked"));
    assert!(tool_result(&p.chat_requests()[1], "one").contains("ran-unasked"));
}

#[test]
fn a_timeout_cancels_the_task() {
    let p = FakeProvider::start(vec![Reply::tool_calls(vec![shell("nap", "sleep 30")])]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &[]);
    t.line("nap");
    t.wait_text("running run_shell");
    t.line("/timeout 1s");
    t.wait_text("task 1 will be cancelled in 1s");
    t.wait_text("task 1 reached its timeout");
    t.wait_text("task 1 cancelled");
}

#[test]
fn ctrl_c_cancels_the_running_task() {
    let p = FakeProvider::start(vec![Reply::tool_calls(vec![shell("nap", "sleep 30")])]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &[]);
    t.line("nap");
    t.wait_text("running run_shell");
    t.keys(&["C-c"]);
    t.wait_text("task 1 cancelled");
    // Idle again: the status line is gone and a new prompt is accepted.
    t.wait_for("idle", |s| !s.contains("[task 1]"));
}

#[test]
fn ctrl_d_exits_and_restores_the_terminal() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd, &[]);
    t.type_text("abc");
    t.keys(&["C-d"]);
    // Not empty: Ctrl-D deletes (nothing under the cursor) and does not exit.
    t.keys(&["C-u", "C-d"]);
    assert_eq!(t.wait_exit(&cmd.work_dir()), 0);
    let before = std::fs::read_to_string(cmd.work_dir().join("tty-before")).unwrap();
    let after = std::fs::read_to_string(cmd.work_dir().join("tty-after")).unwrap();
    assert_eq!(before, after, "terminal settings differ after exit");
    assert!(
        before.contains(" icanon") && before.contains(" echo "),
        "{before}"
    );
}

#[test]
fn resume_opens_the_repl_on_the_saved_history() {
    let p = FakeProvider::start(vec![
        Reply::text("the saved answer"),
        Reply::text("continued"),
    ]);
    let cmd = BuddyCmd::new()
        .config_for(&p)
        .args(["exec", "the saved question"]);
    cmd.run().assert_success();
    let t = repl(&cmd, &["resume", "--last"]);
    // The saved exchange is replayed as the REPL showed it.
    let screen = t.wait_text("the saved answer");
    let lines: Vec<&str> = screen.lines().collect();
    let asked = lines
        .iter()
        .position(|l| *l == "> the saved question")
        .unwrap_or_else(|| panic!("no replayed prompt:\n{screen}"));
    assert_eq!(lines[asked + 1], "the saved answer");
    t.line("and then?");
    t.wait_text("continued");
    let req = &p.chat_requests()[1];
    let contents: Vec<String> = messages(req)
        .iter()
        .skip(1)
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        contents,
        ["the saved question", "the saved answer", "and then?"]
    );
}

#[test]
fn an_unfinished_line_shows_while_it_streams() {
    use support::fake_provider::{Gate, SseChunk};
    let rest = Gate::new();
    let p = FakeProvider::start(vec![Reply::sse(vec![
        SseChunk::data(
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "first half"}}]}),
        ),
        SseChunk::gate(&rest),
        SseChunk::data(
            json!({"choices": [{"index": 0, "delta": {"content": " and the rest"}, "finish_reason": "stop"}]}),
        ),
        SseChunk::done(),
    ])]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("stream please");
    let early = t.wait_text("first half");
    assert!(!early.contains("and the rest"), "{early}");
    rest.open();
    let done = t.wait_text("first half and the rest");
    assert_eq!(done.matches("first half").count(), 1, "{done}");
}

#[test]
fn a_long_line_wraps_and_keeps_its_cursor() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd, &[]);
    let long: String = (0..15).map(|i| format!("word{i:02}xxxx ")).collect();
    t.type_text(long.trim_end());
    // 2 + 164 characters on a 100-column screen: two rows, cursor on the second.
    t.wait_for("the wrap", |_| t.cursor_line().ends_with("word14xxxx"));
    let screen = t.screen();
    assert!(screen.contains(&format!("> {}", &long[..98])), "{screen}");
    t.keys(&["C-a"]);
    t.wait_for("the cursor at the start", |_| {
        t.cursor_line().starts_with("> word00")
    });
}

#[test]
fn a_bracketed_paste_is_one_multi_line_input() {
    let p = FakeProvider::start(vec![Reply::text("pasted")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    let buf = cmd.work_dir().join("paste.txt");
    std::fs::write(&buf, "pasted one\npasted two").unwrap();
    // tmux wraps the buffer in paste brackets when the program asked for them.
    t.tmux_cmd(&["load-buffer", buf.to_str().unwrap()]);
    t.tmux_cmd(&["paste-buffer", "-p", "-t", "buddy-test"]);
    t.wait_text("  pasted two");
    t.keys(&["Enter"]);
    t.wait_text("\npasted\n");
    assert_eq!(last_user(&p.chat_requests()[0]), "pasted one\npasted two");
}

#[test]
fn model_picker_offers_the_servers_models_and_keeps_the_profile() {
    let p = FakeProvider::start(vec![Reply::text("from big"), Reply::text("from typed")])
        .with_models(&["fake-model", "fake-big"]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("/model");
    t.wait_text("models of profile fake:");
    t.wait_text("fake-model  (in use)");
    // One profile, then the two models: the second model is two steps down.
    t.keys(&["Down"]);
    t.keys(&["Down"]);
    t.wait_for("the selection to reach fake-big", |s| {
        s.contains("›    fake-big")
    });
    t.keys(&["Enter"]);
    t.wait_text("now using fake-big (profile fake)");
    t.line("hi");
    t.wait_text("from big");
    t.wait_idle();
    // A name that is no profile is a model id for the profile in use.
    t.line("/model typed-id");
    t.wait_text("now using typed-id (profile fake)");
    t.line("again");
    t.wait_text("from typed");
    let reqs = p.chat_requests();
    assert_eq!(reqs[0].model(), Some("fake-big"));
    assert_eq!(reqs[1].model(), Some("typed-id"));
    assert_eq!(
        reqs[1].header("authorization").as_deref(),
        Some("Bearer sk-fake"),
        "the profile's key stays"
    );
}

#[test]
fn model_picker_and_index_switch_the_profile_mid_session() {
    let p = FakeProvider::start(vec![Reply::text("from two"), Reply::text("from one")]);
    let toml = format!(
        "{}\n[models.second]\napi_base_url = \"{}\"\nmodel = \"fake-model-2\"\n",
        fake_config(&p),
        p.base_url()
    );
    let cmd = BuddyCmd::new().config(toml);
    let t = repl(&cmd, &[]);
    t.line("/model");
    t.wait_text("pick a model profile");
    t.keys(&["Down"]);
    t.wait_for("the selection to move", |s| s.contains("› 2  second"));
    t.keys(&["Enter"]);
    t.wait_text("now using fake-model-2 (profile second)");
    t.line("hi");
    t.wait_text("from two");
    t.wait_idle();
    t.line("/model 1");
    t.wait_text("now using fake-model (profile fake)");
    t.line("and you?");
    t.wait_text("from one");
    let reqs = p.chat_requests();
    assert_eq!(reqs[0].model(), Some("fake-model-2"));
    assert_eq!(reqs[1].model(), Some("fake-model"));
    // The history carried over the switch.
    assert_eq!(messages(&reqs[1]).len(), 4);
    t.line("/status");
    t.wait_text("model      fake-model (profile fake)");
}

#[test]
fn session_commands_list_start_and_resume() {
    let p = FakeProvider::start_repeating(vec![Reply::text("noted")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("remember the blue door");
    t.wait_text("noted");
    t.wait_idle();
    t.line("/session");
    t.wait_text("remember the blue door");
    t.line("/session new");
    t.wait_text("new session");
    t.line("a fresh start");
    t.wait_for("the second answer", |s| s.matches("noted").count() >= 2);
    t.wait_idle();
    assert_eq!(
        messages(&p.chat_requests()[1]).len(),
        2,
        "the new session starts empty"
    );
    let first = std::fs::read_dir(cmd.work_dir().join(".buddyx/sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|path| std::fs::read_to_string(path).unwrap().contains("blue door"))
        .unwrap();
    let id = first.file_stem().unwrap().to_str().unwrap().to_string();
    t.line(&format!("/session resume {}", &id[..id.len() - 1]));
    t.wait_text(&format!("resumed session {id}"));
    t.line("which door?");
    // The resumed exchange on screen already shows "noted" again, so wait for
    // the request itself, not for the screen.
    let reqs = p.wait_for_requests(3, std::time::Duration::from_secs(15));
    let req = &reqs[2];
    assert_eq!(messages(req)[1]["content"], "remember the blue door");
    assert_eq!(last_user(req), "which door?");
}

#[test]
fn sigterm_restores_the_terminal_and_keeps_the_session() {
    let p = FakeProvider::start(vec![Reply::text("saved before the kill")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("one prompt");
    t.wait_text("saved before the kill");
    let shell_pid = t.tmux_cmd(&["display-message", "-p", "-t", "buddy-test", "#{pane_pid}"]);
    let out = std::process::Command::new("pkill")
        .args(["-TERM", "-P", shell_pid.trim()])
        .status()
        .unwrap();
    assert!(out.success());
    assert_eq!(t.wait_exit(&cmd.work_dir()), 143);
    let before = std::fs::read_to_string(cmd.work_dir().join("tty-before")).unwrap();
    let after = std::fs::read_to_string(cmd.work_dir().join("tty-after")).unwrap();
    assert_eq!(before, after);
    let sessions = cmd.rerun(["sessions"]);
    assert!(
        sessions.stdout.contains("one prompt"),
        "{}",
        sessions.stdout
    );
}

#[test]
fn wide_characters_edit_as_single_steps() {
    let p = FakeProvider::start(vec![Reply::text("ok")]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.type_text("日本語abc");
    t.wait_for("the text", |_| t.cursor_line() == "> 日本語abc");
    t.keys(&["Left", "Left", "Left", "BSpace"]);
    t.wait_for("one wide character gone", |_| {
        t.cursor_line() == "> 日本abc"
    });
    // The cursor sits after 本: prompt (2) + two wide characters (4).
    let x = t.tmux_cmd(&["display-message", "-p", "-t", "buddy-test", "#{cursor_x}"]);
    assert_eq!(x.trim(), "6");
    t.type_text("é");
    t.keys(&["Enter"]);
    t.wait_text("\nok");
    assert_eq!(last_user(&p.chat_requests()[0]), "日本éabc");
}

/// The managed session the banner names: `buddy-<dir>-<hash of its path>`.
fn managed_session(banner: &str) -> String {
    let name = banner
        .split("tmux session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session in the banner: {banner}"));
    assert!(name.starts_with("buddy-work-"), "{name}");
    name.to_string()
}

#[test]
fn the_default_pane_runs_commands_in_the_project_directory() {
    // A name no earlier run can have left in /.
    let name = format!("buddy-touched-{}", std::process::id());
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("t", &format!("touch {name}; pwd"))]),
        Reply::text("touched it"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let project = cmd.work_dir().canonicalize().expect("work dir");
    // No flags: the REPL's default, a shared pane in a new session.
    let t = repl(&cmd, &[]);
    t.line("make the file");
    t.wait_text("touched it");
    assert!(project.join(&name).exists(), "not in the project directory");
    assert!(
        !std::path::Path::new("/").join(&name).exists(),
        "landed in /"
    );
    assert!(
        tool_result(&p.chat_requests()[1], "t")
            .ends_with(&format!("stdout:\n{}", project.display())),
        "{}",
        tool_result(&p.chat_requests()[1], "t")
    );
}

#[test]
fn the_banner_says_where_shell_commands_run_and_how_to_watch() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "echo seen-in-the-pane")]),
        Reply::text("ran it"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &[]);
    // Joined, since the attach line is wider than the pane.
    let joined = |t: &Tmux, target: &str| t.tmux_cmd(&["capture-pane", "-p", "-J", "-t", target]);
    let banner = joined(&t, "buddy-test");
    let session = managed_session(&banner);
    assert!(
        banner.contains(&format!(
            "shell commands run in tmux session {session} (window buddy-shared) in {}; watch with: tmux attach -t {session}",
            cmd.work_dir().display()
        )),
        "{banner}"
    );
    t.line("run it");
    t.wait_text("ran it");
    let pane = joined(&t, &format!("={session}:buddy-shared"));
    assert!(pane.contains("$ echo seen-in-the-pane"), "{pane}");
    assert!(tool_result(&p.chat_requests()[1], "one").ends_with("stdout:\nseen-in-the-pane"));

    // With --no-tmux, commands run directly and there is nothing to attach to.
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("two", "echo direct")]),
        Reply::text("ran directly"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &["--no-tmux"]);
    t.line("run it");
    t.wait_text("ran directly");
    let screen = joined(&t, "buddy-test");
    assert!(!screen.contains("tmux attach"), "{screen}");
    let sessions = t.tmux_cmd(&["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(
        sessions.trim(),
        "buddy-test",
        "a managed session was created"
    );
    assert!(tool_result(&p.chat_requests()[1], "two").ends_with("stdout:\ndirect"));
}

#[test]
fn model_switch_from_completions_to_messages_keeps_the_tool_history() {
    // One fake server answers both protocols (it replies in the shape of the
    // path asked for).
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("call-1", "echo from-the-tool")]),
        Reply::text("first answer done"),
        Reply::text("claude carries on"),
    ]);
    let config = format!(
        "[agent]\nmodel = \"chat\"\n\n\
         [models.chat]\napi_base_url = \"{url}\"\nmodel = \"fake-model\"\napi_key = \"sk-fake\"\n\n\
         [models.claude]\napi_base_url = \"{url}\"\napi = \"messages\"\nmodel = \"fake-claude\"\napi_key = \"sk-ant\"\n\n\
         [tools]\nshell_confirm = false\n",
        url = p.base_url()
    );
    let cmd = BuddyCmd::new().config(config);
    let t = repl(&cmd, &["--no-tmux"]);
    t.line("run the tool");
    t.wait_text("first answer done");
    t.wait_idle();
    t.line("/model claude");
    t.wait_text("now using fake-claude (profile claude)");
    t.line("and now?");
    t.wait_text("claude carries on");
    let reqs = p.requests();
    assert!(
        reqs[1].path.ends_with("/chat/completions"),
        "{}",
        reqs[1].path
    );
    let last = &reqs[2];
    assert!(last.path.ends_with("/messages"), "{}", last.path);
    assert_eq!(last.json()["model"], "fake-claude");
    assert!(
        last.json()["system"].to_string().contains("buddy"),
        "system prompt moved to the top level"
    );
    let messages = last.json()["messages"].as_array().expect("messages");
    // user, assistant tool_use, user tool_result, assistant text, user.
    let use_block = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_use")
        .expect("the tool call carried over");
    assert_eq!(use_block["id"], "call-1");
    assert_eq!(use_block["input"]["command"], "echo from-the-tool");
    let result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .expect("the tool result carried over");
    assert_eq!(result["tool_use_id"], "call-1");
    assert!(
        result["content"].to_string().contains("from-the-tool"),
        "{result}"
    );
    assert_eq!(messages.last().unwrap()["role"], "user");
    assert!(messages.last().unwrap().to_string().contains("and now?"));
}

#[test]
fn login_from_the_repl_runs_the_device_flow() {
    let issuer = support::fake_issuer::FakeIssuer::start(1);
    let p = FakeProvider::start(vec![]);
    let cmd = BuddyCmd::new().config(format!("{}\n{}", fake_config(&p), issuer.config()));
    let t = repl(&cmd, &["--no-tmux"]);
    t.line("/login openai");
    t.wait_text(&format!(
        "enter the code {}",
        support::fake_issuer::USER_CODE
    ));
    // The prompt stays usable while the login waits.
    t.line("/status");
    t.wait_text("endpoint");
    t.wait_text("logged in to openai");
    let auth = cmd.config_home().join("buddy/auth.json");
    let stored = std::fs::read_to_string(&auth).expect("auth.json");
    assert!(stored.contains("at-1"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&auth).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!t.screen().contains("at-1"), "a token reached the screen");
}

/// `no_confirm` plus lines for `[agent]`.
fn agent_config(p: &FakeProvider, agent: &str) -> String {
    no_confirm(p).replace("[agent]\n", &format!("[agent]\n{agent}\n"))
}

#[test]
fn enter_while_a_slow_tool_runs_steers_and_skips_the_remaining_calls() {
    // The first call runs until the test has seen the steer queued (30 s at
    // most, should the test fail first).
    let cmd = BuddyCmd::new();
    let go = cmd.work_dir().join("go");
    let nap = format!(
        "i=0; until [ -e '{}' ] || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done",
        go.display()
    );
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", &nap), shell("two", "echo second")]),
        Reply::text("steered answer"),
    ]);
    let cmd = cmd.config(agent_config(&p, "tool_execution = \"sequential\""));
    let t = repl(&cmd, &[]);
    t.line("take a nap then echo");
    t.wait_text("[task 1] running run_shell");
    t.line("turn left instead");
    // Shown as pending until the running command finishes.
    t.wait_text("↳ steering: turn left instead");
    std::fs::write(&go, "").unwrap();
    t.wait_text("steered answer");
    let req = &p.chat_requests()[1];
    assert!(tool_result(req, "nap").contains("exit code: 0"));
    assert_eq!(
        tool_result(req, "two"),
        "skipped: the user sent a new message"
    );
    assert_eq!(last_user(req), "turn left instead");
    // The steer is echoed where it joined the conversation, and no longer pending.
    let screen = t.screen();
    assert!(screen.contains("> turn left instead"), "{screen}");
    t.wait_for("the queue emptied", |s| !s.contains("↳ steering"));
}

#[test]
fn tab_during_a_slow_reply_queues_a_follow_up_for_when_it_is_done() {
    let slow = support::fake_provider::Gate::new();
    let p = FakeProvider::start(vec![
        Reply::text("first answer").gated(&slow),
        Reply::text("follow-up answer"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("a slow question");
    t.wait_text("[task 1] waiting for model");
    t.type_text("and then this");
    t.keys(&["Tab"]);
    t.wait_text("↳ queued: and then this");
    slow.open();
    t.wait_text("follow-up answer");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(last_user(&reqs[0]), "a slow question");
    assert_eq!(last_user(&reqs[1]), "and then this");
    let screen = t.screen();
    let first = screen.find("first answer").expect("first answer shown");
    let echo = screen.find("> and then this").expect("follow-up echoed");
    assert!(first < echo, "{screen}");
}

#[test]
fn alt_up_takes_queued_messages_back_into_the_input() {
    let p = FakeProvider::start(vec![Reply::tool_calls(vec![shell("nap", "sleep 30")])]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &[]);
    t.line("nap");
    t.wait_text("[task 1] running run_shell");
    t.type_text("later please");
    t.keys(&["Tab"]);
    t.wait_text("↳ queued: later please");
    t.keys(&["M-Up"]);
    t.wait_text("queued messages are back in the input");
    t.wait_for("the text in the input", |_| {
        t.cursor_line() == "> later please"
    });
    assert!(!t.screen().contains("↳ queued"));
    t.keys(&["C-u"]);
    t.keys(&["Escape"]);
    t.wait_text("task 1 cancelled");
    // Nothing was sent but the prompt.
    assert_eq!(p.chat_requests().len(), 1);
}

#[test]
fn escape_interrupts_the_run_with_a_valid_history() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("nap", "sleep 30")]),
        Reply::text("back again"),
    ]);
    let cmd = BuddyCmd::new().config(no_confirm(&p));
    let t = repl(&cmd, &[]);
    t.line("nap");
    t.wait_text("running run_shell");
    t.keys(&["Escape"]);
    t.wait_text("task 1 cancelled");
    t.wait_for("idle", |s| !s.contains("[task 1]"));
    t.line("still there?");
    t.wait_text("back again");
    let req = &p.chat_requests()[1];
    assert_eq!(tool_result(req, "nap"), CANCELLED);
    assert_eq!(last_user(req), "still there?");
}

#[test]
fn a_limit_ends_the_task_with_one_line_and_the_repl_goes_on() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "echo one")]),
        Reply::text("after the limit"),
    ]);
    let cmd = BuddyCmd::new().config(agent_config(&p, "max_turns = 1"));
    let t = repl(&cmd, &[]);
    t.line("loop");
    t.wait_text("limit: stopped after 1 model calls");
    t.wait_for("idle", |s| !s.contains("[task 1]"));
    t.line("and now?");
    t.wait_text("after the limit");
    let req = &p.chat_requests()[1];
    assert!(tool_result(req, "one").contains("one"));
}

#[test]
fn follow_up_mode_all_hands_every_queued_message_over_at_once() {
    let slow = support::fake_provider::Gate::new();
    let p = FakeProvider::start(vec![
        Reply::text("first answer").gated(&slow),
        Reply::text("both handled"),
    ]);
    let cmd = BuddyCmd::new()
        .config(fake_config(&p).replace("[agent]\n", "[agent]\nfollow_up_mode = \"all\"\n"));
    let t = repl(&cmd, &[]);
    t.line("a slow question");
    t.wait_text("[task 1] waiting for model");
    t.type_text("one more");
    t.keys(&["Tab"]);
    t.wait_text("↳ queued: one more");
    t.type_text("and another");
    t.keys(&["Tab"]);
    t.wait_text("↳ queued: and another");
    slow.open();
    t.wait_text("both handled");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2, "one request for both follow-ups");
    let users: Vec<String> = messages(&reqs[1])
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(users, ["a slow question", "one more", "and another"]);
}

/// Text from the model cannot retitle the terminal or redraw the screen, and
/// an approval prompt shows the hidden part of a command instead of `ls -la`.
#[test]
fn escape_sequences_are_shown_not_obeyed_and_approvals_show_what_runs() {
    let evil = "touch evil # \u{1b}[1K \u{1b}[999Dls -la";
    let p = FakeProvider::start(vec![
        Reply::text("look \u{1b}]2;pwned\u{7} and \u{1b}[31mred\u{1b}[0m"),
        Reply::tool_calls(vec![shell("one", evil)]),
        Reply::text("finished"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("hello");
    t.wait_text("look ␛]2;pwned␇ and ␛[31mred␛[0m");
    let title = t.tmux_cmd(&["display-message", "-p", "#{pane_title}"]);
    assert!(!title.contains("pwned"), "the pane was retitled: {title}");
    t.line("now the command");
    // With "[r]emember" offered the question is too wide for the pane, so
    // the command is shown whole on the line above it.
    t.wait_for("the approval", |screen| {
        t.cursor_line().contains("-- approve?")
            && screen.contains("$ touch evil # ␛[1K ␛[999Dls -la")
    });
    assert!(t.screen().contains("control characters"), "{}", t.screen());
    t.line("n");
    t.wait_text("finished");
    assert!(!cmd.work_dir().join("evil").exists());
}

/// The write system calls `pid` has made so far, all threads together.
fn writes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io");
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("syscw in /proc/PID/io")
}

/// Each redraw of the input area goes to the terminal in one write. Drawn
/// unbuffered, every character of the line is a write of its own, so typing
/// a line of n characters costs about n²/2 writes (some 2,000 here) and a
/// terminal can show a frame half drawn.
#[test]
fn a_keystroke_redraws_the_input_in_one_write() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd, &[]);
    let pid = t.program_pid();
    let text = "abcdefghij".repeat(6);
    let before = writes(pid);
    t.type_text(&text);
    t.wait_for("the typed line", |_| t.cursor_line() == format!("> {text}"));
    let spent = writes(pid) - before;
    // One frame a key, and slack for the odd extra redraw (a tick, a resize).
    assert!(
        spent <= 2 * text.len() as u64,
        "{spent} writes for {} keys",
        text.len()
    );
}

/// tmux's count of lines in the pane's scrollback.
fn history_size(t: &Tmux) -> u32 {
    let out = t.tmux_cmd(&[
        "display-message",
        "-p",
        "-t",
        "buddy-test",
        "#{history_size}",
    ]);
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("history_size: {out:?}"))
}

#[test]
fn typing_after_ctrl_l_pushes_nothing_into_tmuxs_scrollback() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd, &[]);
    t.keys(&["C-l"]);
    // After the clear the prompt is alone, on the top row.
    t.wait_for("the prompt at the top", |s| s.lines().next() == Some(">"));
    let before = history_size(&t);
    for c in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"] {
        t.type_text(c);
    }
    t.wait_for("ten keys typed", |s| {
        s.lines().next() == Some("> abcdefghij")
    });
    assert_eq!(history_size(&t), before, "{}", t.screen());
}

#[test]
fn ctrl_c_at_an_idle_prompt_says_how_to_quit() {
    let cmd = BuddyCmd::new().config_for(&FakeProvider::start(vec![]));
    let t = repl(&cmd, &[]);
    t.keys(&["C-c"]);
    let screen = t.wait_text("to quit, press Ctrl-D on an empty line or type /quit");
    // Said once, however often Ctrl-C is pressed in a row.
    t.keys(&["C-c", "C-c"]);
    t.type_text("x");
    t.wait_text("> x");
    assert_eq!(
        t.screen().matches("Ctrl-C clears the line").count(),
        1,
        "{screen}"
    );
}

/// An attachment too long for the server's window fails the turn with one
/// line, and does not stick: the next prompt is sent without it and
/// answered (issue 49: every prompt after it got the same 400).
#[test]
fn an_attachment_too_long_for_the_window_fails_once_and_the_next_prompt_is_answered() {
    use support::fake_provider::{huge_prompt, LLAMA_OVERFLOW};
    let p = FakeProvider::start(vec![
        Reply::status(400, LLAMA_OVERFLOW),
        Reply::text("answered again"),
    ]);
    let cmd = BuddyCmd::new().config_for(&p);
    std::fs::write(cmd.work_dir().join("big.txt"), huge_prompt()).unwrap();
    let t = repl(&cmd, &[]);
    // Not last on the line: Enter right after a file name takes the
    // completion offered for it.
    t.line("@big.txt summarise this");
    let screen = t.wait_text("context window of 4096 tokens");
    assert_eq!(
        screen.matches("context window of 4096 tokens").count(),
        1,
        "{screen}"
    );
    t.line("a small follow-up");
    t.wait_text("answered again");
    let reqs = p.chat_requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].body_text().contains("HUGE-PROMPT"));
    assert!(
        !reqs[1].body_text().contains("HUGE-PROMPT"),
        "the attachment was sent again"
    );
    assert_eq!(last_user(&reqs[1]), "a small follow-up");
}

#[test]
fn compact_with_focus_text_sends_it_to_the_summariser() {
    let p = FakeProvider::start(vec![
        Reply::text("first answer: 41"),
        Reply::text("second answer: 42"),
    ])
    .with_summaries(Reply::text(
        "the user asked twice; the answers were 41 and 42",
    ));
    let cmd = BuddyCmd::new().config_for(&p);
    let t = repl(&cmd, &[]);
    t.line("what is forty-one?");
    t.wait_text("first answer: 41");
    t.line("and forty-two?");
    t.wait_text("second answer: 42");
    t.line("/compact keep the numbers");
    t.wait_text("context compacted (older turns summarised)");
    let reqs = p.chat_requests();
    let summary: Vec<&RecordedRequest> = reqs
        .iter()
        .filter(|r| r.json().get("tools").is_none())
        .collect();
    assert_eq!(summary.len(), 1, "{reqs:?}");
    let ms = messages(summary[0]);
    let instructions = ms[0]["content"].as_str().unwrap_or_default();
    assert!(instructions.contains("keep the numbers"), "{instructions}");
    // The transcript holds the older turn, and not the focus.
    let transcript = ms[1]["content"].as_str().unwrap_or_default();
    assert!(transcript.contains("first answer: 41"), "{transcript}");
    assert!(!transcript.contains("keep the numbers"), "{transcript}");
}

#[test]
fn notify_program_gets_json_for_an_approval_and_a_finished_run() {
    let p = FakeProvider::start(vec![
        Reply::tool_calls(vec![shell("one", "expr notified")]),
        Reply::text("all done here"),
    ]);
    let cmd = BuddyCmd::new();
    let log = cmd.work_dir().join("notified.log");
    // The program gets the JSON as its last argument ($1 of the script).
    let config = format!(
        "{}\n[ui]\nnotify_after = 0\nnotify = [\"sh\", \"-c\", \"printf '%s\\\\n' \\\"$1\\\" >> {}\", \"notify\"]\n",
        fake_config(&p),
        log.display()
    );
    let cmd = cmd.config(config);
    let t = repl(&cmd, &[]);
    t.line("run it");
    t.wait_for("the approval", |_| {
        t.cursor_line().contains("$ expr notified -- approve?")
    });
    let read = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect::<Vec<Value>>()
    };
    let first = support::wait::wait_until(
        "the approval's notification",
        std::time::Duration::from_secs(10),
        || read().into_iter().next(),
    );
    assert_eq!(first["type"], "approval-requested", "{first}");
    assert!(
        first["message"]
            .as_str()
            .unwrap_or("")
            .contains("expr notified"),
        "{first}"
    );
    t.line("y");
    t.wait_text("all done here");
    let all = support::wait::wait_until(
        "the run's notification",
        std::time::Duration::from_secs(10),
        || {
            let all = read();
            (all.len() >= 2).then_some(all)
        },
    );
    assert_eq!(all.len(), 2, "{all:?}");
    let done = &all[1];
    assert_eq!(done["type"], "run-finished", "{done}");
    assert_eq!(
        done["message"], "buddy: task 1 done: all done here",
        "{done}"
    );
    assert!(done["duration_ms"].is_u64(), "{done}");
    // The session is the one saved in the working directory.
    let session = done["session"].as_str().expect("a session id");
    assert_eq!(first["session"], done["session"]);
    let saved = std::fs::read_dir(cmd.work_dir().join(".buddyx/sessions"))
        .expect("sessions dir")
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().contains(session));
    assert!(saved, "no saved session named {session}");
    // Nothing of the terminal's own kind was written instead.
    assert!(!t.screen().contains("]9;"));
}
