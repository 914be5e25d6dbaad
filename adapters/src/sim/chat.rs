//! Simulated chat completions, whole and streamed.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::engine::{Luck, SimBackend};
use super::script::{self, Script};
use super::text::{self, Generated};
use super::tool_choice;
use crate::error::AdapterError;
use crate::provider::ChatStream;
use crate::tokens;
use crate::types::{
    ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Content, Delta, Message, Role,
    Timings, ToolCallDelta, Usage, unix_now,
};

/// Tool-call arguments are streamed in fragments of this many characters.
const ARGUMENT_FRAGMENT_CHARS: usize = 8;

/// Everything decided about one request before any time passes.
struct ChatPlan {
    prompt_tokens: usize,
    cached: usize,
    choices: Vec<(u64, Generated)>,
    luck: Luck,
    first: Duration,
    gaps: Vec<Duration>,
    top_logprobs: Option<u32>,
}

impl ChatPlan {
    fn completion_tokens(&self) -> usize {
        self.choices.iter().map(|(_, g)| g.completion_tokens).sum()
    }

    fn usage(&self) -> Usage {
        Usage::with_cached(
            self.prompt_tokens as u64,
            self.completion_tokens() as u64,
            self.cached as u64,
        )
    }

    fn gap(&self, index: usize) -> Duration {
        self.gaps
            .get(index)
            .or(self.gaps.last())
            .copied()
            .unwrap_or_default()
    }

    fn logprobs(&self, seed: u64, generated: &Generated) -> Option<Value> {
        self.top_logprobs
            .map(|top| text::logprobs(seed, &generated.pieces, top))
    }
}

/// JSON mode, which any JSON object satisfies: `json_object`, or a
/// `json_schema` format that gives no schema.
fn json_mode(req: &ChatRequest) -> bool {
    let kind = req
        .response_format
        .as_ref()
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str);
    kind == Some("json_object") || (kind == Some("json_schema") && output_schema(req).is_none())
}

/// The schema a `json_schema` response format asks the answer to follow
/// (Responses' `text.format` arrives translated to this).
fn output_schema(req: &ChatRequest) -> Option<&Value> {
    let format = req.response_format.as_ref()?;
    (format.get("type")?.as_str()? == "json_schema").then_some(())?;
    format.get("json_schema")?.get("schema")
}

impl SimBackend {
    fn plan_chat(&self, req: &ChatRequest) -> Result<ChatPlan, AdapterError> {
        let (prompt_text, overhead) = tokens::prompt_text_and_overhead(req);
        let ids = tokens::encode(&prompt_text);
        let prompt_tokens = ids.len() + overhead;
        self.check_context(prompt_tokens, req.output_limit())?;
        let luck = self.luck()?;
        let cached = self.prefix.lookup_and_insert(&ids);
        let calls = tool_choice::tools_to_call(req);
        let stops = text::stop_sequences(req.extra.get("stop"));
        let choices: Vec<(u64, Generated)> = (0..req.n.unwrap_or(1).max(1))
            .map(|index| {
                let seed = text::choice_seed(self.params.seed, req.seed, &prompt_text, index);
                let mut generated = if let (true, Some(schema)) =
                    (calls.is_empty(), output_schema(req))
                {
                    text::schema_reply(seed, schema, req.output_limit())
                } else if calls.is_empty() {
                    text::text_reply(
                        seed,
                        self.params.default_max_tokens,
                        req.output_limit(),
                        json_mode(req),
                    )
                } else {
                    let tool_calls = text::tool_calls(seed, &calls);
                    let completion_tokens = tool_calls
                        .iter()
                        .map(|c| {
                            tokens::count(&c.function.name) + tokens::count(&c.function.arguments)
                        })
                        .sum();
                    Generated {
                        pieces: Vec::new(),
                        tool_calls,
                        finish_reason: "tool_calls",
                        completion_tokens,
                    }
                };
                generated.stop_at(&stops);
                (seed, generated)
            })
            .collect();
        let longest = choices
            .iter()
            .map(|(_, g)| g.completion_tokens)
            .max()
            .unwrap_or(0);
        let (first, gaps) = self.schedule(prompt_tokens, cached, longest, luck);
        let top_logprobs = req
            .logprobs
            .unwrap_or(false)
            // The API gives at most twenty.
            .then(|| req.top_logprobs.unwrap_or(0).min(20));
        Ok(ChatPlan {
            prompt_tokens,
            cached,
            choices,
            luck,
            first,
            gaps,
            top_logprobs,
        })
    }

