//! One served session while the server runs: its event log (ids, replay),
//! the live subscribers, its agent (running, or kept idle between runs for
//! the next prompt), and the prefixes allowed with "always", which every
//! agent of the session shares.
//!
//! A kept agent holds no session: after each run it is sent `NewSession`,
//! which drops the session file (and its lock), and each run starts with a
//! `Resume` that reads the file afresh. So between runs the session is free
//! for `buddy resume` as before, and a run sees what was written elsewhere
//! meanwhile. What the pool saves is the agent's set-up (settings, tools,
//! project instructions), not the conversation.

use crate::agent::allowlist::SharedAllowList;
use crate::agent::protocol::{ApprovalQuestion, Decision, ErrorCode, Event, EventKind, Op, OpId};
use crate::agent::service::OpSender;
use crate::agent::AgentHandle;
use crate::drive::{drive, Approval, End, Flow, Renderer};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, Notify};

/// Event data kept per session for clients that reconnect: generous while a
/// run streams, small once it is over (the history endpoint has the rest).
const LOG_BYTES_RUNNING: usize = 8 * 1024 * 1024;
const LOG_BYTES_IDLE: usize = 64 * 1024;
/// Events a subscriber may fall behind the live feed before it catches up
/// from the log instead; small, so an idle session costs little.
const LIVE_CAPACITY: usize = 64;

/// An event as sent on the wire: its id in this session, its SSE name and
/// its JSON.
#[derive(Debug)]
pub struct Stamped {
    pub id: u64,
    pub name: SseName,
    pub data: String,
    /// The run ended with this event.
    pub done: bool,
}

impl Stamped {
    /// An event as a relay stored it: its id and JSON.
    pub fn stored(id: u64, data: String) -> Option<Stamped> {
        let ev = serde_json::from_str::<Event>(&data).ok()?;
        Some(Stamped {
            id,
            name: SseName::of(&ev.kind),
            done: matches!(ev.kind, EventKind::RunFinished { .. }),
            data,
        })
    }
}

/// SSE event names: those of the classic streaming backends where they exist
/// (`content_delta`, `tool_call_start`, `tool_call_result`, `done`), the
/// event's own type otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseName(pub &'static str);

impl SseName {
    pub fn of(kind: &EventKind) -> SseName {
        SseName(match kind {
            EventKind::TextDelta { .. } => "content_delta",
            EventKind::ToolCall { .. } => "tool_call_start",
            EventKind::ToolResult { .. } => "tool_call_result",
            EventKind::ToolProgress { .. } => "tool_progress",
            EventKind::RunFinished { .. } => "done",
            EventKind::Reasoning { .. } => "reasoning",
            EventKind::ApprovalRequested { .. } => "approval_request",
            EventKind::Subagent(_) => "subagent",
            EventKind::ApprovalDecided { .. } => "approval_decided",
            EventKind::ElicitationRequested(_) => "elicitation_request",
            EventKind::ElicitationDecided { .. } => "elicitation_decided",
            EventKind::Usage { .. } => "usage",
            EventKind::Error { .. } => "error",
            EventKind::Warning { .. } => "warning",
            EventKind::HookBlocked { .. } => "hook_blocked",
            EventKind::RunStarted { .. } => "run_started",
            EventKind::UserMessage { .. } => "user_message",
            EventKind::ModelRequest { .. } => "model_request",
            EventKind::Retrying { .. } => "retrying",
            EventKind::Queues { .. } => "queues",
            EventKind::Unqueued { .. } => "unqueued",
            EventKind::Compacted { .. } => "compacted",
            EventKind::SessionResumed { .. } => "session_resumed",
            EventKind::SessionStarted { .. } => "session_started",
            EventKind::SessionCleared => "session_cleared",
            EventKind::SessionForked { .. } => "session_forked",
            EventKind::Turns { .. } => "turns",
            EventKind::Rewound { .. } => "rewound",
            EventKind::ModelSwitched { .. } => "model_switched",
            EventKind::ApprovalPolicyChanged { .. } => "approval_policy_changed",
            EventKind::Status(_) => "status",
            EventKind::Sessions { .. } => "sessions",
            EventKind::TimeoutSet { .. } => "timeout_set",
            EventKind::CommandRan(_) => "command_ran",
            EventKind::Jobs { .. } => "jobs",
            EventKind::ShutdownComplete => "shutdown_complete",
            EventKind::Plan { .. } => "plan",
            EventKind::PlanMode { .. } => "plan_mode",
            EventKind::PlanReady { .. } => "plan_ready",
        })
    }
}

