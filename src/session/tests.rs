use super::*;
use crate::agent::interrupted_answer;
use crate::wire::ToolCall;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A fresh directory, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new() -> Tmp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "buddy-session-unit-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn info() -> SessionInfo {
    SessionInfo {
        model: "m-1".into(),
        profile: "p".into(),
        cwd: "/w".into(),
        secrets: vec!["sk-secret-123456".into()],
        origin: Some("exec".into()),
    }
}

fn tracker(p: u64, c: u64) -> TokenTracker {
    let mut t = TokenTracker::new(1000);
    t.record(p, c);
    t
}

fn assistant_calling(id: &str) -> Message {
    let mut m = Message::assistant("");
    m.content = None;
    m.tool_calls = Some(vec![ToolCall::new(id, "run_shell", "{\"command\":\"ls\"}")]);
    m
}

/// A complete two-turn conversation with a tool call in it.
fn conversation() -> Vec<Message> {
    vec![
        Message::user("list   the\nfiles please"),
        assistant_calling("call_1"),
        Message::tool_result("call_1", "a\nb"),
        Message::assistant("a and b"),
    ]
}

fn saved_session(store: &Store) -> String {
    let (mut s, _) = store.create(info()).unwrap();
    let conv = conversation();
    s.save(&conv[..1], &tracker(0, 0), false).unwrap();
    s.save(&conv[1..3], &tracker(10, 5), false).unwrap();
    s.save(&conv[3..], &tracker(20, 7), true).unwrap();
    s.id().to_string()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn round_trip_restores_messages_tokens_and_title() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(opened.history, conversation());
    assert_eq!(opened.saved, 4);
    assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
    // The sink gets the agent's running totals; the last ones are restored.
    assert_eq!(opened.tokens.total_prompt_tokens, 20);
    assert_eq!(opened.tokens.total_completion_tokens, 7);
    assert_eq!(opened.tokens.last_prompt_tokens, 20);
    let turn = opened.last_turn.unwrap();
    assert_eq!(turn.title, "list the files please");
    assert_eq!(turn.model, "m-1");
    assert_eq!(turn.messages, 4);
}

#[test]
fn files_are_private_and_the_id_is_sortable() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    assert_eq!(mode(store.dir()), 0o700);
    assert_eq!(mode(&tmp.0.join(DIR)), 0o700);
    assert_eq!(mode(&store.path_of(&id)), 0o600);
    // YYYYMMDD-HHMMSS-xxxx
    assert_eq!(id.len(), 20, "{id}");
    assert!(
        id.as_bytes()[8] == b'-' && id.as_bytes()[15] == b'-',
        "{id}"
    );
    assert!(id[16..].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
}

#[test]
fn continuing_appends_without_rewriting() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let before = fs::read(store.path_of(&id)).unwrap();
    let mut opened = store.open(&id, info()).unwrap();
    let more = [Message::user("again"), Message::assistant("sure")];
    opened.session.save(&more, &tracker(40, 2), true).unwrap();
    drop(opened);
    let after = fs::read(store.path_of(&id)).unwrap();
    assert!(after.starts_with(&before), "the old records were rewritten");
    let reopened = store.open(&id, info()).unwrap();
    assert_eq!(reopened.history.len(), 6);
    assert_eq!(reopened.history[5], Message::assistant("sure"));
    assert_eq!(reopened.tokens.total_prompt_tokens, 40);
}

#[test]
fn torn_last_record_is_dropped_with_a_warning_and_the_rest_kept() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let path = store.path_of(&id);
    let good = fs::read(&path).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"message\":{\"role\":\"user\",\"content\":\"half");
    fs::write(&path, &torn).unwrap();
    let mut opened = store.open(&id, info()).unwrap();
    assert_eq!(opened.history, conversation());
    assert!(
        opened
            .warnings
            .iter()
            .any(|w| w.contains("incomplete last record")),
        "{:?}",
        opened.warnings
    );
    // The torn bytes are gone, so new records start on a clean line.
    assert_eq!(fs::read(&path).unwrap(), good);
    opened
        .session
        .save(&[Message::user("next")], &tracker(1, 1), true)
        .unwrap();
    drop(opened);
    let again = store.open(&id, info()).unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.history.last().unwrap(), &Message::user("next"));
}

