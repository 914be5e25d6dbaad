//! Prices and cost arithmetic: cloud models priced per million tokens of
//! each kind, local backends priced from their hardware's hourly cost.

/// A cloud model's list price in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenPrice {
    pub input: f64,
    /// Prompt tokens read from the provider's cache.
    pub cached_input: f64,
    /// Prompt tokens written to the provider's cache (Anthropic).
    pub cache_write: f64,
    pub output: f64,
    /// Reasoning tokens; most providers bill them as output.
    pub reasoning: f64,
}

/// Tokens of one request by kind. `input` excludes cached and cache-write
/// tokens; `output` includes `reasoning` (as OpenAI reports it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TokenCounts {
    pub input: u64,
    pub cached_input: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
}

impl TokenCounts {
    /// All prompt tokens, however they were billed.
    pub fn prompt(&self) -> u64 {
        self.input + self.cached_input + self.cache_write
    }
}

impl TokenPrice {
    /// The cost of `tokens` at this price, in USD.
    pub fn cost(&self, tokens: &TokenCounts) -> f64 {
        let reasoning = tokens.reasoning.min(tokens.output);
        let per = |n: u64, usd_per_mtok: f64| n as f64 * usd_per_mtok / 1e6;
        per(tokens.input, self.input)
            + per(tokens.cached_input, self.cached_input)
            + per(tokens.cache_write, self.cache_write)
            + per(tokens.output - reasoning, self.output)
            + per(reasoning, self.reasoning)
    }
}

/// How a backend's requests are priced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pricing {
    /// Per token, like a cloud API (or a local backend's per-token override).
    Tokens(TokenPrice),
    /// Hardware and power cost per hour, shared over the requests served.
    /// The rule: a request pays `usd_per_hour` for its own duration divided
    /// by the number of requests the backend was serving when it started
    /// (itself included), so concurrent requests split the hour between
    /// them and an idle backend costs nothing in the ledger.
    Hourly { usd_per_hour: f64 },
    /// Nothing (a free tier, a machine already paid for and not counted).
    Free,
    /// A cloud model with no price, set or built in: what it costs is not
    /// known. Its rows cost 0 and say `unpriced`; keys with budgets may not
    /// use it (a budget could not hold it).
    Unpriced,
}

impl Pricing {
    /// The cost of one request: its tokens, and for hourly pricing how long
    /// it held the backend and how many requests shared it.
    pub fn cost(&self, tokens: &TokenCounts, busy_seconds: f64, sharing: u32) -> f64 {
        match self {
            Pricing::Tokens(price) => price.cost(tokens),
            Pricing::Hourly { usd_per_hour } => {
                usd_per_hour / 3600.0 * busy_seconds / f64::from(sharing.max(1))
            }
            Pricing::Free | Pricing::Unpriced => 0.0,
        }
    }
}

