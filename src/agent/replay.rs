//! The end of a resumed conversation as `SessionResumed` carries it: the last
//! messages of the history, each as a `Replayed` item with long texts
//! clipped, so the event stays small however big the session is. A user
//! message appears as the user typed it (`!git status`, a prompt without the
//! text piped in after it), not as the model got it. It does not decide how
//! much a front end shows (that depends on its screen) or how. The same
//! items, whole and unclipped, are the data `buddy export` writes.

use super::protocol::{Replayed, ReplayedCall, REPLAY_MESSAGES};
use crate::text::clip;
use crate::wire::{Message, Role};
use serde_json::Value;
use std::collections::HashMap;

/// Characters kept of a prompt or an answer: several screenfuls.
const TEXT_CHARS: usize = 4_000;
/// Characters kept of a tool result; front ends show its first lines.
const RESULT_CHARS: usize = 1_000;
/// Arguments longer than this have their long string values clipped.
const ARGUMENTS_CHARS: usize = 4_000;
/// What a clipped string value of the arguments keeps.
const ARGUMENT_VALUE_CHARS: usize = 1_000;

/// Opening and closing lines of the block `exec` puts text piped to it in,
/// after the prompt.
const STDIN_OPEN: &str = "\n\n<stdin>\n";
const STDIN_CLOSE: &str = "\n</stdin>";

/// A user message as the user typed it: the recorded form of context built
/// from what they typed (`Message::shown`), a prompt with piped input as the
/// prompt and a line counting that input, or the text; then a line per
/// attached image. `None` for context
/// the user never saw (files attached for an `@path`).
pub fn as_typed(m: &Message) -> Option<String> {
    let mut typed = match m.shown() {
        Some("") => return None,
        Some(shown) => shown.to_string(),
        None => fold_stdin(m.text()).unwrap_or_else(|| m.text().to_string()),
    };
    // Attached images show as a line each (`[image: shot.png 120 KiB]`).
    for image in &m.images {
        if !typed.is_empty() {
            typed.push('\n');
        }
        typed.push_str(&image.label());
    }
    Some(typed)
}

/// `PROMPT\n\n<stdin>\n…\n</stdin>` as the prompt and `(+ N lines from
/// stdin)`; `None` for any other text.
fn fold_stdin(text: &str) -> Option<String> {
    let text = text.trim_end();
    let body = text.strip_suffix(STDIN_CLOSE)?;
    let (prompt, piped) = body.split_once(STDIN_OPEN)?;
    let lines = piped.lines().count();
    Some(format!(
        "{prompt}\n(+ {lines} line{} from stdin)",
        if lines == 1 { "" } else { "s" }
    ))
}

/// The last `REPLAY_MESSAGES` messages of `history` (system messages left
/// out, and context the user never saw: see `as_typed`), long texts clipped.
pub fn replay_of(history: &[Message]) -> Vec<Replayed> {
    items(history, REPLAY_MESSAGES, true, &[])
}

/// The sub-agents' histories by call id, borrowed: a child's own children
/// are a slice of these (`items`).
type Children<'a> = Vec<(&'a str, &'a [Message])>;

fn borrowed(subagents: &[(String, Vec<Message>)]) -> Children<'_> {
    subagents
        .iter()
        .map(|(call, messages)| (call.as_str(), messages.as_slice()))
        .collect()
}

/// `replay_of`, each `agent` call's sub-agent (from `subagents`, by the
/// parent's call id) right after the call's result, its own items clipped
/// the same way.
pub fn replay_with(history: &[Message], subagents: &[(String, Vec<Message>)]) -> Vec<Replayed> {
    items(history, REPLAY_MESSAGES, true, &borrowed(subagents))
}

/// `transcript_of` with the sub-agents, as `replay_with` places them.
pub fn transcript_with(history: &[Message], subagents: &[(String, Vec<Message>)]) -> Vec<Replayed> {
    items(history, usize::MAX, false, &borrowed(subagents))
}

/// Every message of `history` as a `Replayed` item, nothing clipped: the
/// whole conversation as data (`buddy export --format json`), with the same
/// items a resume replays.
pub fn transcript_of(history: &[Message]) -> Vec<Replayed> {
    items(history, usize::MAX, false, &[])
}