#[test]
fn file_cut_at_every_offset_of_its_last_record_still_loads() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let path = store.path_of(&id);
    let full = fs::read(&path).unwrap();
    // Start of the last record (the turn mark) and of the one before it.
    let ends: Vec<usize> = full
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let last_start = ends[ends.len() - 2];
    for cut in last_start..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let opened = store.open(&id, info()).unwrap();
        assert_eq!(opened.history, conversation(), "cut at {cut}");
        // The turn mark was lost, so token totals come back empty, not wrong.
        assert_eq!(opened.tokens.total_prompt_tokens, 0);
    }
    // Cut inside the final answer: the tool call keeps its result.
    let answer_start = ends[ends.len() - 3];
    fs::write(&path, &full[..answer_start + 10]).unwrap();
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(opened.history, conversation()[..3].to_vec());
}

#[test]
fn pending_tool_calls_get_not_run_results_on_load() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (mut s, _) = store.create(info()).unwrap();
    let mut two = assistant_calling("c1");
    two.tool_calls
        .as_mut()
        .unwrap()
        .push(ToolCall::new("c2", "time", "{}"));
    s.save(
        &[Message::user("go"), two, Message::tool_result("c1", "done")],
        &tracker(1, 1),
        false,
    )
    .unwrap();
    let id = s.id().to_string();
    drop(s);
    let mut opened = store.open(&id, info()).unwrap();
    assert_eq!(opened.history.len(), 4);
    assert_eq!(
        opened.history[3],
        Message::tool_result("c2", NOT_STARTED_TOOL)
    );
    assert_eq!(opened.saved, 3);
    assert!(opened.warnings.iter().any(|w| w.contains("not run")));
    // The repair is written with the next save, then loads without warnings.
    let repair = opened.history[opened.saved..].to_vec();
    opened
        .session
        .save(&repair, &opened.tokens.clone(), true)
        .unwrap();
    drop(opened);
    let again = store.open(&id, info()).unwrap();
    assert_eq!(again.history.len(), 4);
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
}

#[test]
fn damaged_record_in_the_middle_is_refused_and_the_file_left_alone() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let path = store.path_of(&id);
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"message\":{\"role\":";
    let damaged = lines.join("\n") + "\n";
    fs::write(&path, &damaged).unwrap();
    let err = match store.open(&id, info()) {
        Err(e) => e,
        Ok(_) => panic!("a damaged file opened"),
    };
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("line 3"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    assert_eq!(fs::read_to_string(&path).unwrap(), damaged);
    // Other sessions keep working.
    let ok = saved_session(&store);
    assert!(store.open(&ok, info()).is_ok());
}

#[test]
fn garbage_file_is_an_error_naming_it() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    fs::create_dir_all(store.dir()).unwrap();
    let path = store.path_of("20250101-000000-abcd");
    fs::write(&path, "not json\n{}\n").unwrap();
    let ok = saved_session(&store);
    let msg = match store.open("20250101-000000-abcd", info()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("garbage opened"),
    };
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    // Listing reports it and still lists the others.
    let (list, errors) = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, ok);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].to_string().contains(&path.display().to_string()));
    assert_eq!(fs::read_to_string(&path).unwrap(), "not json\n{}\n");
    // Text without a newline that is not the start of a header is no torn write.
    fs::write(&path, "hello").unwrap();
    assert!(store.open("20250101-000000-abcd", info()).is_err());
    assert_eq!(fs::read_to_string(&path).unwrap(), "hello");
}

#[test]
fn newer_format_is_refused() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    fs::create_dir_all(store.dir()).unwrap();
    fs::write(
        store.path_of("x"),
        "{\"header\":{\"version\":9,\"id\":\"x\",\"created\":0,\"cwd\":\"/\"}}\n",
    )
    .unwrap();
    let msg = store.open("x", info()).err().unwrap().to_string();
    assert!(msg.contains("format 9"), "{msg}");
}

