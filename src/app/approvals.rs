//! The remembered "always" rules between their file (`config::approvals`) and
//! the agent's allow list: loaded at start-up (and for each served prompt),
//! added when the user answers "remember", listed and dropped by `/approve`.
//! What a rule matches is `agent::allowlist`'s; where it is kept, config's.

use crate::agent::allowlist::{rule_words, AllowRule, SharedAllowList};
use crate::config::approvals::Remembered;
use crate::ui::repl::RuleError;
use crate::ui::style::Style;
use std::path::PathBuf;

fn env(name: &str) -> Option<String> {
    crate::process::var(name)
}

/// The user's rules file, when there is a config directory.
pub(crate) fn store() -> Option<Remembered> {
    crate::config::approvals::path(&env).map(Remembered::new)
}

/// Adds the remembered rules to `list`. A file that cannot be read, or a
/// rule that is not a plain command prefix, is one warning and skipped.
pub(crate) fn load_into(list: &SharedAllowList) {
    let Some(store) = store() else { return };
    let warn = |text: &str| {
        let style = Style::detect(true, &crate::ui::terminal::Terminal::detect());
        eprintln!("{} {text}", style.warning("warning:"));
    };
    match store.load() {
        Ok(rules) => {
            for rule in rules {
                match rule_words(&rule) {
                    Some(words) => list.add_remembered(words),
                    None => warn(&format!(
                        "{}: `{}` is not a command prefix buddy can match; ignored",
                        store.path().display(),
                        crate::text::one_line(&rule, 80)
                    )),
                }
            }
        }
        Err(e) => warn(&format!("{e}; remembered approvals ignored")),
    }
}

/// A list with the remembered rules in it, for a new agent.
pub(crate) fn remembered() -> SharedAllowList {
    let list = SharedAllowList::default();
    load_into(&list);
    list
}

/// Saves `prefix` (as shown at the prompt) in the user's rules file and
/// marks it remembered in `list`; the file.
pub(crate) fn remember(list: &SharedAllowList, prefix: &str) -> Result<PathBuf, RuleError> {
    let words = rule_words(prefix).ok_or_else(|| RuleError::NotAPrefix(prefix.to_string()))?;
    let store = store().ok_or(RuleError::NowhereToRemember)?;
    store.add(prefix)?;
    list.add_remembered(words);
    Ok(store.path().to_path_buf())
}

/// Drops rule `n` (1-based, as `/approve` lists them) from `list` and, if
/// it was remembered, from the file; the rule dropped.
pub(crate) fn forget(list: &SharedAllowList, n: usize) -> Result<AllowRule, RuleError> {
    let rules: Vec<AllowRule> = list.rules();
    let rule = n
        .checked_sub(1)
        .and_then(|i| rules.get(i))
        .ok_or(RuleError::NoSuchRule(n))?;
    if rule.remembered {
        let store = store().ok_or(RuleError::NoConfigDir)?;
        store.remove(&rule.shown)?;
    }
    list.remove(&rule.shown);
    Ok(rule.clone())
}