/// The last `window` messages as items; `clipped` bounds each text.
fn items(
    history: &[Message],
    window: usize,
    clipped: bool,
    subagents: &[(&str, &[Message])],
) -> Vec<Replayed> {
    let history: Vec<&Message> = history.iter().filter(|m| m.role != Role::System).collect();
    // A result names its tool only through the call's id, which may sit
    // before the window.
    let names: HashMap<&str, &str> = history
        .iter()
        .flat_map(|m| m.calls())
        .map(|c| (c.id.as_str(), c.function.name.as_str()))
        .collect();
    let start = history.len().saturating_sub(window);
    let bound = |s: &str, max: usize| {
        if clipped {
            clip(s, max).into_owned()
        } else {
            s.to_string()
        }
    };
    // Context the user never saw is counted on the next item, so a front
    // end still knows how many messages its items stand for.
    let mut unseen = 0;
    let mut out = Vec::new();
    for m in &history[start..] {
        let item = match m.role {
            Role::Assistant => Replayed::Assistant {
                text: if clipped {
                    tail(m.text().trim(), TEXT_CHARS)
                } else {
                    m.text().trim().to_string()
                },
                calls: m
                    .calls()
                    .iter()
                    .map(|c| ReplayedCall {
                        name: c.function.name.clone(),
                        arguments: if clipped {
                            arguments(&c.function.arguments)
                        } else {
                            c.function.arguments.clone()
                        },
                    })
                    .collect(),
            },
            Role::Tool => Replayed::Tool {
                name: m
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| names.get(id))
                    .map(|n| n.to_string())
                    .or_else(|| m.name.clone())
                    .unwrap_or_else(|| "tool".to_string()),
                text: bound(m.text(), RESULT_CHARS),
            },
            Role::User | Role::System => match as_typed(m) {
                Some(typed) => Replayed::User {
                    text: bound(typed.trim_end(), TEXT_CHARS),
                    attached: std::mem::take(&mut unseen),
                },
                None => {
                    unseen += 1;
                    continue;
                }
            },
        };
        out.push(item);
        if let Some((description, child)) = m
            .tool_call_id
            .as_deref()
            .and_then(|id| child_of(history.as_slice(), subagents, id))
        {
            // A grandchild's records are kept under `CALL/ITS_CALL`
            // (subagent.rs's `ChildSink`): those under this call are the
            // child's own children, found by its call ids the same way.
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            let grandchildren: Children = subagents
                .iter()
                .filter_map(|(call, messages)| {
                    let rest = call.strip_prefix(id)?.strip_prefix('/')?;
                    Some((rest, *messages))
                })
                .collect();
            out.push(Replayed::Subagent {
                description,
                items: items(child, window, clipped, &grandchildren),
            });
        }
    }
    out
}

/// The sub-agent the call `id` ran, with its description (from the call's
/// arguments), when `subagents` holds one.
fn child_of<'a>(
    history: &[&Message],
    subagents: &[(&str, &'a [Message])],
    id: &str,
) -> Option<(String, &'a [Message])> {
    let (_, child) = subagents.iter().find(|(call, _)| *call == id)?;
    let description = history
        .iter()
        .flat_map(|m| m.calls())
        .find(|c| c.id == id)
        .and_then(|c| serde_json::from_str::<Value>(&c.function.arguments).ok())
        .and_then(|v| v["description"].as_str().map(str::to_string))
        .unwrap_or_else(|| "sub-agent".to_string());
    Some((description, child))
}

/// The last `max` characters of `s`, marked with `…` when cut: the end of
/// a long answer is where the conversation stood.
fn tail(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        return s.to_string();
    }
    let skip = s
        .char_indices()
        .nth(count - max)
        .map_or(s.len(), |(i, _)| i);
    format!("…{}", &s[skip..])
}

/// Arguments kept as valid JSON when they are long, so a front end still
/// reads the command or path: only long string values are clipped.
fn arguments(text: &str) -> String {
    if text.chars().count() <= ARGUMENTS_CHARS {
        return text.to_string();
    }
    match serde_json::from_str::<Value>(text) {
        Ok(mut v) => {
            clip_strings(&mut v);
            v.to_string()
        }
        Err(_) => clip(text, ARGUMENTS_CHARS).into_owned(),
    }
}

