//! Simulated legacy text completions, whole and streamed.

use std::time::Duration;

use serde_json::{Value, json};

use super::engine::{Luck, SimBackend};
use super::script::{self, Script};
use super::text::{self, Generated};
use crate::error::AdapterError;
use crate::provider::CompletionStream;
use crate::tokens;
use crate::types::{CompletionChoice, CompletionRequest, CompletionResponse, Usage, unix_now};

struct CompletionPlan {
    prompt_tokens: usize,
    cached: usize,
    choices: Vec<Generated>,
    luck: Luck,
    first: Duration,
    gaps: Vec<Duration>,
}

impl CompletionPlan {
    fn usage(&self) -> Usage {
        let completion: usize = self.choices.iter().map(|g| g.completion_tokens).sum();
        Usage::with_cached(
            self.prompt_tokens as u64,
            completion as u64,
            self.cached as u64,
        )
    }
}

/// The legacy API's logprobs shape; `top` (the request's `logprobs`) most
/// likely tokens at each place, the chosen one among them.
fn legacy_logprobs(seed: u64, pieces: &[String], top: u32) -> Value {
    // The API gives at most five.
    let chat = text::logprobs(seed, pieces, top.clamp(1, 5) - 1);
    let mut offset = 0;
    let offsets: Vec<usize> = pieces
        .iter()
        .map(|p| {
            let at = offset;
            offset += p.len();
            at
        })
        .collect();
    let content = chat["content"].as_array().map_or(&[][..], Vec::as_slice);
    let token_logprobs: Vec<Value> = content.iter().map(|t| t["logprob"].clone()).collect();
    // Per place, a map of token to logprob (the chosen token's first).
    let top_logprobs: Vec<Value> = content
        .iter()
        .map(|t| {
            let mut top = serde_json::Map::new();
            let alternatives = t["top_logprobs"].as_array().map_or(&[][..], Vec::as_slice);
            for entry in std::iter::once(t).chain(alternatives) {
                if let Some(token) = entry["token"].as_str() {
                    top.entry(token).or_insert_with(|| entry["logprob"].clone());
                }
            }
            Value::Object(top)
        })
        .collect();
    json!({"tokens": pieces, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs, "text_offset": offsets})
}

impl SimBackend {
    fn plan_completion(
        &self,
        req: &CompletionRequest,
    ) -> Result<(CompletionPlan, Vec<u64>), AdapterError> {
        let prompt = req.prompt_text();
        let ids = tokens::encode(&prompt);
        self.check_context(ids.len(), req.max_tokens)?;
        let luck = self.luck()?;
        let cached = self.prefix.lookup_and_insert(&ids);
        let seeds: Vec<u64> = (0..req.n.unwrap_or(1).max(1))
            .map(|i| text::choice_seed(self.params.seed, req.seed, &prompt, i))
            .collect();
        let stops = text::stop_sequences(req.extra.get("stop"));
        let choices: Vec<Generated> = seeds
            .iter()
            .map(|seed| {
                let mut generated =
                    text::text_reply(*seed, self.params.default_max_tokens, req.max_tokens, false);
                generated.stop_at(&stops);
                generated
            })
            .collect();
        let longest = choices
            .iter()
            .map(|g| g.completion_tokens)
            .max()
            .unwrap_or(0);
        let (first, gaps) = self.schedule(ids.len(), cached, longest, luck);
        Ok((
            CompletionPlan {
                prompt_tokens: ids.len(),
                cached,
                choices,
                luck,
                first,
                gaps,
            },
            seeds,
        ))
    }

    fn completion_template(&self, req: &CompletionRequest) -> CompletionResponse {
        CompletionResponse {
            id: self.next_id("cmpl"),
            object: "text_completion".into(),
            created: unix_now(),
            model: req.model.clone(),
            choices: Vec::new(),
            usage: None,
            timings: None,
            extra: Default::default(),
        }
    }

    pub(super) async fn completion_response(
        &self,
        req: CompletionRequest,
    ) -> Result<CompletionResponse, AdapterError> {
        let _slot = self.admit().await?;
        let (plan, seeds) = self.plan_completion(&req)?;
        SimBackend::take_whole_time(plan.first, &plan.gaps, plan.luck).await?;
        let choices = plan
            .choices
            .iter()
            .zip(&seeds)
            .zip(0..)
            .map(|((g, seed), index)| CompletionChoice {
                index,
                text: g.text(),
                logprobs: req
                    .logprobs
                    .map(|top| legacy_logprobs(*seed, &g.pieces, top)),
                finish_reason: Some(g.finish_reason.to_owned()),
                extra: Default::default(),
            })
            .collect();
        Ok(CompletionResponse {
            choices,
            usage: Some(plan.usage()),
            ..self.completion_template(&req)
        })
    }

    pub(super) async fn completion_chunks(
        &self,
        req: CompletionRequest,
    ) -> Result<CompletionStream, AdapterError> {
        let slot = self.admit().await?;
        let (plan, _) = self.plan_completion(&req)?;
        let template = self.completion_template(&req);
        let chunk = |index: u32, text: &str, finish: Option<&str>| CompletionResponse {
            choices: vec![CompletionChoice {
                index,
                text: text.to_owned(),
                logprobs: None,
                finish_reason: finish.map(str::to_owned),
                extra: Default::default(),
            }],
            ..template.clone()
        };
        let mut script: Script<CompletionResponse> = Vec::new();
        for (g, index) in plan.choices.iter().zip(0u32..) {
            for (i, piece) in g.pieces.iter().enumerate() {
                let delay = match (index, i) {
                    (0, 0) => plan.first,
                    (_, 0) => Duration::ZERO,
                    _ => plan.gaps.get(i - 1).copied().unwrap_or_default(),
                };
                script.push((delay, Ok(chunk(index, piece, None))));
            }
            script.push((Duration::ZERO, Ok(chunk(index, "", Some(g.finish_reason)))));
        }
        let wants_usage = req
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        if wants_usage {
            script.push((
                Duration::ZERO,
                Ok(CompletionResponse {
                    usage: Some(plan.usage()),
                    ..template.clone()
                }),
            ));
        }
        if plan.luck.reset {
            script::cut_with_reset(&mut script);
        }
        Ok(script::play(script, slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_logprobs_list_the_top_tokens_at_each_place() {
        let pieces: Vec<String> = [" the", " river"].map(String::from).to_vec();
        let logprobs = legacy_logprobs(3, &pieces, 3);
        let top = logprobs["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 2);
        for (place, piece) in top.iter().zip(&pieces) {
            let place = place.as_object().unwrap();
            assert!(
                place.contains_key(piece.as_str()),
                "the chosen token is among them"
            );
            assert!((1..=3).contains(&place.len()));
        }
        assert_eq!(logprobs["tokens"].as_array().unwrap().len(), 2);
    }
}