pub struct Live {
    pub id: String,
    state: Mutex<State>,
    tx: broadcast::Sender<Arc<Stamped>>,
    /// In memory for the server's life, like the REPL's for its agent's.
    allowed: SharedAllowList,
    /// Told whenever `busy` or `ops` changes, for a steer that arrived as a
    /// run was ending ([`Live::settled`]).
    changed: Notify,
    /// Sees every event published (the server's metrics and spending).
    watch: Option<Box<dyn Watch>>,
    /// Where events go when servers share sessions (`relay.rs`): published
    /// there, and taken into the log only as the follower brings them back.
    relay: Option<Arc<dyn super::relay::Relay>>,
}

/// Something that sees a session's every published event, in order, as it
/// is published (`team.rs`: metrics, spending). It must not block.
pub trait Watch: Send + Sync {
    fn saw(&self, kind: &EventKind);
}

/// One of the server's places for a live agent (`Limits::sessions`), held
/// for as long as the agent lives.
pub type AgentPlace = tokio::sync::OwnedSemaphorePermit;

/// An agent of this server with its place.
pub struct Pooled {
    pub agent: AgentHandle,
    pub place: AgentPlace,
}

impl Pooled {
    /// Stops the agent (it holds no session between runs) and gives its
    /// place back.
    pub async fn close(self) {
        self.agent.shutdown().await;
        drop(self.place);
    }
}

#[derive(Default)]
struct State {
    log: VecDeque<Arc<Stamped>>,
    /// Bytes of event data in `log`.
    log_bytes: usize,
    next_id: u64,
    /// The agent of the run in progress, while it takes ops from clients.
    ops: Option<OpSender>,
    /// From a prompt's claim until its run is over and its agent kept (or
    /// gone): one run at a time.
    busy: bool,
    /// The agent kept between runs, and since when.
    parked: Option<(Pooled, Instant)>,
    /// The agent a pump drives, for a shutdown to reach it in any state.
    agent_ops: Option<OpSender>,
    /// Approvals asked and not yet decided, with the command each asks
    /// to run (for the audit log).
    waiting: HashMap<String, String>,
    /// When the record was made or last published an event.
    touched: Option<Instant>,
    /// The pump of the agent in progress finishes when this is taken.
    pump: Option<tokio::task::JoinHandle<()>>,
}

/// The places a running session holds until the run's agent is gone: one
/// of the server's, and one of its user's when users have a running limit.
/// Dropping them gives them back; the user's is given back (and waited for)
/// before the run's end is published.
pub struct RunSlot {
    pub _server: tokio::sync::OwnedSemaphorePermit,
    /// The user's place (`team.rs`), given back before the run's end is
    /// published.
    pub user: Option<UserPlace>,
}

/// A run's place among its user's (`team.rs` gives them), held until the
/// run is over: in this server's memory, or a row every instance counts.
#[derive(Debug)]
pub enum UserPlace {
    Local(tokio::sync::OwnedSemaphorePermit),
    Shared(super::team_pg::RunPlace),
}

impl UserPlace {
    /// Gives the place back, waiting until every instance sees it free.
    pub async fn give_back(self) {
        match self {
            UserPlace::Local(permit) => drop(permit),
            UserPlace::Shared(place) => place.give_back().await,
        }
    }
}

