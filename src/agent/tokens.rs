//! Token accounting: exact counts from the server when it reports usage, a
//! character heuristic otherwise, and the context-window size of the model.

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

pub fn estimate_text(text: &str) -> u64 {
    text.len().div_ceil(4) as u64
}

/// Context window of `model` from the compiled-in catalog: rules are tried in
/// order; the first exact, prefix or substring match wins.
pub fn catalog_context_limit(model: &str) -> Option<u64> {
    let model = model.to_ascii_lowercase();
    // Provider-qualified ids ("openai/gpt-4o") match on the part after the slash too.
    let bare = model.rsplit('/').next().unwrap_or(&model);
    CATALOG.iter().find_map(|&(kind, pattern, context)| {
        let hit = |m: &str| match kind {
            Exact => m == pattern,
            Prefix => m.starts_with(pattern),
            Contains => m.contains(pattern),
        };
        (hit(&model) || hit(bare)).then_some(context)
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
