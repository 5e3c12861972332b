//! Token accounting: exact counts from the server when it reports usage, a
//! character heuristic otherwise, the context-window size of the model, and
//! what the tokens cost (a compiled-in price table, a profile's own `price`,
//! nothing for a local server).

use crate::wire::Message;

/// Used when neither config nor the catalog knows the model.
pub const FALLBACK_CONTEXT_LIMIT: u64 = 8192;
/// Share of the context window at which the user is warned.
pub const WARN_FRACTION: f64 = 0.8;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenTracker {
    pub context_limit: u64,
    pub total_prompt_tokens: u64,
    pub total_completion_tokens: u64,
    pub last_prompt_tokens: u64,
    pub last_completion_tokens: u64,
    /// Prompt tokens the provider served from, or wrote to, its prompt cache
    /// (already counted in the prompt totals).
    pub total_cache_read_tokens: u64,
    pub total_cache_write_tokens: u64,
    /// What the priced replies cost, in billionths of a US dollar (an
    /// integer, so totals add up exactly and the tracker stays `Eq`).
    pub cost_nanos: u64,
    /// Some reply's price was not known: the total is a lower bound.
    pub cost_unknown: bool,
}

impl TokenTracker {
    pub fn new(context_limit: u64) -> Self {
        TokenTracker {
            context_limit,
            ..Default::default()
        }
    }

    pub fn record(&mut self, prompt: u64, completion: u64) {
        self.last_prompt_tokens = prompt;
        self.last_completion_tokens = completion;
        self.total_prompt_tokens += prompt;
        self.total_completion_tokens += completion;
    }

    pub fn record_cache(&mut self, read: u64, write: u64) {
        self.total_cache_read_tokens += read;
        self.total_cache_write_tokens += write;
    }

    /// ", cache: N read, M written" when the provider reported any, else "".
    pub fn cache_note(&self) -> String {
        cache_note(self.total_cache_read_tokens, self.total_cache_write_tokens)
    }

    /// Adds one reply's cost (`None`: its price is unknown).
    pub fn record_cost(&mut self, usd: Option<f64>) {
        match usd {
            Some(usd) => self.cost_nanos += usd_to_nanos(usd),
            None => self.cost_unknown = true,
        }
    }

    /// The session's spend in US dollars; `None` when a reply's price was
    /// not known (a figure would understate it).
    pub fn session_cost_usd(&self) -> Option<f64> {
        (!self.cost_unknown).then(|| nanos_to_usd(self.cost_nanos))
    }

    pub fn session_total(&self) -> u64 {
        self.total_prompt_tokens + self.total_completion_tokens
    }

    /// Fraction of the context window an estimate of `tokens` would fill.
    pub fn fill(&self, tokens: u64) -> f64 {
        if self.context_limit == 0 {
            return 0.0;
        }
        tokens as f64 / self.context_limit as f64
    }
}

/// ~4 characters per token, plus 16 characters of framing per message.
pub fn estimate_messages(messages: &[Message]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| {
            let calls: usize = m
                .calls()
                .iter()
                .map(|c| c.function.name.len() + c.function.arguments.len() + c.id.len())
                .sum();
            m.text().len() + calls + 16
        })
        .sum();
    chars.div_ceil(4) as u64
}

/// ", cache: N read, M written" when either is non-zero, else "".
pub fn cache_note(read: u64, write: u64) -> String {
    if read == 0 && write == 0 {
        String::new()
    } else {
        format!(", cache: {read} read, {write} written")
    }
}

/// ", cost $0.0012 (session $0.0340)" for the token line after a reply;
/// ", cost unknown" when the model's price is not known; ", cost: free
/// (local)" for a server on this machine.
pub fn cost_note(reply: Option<f64>, session: Option<f64>, local: bool) -> String {
    match (reply, session) {
        _ if local => ", cost: free (local)".into(),
        (None, _) => ", cost unknown".into(),
        (Some(r), Some(s)) => format!(", cost {} (session {})", format_usd(r), format_usd(s)),
        (Some(r), None) => format!(", cost {} (session unknown)", format_usd(r)),
    }
}