/// What a subscriber gets: the events it missed, then a live feed.
pub struct Subscription {
    pub backlog: Vec<Arc<Stamped>>,
    pub live: broadcast::Receiver<Arc<Stamped>>,
    /// The id of the first event this subscription delivers: the backlog's
    /// first, else the next one. Ids between the one asked for and this are
    /// no longer in the log.
    pub from: u64,
}

impl Live {
    #[cfg(test)]
    pub fn new(id: String) -> Arc<Live> {
        Live::watched(id, None)
    }

    /// A record whose events `watch` sees as well.
    pub fn watched(id: String, watch: Option<Box<dyn Watch>>) -> Arc<Live> {
        Live::made(id, watch, None, first_event_id())
    }

    /// A record whose events go through `relay`, numbered after `last`
    /// (the last one stored).
    pub fn relayed(
        id: String,
        watch: Option<Box<dyn Watch>>,
        relay: Arc<dyn super::relay::Relay>,
        last: u64,
    ) -> Arc<Live> {
        Live::made(id, watch, Some(relay), last.saturating_add(1))
    }

    fn made(
        id: String,
        watch: Option<Box<dyn Watch>>,
        relay: Option<Arc<dyn super::relay::Relay>>,
        next_id: u64,
    ) -> Arc<Live> {
        let (tx, _) = broadcast::channel(LIVE_CAPACITY);
        Arc::new(Live {
            id,
            state: Mutex::new(State {
                next_id,
                touched: Some(Instant::now()),
                ..State::default()
            }),
            tx,
            allowed: SharedAllowList::default(),
            changed: Notify::new(),
            watch,
            relay,
        })
    }

