//! What `GET /metrics` reports, in the Prometheus text exposition format
//! (version 0.0.4): requests by route and status, runs started and finished
//! by outcome, run and first-token latency, model tokens and cost by model,
//! tool calls by tool and outcome, open connections, live agents, running
//! sessions and store errors.
//!
//! Written by hand: a few counters, gauges and two histograms do not need a
//! metrics library, and the format is small (a `# TYPE` line per family,
//! then `name{label="value"} number` lines). The tests check it with the
//! Prometheus Python client's own parser.
//!
//! Not here: what is counted when (`http.rs` counts requests, `team.rs`
//! watches the runs' events), the gauges' sources (`http::State`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Series one family may hold: its labels come from routes, models and
/// tools, which are few, but a tool name is the model's to choose; past
/// this the rest are counted under `other` so memory stays bounded.
const MAX_SERIES: usize = 500;
/// Longest label value kept.
const LABEL_CHARS: usize = 64;

/// Seconds a run took: from a quick answer to a long tool loop.
const RUN_BUCKETS: [f64; 12] = [
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];
/// Seconds from a run's start to its first text: a local model's first
/// token to a slow provider's.
const FIRST_TOKEN_BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<&'static str, Family>>,
    run_seconds: Mutex<Histogram>,
    first_token_seconds: Mutex<Histogram>,
    /// Connections open now (`accept.rs` counts them).
    pub open_connections: Arc<AtomicUsize>,
}

#[derive(Default)]
struct Family {
    series: BTreeMap<Vec<(&'static str, String)>, f64>,
}

#[derive(Default)]
struct Histogram {
    /// Per bucket, observations at or below its bound (not cumulative).
    counts: Vec<u64>,
    over: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.counts.len() != bounds.len() {
            self.counts = vec![0; bounds.len()];
        }
        match bounds.iter().position(|b| v <= *b) {
            Some(i) => self.counts[i] += 1,
            None => self.over += 1,
        }
        self.sum += v;
    }
}

/// The counter families, with their help lines.
pub const REQUESTS: &str = "buddy_serve_requests_total";
pub const RUNS_STARTED: &str = "buddy_serve_runs_started_total";
pub const RUNS_FINISHED: &str = "buddy_serve_runs_finished_total";
pub const MODEL_TOKENS: &str = "buddy_serve_model_tokens_total";
pub const COST: &str = "buddy_serve_cost_usd_total";
pub const TOOL_CALLS: &str = "buddy_serve_tool_calls_total";
pub const STORE_ERRORS: &str = "buddy_serve_store_errors_total";
pub const LIMITED: &str = "buddy_serve_user_limited_total";

const HELP: [(&str, &str); 8] = [
    (REQUESTS, "HTTP requests answered, by route and status."),
    (RUNS_STARTED, "Runs started."),
    (RUNS_FINISHED, "Runs finished, by outcome."),
    (MODEL_TOKENS, "Model tokens, by model and kind."),
    (
        COST,
        "Model cost in US dollars, by model (priced models only).",
    ),
    (TOOL_CALLS, "Tool calls finished, by tool and outcome."),
    (
        STORE_ERRORS,
        "Session store failures: answered to a request (no label), or of events stored in the background (kind event).",
    ),
    (LIMITED, "Requests refused by a per-user limit, by limit."),
];

/// The values the server reads at scrape time.
pub struct Gauges {
    pub live_agents: usize,
    pub running: usize,
}

