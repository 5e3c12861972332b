//! A question an outside party asks the user in the middle of a tool call
//! (an MCP server's elicitation), as plain data every front end can show:
//! the message and a flat form of typed fields. Owns reading the server's
//! restricted JSON schema into fields, the bounds on all of it (a server
//! cannot make a front end draw a megabyte or a thousand fields), making its
//! text safe for a terminal, and checking an answer against the fields,
//! typed by a person (`Field::read`) or sent by a client (`Question::check`).
//! It does not ask anyone: the agent's `Approver` puts the question to a
//! front end (`agent::control`), and the MCP client turns the answer into
//! the protocol's (`mcp::elicit`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The message shown with a question, at most; the rest is cut.
pub const MAX_MESSAGE_CHARS: usize = 2_000;
/// Fields in one form at most: a form with more is not asked.
pub const MAX_FIELDS: usize = 32;
/// A field's name, title, a choice's title or value, at most.
const MAX_LABEL_CHARS: usize = 120;
/// A field's description at most.
const MAX_DESCRIPTION_CHARS: usize = 400;
/// Choices of one field at most: a field with more is not asked.
pub const MAX_CHOICES: usize = 64;
/// One text answer at most, whatever the field allows.
pub const MAX_ANSWER_CHARS: usize = 4_000;
/// A question's URL at most (URL mode).
const MAX_URL_CHARS: usize = 2_000;

/// A question for the user, from the MCP server `server` during the model's
/// call `call_id`. Its text is bounded and safe to print as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Names the question in the answer (`Op::Elicitation`).
    pub id: String,
    pub server: String,
    pub call_id: String,
    pub message: String,
    #[serde(flatten)]
    pub mode: Mode,
    /// The sub-agent whose call it is, when a child's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

/// What the user is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Fill in these fields (in the server's order).
    Form { fields: Vec<Field> },
    /// Open this page and do what the message says there; nothing typed
    /// passes through buddy.
    Url { url: String },
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    /// The key of its value in the answer.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(flatten)]
    pub kind: Kind,
    /// Taken when the user enters nothing; already checked against `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// A field's type, with the limits the schema set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    Text {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_length: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_length: Option<u64>,
        /// `email`, `uri`, `date` or `date-time`, when the schema said so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
    },
    Number {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<f64>,
    },
    Integer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<i64>,
    },
    Boolean,
    /// One of these.
    Choice {
        choices: Vec<Choice>,
    },
    /// Some of these (between the bounds, when given).
    Choices {
        choices: Vec<Choice>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_items: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_items: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// What became of a question, as the user (or a front end) answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// The form's values (nothing for URL mode: the user agreed to go).
    Accept {
        #[serde(default)]
        content: Map<String, Value>,
    },
    /// Not answered, but the work goes on without it.
    Decline,
    /// The whole operation should stop.
    Cancel,
}

impl Action {
    pub fn as_str(&self) -> &'static str {
        match self {
            Action::Accept { .. } => "accept",
            Action::Decline => "decline",
            Action::Cancel => "cancel",
        }
    }
}

/// How a question ended, for the server (`action`) and for the model and
/// user (`note`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The user answered.
    User(Action),
    /// Declined without asking anyone, for this reason (a front end that
    /// cannot ask, a question buddy cannot show).
    Refused(String),
    /// Nobody answered within the bound: cancelled.
    TimedOut,
    /// The run ended (interrupted) before an answer: cancelled.
    Ended,
}

impl Outcome {
    /// What the server is told.
    pub fn action(&self) -> Action {
        match self {
            Outcome::User(a) => a.clone(),
            Outcome::Refused(_) => Action::Decline,
            Outcome::TimedOut | Outcome::Ended => Action::Cancel,
        }
    }

    /// One line for the model, saying what was asked and what came of it,
    /// never the values given.
    pub fn note(&self, server: &str, message: &str) -> String {
        let asked = format!(
            "the MCP server `{}` asked the user: \"{}\"",
            crate::text::one_line(server, 60),
            crate::text::one_line(message, 200)
        );
        match self {
            Outcome::User(Action::Accept { .. }) => format!("{asked}; they answered"),
            Outcome::User(Action::Decline) => format!("{asked}; they declined to answer"),
            Outcome::User(Action::Cancel) => format!("{asked}; they cancelled"),
            Outcome::Refused(reason) => format!("{asked}; declined: {reason}"),
            Outcome::TimedOut => format!("{asked}; nobody answered in time, so it was cancelled"),
            Outcome::Ended => format!("{asked}; the run ended before an answer"),
        }
    }
}