    /// This session's allow list, for the agent of its next run.
    pub fn allowed(&self) -> SharedAllowList {
        self.allowed.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether to drop this record now, which is when nothing would be lost:
    /// no run, nobody holding it (subscribers, requests in progress, timers:
    /// `me` is the only reference), no "always" answers to keep, and no event
    /// for `idle`. A record made again later numbers its events above every
    /// id this one gave ([`first_event_id`]), so a reconnecting client misses
    /// nothing new; what it missed of the old log is in the session's history.
    pub fn evict(me: &Arc<Live>, idle: Duration, now: Instant) -> bool {
        if Arc::strong_count(me) > 1 || me.tx.receiver_count() > 0 || !me.allowed.is_empty() {
            return false;
        }
        let st = me.lock();
        let quiet = st.ops.is_none()
            && !st.busy
            && st.parked.is_none()
            && st.waiting.is_empty()
            && st.pump.as_ref().is_none_or(|p| p.is_finished())
            && st
                .touched
                .is_none_or(|t| now.saturating_duration_since(t) >= idle);
        if quiet {
            GIVEN.fetch_max(st.next_id, Ordering::Relaxed);
        }
        quiet
    }

    /// A run is starting, going, or ending.
    pub fn running(&self) -> bool {
        self.lock().busy
    }

    /// Whether the session has an agent, running or kept.
    pub fn has_agent(&self) -> bool {
        let st = self.lock();
        st.busy || st.parked.is_some()
    }

    /// Takes the session for a new run: its kept agent if it has one. None
    /// when a run is already starting or going.
    pub fn claim(&self) -> Option<Option<Pooled>> {
        let mut st = self.lock();
        if st.busy {
            return None;
        }
        st.busy = true;
        Some(st.parked.take().map(|(p, _)| p))
    }

    /// Gives back a claim whose run never started (its agent could not be
    /// built).
    pub fn unclaim(&self) {
        self.lock().busy = false;
        self.changed.notify_waiters();
    }

    /// The kept agent, when it has had no run for `idle`.
    pub fn take_idle_agent(&self, idle: Duration, now: Instant) -> Option<Pooled> {
        let mut st = self.lock();
        let since = st.parked.as_ref()?.1;
        if st.busy || now.saturating_duration_since(since) < idle {
            return None;
        }
        st.agent_ops = None;
        st.parked.take().map(|(p, _)| p)
    }

    /// Since when the kept agent has been idle; none without one.
    pub fn idle_since(&self) -> Option<Instant> {
        let st = self.lock();
        if st.busy {
            return None;
        }
        st.parked.as_ref().map(|(_, since)| *since)
    }

    /// Waits until a run that is starting or ending either takes ops or is
    /// over (at most `limit`); a steer that came as a run ended then joins
    /// the next one or starts its own.
    pub async fn settled(&self, limit: Duration) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                {
                    let st = self.lock();
                    if st.ops.is_some() || !st.busy {
                        return;
                    }
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// The id the next event will get.
    pub fn next_id(&self) -> u64 {
        self.lock().next_id
    }

    /// Events after `after`, then everything that follows. Taken under the
    /// log's lock, so nothing falls between the two.
    pub fn subscribe(&self, after: u64) -> Subscription {
        let st = self.lock();
        let live = self.tx.subscribe();
        let backlog = st.log.iter().filter(|e| e.id > after).cloned().collect();
        Subscription::of(backlog, live, st.next_id)
    }

    /// [`Live::subscribe`], unless `max` subscribers already follow this
    /// session. Counted under the log's lock, which every subscribe takes,
    /// so a burst of them cannot overshoot.
    pub fn subscribe_within(&self, after: u64, max: usize) -> Option<Subscription> {
        let st = self.lock();
        if self.tx.receiver_count() >= max {
            return None;
        }
        let live = self.tx.subscribe();
        let backlog = st.log.iter().filter(|e| e.id > after).cloned().collect();
        Some(Subscription::of(backlog, live, st.next_id))
    }

    /// Takes in event `id` of this session as the relay stored it, unless
    /// it has it already. Callers hand events in id order, from the next
    /// one on; two at once take each event once (checked under the lock).
    pub fn ingest(&self, id: u64, data: String) {
        if id < self.next_id() {
            return;
        }
        let Some(stamped) = Stamped::stored(id, data) else {
            return;
        };
        let mut st = self.lock();
        if id < st.next_id {
            return;
        }
        st.next_id = id + 1;
        self.log(&mut st, Arc::new(stamped));
    }

    fn log(&self, st: &mut State, stamped: Arc<Stamped>) {
        st.touched = Some(Instant::now());
        st.log_bytes += stamped.data.len();
        st.log.push_back(stamped.clone());
        trim(st, LOG_BYTES_RUNNING);
        // No subscriber is fine: the log keeps it for later.
        let _ = self.tx.send(stamped);
    }

    fn publish(&self, ev: &Event) {
        if let Some(w) = &self.watch {
            w.saw(&ev.kind);
        }
        let Ok(data) = serde_json::to_string(ev) else {
            return;
        };
        if let Some(relay) = &self.relay {
            self.lock().touched = Some(Instant::now());
            relay.append(&self.id, data);
            return;
        }
        let mut st = self.lock();
        let stamped = Arc::new(Stamped {
            id: st.next_id,
            name: SseName::of(&ev.kind),
            data,
            done: matches!(ev.kind, EventKind::RunFinished { .. }),
        });
        st.next_id += 1;
        self.log(&mut st, stamped);
    }

    /// Sends `op` to the run in progress; gives it back when there is none.
    pub async fn send(&self, op: Op) -> Result<(), Op> {
        let ops = self.lock().ops.clone();
        match ops {
            Some(ops) => ops.send(op).await.map(drop).map_err(|e| e.0),
            None => Err(op),
        }
    }

    pub fn is_waiting(&self, call_id: &str) -> bool {
        self.lock().waiting.contains_key(call_id)
    }

    /// The command an approval still waiting asks to run.
    pub fn waiting_command(&self, call_id: &str) -> Option<String> {
        self.lock().waiting.get(call_id).cloned()
    }

    /// Starts a run on `pooled` (the session must be claimed): resume this
    /// session, then `prompt` with `images`. On failure the claim is given back, and the
    /// agent kept when it still runs.
    pub async fn start(
        self: &Arc<Self>,
        mut pooled: Pooled,
        prompt: String,
        images: Vec<crate::wire::Image>,
        approval_timeout: Duration,
        mut slot: RunSlot,
    ) -> Result<(), StartError> {
        let ops = pooled.agent.ops.clone();
        {
            let mut st = self.lock();
            st.ops = Some(ops.clone());
            st.agent_ops = Some(ops.clone());
        }
        self.changed.notify_waiters();
        let resume = ops
            .send(Op::Resume {
                query: self.id.clone(),
            })
            .await
            .ok();
        // The resume must hold before the prompt goes: a session in use
        // elsewhere is refused, not silently replaced by a new one. Only
        // its own reply (by op id) answers it.
        loop {
            let Some(ev) = pooled.agent.events.recv().await else {
                self.end_run(None);
                return Err(StartError::Resume {
                    message: "the session's agent stopped before the run".into(),
                    code: None,
                });
            };
            let answers = resume.is_some() && ev.op_id == resume;
            let kind = ev.kind.clone();
            self.publish(&ev);
            if !answers {
                continue;
            }
            match kind {
                EventKind::SessionResumed { .. } => break,
                EventKind::Error { message, code } => {
                    // The agent is as it was, with no session: kept.
                    self.end_run(Some(pooled));
                    return Err(StartError::Resume { message, code });
                }
                _ => {}
            }
        }
        let _ = ops
            .send(Op::Prompt {
                text: prompt,
                images,
            })
            .await;
        let me = self.clone();
        let pump = tokio::spawn(async move {
            me.pump(pooled, approval_timeout, &mut slot).await;
            // The server's count of running sessions goes down with the run.
            drop(slot);
        });
        self.lock().pump = Some(pump);
        Ok(())
    }

    /// Answers `op` outside a run (`Turns`, `Rewind`) on `pooled` (the
    /// session must be claimed): the session is resumed, asked and released
    /// again, as a run does, and the agent kept. Nothing is published but
    /// the answer, and that only when `publish` (a rewind changed files
    /// that followers should hear of).
    pub async fn ask(
        self: &Arc<Self>,
        mut pooled: Pooled,
        op: Op,
        publish: bool,
    ) -> Result<EventKind, StartError> {
        let ops = pooled.agent.ops.clone();
        self.lock().agent_ops = Some(ops.clone());
        let gone = || StartError::Resume {
            message: "the session's agent stopped before it answered".into(),
            code: None,
        };
        let resume = ops.send(Op::Resume {
            query: self.id.clone(),
        });
        let Some(resumed) = answer(&mut pooled, resume.await.ok()).await else {
            self.end_run(None);
            return Err(gone());
        };
        if let EventKind::Error { message, code } = resumed.kind {
            // The agent is as it was, with no session: kept.
            self.end_run(Some(pooled));
            return Err(StartError::Resume { message, code });
        }
        let asked = ops.send(op).await.ok();
        let Some(reply) = answer(&mut pooled, asked).await else {
            self.end_run(None);
            return Err(gone());
        };
        if publish && !matches!(reply.kind, EventKind::Error { .. }) {
            self.publish(&reply);
        }
        // Released before the answer goes back, as a run's end is: the
        // client may continue the session anywhere at once.
        let release = ops.send(Op::NewSession).await.ok();
        match answer(&mut pooled, release).await {
            Some(_) => self.end_run(Some(pooled)),
            None => self.end_run(None),
        }
        Ok(reply.kind)
    }

    /// The run is over: its agent is kept (`Some`) or gone, and the session
    /// takes a new prompt.
    fn end_run(&self, kept: Option<Pooled>) {
        {
            let mut st = self.lock();
            st.ops = None;
            st.waiting.clear();
            st.busy = false;
            match kept {
                Some(p) => st.parked = Some((p, Instant::now())),
                None => st.agent_ops = None,
            }
        }
        self.changed.notify_waiters();
    }

    /// Drives the run's agent through a `Publisher`: publishes the agent's
    /// events through its run, denies the approvals nobody answers in time,
    /// and keeps the agent once the run is over. A
    /// run's end (`done`) is held back until the agent has released the
    /// session (or the next run starts), so a client that sees it can
    /// continue the session anywhere at once.
    ///
    /// The end of a run is not the agent's last word: messages queued as it
    /// ended start another at once. So at `done` clients' ops stop going to
    /// the agent and it is asked for its status: idle, it is sent
    /// `NewSession` (dropping the session file), and `SessionCleared` says it
    /// is free to keep; still running, clients' ops go to it again. Both
    /// replies are the server's own and not published.
    async fn pump(
        self: Arc<Self>,
        mut pooled: Pooled,
        approval_timeout: Duration,
        slot: &mut RunSlot,
    ) {
        let mut run = Publisher {
            live: self.clone(),
            ops: pooled.agent.ops.clone(),
            approval_timeout,
            held: None,
            asked: None,
            releasing: None,
            todo: None,
        };
        let end = drive(&mut pooled.agent, &mut run).await;
        let held = run.held.take();
        if end == End::Stopped {
            // The agent released the session and is idle: kept.
            self.end_run(Some(pooled));
        } else {
            let _ = (&mut pooled.agent.task).await;
            self.end_run(None);
        }
        // Free before `done` is seen: its client may start another run of
        // the user's at once, on any instance.
        if let Some(place) = slot.user.take() {
            place.give_back().await;
        }
        if let Some(done) = held {
            self.publish(&done);
        }
        trim(&mut self.lock(), LOG_BYTES_IDLE);
    }

    fn deny_later(self: &Arc<Self>, call_id: String, after: Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            if me.is_waiting(&call_id) {
                let reason = format!(
                    "nobody answered the approval request within {} s",
                    after.as_secs()
                );
                let decision = Decision::Deny {
                    reason: Some(reason),
                };
                let _ = me.send(Op::Approve { call_id, decision }).await;
            }
        });
    }

