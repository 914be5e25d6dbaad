//! The requests a probe makes, each a streamed chat call straight to the
//! backend's adapter (no routing, no queue): cold prompts of set lengths,
//! a repeated prefix, and a code and a prose prompt for drafting.

use std::time::Instant;

use futures_util::StreamExt;
use serde_json::{Value, json};
use switchyard_adapters::types::{ChatRequest, Timings};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_policies::{Engine, PromptClass};

use crate::cli::probe::model::{ClassRun, Point, PrefixReuse};

/// What one streamed call showed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run {
    pub prompt_tokens: u32,
    pub cached_tokens: u64,
    pub ttft_ms: f64,
    pub decode_tokens_per_s: Option<f64>,
    pub reported_prefill_tokens_per_s: Option<f64>,
    pub drafts: Option<(u64, u64)>,
}

/// One backend as the probe calls it.
pub struct Target<'a> {
    pub provider: &'a dyn Provider,
    pub model: &'a str,
    pub engine: Engine,
}

impl Target<'_> {
    /// Streams one chat call and times it; once more if the connection
    /// broke before an answer (a pooled connection the server had closed).
    pub async fn run(
        &self,
        messages: Value,
        max_tokens: u32,
        fill: bool,
    ) -> Result<Run, AdapterError> {
        match self.run_once(messages.clone(), max_tokens, fill).await {
            Err(AdapterError::Reset { .. } | AdapterError::Connect { .. }) => {
                self.run_once(messages, max_tokens, fill).await
            }
            result => result,
        }
    }

    async fn run_once(
        &self,
        messages: Value,
        max_tokens: u32,
        fill: bool,
    ) -> Result<Run, AdapterError> {
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if fill
            && matches!(
                self.engine,
                Engine::Llamacpp | Engine::Vllm | Engine::Sglang
            )
        {
            // Decode speed needs a full answer: keep going past end-of-text.
            body["ignore_eos"] = json!(true);
        }
        let request: ChatRequest =
            serde_json::from_value(body).map_err(|err| AdapterError::Internal {
                message: err.to_string(),
            })?;
        let started = Instant::now();
        let mut chunks = self.provider.chat_stream(request).await?;
        let (mut first, mut last, mut pieces) = (None, None, 0u64);
        let mut run = Run::default();
        let mut completion_tokens = None;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            let output = chunk.choices.iter().any(|c| {
                c.delta.content.as_deref().is_some_and(|t| !t.is_empty())
                    || c.delta.tool_calls.is_some()
            });
            if output {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                pieces += 1;
            }
            if let Some(usage) = &chunk.usage {
                run.prompt_tokens = u32::try_from(usage.prompt_tokens).unwrap_or(u32::MAX);
                run.cached_tokens = usage.cached_tokens();
                completion_tokens = Some(usage.completion_tokens);
            }
            read_timings(chunk.timings.as_deref(), &mut run);
        }
        let Some(first) = first else {
            return Err(AdapterError::Internal {
                message: "the backend streamed no output".into(),
            });
        };
        run.ttft_ms = first.duration_since(started).as_secs_f64() * 1000.0;
        let produced = completion_tokens.unwrap_or(pieces);
        let decoding = last.map_or(0.0, |l| l.duration_since(first).as_secs_f64());
        run.decode_tokens_per_s =
            (produced > 1 && decoding > 0.0).then(|| (produced - 1) as f64 / decoding);
        Ok(run)
    }
}

/// llama.cpp's `timings`: its prefill rate and drafts.
fn read_timings(timings: Option<&Timings>, run: &mut Run) {
    let Some(timings) = timings else {
        return;
    };
    if let Some(rate) = timings.prompt_per_second() {
        run.reported_prefill_tokens_per_s = Some(rate);
    }
    if let Some(drafts) = timings.drafts() {
        run.drafts = Some(drafts);
    }
}