    /// The `timings` of a planned answer: its longest choice is what the
    /// engine decoded for.
    fn chat_timings(&self, plan: &ChatPlan) -> Timings {
        let longest = plan
            .choices
            .iter()
            .map(|(_, g)| g.completion_tokens)
            .max()
            .unwrap_or(0);
        self.timings(
            plan.prompt_tokens,
            plan.cached,
            longest,
            plan.first,
            &plan.gaps,
        )
    }

    pub(super) async fn chat_response(
        &self,
        req: ChatRequest,
    ) -> Result<ChatResponse, AdapterError> {
        let _slot = self.admit().await?;
        let plan = self.plan_chat(&req)?;
        SimBackend::take_whole_time(plan.first, &plan.gaps, plan.luck).await?;
        let choices = plan
            .choices
            .iter()
            .zip(0..)
            .map(|((seed, g), index)| Choice {
                index,
                message: Message {
                    role: Role::Assistant,
                    content: g.tool_calls.is_empty().then(|| Content::Text(g.text())),
                    name: None,
                    tool_calls: (!g.tool_calls.is_empty()).then(|| g.tool_calls.clone()),
                    tool_call_id: None,
                    extra: Default::default(),
                },
                finish_reason: Some(g.finish_reason.to_owned()),
                logprobs: plan.logprobs(*seed, g),
                extra: Default::default(),
            })
            .collect();
        let mut extra = Map::new();
        let timings = self.chat_timings(&plan);
        if !req.extra.is_empty() {
            // Says which request fields reached the simulator without it
            // modelling them: how a caller sees its extensions arrived.
            let names: Vec<&String> = req.extra.keys().collect();
            extra.insert(
                "switchyard_sim".into(),
                json!({ "unmodeled_fields": names }),
            );
        }
        Ok(ChatResponse {
            id: self.next_id("chatcmpl"),
            object: "chat.completion".into(),
            created: unix_now(),
            model: req.model,
            choices,
            usage: Some(plan.usage()),
            system_fingerprint: Some("switchyard-sim".into()),
            timings: Some(Box::new(timings)),
            extra: extra.into(),
            verbatim: None,
        })
    }