    /// Interrupts the run in progress (saving it) and waits until its agent,
    /// running or kept, is gone.
    pub async fn stop(&self) {
        let ops = self.lock().agent_ops.clone();
        if let Some(ops) = ops {
            let _ = ops.send(Op::Shutdown).await;
        }
        let pump = self.lock().pump.take();
        if let Some(p) = pump {
            let _ = p.await;
        }
        let kept = self.lock().parked.take();
        if let Some((p, _)) = kept {
            p.close().await;
        }
    }
}

/// One served run as a renderer of the drive loop (`crate::drive`): each
/// event goes to the session's log and subscribers, approvals wait for a
/// client's POST (`Op::Approve`) or the timeout, and the loop stops once
/// the agent is idle and has released the session ([`Live::pump`]).
struct Publisher {
    live: Arc<Live>,
    ops: OpSender,
    approval_timeout: Duration,
    /// The run's end (`done`), held back until the session is released or
    /// another event comes.
    held: Option<Event>,
    /// The server's own ops, by id: their replies are not published.
    asked: Option<OpId>,
    releasing: Option<OpId>,
    /// The server's own op still to send (`on_event` cannot wait for room
    /// in the agent's queue; `input` hands it over at once).
    todo: Option<Op>,
}

impl Renderer for Publisher {
    type Input = Op;