#[test]
fn loose_permissions_are_tightened_with_a_warning() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let path = store.path_of(&id);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o755)).unwrap();
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(store.dir()), 0o700);
    assert!(
        opened.warnings.iter().any(|w| w.contains("mode 644")),
        "{:?}",
        opened.warnings
    );
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_session() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let first = store.open(&id, info()).unwrap();
    let msg = store.open(&id, info()).err().unwrap().to_string();
    assert!(msg.contains("in use by another buddy process"), "{msg}");
    drop(first);
    assert!(store.open(&id, info()).is_ok());
}

#[test]
fn secrets_never_reach_the_file() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (mut s, _) = store.create(info()).unwrap();
    s.save(
        &[
            Message::user("my key is sk-secret-123456"),
            Message::tool_result("c", "OPENAI_API_KEY=sk-secret-123456"),
        ],
        &tracker(1, 1),
        true,
    )
    .unwrap();
    let text = fs::read_to_string(s.path()).unwrap();
    assert!(!text.contains("sk-secret-123456"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
}

#[test]
fn short_keys_are_redacted_only_inside_string_values() {
    // Keys that also spell field names, numbers or JSON punctuation.
    for key in ["k", "to", "e", "1", "content", "role", "\"", "00", "a\\b"] {
        let tmp = Tmp::new();
        let store = Store::for_workdir(&tmp.0);
        let mut i = info();
        i.secrets = vec![key.to_string()];
        let (mut s, _) = store.create(i.clone()).unwrap();
        let id = s.id().to_string();
        s.save(
            &[
                Message::user(format!("the key is {key} here")),
                Message::assistant("tokens: 100"),
            ],
            &tracker(1234, 10),
            true,
        )
        .unwrap();
        drop(s);
        let opened = store
            .open(&id, i)
            .unwrap_or_else(|e| panic!("key {key:?} made the file unreadable: {e}"));
        assert_eq!(opened.history.len(), 2, "key {key:?}");
        assert!(
            !opened.history[0].text().contains(&format!("is {key} here")),
            "key {key:?} not redacted: {}",
            opened.history[0].text()
        );
        assert_eq!(opened.tokens.total_prompt_tokens, 1234, "key {key:?}");
    }
}

fn set_mtime(store: &Store, id: &str, secs: u64) {
    let f = File::options()
        .append(true)
        .open(store.path_of(id))
        .unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn last_is_the_most_recently_used_and_listing_follows_it() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let a = saved_session(&store);
    let b = saved_session(&store);
    let c = saved_session(&store);
    set_mtime(&store, &a, 3_000);
    set_mtime(&store, &b, 1_000);
    set_mtime(&store, &c, 2_000);
    assert_eq!(store.resolve("last").unwrap(), a);
    let (list, _) = store.list().unwrap();
    let order: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(order, [a.as_str(), c.as_str(), b.as_str()]);
    assert_eq!(list[0].messages, 4);
    assert_eq!(list[0].model, "m-1");
    assert_eq!(list[0].title, "list the files please");
    assert_eq!(list[0].used, 3_000);
}

#[test]
fn ids_resolve_exactly_or_by_a_unique_prefix() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    fs::create_dir_all(store.dir()).unwrap();
    for id in [
        "20250101-000000-aaaa",
        "20250101-000000-aabb",
        "20250102-000000-cccc",
    ] {
        fs::write(store.path_of(id), "").unwrap();
    }
    assert_eq!(store.resolve("20250102").unwrap(), "20250102-000000-cccc");
    assert_eq!(
        store.resolve("20250101-000000-aaaa").unwrap(),
        "20250101-000000-aaaa"
    );
    let amb = store
        .resolve("20250101-000000-aa")
        .err()
        .unwrap()
        .to_string();
    assert!(amb.contains("ambiguous"), "{amb}");
    assert!(amb.contains("20250101-000000-aaaa") && amb.contains("20250101-000000-aabb"));
    let none = store.resolve("2024").err().unwrap().to_string();
    assert!(none.contains("no session matches \"2024\""), "{none}");
    let empty = Store::for_workdir(&tmp.0.join("nowhere"));
    assert!(matches!(
        empty.resolve("last"),
        Err(SessionError::NoSessions { .. })
    ));
}