impl Question {
    /// A form question from a server's `message` and `requestedSchema`; an
    /// error says why buddy cannot ask it (the server is then declined).
    pub fn form(
        id: String,
        server: &str,
        call_id: &str,
        message: &str,
        schema: &Value,
    ) -> Result<Question, String> {
        Ok(Question {
            id,
            server: crate::text::one_line(server, 60),
            call_id: call_id.to_string(),
            message: message_text(message),
            mode: Mode::Form {
                fields: fields(schema)?,
            },
            subagent: None,
        })
    }

    /// A URL question; only `http`/`https` pages are asked about.
    pub fn url(
        id: String,
        server: &str,
        call_id: &str,
        message: &str,
        url: &str,
    ) -> Result<Question, String> {
        let url = url.trim();
        let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
        if !scheme_ok || url.chars().count() > MAX_URL_CHARS || url.chars().any(char::is_whitespace)
        {
            return Err("its URL is not an http(s) address buddy would show".into());
        }
        Ok(Question {
            id,
            server: crate::text::one_line(server, 60),
            call_id: call_id.to_string(),
            message: message_text(message),
            mode: Mode::Url {
                url: crate::text::visible(url).into_owned(),
            },
            subagent: None,
        })
    }

    /// The form's fields (none for URL mode).
    pub fn fields(&self) -> &[Field] {
        match &self.mode {
            Mode::Form { fields } => fields,
            Mode::Url { .. } => &[],
        }
    }

    /// Checks an answer's content from a client: only the form's fields,
    /// each of its type and within its limits, every required one there.
    pub fn check(&self, content: &Map<String, Value>) -> Result<(), String> {
        let fields = self.fields();
        if let Some(unknown) = content
            .keys()
            .find(|k| !fields.iter().any(|f| &f.name == *k))
        {
            return Err(format!(
                "the form has no field `{}`",
                crate::text::one_line(unknown, MAX_LABEL_CHARS)
            ));
        }
        for f in fields {
            match content.get(&f.name) {
                Some(v) => f.check(v).map_err(|e| format!("{}: {e}", f.label()))?,
                None if f.required => return Err(format!("{} is required", f.label())),
                None => {}
            }
        }
        Ok(())
    }

    /// The values the form's defaults give, for an answer that takes them.
    pub fn defaults(&self) -> Map<String, Value> {
        self.fields()
            .iter()
            .filter_map(|f| Some((f.name.clone(), f.default.clone()?)))
            .collect()
    }

    /// The form as a restricted JSON schema again (for a client that draws
    /// its own form: an editor over ACP).
    pub fn schema(&self) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for f in self.fields() {
            properties.insert(f.name.clone(), f.schema());
            if f.required {
                required.push(Value::String(f.name.clone()));
            }
        }
        serde_json::json!({"type": "object", "properties": properties, "required": required})
    }
}