/// A document of about `tokens` tokens that no earlier request started
/// with (so no prefix cache helps), then a request to go on writing.
pub fn document(tokens: u32, nonce: &str) -> String {
    const SUBJECTS: [&str; 6] = ["pump", "valve", "relay", "sensor", "motor", "switch"];
    const STATES: [&str; 5] = ["nominal", "drifting", "recalibrated", "replaced", "idle"];
    let mut text = format!("Maintenance log {nonce}.\n");
    let mut i = 0usize;
    // Sentences of about 16 tokens (more with tokenizers that split digits;
    // the backend's reported usage is what the report uses).
    let sentences = (tokens as usize / 16).max(1);
    while i < sentences {
        text.push_str(&format!(
            "Entry {i}: the {} at station {} was {} after {} hours.\n",
            SUBJECTS[i % SUBJECTS.len()],
            (i * 7) % 97,
            STATES[(i * 3) % STATES.len()],
            (i * 131) % 1000
        ));
        i += 1;
    }
    text
}

fn ask(document: &str, question: &str) -> Value {
    json!([
        {"role": "system", "content": document},
        {"role": "user", "content": question},
    ])
}

const GO_ON: &str = "Summarise the maintenance log entry by entry, in full sentences.";

/// First-token time and decode speed with a cold prompt of each length.
pub async fn cold_points(
    target: &Target<'_>,
    lengths: &[u32],
    output_tokens: u32,
    failures: &mut Vec<String>,
) -> (Vec<Point>, Vec<u32>) {
    let mut points = Vec::new();
    let mut over_context = Vec::new();
    for (i, &length) in lengths.iter().enumerate() {
        let nonce = format!("cold-{i}-{}", unique());
        match target
            .run(ask(&document(length, &nonce), GO_ON), output_tokens, true)
            .await
        {
            Ok(run) => points.push(Point {
                prompt_tokens: run.prompt_tokens.max(1),
                ttft_ms: run.ttft_ms,
                decode_tokens_per_s: run.decode_tokens_per_s,
                reported_prefill_tokens_per_s: run.reported_prefill_tokens_per_s,
            }),
            Err(AdapterError::Status {
                status: 400,
                ref message,
                ..
            }) if message.contains("context") || message.contains("exceed") => {
                over_context.push(length);
            }
            Err(err) => failures.push(format!("{length}-token prompt: {err}")),
        }
    }
    (points, over_context)
}

/// The same long start twice with a different question: how much a warm
/// prefix cache saves.
pub async fn prefix_reuse(target: &Target<'_>, length: u32) -> Result<PrefixReuse, AdapterError> {
    let doc = document(length, &format!("prefix-{}", unique()));
    let cold = target.run(ask(&doc, GO_ON), 8, false).await?;
    let warm = target
        .run(ask(&doc, "Which station appears in entry 3?"), 8, false)
        .await?;
    Ok(PrefixReuse {
        prompt_tokens: cold.prompt_tokens,
        cold_ttft_ms: cold.ttft_ms,
        warm_ttft_ms: warm.ttft_ms,
        cached_tokens: warm.cached_tokens,
    })
}

const CODE_PROMPT: &str = "Write a Python module with a class Matrix that supports add, sub, mul, \
    transpose and determinant, with type hints and docstrings, then unit tests for every method.";
const PROSE_PROMPT: &str = "Write a short story about a lighthouse keeper who finds a letter in a \
    bottle, with vivid description of the sea and the weather.";

/// Decode speed and drafts on a code prompt and a prose prompt.
pub async fn classes(target: &Target<'_>, output_tokens: u32) -> Vec<Result<ClassRun, String>> {
    let mut runs = Vec::new();
    for (class, prompt) in [
        (PromptClass::Code, CODE_PROMPT),
        (PromptClass::Prose, PROSE_PROMPT),
    ] {
        let messages = json!([{"role": "user", "content": prompt}]);
        runs.push(
            target
                .run(messages, output_tokens.max(128), false)
                .await
                .map(|run| ClassRun {
                    class,
                    decode_tokens_per_s: run.decode_tokens_per_s,
                    drafts: run.drafts,
                })
                .map_err(|err| format!("{} prompt: {err}", class.as_str())),
        );
    }
    runs
}

/// A string no earlier probe request used.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}")
}
