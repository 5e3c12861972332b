//! Session modes (`session/set_mode`): the approval policies an editor can
//! switch a session between, as ACP's `SessionModeState`. `list` is the one
//! place a mode is defined; everything else (the state sent with a new,
//! loaded or resumed session, what `set_mode` accepts, the op it sends) is
//! read from it. A mode only changes the policy: the denylist, the sandbox,
//! read-only shell lines and `tools.shell_confirm` hold in every mode, as
//! the agent's approval gate (`agent::control`) applies them. `Current` is
//! the mode a session is in, which the editor sets and the agent may leave
//! (an accepted plan ends plan mode).

use crate::agent::protocol::ApprovalPolicy;
use agent_client_protocol::v1::schema::{SessionMode, SessionModeState};
use std::sync::{Arc, Mutex};

/// The mode a session opens in.
pub const DEFAULT: &str = "default";

/// One mode an editor may pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    /// The policy the agent gets when the mode is picked.
    pub policy: ApprovalPolicy,
    /// Plan mode: only reading runs until the model's plan is accepted
    /// (`Op::SetPlanMode`).
    pub plan: bool,
}

/// Every mode, in the order an editor lists them; the first is `DEFAULT`.
pub fn list() -> Vec<Mode> {
    vec![
        Mode {
            id: DEFAULT,
            name: "Default",
            description: "Ask before each command and file change, as configured",
            policy: ApprovalPolicy::Ask,
            plan: false,
        },
        Mode {
            id: "auto-edit",
            name: "Auto-edit",
            description: "File edits are approved; commands still ask",
            policy: ApprovalPolicy::Edits,
            plan: false,
        },
        Mode {
            id: "full-auto",
            name: "Full auto",
            description:
                "Commands and file changes run without asking (the denylist still refuses)",
            policy: ApprovalPolicy::All,
            plan: false,
        },
        Mode {
            id: "read-only",
            name: "Read-only",
            description: "Every command and file change is denied; the agent only reads",
            policy: ApprovalPolicy::None,
            plan: false,
        },
        Mode {
            id: "plan",
            name: "Plan",
            description: "Only reading runs; the agent ends with a plan for you to accept",
            policy: ApprovalPolicy::Ask,
            plan: true,
        },
    ]
}

/// The mode called `id`, if there is one.
pub fn find(id: &str) -> Option<Mode> {
    list().into_iter().find(|m| m.id == id)
}

/// The modes as ACP states them, with `current` as the current one.
pub fn state(current: &str) -> SessionModeState {
    let modes = list()
        .into_iter()
        .map(|m| SessionMode::new(m.id, m.name).description(m.description.to_string()))
        .collect();
    SessionModeState::new(current.to_string(), modes)
}

/// The mode one session is in, shared by the connection's loop (which sets
/// it on `session/set_mode`) and the session's task (which sees the agent
/// leave plan mode by itself when the user accepts its plan).
#[derive(Clone)]
pub struct Current(Arc<Mutex<&'static str>>);

impl Current {
    pub fn new() -> Current {
        Current(Arc::new(Mutex::new(DEFAULT)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, &'static str> {
        // A plain value: a panic elsewhere leaves it whole.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self) -> &'static str {
        *self.lock()
    }

    pub fn set(&self, id: &'static str) {
        *self.lock() = id;
    }

    /// The agent turned plan mode off (a plan accepted): a session in a
    /// plan mode is now in the default one, which this returns for the
    /// editor to be told; in any other mode nothing changed (the editor
    /// itself switched away from planning).
    pub fn plan_mode_ended(&self) -> Option<&'static str> {
        let mut current = self.lock();
        if !find(&current).is_some_and(|m| m.plan) {
            return None;
        }
        *current = DEFAULT;
        Some(DEFAULT)
    }
}

impl Default for Current {
    fn default() -> Current {
        Current::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_comes_first_and_ids_are_unique() {
        let modes = list();
        assert_eq!(modes[0].id, DEFAULT);
        assert_eq!(modes[0].policy, ApprovalPolicy::Ask);
        let mut ids: Vec<&str> = modes.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), modes.len());
    }

    #[test]
    fn auto_edit_approves_edits_only() {
        assert_eq!(
            find("auto-edit").map(|m| m.policy),
            Some(ApprovalPolicy::Edits)
        );
        assert_eq!(find("yolo"), None);
        let plan = find("plan").expect("plan mode");
        assert!(plan.plan && plan.policy == ApprovalPolicy::Ask);
        assert!(list().iter().filter(|m| m.plan).count() == 1);
        let v = serde_json::to_value(state("auto-edit")).unwrap();
        assert_eq!(v["currentModeId"], "auto-edit");
        assert_eq!(v["availableModes"][1]["id"], "auto-edit");
    }

    #[test]
    fn leaving_plan_mode_returns_to_the_default_only_from_a_plan_mode() {
        let current = Current::new();
        assert_eq!(current.plan_mode_ended(), None);
        current.set("plan");
        assert_eq!(current.plan_mode_ended(), Some(DEFAULT));
        assert_eq!(current.get(), DEFAULT);
        // The editor switched to auto-edit first: that mode stays.
        current.set("auto-edit");
        assert_eq!(current.plan_mode_ended(), None);
        assert_eq!(current.get(), "auto-edit");
    }
}
