//! The HTTP side of `buddy serve`: routes and the SSE streams, behind the
//! guard every request passes first (`guard.rs`: Host, Origin, token, body
//! bounds, the page's security headers). With users (`team.rs`), each
//! route answers only about the caller's own sessions: another's is 404,
//! as if it did not exist; what changes something is written to the audit
//! log; every answer is counted for `/metrics`.

use super::audit::Entry;
use super::forwarded::Client;
use super::guard::{content_security_policy, error, Guard, PAGE_HEADERS};
use super::live::{Live, Pooled, Stamped, StartError, Subscription};
use super::metrics;
use super::team::{Caller, Refusal, Team};
use super::RETRY_AFTER_SECS;
use super::{Backend, ServeOptions};
use crate::agent::protocol::{Decision, ErrorCode, Op};
use crate::agent::HostedError;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State as Ext};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

/// The page's style and script, kept in files of their own and put inline
/// into the page, so the page is one response (the token, when there is one,
/// reaches only that first request) and the Content-Security-Policy allows
/// exactly these two by their hashes and nothing else.
const PAGE_STYLE: &str = include_str!("page/page.css");
const PAGE_SCRIPT: &str = include_str!("page/page.js");
/// The page at `/`: a client of the API below and nothing more.
const PAGE: &str = concat!(
    include_str!("page/head.html"),
    "<style>",
    include_str!("page/page.css"),
    "</style>\n</head>\n",
    include_str!("page/body.html"),
    "<script>",
    include_str!("page/page.js"),
    "</script>\n</body>\n</html>\n"
);

/// A session's record (event log, ids) is dropped after this long without
/// events, no run and nobody connected; it is made again on its next request.
const EVICT_AFTER: Duration = Duration::from_secs(10 * 60);
const SWEEP_EVERY: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct State {
    inner: Arc<Inner>,
}

struct Inner {
    opts: ServeOptions,
    backend: Arc<dyn Backend>,
    addr: SocketAddr,
    sessions: Arc<Mutex<HashMap<String, Arc<Live>>>>,
    /// Where events go when servers share their sessions (`relay.rs`).
    relay: Option<Arc<dyn super::relay::Relay>>,
    /// Turns true when the server is going down: streams end, no new runs.
    stopping: watch::Sender<bool>,
    /// Agents are built one at a time: a burst of prompts would otherwise
    /// start a blocking thread each, and that many runnable threads would
    /// take the CPU from the workers relaying running sessions.
    building: tokio::sync::Semaphore,
    /// A place per session running a prompt (`Limits::running`).
    running: Arc<tokio::sync::Semaphore>,
    /// A place per live agent, running or kept (`Limits::sessions`).
    agents: Arc<tokio::sync::Semaphore>,
    /// A place per event stream (`Limits::subscribers_total`).
    streams: Arc<tokio::sync::Semaphore>,
    /// Users, owners, per-user limits, the audit log and the metrics.
    team: Arc<Team>,
}

impl State {
    pub fn new(opts: ServeOptions, backend: Arc<dyn Backend>, addr: SocketAddr) -> State {
        let team = Arc::new(Team::new(opts.team.clone(), backend.about().model));
        let relay = backend.relay();
        State {
            inner: Arc::new(Inner {
                team,
                backend,
                addr,
                sessions: Arc::new(Mutex::new(HashMap::new())),
                relay,
                stopping: watch::channel(false).0,
                building: tokio::sync::Semaphore::new(1),
                running: Arc::new(tokio::sync::Semaphore::new(opts.limits.running)),
                agents: Arc::new(tokio::sync::Semaphore::new(opts.limits.sessions)),
                streams: Arc::new(tokio::sync::Semaphore::new(opts.limits.subscribers_total)),
                opts,
            }),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn live(&self, id: &str) -> Arc<Live> {
        if let Some(live) = self.sessions().get(id) {
            return live.clone();
        }
        let watch = Some(self.inner.team.watch(id));
        let made = match &self.inner.relay {
            // Read before the map is locked: a round trip to the store. A
            // store that cannot say numbers from 0; the follower then
            // brings in everything stored, nothing is lost.
            Some(relay) => {
                let last = relay.last_id(id).unwrap_or(0);
                Live::relayed(id.to_string(), watch, relay.clone(), last)
            }
            None => Live::watched(id.to_string(), watch),
        };
        // Another request may have made one meanwhile: the first stays.
        self.sessions()
            .entry(id.to_string())
            .or_insert(made)
            .clone()
    }

    /// The follower of a relay, when there is one (`relay::follow`); ends
    /// when the server is stopping.
    pub fn follow(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let relay = self.inner.relay.clone()?;
        Some(super::follow::follow(
            relay,
            self.inner.sessions.clone(),
            self.inner.stopping.subscribe(),
        ))
    }

    /// The count of open connections the accept loop keeps for `/metrics`.
    pub fn open_connections(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        Arc::clone(&self.inner.team.metrics.open_connections)
    }

    /// A failure of the session store as an answer, counted for `/metrics`.
    fn store_error(&self, e: HostedError) -> Response {
        self.inner.team.metrics.inc(metrics::STORE_ERRORS, &[]);
        match store_status(&e) {
            StatusCode::SERVICE_UNAVAILABLE => busy(e.to_string()),
            status => error(status, e.to_string()),
        }
    }

    /// Writes an audit line, when the server keeps an audit log.
    pub(super) fn audit(&self, e: Entry<'_>) {
        if let Some(a) = &self.inner.team.audit {
            a.record(e);
        }
    }

    /// Drops the records of sessions idle for `idle` that nothing would miss
    /// ([`Live::evict`]), so a long-running server's memory follows the
    /// sessions in use, not every session ever served. The check runs under
    /// the map's lock, which every request takes to get a record: none can
    /// pick up a record while it is being dropped. Returns how many went.
    pub fn evict_idle(&self, idle: Duration) -> usize {
        let now = Instant::now();
        let mut sessions = self.sessions();
        let before = sessions.len();
        sessions.retain(|_, live| !Live::evict(live, idle, now));
        before - sessions.len()
    }

    /// Closes the agents kept without a run for `idle`; how many.
    pub async fn close_idle_agents(&self, idle: Duration) -> usize {
        let now = Instant::now();
        let all: Vec<Arc<Live>> = self.sessions().values().cloned().collect();
        let mut closed = 0;
        for live in all {
            if let Some(agent) = live.take_idle_agent(idle, now) {
                agent.close().await;
                closed += 1;
            }
        }
        closed
    }

    /// Every minute (or twice per `Limits::agent_idle` when that is
    /// shorter), closes the agents idle for that long, then drops the
    /// records idle for ten minutes ([`State::evict_idle`]); returns once
    /// the server is stopping (a sweep under way finishes first).
    pub async fn sweep(self) {
        let agent_idle = self.inner.opts.limits.agent_idle;
        let every = SWEEP_EVERY
            .min(agent_idle / 2)
            .max(Duration::from_millis(10));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stopping = self.stopping_rx();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                // A closed channel means the state is gone: stop as well.
                _ = stopping.wait_for(|s| *s) => return,
            }
            self.close_idle_agents(agent_idle).await;
            self.evict_idle(EVICT_AFTER);
        }
    }