#[test]
fn legacy_agentx_directory_is_reused_when_buddyx_is_absent() {
    let tmp = Tmp::new();
    fs::create_dir_all(tmp.0.join(LEGACY_DIR)).unwrap();
    let store = Store::for_workdir(&tmp.0);
    assert_eq!(store.dir(), tmp.0.join(".agentx/sessions"));
    fs::create_dir_all(tmp.0.join(DIR)).unwrap();
    assert_eq!(
        Store::for_workdir(&tmp.0).dir(),
        tmp.0.join(".buddyx/sessions")
    );
}

#[test]
fn listing_counts_messages_after_the_last_turn_and_reads_files_without_one() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let mut opened = store.open(&id, info()).unwrap();
    // A turn in progress: its prompt is saved, its turn mark not yet.
    opened
        .session
        .save(&[Message::user("more")], &tracker(1, 1), false)
        .unwrap();
    drop(opened);
    let (mut s, _) = store.create(info()).unwrap();
    s.save(&[Message::user("first words here")], &tracker(0, 0), false)
        .unwrap();
    let fresh = s.id().to_string();
    drop(s);
    let (list, errors) = store.list().unwrap();
    assert!(errors.is_empty());
    let get = |id: &str| list.iter().find(|s| s.id == id).unwrap().clone();
    assert_eq!(get(&id).messages, 5);
    let f = get(&fresh);
    assert_eq!(
        (f.messages, f.title.as_str(), f.model.as_str()),
        (1, "first words here", "m-1")
    );
}

#[test]
fn a_big_last_turn_falls_back_to_reading_the_whole_file() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let mut opened = store.open(&id, info()).unwrap();
    let big = "x".repeat(TAIL_WINDOW as usize * 2);
    opened
        .session
        .save(&[Message::user(big)], &tracker(1, 1), false)
        .unwrap();
    drop(opened);
    let (list, _) = store.list().unwrap();
    assert_eq!(list[0].messages, 5);
    assert_eq!(list[0].title, "list the files please");
}

#[test]
fn parse_skips_blank_lines_and_refuses_records_before_the_header() {
    let ok = b"{\"header\":{\"version\":1,\"id\":\"x\",\"created\":0,\"cwd\":\"/\"}}\n\n{\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    let p = journal::parse(ok).unwrap();
    assert_eq!(p.messages, vec![Message::user("hi")]);
    assert_eq!(p.dropped, 0);
    let no_header = b"{\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    assert_eq!(
        journal::parse(no_header).err(),
        Some(journal::ParseError::NoHeader { line: 1 })
    );
    // Zeroed bytes at the very end, newline and all, are a torn tail too…
    let mut tail_junk = ok.to_vec();
    tail_junk.extend_from_slice(b"\0\0\0\n");
    let p = journal::parse(&tail_junk).unwrap();
    assert_eq!(p.dropped, 4);
    // …but a complete line of something else is damage.
    let mut bad = ok.to_vec();
    bad.extend_from_slice(b"{\"message\":1}\n");
    assert!(matches!(
        journal::parse(&bad),
        Err(journal::ParseError::Corrupt { line: 4, .. })
    ));
    // A header cut short, alone in the file, is a crash during creation.
    let p = journal::parse(b"{\"header\":{\"ver").unwrap();
    assert!(p.header.is_none());
    assert_eq!(p.dropped, 15);
}

