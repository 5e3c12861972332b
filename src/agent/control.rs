//! What a front end can change while a run is going, shared between the op
//! loop and the run: the steering and follow-up queues, the approval policy
//! with the requests waiting on it, and a snapshot for status reports. Every
//! access is a short critical section that never spans an `.await`.
//!
//! The approval policy lives here and nowhere else. A tool that needs consent
//! asks the `Gate`; the gate applies, in order, the denylist (refused, even
//! with everything approved), `shell_confirm = false` (approved), the policy
//! (all, none, a time window), a shell command line that only reads
//! (`shell::readonly`, approved unless `tools.auto_approve_read_only` is
//! off), the prefixes the user allowed with "always" (`allowlist.rs`) and,
//! when it says ask, a front end through an `ApprovalRequested` event
//! answered by `Op::Approve`, or, with nobody to ask, a denial with the
//! reason.

use super::allowlist::{self, SharedAllowList};
use super::emitter::Emitter;
use super::hooks::{About, HookEvent, HookRunner};
use super::plan::PlanMode;
use super::protocol::{
    ApprovalPolicy, ApprovalQuestion, DecidedBy, Decision, ElicitationAction, ElicitationQuestion,
    ElicitedBy, EventKind, QueueMode, StatusReport,
};
use crate::tools::denylist::Denylist;
use crate::tools::elicitation::Outcome;
use crate::tools::{Approval, ApprovalRequest, Approver};
use async_trait::async_trait;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// Said to the model when the user sent a message while its tools ran.
pub const SKIPPED_FOR_STEER: &str = "skipped: the user sent a new message";

/// How commands and file changes that need consent are decided. File writes
/// follow the same rules as shell commands: a shell command can write any
/// file, so asking more (or less) for one than the other would buy nothing.
#[derive(Debug, Clone)]
pub struct ApprovalRules {
    pub policy: ApprovalPolicy,
    /// `tools.shell_confirm`: false approves everything not denylisted.
    pub confirm: bool,
    /// Refused whatever the policy says: the built-in rules and the
    /// user's `tools.shell_denylist`.
    pub denylist: Denylist,
    /// Someone can answer `ApprovalRequested` (a terminal, a client). When
    /// not, asking means denying, with this reason for the model.
    pub no_approver_reason: Option<String>,
    /// `tools.auto_approve_read_only`: a shell command line that only reads
    /// runs without asking (under `ask`, and with nobody to ask).
    pub read_only: bool,
}

impl Default for ApprovalRules {
    fn default() -> Self {
        ApprovalRules {
            policy: ApprovalPolicy::Ask,
            confirm: true,
            denylist: Denylist::default(),
            no_approver_reason: None,
            read_only: true,
        }
    }
}

#[derive(Default)]
struct State {
    steering: VecDeque<String>,
    follow_ups: VecDeque<String>,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    rules: ApprovalRules,
    waiting: HashMap<String, oneshot::Sender<Decision>>,
    /// Servers' questions waiting for an answer, by id, with their forms
    /// (an answer is checked against them).
    questions: HashMap<String, (ElicitationQuestion, oneshot::Sender<Answer>)>,
    /// The latest status the running agent published.
    snapshot: Option<StatusReport>,
}

pub struct Control {
    state: Mutex<State>,
    emitter: Emitter,
    /// Prefixes allowed with "always", never saved: the agent's own, or a
    /// served session's that outlives it (`AgentSetup::allowed`).
    allowed: SharedAllowList,
    /// Approvals are asked one at a time, so front ends show one prompt.
    one_at_a_time: tokio::sync::Mutex<()>,
    /// Plan mode (`Op::SetPlanMode`): whatever needs consent is refused,
    /// but for what only reads (`plan::refusal`).
    plan_mode: PlanMode,
}

