//! A `tools/call` result as the model reads it: one text. Text blocks are
//! kept as they are; images and audio become a `[image: MIME, N bytes]` line
//! (the history's messages carry text only, so the model would not see the
//! picture anyway); resource links and embedded resources become their URI
//! and text; structured content is used only when there is no content. Works
//! on the result's JSON so a block kind this code does not know is named, not
//! dropped. Bounding is the tool registry's.

use serde_json::Value;

/// The text of a result's `content` (or `structuredContent`), and whether
/// the server said it is an error (`isError`).
pub fn result_text(result: &Value) -> (String, bool) {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut parts: Vec<String> = blocks.iter().map(block_text).collect();
    if parts.is_empty() {
        if let Some(s) = result.get("structuredContent").filter(|v| !v.is_null()) {
            parts.push(s.to_string());
        }
    }
    (parts.join("\n"), is_error)
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Bytes that base64 text of this length decodes to.
fn decoded_len(b64: &str) -> usize {
    let trimmed = b64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

fn block_text(block: &Value) -> String {
    let kind = str_of(block, "type").unwrap_or("");
    match kind {
        "text" => str_of(block, "text").unwrap_or("").to_string(),
        "image" | "audio" => format!(
            "[{kind}: {}, {} bytes]",
            str_of(block, "mimeType").unwrap_or("unknown type"),
            decoded_len(str_of(block, "data").unwrap_or(""))
        ),
        "resource_link" => {
            let mut out = format!("[resource link: {}", str_of(block, "uri").unwrap_or("?"));
            if let Some(name) = str_of(block, "name") {
                out.push_str(&format!(" ({name})"));
            }
            if let Some(d) = str_of(block, "description") {
                out.push_str(&format!(": {d}"));
            }
            out.push(']');
            out
        }
        "resource" => {
            let r = block.get("resource").unwrap_or(&Value::Null);
            let uri = str_of(r, "uri").unwrap_or("?");
            match (str_of(r, "text"), str_of(r, "blob")) {
                (Some(text), _) => format!("[resource: {uri}]\n{text}"),
                (None, Some(blob)) => format!(
                    "[resource: {uri}, {}, {} bytes]",
                    str_of(r, "mimeType").unwrap_or("unknown type"),
                    decoded_len(blob)
                ),
                (None, None) => format!("[resource: {uri}]"),
            }
        }
        other => format!("[{} content]", crate::text::one_line(other, 40)),
    }
}

/// A `resources/read` result as one text: each content's text (a binary
/// one as a line naming its type and size), cut to `max` characters.
pub fn resource_text(result: &Value, max: usize) -> String {
    let contents = result
        .get("contents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let parts: Vec<String> = contents
        .iter()
        .map(|c| match (str_of(c, "text"), str_of(c, "blob")) {
            (Some(text), _) => text.to_string(),
            (None, Some(blob)) => format!(
                "[{}, {} bytes]",
                str_of(c, "mimeType").unwrap_or("binary"),
                decoded_len(blob)
            ),
            (None, None) => String::new(),
        })
        .collect();
    bounded(parts.join("\n"), max)
}

/// A `prompts/get` result as the user's turn: its messages' text in order,
/// an assistant's marked as such, cut to `max` characters.
pub fn prompt_text(result: &Value, max: usize) -> String {
    let messages = result
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let parts: Vec<String> = messages
        .iter()
        .map(|m| {
            let text = block_text(m.get("content").unwrap_or(&Value::Null));
            match str_of(m, "role") {
                Some("assistant") => format!("[assistant]\n{text}"),
                _ => text,
            }
        })
        .collect();
    bounded(parts.join("\n\n"), max)
}

fn bounded(text: String, max: usize) -> String {
    let (mut kept, cut) = crate::tools::truncate(&text, max);
    if let Some(t) = cut {
        kept.push('\n');
        kept.push_str(&crate::tools::marker(t));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_kind_becomes_text() {
        let (text, err) = result_text(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource_link", "uri": "test://r/1", "name": "one"},
            {"type": "resource", "resource": {"uri": "test://r/2", "text": "body"}},
            {"type": "hologram"}
        ]}));
        assert!(!err);
        assert_eq!(
            text,
            "hello\n[image: image/png, 3 bytes]\n[resource link: test://r/1 (one)]\n\
             [resource: test://r/2]\nbody\n[hologram content]"
        );
    }

    #[test]
    fn resources_and_prompts_become_text_within_their_cap() {
        let r = json!({"contents": [{"uri": "a", "text": "hello"}, {"uri": "b", "blob": "AAAA", "mimeType": "image/png"}]});
        assert_eq!(resource_text(&r, 1000), "hello\n[image/png, 3 bytes]");
        assert!(
            resource_text(
                &json!({"contents": [{"uri": "a", "text": "x".repeat(500)}]}),
                100
            )
            .len()
                < 300
        );
        let p = json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "ask"}},
            {"role": "assistant", "content": {"type": "text", "text": "ok"}}
        ]});
        assert_eq!(prompt_text(&p, 1000), "ask\n\n[assistant]\nok");
    }

    #[test]
    fn is_error_and_structured_content_are_kept() {
        let (text, err) =
            result_text(&json!({"isError": true, "content": [{"type": "text", "text": "bad"}]}));
        assert!(err);
        assert_eq!(text, "bad");
        let (text, _) = result_text(&json!({"content": [], "structuredContent": {"a": 1}}));
        assert_eq!(text, r#"{"a":1}"#);
    }
}