    fn on_event(&mut self, ev: Event, _ops: &OpSender) -> Flow {
        let live = &self.live;
        match &ev.kind {
            EventKind::ApprovalRequested(question) => {
                // Waiting before it is published: a client may answer as
                // soon as it sees the request.
                live.lock()
                    .waiting
                    .insert(question.call_id.clone(), question.command.clone());
            }
            EventKind::ApprovalDecided { call_id, .. } => {
                live.lock().waiting.remove(call_id);
            }
            EventKind::RunFinished { .. } => {
                if let Some(done) = self.held.replace(ev) {
                    live.publish(&done);
                }
                live.lock().ops = None;
                self.todo = Some(Op::Status);
                return Flow::Continue;
            }
            EventKind::Status(report) if self.asked.is_some() && ev.op_id == self.asked => {
                self.asked = None;
                if report.running.is_none() {
                    self.todo = Some(Op::NewSession);
                } else {
                    live.lock().ops = Some(self.ops.clone());
                    live.changed.notify_waiters();
                }
                return Flow::Continue;
            }
            EventKind::SessionCleared if self.releasing.is_some() && ev.op_id == self.releasing => {
                return Flow::Stop;
            }
            _ => {}
        }
        if let Some(done) = self.held.take() {
            live.publish(&done);
        }
        live.publish(&ev);
        Flow::Continue
    }

