//! A batch of spans as an OTLP/HTTP JSON body (`ExportTraceServiceRequest`
//! in the protobuf JSON mapping, as OTLP specifies it: ids in hex, 64-bit
//! integers and times as decimal strings, enums as numbers).

use super::{Span, Value};
use serde_json::{json, Map};

/// OTLP's `SPAN_KIND_INTERNAL`: work inside buddy, not a call it serves.
const KIND_INTERNAL: u8 = 1;
/// OTLP's `STATUS_CODE_ERROR`.
const STATUS_ERROR: u8 = 2;

pub(super) fn encode(spans: &[Span], service: &str) -> String {
    let spans: Vec<serde_json::Value> = spans.iter().map(span).collect();
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [attribute("service.name", &Value::Str(service.to_string()))]},
            "scopeSpans": [{
                "scope": {"name": "buddy", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }],
    })
    .to_string()
}

fn span(s: &Span) -> serde_json::Value {
    let mut out = Map::new();
    out.insert("traceId".into(), hex(&s.trace_id).into());
    out.insert("spanId".into(), hex(&s.span_id).into());
    if let Some(p) = &s.parent {
        out.insert("parentSpanId".into(), hex(p).into());
    }
    out.insert("name".into(), s.name.clone().into());
    out.insert("kind".into(), KIND_INTERNAL.into());
    out.insert(
        "startTimeUnixNano".into(),
        s.start_unix_nanos.to_string().into(),
    );
    out.insert(
        "endTimeUnixNano".into(),
        s.end_unix_nanos.max(s.start_unix_nanos).to_string().into(),
    );
    let attrs: Vec<_> = s.attributes.iter().map(|(k, v)| attribute(k, v)).collect();
    out.insert("attributes".into(), attrs.into());
    if s.error {
        out.insert("status".into(), json!({"code": STATUS_ERROR}));
    }
    out.into()
}

fn attribute(key: &str, value: &Value) -> serde_json::Value {
    let value = match value {
        Value::Str(s) => json!({"stringValue": s}),
        Value::Int(i) => json!({"intValue": i.to_string()}),
        Value::Bool(b) => json!({"boolValue": b}),
    };
    json!({"key": key, "value": value})
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_encoded_in_the_json_mapping() {
        let s = Span {
            trace_id: [0xab; 16],
            span_id: [0x01; 8],
            parent: Some([0x02; 8]),
            name: "tool read_file".into(),
            start_unix_nanos: 5,
            end_unix_nanos: 7,
            attributes: vec![
                ("buddy.tool.name", Value::Str("read_file".into())),
                ("gen_ai.usage.input_tokens", Value::Int(12)),
            ],
            error: true,
        };
        let body: serde_json::Value =
            serde_json::from_str(&encode(&[s], "buddy")).unwrap_or_default();
        let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "ab".repeat(16));
        assert_eq!(span["spanId"], "0101010101010101");
        assert_eq!(span["parentSpanId"], "0202020202020202");
        assert_eq!(span["startTimeUnixNano"], "5");
        assert_eq!(span["endTimeUnixNano"], "7");
        assert_eq!(span["attributes"][1]["value"]["intValue"], "12");
        assert_eq!(span["status"]["code"], 2);
        assert_eq!(
            body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "buddy"
        );
    }
}