impl Field {
    /// What the user sees it called.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// The value of what the user typed: the default (or nothing) for an
    /// empty line, else the text read as the field's type. An error says
    /// what is wrong, for asking again.
    pub fn read(&self, typed: &str) -> Result<Option<Value>, String> {
        let typed = typed.trim();
        if typed.is_empty() {
            return match (&self.default, self.required) {
                (Some(d), _) => Ok(Some(d.clone())),
                (None, true) => Err("an answer is required".into()),
                (None, false) => Ok(None),
            };
        }
        let value = match &self.kind {
            Kind::Text { .. } => Value::String(typed.to_string()),
            Kind::Number { .. } => {
                let n: f64 = typed.parse().map_err(|_| "not a number".to_string())?;
                serde_json::Number::from_f64(n)
                    .map(Value::Number)
                    .ok_or("not a finite number")?
            }
            Kind::Integer { .. } => Value::from(
                typed
                    .parse::<i64>()
                    .map_err(|_| "not a whole number".to_string())?,
            ),
            Kind::Boolean => match typed.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => Value::Bool(true),
                "n" | "no" | "false" | "0" => Value::Bool(false),
                _ => return Err("answer yes or no".into()),
            },
            Kind::Choice { choices } => Value::String(pick(choices, typed)?),
            Kind::Choices { choices, .. } => Value::Array(
                typed
                    .split(',')
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(|w| pick(choices, w).map(Value::String))
                    .collect::<Result<_, _>>()?,
            ),
        };
        self.check(&value)?;
        Ok(Some(value))
    }

    /// Whether `v` is a value of this field, within its limits.
    pub fn check(&self, v: &Value) -> Result<(), String> {
        match (&self.kind, v) {
            (
                Kind::Text {
                    min_length,
                    max_length,
                    format,
                },
                Value::String(s),
            ) => {
                let n = s.chars().count() as u64;
                if n > MAX_ANSWER_CHARS as u64 {
                    return Err(format!("at most {MAX_ANSWER_CHARS} characters"));
                }
                if min_length.is_some_and(|m| n < m) || max_length.is_some_and(|m| n > m) {
                    return Err(length_rule(*min_length, *max_length));
                }
                check_format(format.as_deref(), s)
            }
            (Kind::Number { minimum, maximum }, Value::Number(n)) => {
                let x = n.as_f64().ok_or("not a number")?;
                within(x, *minimum, *maximum)
            }
            (Kind::Integer { minimum, maximum }, Value::Number(n)) => {
                let x = n.as_i64().ok_or("not a whole number")?;
                within(x, *minimum, *maximum)
            }
            (Kind::Boolean, Value::Bool(_)) => Ok(()),
            (Kind::Choice { choices }, Value::String(s)) => {
                match choices.iter().any(|c| &c.value == s) {
                    true => Ok(()),
                    false => Err(format!("not one of {}", listed(choices))),
                }
            }
            (
                Kind::Choices {
                    choices,
                    min_items,
                    max_items,
                },
                Value::Array(items),
            ) => {
                for item in items {
                    let ok = item
                        .as_str()
                        .is_some_and(|s| choices.iter().any(|c| c.value == s));
                    if !ok {
                        return Err(format!("each must be one of {}", listed(choices)));
                    }
                }
                let n = items.len() as u64;
                if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                    return Err(match (min_items, max_items) {
                        (Some(a), Some(b)) => format!("pick {a} to {b}"),
                        (Some(a), None) => format!("pick at least {a}"),
                        (None, Some(b)) => format!("pick at most {b}"),
                        (None, None) => String::new(),
                    });
                }
                Ok(())
            }
            _ => Err(format!("expected {}", self.type_name())),
        }
    }

    /// The type as a person reads it (`number`, `yes/no`, `one of …`).
    pub fn type_name(&self) -> String {
        match &self.kind {
            Kind::Text {
                format: Some(f), ..
            } => f.clone(),
            Kind::Text { .. } => "text".into(),
            Kind::Number { .. } => "number".into(),
            Kind::Integer { .. } => "whole number".into(),
            Kind::Boolean => "yes/no".into(),
            Kind::Choice { choices } => format!("one of {}", listed(choices)),
            Kind::Choices { choices, .. } => format!("some of {}, by commas", listed(choices)),
        }
    }

    fn schema(&self) -> Value {
        let mut s = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                s.insert(k.to_string(), v);
            }
        };
        match &self.kind {
            Kind::Text {
                min_length,
                max_length,
                format,
            } => {
                put("type", Some("string".into()));
                put("minLength", min_length.map(Value::from));
                put("maxLength", max_length.map(Value::from));
                put("format", format.clone().map(Value::from));
            }
            Kind::Number { minimum, maximum } => {
                put("type", Some("number".into()));
                put("minimum", minimum.map(Value::from));
                put("maximum", maximum.map(Value::from));
            }
            Kind::Integer { minimum, maximum } => {
                put("type", Some("integer".into()));
                put("minimum", minimum.map(Value::from));
                put("maximum", maximum.map(Value::from));
            }
            Kind::Boolean => put("type", Some("boolean".into())),
            Kind::Choice { choices } => {
                put("type", Some("string".into()));
                put("oneOf", Some(one_of(choices)));
            }
            Kind::Choices {
                choices,
                min_items,
                max_items,
            } => {
                put("type", Some("array".into()));
                put(
                    "items",
                    Some(serde_json::json!({ "anyOf": one_of(choices) })),
                );
                put("minItems", min_items.map(Value::from));
                put("maxItems", max_items.map(Value::from));
            }
        }
        put("title", self.title.clone().map(Value::from));
        put("description", self.description.clone().map(Value::from));
        put("default", self.default.clone());
        Value::Object(s)
    }
}

