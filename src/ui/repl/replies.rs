//! Which of the REPL's requests a reply from the agent answers: each op the
//! REPL sends for a reply it must read in a particular way (`/status` and
//! `/context` both ask `Status`) is remembered by its id, and the event that
//! carries that id is read as that request's answer. Nothing here guesses
//! from the order of replies; a reply to an op the REPL did not note is not
//! one it waits for.

use crate::agent::protocol::OpId;

/// Requests kept at most: one per command typed, so a handful; a reply that
/// never comes (the agent stopped) must not grow the list without end.
const MAX_AWAITED: usize = 32;

/// The ops sent whose replies the REPL waits for, with what each is for.
pub struct Awaited<W> {
    pending: Vec<(OpId, W)>,
}

impl<W> Default for Awaited<W> {
    fn default() -> Self {
        Awaited {
            pending: Vec::new(),
        }
    }
}

impl<W> Awaited<W> {
    /// Notes that the reply to op `id` is for `want`.
    pub fn expect(&mut self, id: OpId, want: W) {
        if self.pending.len() >= MAX_AWAITED {
            self.pending.remove(0);
        }
        self.pending.push((id, want));
    }

    /// What the reply naming op `id` is for, once: `None` for a reply to
    /// nothing awaited.
    pub fn take(&mut self, id: Option<OpId>) -> Option<W> {
        let id = id?;
        let at = self.pending.iter().position(|(i, _)| *i == id)?;
        Some(self.pending.remove(at).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Want {
        Status,
        Context,
    }

    #[test]
    fn two_status_replies_answered_out_of_order_are_told_apart_by_id() {
        let mut awaited = Awaited::default();
        awaited.expect(4, Want::Status);
        awaited.expect(5, Want::Context);
        // The second request's reply comes first: it is still `/context`'s.
        assert_eq!(awaited.take(Some(5)), Some(Want::Context));
        assert_eq!(awaited.take(Some(4)), Some(Want::Status));
        // Each answers once; a reply to an op nobody noted, or to none, is
        // not awaited.
        assert_eq!(awaited.take(Some(4)), None);
        assert_eq!(awaited.take(Some(9)), None);
        assert_eq!(awaited.take(None), None);
    }

    #[test]
    fn replies_that_never_come_do_not_grow_the_list() {
        let mut awaited = Awaited::default();
        for id in 0..1000 {
            awaited.expect(id, Want::Status);
        }
        assert!(awaited.pending.len() <= MAX_AWAITED);
        assert_eq!(awaited.take(Some(999)), Some(Want::Status));
        assert_eq!(awaited.take(Some(0)), None);
    }
}