impl Control {
    pub fn new(
        emitter: Emitter,
        rules: ApprovalRules,
        allowed: SharedAllowList,
        steering_mode: QueueMode,
        follow_up_mode: QueueMode,
    ) -> Arc<Control> {
        Arc::new(Control {
            state: Mutex::new(State {
                rules,
                steering_mode,
                follow_up_mode,
                ..State::default()
            }),
            emitter,
            allowed,
            one_at_a_time: tokio::sync::Mutex::new(()),
            plan_mode: PlanMode::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn policy(&self) -> ApprovalPolicy {
        self.lock().rules.policy
    }

    pub fn set_policy(&self, policy: ApprovalPolicy) {
        self.lock().rules.policy = policy;
    }

    /// Queues a steering message; returns the queues after it.
    pub fn steer(&self, text: String) -> (Vec<String>, Vec<String>) {
        let mut st = self.lock();
        st.steering.push_back(text);
        queues(&st)
    }

    pub fn follow_up(&self, text: String) -> (Vec<String>, Vec<String>) {
        let mut st = self.lock();
        st.follow_ups.push_back(text);
        queues(&st)
    }

    pub fn queues(&self) -> (Vec<String>, Vec<String>) {
        queues(&self.lock())
    }

    pub fn has_steering(&self) -> bool {
        !self.lock().steering.is_empty()
    }

    /// The steering messages due now (one, or all, by the mode).
    pub fn take_steering(&self) -> Vec<String> {
        let mut st = self.lock();
        let mode = st.steering_mode;
        take(&mut st.steering, mode)
    }

    pub fn take_follow_ups(&self) -> Vec<String> {
        let mut st = self.lock();
        let mode = st.follow_up_mode;
        take(&mut st.follow_ups, mode)
    }

    /// Empties the named queues, returning what they held, oldest first.
    pub fn clear(&self, steering: bool, follow_ups: bool) -> Vec<String> {
        let mut st = self.lock();
        let mut out = Vec::new();
        if steering {
            out.extend(st.steering.drain(..));
        }
        if follow_ups {
            out.extend(st.follow_ups.drain(..));
        }
        out
    }

    /// Keeps `report` for status requests that come while the agent is busy.
    pub fn publish(&self, report: StatusReport) {
        self.lock().snapshot = Some(report);
    }

    /// The last published status, with the queues and policy as they are now.
    pub fn snapshot(&self) -> Option<StatusReport> {
        let st = self.lock();
        let mut report = st.snapshot.clone()?;
        report.policy = st.rules.policy;
        report.steering = st.steering.iter().cloned().collect();
        report.follow_ups = st.follow_ups.iter().cloned().collect();
        Some(report)
    }

    pub fn plan_mode(&self) -> &PlanMode {
        &self.plan_mode
    }

    pub fn set_plan_mode(&self, on: bool) {
        self.plan_mode.set(on);
    }

    /// Answers a waiting approval; false when nothing waits under that id.
    pub fn answer(&self, call_id: &str, decision: Decision) -> bool {
        match self.lock().waiting.remove(call_id) {
            Some(tx) => tx.send(decision).is_ok(),
            None => false,
        }
    }

    /// Denies every waiting approval and cancels every waiting question
    /// (the run is ending).
    pub fn drop_waiting(&self) {
        let mut st = self.lock();
        st.waiting.clear();
        st.questions.clear();
    }

    /// Answers a waiting question. An error says why not: nothing waits
    /// under that id, or an accepted form's content does not fit it (the
    /// question then still waits).
    pub fn answer_question(
        &self,
        id: &str,
        answer: ElicitationAction,
        reason: Option<String>,
    ) -> Result<(), String> {
        let mut st = self.lock();
        let Some((question, _)) = st.questions.get(id) else {
            return Err(format!("no question is waiting under the id {id}"));
        };
        if let ElicitationAction::Accept { content } = &answer {
            question
                .check(content)
                .map_err(|e| format!("the answer to question {id} does not fit its form: {e}"))?;
        }
        if let Some((_, tx)) = st.questions.remove(id) {
            let _ = tx.send((answer, reason));
        }
        Ok(())
    }

    /// Decides without asking, when the rules allow; with the allow-list
    /// prefix that approved it, if one did.
    fn decide(&self, request: &ApprovalRequest) -> Option<(Approval, DecidedBy, Option<String>)> {
        if self.plan_mode.is_on() {
            if let Some(refusal) = super::plan::refusal(request) {
                return Some((refusal, DecidedBy::PlanMode, None));
            }
        }
        let mut st = self.lock();
        let rules = &st.rules;
        if let Some(denial) = rules.denylist.check(&request.command) {
            return Some((
                Approval::Refused {
                    reason: format!(
                        "{denial}, which the denylist never allows; do not try to work around it"
                    ),
                },
                DecidedBy::Denylist,
                None,
            ));
        }
        if !rules.confirm {
            return Some((Approval::Approved, DecidedBy::Policy, None));
        }
        match rules.policy {
            ApprovalPolicy::All => return Some((Approval::Approved, DecidedBy::Policy, None)),
            ApprovalPolicy::None => {
                return Some((
                    Approval::Denied {
                        reason:
                            "the user denies all commands and file changes for now (/approve none)"
                                .into(),
                    },
                    DecidedBy::Policy,
                    None,
                ))
            }
            ApprovalPolicy::Until { unix_ms } if crate::clock::now_unix_ms() < unix_ms => {
                return Some((Approval::Approved, DecidedBy::Policy, None))
            }
            ApprovalPolicy::Until { .. } => st.rules.policy = ApprovalPolicy::Ask,
            ApprovalPolicy::Edits if crate::tools::is_file_change(&request.tool) => {
                return Some((Approval::Approved, DecidedBy::Policy, None))
            }
            ApprovalPolicy::Ask | ApprovalPolicy::Edits => {}
        }
        // Only `run_shell`: text typed into a pane may not be shell at all.
        // A tool the user trusts to say it only reads (MCP's readOnlyHint
        // on a server with `trust_read_only`) is the user's own choice.
        if request.read_only
            || st.rules.read_only
                && request.tool == "run_shell"
                && crate::shell::readonly::is_read_only(&request.command)
        {
            return Some((Approval::Approved, DecidedBy::ReadOnly, None));
        }
        if let Some(prefix) = self.allowed.find(&request.tool, &request.command) {
            return Some((Approval::Approved, DecidedBy::AllowList, Some(prefix)));
        }
        st.rules.no_approver_reason.as_ref().map(|reason| {
            (
                Approval::Denied {
                    reason: reason.clone(),
                },
                DecidedBy::NoApprover,
                None,
            )
        })
    }

    /// Allows `prefix` for as long as the allow list lives.
    fn allow(&self, prefix: Vec<String>) {
        self.allowed.add(prefix);
    }

    fn wait_for(&self, call_id: &str) -> oneshot::Receiver<Decision> {
        let (tx, rx) = oneshot::channel();
        self.lock().waiting.insert(call_id.to_string(), tx);
        rx
    }
}

/// An answer to a question, and the reason a front end gave for declining.
type Answer = (ElicitationAction, Option<String>);

fn queues(st: &State) -> (Vec<String>, Vec<String>) {
    (
        st.steering.iter().cloned().collect(),
        st.follow_ups.iter().cloned().collect(),
    )
}

fn take(q: &mut VecDeque<String>, mode: QueueMode) -> Vec<String> {
    match mode {
        QueueMode::All => q.drain(..).collect(),
        QueueMode::OneAtATime => q.pop_front().into_iter().collect(),
    }
}

/// The agent's `Approver`: the rules above, then the front end.
pub struct Gate {
    pub control: Arc<Control>,
    /// Told (`Notification`) when a front end is asked.
    pub hooks: Option<Arc<HookRunner>>,
}

#[async_trait]
impl Approver for Gate {
    async fn approve(&self, request: ApprovalRequest) -> Approval {
        self.approve_for(request, None).await
    }

    async fn elicit(&self, question: ElicitationQuestion, wait: Duration) -> Outcome {
        self.ask_question(question, wait).await
    }

    async fn approve_for(&self, request: ApprovalRequest, subagent: Option<&str>) -> Approval {
        let control = &self.control;
        let _turn = control.one_at_a_time.lock().await;
        let decided = |approved: bool,
                       by: DecidedBy,
                       reason: Option<String>,
                       always: Option<String>| EventKind::ApprovalDecided {
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            command: request.command.clone(),
            approved,
            by,
            reason,
            always,
        };
        if let Some((answer, by, always)) = control.decide(&request) {
            let (approved, reason) = match &answer {
                Approval::Approved => (true, None),
                Approval::Denied { reason } | Approval::Refused { reason } => {
                    (false, Some(reason.clone()))
                }
            };
            // `shell_confirm = false` is the quiet default some users choose:
            // no event per command, as before.
            if !approved || control.lock().rules.confirm {
                control
                    .emitter
                    .emit(decided(approved, by, reason, always))
                    .await;
            }
            return answer;
        }
        let offered = allowlist::offer(&request.tool, &request.command);
        let answer = control.wait_for(&request.call_id);
        control
            .emitter
            .emit(EventKind::ApprovalRequested(ApprovalQuestion {
                call_id: request.call_id.clone(),
                tool: request.tool.clone(),
                actor: request.actor.clone(),
                command: request.command.clone(),
                detail: request.detail.clone(),
                always: offered.as_deref().map(allowlist::shown),
                subagent: subagent.map(str::to_string),
            }))
            .await;
        if let Some(hooks) = self
            .hooks
            .as_ref()
            .filter(|h| h.has(HookEvent::Notification))
        {
            // Awaited before the answer: the answer keeps in its channel,
            // and the hook needs no task of its own to outlive.
            let mut fields = serde_json::Map::new();
            fields.insert(
                "message".into(),
                format!("buddy needs your permission to use {}", request.tool).into(),
            );
            fields.insert("notification_type".into(), "permission_prompt".into());
            let about = About {
                call_id: Some(&request.call_id),
                tool: Some(&request.tool),
            };
            hooks.fire(HookEvent::Notification, about, fields).await;
        }
        match answer.await {
            Ok(Decision::Approve) => {
                control
                    .emitter
                    .emit(decided(true, DecidedBy::User, None, None))
                    .await;
                Approval::Approved
            }
            Ok(Decision::ApproveAlways) => {
                // Only the prefix offered above: a client cannot widen it.
                let shown = offered.as_deref().map(allowlist::shown);
                if let Some(prefix) = offered {
                    control.allow(prefix);
                }
                control
                    .emitter
                    .emit(decided(true, DecidedBy::User, None, shown))
                    .await;
                Approval::Approved
            }
            Ok(Decision::Deny { reason }) => {
                let reason = reason
                    .filter(|r| !r.trim().is_empty())
                    .map(|r| format!("the user denied it: {r}"))
                    .unwrap_or_else(|| "the user denied it".into());
                control
                    .emitter
                    .emit(decided(false, DecidedBy::User, Some(reason.clone()), None))
                    .await;
                Approval::Denied { reason }
            }
            Err(_) => {
                let reason = "the run ended before the user answered".to_string();
                control
                    .emitter
                    .emit(decided(
                        false,
                        DecidedBy::Interrupted,
                        Some(reason.clone()),
                        None,
                    ))
                    .await;
                Approval::Denied { reason }
            }
        }
    }
}

impl Gate {
    /// Asks a front end a server's question (one prompt at a time, as
    /// approvals are) and waits at most `wait` for the answer.
    async fn ask_question(&self, question: ElicitationQuestion, wait: Duration) -> Outcome {
        let control = &self.control;
        let _turn = control.one_at_a_time.lock().await;
        let (tx, rx) = oneshot::channel();
        let id = question.id.clone();
        control
            .lock()
            .questions
            .insert(id.clone(), (question.clone(), tx));
        control
            .emitter
            .emit(EventKind::ElicitationRequested(question.clone()))
            .await;
        let outcome = match tokio::time::timeout(wait, rx).await {
            Ok(Ok((ElicitationAction::Decline, Some(reason)))) => Outcome::Refused(reason),
            Ok(Ok((action, _))) => Outcome::User(action),
            Ok(Err(_)) => Outcome::Ended,
            Err(_) => {
                control.lock().questions.remove(&id);
                Outcome::TimedOut
            }
        };
        let (by, reason) = match &outcome {
            Outcome::User(_) => (ElicitedBy::User, None),
            Outcome::Refused(r) => (ElicitedBy::Refused, Some(r.clone())),
            Outcome::TimedOut => (
                ElicitedBy::Timeout,
                Some(format!("nobody answered within {} s", wait.as_secs())),
            ),
            Outcome::Ended => (ElicitedBy::Interrupted, None),
        };
        control
            .emitter
            .emit(EventKind::ElicitationDecided {
                id,
                server: question.server,
                call_id: question.call_id,
                action: outcome.action().as_str().to_string(),
                by,
                reason,
            })
            .await;
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::Event;
    use tokio::sync::mpsc;

    fn gate() -> (Arc<Gate>, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(64);
        let control = Control::new(
            Emitter::new(tx),
            ApprovalRules::default(),
            SharedAllowList::default(),
            QueueMode::OneAtATime,
            QueueMode::OneAtATime,
        );
        (
            Arc::new(Gate {
                control,
                hooks: None,
            }),
            rx,
        )
    }

    fn shell(id: &str, command: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: id.into(),
            tool: "run_shell".into(),
            actor: "me@here".into(),
            command: command.into(),
            detail: None,
            read_only: false,
        }
    }

    /// Asks, waits for the question and answers it with `decision`.
    async fn answered(
        gate: &Arc<Gate>,
        rx: &mut mpsc::Receiver<Event>,
        request: ApprovalRequest,
        decision: Decision,
    ) -> (Approval, Option<String>) {
        let g = gate.clone();
        let asking = tokio::spawn(async move { g.approve(request).await });
        let offered = match rx.recv().await.map(|e| e.kind) {
            Some(EventKind::ApprovalRequested(q)) => {
                assert!(gate.control.answer(&q.call_id, decision));
                q.always
            }
            other => panic!("expected a question, got {other:?}"),
        };
        (asking.await.expect("the gate answers"), offered)
    }

    #[tokio::test]
    async fn always_allows_its_prefix_but_never_what_the_denylist_refuses() {
        let (gate, mut rx) = gate();
        let (first, offered) = answered(
            &gate,
            &mut rx,
            shell("1", "rm scratch.txt"),
            Decision::ApproveAlways,
        )
        .await;
        assert_eq!(
            (first, offered.as_deref()),
            (Approval::Approved, Some("rm"))
        );
        match rx.recv().await.map(|e| e.kind) {
            Some(EventKind::ApprovalDecided { by, always, .. }) => {
                assert_eq!((by, always.as_deref()), (DecidedBy::User, Some("rm")))
            }
            other => panic!("{other:?}"),
        }

        assert_eq!(
            gate.approve(shell("2", "rm other.txt")).await,
            Approval::Approved
        );
        match rx.recv().await.map(|e| e.kind) {
            Some(EventKind::ApprovalDecided { by, always, .. }) => {
                assert_eq!((by, always.as_deref()), (DecidedBy::AllowList, Some("rm")))
            }
            other => panic!("{other:?}"),
        }

        for command in ["rm -rf /", "rm -rf ~", "rm -rf --no-preserve-root /"] {
            let refused = gate.approve(shell("3", command)).await;
            assert!(
                matches!(refused, Approval::Refused { .. }),
                "{command}: {refused:?}"
            );
            match rx.recv().await.map(|e| e.kind) {
                Some(EventKind::ApprovalDecided { by, .. }) => assert_eq!(by, DecidedBy::Denylist),
                other => panic!("{other:?}"),
            }
        }

        // A compound command does not ride on the prefix: it is asked about.
        let (denied, offered) = answered(
            &gate,
            &mut rx,
            shell("4", "rm a; reboot"),
            Decision::Deny { reason: None },
        )
        .await;
        assert!(matches!(denied, Approval::Denied { .. }));
        assert_eq!(offered, None);
    }

    #[tokio::test]
    async fn read_only_lines_pass_without_asking_unless_switched_off_or_denied_by_policy() {
        let (gate, mut rx) = gate();
        for command in ["ls -la", "wc -l f | sort -n", "git status"] {
            assert_eq!(gate.approve(shell("1", command)).await, Approval::Approved);
            match rx.recv().await.map(|e| e.kind) {
                Some(EventKind::ApprovalDecided { by, approved, .. }) => {
                    assert_eq!((by, approved), (DecidedBy::ReadOnly, true))
                }
                other => panic!("{other:?}"),
            }
        }
        // Not read-only: asked as before.
        let (denied, _) = answered(
            &gate,
            &mut rx,
            shell("2", "ls > out"),
            Decision::Deny { reason: None },
        )
        .await;
        assert!(matches!(denied, Approval::Denied { .. }));
        let _decided = rx.recv().await;
        // Not for text typed into a pane.
        let mut pane = shell("3", "ls");
        pane.tool = "send-keys".into();
        let (typed, _) = answered(&gate, &mut rx, pane, Decision::Approve).await;
        assert_eq!(typed, Approval::Approved);
        let _decided = rx.recv().await;
        // `/approve none` denies everything.
        gate.control.set_policy(ApprovalPolicy::None);
        assert!(matches!(
            gate.approve(shell("4", "ls")).await,
            Approval::Denied { .. }
        ));
        let _decided = rx.recv().await;
        // Switched off: asked.
        gate.control.set_policy(ApprovalPolicy::Ask);
        gate.control.lock().rules.read_only = false;
        let (asked, _) = answered(&gate, &mut rx, shell("5", "ls"), Decision::Approve).await;
        assert_eq!(asked, Approval::Approved);
    }

    #[tokio::test]
    async fn with_nobody_to_ask_read_only_lines_still_run() {
        let (tx, mut rx) = mpsc::channel(64);
        let rules = ApprovalRules {
            no_approver_reason: Some("no terminal".into()),
            ..ApprovalRules::default()
        };
        let control = Control::new(
            Emitter::new(tx),
            rules,
            SharedAllowList::default(),
            QueueMode::OneAtATime,
            QueueMode::OneAtATime,
        );
        let gate = Gate {
            control,
            hooks: None,
        };
        assert_eq!(gate.approve(shell("1", "ls")).await, Approval::Approved);
        let _decided = rx.recv().await;
        match gate.approve(shell("2", "find . -delete")).await {
            Approval::Denied { reason } => assert_eq!(reason, "no terminal"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_edits_policy_approves_file_changes_and_asks_for_commands() {
        let (tx, mut rx) = mpsc::channel(64);
        let rules = ApprovalRules {
            policy: ApprovalPolicy::Edits,
            // Asking denies, so what would be asked shows as a denial.
            no_approver_reason: Some("would ask".into()),
            ..ApprovalRules::default()
        };
        let control = Control::new(
            Emitter::new(tx),
            rules,
            SharedAllowList::default(),
            QueueMode::OneAtATime,
            QueueMode::OneAtATime,
        );
        let gate = Gate {
            control,
            hooks: None,
        };
        for tool in crate::tools::FILE_CHANGE_TOOLS {
            let mut edit = shell("e", "write notes.txt");
            edit.tool = tool.into();
            assert_eq!(gate.approve(edit).await, Approval::Approved, "{tool}");
            let _decided = rx.recv().await;
        }
        match gate.approve(shell("c", "touch a")).await {
            Approval::Denied { reason } => assert_eq!(reason, "would ask"),
            other => panic!("{other:?}"),
        }
        // Under `ask` the same edit is asked about.
        gate.control.set_policy(ApprovalPolicy::Ask);
        let mut edit = shell("e2", "write notes.txt");
        edit.tool = "write_file".into();
        assert!(matches!(gate.approve(edit).await, Approval::Denied { .. }));
    }

    #[tokio::test]
    async fn always_is_only_this_once_where_nothing_was_offered() {
        let (gate, mut rx) = gate();
        let (first, offered) = answered(
            &gate,
            &mut rx,
            shell("1", "touch a | wc -l"),
            Decision::ApproveAlways,
        )
        .await;
        assert_eq!((first, offered), (Approval::Approved, None));
        let _decided = rx.recv().await;
        let (again, _) = answered(
            &gate,
            &mut rx,
            shell("2", "touch a | wc -l"),
            Decision::Deny { reason: None },
        )
        .await;
        assert!(matches!(again, Approval::Denied { .. }));
    }
}
