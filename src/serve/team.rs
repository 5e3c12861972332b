//! `buddy serve` for a team: who is calling (a user's token, the admin's
//! `--token`, or anyone on a loopback server without tokens), which
//! sessions belong to whom, each user's limits (runs at once, dollars per
//! day), and what the runs' events add to the metrics and to each user's
//! spending.
//!
//! A session belongs to the user who created it; the owners are kept in
//! `owners` in the server's state directory (one `ID USER` line each, 0600),
//! so they outlast a restart. Spending is counted from the runs' usage
//! events (the cost table's prices, `agent::tokens`) per UTC day, in
//! memory: a restart begins the day's count again. The runs a user has
//! going are counted per server.
//!
//! With sessions in PostgreSQL (`TeamOptions::shared`), these facts are the
//! database's instead, the same for every instance (`team_pg.rs`): a
//! session's owner is its row's, written with it; a run takes one of its
//! user's places in the database; spending is added to a row per user and
//! UTC day, so it is one count across the instances and a restart keeps it.
//! Owners found there are remembered here (a session's owner never changes).
//!
//! Not here: checking tokens (`guard.rs`, `users.rs`), the routes that ask
//! (`http.rs`), the metrics' text (`metrics.rs`), the audit file (`audit.rs`),
//! the SQL (`team_pg.rs`).

use super::audit::{Audit, AuditOptions};
use super::live::{UserPlace, Watch};
use super::metrics::{self, Metrics};
use super::team_pg::TeamDb;
use super::users::Users;
use crate::agent::protocol::{EventKind, RunOutcome};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Semaphore;

/// What the server is told about its users.
#[derive(Debug, Clone, Default)]
pub struct TeamOptions {
    pub users: Users,
    /// Where `owners` (and by default the audit log) live; `None` keeps
    /// owners in memory only.
    pub state_dir: Option<PathBuf>,
    pub audit: Option<AuditOptions>,
    /// Most sessions one user may have running at once.
    pub user_max_running: Option<usize>,
    /// Most US dollars one user's runs may cost per UTC day.
    pub user_daily_usd: Option<f64>,
    /// The database that keeps owners, runs and spending for every instance
    /// sharing it, instead of this server's files and memory.
    pub shared: Option<Arc<TeamDb>>,
}

/// Who sent a request, as the guard found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No token is configured (a loopback server): as before, every session.
    Anyone,
    /// The server's own `--token`: every session, like a single user.
    Admin,
    /// A user of `[serve.users]` or the users file: their own sessions only.
    User(String),
}

impl Caller {
    /// The user's name, for ownership, limits and the audit log.
    pub fn user(&self) -> Option<&str> {
        match self {
            Caller::User(name) => Some(name),
            _ => None,
        }
    }

    /// How the audit log names the caller.
    pub fn audit_name(&self) -> &str {
        match self {
            Caller::Anyone => "anyone",
            Caller::Admin => "admin",
            Caller::User(name) => name,
        }
    }
}

/// A per-user limit reached: the reason and when to try again.
pub struct Limited {
    pub reason: String,
    pub retry_after: u64,
    pub limit: &'static str,
}

/// Why a run may not start.
pub enum Refusal {
    Limited(Limited),
    /// The database that keeps the limits' counts failed.
    Store(String),
}

/// The sessions a caller may see in a list.
pub enum Visible {
    All,
    Only(HashSet<String>),
}

impl Visible {
    pub fn contains(&self, id: &str) -> bool {
        match self {
            Visible::All => true,
            Visible::Only(ids) => ids.contains(id),
        }
    }
}

pub struct Team {
    opts: TeamOptions,
    owners: Mutex<HashMap<String, String>>,
    /// Per user: the UTC day (days since 1970) and dollars spent on it.
    spent: Mutex<HashMap<String, (u64, f64)>>,
    /// Per user: a place per run they may have at once
    /// (`user_max_running`), held by each run until it is over.
    running: Mutex<HashMap<String, Arc<Semaphore>>>,
    pub metrics: Arc<Metrics>,
    pub audit: Option<Audit>,
    /// The model the served agents use, for the metrics' labels.
    model: String,
}