impl Metrics {
    /// Adds `by` to the counter `family` with these labels.
    pub fn add(&self, family: &'static str, labels: &[(&'static str, &str)], by: f64) {
        let mut all = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let fam = all.entry(family).or_default();
        let mut key: Vec<(&'static str, String)> = labels
            .iter()
            .map(|(k, v)| (*k, crate::text::head(v, LABEL_CHARS).0.to_string()))
            .collect();
        if !fam.series.contains_key(&key) && fam.series.len() >= MAX_SERIES {
            key = labels
                .iter()
                .map(|(k, _)| (*k, "other".to_string()))
                .collect();
        }
        *fam.series.entry(key).or_insert(0.0) += by;
    }

    /// Sets the counter `family` with these labels to `to`: for a count
    /// kept elsewhere (the session store's) and read at scrape time.
    pub fn set(&self, family: &'static str, labels: &[(&'static str, &str)], to: f64) {
        let mut all = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let key = labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
        all.entry(family).or_default().series.insert(key, to);
    }

    pub fn inc(&self, family: &'static str, labels: &[(&'static str, &str)]) {
        self.add(family, labels, 1.0);
    }

    pub fn run_took(&self, d: Duration) {
        let mut h = self.run_seconds.lock().unwrap_or_else(|p| p.into_inner());
        h.observe(&RUN_BUCKETS, d.as_secs_f64());
    }

    pub fn first_token_took(&self, d: Duration) {
        let mut h = self
            .first_token_seconds
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        h.observe(&FIRST_TOKEN_BUCKETS, d.as_secs_f64());
    }

    /// The exposition text.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        {
            let all = self.counters.lock().unwrap_or_else(|p| p.into_inner());
            for (name, help) in HELP {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                if let Some(fam) = all.get(name) {
                    for (labels, v) in &fam.series {
                        let _ = writeln!(out, "{name}{} {}", label_set(labels), number(*v));
                    }
                }
            }
        }
        for (name, help, value) in [
            (
                "buddy_serve_open_connections",
                "Connections open now.",
                self.open_connections.load(Ordering::Relaxed),
            ),
            (
                "buddy_serve_live_agents",
                "Sessions with a live agent, running or kept.",
                gauges.live_agents,
            ),
            (
                "buddy_serve_running_sessions",
                "Sessions running a prompt now.",
                gauges.running,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        for (name, help, h, bounds) in [
            (
                "buddy_serve_run_seconds",
                "How long runs took, from prompt to end.",
                &self.run_seconds,
                &RUN_BUCKETS[..],
            ),
            (
                "buddy_serve_first_token_seconds",
                "From a run's start to its first text from the model.",
                &self.first_token_seconds,
                &FIRST_TOKEN_BUCKETS[..],
            ),
        ] {
            let h = h.lock().unwrap_or_else(|p| p.into_inner());
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            let mut total = 0;
            for (i, bound) in bounds.iter().enumerate() {
                total += h.counts.get(i).copied().unwrap_or(0);
                let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {total}", number(*bound));
            }
            total += h.over;
            let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
            let _ = writeln!(out, "{name}_sum {}\n{name}_count {total}", number(h.sum));
        }
        out
    }
}

/// `{a="x",b="y"}`, or nothing without labels.
fn label_set(labels: &[(&'static str, String)]) -> String {
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// A label value as the format escapes it: backslash, quote, newline.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: whole numbers without a fraction, others as Rust prints
/// them (which the format's float grammar accepts).
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_histograms_and_gauges_are_written_in_the_text_format() {
        let m = Metrics::default();
        m.inc(REQUESTS, &[("route", "/api/sessions"), ("status", "200")]);
        m.inc(REQUESTS, &[("route", "/api/sessions"), ("status", "200")]);
        m.inc(TOOL_CALLS, &[("tool", "we\"ird\\\n"), ("outcome", "ok")]);
        m.run_took(Duration::from_millis(700));
        m.run_took(Duration::from_secs(4000));
        let text = m.render(&Gauges {
            live_agents: 3,
            running: 1,
        });
        assert!(
            text.contains("buddy_serve_requests_total{route=\"/api/sessions\",status=\"200\"} 2\n")
        );
        assert!(text.contains("tool=\"we\\\"ird\\\\\\n\""), "{text}");
        assert!(text.contains("buddy_serve_run_seconds_bucket{le=\"0.5\"} 0\n"));
        assert!(text.contains("buddy_serve_run_seconds_bucket{le=\"1\"} 1\n"));
        assert!(text.contains("buddy_serve_run_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("buddy_serve_run_seconds_count 2\n"));
        assert!(text.contains("buddy_serve_live_agents 3\n"));
    }

    #[test]
    fn a_family_stops_growing_at_its_series_cap() {
        let m = Metrics::default();
        for i in 0..MAX_SERIES + 10 {
            m.inc(TOOL_CALLS, &[("tool", &format!("t{i}"))]);
        }
        let text = m.render(&Gauges {
            live_agents: 0,
            running: 0,
        });
        assert!(text.contains("buddy_serve_tool_calls_total{tool=\"other\"} 10\n"));
    }
}