    pub(super) async fn chat_chunks(&self, req: ChatRequest) -> Result<ChatStream, AdapterError> {
        let slot = self.admit().await?;
        let plan = self.plan_chat(&req)?;
        let template = ChatChunk {
            id: self.next_id("chatcmpl"),
            object: "chat.completion.chunk".into(),
            created: unix_now(),
            model: req.model.clone(),
            choices: Vec::new(),
            usage: None,
            system_fingerprint: Some("switchyard-sim".into()),
            timings: None,
            extra: Default::default(),
            verbatim: None,
            spec_fields_sent: false,
            usage_sent: false,
        };
        let chunk =
            |index: u32, delta: Delta, finish: Option<&str>, logprobs: Option<Value>| ChatChunk {
                choices: vec![ChunkChoice {
                    index,
                    delta,
                    finish_reason: finish.map(str::to_owned),
                    logprobs,
                    extra: Default::default(),
                    spec_fields_sent: false,
                }],
                ..template.clone()
            };
        let mut script: Script<ChatChunk> = Vec::new();
        for ((seed, g), index) in plan.choices.iter().zip(0u32..) {
            let delay = if index == 0 {
                plan.first
            } else {
                Duration::ZERO
            };
            let role = Delta {
                role: Some(Role::Assistant),
                content: g.tool_calls.is_empty().then(String::new),
                ..Delta::default()
            };
            script.push((delay, Ok(chunk(index, role, None, None))));
            let logprobs = plan.logprobs(*seed, g);
            for (i, piece) in g.pieces.iter().enumerate() {
                let delay = if i == 0 {
                    Duration::ZERO
                } else {
                    plan.gap(i - 1)
                };
                let delta = Delta {
                    content: Some(piece.clone()),
                    ..Delta::default()
                };
                let piece_logprobs = logprobs
                    .as_ref()
                    .map(|lp| json!({"content": [lp["content"][i].clone()]}));
                script.push((delay, Ok(chunk(index, delta, None, piece_logprobs))));
            }
            let mut step = 0;
            for (call, call_index) in g.tool_calls.iter().zip(0u32..) {
                let delta = Delta::tool_call(ToolCallDelta::opening(
                    call_index,
                    &call.id,
                    &call.function.name,
                ));
                script.push((plan.gap(step), Ok(chunk(index, delta, None, None))));
                let chars: Vec<char> = call.function.arguments.chars().collect();
                for fragment in chars.chunks(ARGUMENT_FRAGMENT_CHARS) {
                    step += 1;
                    let fragment: String = fragment.iter().collect();
                    let delta = Delta::tool_call(ToolCallDelta::arguments(call_index, &fragment));
                    script.push((plan.gap(step), Ok(chunk(index, delta, None, None))));
                }
            }
            script.push((
                Duration::ZERO,
                Ok(chunk(index, Delta::default(), Some(g.finish_reason), None)),
            ));
        }
        let timings = self.chat_timings(&plan);
        if req.wants_stream_usage() {
            let usage_chunk = ChatChunk {
                usage: Some(Box::new(plan.usage())),
                ..template.clone()
            };
            script.push((Duration::ZERO, Ok(usage_chunk)));
        }
        if let Some((_, Ok(last))) = script.last_mut() {
            last.timings = Some(Box::new(timings));
        }
        if plan.luck.reset {
            script::cut_with_reset(&mut script);
        }
        Ok(script::play(script, slot))
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use switchyard_policies::SimPreset;

    use super::*;
    use crate::provider::Provider;

    fn fast() -> SimBackend {
        let params = switchyard_policies::SimParams {
            base_ttft: Duration::from_millis(1),
            prefill_tokens_per_s: 1e6,
            decode_tokens_per_s: 1e5,
            ..SimPreset::Small.params()
        };
        SimBackend::new(params)
    }

    fn request(body: Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[tokio::test]
    async fn stream_and_whole_reply_agree() {
        let sim = fast();
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hello there"}], "seed": 4});
        let whole = sim.chat(request(body.clone())).await.unwrap();
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let chunks: Vec<ChatChunk> = sim
            .chat_stream(request(streamed))
            .await
            .unwrap()
            .map(|c| c.unwrap())
            .collect()
            .await;
        let text: String = chunks
            .iter()
            .flat_map(|c| &c.choices)
            .filter_map(|c| c.delta.content.clone())
            .collect();
        assert_eq!(Some(Content::Text(text)), whole.choices[0].message.content);
        let stream_usage = chunks.last().unwrap().usage.clone().unwrap();
        let whole_usage = whole.usage.unwrap();
        assert_eq!(stream_usage.prompt_tokens, whole_usage.prompt_tokens);
        assert_eq!(
            stream_usage.completion_tokens,
            whole_usage.completion_tokens
        );
        // The second call found the first one's prompt in the prefix cache
        // only if it spans a whole block; this one is too short.
        assert_eq!(whole_usage.cached_tokens(), 0);
    }

    #[tokio::test]
    async fn streamed_tool_arguments_reassemble() {
        let sim = fast();
        let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "weather?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]});
        let chunks: Vec<ChatChunk> = sim
            .chat_stream(request(body))
            .await
            .unwrap()
            .map(|c| c.unwrap())
            .collect()
            .await;
        let args: String = chunks
            .iter()
            .flat_map(|c| &c.choices)
            .flat_map(|c| c.delta.tool_calls.iter().flatten())
            .filter_map(|t| t.function.as_ref().and_then(|f| f.arguments.clone()))
            .collect();
        let parsed: Value = serde_json::from_str(&args).unwrap();
        assert!(parsed["city"].is_string());
        let finish = chunks
            .iter()
            .flat_map(|c| &c.choices)
            .filter_map(|c| c.finish_reason.clone())
            .next_back();
        assert_eq!(finish.as_deref(), Some("tool_calls"));
    }

    #[tokio::test]
    async fn long_prompts_are_refused_and_prefixes_cached() {
        let sim = fast();
        let long = "word ".repeat(9000);
        let err = sim
            .chat(request(
                json!({"model": "m", "messages": [{"role": "user", "content": long}]}),
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, AdapterError::Status { status: 400, .. }));
        let prompt = "shared system prompt ".repeat(40);
        let body = json!({"model": "m", "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": "hi"}]});
        sim.chat(request(body.clone())).await.unwrap();
        let again = sim.chat(request(body)).await.unwrap();
        assert!(again.usage.unwrap().cached_tokens() >= 112);
    }
}
