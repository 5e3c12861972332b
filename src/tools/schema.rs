//! The JSON Schema a built-in tool's arguments are offered to the model
//! with, derived (schemars) from the struct `parse_args` reads them into, so
//! the two cannot drift apart. It owns the shape providers take: one
//! self-contained object (no `$schema`, no `$defs`), and an optional field
//! said by leaving it out of `required`, not by a `null` type. It does not
//! hold MCP tools' schemas (their servers give those) nor check arguments
//! (serde does, in `parse_args`).

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// The schema of `T` as sent in a tool definition's `parameters`.
pub fn of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut schema: Value = generator.into_root_schema_for::<T>().into();
    tidy(&mut schema);
    schema
}

/// Takes out what carries nothing for a model or trips a provider: the Rust
/// type's name (`title`), integer widths (`format`: `uint64` is no JSON
/// Schema format), and the `null` schemars allows for an `Option` (as a type
/// and as the default of one that is `#[serde(default)]`).
fn tidy(schema: &mut Value) {
    let Value::Object(obj) = schema else {
        return;
    };
    obj.remove("title");
    obj.remove("format");
    if obj.get("default") == Some(&Value::Null) {
        obj.remove("default");
    }
    drop_null(obj);
    // Properties are a map of names to schemas: the names are not keywords.
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        props.values_mut().for_each(tidy);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = obj.get_mut(key) {
            tidy(sub);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = obj.get_mut(key) {
            subs.iter_mut().for_each(tidy);
        }
    }
}