pub fn estimate_text(text: &str) -> u64 {
    text.len().div_ceil(4) as u64
}

/// Context window of `model` from the compiled-in catalog: rules are tried in
/// order; the first exact, prefix or substring match wins.
pub fn catalog_context_limit(model: &str) -> Option<u64> {
    lookup(CATALOG, model)
}

/// The value of the first rule of `table` that `model` meets.
fn lookup<T: Copy>(table: &[(Match, &str, T)], model: &str) -> Option<T> {
    let model = model.to_ascii_lowercase();
    // Provider-qualified ids ("openai/gpt-4o") match on the part after the slash too.
    let bare = model.rsplit('/').next().unwrap_or(&model);
    table.iter().find_map(|&(kind, pattern, value)| {
        let hit = |m: &str| match kind {
            Exact => m == pattern,
            Prefix => m.starts_with(pattern),
            Contains => m.contains(pattern),
        };
        (hit(&model) || hit(bare)).then_some(value)
    })
}

/// How a catalog pattern meets a model id (case-insensitive).
#[derive(Clone, Copy)]
enum Match {
    Exact,
    Prefix,
    Contains,
}
use Match::{Contains, Exact, Prefix};

/// Context windows (in tokens) of common models, compiled in as a table (not
/// parsed at start: that was a third of `buddy exec`'s instructions). Rules
/// are tried top to bottom and the first match wins, so specific rules come
/// before general ones. A provider prefix such as "openai/" is also stripped
/// before matching. A profile's `context_limit` in buddy.toml always wins.
/// Patterns are lower case.
const CATALOG: &[(Match, &str, u64)] = &[
    // OpenAI
    (Prefix, "gpt-5", 400_000),
    (Prefix, "gpt-4.1", 1_047_576),
    (Prefix, "gpt-4o", 128_000),
    (Prefix, "gpt-4-turbo", 128_000),
    (Prefix, "gpt-4-32k", 32_768),
    (Exact, "gpt-4", 8_192),
    (Prefix, "gpt-3.5-turbo", 16_385),
    (Prefix, "gpt-oss", 131_072),
    (Prefix, "o1-mini", 128_000),
    (Prefix, "o1", 200_000),
    (Prefix, "o3", 200_000),
    (Prefix, "o4", 200_000),
    (Contains, "codex", 400_000),
    // Anthropic
    (Contains, "claude", 200_000),
    // Google
    (Prefix, "gemini-1.5-pro", 2_097_152),
    (Prefix, "gemini", 1_048_576),
    (Prefix, "gemma3", 131_072),
    (Prefix, "gemma", 8_192),
    // DeepSeek
    (Contains, "deepseek", 128_000),
    // Qwen
    (Contains, "qwen3-coder", 262_144),
    (Contains, "qwen", 131_072),
    // Meta Llama
    (Contains, "llama-4", 1_048_576),
    (Contains, "llama3.1", 131_072),
    (Contains, "llama3.2", 131_072),
    (Contains, "llama3.3", 131_072),
    (Contains, "llama-3.1", 131_072),
    (Contains, "llama-3.3", 131_072),
    (Contains, "llama3", 8_192),
    // Mistral
    (Contains, "codestral", 256_000),
    (Contains, "mistral-large", 131_072),
    (Contains, "mistral-small", 131_072),
    (Contains, "devstral", 131_072),
    (Contains, "mixtral", 32_768),
    (Contains, "mistral", 32_768),
    // Others commonly served through OpenRouter / Ollama
    (Contains, "glm-4", 131_072),
    (Contains, "kimi", 131_072),
    (Contains, "grok", 131_072),
    (Contains, "phi4", 16_384),
];

/// A model's list price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from the provider's cache; the input price when
    /// the provider gives none.
    pub cached_input: Option<f64>,
}

/// What a model's tokens cost, as far as buddy knows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Pricing {
    /// The price table's or the profile's own `price`.
    Priced(Price),
    /// A server on this machine (loopback, or one discovery found) with no
    /// price set: it costs nothing.
    Local,
    /// Neither the table nor the profile knows the model.
    #[default]
    Unknown,
}

