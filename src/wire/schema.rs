//! Structured output (`buddy exec --output-schema FILE`): the JSON Schema an
//! answer must match, compiled once, with what each protocol needs of it
//! (a name, the schema itself), the check of an answer against it, and the
//! one step that turns the Messages protocol's forced answer tool call back
//! into answer text. It does not read the file (the caller does, so a bad
//! file is a usage error before anything is sent) and does not decide what
//! happens to an invalid answer (the agent retries once).
//!
//! Validation is the `jsonschema` crate, built without remote or file `$ref`
//! resolving: a schema is self-contained or refused when compiled.

use super::{Message, ToolCall};
use serde_json::Value;

/// The name given to the schema (Chat Completions' `json_schema.name`, the
/// Responses API's `text.format.name`, the Messages protocol's answer tool)
/// when neither the schema's `title` nor the file name gives one.
pub const DEFAULT_NAME: &str = "output";

/// The most validation errors quoted back to the model or the user.
const MAX_ERRORS: usize = 5;

/// The most characters of the answer's JSON quoted in a parse error.
const MAX_QUOTED: usize = 80;

/// Why a schema file was refused (one line; the caller names the file).
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("not valid JSON ({0})")]
    NotJson(#[source] serde_json::Error),
    #[error("a JSON Schema must be an object")]
    NotObject,
    /// What the validator said, on one line.
    #[error("not a valid JSON Schema ({0})")]
    Invalid(String),
}

/// Why an answer is not what the schema asks for (one line, said to the
/// model when it may try again and to the user when it may not).
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// `quoted` is the answer's start, on one line, marked when cut.
    #[error("the answer is not JSON ({error}): {quoted}")]
    NotJson {
        #[source]
        error: serde_json::Error,
        quoted: String,
    },
    /// Each error where it is ("at /age: …"), at most [`MAX_ERRORS`];
    /// `more` when there were others.
    #[error("the answer does not match the output schema: {}{}", .errors.join("; "), if *.more { "; …" } else { "" })]
    Mismatch { errors: Vec<String>, more: bool },
}

/// A compiled output schema.
pub struct OutputSchema {
    name: String,
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl OutputSchema {
    /// Compiles `text` (a JSON Schema document). `stem` is the file's name
    /// without its extension, the name's fallback when the schema has no
    /// usable `title`. The error is one line saying what is wrong.
    pub fn parse(text: &str, stem: &str) -> Result<OutputSchema, SchemaError> {
        let schema: Value = serde_json::from_str(text).map_err(SchemaError::NotJson)?;
        if !schema.is_object() {
            return Err(SchemaError::NotObject);
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| SchemaError::Invalid(one_line(&e.to_string())))?;
        let title = schema.get("title").and_then(Value::as_str).unwrap_or("");
        let name = [title, stem]
            .into_iter()
            .map(api_name)
            .find(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_NAME.to_string());
        Ok(OutputSchema {
            name,
            schema,
            validator,
        })
    }

    /// The name the protocols send with the schema: `[A-Za-z0-9_-]`, at most
    /// 64 characters (what OpenAI and Anthropic accept).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The answer as the JSON value the schema accepts, or why not (one
    /// line, with at most [`MAX_ERRORS`] errors). One surrounding Markdown
    /// code fence is tolerated: models that ignore `response_format` often
    /// add one.
    pub fn check(&self, answer: &str) -> Result<Value, AnswerError> {
        let json = unfenced(answer);
        let value: Value = serde_json::from_str(json).map_err(|error| {
            let quoted: String = json.chars().take(MAX_QUOTED).collect();
            let cut = if json.chars().count() > MAX_QUOTED {
                "…"
            } else {
                ""
            };
            AnswerError::NotJson {
                error,
                quoted: format!("{}{cut}", one_line(&quoted)),
            }
        })?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(MAX_ERRORS + 1)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                format!("at {at}: {}", one_line(&e.to_string()))
            })
            .collect();
        if errors.is_empty() {
            return Ok(value);
        }
        let more = errors.len() > MAX_ERRORS;
        let mut errors = errors;
        errors.truncate(MAX_ERRORS);
        Err(AnswerError::Mismatch { errors, more })
    }

    /// With the Messages protocol the schema is a tool the model is made to
    /// call: a call of it in `message` becomes the message's text (its
    /// arguments, the answer's JSON), so the history holds an answer, not a
    /// call no tool would ever answer. Other calls are left as they are.
    pub fn adopt_answer_call(&self, message: &mut Message) {
        let Some(calls) = message.tool_calls.as_mut() else {
            return;
        };
        let Some(at) = calls.iter().position(|c| c.function.name == self.name) else {
            return;
        };
        let call: ToolCall = calls.remove(at);
        if calls.is_empty() {
            message.tool_calls = None;
        }
        // Any text the model wrote beside the call is narration; the call's
        // input is the answer.
        message.content = Some(call.function.arguments);
    }
}