fn one_of(choices: &[Choice]) -> Value {
    Value::Array(
        choices
            .iter()
            .map(|c| {
                serde_json::json!({"const": c.value, "title": c.title.as_deref().unwrap_or(&c.value)})
            })
            .collect(),
    )
}

/// The message as shown: control characters visible, newlines kept, cut.
fn message_text(message: &str) -> String {
    let shown = crate::text::visible(message.trim());
    match shown.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((i, _)) => format!("{}…", &shown[..i]),
        None => shown.into_owned(),
    }
}

fn label(s: &str) -> String {
    crate::text::one_line(s, MAX_LABEL_CHARS)
}

/// The fields of a restricted schema: an object of primitive properties
/// (string, number, integer, boolean, a single- or multi-select enum).
fn fields(schema: &Value) -> Result<Vec<Field>, String> {
    let props = match schema.get("properties") {
        None => return Ok(Vec::new()),
        Some(Value::Object(p)) => p,
        Some(_) => return Err("its form's properties are not an object".into()),
    };
    if props.len() > MAX_FIELDS {
        return Err(format!(
            "its form has {} fields, more than the {MAX_FIELDS} buddy asks",
            props.len()
        ));
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, p) in props {
        let shown = label(name);
        let kind = kind(p).map_err(|e| format!("its field `{shown}` {e}"))?;
        let text = |k: &str, max: usize| {
            p.get(k)
                .and_then(Value::as_str)
                .map(|t| crate::text::one_line(t, max))
                .filter(|t| !t.is_empty())
        };
        let mut field = Field {
            name: name.clone(),
            title: text("title", MAX_LABEL_CHARS),
            description: text("description", MAX_DESCRIPTION_CHARS),
            required: required.contains(&name.as_str()),
            kind,
            default: None,
        };
        // A default that is not a value of the field is the server's
        // mistake; the field is asked without one.
        field.default = p.get("default").filter(|d| field.check(d).is_ok()).cloned();
        out.push(field);
    }
    Ok(out)
}

fn kind(p: &Value) -> Result<Kind, String> {
    let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
    let num = |k: &str| p.get(k).and_then(Value::as_f64);
    let int = |k: &str| p.get(k).and_then(Value::as_i64);
    let count = |k: &str| p.get(k).and_then(Value::as_u64);
    Ok(match ty {
        "string" => match choices_of(p)? {
            Some(choices) => Kind::Choice { choices },
            None => Kind::Text {
                min_length: count("minLength"),
                max_length: count("maxLength"),
                format: p
                    .get("format")
                    .and_then(Value::as_str)
                    .filter(|f| ["email", "uri", "date", "date-time"].contains(f))
                    .map(str::to_string),
            },
        },
        "number" => Kind::Number {
            minimum: num("minimum"),
            maximum: num("maximum"),
        },
        "integer" => Kind::Integer {
            minimum: int("minimum"),
            maximum: int("maximum"),
        },
        "boolean" => Kind::Boolean,
        "array" => {
            let items = p.get("items").ok_or("is a list without items")?;
            let choices = choices_of(items)?.ok_or("is a list of something other than choices")?;
            Kind::Choices {
                choices,
                min_items: count("minItems"),
                max_items: count("maxItems"),
            }
        }
        other => {
            return Err(format!(
                "has a type buddy cannot ask for (`{}`)",
                label(other)
            ))
        }
    })
}