#[test]
fn a_cut_at_any_byte_loads_every_record_before_it() {
    // What kill -9 can leave: any prefix of the file. Each must load, keep
    // every message whose record was complete, and pair every tool call.
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let path = store.path_of(&id);
    let full = fs::read(&path).unwrap();
    let ends: Vec<usize> = full
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    for cut in 0..=full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let opened = store
            .open(&id, info())
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        // Records complete before the cut: the header, then the messages.
        let complete = ends.iter().filter(|&&e| e <= cut).count();
        let messages = complete.saturating_sub(1).min(4);
        let mut expected = conversation()[..messages].to_vec();
        repair_history_with(&mut expected, |_| NOT_STARTED_TOOL);
        assert_eq!(opened.history, expected, "cut at {cut}");
        drop(opened);
    }
}

fn summary(text: &str) -> Message {
    crate::agent::compact::summary_message(text)
}

/// Every message record in the file, in order: the full transcript.
fn transcript(path: &Path) -> Vec<Message> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| match serde_json::from_str::<journal::Record>(l) {
            Ok(journal::Record::Message(m)) => Some(m),
            _ => None,
        })
        .collect()
}

/// `saved_session`, a second turn, a compaction of the first turn, then a third turn.
fn compacted_session(store: &Store) -> (String, Vec<Message>) {
    let id = saved_session(store);
    let mut opened = store.open(&id, info()).unwrap();
    let second = [Message::user("second"), Message::assistant("two")];
    opened.session.save(&second, &tracker(30, 3), true).unwrap();
    opened
        .session
        .compacted(4, &[summary("- listed a and b")], &tracker(35, 4))
        .unwrap();
    let third = [Message::user("third"), Message::assistant("three")];
    opened.session.save(&third, &tracker(50, 5), true).unwrap();
    let mut all = conversation();
    all.extend(second);
    all.extend(third);
    (id, all)
}

#[test]
fn a_compacted_session_resumes_with_the_summary_and_keeps_the_whole_transcript() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (id, all) = compacted_session(&store);
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(
        opened.history,
        vec![
            summary("- listed a and b"),
            Message::user("second"),
            Message::assistant("two"),
            Message::user("third"),
            Message::assistant("three"),
        ]
    );
    assert_eq!(opened.saved, 5);
    assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
    assert_eq!(opened.tokens.total_prompt_tokens, 50);
    // The file still holds every original message, and counts them.
    assert_eq!(transcript(&store.path_of(&id)), all);
    assert_eq!(opened.session.message_count(), 8);
    let turn = opened.last_turn.unwrap();
    assert_eq!(
        (turn.messages, turn.title.as_str()),
        (8, "list the files please")
    );
}

#[test]
fn the_compaction_is_durable_with_its_tokens_before_the_turn_ends() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let mut opened = store.open(&id, info()).unwrap();
    opened
        .session
        .compacted(3, &[summary("s")], &tracker(99, 9))
        .unwrap();
    drop(opened);
    let again = store.open(&id, info()).unwrap();
    assert_eq!(
        again.history,
        vec![summary("s"), Message::assistant("a and b")]
    );
    assert_eq!(again.saved, 2);
    assert_eq!(again.tokens.total_prompt_tokens, 99);
    assert_eq!(again.last_turn.unwrap().messages, 4);
}

#[test]
fn a_second_compaction_applies_to_the_history_the_first_left() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (id, mut all) = compacted_session(&store);
    // Loaded: [summary, second, two, third, three]; fold the first three.
    let mut opened = store.open(&id, info()).unwrap();
    opened
        .session
        .compacted(3, &[summary("- listed, then second")], &tracker(60, 6))
        .unwrap();
    let fourth = [Message::user("fourth"), Message::assistant("four")];
    opened.session.save(&fourth, &tracker(70, 7), true).unwrap();
    assert_eq!(opened.session.message_count(), 10);
    drop(opened);
    let again = store.open(&id, info()).unwrap();
    assert_eq!(
        again.history,
        vec![
            summary("- listed, then second"),
            Message::user("third"),
            Message::assistant("three"),
            Message::user("fourth"),
            Message::assistant("four"),
        ]
    );
    assert_eq!(again.saved, 5);
    all.extend(fourth);
    assert_eq!(transcript(&store.path_of(&id)), all);
}