/// `text` restricted to what the APIs take as a name.
fn api_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

/// The inside of one ```` ``` ```` fence around the whole of `text`, else
/// `text` trimmed.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return t;
    };
    // The info string ("json") runs to the first newline.
    match inner.split_once('\n') {
        Some((info, body)) if !info.contains('{') && !info.contains('[') => body.trim(),
        _ => inner.trim(),
    }
}

/// `text` on one line: newlines and other control characters as spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> OutputSchema {
        OutputSchema::parse(
            r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
                "required":["name","age"],"additionalProperties":false}"#,
            "person.schema",
        )
        .unwrap()
    }

    #[test]
    fn names_come_from_the_title_then_the_file_name() {
        assert_eq!(person().name(), "person_schema");
        let titled = OutputSchema::parse(r#"{"title":"A report!","type":"object"}"#, "x").unwrap();
        assert_eq!(titled.name(), "A_report");
        let neither = OutputSchema::parse(r#"{"type":"object"}"#, "...").unwrap();
        assert_eq!(neither.name(), DEFAULT_NAME);
    }

    #[test]
    fn bad_files_and_bad_schemas_are_one_line_errors() {
        let e = OutputSchema::parse("{not json", "s")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("not valid JSON"), "{e}");
        let e = OutputSchema::parse("[1]", "s").unwrap_err().to_string();
        assert!(e.contains("must be an object"), "{e}");
        let e = OutputSchema::parse(r#"{"type": 5}"#, "s")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("not a valid JSON Schema"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let e = OutputSchema::parse(r#"{"$ref":"http://127.0.0.1:9/x.json"}"#, "s")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("not a valid JSON Schema"), "{e}");
    }

    #[test]
    fn answers_are_checked_and_fences_tolerated() {
        let s = person();
        let v = s.check(r#"{"name":"Ada","age":36}"#).unwrap();
        assert_eq!(v["age"], 36);
        let v = s
            .check("```json\n{\"name\":\"Ada\",\"age\":36}\n```")
            .unwrap();
        assert_eq!(v["name"], "Ada");
        let e = s.check(r#"{"name":"Ada"}"#).unwrap_err().to_string();
        assert!(e.contains("\"age\" is a required property"), "{e}");
        let e = s
            .check(r#"{"name":"Ada","age":"old"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at /age"), "{e}");
        let e = s.check("Sure! Here it is").unwrap_err().to_string();
        assert!(e.starts_with("the answer is not JSON"), "{e}");
    }

    #[test]
    fn the_answer_tool_call_becomes_the_answer_text() {
        let s = person();
        let mut m = Message::assistant("Here you go");
        m.tool_calls = Some(vec![ToolCall::new(
            "tu_1",
            "person_schema",
            r#"{"name":"Ada","age":36}"#,
        )]);
        s.adopt_answer_call(&mut m);
        assert!(m.calls().is_empty());
        assert_eq!(m.text(), r#"{"name":"Ada","age":36}"#);
        let mut other = Message::assistant("");
        other.tool_calls = Some(vec![ToolCall::new("c", "time", "{}")]);
        s.adopt_answer_call(&mut other);
        assert_eq!(other.calls().len(), 1);
    }
}
