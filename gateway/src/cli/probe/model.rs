//! What a probe's measurements say, beyond the points measured: straight-line
//! fits of first-token time against prompt length and of time per output
//! token against context length (each attended token costs about the same),
//! and whether a backend meets each use case's budget at a given context.

use switchyard_policies::{Profile, PromptClass};
use switchyard_router::budget_for;

/// One cold request: a fresh prompt of this many tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub prompt_tokens: u32,
    pub ttft_ms: f64,
    /// Output tokens per second after the first, measured at the client.
    pub decode_tokens_per_s: Option<f64>,
    /// The engine's own prefill rate (llama.cpp `timings`), when reported.
    pub reported_prefill_tokens_per_s: Option<f64>,
}

/// A repeated prefix: the same long prompt start, a different question.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixReuse {
    pub prompt_tokens: u32,
    pub cold_ttft_ms: f64,
    pub warm_ttft_ms: f64,
    /// What the backend reported as cached on the warm request.
    pub cached_tokens: u64,
}

impl PrefixReuse {
    pub fn speedup(&self) -> f64 {
        self.cold_ttft_ms / self.warm_ttft_ms.max(1e-3)
    }
}

/// Drafting on one class of prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassRun {
    pub class: PromptClass,
    pub decode_tokens_per_s: Option<f64>,
    /// `(drafted, accepted)`, when the engine reported drafts.
    pub drafts: Option<(u64, u64)>,
}

impl ClassRun {
    pub fn acceptance(&self) -> Option<f64> {
        let (drafted, accepted) = self.drafts?;
        (drafted > 0).then(|| accepted as f64 / drafted as f64)
    }
}

/// `y = a + b x` by least squares; a flat line through the mean when all
/// points share one x.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub a: f64,
    pub b: f64,
}

impl Line {
    pub fn fit(points: &[(f64, f64)]) -> Option<Line> {
        let n = points.len() as f64;
        if points.is_empty() {
            return None;
        }
        let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
        let my = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let b = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
        Some(Line { a: my - b * mx, b })
    }

    pub fn at(&self, x: f64) -> f64 {
        self.a + self.b * x
    }
}

/// First-token time of a prompt: a fixed overhead plus prefill, where a
/// prompt token costs more the further in it sits (it attends to all before
/// it): a token at position `c` costs `p + q c` ms, so a cold prompt of `x`
/// tokens takes `o + p x + q x^2 / 2` ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefill {
    pub overhead_ms: f64,
    pub p: f64,
    pub q: f64,
}

impl Prefill {
    /// Least squares with every coefficient >= 0: of the fits over each
    /// subset of the terms, the best one whose coefficients are all >= 0.
    pub fn fit(points: &[(f64, f64)]) -> Option<Prefill> {
        let terms: [fn(f64) -> f64; 3] = [|_| 1.0, |x| x, |x| x * x / 2.0];
        let subsets: [&[usize]; 7] = [&[0, 1, 2], &[0, 1], &[1, 2], &[0, 2], &[1], &[2], &[0]];
        let mut best: Option<(f64, Prefill)> = None;
        for subset in subsets {
            if subset.len() > points.len() {
                continue;
            }
            let Some(coef) = least_squares(points, subset, &terms) else {
                continue;
            };
            if coef.iter().any(|c| *c < 0.0 || !c.is_finite()) {
                continue;
            }
            let mut full = [0.0; 3];
            for (i, &term) in subset.iter().enumerate() {
                full[term] = coef[i];
            }
            let fit = Prefill {
                overhead_ms: full[0],
                p: full[1],
                q: full[2],
            };
            let sse: f64 = points
                .iter()
                .map(|(x, y)| (fit.cold_ms(*x) - y).powi(2))
                .sum();
            if best.is_none_or(|(b, _)| sse < b) {
                best = Some((sse, fit));
            }
        }
        best.map(|(_, fit)| fit)
    }

    pub fn cold_ms(&self, tokens: f64) -> f64 {
        self.overhead_ms + self.p * tokens + self.q * tokens * tokens / 2.0
    }