    /// A place for one more live agent: a free one, or the one of the agent
    /// kept idle longest, closed for it. None when every agent is running.
    async fn agent_place(&self) -> Option<super::live::AgentPlace> {
        let agents = &self.inner.agents;
        if let Ok(place) = Arc::clone(agents).try_acquire_owned() {
            return Some(place);
        }
        let oldest = {
            let sessions = self.sessions();
            sessions
                .values()
                .filter_map(|l| l.idle_since().map(|t| (t, l.clone())))
                .min_by_key(|(t, _)| *t)
                .map(|(_, l)| l)
        };
        // Taken with a zero idle time: it is the oldest, whatever its age.
        let victim = oldest?.take_idle_agent(Duration::ZERO, Instant::now())?;
        let Pooled { agent, place } = victim;
        agent.shutdown().await;
        Some(place)
    }

    /// A new agent for `live`, built off the runtime's workers; the error
    /// response when there is no place for it or it cannot be built.
    pub(super) async fn build(&self, live: &Live) -> Result<Pooled, Response> {
        let Some(place) = self.agent_place().await else {
            return Err(busy(format!(
                "{} sessions have a running agent already; retry when one is done",
                self.inner.opts.limits.sessions
            )));
        };
        // Building an agent reads config, project and session files: on a
        // housekeeping thread at a lower priority, one at a time, so runtime
        // workers keep relaying other sessions' streams meanwhile (100
        // prompts at once would otherwise queue every stream behind all the
        // set-ups).
        let backend = Arc::clone(&self.inner.backend);
        let allowed = live.allowed();
        // The semaphore is never closed.
        let turn = self.inner.building.acquire().await.ok();
        let built = crate::background::run(move || backend.spawn(allowed)).await;
        drop(turn);
        match built {
            Ok(Ok(agent)) => Ok(Pooled { agent, place }),
            Ok(Err(e)) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
            Err(e) => Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the agent could not be started: {e}"),
            )),
        }
    }

    /// Ends every stream and interrupts every run, waiting until each is saved.
    pub async fn shut_down(&self) {
        self.inner.stopping.send_replace(true);
        self.wait_saved().await;
    }

    pub async fn wait_saved(&self) {
        let all: Vec<Arc<Live>> = self.sessions().values().cloned().collect();
        for live in all {
            live.stop().await;
        }
    }

    /// Turns true when the server is going down.
    pub fn stopping_rx(&self) -> watch::Receiver<bool> {
        self.inner.stopping.subscribe()
    }

    pub(super) fn stopping(&self) -> bool {
        *self.inner.stopping.borrow()
    }
}

