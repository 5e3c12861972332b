//! The Prometheus Python client's own parser of the text format
//! (`prometheus_client.parser.text_string_to_metric_families`, PyPI
//! `prometheus-client`), installed into a venv by `scripts/prometheus-parser`
//! (which `.ci/run` calls). A missing venv fails the test with a line naming
//! the script; nothing is fetched while tests run.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where the script installed it.
pub fn dir() -> PathBuf {
    match std::env::var_os("BUDDY_PROMETHEUS_PARSER") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache")
            .join("buddy-prometheus"),
    }
}

/// One sample as the parser read it.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The family's name as the parser gives it (a counter's without `_total`).
    pub family: String,
    /// The family's type: counter, gauge, histogram, …
    pub kind: String,
    pub name: String,
    pub labels: serde_json::Map<String, serde_json::Value>,
    pub value: f64,
}

const SCRIPT: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append({"family": fam.name, "kind": fam.type, "name": s.name,
                    "labels": s.labels, "value": s.value})
print(json.dumps(out))
"#;

/// Every sample of `text`; panics with the parser's message when it refuses
/// the text.
pub fn parse(text: &str) -> Vec<Sample> {
    let python = dir().join("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/prometheus-parser (CI's .ci/run does)",
        python.display()
    );
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the parser");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .expect("write to the parser");
    let out = child.wait_with_output().expect("the parser ran");
    assert!(
        out.status.success(),
        "the Prometheus parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).expect("the parser's JSON");
    all.into_iter()
        .map(|v| Sample {
            family: v["family"].as_str().unwrap().to_string(),
            kind: v["kind"].as_str().unwrap().to_string(),
            name: v["name"].as_str().unwrap().to_string(),
            labels: v["labels"].as_object().unwrap().clone(),
            value: v["value"].as_f64().unwrap(),
        })
        .collect()
}

/// The value of sample `name` with exactly these labels (0 when absent).
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .find(|s| {
            s.labels.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).and_then(|x| x.as_str()) == Some(v))
        })
        .map_or(0.0, |s| s.value)
}