fn clip_strings(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(c) = clip(s, ARGUMENT_VALUE_CHARS) {
                *s = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clip_strings),
        Value::Object(map) => map.values_mut().for_each(clip_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ToolCall;

    #[test]
    fn keeps_the_last_messages_and_names_results_by_their_call() {
        let mut history = vec![Message::system("sys")];
        for i in 0..100 {
            history.push(Message::user(format!("prompt {i}")));
            history.push(Message::assistant(format!("answer {i}")));
        }
        let mut call = Message::assistant("");
        call.tool_calls = Some(vec![ToolCall::new(
            "c1",
            "run_shell",
            r#"{"command":"ls"}"#,
        )]);
        history.push(call);
        history.push(Message::tool_result("c1", "exit code: 0\nstdout:\nfile"));
        let replay = replay_of(&history);
        assert_eq!(replay.len(), REPLAY_MESSAGES);
        assert_eq!(
            replay.last(),
            Some(&Replayed::Tool {
                name: "run_shell".into(),
                text: "exit code: 0\nstdout:\nfile".into()
            })
        );
        assert_eq!(
            replay[0],
            Replayed::User {
                text: "prompt 71".into(),
                attached: 0
            }
        );
    }

    #[test]
    fn a_sub_agent_follows_its_calls_result_with_its_own_items() {
        let mut asked = Message::assistant("");
        asked.tool_calls = Some(vec![
            ToolCall::new("a1", "agent", r#"{"description":"look","prompt":"p"}"#),
            ToolCall::new("t1", "time", "{}"),
        ]);
        let history = [
            Message::user("go"),
            asked,
            Message::tool_result("a1", "found"),
            Message::tool_result("t1", "noon"),
            Message::assistant("done"),
        ];
        let child = vec![Message::user("p"), Message::assistant("found")];
        let items = transcript_with(&history, &[("a1".to_string(), child)]);
        let kinds: Vec<&str> = items
            .iter()
            .map(|i| match i {
                Replayed::User { .. } => "user",
                Replayed::Assistant { .. } => "assistant",
                Replayed::Tool { .. } => "tool",
                Replayed::Subagent { .. } => "subagent",
            })
            .collect();
        assert_eq!(
            kinds,
            ["user", "assistant", "tool", "subagent", "tool", "assistant"]
        );
        let Replayed::Subagent { description, items } = &items[3] else {
            panic!("{items:?}");
        };
        assert_eq!(description, "look");
        assert_eq!(items.len(), 2);
        // Without the records, the same history has no child.
        assert_eq!(transcript_of(&history).len(), 5);
    }

    #[test]
    fn a_grandchild_nests_under_its_call_in_the_childs_items() {
        let mut asked = Message::assistant("");
        asked.tool_calls = Some(vec![ToolCall::new(
            "a1",
            "agent",
            r#"{"description":"outer","prompt":"p"}"#,
        )]);
        let history = [
            Message::user("go"),
            asked,
            Message::tool_result("a1", "found"),
        ];
        let mut child_asks = Message::assistant("");
        child_asks.tool_calls = Some(vec![ToolCall::new(
            "b1",
            "agent",
            r#"{"description":"inner","prompt":"q"}"#,
        )]);
        let child = vec![
            Message::user("p"),
            child_asks,
            Message::tool_result("b1", "deep"),
            Message::assistant("found"),
        ];
        let grandchild = vec![Message::user("q"), Message::assistant("deep")];
        // A record of another child's call with the same id stays out.
        let stranger = vec![Message::user("not mine")];
        let items = transcript_with(
            &history,
            &[
                ("a1".to_string(), child),
                ("a1/b1".to_string(), grandchild),
                ("a2/b1".to_string(), stranger),
            ],
        );
        let Replayed::Subagent { description, items } = &items[3] else {
            panic!("{items:?}");
        };
        assert_eq!(description, "outer");
        let Replayed::Subagent { description, items } = &items[3] else {
            panic!("{items:?}");
        };
        assert_eq!(description, "inner");
        assert_eq!(
            items[0],
            Replayed::User {
                text: "q".into(),
                attached: 0
            }
        );
        assert_eq!(items.len(), 2);
    }

    #[test]
    fn user_messages_replay_as_typed_not_as_the_model_got_them() {
        let history = [
            Message::user("I ran this command myself on me@here (exit status 1):\n$ git status\nOutput:\n```\nfatal\n```\n")
                .with_shown("!git status\nexit status 1"),
            Message::user("Files I mention in my next message (@path)…\n<file path=\"main.py\">\nx\n</file>\n")
                .with_shown(""),
            Message::user("explain @main.py"),
            Message::user("summarise\n\n<stdin>\nline 1\nline 2\nline 3\n</stdin>\n"),
        ];
        let replay = replay_of(&history);
        let texts: Vec<&str> = replay
            .iter()
            .map(|r| match r {
                Replayed::User { text, .. } => text.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "!git status\nexit status 1",
                "explain @main.py",
                "summarise\n(+ 3 lines from stdin)"
            ]
        );
        // The files the user never saw are counted with their prompt.
        assert_eq!(
            replay[1],
            Replayed::User {
                text: "explain @main.py".into(),
                attached: 1
            }
        );
        // An attached image is a line naming it.
        let image = crate::wire::Image::from_bytes("a.gif", b"GIF89a..".to_vec()).unwrap();
        let with_image = Message::user_with_images("what is it?", vec![image]);
        assert_eq!(
            as_typed(&with_image).as_deref(),
            Some("what is it?\n[image: a.gif 8 bytes]")
        );
        // A prompt that merely mentions the tag is left as it is.
        let plain = Message::user("what does <stdin> mean?");
        assert_eq!(as_typed(&plain).as_deref(), Some("what does <stdin> mean?"));
    }

    #[test]
    fn long_texts_are_clipped_and_long_arguments_stay_json() {
        let big = "x".repeat(20_000);
        let mut call = Message::assistant(format!("start {big} end"));
        let args = serde_json::json!({"path": "a.txt", "content": big}).to_string();
        call.tool_calls = Some(vec![ToolCall::new("c1", "write_file", args)]);
        let replay = replay_of(&[Message::user(big.clone()), call]);
        let Replayed::User { text, .. } = &replay[0] else {
            panic!("{replay:?}")
        };
        assert!(text.chars().count() <= TEXT_CHARS + 1);
        let Replayed::Assistant { text, calls } = &replay[1] else {
            panic!("{replay:?}")
        };
        assert!(text.starts_with('…') && text.ends_with(" end"));
        let v: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(v["path"], "a.txt");
        assert!(v["content"].as_str().unwrap().chars().count() <= ARGUMENT_VALUE_CHARS + 1);
    }
}
