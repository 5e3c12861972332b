//! What the agent does about a conversation that does not fit in the
//! model's context window: attachments and tool results too large for the
//! room left are cut before they join the history (with one line saying
//! so), and a turn the server refused as too long is set aside, so the next
//! prompt is not refused the same way. A set-aside turn stays in the session
//! file, behind a rewind mark: a resume loads the conversation without it.

use super::{Agent, EventKind};

/// Of the room the window has, this part is kept free for the reply and
/// for what the estimate misses (a tokenizer that splits text finer than
/// four characters a token).
const RESERVE_DIVISOR: u64 = 4;
/// Characters a token is taken to hold when cutting: fewer than the
/// estimate's four, so the cut text fits under tokenizers that split finer.
const CUT_CHARS_PER_TOKEN: u64 = 3;
/// What a cut keeps whatever the room: a result this short is never cut.
const KEEP_AT_LEAST: usize = 2_000;

/// Whether a window of `limit` tokens was described by someone rather than
/// guessed (`tokens::FALLBACK_CONTEXT_LIMIT` for a model nobody described;
/// a configured window of exactly that size is taken as a guess too, which
/// only means nothing is cut before the server says so).
pub(super) fn known_limit(limit: u64) -> bool {
    limit != super::tokens::FALLBACK_CONTEXT_LIMIT
}

impl Agent {
    /// Tokens a new message may take before the window is full, leaving a
    /// quarter of the window for the answer.
    fn context_room(&self) -> u64 {
        let limit = self.tracker.context_limit;
        let used = self.context_estimate();
        limit
            .saturating_sub(limit / RESERVE_DIVISOR)
            .saturating_sub(used)
    }

    /// `text`, cut to the room the window has left when it would not fit,
    /// with a note for the model and a warning for the user naming `what`.
    /// Nothing is cut to a guessed window (the fallback for a model nobody
    /// described): a refusal then names the real one. At least
    /// `KEEP_AT_LEAST` characters stay, so a short result ("wrote 10
    /// bytes") is never touched by a history that is already too long.
    pub(super) async fn fit_in_context(&mut self, text: String, what: &str) -> String {
        if !self.context_known || text.len() <= KEEP_AT_LEAST {
            return text;
        }
        let need = super::tokens::estimate_text(&text);
        let room = self.context_room();
        if need <= room {
            return text;
        }
        let keep_chars = usize::try_from(room.saturating_mul(CUT_CHARS_PER_TOKEN))
            .unwrap_or(usize::MAX)
            .max(KEEP_AT_LEAST);
        if keep_chars >= text.len() {
            return text;
        }
        let mut cut = keep_chars;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.warn(format!(
            "{what} cut to fit the model's context window ({} tokens): ~{} of ~{need} tokens kept",
            self.tracker.context_limit,
            super::tokens::estimate_text(&text[..cut])
        ))
        .await;
        format!(
            "{}\n[… cut here: the rest ({} of {} characters) did not fit in the context window]",
            &text[..cut],
            text.len() - cut,
            text.len()
        )
    }

    /// The window the server named in a refusal: budgeted with from now on.
    pub(super) fn learn_context_limit(&mut self, n: u64) {
        if n > 0 {
            self.tracker.context_limit = n;
            self.options.context_limit = n;
            self.context_known = true;
        }
    }

    /// The server refused this run's request as longer than the window:
    /// the run's messages from `at` (its prompt), and the context attached
    /// just before it, leave what the next request sends. The window the
    /// server named becomes the one budgeted with. Returns the line that
    /// says what happened.
    pub(super) async fn set_aside_overflowing_turn(
        &mut self,
        at: usize,
        limit: Option<u64>,
        error: String,
    ) -> String {
        if let Some(n) = limit {
            self.learn_context_limit(n);
        }
        // Everything before it is in the journal first, so the mark
        // follows what it refers to.
        self.persist(false).await;
        let removed = self.drop_turn_from(at).await;
        self.emit(EventKind::Warning {
            message: format!(
                "this prompt was set aside ({removed} message{}, kept in the session file); the conversation goes on without it",
                if removed == 1 { "" } else { "s" }
            ),
        })
        .await;
        let rest = self.context_estimate();
        let hint = if rest > self.tracker.context_limit / 2 {
            "; /compact makes room for more"
        } else {
            ""
        };
        format!("{error}; try a shorter prompt or fewer attached files{hint}")
    }
}