/// A property's choices: `enum` (titled by `enumNames`, the older way),
/// `oneOf`/`anyOf` of `{const, title}`; none when it has neither.
fn choices_of(p: &Value) -> Result<Option<Vec<Choice>>, String> {
    let list: Vec<Choice> = if let Some(values) = p.get("enum").and_then(Value::as_array) {
        let names = p.get("enumNames").and_then(Value::as_array);
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let value = v.as_str().ok_or("has a choice that is not text")?;
                let title = names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .map(label);
                Ok(Choice {
                    value: value.to_string(),
                    title,
                })
            })
            .collect::<Result<_, String>>()?
    } else if let Some(options) = p
        .get("oneOf")
        .or_else(|| p.get("anyOf"))
        .and_then(Value::as_array)
    {
        options
            .iter()
            .map(|o| {
                let value = o
                    .get("const")
                    .and_then(Value::as_str)
                    .ok_or("has a choice that is not text")?;
                Ok(Choice {
                    value: value.to_string(),
                    title: o.get("title").and_then(Value::as_str).map(label),
                })
            })
            .collect::<Result<_, String>>()?
    } else {
        return Ok(None);
    };
    if list.is_empty() || list.len() > MAX_CHOICES {
        return Err(format!(
            "has {} choices (buddy asks 1 to {MAX_CHOICES})",
            list.len()
        ));
    }
    if list
        .iter()
        .any(|c| c.value.chars().count() > MAX_LABEL_CHARS)
    {
        return Err(format!(
            "has a choice longer than {MAX_LABEL_CHARS} characters"
        ));
    }
    Ok(Some(list))
}

/// The choice a person meant: its number (1-based), its value or its
/// title, letter case aside.
fn pick(choices: &[Choice], typed: &str) -> Result<String, String> {
    if let Ok(n) = typed.parse::<usize>() {
        if let Some(c) = n.checked_sub(1).and_then(|i| choices.get(i)) {
            return Ok(c.value.clone());
        }
    }
    choices
        .iter()
        .find(|c| {
            c.value.eq_ignore_ascii_case(typed)
                || c.title
                    .as_deref()
                    .is_some_and(|t| t.eq_ignore_ascii_case(typed))
        })
        .map(|c| c.value.clone())
        .ok_or_else(|| format!("not one of {}", listed(choices)))
}

fn listed(choices: &[Choice]) -> String {
    let names: Vec<String> = choices
        .iter()
        .take(8)
        .map(|c| crate::text::one_line(c.title.as_deref().unwrap_or(&c.value), 40))
        .collect();
    let more = choices.len().saturating_sub(8);
    match more {
        0 => names.join(", "),
        n => format!("{}, and {n} more", names.join(", ")),
    }
}

fn length_rule(min: Option<u64>, max: Option<u64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("{a} to {b} characters"),
        (Some(a), None) => format!("at least {a} characters"),
        (None, Some(b)) => format!("at most {b} characters"),
        (None, None) => String::new(),
    }
}

fn within<T: PartialOrd + std::fmt::Display + Copy>(
    x: T,
    min: Option<T>,
    max: Option<T>,
) -> Result<(), String> {
    match (min, max) {
        (Some(a), _) if x < a => Err(format!("at least {a}")),
        (_, Some(b)) if x > b => Err(format!("at most {b}")),
        _ => Ok(()),
    }
}

/// A light check of the formats the restricted schema names: enough to
/// catch a slip of the keyboard, not a full parser.
fn check_format(format: Option<&str>, s: &str) -> Result<(), String> {
    let ok = match format {
        Some("email") => s
            .split_once('@')
            .is_some_and(|(a, b)| !a.is_empty() && b.contains('.') && !s.contains(' ')),
        Some("uri") => s.contains(':') && !s.contains(' '),
        Some("date") => is_date(s),
        Some("date-time") => s.len() > 10 && is_date(&s[..10]) && s.as_bytes()[10] == b'T',
        _ => true,
    };
    match ok {
        true => Ok(()),
        false => Err(format!("not {}", format.unwrap_or("valid"))),
    }
}