    /// A server's question is published, then declined: the served page
    /// has no form to answer it with.
    fn on_elicitation(
        &mut self,
        _question: &crate::agent::protocol::ElicitationQuestion,
    ) -> crate::drive::Elicitation {
        crate::drive::Elicitation::Refuse(
            "buddy serve does not ask a server's questions (the REPL does)".into(),
        )
    }

    /// A client answers with a POST; nobody answering in time denies.
    fn on_approval(&mut self, req: &ApprovalQuestion) -> Approval {
        self.live
            .deny_later(req.call_id.clone(), self.approval_timeout);
        Approval::Later
    }

    async fn input(&mut self) -> Op {
        // Taken and returned in one poll, so a dropped future loses nothing.
        match self.todo.take() {
            Some(op) => op,
            None => std::future::pending().await,
        }
    }

    async fn on_input(&mut self, op: Op, ops: &OpSender) -> Flow {
        let status = matches!(op, Op::Status);
        let id = ops.send(op).await.ok();
        if status {
            self.asked = id;
        } else {
            self.releasing = id;
        }
        Flow::Continue
    }
}

/// The answer to the op `id` sent to `pooled`'s agent: the first of its
/// events that is not a warning (a resume warns before it answers). None
/// when the agent stopped, or the op never reached it.
async fn answer(pooled: &mut Pooled, id: Option<OpId>) -> Option<Event> {
    let id = id?;
    loop {
        let ev = pooled.agent.events.recv().await?;
        if ev.op_id == Some(id) && !matches!(ev.kind, EventKind::Warning { .. }) {
            return Some(ev);
        }
    }
}

/// Above every event id of the records this process dropped.
static GIVEN: AtomicU64 = AtomicU64::new(0);

/// The first event id of a new record: the wall clock in microseconds, or
/// above the ids of a dropped record if higher. Ids then go up by one per
/// event, so a record made again (after an idle one was dropped, or in a
/// restarted server) starts above every id given before, and a client's
/// `Last-Event-ID` from then never hides new events. Across a restart this
/// holds unless the clock was set back or the old record averaged more than
/// an event per microsecond of its life. Below 2^53 until the 2250s, so
/// JavaScript reads it exactly.
fn first_event_id() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2));
    now.max(GIVEN.load(Ordering::Relaxed)).max(1)
}

impl Subscription {
    fn of(
        backlog: Vec<Arc<Stamped>>,
        live: broadcast::Receiver<Arc<Stamped>>,
        next: u64,
    ) -> Subscription {
        let from = backlog.first().map_or(next, |e: &Arc<Stamped>| e.id);
        Subscription {
            backlog,
            live,
            from,
        }
    }
}

/// Drops the oldest events until the log holds at most `max` bytes of data
/// (always keeping the newest event).
fn trim(st: &mut State, max: usize) {
    while st.log_bytes > max && st.log.len() > 1 {
        if let Some(old) = st.log.pop_front() {
            st.log_bytes -= old.data.len();
        }
    }
}