/// Owners beyond this many lines are not read: a damaged or hostile file
/// cannot take the server's memory.
const MAX_OWNERS: usize = 1_000_000;

impl Team {
    pub fn new(opts: TeamOptions, model: String) -> Team {
        // With a database, its rows are the owners; a file left from
        // serving files is not read.
        let owners = match (&opts.shared, &opts.state_dir) {
            (None, Some(dir)) => read_owners(&dir.join("owners")),
            _ => HashMap::new(),
        };
        Team {
            audit: opts.audit.clone().map(Audit::new),
            owners: Mutex::new(owners),
            spent: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            metrics: Arc::new(Metrics::default()),
            model,
            opts,
        }
    }

    pub fn users(&self) -> &Users {
        &self.opts.users
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn owner_of(&self, id: &str) -> Option<String> {
        if let Some(owner) = self.owners().get(id) {
            return Some(owner.clone());
        }
        let db = self.opts.shared.as_ref()?;
        match db.owner_of(id) {
            Ok(Some(owner)) => {
                self.owners().insert(id.to_string(), owner.clone());
                Some(owner)
            }
            Ok(None) => None,
            // Unknown is nobody's: a user is answered 404, as when the
            // session's row cannot be read either.
            Err(_) => {
                self.metrics.inc(metrics::STORE_ERRORS, &[]);
                None
            }
        }
    }

    /// Whether `caller` may know session `id` exists. A user sees only their
    /// own; the admin and a server without tokens see all.
    pub fn may_see(&self, caller: &Caller, id: &str) -> bool {
        match caller.user() {
            Some(user) => self.owner_of(id).is_some_and(|o| o == user),
            None => true,
        }
    }

    /// The sessions `caller` may see listed: a user's own, else all.
    pub fn visible(&self, caller: &Caller) -> Result<Visible, String> {
        let Some(user) = caller.user() else {
            return Ok(Visible::All);
        };
        if let Some(db) = &self.opts.shared {
            return db.sessions_of(user).map(Visible::Only);
        }
        let owners = self.owners();
        Ok(Visible::Only(
            owners
                .iter()
                .filter(|(_, o)| *o == user)
                .map(|(id, _)| id.clone())
                .collect(),
        ))
    }

    /// Records that `user` owns the new session `id`, in memory and in the
    /// owners file. Returns the file's error; the session is owned in
    /// memory either way. With a database the owner is in the session's row
    /// already (`Backend::create_session`): only remembered here.
    pub fn own(&self, id: &str, user: &str) -> std::io::Result<()> {
        let mut owners = self.owners();
        owners.insert(id.to_string(), user.to_string());
        if self.opts.shared.is_some() {
            return Ok(());
        }
        let Some(dir) = &self.opts.state_dir else {
            return Ok(());
        };
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(dir)?;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(dir.join("owners"))?;
        // Under the owners' lock: lines from two requests never interleave.
        f.write_all(format!("{id} {user}\n").as_bytes())?;
        f.sync_data()
    }

    /// A place for a new run of `caller`'s in session `session`, to hold
    /// until the run is over (`None` when users have no running limit, or
    /// for the admin), or the limit that refuses it.
    pub async fn may_start(
        &self,
        caller: &Caller,
        session: &str,
    ) -> Result<Option<UserPlace>, Refusal> {
        let Some(user) = caller.user() else {
            return Ok(None);
        };
        if let Some(max) = self.opts.user_daily_usd {
            let spent = self.spent_today(user).await.map_err(Refusal::Store)?;
            if spent >= max {
                let now = crate::clock::now_unix();
                let midnight = (now / 86_400 + 1) * 86_400;
                return Err(Refusal::Limited(Limited {
                    reason: format!(
                        "user {user} has spent ${spent:.4} today (UTC), the daily limit is ${max:.2}; it resets at midnight UTC"
                    ),
                    retry_after: midnight.saturating_sub(now).max(1),
                    limit: "daily_cost",
                }));
            }
        }
        let Some(max) = self.opts.user_max_running else {
            return Ok(None);
        };
        let busy = || {
            Refusal::Limited(Limited {
                reason: format!(
                    "user {user} has {max} sessions running, the most allowed at once; retry when one is done"
                ),
                retry_after: super::RETRY_AFTER_SECS,
                limit: "running",
            })
        };
        if let Some(db) = &self.opts.shared {
            return match db.take_place(user, session, max).await {
                Ok(Some(place)) => Ok(Some(UserPlace::Shared(place))),
                Ok(None) => Err(busy()),
                Err(e) => Err(Refusal::Store(e)),
            };
        }
        let places = {
            let mut all = self.running.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                all.entry(user.to_string())
                    .or_insert_with(|| Arc::new(Semaphore::new(max))),
            )
        };
        match places.try_acquire_owned() {
            Ok(place) => Ok(Some(UserPlace::Local(place))),
            Err(_) => Err(busy()),
        }
    }