/// Built-in list prices (USD per million tokens) for common cloud models,
/// used when a backend's `model` matches and its config sets no price.
/// Config overrides them; prices change, so check your provider's page.
///
/// A model matches its own name exactly, or a dated snapshot of it: the
/// name followed by `-YYYY-MM-DD` (OpenAI), `-YYYYMMDD` or `@YYYYMMDD`
/// (Anthropic, Vertex), or `-latest`. So `claude-opus-4-5-20251101` is
/// `claude-opus-4-5`, while a shorter name never prices another model:
/// `o3-pro` is not `o3`, nor `gpt-4o-audio-preview` `gpt-4o`.
pub fn builtin_price(model: &str) -> Option<TokenPrice> {
    let p = |input, cached_input, cache_write, output| TokenPrice {
        input,
        cached_input,
        cache_write,
        output,
        reasoning: output,
    };
    // input, cached input, cache write, output.
    const TABLE: &[(&str, [f64; 4])] = &[
        ("gpt-4o-mini", [0.15, 0.075, 0.0, 0.60]),
        ("gpt-4o", [2.50, 1.25, 0.0, 10.00]),
        ("gpt-4.1-nano", [0.10, 0.025, 0.0, 0.40]),
        ("gpt-4.1-mini", [0.40, 0.10, 0.0, 1.60]),
        ("gpt-4.1", [2.00, 0.50, 0.0, 8.00]),
        ("gpt-5-nano", [0.05, 0.005, 0.0, 0.40]),
        ("gpt-5-mini", [0.25, 0.025, 0.0, 2.00]),
        ("gpt-5", [1.25, 0.125, 0.0, 10.00]),
        ("o4-mini", [1.10, 0.275, 0.0, 4.40]),
        ("o3-mini", [1.10, 0.55, 0.0, 4.40]),
        ("o3-pro", [20.00, 20.00, 0.0, 80.00]),
        ("o3", [2.00, 0.50, 0.0, 8.00]),
        ("claude-3-5-haiku", [0.80, 0.08, 1.00, 4.00]),
        ("claude-haiku-4-5", [1.00, 0.10, 1.25, 5.00]),
        ("claude-3-7-sonnet", [3.00, 0.30, 3.75, 15.00]),
        ("claude-sonnet-4", [3.00, 0.30, 3.75, 15.00]),
        ("claude-sonnet-4-5", [3.00, 0.30, 3.75, 15.00]),
        ("claude-opus-4", [15.00, 1.50, 18.75, 75.00]),
        ("claude-opus-4-1", [15.00, 1.50, 18.75, 75.00]),
        ("claude-opus-4-5", [5.00, 0.50, 6.25, 25.00]),
        // Gemini: prompts up to 200k tokens (longer ones cost more; set
        // `price:` for those), implicit cache hits at a tenth of input.
        ("gemini-2.5-flash-lite", [0.10, 0.01, 0.0, 0.40]),
        ("gemini-2.5-flash", [0.30, 0.03, 0.0, 2.50]),
        ("gemini-2.5-pro", [1.25, 0.125, 0.0, 10.00]),
        ("gemini-3-flash-preview", [0.50, 0.05, 0.0, 3.00]),
        ("gemini-3-pro-preview", [2.00, 0.20, 0.0, 12.00]),
        ("gemini-3.1-pro-preview", [2.00, 0.20, 0.0, 12.00]),
    ];
    let find = |name: &str| {
        let name = without_snapshot(name);
        TABLE
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, [input, cached, write, output])| p(*input, *cached, *write, *output))
    };
    find(model).or_else(|| find(bedrock_base(model)?))
}

/// The model a Bedrock id names: an ARN's last part, without a
/// cross-region inference profile's geography (`us.`, `eu.`, `apac.`,
/// `global.`, ...), the vendor (`anthropic.`) and the version
/// (`-v1:0`). `us.anthropic.claude-sonnet-4-5-20250929-v1:0` is
/// `claude-sonnet-4-5-20250929`. An application inference profile's ARN
/// names no model, and needs `price:`.
fn bedrock_base(model: &str) -> Option<&str> {
    let id = model.rsplit('/').next()?;
    let geographies = [
        "us.", "eu.", "apac.", "global.", "jp.", "au.", "ca.", "us-gov.",
    ];
    let id = geographies
        .iter()
        .find_map(|g| id.strip_prefix(g))
        .unwrap_or(id);
    let id = id.strip_prefix("anthropic.")?;
    // `-v1:0`, `-v2`: the version Bedrock gives a model.
    let at = id.rfind("-v")?;
    let version = &id[at + 2..];
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let valid = match version.split_once(':') {
        Some((major, minor)) => digits(major) && digits(minor),
        None => digits(version),
    };
    valid.then_some(&id[..at])
}

/// Who sells a model of the built-in list, as OpenTelemetry's GenAI
/// conventions name providers; `None` for a model the list does not price.
pub fn list_provider(model: &str) -> Option<&'static str> {
    builtin_price(model)?;
    Some(if model.starts_with("claude-") {
        "anthropic"
    } else if model.starts_with("gemini-") {
        "gcp.gemini"
    } else {
        "openai"
    })
}