/// Every route, `more` (the routes of modules built on this one, such as
/// `rewind.rs`) among them, behind the guard.
pub fn router(state: State, more: Router<State>) -> Router {
    let limit = state.inner.opts.max_body;
    Router::new()
        .route("/", get(page))
        .route("/api/sessions", get(list_sessions).post(create_session))
        .route("/api/about", get(about))
        .route(
            "/api/sessions/{id}",
            get(read_session).delete(delete_session),
        )
        .route("/api/sessions/{id}/view", get(view_session))
        .route("/api/render", post(render))
        .route("/api/sessions/{id}/messages", post(post_message))
        .route("/api/sessions/{id}/events", get(events))
        .route("/api/sessions/{id}/approvals/{call_id}", post(approve))
        .route("/api/sessions/{id}/interrupt", post(interrupt))
        .merge(more)
        .route("/metrics", get(metrics_text))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            Guard {
                addr: state.inner.addr,
                token: state.inner.opts.token.clone(),
                team: Arc::clone(&state.inner.team),
                max_body: limit,
                public_hosts: state.inner.opts.balancer.public_hosts.clone().into(),
                proxies: Arc::new(state.inner.opts.balancer.trusted_proxies.clone()),
            },
            super::guard::guard,
        ))
        // The one route outside the guard, for a balancer's or an
        // orchestrator's probes (which know no token and send the pod's
        // address as Host): it answers `ok` and tells nothing else.
        .route("/healthz", get(healthz))
        // Outside the guard, so its refusals are counted too.
        .layer(middleware::from_fn_with_state(state.clone(), count_request))
        .with_state(state)
}

/// Counts every answer by route (the route's pattern, so ids do not make
/// a series each) and status.
async fn count_request(Ext(state): Ext<State>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    state
        .inner
        .team
        .metrics
        .inc(metrics::REQUESTS, &[("route", &route), ("status", &status)]);
    response
}

/// `GET /metrics`: the Prometheus text format, behind the guard (any
/// user's token or the admin's: the figures are the server's, with no
/// session's content or owner in them).
async fn metrics_text(Ext(state): Ext<State>) -> Response {
    let running = state.sessions().values().filter(|l| l.running()).count();
    let limits = &state.inner.opts.limits;
    let gauges = metrics::Gauges {
        live_agents: limits
            .sessions
            .saturating_sub(state.inner.agents.available_permits()),
        running,
    };
    if let Some(relay) = &state.inner.relay {
        let failed = relay.failures() as f64;
        let metrics = &state.inner.team.metrics;
        metrics.set(metrics::STORE_ERRORS, &[("kind", "event")], failed);
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.inner.team.metrics.render(&gauges),
    )
        .into_response()
}

/// 503 for a limit that is full for now: the client may retry after a while.
fn busy(message: impl Into<String>) -> Response {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, message);
    r.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(RETRY_AFTER_SECS),
    );
    r
}

/// The status for a failure of the session store: 503 when the machine is
/// out of something for the moment (descriptors, memory) or the session
/// database failed (it is away, or did not answer in time; buddy
/// reconnects by itself), so a client retries later; 500 otherwise.
fn store_status(e: &HostedError) -> StatusCode {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(err) = next {
        if let Some(crate::session::SessionError::Database { .. }) = err.downcast_ref() {
            return StatusCode::SERVICE_UNAVAILABLE;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if crate::session::out_of_resources(io) {
                return StatusCode::SERVICE_UNAVAILABLE;
            }
        }
        next = err.source();
    }
    StatusCode::INTERNAL_SERVER_ERROR
}

/// `GET /healthz`: the server is up and answering requests.
async fn healthz() -> &'static str {
    "ok"
}

