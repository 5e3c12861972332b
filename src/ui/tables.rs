//! Tables people read on a terminal or in a pipe (the saved sessions), as
//! plain text: the caller decides where they go.

use crate::session;

/// Sessions as a table: id, age, message count, model, first prompt.
pub fn session_table(list: &[session::Summary]) -> String {
    let now = crate::clock::now_unix();
    let model_width = list
        .iter()
        .map(|s| s.model.len())
        .max()
        .unwrap_or(5)
        .clamp(5, 30);
    let mut out = format!(
        "{:<20}  {:>9}  {:>5}  {:<model_width$}  FIRST PROMPT\n",
        "ID", "USED", "MSGS", "MODEL"
    );
    for s in list {
        out.push_str(&format!(
            "{:<20}  {:>9}  {:>5}  {:<model_width$}  {}\n",
            s.id,
            crate::clock::age(s.used, now),
            s.messages,
            s.model,
            s.title
        ));
    }
    out
}