impl Pricing {
    /// What one reply cost in US dollars; `None` when the price is unknown.
    /// Cache reads are part of `prompt` and cost `cached_input`; cache
    /// writes are counted at the input price.
    pub fn cost(&self, prompt: u64, completion: u64, cache_read: u64) -> Option<f64> {
        match self {
            Pricing::Local => Some(0.0),
            Pricing::Unknown => None,
            Pricing::Priced(p) => {
                let cached = cache_read.min(prompt);
                let fresh = (prompt - cached) as f64 * p.input;
                let cached = cached as f64 * p.cached_input.unwrap_or(p.input);
                Some((fresh + cached + completion as f64 * p.output) / 1_000_000.0)
            }
        }
    }
}

/// Dollars as billionths, rounded; negative and non-finite amounts as 0.
pub fn usd_to_nanos(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1e9).round() as u64
    } else {
        0
    }
}

pub fn nanos_to_usd(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// A dollar amount as people read it: cents for a dollar or more, four
/// significant decimals below (`$0.0123`), `$0.00` for nothing.
pub fn format_usd(usd: f64) -> String {
    if usd == 0.0 {
        "$0.00".into()
    } else if usd >= 1.0 {
        format!("${usd:.2}")
    } else if usd >= 0.0001 {
        format!("${usd:.4}")
    } else {
        "<$0.0001".into()
    }
}

/// The date the price table below was taken from the providers' published
/// list prices (standard tier, no batch discount, the lowest context tier).
/// Rechecked on 2026-11-27 against stored copies of the official pages
/// (OpenAI's model pages, Anthropic's pricing page, xAI's model list).
pub const PRICES_AS_OF: &str = "2025-11-25";

/// Shorthand for the table: input, cached input, output, per million tokens.
const fn usd(input: f64, cached_input: f64, output: f64) -> Price {
    Price {
        input,
        output,
        cached_input: Some(cached_input),
    }
}

/// List prices of well-known hosted models (as of [`PRICES_AS_OF`]),
/// compiled in like the context catalog above: same matching, first match
/// wins, so specific rules come before general ones. A profile's `price`
/// always wins; a model not here (or a provider that changed its prices)
/// needs one.
const PRICES: &[(Match, &str, Price)] = &[
    // OpenAI
    // The pro models have no cached price; they come before their families.
    (Prefix, "gpt-5-pro", usd(15.00, 15.00, 120.00)),
    (Prefix, "gpt-5-nano", usd(0.05, 0.005, 0.40)),
    (Prefix, "gpt-5-mini", usd(0.25, 0.025, 2.00)),
    (Prefix, "gpt-5", usd(1.25, 0.125, 10.00)),
    (Prefix, "gpt-4.1-nano", usd(0.10, 0.025, 0.40)),
    (Prefix, "gpt-4.1-mini", usd(0.40, 0.10, 1.60)),
    (Prefix, "gpt-4.1", usd(2.00, 0.50, 8.00)),
    (Prefix, "gpt-4o-mini", usd(0.15, 0.075, 0.60)),
    (Prefix, "gpt-4o", usd(2.50, 1.25, 10.00)),
    (Prefix, "gpt-4-turbo", usd(10.00, 10.00, 30.00)),
    (Prefix, "gpt-3.5-turbo", usd(0.50, 0.50, 1.50)),
    (Prefix, "o4-mini", usd(1.10, 0.275, 4.40)),
    (Prefix, "o3-mini", usd(1.10, 0.55, 4.40)),
    (Prefix, "o3-pro", usd(20.00, 20.00, 80.00)),
    (Prefix, "o3", usd(2.00, 0.50, 8.00)),
    (Prefix, "o1-mini", usd(1.10, 0.55, 4.40)),
    (Prefix, "o1-pro", usd(150.00, 150.00, 600.00)),
    (Prefix, "o1", usd(15.00, 7.50, 60.00)),
    (Prefix, "codex-mini", usd(1.50, 0.375, 6.00)),
    // Anthropic (cache reads a tenth of the input price)
    // Opus 4.5 and later cost a third of the first Opus models.
    (Contains, "opus-4-1", usd(15.00, 1.50, 75.00)),
    (Contains, "opus-4-0", usd(15.00, 1.50, 75.00)),
    (Contains, "opus-4-2025", usd(15.00, 1.50, 75.00)),
    (Contains, "3-opus", usd(15.00, 1.50, 75.00)),
    (Contains, "opus", usd(5.00, 0.50, 25.00)),
    (Contains, "haiku-4", usd(1.00, 0.10, 5.00)),
    (Contains, "3-5-haiku", usd(0.80, 0.08, 4.00)),
    (Contains, "haiku", usd(0.25, 0.03, 1.25)),
    (Contains, "sonnet", usd(3.00, 0.30, 15.00)),
    // Google (prompts up to 200k tokens)
    (Prefix, "gemini-3-pro", usd(2.00, 0.20, 12.00)),
    (Prefix, "gemini-2.5-pro", usd(1.25, 0.125, 10.00)),
    (Prefix, "gemini-2.5-flash-lite", usd(0.10, 0.01, 0.40)),
    (Prefix, "gemini-2.5-flash", usd(0.30, 0.03, 2.50)),
    (Prefix, "gemini-2.0-flash-lite", usd(0.075, 0.075, 0.30)),
    (Prefix, "gemini-2.0-flash", usd(0.10, 0.025, 0.40)),
    // DeepSeek's own API (V3.2: chat and reasoner alike)
    (Exact, "deepseek-chat", usd(0.28, 0.028, 0.42)),
    (Exact, "deepseek-reasoner", usd(0.28, 0.028, 0.42)),
    // xAI
    (Prefix, "grok-code-fast", usd(0.20, 0.02, 1.50)),
    (Prefix, "grok-4-fast", usd(0.20, 0.05, 0.50)),
    (Prefix, "grok-4-1-fast", usd(0.20, 0.05, 0.50)),
    (Prefix, "grok-4", usd(3.00, 0.75, 15.00)),
    // Mistral
    (Prefix, "mistral-large", usd(2.00, 2.00, 6.00)),
    (Prefix, "mistral-medium", usd(0.40, 0.40, 2.00)),
    (Prefix, "mistral-small", usd(0.10, 0.10, 0.30)),
    (Prefix, "codestral", usd(0.30, 0.30, 0.90)),
    (Prefix, "devstral-medium", usd(0.40, 0.40, 2.00)),
    (Prefix, "devstral-small", usd(0.10, 0.10, 0.30)),
];

/// `model`'s list price from the table, if it is there.
pub fn catalog_price(model: &str) -> Option<Price> {
    lookup(PRICES, model)
}

/// Config wins, then the catalog, then the conservative fallback.
pub fn context_limit(configured: Option<u64>, model: &str) -> u64 {
    configured
        .filter(|l| *l > 0)
        .or_else(|| catalog_context_limit(model))
        .unwrap_or(FALLBACK_CONTEXT_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_counts_add_up_and_show_only_when_reported() {
        let mut t = TokenTracker::new(1000);
        t.record(100, 10);
        t.record_cache(0, 0);
        assert_eq!(t.cache_note(), "");
        t.record(120, 5);
        t.record_cache(90, 30);
        t.record_cache(10, 0);
        assert_eq!(t.total_cache_read_tokens, 100);
        assert_eq!(t.total_cache_write_tokens, 30);
        assert_eq!(t.cache_note(), ", cache: 100 read, 30 written");
        assert_eq!(t.session_total(), 235);
    }

    #[test]
    fn catalog_parses_and_matches_in_order() {
        assert!(CATALOG.len() > 10);
        // Matching lower-cases the model id, so a pattern with a capital
        // letter could never match.
        for (_, pattern, _) in CATALOG {
            assert_eq!(*pattern, pattern.to_ascii_lowercase());
        }
        assert_eq!(catalog_context_limit("GPT-4o"), Some(128_000));
        assert_eq!(catalog_context_limit("gpt-4o-mini"), Some(128_000));
        assert_eq!(catalog_context_limit("openai/gpt-4o"), Some(128_000));
        assert!(catalog_context_limit("llama3.1:8b").is_some());
        assert_eq!(catalog_context_limit("totally-unknown-model"), None);
    }

    #[test]
    fn prices_match_specific_models_first() {
        for (_, pattern, _) in PRICES {
            assert_eq!(*pattern, pattern.to_ascii_lowercase());
        }
        assert_eq!(catalog_price("gpt-4o-mini").unwrap().input, 0.15);
        assert_eq!(catalog_price("openai/gpt-4o").unwrap().input, 2.50);
        assert_eq!(catalog_price("gpt-5-mini-2025-08-07").unwrap().output, 2.00);
        assert_eq!(
            catalog_price("claude-sonnet-4-5-20250929").unwrap().input,
            3.00
        );
        assert_eq!(catalog_price("claude-opus-4-5").unwrap().output, 25.00);
        assert_eq!(catalog_price("claude-opus-4-6").unwrap().output, 25.00);
        assert_eq!(
            catalog_price("claude-opus-4-1-20250805").unwrap().output,
            75.00
        );
        assert_eq!(
            catalog_price("claude-opus-4-20250514").unwrap().output,
            75.00
        );
        assert_eq!(catalog_price("claude-3-opus-latest").unwrap().input, 15.00);
        assert_eq!(catalog_price("gpt-5-pro").unwrap().output, 120.00);
        assert_eq!(catalog_price("gpt-5.1").unwrap().output, 10.00);
        assert_eq!(catalog_price("o1-pro").unwrap().input, 150.00);
        assert_eq!(
            catalog_price("grok-4-1-fast-reasoning").unwrap().output,
            0.50
        );
        assert_eq!(catalog_price("grok-4-0709").unwrap().output, 15.00);
        assert_eq!(
            catalog_price("claude-3-5-haiku-latest").unwrap().input,
            0.80
        );
        assert_eq!(catalog_price("gemini-2.5-flash-lite").unwrap().input, 0.10);
        assert!(catalog_price("llama3.1:8b").is_none());
        assert!(catalog_price("deepseek-r1:7b").is_none());
    }

    #[test]
    fn costs_count_cache_reads_at_their_price_and_add_up_exactly() {
        let p = Pricing::Priced(Price {
            input: 2.0,
            output: 10.0,
            cached_input: Some(0.5),
        });
        // 1M prompt of which 400k cached, 100k completion.
        let c = p.cost(1_000_000, 100_000, 400_000).unwrap();
        assert!((c - (1.2 + 0.2 + 1.0)).abs() < 1e-9, "{c}");
        assert_eq!(Pricing::Local.cost(10, 10, 0), Some(0.0));
        assert_eq!(Pricing::Unknown.cost(10, 10, 0), None);
        let mut t = TokenTracker::new(1000);
        t.record_cost(Some(0.1));
        t.record_cost(Some(0.2));
        assert_eq!(t.session_cost_usd(), Some(0.3));
        t.record_cost(None);
        assert_eq!(t.session_cost_usd(), None);
        assert_eq!(format_usd(0.0123456), "$0.0123");
        assert_eq!(format_usd(12.345), "$12.35");
        assert_eq!(format_usd(0.0), "$0.00");
    }

    #[test]
    fn config_then_catalog_then_fallback() {
        assert_eq!(context_limit(Some(1234), "gpt-4o"), 1234);
        assert_eq!(context_limit(None, "gpt-4o"), 128_000);
        assert_eq!(context_limit(None, "mystery"), FALLBACK_CONTEXT_LIMIT);
    }

    #[test]
    fn heuristic_counts_chars_and_framing() {
        let msgs = vec![Message::user("a".repeat(400))];
        assert_eq!(estimate_messages(&msgs), (400 + 16) / 4);
    }
}