async fn page() -> Response {
    static CSP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let csp = CSP.get_or_init(|| content_security_policy(PAGE_SCRIPT, PAGE_STYLE));
    let [referrer, nosniff, frames] = PAGE_HEADERS;
    (
        [
            (header::CONTENT_SECURITY_POLICY, csp.as_str()),
            referrer,
            nosniff,
            frames,
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Html(PAGE),
    )
        .into_response()
}

async fn list_sessions(Ext(state): Ext<State>, Extension(caller): Extension<Caller>) -> Response {
    match state.inner.backend.list() {
        Ok(list) => {
            let visible = match state.inner.team.visible(&caller) {
                Ok(v) => v,
                Err(e) => return state.store_error(e.into()),
            };
            let live = state.sessions();
            let items: Vec<serde_json::Value> = list
                .into_iter()
                .filter(|s| visible.contains(&s.id))
                .map(|s| {
                    let l = live.get(&s.id);
                    let mut v = serde_json::to_value(&s).unwrap_or_default();
                    v["running"] = json!(l.is_some_and(|l| l.running()));
                    v["live_agent"] = json!(l.is_some_and(|l| l.has_agent()));
                    v
                })
                .collect();
            Json(json!({ "sessions": items })).into_response()
        }
        Err(e) => state.store_error(e),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    /// Continue an existing session (an id, a prefix, `last`) instead.
    resume: Option<String>,
}

async fn create_session(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Extension(client): Extension<Client>,
    body: Option<Json<CreateBody>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let team = &state.inner.team;
    let result = match &body.resume {
        Some(query) => match state.inner.backend.resolve(query) {
            // Another user's session is answered as if there were none.
            Ok(id) if !team.may_see(&caller, &id) => Err(error(
                StatusCode::NOT_FOUND,
                format!("no session matches {query:?}"),
            )),
            Ok(id) => Ok(id),
            Err(e) => Err(match store_status(&e) {
                StatusCode::SERVICE_UNAVAILABLE => state.store_error(e),
                _ => error(StatusCode::NOT_FOUND, e.to_string()),
            }),
        },
        None => {
            let made = state
                .inner
                .backend
                .create_session(caller.user())
                .map_err(|e| state.store_error(e));
            if let (Ok(id), Some(user)) = (&made, caller.user()) {
                if let Err(e) = team.own(id, user) {
                    // Owned in memory for this server's life; said once
                    // on stderr for whoever runs it.
                    eprintln!("buddy serve: cannot record the owner of session {id}: {e}");
                }
            }
            made
        }
    };
    let (status, session) = match &result {
        Ok(id) => (StatusCode::CREATED, Some(id.as_str())),
        Err(r) => (r.status(), None),
    };
    state.audit(Entry {
        action: if body.resume.is_some() {
            "resume"
        } else {
            "create"
        },
        user: Some(caller.audit_name()),
        client: Some(client),
        session,
        status: status.as_u16(),
        detail: json!({}),
        text: None,
    });
    match result {
        Ok(id) => (StatusCode::CREATED, Json(json!({ "id": id }))).into_response(),
        Err(r) => r,
    }
}

/// Whether the id in a path names an existing session exactly, one the
/// caller may see.
/// The answer refusing a request for session `id`: 404 when the caller may
/// not see it or there is none, the store's error when it could not say
/// (503 while the session database is away); `None` when it is known.
pub(super) fn unknown(state: &State, caller: &Caller, id: &str) -> Option<Response> {
    if !state.inner.team.may_see(caller, id) {
        return Some(no_session(id));
    }
    match state.inner.backend.resolve(id) {
        Ok(found) if found == id => None,
        Err(e) if store_status(&e) == StatusCode::SERVICE_UNAVAILABLE => Some(state.store_error(e)),
        _ => Some(no_session(id)),
    }
}

pub(super) fn no_session(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no session {id:?} (GET /api/sessions lists them)"),
    )
}

async fn read_session(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    if let Some(refused) = unknown(&state, &caller, &id) {
        return refused;
    }
    match state.inner.backend.history(&id) {
        Ok(messages) => {
            let (running, live_agent) = match state.sessions().get(&id) {
                Some(l) => (l.running(), l.has_agent()),
                None => (false, false),
            };
            Json(json!({
                "id": id,
                "running": running,
                "live_agent": live_agent,
                "messages": messages,
            }))
            .into_response()
        }
        Err(e) => state.store_error(e),
    }
}

/// The model and the directory this server works with, for the page.
async fn about(Ext(state): Ext<State>) -> Response {
    Json(state.inner.backend.about()).into_response()
}

/// Deletes a session: its file and what lies beside it. Refused (409) while
/// it runs here or another buddy process holds it. It passes the guard as
/// every request does (Host, Origin, token).
async fn delete_session(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Extension(client): Extension<Client>,
    Path(id): Path<String>,
) -> Response {
    let answer = delete_known(&state, &caller, &id).await;
    state.audit(Entry {
        action: "delete",
        user: Some(caller.audit_name()),
        client: Some(client),
        session: Some(&id),
        status: answer.status().as_u16(),
        detail: json!({}),
        text: None,
    });
    answer
}

async fn delete_known(state: &State, caller: &Caller, id: &str) -> Response {
    let (state, id) = (state.clone(), id.to_string());
    if let Some(refused) = unknown(&state, caller, &id) {
        return refused;
    }
    let live = state.live(&id);
    // Claimed as a run would be: no prompt can start while the files go.
    let Some(kept) = live.claim() else {
        return error(
            StatusCode::CONFLICT,
            format!("session {id} is running; interrupt it before deleting it"),
        );
    };
    if let Some(agent) = kept {
        agent.close().await;
    }
    let backend = Arc::clone(&state.inner.backend);
    let gone = id.clone();
    let done = tokio::task::spawn_blocking(move || backend.delete(&gone)).await;
    live.unclaim();
    match done {
        Ok(Ok(())) => {
            state.sessions().remove(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(Err(e)) => {
            use crate::session::SessionError;
            match e.downcast_ref::<SessionError>() {
                Some(SessionError::Locked { .. }) => error(StatusCode::CONFLICT, e.to_string()),
                Some(SessionError::NotFound { .. }) => no_session(&id),
                _ => state.store_error(e),
            }
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot delete the session: {e}"),
        ),
    }
}

/// The conversation as the page shows it (`view.rs`): the latest messages
/// as display items, answers as safe HTML, with the id of the session's last
/// event so a page can follow a run in progress from there.
async fn view_session(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    if let Some(refused) = unknown(&state, &caller, &id) {
        return refused;
    }
    let backend = Arc::clone(&state.inner.backend);
    let read = id.clone();
    // Reading and rendering a long session is work for a blocking thread,
    // not for a worker relaying other sessions' streams.
    let made = tokio::task::spawn_blocking(move || {
        backend.transcript(&read).map(|(messages, subagents)| {
            (
                super::view::history(&messages, &subagents),
                super::view::plan(&messages),
            )
        })
    })
    .await;
    match made {
        Ok(Ok(((items, omitted), plan))) => {
            let (running, last_event) = match state.sessions().get(&id) {
                Some(l) => (l.running(), l.next_id().saturating_sub(1)),
                None => (false, 0),
            };
            Json(json!({
                "id": id,
                "running": running,
                "last_event": last_event,
                "omitted": omitted,
                "items": items,
                "plan": plan,
            }))
            .into_response()
        }
        Ok(Err(e)) => state.store_error(e),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the session: {e}"),
        ),
    }
}

/// One piece of a streaming run as the page shows it: an answer's Markdown
/// as HTML, a tool call or a result as display lines (`view.rs`). The page
/// asks when an answer is complete (and now and then while a long one
/// streams), never per text delta.
async fn render(Json(body): Json<super::view::Render>) -> Response {
    Json(body.item()).into_response()
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum Mode {
    #[default]
    Prompt,
    Steer,
    FollowUp,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
    #[serde(default)]
    mode: Mode,
    /// Attached to a prompt (never to a steer or a follow-up, as in the
    /// agent's protocol).
    #[serde(default)]
    images: Vec<ImageBody>,
}

/// Most images one prompt carries. The body limit bounds their bytes; this
/// bounds the work per request (a hash and a stored copy each).
const MAX_PROMPT_IMAGES: usize = 16;
/// The longest image name kept (a file name, for people).
const MAX_IMAGE_NAME_CHARS: usize = 255;

/// An image as a client attaches it: its file name and its bytes in base64.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageBody {
    name: String,
    data: String,
}

/// The images of a prompt, or why they are refused: too many, not base64,
/// not PNG, JPEG, GIF or WebP.
fn images_of(sent: Vec<ImageBody>) -> Result<Vec<crate::wire::Image>, String> {
    use base64::Engine;
    if sent.len() > MAX_PROMPT_IMAGES {
        return Err(format!(
            "a prompt carries at most {MAX_PROMPT_IMAGES} images"
        ));
    }
    let mut out = Vec::with_capacity(sent.len());
    for (i, image) in sent.into_iter().enumerate() {
        // The last component only, as the front ends name a file.
        let name: String = image
            .name
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .chars()
            .take(MAX_IMAGE_NAME_CHARS)
            .collect();
        let name = if name.is_empty() {
            format!("image-{}", i + 1)
        } else {
            name
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(image.data.as_bytes())
            .map_err(|e| format!("image {} is not base64: {e}", i + 1))?;
        let read = crate::wire::Image::from_bytes(&name, bytes)
            .ok_or_else(|| format!("image {} is not a PNG, JPEG, GIF or WebP file", i + 1))?;
        out.push(read);
    }
    Ok(out)
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Prompt => "prompt",
            Mode::Steer => "steer",
            Mode::FollowUp => "follow_up",
        }
    }
}

/// A prompt, steer or follow-up ([`send_message`]), written to the audit
/// log with how it was answered.
async fn post_message(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Extension(client): Extension<Client>,
    Path(id): Path<String>,
    Json(body): Json<MessageBody>,
) -> Response {
    let mode = body.mode;
    // Kept for the audit line only when it may hold text.
    let text = state
        .inner
        .team
        .audit
        .as_ref()
        .filter(|a| a.keeps_text())
        .map(|_| body.text.clone());
    let answer = send_message(&state, &caller, id.clone(), body).await;
    state.audit(Entry {
        action: mode.name(),
        user: Some(caller.audit_name()),
        client: Some(client),
        session: Some(&id),
        status: answer.status().as_u16(),
        detail: json!({}),
        text: text.as_deref(),
    });
    answer
}

/// A per-user limit reached: 429 with the reason and when to retry.
fn limited(state: &State, l: super::team::Limited) -> Response {
    state
        .inner
        .team
        .metrics
        .inc(metrics::LIMITED, &[("limit", l.limit)]);
    let mut r = error(StatusCode::TOO_MANY_REQUESTS, l.reason);
    r.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(l.retry_after),
    );
    r
}