/// `YYYY-MM-DD`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> Question {
        Question::form("q1".into(), "srv", "c1", "Which?", &schema).expect("a form")
    }

    #[test]
    fn a_restricted_schema_becomes_typed_fields_in_order_with_checked_defaults() {
        let q = form(json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Your name", "default": "Ann"},
            "age": {"type": "integer", "minimum": 0, "default": "old"},
            "tier": {"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}]}, "maxItems": 1},
            "ok": {"type": "boolean"}
        }, "required": ["age"]}));
        let f = q.fields();
        assert_eq!(f.len(), 5);
        assert_eq!(f[0].label(), "Your name");
        assert_eq!(f[0].default, Some(json!("Ann")));
        // A default of the wrong type is dropped, not offered.
        assert_eq!(f[1].default, None);
        assert!(f[1].required && !f[0].required);
        assert_eq!(f[2].read("beta").unwrap(), Some(json!("b")));
        assert_eq!(f[2].read("1").unwrap(), Some(json!("a")));
        assert!(f[2].read("c").is_err());
        assert_eq!(f[3].read("Ex").unwrap(), Some(json!(["x"])));
        assert!(f[3].read("x, x").is_err(), "more than maxItems");
        assert_eq!(f[4].read("yes").unwrap(), Some(json!(true)));
        assert_eq!(
            q.defaults(),
            json!({"name": "Ann"}).as_object().cloned().unwrap()
        );
    }

    #[test]
    fn typed_answers_are_checked_and_empty_ones_take_the_default_or_are_required() {
        let q = form(json!({"properties": {
            "n": {"type": "number", "minimum": 1, "maximum": 2},
            "i": {"type": "integer"},
            "e": {"type": "string", "format": "email", "maxLength": 20},
            "d": {"type": "string", "default": "dflt"}
        }, "required": ["n"]}));
        let f = q.fields();
        assert!(f[0].read("").is_err());
        assert!(f[0].read("3").is_err());
        assert!(f[0].read("abc").is_err());
        assert_eq!(f[0].read(" 1.5 ").unwrap(), Some(json!(1.5)));
        assert!(f[1].read("1.5").is_err());
        assert_eq!(f[1].read("").unwrap(), None);
        assert!(f[2].read("nope").is_err());
        assert_eq!(f[2].read("a@b.io").unwrap(), Some(json!("a@b.io")));
        assert_eq!(f[3].read("").unwrap(), Some(json!("dflt")));
    }

    #[test]
    fn a_clients_answer_must_fit_the_form() {
        let q = form(json!({"properties": {"n": {"type": "integer"}}, "required": ["n"]}));
        let ok = json!({"n": 3}).as_object().cloned().unwrap();
        assert!(q.check(&ok).is_ok());
        for bad in [json!({}), json!({"n": "3"}), json!({"n": 3, "x": 1})] {
            assert!(q.check(bad.as_object().unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostile_questions_are_bounded_made_visible_or_refused() {
        let q = Question::form(
            "q".into(),
            "s\u{1b}[2J",
            "c",
            &format!("\u{1b}[31mred{}", "x".repeat(10_000)),
            &json!({"properties": {"a": {"type": "string", "title": "t\u{7}"}}}),
        )
        .unwrap();
        assert!(!q.message.contains('\u{1b}') && !q.server.contains('\u{1b}'));
        assert!(q.message.chars().count() <= MAX_MESSAGE_CHARS + 1);
        assert!(!q.fields()[0].label().contains('\u{7}'));
        let many: Map<String, Value> = (0..=MAX_FIELDS)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        assert!(Question::form("q".into(), "s", "c", "m", &json!({"properties": many})).is_err());
        let nested = json!({"properties": {"o": {"type": "object"}}});
        assert!(Question::form("q".into(), "s", "c", "m", &nested).is_err());
        assert!(Question::url("q".into(), "s", "c", "m", "javascript:alert(1)").is_err());
    }

    #[test]
    fn the_schema_given_again_reads_back_as_the_same_fields() {
        let q = form(json!({"properties": {
            "tier": {"type": "string", "oneOf": [{"const": "a", "title": "Alpha"}]},
            "n": {"type": "number", "minimum": 0.5, "description": "how many"}
        }, "required": ["tier"]}));
        let again = form(q.schema());
        assert_eq!(again.fields(), q.fields());
    }
}