    /// A new turn of `new` tokens on top of `context` tokens already cached.
    pub fn turn_ms(&self, context: f64, new: f64) -> f64 {
        self.overhead_ms + new * (self.p + self.q * (context + new / 2.0))
    }

    /// Mean prefill speed over a cold prompt of `tokens` tokens.
    pub fn tokens_per_s(&self, tokens: f64) -> Option<f64> {
        let ms = self.cold_ms(tokens) - self.overhead_ms;
        (ms > 0.0).then(|| tokens / ms * 1000.0)
    }
}

/// Solves the normal equations for the chosen terms (Gaussian elimination).
fn least_squares(
    points: &[(f64, f64)],
    subset: &[usize],
    terms: &[fn(f64) -> f64; 3],
) -> Option<Vec<f64>> {
    let n = subset.len();
    let mut m = vec![vec![0.0; n + 1]; n];
    for (x, y) in points {
        let f: Vec<f64> = subset.iter().map(|&t| terms[t](*x)).collect();
        for r in 0..n {
            for c in 0..n {
                m[r][c] += f[r] * f[c];
            }
            m[r][n] += f[r] * y;
        }
    }
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (value, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *value -= factor * p;
                }
            }
        }
    }
    Some((0..n).map(|r| m[r][n] / m[r][r]).collect())
}

/// The fitted behaviour of one backend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fitted {
    pub prefill: Prefill,
    /// Seconds per output token against context tokens.
    pub seconds_per_token: Option<Line>,
}

impl Fitted {
    pub fn of(points: &[Point]) -> Option<Fitted> {
        let ttft: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (f64::from(p.prompt_tokens), p.ttft_ms))
            .collect();
        let per_token: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| Some((f64::from(p.prompt_tokens), 1.0 / p.decode_tokens_per_s?)))
            .collect();
        Some(Fitted {
            prefill: Prefill::fit(&ttft)?,
            seconds_per_token: Line::fit(&per_token),
        })
    }

    /// Decode speed with this many tokens of context.
    pub fn decode_at(&self, context: u32) -> Option<f64> {
        let s = self.seconds_per_token?.at(f64::from(context));
        (s > 0.0).then(|| 1.0 / s)
    }
}

/// A person's new turn on top of a conversation held in the prefix cache.
pub const NEW_TURN_TOKENS: u32 = 128;

/// The verdict for one use case at one context length.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Meets {
        tokens_per_s: f64,
        ttft_ms: f64,
    },
    Misses {
        why: String,
    },
    /// Batch: no budget, a throughput.
    TokensPerHour(f64),
    /// Past the backend's context window.
    OverContext,
    Unknown,
}

