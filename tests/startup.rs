//! End-to-end tests of how a command starts: the settings resolved once at
//! start-up (the config file read once for the trust question, the profile
//! and discovery), with the real binary in a real tmux pane where a terminal
//! is needed, against the fake provider.

use crate::support;

use support::fake_provider::{FakeProvider, Reply};
use support::tmux::Tmux;
use support::BuddyCmd;

/// A project file whose profile takes its key from the environment: not a
/// server the template knows, so an untrusted copy may not use that key.
fn keyed_project_config(p: &FakeProvider) -> String {
    format!(
        "[agent]\nmodel = \"fake\"\n\n\
         [models.fake]\napi_base_url = \"{}\"\nmodel = \"fake-model\"\napi_key_env = \"STARTUP_TEST_KEY\"\n",
        p.base_url()
    )
}

/// The REPL's empty prompt is on screen (tmux drops its trailing space).
fn is_prompt(screen: &str) -> bool {
    screen.lines().any(|l| l == ">" || l.starts_with("> "))
}

/// The REPL started in a project whose config names a key, stopped at the
/// trust question; the model will answer `reply`. The command is returned
/// too: dropping it removes the directories buddy works in.
fn at_the_trust_question(reply: &str) -> (FakeProvider, BuddyCmd, Tmux) {
    let p = FakeProvider::start(vec![Reply::text(reply)]);
    let cmd = BuddyCmd::new()
        .project_config(keyed_project_config(&p))
        .env("STARTUP_TEST_KEY", "sk-startup-test");
    let t = Tmux::start(&cmd, &[]);
    t.wait_text("Trust it? [y/N]");
    (p, cmd, t)
}

#[test]
fn a_project_config_trusted_at_the_question_applies_at_once() {
    let (p, _cmd, t) = at_the_trust_question("answered with the trusted key");
    t.line("y");
    t.wait_for("the prompt", is_prompt);
    t.line("hello");
    t.wait_text("answered with the trusted key");
    let sent = p.chat_requests();
    assert_eq!(
        sent[0].header("authorization").as_deref(),
        Some("Bearer sk-startup-test"),
        "the key the file names was used in the same run"
    );
}

#[test]
fn a_project_config_left_untrusted_at_the_question_sends_no_key() {
    let (p, _cmd, t) = at_the_trust_question("answered without a key");
    t.line("n");
    let screen = t.wait_for("the prompt", is_prompt);
    assert!(
        screen.contains("ignoring models.fake.api_key_env from the untrusted"),
        "{screen}"
    );
    t.line("hello");
    t.wait_text("answered without a key");
    assert_eq!(p.chat_requests()[0].header("authorization"), None);
}