#[test]
fn listing_a_compacted_session_counts_the_transcript_and_keeps_the_first_title() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (id, _) = compacted_session(&store);
    let (list, errors) = store.list().unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        (
            list[0].id.as_str(),
            list[0].messages,
            list[0].title.as_str()
        ),
        (id.as_str(), 8, "list the files please")
    );
    // A last turn too big for the tail windows: the whole file is read.
    let mut opened = store.open(&id, info()).unwrap();
    let big = "x".repeat(TAIL_WINDOW as usize * 2);
    opened
        .session
        .save(&[Message::user(big)], &tracker(1, 1), false)
        .unwrap();
    drop(opened);
    let (list, _) = store.list().unwrap();
    assert_eq!(
        (list[0].messages, list[0].title.as_str()),
        (9, "list the files please")
    );
    // And a session resumed with no turn mark at all takes its title from
    // the first prompt, not from the summary.
    let path = store.path_of(&id);
    let text = fs::read_to_string(&path).unwrap();
    let unmarked: String = text
        .lines()
        .filter(|l| !l.starts_with("{\"turn\":"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&path, unmarked).unwrap();
    let mut opened = store.open(&id, info()).unwrap();
    assert!(opened.last_turn.is_none());
    assert!(crate::agent::compact::is_summary(&opened.history[0]));
    opened
        .session
        .save(&[Message::user("more")], &tracker(1, 1), true)
        .unwrap();
    drop(opened);
    let (list, _) = store.list().unwrap();
    assert_eq!(list[0].title, "list the files please");
    assert_eq!(list[0].messages, 10);
}

#[test]
fn a_torn_compaction_at_the_end_is_dropped_with_a_warning() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let path = store.path_of(&id);
    let before = fs::read(&path).unwrap();
    let mut opened = store.open(&id, info()).unwrap();
    opened
        .session
        .compacted(4, &[summary("all done")], &tracker(5, 5))
        .unwrap();
    drop(opened);
    let full = fs::read(&path).unwrap();
    let start = before.len();
    let end = start + full[start..].iter().position(|&b| b == b'\n').unwrap() + 1;
    assert!(full[start..].starts_with(b"{\"compaction\":"));
    for cut in start + 1..end {
        fs::write(&path, &full[..cut]).unwrap();
        let opened = store.open(&id, info()).unwrap();
        assert_eq!(opened.history, conversation(), "cut at {cut}");
        assert!(
            opened
                .warnings
                .iter()
                .any(|w| w.contains("incomplete last record")),
            "cut at {cut}: {:?}",
            opened.warnings
        );
        drop(opened);
        assert_eq!(fs::read(&path).unwrap(), before, "cut at {cut}");
    }
    // Whole, even without the turn mark after it, it applies.
    fs::write(&path, &full[..end]).unwrap();
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(opened.history, vec![summary("all done")]);
    assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
}

#[test]
fn a_compaction_of_more_than_was_loaded_is_damage() {
    let head = "{\"header\":{\"version\":1,\"id\":\"x\",\"created\":0,\"cwd\":\"/\"}}\n\
                {\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    let bad = format!(
        "{head}{{\"compaction\":{{\"replaces\":2,\"messages\":[{{\"role\":\"user\",\"content\":\"s\"}}]}}}}\n"
    );
    let err = journal::parse(bad.as_bytes()).err();
    assert!(
        matches!(err, Some(journal::ParseError::Corrupt { line: 3, ref reason }) if reason.contains("replaces 2")),
        "{err:?}"
    );
    // Torn, the same record is only an interrupted write.
    let torn = &bad[..bad.len() - 5];
    let p = journal::parse(torn.as_bytes()).unwrap();
    assert_eq!(p.messages, vec![Message::user("hi")]);
    assert!(p.dropped > 0);
}