#[derive(Debug)]
pub enum StartError {
    /// The session could not be opened for the run.
    Resume {
        message: String,
        code: Option<ErrorCode>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(live: &Live, text: &str) {
        live.publish(&Event {
            run: 1,
            seq: 0,
            op_id: None,
            kind: EventKind::TextDelta { text: text.into() },
        });
    }

    #[test]
    fn an_idle_record_nothing_holds_is_dropped_and_any_other_kept() {
        let live = Live::new("s".into());
        let now = Instant::now();
        let idle = Duration::from_secs(600);
        // Just made: not idle yet.
        assert!(!Live::evict(&live, idle, now));
        let later = now + idle;
        // A connected client, a request holding the record, a running agent,
        // an "always" answer: each keeps it.
        let sub = live.subscribe(0);
        assert!(!Live::evict(&live, idle, later));
        drop(sub);
        let held = live.clone();
        assert!(!Live::evict(&live, idle, later));
        drop(held);
        live.lock().ops = Some(OpSender::channel(1).0);
        assert!(!Live::evict(&live, idle, later));
        live.lock().ops = None;
        live.lock().busy = true;
        assert!(!Live::evict(&live, idle, later));
        live.lock().busy = false;
        // An event resets the idle clock.
        delta(&live, "hi");
        assert!(!Live::evict(&live, idle, later));
        assert!(Live::evict(&live, idle, Instant::now() + idle));
        let kept = Live::new("t".into());
        kept.allowed().add(vec!["ls".into()]);
        assert!(!Live::evict(&kept, Duration::ZERO, Instant::now() + idle));
    }

    /// A relay that keeps what it is handed.
    #[derive(Default)]
    struct Kept(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl super::super::relay::Relay for Kept {
        fn append(&self, _: &str, data: String) {
            self.0.lock().unwrap().push(data);
        }
        fn last_id(&self, _: &str) -> Result<u64, crate::agent::HostedError> {
            Ok(0)
        }
        async fn between(
            &self,
            _: &str,
            _: u64,
            _: u64,
        ) -> Result<Vec<(u64, String)>, crate::agent::HostedError> {
            Ok(Vec::new())
        }
        fn announced(&self) -> broadcast::Receiver<(String, u64)> {
            broadcast::channel(1).1
        }
    }

    #[test]
    fn a_relayed_record_logs_events_as_the_store_numbers_them_once_each() {
        let relay = Arc::new(Kept::default());
        let live = Live::relayed("s".into(), None, relay.clone(), 41);
        assert_eq!(live.next_id(), 42);
        delta(&live, "hi");
        // Handed to the store, not logged until it comes back.
        let sent = relay.0.lock().unwrap().clone();
        assert_eq!(sent.len(), 1);
        assert!(live.subscribe(0).backlog.is_empty());
        live.ingest(42, sent[0].clone());
        // Brought back twice (a late announcement): taken once.
        live.ingest(42, sent[0].clone());
        live.ingest(40, sent[0].clone());
        let sub = live.subscribe(0);
        let ids: Vec<u64> = sub.backlog.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![42]);
        assert_eq!(sub.backlog[0].name, SseName("content_delta"));
        assert_eq!(sub.from, 42);
        // Nothing logged after 42: a subscription starts at the next id.
        assert_eq!(live.subscribe(42).from, 43);
    }

    #[test]
    fn a_record_made_again_numbers_its_events_above_the_dropped_ones() {
        let old = Live::new("s".into());
        // As if it had given ids faster than one per microsecond of its life,
        // which the clock alone would not cover.
        old.lock().next_id += 1_000_000_000_000;
        for _ in 0..20 {
            delta(&old, "x");
        }
        let last = old.next_id() - 1;
        let reconnect_after = last - 10;
        assert!(Live::evict(&old, Duration::ZERO, Instant::now()));
        drop(old);
        let new = Live::new("s".into());
        delta(&new, "after");
        assert!(new.next_id() - 1 > last);
        // A client that saw the old record up to `reconnect_after` gets the
        // new record's events, none hidden by its stale id.
        let sub = new.subscribe(reconnect_after);
        assert_eq!(sub.backlog.len(), 1);
        assert!(sub.backlog[0].data.contains("after"));
    }
}