fn drop_null(obj: &mut Map<String, Value>) {
    let null = Value::from("null");
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| *t != null);
        if let [only] = types.as_slice() {
            let only = only.clone();
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    // `anyOf: [X, {type: null}]`, the form for an optional schema that has
    // subschemas of its own: X itself, under the field's own keywords.
    let is_null = |s: &Value| s.get("type") == Some(&null);
    let Some(Value::Array(any)) = obj.get("anyOf") else {
        return;
    };
    if any.len() == 2 && any.iter().any(is_null) {
        let rest = any.iter().find(|s| !is_null(s)).cloned();
        obj.remove("anyOf");
        if let Some(Value::Object(rest)) = rest {
            for (k, v) in rest {
                obj.entry(k).or_insert(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{
        edit, fetch, files, glob, grep, pane, patch, search, shell, skill, time, Tool,
    };
    use crate::wire::chat::ToolDefinition;
    use serde::de::DeserializeOwned;
    use serde_json::json;
    use std::collections::BTreeSet;
    use std::time::Duration;

    /// The field names `T` takes, read from serde's refusal of one it does
    /// not (``unknown field `x`, expected one of `a`, `b` ``).
    fn accepted<T: DeserializeOwned>() -> BTreeSet<String> {
        let refusal = match serde_json::from_value::<T>(json!({"no such field": 0})) {
            Ok(_) => panic!("an unknown field was taken: no deny_unknown_fields"),
            Err(e) => e.to_string(),
        };
        let (_, expected) = refusal.split_once("expected").unwrap_or_default();
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    fn offered(def: &ToolDefinition) -> BTreeSet<String> {
        def.function.parameters["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn derived_from<T: JsonSchema + DeserializeOwned>(tool: &dyn Tool) {
        derived_with_aliases::<T>(tool, &[]);
    }

    /// As `derived_from`, where `aliases` are other names taken for a field
    /// but deliberately not offered.
    fn derived_with_aliases<T: JsonSchema + DeserializeOwned>(tool: &dyn Tool, aliases: &[&str]) {
        let def = tool.definition();
        assert_eq!(def.function.parameters, of::<T>(), "{}", tool.name());
        let mut fields = accepted::<T>();
        for alias in aliases {
            assert!(fields.remove(*alias), "{alias} is no longer taken");
        }
        assert_eq!(offered(&def), fields, "{}", tool.name());
    }

    fn shell_tool(tmux: bool) -> shell::ShellTool {
        shell::ShellTool::new(shell::ShellOptions {
            default_timeout: Duration::from_secs(1),
            max_output_chars: 1000,
            tmux,
            sandbox: None,
        })
    }

    fn built_in() -> Vec<Box<dyn Tool>> {
        vec![
            Box::new(files::ReadFileTool::new(1000)),
            Box::new(files::WriteFileTool::new(1000)),
            Box::new(edit::EditFileTool::new(1000)),
            Box::new(patch::ApplyPatchTool::new(1000)),
            Box::new(grep::GrepTool::new(1000)),
            Box::new(glob::GlobTool::new(1000)),
            Box::new(search::SearchTool::new(search::SearchOptions::default())),
            Box::new(fetch::FetchTool::new(fetch::FetchOptions {
                timeout: Duration::from_secs(1),
                max_bytes: 1000,
                max_output_chars: 1000,
            })),
            Box::new(skill::SkillTool::new(Vec::new(), 1000)),
            Box::new(pane::CapturePaneTool::new(1000)),
            Box::new(pane::SendKeysTool),
            Box::new(shell_tool(true)),
            Box::new(shell_tool(false)),
            Box::new(time::TimeTool),
        ]
    }

    #[test]
    fn every_built_in_tool_offers_the_schema_of_the_struct_it_reads() {
        let tools = built_in();
        let mut tools = tools.iter().map(|t| t.as_ref());
        let mut next = || tools.next().unwrap();
        derived_from::<files::ReadArgs>(next());
        derived_from::<files::WriteArgs>(next());
        derived_from::<edit::Args>(next());
        derived_with_aliases::<patch::Args>(next(), &["patch"]);
        derived_from::<grep::GrepArgs>(next());
        derived_from::<glob::GlobArgs>(next());
        derived_from::<search::Args>(next());
        derived_from::<fetch::Args>(next());
        derived_from::<skill::Args>(next());
        derived_from::<pane::CaptureArgs>(next());
        derived_from::<pane::SendArgs>(next());
        derived_from::<shell::Args>(next());
        // Without the pane, `wait` is the one field not offered.
        let local = next().definition();
        let mut without_wait = of::<shell::Args>();
        without_wait["properties"]
            .as_object_mut()
            .unwrap()
            .remove("wait");
        assert_eq!(local.function.parameters, without_wait);
        let mut fields = accepted::<shell::Args>();
        fields.remove("wait");
        assert_eq!(offered(&local), fields);
        // `time` takes nothing: an empty object, nothing more allowed.
        let time = next().definition();
        assert_eq!(time.function.parameters, of::<time::Args>());
        assert!(offered(&time).is_empty());
        assert_eq!(time.function.parameters["additionalProperties"], false);
    }

    #[test]
    fn descriptions_and_bounds_reach_the_model() {
        let read = files::ReadFileTool::new(1000)
            .definition()
            .function
            .parameters;
        assert_eq!(read["type"], "object");
        assert_eq!(read["required"], json!(["path"]));
        assert_eq!(
            read["properties"]["path"]["description"],
            "Path of the file to read."
        );
        assert_eq!(read["properties"]["offset"]["type"], "integer");
        assert_eq!(read["properties"]["offset"]["minimum"], 1);
        let grep = grep::GrepTool::new(1000).definition().function.parameters;
        assert_eq!(grep["properties"]["limit"]["maximum"], grep::MAX_LIMIT);
        assert!(grep["properties"]["output"]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("content: matching lines")));
        let timeout = &shell_tool(false).definition().function.parameters["properties"]["timeout"];
        assert_eq!(timeout["type"], json!(["number", "string"]));
    }

    #[test]
    fn schemas_are_self_contained_with_no_null_type_or_rust_names() {
        fn walk(v: &Value, at: &str) {
            match v {
                Value::Object(obj) => {
                    for bad in ["$schema", "$defs", "definitions", "$ref", "title", "format"] {
                        // A property may be named so; a keyword may not appear.
                        if !at.ends_with("/properties") {
                            assert!(!obj.contains_key(bad), "{bad} at {at}");
                        }
                    }
                    assert_ne!(obj.get("type"), Some(&json!("null")), "at {at}");
                    if !at.ends_with("/properties") {
                        assert_ne!(obj.get("default"), Some(&Value::Null), "at {at}");
                    }
                    if let Some(Value::Array(types)) = obj.get("type") {
                        assert!(!types.contains(&json!("null")), "at {at}");
                    }
                    for (k, sub) in obj {
                        walk(sub, &format!("{at}/{k}"));
                    }
                }
                Value::Array(items) => items.iter().for_each(|i| walk(i, at)),
                _ => {}
            }
        }
        for tool in built_in() {
            walk(&tool.definition().function.parameters, tool.name());
        }
    }
}