#[test]
fn a_compaction_keeps_system_messages_and_counts_past_them() {
    let text = "{\"header\":{\"version\":1,\"id\":\"x\",\"created\":0,\"cwd\":\"/\"}}\n\
                {\"message\":{\"role\":\"system\",\"content\":\"sys\"}}\n\
                {\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n\
                {\"message\":{\"role\":\"assistant\",\"content\":\"b\"}}\n\
                {\"compaction\":{\"replaces\":1,\"messages\":[{\"role\":\"user\",\"content\":\"s\"}]}}\n\
                {\"message\":{\"role\":\"user\",\"content\":\"c\"}}\n";
    let p = journal::parse(text.as_bytes()).unwrap();
    assert_eq!(
        p.messages,
        vec![
            Message::system("sys"),
            Message::user("s"),
            Message::assistant("b"),
            Message::user("c"),
        ]
    );
    assert_eq!(p.recorded, 4);
    assert_eq!(p.first_prompt.as_deref(), Some("a"));
}

#[test]
fn secrets_never_reach_a_compaction() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = saved_session(&store);
    let mut opened = store.open(&id, info()).unwrap();
    opened
        .session
        .compacted(
            2,
            &[
                Message::system("never stored"),
                summary("key sk-secret-123456"),
            ],
            &tracker(1, 1),
        )
        .unwrap();
    drop(opened);
    let text = fs::read_to_string(store.path_of(&id)).unwrap();
    assert!(!text.contains("sk-secret-123456"), "{text}");
    assert!(!text.contains("never stored"), "{text}");
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(opened.history[0], summary("key [REDACTED]"));
    assert_eq!(opened.history.len(), 3);
}

#[test]
fn a_started_call_without_result_loads_as_interrupted_not_cancelled() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (mut s, _) = store.create(info()).unwrap();
    let mut two = assistant_calling("c1");
    two.tool_calls
        .as_mut()
        .unwrap()
        .push(ToolCall::new("c2", "time", "{}"));
    s.save(&[Message::user("go"), two], &tracker(1, 1), false)
        .unwrap();
    // c1 started (a kill came while it ran); c2 never did.
    s.tools_started(&["c1"]).unwrap();
    let id = s.id().to_string();
    drop(s);
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(
        opened.history[2],
        Message::tool_result("c1", INTERRUPTED_TOOL)
    );
    assert_eq!(
        opened.history[3],
        Message::tool_result("c2", NOT_STARTED_TOOL)
    );
    assert!(opened.history[2].text().contains("may have run"));
    assert!(
        opened
            .warnings
            .iter()
            .any(|w| w.contains("1 tool call(s) were running")),
        "{:?}",
        opened.warnings
    );
    // A version 1 file recorded no starts: its calls may have run.
    let path = store.path_of(&id);
    let v1 = fs::read_to_string(&path)
        .unwrap()
        .replace(
            &format!("\"version\":{}", super::journal::FORMAT_VERSION),
            "\"version\":1",
        )
        .lines()
        .filter(|l| !l.starts_with("{\"started\""))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    drop(opened);
    fs::write(&path, v1).unwrap();
    let history = store.read_history(&id).unwrap();
    assert_eq!(history[2], Message::tool_result("c1", INTERRUPTED_TOOL));
    assert_eq!(history[3], Message::tool_result("c2", INTERRUPTED_TOOL));
}

#[test]
fn streamed_text_survives_a_kill_and_loads_as_an_interrupted_answer() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (mut s, _) = store.create(info()).unwrap();
    s.save(&[Message::user("tell me")], &tracker(1, 1), false)
        .unwrap();
    s.partial("Once upon ").unwrap();
    s.partial("a time sk-secret-123456").unwrap();
    let id = s.id().to_string();
    // A kill: nothing more is written.
    drop(s);
    let text = fs::read_to_string(store.path_of(&id)).unwrap();
    assert!(!text.contains("sk-secret"), "{text}");
    let mut opened = store.open(&id, info()).unwrap();
    let shown = "Once upon a time [REDACTED]";
    assert_eq!(
        opened.history,
        vec![Message::user("tell me"), interrupted_answer(shown)]
    );
    assert!(opened.history[1]
        .text()
        .ends_with(crate::agent::INTERRUPTED_NOTE));
    assert_eq!(opened.saved, 2);
    assert!(opened.warnings.iter().any(|w| w.contains("cut off")));
    // The next turn goes on from it, and it stays where it was.
    let next = [Message::user("go on"), Message::assistant("the end")];
    opened.session.save(&next, &tracker(2, 2), true).unwrap();
    drop(opened);
    let again = store.open(&id, info()).unwrap();
    assert_eq!(again.history.len(), 4);
    assert_eq!(again.history[1], interrupted_answer(shown));
    assert_eq!(again.history[3], Message::assistant("the end"));
}

