//! What reading an upstream answer costs, counted by callgrind rather
//! than timed: the benchmark's 551-byte chat answer (what `switchyard sim`
//! sends the overhead benchmark) read 1,000 times in one of five ways,
//! chosen by `ANSWER_PARSE`:
//!
//! - `none`: the loop alone (subtracted from the others);
//! - `typed`: the gateway's reader (`json::from_bytes` into
//!   `ChatResponse`, unknown fields kept);
//! - `light`: only the choices' finish reasons (borrowed) and the usage,
//!   the least a pass-through answer needs;
//! - `ignored`: every value skipped (`IgnoredAny`), serde_json's scan alone;
//! - `value`: into a `serde_json::Value`.
//!
//! It answers whether a lighter reader would pay for itself (see the
//! instruction-count page of the docs book). Run:
//! `scripts/count-answer-parse.sh`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark set-up

use std::hint::black_box;

use serde::Deserialize;
use serde::de::IgnoredAny;
use switchyard_adapters::types::ChatResponse;

const ANSWER: &str = r#"{"id":"chatcmpl-sim0000000","object":"chat.completion","created":1796522359,"model":"auto","choices":[{"index":0,"message":{"role":"assistant","content":"[sim] will answer reply by cloud fast more simulated time reply data more can","refusal":null},"finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":24,"completion_tokens":16,"total_tokens":40,"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"switchyard-sim","timings":{"cache_n":0,"prompt_n":24,"prompt_ms":1.0024000000000002,"predicted_n":16,"predicted_ms":0.753}}"#;

const TIMES: usize = 1000;

#[derive(Deserialize)]
struct Light<'a> {
    #[serde(borrow)]
    choices: Vec<LightChoice<'a>>,
    usage: Option<LightUsage>,
}

#[derive(Deserialize)]
struct LightChoice<'a> {
    #[serde(borrow)]
    finish_reason: Option<&'a str>,
}

#[derive(Deserialize)]
struct LightUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

fn main() {
    let mode = std::env::var("ANSWER_PARSE").unwrap_or_else(|_| "typed".into());
    let mut seen = 0usize;
    for _ in 0..TIMES {
        let body = black_box(ANSWER.as_bytes());
        seen += match mode.as_str() {
            "none" => body.len(),
            "typed" => {
                let answer: ChatResponse = switchyard_adapters::json::from_bytes(body).unwrap();
                answer.choices.len()
            }
            "light" => {
                let text = std::str::from_utf8(body).unwrap();
                let answer: Light<'_> = serde_json::from_str(text).unwrap();
                let reasons = answer
                    .choices
                    .iter()
                    .filter_map(|c| c.finish_reason)
                    .count();
                reasons
                    + answer
                        .usage
                        .map_or(0, |u| (u.prompt_tokens + u.completion_tokens) as usize)
            }
            "ignored" => {
                let text = std::str::from_utf8(body).unwrap();
                let _: IgnoredAny = serde_json::from_str(text).unwrap();
                1
            }
            "value" => {
                let text = std::str::from_utf8(body).unwrap();
                let answer: serde_json::Value = serde_json::from_str(text).unwrap();
                answer.as_object().map_or(0, serde_json::Map::len)
            }
            other => panic!("ANSWER_PARSE={other}: none, typed, light, ignored or value"),
        };
    }
    // Used, so that no read is optimised away.
    black_box(seen);
}