/// A model name without its snapshot suffix: `-YYYY-MM-DD`, `-YYYYMMDD`,
/// `@YYYYMMDD` or `-latest`.
fn without_snapshot(model: &str) -> &str {
    if let Some(base) = model.strip_suffix("-latest") {
        return base;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let dashed_date = |s: &str| {
        let parts: Vec<&str> = s.split('-').collect();
        matches!(parts.as_slice(), [y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2
            && digits(y) && digits(m) && digits(d))
    };
    // `-YYYY-MM-DD`: the last eleven bytes.
    if model.len() > 11
        && let Some((base, date)) = model.split_at_checked(model.len() - 11)
        && let Some(date) = date.strip_prefix('-')
        && dashed_date(date)
    {
        return base;
    }
    match model.rfind(['-', '@']) {
        Some(at) if model.len() - at == 9 && digits(&model[at + 1..]) => &model[..at],
        _ => model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn openai_cached_tokens_are_cheaper() {
        let price = builtin_price("gpt-4o-2024-08-06").unwrap();
        // 10k prompt tokens of which 8k cached, 1k output.
        let tokens = TokenCounts {
            input: 2_000,
            cached_input: 8_000,
            output: 1_000,
            ..TokenCounts::default()
        };
        assert!(close(
            price.cost(&tokens),
            2_000.0 * 2.5e-6 + 8_000.0 * 1.25e-6 + 1_000.0 * 10e-6
        ));
        assert_eq!(tokens.prompt(), 10_000);
    }

    #[test]
    fn anthropic_cache_writes_and_reads() {
        let price = builtin_price("claude-sonnet-4-20250514").unwrap();
        let tokens = TokenCounts {
            input: 100,
            cached_input: 5_000,
            cache_write: 2_000,
            output: 500,
            reasoning: 0,
        };
        let expected = 100.0 * 3e-6 + 5_000.0 * 0.3e-6 + 2_000.0 * 3.75e-6 + 500.0 * 15e-6;
        assert!(close(price.cost(&tokens), expected));
    }

    #[test]
    fn gemini_cache_hits_and_thoughts() {
        let price = builtin_price("gemini-2.5-flash").unwrap();
        // 120 prompt tokens of which 100 cached, 6 answer and 4 thought tokens.
        let tokens = TokenCounts {
            input: 20,
            cached_input: 100,
            output: 10,
            reasoning: 4,
            ..TokenCounts::default()
        };
        let expected = 20.0 * 0.30e-6 + 100.0 * 0.03e-6 + 10.0 * 2.50e-6;
        assert!(close(price.cost(&tokens), expected));
        assert!(builtin_price("gemini-2.5-flash-preview-05-20").is_none());
    }

    #[test]
    fn bedrock_ids_are_priced_as_the_model_they_serve() {
        let sonnet = builtin_price("claude-sonnet-4-5").unwrap();
        for id in [
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        ] {
            assert_eq!(builtin_price(id), Some(sonnet), "{id}");
        }
        assert!(builtin_price("us.meta.llama3-3-70b-instruct-v1:0").is_none());
        assert!(
            builtin_price("arn:aws:bedrock:us-east-1:1:application-inference-profile/abc123")
                .is_none()
        );
    }

    #[test]
    fn reasoning_tokens_at_their_own_rate() {
        let price = TokenPrice {
            input: 1.0,
            cached_input: 0.5,
            cache_write: 0.0,
            output: 4.0,
            reasoning: 8.0,
        };
        let tokens = TokenCounts {
            output: 1_000,
            reasoning: 600,
            ..TokenCounts::default()
        };
        assert!(close(price.cost(&tokens), 400.0 * 4e-6 + 600.0 * 8e-6));
    }

    #[test]
    fn local_hardware_is_shared_by_concurrent_requests() {
        let local = Pricing::Hourly { usd_per_hour: 3.6 };
        let tokens = TokenCounts::default();
        assert!(close(local.cost(&tokens, 10.0, 1), 0.01));
        assert!(close(local.cost(&tokens, 10.0, 4), 0.0025));
        assert!(
            close(local.cost(&tokens, 10.0, 0), 0.01),
            "sharing of 0 counts as alone"
        );
        assert_eq!(Pricing::Free.cost(&tokens, 10.0, 1), 0.0);
    }

    #[test]
    fn a_model_is_priced_by_its_own_name_or_a_dated_snapshot_of_it() {
        let output = |model: &str| builtin_price(model).map(|p| p.output);
        assert_eq!(output("gpt-4o-mini"), Some(0.60));
        assert_eq!(output("gpt-4o"), Some(10.0));
        assert_eq!(output("gpt-4o-2024-08-06"), Some(10.0));
        assert_eq!(output("gpt-4o-mini-2024-07-18"), Some(0.60));
        assert_eq!(output("claude-opus-4-5-20251101"), Some(25.0));
        assert_eq!(output("claude-opus-4-20250514"), Some(75.0));
        assert_eq!(output("claude-sonnet-4-5@20250929"), Some(15.0));
        assert_eq!(output("claude-3-7-sonnet-latest"), Some(15.0));
        assert_eq!(output("o3-pro"), Some(80.0), "o3-pro is not o3");
        assert_eq!(output("o3-pro-2025-06-10"), Some(80.0));
        // A shorter name never prices a longer one.
        assert_eq!(output("gpt-4o-audio-preview"), None);
        assert_eq!(output("gpt-4o-2024"), None);
        assert_eq!(output("claude-opus-4-7"), None);
        assert_eq!(output("llama-3-8b"), None);
    }
}
