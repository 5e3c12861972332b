//! Waiting for outside state that sends no event (a file appearing, a
//! process ending, a screen changing): the suite's one polling loop, always
//! bounded. Where an event can be awaited (a pipe, a socket, a channel), await
//! it instead.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often state is looked at: it only paces the looking, what is checked
/// is the real state.
pub const POLL: Duration = Duration::from_millis(20);

/// Asks `check` every `every` until it gives a value, for at most `within`;
/// `None` past that (for callers that clean up before failing).
pub fn poll_every<T>(
    every: Duration,
    within: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// [`poll_every`] at the usual pace.
pub fn poll_until<T>(within: Duration, check: impl FnMut() -> Option<T>) -> Option<T> {
    poll_every(POLL, within, check)
}

/// Waits until `check` gives a value and returns it; fails the test naming
/// `what` after `within`.
pub fn wait_until<T>(what: impl Display, within: Duration, check: impl FnMut() -> Option<T>) -> T {
    match poll_until(within, check) {
        Some(v) => v,
        None => panic!("waited {within:?} for {what}"),
    }
}

/// Waits until `holds` is true; fails the test naming `what` after `within`.
pub fn wait_for(what: impl Display, within: Duration, mut holds: impl FnMut() -> bool) {
    wait_until(what, within, || holds().then_some(()))
}