async fn send_message(state: &State, caller: &Caller, id: String, body: MessageBody) -> Response {
    let state = state.clone();
    if let Some(refused) = unknown(&state, caller, &id) {
        return refused;
    }
    if body.text.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "the message is empty");
    }
    if !body.images.is_empty() && body.mode != Mode::Prompt {
        return error(
            StatusCode::BAD_REQUEST,
            "images are attached to a prompt only, not to a steer or a follow-up",
        );
    }
    let images = match images_of(body.images) {
        Ok(images) => images,
        Err(reason) => return error(StatusCode::BAD_REQUEST, reason),
    };
    if state.stopping() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        );
    }
    let live = state.live(&id);
    let queued = match body.mode {
        Mode::Steer => Some(Op::Steer {
            text: body.text.clone(),
        }),
        Mode::FollowUp => Some(Op::FollowUp {
            text: body.text.clone(),
        }),
        Mode::Prompt => None,
    };
    if let Some(op) = queued {
        // Joins the run in progress; with none (it just ended) it starts one.
        // A run that is starting or ending takes ops again in a moment.
        let op = match live.send(op).await {
            Ok(()) => return queued_answer(),
            Err(op) if live.running() => {
                live.settled(SETTLE_TIME).await;
                match live.send(op).await {
                    Ok(()) => return queued_answer(),
                    Err(op) => op,
                }
            }
            Err(op) => op,
        };
        drop(op);
    } else if live.running() {
        return in_progress();
    }
    // A new run: the caller's own limits first. The user's place is taken
    // here and held with the run, so two prompts at once cannot both pass.
    let user_place = match state.inner.team.may_start(caller, &id).await {
        Ok(place) => place,
        Err(Refusal::Limited(l)) => return limited(&state, l),
        Err(Refusal::Store(e)) => return state.store_error(e.into()),
    };
    let Ok(server_place) = Arc::clone(&state.inner.running).try_acquire_owned() else {
        return busy(format!(
            "{} sessions are running already; retry when one is done",
            state.inner.opts.limits.running
        ));
    };
    let slot = super::live::RunSlot {
        _server: server_place,
        user: user_place,
    };
    // One prompt wins the session; another at the same moment gets 409.
    let Some(kept) = live.claim() else {
        return in_progress();
    };
    let pooled = match kept {
        Some(agent) => agent,
        None => match state.build(&live).await {
            Ok(agent) => agent,
            Err(refusal) => {
                live.unclaim();
                return refusal;
            }
        },
    };
    // Subscribed before the run starts, so the stream holds all of it.
    let sub = live.subscribe(live.next_id().saturating_sub(1));
    match live
        .start(
            pooled,
            body.text,
            images,
            state.inner.opts.approval_timeout,
            slot,
        )
        .await
    {
        Ok(()) => sse(live, sub, true, None, &state),
        Err(StartError::Resume { message, code }) => match resume_status(code) {
            StatusCode::SERVICE_UNAVAILABLE => busy(message),
            status => error(status, message),
        },
    }
}