    async fn spent_today(&self, user: &str) -> Result<f64, String> {
        let today = crate::clock::now_unix() / 86_400;
        if let Some(db) = &self.opts.shared {
            return db.spent(user, today).await;
        }
        let spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        Ok(match spent.get(user) {
            Some((day, usd)) if *day == today => *usd,
            _ => 0.0,
        })
    }

    /// Adds `usd` to the day's spending of session `id`'s owner.
    fn charge_session(&self, id: &str, usd: f64) {
        if let Some(db) = &self.opts.shared {
            // The database finds the owner in the same statement: a run's
            // events are not held up by a round trip.
            db.charge(id, crate::clock::now_unix() / 86_400, usd, &self.metrics);
            return;
        }
        if let Some(user) = self.owner_of(id) {
            self.charge(&user, usd);
        }
    }

    fn charge(&self, user: &str, usd: f64) {
        let today = crate::clock::now_unix() / 86_400;
        let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        let entry = spent.entry(user.to_string()).or_insert((today, 0.0));
        if entry.0 != today {
            *entry = (today, 0.0);
        }
        entry.1 += usd;
    }

    /// The watch of session `id`'s events.
    pub fn watch(self: &Arc<Self>, id: &str) -> Box<dyn Watch> {
        Box::new(SessionWatch {
            team: Arc::clone(self),
            id: id.to_string(),
            run: Mutex::new(None),
        })
    }
}

/// One session's runs as the metrics and the spending see them.
struct SessionWatch {
    team: Arc<Team>,
    id: String,
    /// The run in progress: when it started, and whether text came yet.
    run: Mutex<Option<(Instant, bool)>>,
}

impl Watch for SessionWatch {
    fn saw(&self, kind: &EventKind) {
        let m = &self.team.metrics;
        let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        match kind {
            EventKind::RunStarted { .. } => {
                m.inc(metrics::RUNS_STARTED, &[]);
                *run = Some((Instant::now(), false));
            }
            EventKind::TextDelta { .. } => {
                if let Some((started, seen @ false)) = run.as_mut() {
                    *seen = true;
                    m.first_token_took(started.elapsed());
                }
            }
            EventKind::RunFinished(end) => {
                let outcome = match &end.outcome {
                    RunOutcome::Answered { .. } => "answered",
                    RunOutcome::Failed { .. } => "failed",
                    RunOutcome::Interrupted => "interrupted",
                    RunOutcome::LimitReached { .. } => "limit_reached",
                };
                m.inc(metrics::RUNS_FINISHED, &[("outcome", outcome)]);
                if let Some((started, _)) = run.take() {
                    m.run_took(started.elapsed());
                }
            }
            EventKind::ToolResult(r) => {
                let outcome = if r.is_error { "error" } else { "ok" };
                m.inc(
                    metrics::TOOL_CALLS,
                    &[("tool", &r.name), ("outcome", outcome)],
                );
            }
            EventKind::Usage(u) => {
                let model = self.team.model.as_str();
                let as_f = |n: u64| n as f64;
                for (kind, n) in [
                    ("prompt", u.prompt_tokens),
                    ("completion", u.completion_tokens),
                    ("cache_read", u.cache_read_tokens),
                    ("cache_write", u.cache_write_tokens),
                ] {
                    m.add(
                        metrics::MODEL_TOKENS,
                        &[("model", model), ("kind", kind)],
                        as_f(n),
                    );
                }
                if let Some(usd) = u.cost_usd {
                    m.add(metrics::COST, &[("model", model)], usd);
                    self.team.charge_session(&self.id, usd);
                }
            }
            _ => {}
        }
    }
}