#[test]
fn a_whole_answer_replaces_its_partial_records() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (mut s, _) = store.create(info()).unwrap();
    s.save(&[Message::user("q")], &tracker(1, 1), false)
        .unwrap();
    s.partial("Hel").unwrap();
    s.partial("lo").unwrap();
    s.save(&[Message::assistant("Hello")], &tracker(1, 1), true)
        .unwrap();
    let id = s.id().to_string();
    drop(s);
    let opened = store.open(&id, info()).unwrap();
    assert_eq!(
        opened.history,
        vec![Message::user("q"), Message::assistant("Hello")]
    );
    assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
}

#[test]
fn a_fifo_in_the_session_dir_is_an_error_not_a_hang() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let (s, _) = store.create(info()).unwrap();
    drop(s);
    let fifo = store.path_of("20990101-000000-ffff");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Opening it for reading would wait for a writer forever.
    let (list, errors) = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(errors.len(), 1);
    let e = errors[0].to_string();
    assert!(e.contains("FIFO (named pipe), not a regular file"), "{e}");
    let e = store
        .open("20990101-000000-ffff", info())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
    let e = store
        .read_history("20990101-000000-ffff")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn a_file_of_one_giant_record_is_listed_from_a_stream() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    let id = "giant";
    std::fs::create_dir_all(store.dir()).unwrap();
    // One user message far past the parsed-line limit, no turn mark.
    let mut file = b"{\"header\":{\"version\":1,\"id\":\"giant\",\"created\":0,\"cwd\":\"/\",\"model\":\"m1\"}}\n".to_vec();
    file.extend_from_slice(
        b"{\"message\":{\"role\":\"user\",\"content\":\"summarise \\\"this\\\" log ",
    );
    file.extend(std::iter::repeat_n(b'y', 2 * 1024 * 1024));
    file.extend_from_slice(b"\"}}\n");
    std::fs::write(store.dir().join(format!("{id}.jsonl")), &file).unwrap();
    let (list, errors) = store.list().unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let s = list.iter().find(|s| s.id == id).expect("listed");
    assert_eq!(s.messages, 1);
    assert!(
        s.title.starts_with("summarise \"this\" log yyy"),
        "{}",
        s.title
    );
    assert_eq!(s.model, "m1");
}

#[test]
fn the_stream_summary_counts_and_titles_like_the_parser() {
    let text = b"{\"header\":{\"version\":1,\"id\":\"x\",\"created\":0,\"cwd\":\"/\"}}\n{\"message\":{\"role\":\"user\",\"content\":\"hi there\"}}\n{\"message\":{\"role\":\"assistant\",\"content\":\"hello\"}}\n{\"message\":{\"role\":\"user\",\"content\":\"torn";
    let listed = journal::summarize_stream(&text[..]).unwrap();
    let parsed = journal::parse(text).unwrap();
    assert_eq!(listed.messages, parsed.recorded);
    assert_eq!(listed.first_prompt, parsed.first_prompt);
}

#[test]
fn a_listing_says_which_front_end_drove_the_last_turn() {
    let tmp = Tmp::new();
    let store = Store::for_workdir(&tmp.0);
    saved_session(&store);
    let (list, errors) = store.list().unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(list[0].origin.as_deref(), Some("exec"));
}