/// How long a steer or follow-up waits for a run that is starting or ending
/// to take it (an agent's build, or the release of the session file).
const SETTLE_TIME: Duration = Duration::from_secs(30);

fn queued_answer() -> Response {
    (StatusCode::ACCEPTED, Json(json!({ "queued": true }))).into_response()
}

pub(super) fn in_progress() -> Response {
    error(
        StatusCode::CONFLICT,
        "a run is in progress in this session; send the message with \"mode\": \"steer\" or \"follow_up\", or interrupt it",
    )
}

/// The answer to a prompt whose session could not be opened: 409 while
/// another process holds it, 503 when this server is out of descriptors or
/// memory for now (both: retry later), 404 when it is gone, 500 when its file
/// is damaged or newer than this buddy, or anything else failed.
pub(super) fn resume_status(code: Option<ErrorCode>) -> StatusCode {
    match code {
        Some(ErrorCode::SessionInUse) => StatusCode::CONFLICT,
        Some(ErrorCode::SessionNotFound) => StatusCode::NOT_FOUND,
        Some(ErrorCode::SessionUnreadable) => StatusCode::SERVICE_UNAVAILABLE,
        Some(ErrorCode::SessionDamaged) | None => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[derive(Deserialize)]
struct EventsQuery {
    after: Option<u64>,
}

/// The session's events as SSE: first those after `Last-Event-ID` (or
/// `?after=`), then live ones, until the client goes away.
async fn events(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = unknown(&state, &caller, &id) {
        return refused;
    }
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .or(q.after)
        .unwrap_or(0);
    let live = state.live(&id);
    let Ok(place) = Arc::clone(&state.inner.streams).try_acquire_owned() else {
        return busy(format!(
            "the server has {} streams open already; retry later",
            state.inner.opts.limits.subscribers_total
        ));
    };
    let max = state.inner.opts.limits.subscribers;
    let Some(mut sub) = live.subscribe_within(after, max) else {
        return busy(format!(
            "this session has {max} streams open already; close one or retry later"
        ));
    };
    if let Some(relay) = &state.inner.relay {
        super::follow::catch_up(relay.as_ref(), &live).await;
        if after > 0 && after.saturating_add(1) < sub.from {
            // The client saw events this server's log does not hold (they
            // ran elsewhere, or long ago): the store has them.
            match relay.between(&id, after, sub.from).await {
                Ok(missed) => {
                    let mut backlog: Vec<Arc<Stamped>> = missed
                        .into_iter()
                        .filter_map(|(n, data)| Stamped::stored(n, data).map(Arc::new))
                        .collect();
                    backlog.append(&mut sub.backlog);
                    sub.backlog = backlog;
                }
                Err(e) => return state.store_error(e),
            }
        }
    }
    sse(live, sub, false, Some(place), &state)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    approve: bool,
    /// With `approve`: also allow the prefix the request offered (`always`).
    #[serde(default)]
    always: bool,
    reason: Option<String>,
}

async fn approve(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Extension(client): Extension<Client>,
    Path((id, call_id)): Path<(String, String)>,
    Json(body): Json<ApproveBody>,
) -> Response {
    let decided = match (body.approve, body.always) {
        (true, true) => "approve_always",
        (true, false) => "approve",
        (false, _) => "deny",
    };
    let mut command = None;
    let answer = async {
        if let Some(refused) = unknown(&state, &caller, &id) {
            return refused;
        }
        let live = state.live(&id);
        command = live.waiting_command(&call_id);
        if command.is_none() {
            return error(
                StatusCode::NOT_FOUND,
                format!("no approval is waiting for call {call_id:?}"),
            );
        }
        let decision = if body.approve && body.always {
            Decision::ApproveAlways
        } else if body.approve {
            Decision::Approve
        } else {
            Decision::Deny {
                reason: body.reason,
            }
        };
        let call_id = call_id.clone();
        match live.send(Op::Approve { call_id, decision }).await {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(_) => error(StatusCode::CONFLICT, "the run has ended"),
        }
    }
    .await;
    state.audit(Entry {
        action: "approval",
        user: Some(caller.audit_name()),
        client: Some(client),
        session: Some(&id),
        status: answer.status().as_u16(),
        detail: json!({ "call_id": call_id, "decision": decided, "command": command }),
        text: None,
    });
    answer
}

async fn interrupt(
    Ext(state): Ext<State>,
    Extension(caller): Extension<Caller>,
    Extension(client): Extension<Client>,
    Path(id): Path<String>,
) -> Response {
    let answer = if let Some(refused) = unknown(&state, &caller, &id) {
        refused
    } else {
        match state.live(&id).send(Op::Interrupt).await {
            Ok(()) => (StatusCode::ACCEPTED, Json(json!({ "interrupting": true }))).into_response(),
            Err(_) => error(
                StatusCode::CONFLICT,
                "no run is in progress in this session",
            ),
        }
    };
    state.audit(Entry {
        action: "interrupt",
        user: Some(caller.audit_name()),
        client: Some(client),
        session: Some(&id),
        status: answer.status().as_u16(),
        detail: json!({}),
        text: None,
    });
    answer
}

/// What one SSE response still has to send.
struct Feed {
    live: Arc<Live>,
    backlog: VecDeque<Arc<Stamped>>,
    rx: broadcast::Receiver<Arc<Stamped>>,
    last: u64,
    /// End after the run's `done` event (a prompt's own stream).
    until_done: bool,
    finished: bool,
    stopping: watch::Receiver<bool>,
    keep_alive: Duration,
    /// This stream's place among the server's (`Limits::subscribers_total`).
    _place: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Written when a stream has been quiet this long, so proxies keep it open
/// (and more often when `Limits::idle_timeout` is short, so a reading
/// client is never idle).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Most bytes put into one write: events already waiting go out together.
const BATCH_BYTES: usize = 64 * 1024;

/// An SSE response. Every event already waiting is sent in one frame, so a
/// fast stream costs one write per batch rather than one per event.
fn sse(
    live: Arc<Live>,
    sub: Subscription,
    until_done: bool,
    place: Option<tokio::sync::OwnedSemaphorePermit>,
    state: &State,
) -> Response {
    let feed = Feed {
        live,
        backlog: sub.backlog.into(),
        rx: sub.live,
        last: 0,
        until_done,
        finished: false,
        stopping: state.inner.stopping.subscribe(),
        keep_alive: KEEP_ALIVE.min(state.inner.opts.limits.idle_timeout / 4),
        _place: place,
    };
    let stream = futures_util::stream::unfold(feed, |mut f| async move {
        let bytes = next_batch(&mut f).await?;
        Some((Ok::<_, Infallible>(Bytes::from(bytes)), f))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "cannot build the stream"))
}

enum Waited {
    Event(Arc<Stamped>),
    KeepAlive,
}

async fn next_batch(f: &mut Feed) -> Option<String> {
    if f.finished {
        return None;
    }
    let mut out = String::new();
    match wait_one(f).await? {
        Waited::KeepAlive => return Some(": keep-alive\n\n".to_string()),
        Waited::Event(e) => write_event(f, &mut out, &e),
    }
    while !f.finished && out.len() < BATCH_BYTES {
        match ready_one(f) {
            Some(e) => write_event(f, &mut out, &e),
            None => break,
        }
    }
    Some(out)
}

fn write_event(f: &mut Feed, out: &mut String, e: &Stamped) {
    if e.id <= f.last || f.finished {
        return;
    }
    f.last = e.id;
    // The data is compact JSON: one line, whatever the text holds. Written
    // in place: writing to a String cannot fail.
    use std::fmt::Write;
    let _ = write!(
        out,
        "id: {}\nevent: {}\ndata: {}\n\n",
        e.id, e.name.0, e.data
    );
    if f.until_done && e.done {
        f.finished = true;
    }
}

/// A subscriber that fell behind the live feed takes up again from the log.
fn catch_up(f: &mut Feed) {
    let sub = f.live.subscribe(f.last);
    f.backlog = sub.backlog.into();
    f.rx = sub.live;
}

/// The next event, waiting for it; a keep-alive after a quiet while; `None`
/// when the server stops.
async fn wait_one(f: &mut Feed) -> Option<Waited> {
    loop {
        if let Some(e) = f.backlog.pop_front() {
            return Some(Waited::Event(e));
        }
        if *f.stopping.borrow() {
            return None;
        }
        tokio::select! {
            r = f.rx.recv() => match r {
                Ok(e) => return Some(Waited::Event(e)),
                Err(broadcast::error::RecvError::Lagged(_)) => catch_up(f),
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            _ = f.stopping.changed() => return None,
            _ = tokio::time::sleep(f.keep_alive) => return Some(Waited::KeepAlive),
        }
    }
}

/// The next event if one is already waiting.
fn ready_one(f: &mut Feed) -> Option<Arc<Stamped>> {
    loop {
        if let Some(e) = f.backlog.pop_front() {
            return Some(e);
        }
        match f.rx.try_recv() {
            Ok(e) => return Some(e),
            Err(broadcast::error::TryRecvError::Lagged(_)) => catch_up(f),
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(name: &str, bytes: &[u8]) -> ImageBody {
        use base64::Engine;
        ImageBody {
            name: name.into(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    #[test]
    fn a_prompts_images_are_images_in_base64_named_by_their_last_component() {
        let png = b"\x89PNG\r\n\x1a\nrest";
        let got = images_of(vec![sent("../../etc/shot.png", png), sent("", png)]).unwrap();
        assert_eq!(got[0].name, "shot.png");
        assert_eq!(got[0].media_type, "image/png");
        assert_eq!(got[1].name, "image-2");
        let text = images_of(vec![sent("a.png", b"just text")]).unwrap_err();
        assert!(text.contains("not a PNG"), "{text}");
        let bad = ImageBody {
            name: "a.png".into(),
            data: "%%%".into(),
        };
        assert!(images_of(vec![bad]).unwrap_err().contains("base64"));
        let many = (0..=MAX_PROMPT_IMAGES)
            .map(|_| sent("a.png", png))
            .collect();
        assert!(images_of(many).unwrap_err().contains("at most"));
    }

    /// A store out of descriptors is the moment's fault (503, retry); any
    /// other failure, a damaged file say, is not (500).
    #[test]
    fn store_failures_out_of_descriptors_are_503() {
        let emfile = crate::session::SessionError::io(
            "create session file",
            "/s/x.jsonl",
            std::io::Error::from_raw_os_error(24),
        );
        assert_eq!(
            store_status(&HostedError::from(emfile)),
            StatusCode::SERVICE_UNAVAILABLE
        );
        let denied = crate::session::SessionError::io(
            "create session file",
            "/s/x.jsonl",
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert_eq!(
            store_status(&HostedError::from(denied)),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let bare: HostedError = std::io::Error::from_raw_os_error(23).into();
        assert_eq!(store_status(&bare), StatusCode::SERVICE_UNAVAILABLE);
    }

    struct NoBackend;

    impl Backend for NoBackend {
        fn create_session(&self, _: Option<&str>) -> Result<String, crate::agent::HostedError> {
            unreachable!()
        }
        fn resolve(&self, query: &str) -> Result<String, crate::agent::HostedError> {
            Ok(query.into())
        }
        fn list(
            &self,
        ) -> Result<Vec<crate::agent::protocol::SessionSummary>, crate::agent::HostedError>
        {
            Ok(Vec::new())
        }
        fn history(&self, _: &str) -> Result<Vec<crate::wire::Message>, crate::agent::HostedError> {
            Ok(Vec::new())
        }
        fn spawn(
            &self,
            _: crate::agent::allowlist::SharedAllowList,
        ) -> Result<crate::agent::AgentHandle, crate::agent::HostedError> {
            unreachable!()
        }
    }

    #[tokio::test]
    async fn idle_records_leave_the_map_and_records_in_use_stay() {
        let opts = ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: None,
            approval_timeout: Duration::from_secs(1),
            max_body: 1024,
            limits: super::super::Limits::default(),
            team: Default::default(),
            balancer: Default::default(),
        };
        let state = State::new(opts, Arc::new(NoBackend), "127.0.0.1:0".parse().unwrap());
        drop(state.live("idle"));
        let watched = state.live("watched").subscribe(0);
        assert_eq!(state.evict_idle(EVICT_AFTER), 0, "nothing is idle yet");
        assert_eq!(state.evict_idle(Duration::ZERO), 1);
        let left: Vec<String> = state.sessions().keys().cloned().collect();
        assert_eq!(left, ["watched"]);
        drop(watched);
        assert_eq!(state.evict_idle(Duration::ZERO), 1);
        assert!(state.sessions().is_empty());
    }

    fn options() -> ServeOptions {
        ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: None,
            approval_timeout: Duration::from_secs(1),
            max_body: 1024,
            limits: super::super::Limits::default(),
            team: Default::default(),
            balancer: Default::default(),
        }
    }

    #[tokio::test]
    async fn the_sweep_ends_when_the_server_is_stopping() {
        let state = State::new(
            options(),
            Arc::new(NoBackend),
            "127.0.0.1:0".parse().unwrap(),
        );
        let sweep = tokio::spawn(state.clone().sweep());
        state.shut_down().await;
        tokio::time::timeout(Duration::from_secs(10), sweep)
            .await
            .expect("the sweep ended")
            .expect("the sweep did not panic");
    }

    /// The caller's future stops the server (no signal), and `run` returns
    /// only after its sweep ended: nothing it spawned outlives it.
    #[tokio::test]
    async fn run_returns_when_the_callers_shutdown_completes() {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(super::super::run(
            options(),
            Arc::new(NoBackend),
            move |started| {
                let _ = addr_tx.send(started.addr);
            },
            async move {
                let _ = stopped.await;
            },
        ));
        let addr = addr_rx.await.expect("the server started");
        // Serving until told: a client is accepted.
        tokio::net::TcpStream::connect(addr)
            .await
            .expect("accepted");
        stop.send(()).expect("the server is waiting");
        tokio::time::timeout(Duration::from_secs(20), server)
            .await
            .expect("run returned")
            .expect("run did not panic")
            .expect("run succeeded");
    }
}