/// Whether a backend meets `profile` with `context` tokens of context.
/// Conversations (chat, code, agentic) keep their history in the prefix
/// cache, so only a new turn is prefilled; RAG prefills the whole prompt
/// (fresh documents) against its own, longer first-token budget.
pub fn verdict(fit: &Fitted, window: Option<u32>, profile: Profile, context: u32) -> Verdict {
    if window.is_some_and(|w| context > w) {
        return Verdict::OverContext;
    }
    let Some(tokens_per_s) = fit.decode_at(context) else {
        return Verdict::Unknown;
    };
    if profile == Profile::Batch {
        return Verdict::TokensPerHour(tokens_per_s * 3600.0);
    }
    let (uncached, ttft_ms) = if profile == Profile::Rag {
        (context, fit.prefill.cold_ms(f64::from(context)))
    } else {
        let new = NEW_TURN_TOKENS;
        (
            new,
            fit.prefill
                .turn_ms(f64::from(context - new), f64::from(new)),
        )
    };
    let Some(budget) = budget_for(None, Some(profile), uncached) else {
        return Verdict::Unknown;
    };
    let mut misses = Vec::new();
    if tokens_per_s < budget.min_tokens_per_s {
        misses.push(format!(
            "{tokens_per_s:.0} tok/s < {:.0}",
            budget.min_tokens_per_s
        ));
    }
    if let Some(limit) = budget.ttft
        && ttft_ms > limit.as_secs_f64() * 1000.0
    {
        misses.push(format!(
            "TTFT {:.1} s > {:.1} s",
            ttft_ms / 1000.0,
            limit.as_secs_f64()
        ));
    }
    if misses.is_empty() {
        Verdict::Meets {
            tokens_per_s,
            ttft_ms,
        }
    } else {
        Verdict::Misses {
            why: misses.join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(prompt_tokens: u32, ttft_ms: f64, decode: f64) -> Point {
        Point {
            prompt_tokens,
            ttft_ms,
            decode_tokens_per_s: Some(decode),
            reported_prefill_tokens_per_s: None,
        }
    }

    #[test]
    fn fits_recover_prefill_and_decode_slowdown() {
        // 100 ms overhead, prefill 2 ms per token plus 0.1 us per token
        // before it; decode 20 ms per token plus 5 us per context token.
        let cold = |x: f64| 100.0 + 2.0 * x + 1e-4 * x * x / 2.0;
        let points: Vec<Point> = [128u32, 1024, 4096]
            .iter()
            .map(|&n| {
                let x = f64::from(n);
                point(n, cold(x), 1.0 / (0.02 + 5e-6 * x))
            })
            .collect();
        let fit = Fitted::of(&points).unwrap();
        assert!((fit.prefill.overhead_ms - 100.0).abs() < 1.0, "{fit:?}");
        assert!((fit.prefill.cold_ms(32_768.0) - cold(32_768.0)).abs() < 10.0);
        // A new turn on a cached 4k context: 128 tokens at the cost there.
        let turn = fit.prefill.turn_ms(4096.0, 128.0);
        assert!(
            (turn - (100.0 + 128.0 * (2.0 + 1e-4 * 4160.0))).abs() < 5.0,
            "{turn}"
        );
        let at_32k = fit.decode_at(32_768).unwrap();
        assert!(
            (at_32k - 1.0 / (0.02 + 5e-6 * 32_768.0)).abs() < 0.01,
            "{at_32k}"
        );
    }

    #[test]
    fn fits_never_go_negative() {
        // Prefill that grows faster than linearly would give a linear fit a
        // negative overhead; the overhead is then zero, not below.
        let points = [(209.0, 878.0), (1437.0, 6292.0), (5816.0, 30025.0)];
        let fit = Prefill::fit(&points).unwrap();
        assert!(
            fit.overhead_ms >= 0.0 && fit.p >= 0.0 && fit.q >= 0.0,
            "{fit:?}"
        );
        assert!(fit.turn_ms(4096.0, 128.0) > 100.0, "{fit:?}");
    }

    #[test]
    fn verdicts_follow_the_profile_budgets() {
        let fast = Fitted::of(&[point(128, 200.0, 80.0), point(4096, 2100.0, 70.0)]).unwrap();
        assert!(matches!(
            verdict(&fast, None, Profile::Agentic, 4096),
            Verdict::Meets { .. }
        ));
        // RAG prefills the whole prompt: 4,096 tokens at ~2,000/s fits its
        // grown budget (1 s + 2 s).
        assert!(matches!(
            verdict(&fast, None, Profile::Rag, 4096),
            Verdict::Meets { .. }
        ));
        let slow = Fitted::of(&[point(128, 900.0, 8.0), point(4096, 60_000.0, 6.0)]).unwrap();
        let Verdict::Misses { why } = verdict(&slow, None, Profile::Chat, 4096) else {
            panic!("a slow backend misses chat")
        };
        assert!(why.contains("tok/s"), "{why}");
        assert_eq!(
            verdict(&slow, Some(8192), Profile::Chat, 32_768),
            Verdict::OverContext
        );
        assert!(
            matches!(verdict(&slow, None, Profile::Batch, 4096), Verdict::TokensPerHour(t) if t > 20_000.0)
        );
    }
}