fn read_owners(path: &std::path::Path) -> HashMap<String, String> {
    let mut owners = HashMap::new();
    let Ok(text) = std::fs::read_to_string(path) else {
        return owners;
    };
    for line in text.lines().take(MAX_OWNERS) {
        if let Some((id, user)) = line.split_once(' ') {
            owners.insert(id.to_string(), user.to_string());
        }
    }
    owners
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(dir: Option<PathBuf>, daily: Option<f64>) -> Arc<Team> {
        Arc::new(Team::new(
            TeamOptions {
                state_dir: dir,
                user_max_running: Some(1),
                user_daily_usd: daily,
                ..TeamOptions::default()
            },
            "m".into(),
        ))
    }

    #[test]
    fn users_see_their_own_sessions_and_owners_outlast_a_restart() {
        let dir = crate::serve::scratch_dir("team");
        let t = team(Some(dir.clone()), None);
        t.own("s1", "ann").unwrap();
        let ann = Caller::User("ann".into());
        let bob = Caller::User("bob".into());
        assert!(t.may_see(&ann, "s1"));
        assert!(!t.may_see(&bob, "s1"));
        assert!(
            !t.may_see(&ann, "s2"),
            "nobody's session is nobody's to see"
        );
        assert!(t.may_see(&Caller::Admin, "s2"));
        assert!(t
            .visible(&ann)
            .is_ok_and(|v| v.contains("s1") && !v.contains("s2")));
        assert!(t.visible(&bob).is_ok_and(|v| !v.contains("s1")));
        assert!(t.visible(&Caller::Admin).is_ok_and(|v| v.contains("s2")));
        let again = team(Some(dir.clone()), None);
        assert_eq!(again.owner_of("s1").as_deref(), Some("ann"));
    }

    fn refused(r: Result<Option<UserPlace>, Refusal>) -> Limited {
        match r {
            Err(Refusal::Limited(l)) => l,
            Err(Refusal::Store(e)) => panic!("a store error: {e}"),
            Ok(_) => panic!("not refused"),
        }
    }

    #[tokio::test]
    async fn a_users_spending_and_running_limits_refuse_with_a_reason() {
        let t = team(None, Some(0.01));
        t.own("s1", "ann").unwrap();
        let ann = Caller::User("ann".into());
        let place = t.may_start(&ann, "s1").await.ok().unwrap();
        assert!(place.is_some());
        let busy = refused(t.may_start(&ann, "s1").await);
        assert_eq!(busy.limit, "running");
        drop(place);
        let w = t.watch("s1");
        w.saw(&EventKind::Usage(crate::agent::protocol::UsageReport {
            cost_usd: Some(0.02),
            ..Default::default()
        }));
        let spent = refused(t.may_start(&ann, "s1").await);
        assert_eq!(spent.limit, "daily_cost");
        assert!(spent.reason.contains("daily limit"), "{}", spent.reason);
        assert!(spent.retry_after >= 1 && spent.retry_after <= 86_400);
        assert!(t
            .may_start(&Caller::Admin, "s1")
            .await
            .is_ok_and(|p| p.is_none()));
    }
}
