//! One JSON-RPC message from an MCP peer, read into a `Value` within fixed
//! bounds before rmcp's typed decoding sees it: an array keeps at most
//! `MAX_ITEMS` entries (a result's `content` at most the parts its
//! character cap could ever show, with a part saying how many more there
//! were), and the whole message at most `MAX_VALUES` values. The line itself
//! is bounded by the transport (`lines.rs`). A message of 550,000 empty
//! parts thus costs its line and a few thousand small values, not a typed
//! copy of every part. Also finds a message's top-level `id` and `method`
//! without reading it whole, for answering a message that cannot be read.
//! Does not own what any method means.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Entries kept of one array: more than any list or result a person could
/// use, and few enough that a page of them is cheap.
pub const MAX_ITEMS: usize = 4096;
/// Values (of any kind, at any depth) one message may hold: a page of 256
/// tools with rich schemas is some tens of thousands.
pub const MAX_VALUES: usize = 200_000;

/// Why a message was not read.
#[derive(Debug, PartialEq, Eq)]
pub enum Unread {
    /// Not JSON (or not one JSON value).
    Syntax(String),
    /// More than `MAX_VALUES` values.
    TooMany,
}

/// `line` as a bounded `Value`; `max_parts` caps a `content` array.
pub fn read(line: &[u8], max_parts: usize) -> Result<Value, Unread> {
    let mut count = 0usize;
    let mut de = serde_json::Deserializer::from_slice(line);
    let seed = Seed {
        count: &mut count,
        max_items: MAX_ITEMS,
        max_parts: max_parts.clamp(1, MAX_ITEMS),
        key: None,
    };
    let value = seed.deserialize(&mut de).map_err(|e| {
        if e.to_string().starts_with(TOO_MANY) {
            Unread::TooMany
        } else {
            Unread::Syntax(e.to_string())
        }
    })?;
    de.end().map_err(|e| Unread::Syntax(e.to_string()))?;
    Ok(value)
}

const TOO_MANY: &str = "more than the values one message may hold";

struct Seed<'a> {
    count: &'a mut usize,
    max_items: usize,
    max_parts: usize,
    /// The key this value is under, when it is a member of an object.
    key: Option<&'a str>,
}

impl Seed<'_> {
    fn counted<E: serde::de::Error>(&mut self) -> Result<(), E> {
        *self.count += 1;
        if *self.count > MAX_VALUES {
            return Err(E::custom(TOO_MANY));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(mut self, v: bool) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(mut self, v: i64) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(mut self, v: u64) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(mut self, v: f64) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: serde::de::Error>(mut self, v: String) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<Value, E> {
        self.counted()?;
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.counted()?;
        let cap = if self.key == Some("content") {
            self.max_parts
        } else {
            self.max_items
        };
        let mut items = Vec::new();
        while items.len() < cap {
            let seed = Seed {
                count: &mut *self.count,
                max_items: self.max_items,
                max_parts: self.max_parts,
                key: None,
            };
            match seq.next_element_seed(seed)? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
        // The rest is read past, keeping nothing.
        let mut more = 0usize;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            more += 1;
        }
        if more > 0 && self.key == Some("content") {
            items.push(serde_json::json!({
                "type": "text",
                "text": format!("[{more} more parts not read]"),
            }));
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        self.counted()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let seed = Seed {
                count: &mut *self.count,
                max_items: self.max_items,
                max_parts: self.max_parts,
                key: Some(&key),
            };
            let v = map.next_value_seed(seed)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// What a message says at its top level, found by scanning its text (which
/// may be cut short): its `id` and whether it names a `method`.
#[derive(Debug, Default, PartialEq)]
pub struct Head {
    pub id: Option<Value>,
    pub has_method: bool,
}

/// The top-level `id` (a number or a string) and `method` key of `text`,
/// skipping nested objects and strings; what is past the end of a cut
/// message is simply not found.
pub fn head(text: &[u8]) -> Head {
    let mut out = Head::default();
    let mut depth = 0usize;
    let mut i = 0usize;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let end = string_end(text, i);
                // A key at the top level is a string followed by a colon.
                if depth == 1 {
                    let after = skip_space(text, end);
                    if text.get(after) == Some(&b':') {
                        let key = &text[i + 1..end.saturating_sub(1).max(i + 1)];
                        let start = skip_space(text, after + 1);
                        match key {
                            b"id" => out.id = scalar(text, start),
                            b"method" => out.has_method = true,
                            _ => {}
                        }
                        i = start;
                        continue;
                    }
                }
                i = end;
            }
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The index just past the string starting at `start` (its quote).
fn string_end(text: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

fn skip_space(text: &[u8], mut i: usize) -> usize {
    while text.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// A JSON number or string starting at `start`, if whole and short.
fn scalar(text: &[u8], start: usize) -> Option<Value> {
    let end = match text.get(start)? {
        b'"' => string_end(text, start),
        b'-' | b'0'..=b'9' => {
            let mut i = start;
            while text
                .get(i)
                .is_some_and(|b| b.is_ascii_digit() || b"-+.eE".contains(b))
            {
                i += 1;
            }
            i
        }
        _ => return None,
    };
    if end - start > 200 {
        return None;
    }
    serde_json::from_slice::<Value>(&text[start..end])
        .ok()
        .filter(|v| v.is_number() || v.is_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_within_its_bounds_reads_as_it_is() {
        let m = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "x": [1.5, true, null, "s"]}});
        assert_eq!(read(m.to_string().as_bytes(), 100).unwrap(), m);
    }

    #[test]
    fn content_parts_are_cut_at_the_cap_and_the_rest_counted() {
        let parts = vec![json!({"type": "text", "text": ""}); 550_000];
        let m = json!({"id": 1, "result": {"content": parts}});
        let v = read(m.to_string().as_bytes(), 30_000).unwrap();
        let got = v["result"]["content"].as_array().unwrap();
        assert_eq!(got.len(), MAX_ITEMS + 1);
        let more = 550_000 - MAX_ITEMS;
        assert_eq!(
            got[MAX_ITEMS]["text"],
            format!("[{more} more parts not read]")
        );
        let v = read(m.to_string().as_bytes(), 10).unwrap();
        assert_eq!(v["result"]["content"].as_array().unwrap().len(), 11);
    }

    #[test]
    fn other_arrays_keep_max_items_and_too_many_values_are_refused() {
        let m = json!({"result": {"tools": vec![json!(1); MAX_ITEMS + 5]}});
        let v = read(m.to_string().as_bytes(), 100).unwrap();
        assert_eq!(v["result"]["tools"].as_array().unwrap().len(), MAX_ITEMS);
        let objects: Vec<Value> = (0..MAX_VALUES).map(|i| json!({ "k": i })).collect();
        let m = json!({"result": {"a": objects.chunks(2000).map(|c| Value::from(c.to_vec())).collect::<Vec<_>>()}});
        assert_eq!(read(m.to_string().as_bytes(), 100), Err(Unread::TooMany));
        assert!(matches!(read(b"{\"a\":", 100), Err(Unread::Syntax(_))));
        assert!(matches!(read(b"{} {}", 100), Err(Unread::Syntax(_))));
    }

    #[test]
    fn the_head_is_found_at_the_top_level_only() {
        let h = head(br#"{"jsonrpc":"2.0","params":{"id":9,"method":"x"},"id":"a\"b","method":"tools/call"}"#);
        assert_eq!(h.id, Some(json!("a\"b")));
        assert!(h.has_method);
        let h = head(br#"{"jsonrpc":"2.0", "id" : 42, "result":{"#);
        assert_eq!(h.id, Some(json!(42)));
        assert!(!h.has_method);
        assert_eq!(head(br#"{"params":{"id":1}"#), Head::default());
        assert_eq!(head(br#"{"id":{"x":1}}"#).id, None);
        assert_eq!(head(br#"{"id":12"#).id, Some(json!(12)));
    }
}
