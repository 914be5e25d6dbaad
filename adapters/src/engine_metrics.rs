//! Speculative-decoding figures from a serving engine's Prometheus
//! `/metrics`: llama.cpp (`--metrics`) and vLLM count drafted and accepted
//! tokens; SGLang reports an acceptance rate.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use switchyard_policies::Engine;

use crate::error::AdapterError;
use crate::upstream::HttpClient;

/// What one scrape says about drafting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DraftFigures {
    /// Cumulative counters: the rate is their growth between scrapes.
    Counters { drafted: f64, accepted: f64 },
    /// The engine's own rate.
    Rate(f64),
}

/// Reads the engine's drafting figures from exposition text; `None` when
/// it reports none (no speculative decoding, or an engine that has no such
/// metric).
pub fn draft_figures(engine: Engine, text: &str) -> Option<DraftFigures> {
    let counters = |prefix: &str| {
        let drafted = sum(
            text,
            &format!("{prefix}:spec_decode_num_draft_tokens_total"),
        )?;
        let accepted = sum(
            text,
            &format!("{prefix}:spec_decode_num_accepted_tokens_total"),
        )?;
        Some(DraftFigures::Counters { drafted, accepted })
    };
    match engine {
        Engine::Llamacpp => counters("llamacpp"),
        Engine::Vllm => counters("vllm"),
        Engine::Sglang => sum(text, "sglang:spec_accept_rate").map(DraftFigures::Rate),
        Engine::Generic => None,
    }
}

/// Requests the engine is running and holding back in its own queue, from
/// one scrape: llama.cpp's `requests_processing` and `requests_deferred`,
/// vLLM's `num_requests_running` and `num_requests_waiting`, SGLang's
/// `num_running_reqs` and `num_queue_reqs`.
pub fn engine_load(engine: Engine, text: &str) -> Option<(f64, f64)> {
    let (running, waiting) = match engine {
        Engine::Llamacpp => ("llamacpp:requests_processing", "llamacpp:requests_deferred"),
        Engine::Vllm => ("vllm:num_requests_running", "vllm:num_requests_waiting"),
        Engine::Sglang => ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
        Engine::Generic => return None,
    };
    Some((sum(text, running)?, sum(text, waiting).unwrap_or(0.0)))
}

/// The sum of a metric's samples over all label sets.
fn sum(text: &str, metric: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        // The name must end here: `foo_total` is not `foo_total_bar`.
        let rest = match rest.as_bytes().first() {
            Some(b'{') => rest.split_once('}').map_or("", |(_, v)| v),
            Some(b' ') => rest,
            _ => continue,
        };
        if let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            *total.get_or_insert(0.0) += value;
        }
    }
    total
}

/// GETs a metrics page.
pub async fn fetch(
    client: &HttpClient,
    url: &str,
    timeout: Duration,
) -> Result<String, AdapterError> {
    fetch_with(client, url, &[], timeout).await
}

/// [`fetch`] with `headers` on the request (a key the server asks for).
pub async fn fetch_with(
    client: &HttpClient,
    url: &str,
    headers: &[(http::HeaderName, http::HeaderValue)],
    timeout: Duration,
) -> Result<String, AdapterError> {
    let mut request = Request::builder().method(Method::GET).uri(url);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let request = request
        .body(Full::new(Bytes::new()))
        .map_err(|err| AdapterError::Internal {
            message: err.to_string(),
        })?;
    let fetched = async {
        let response = client
            .request(request)
            .await
            .map_err(|err| AdapterError::Connect {
                message: err.to_string(),
            })?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|err| AdapterError::Connect {
                message: err.to_string(),
            })?
            .to_bytes();
        if !status.is_success() {
            return Err(AdapterError::Internal {
                message: format!("{url} answered {status}"),
            });
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(timeout, fetched)
        .await
        .map_err(|_| AdapterError::Internal {
            message: format!("{url} did not answer within {timeout:?}"),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_counters() {
        // As llama-server (--metrics, --spec-type draft-simple) printed them.
        let text = "# HELP llamacpp:spec_decode_num_draft_tokens_total Number of draft tokens.\n\
            # TYPE llamacpp:spec_decode_num_draft_tokens_total counter\n\
            llamacpp:spec_decode_num_draft_tokens_total 152\n\
            llamacpp:spec_decode_num_accepted_tokens_total 138\n\
            llamacpp:spec_decode_num_drafts_total 52\n\
            llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 50\n";
        assert_eq!(
            draft_figures(Engine::Llamacpp, text),
            Some(DraftFigures::Counters {
                drafted: 152.0,
                accepted: 138.0
            })
        );
        assert_eq!(
            draft_figures(Engine::Llamacpp, "llamacpp:prompt_tokens_total 4\n"),
            None
        );
    }

    #[test]
    fn the_engines_own_queue() {
        // As llama-server (--metrics) printed them.
        let llama = "llamacpp:n_decode_total 0\nllamacpp:requests_processing 2\nllamacpp:requests_deferred 3\n";
        assert_eq!(engine_load(Engine::Llamacpp, llama), Some((2.0, 3.0)));
        let vllm = "vllm:num_requests_running{model_name=\"m\"} 4.0\nvllm:num_requests_waiting{model_name=\"m\"} 1.0\n";
        assert_eq!(engine_load(Engine::Vllm, vllm), Some((4.0, 1.0)));
        assert_eq!(
            engine_load(Engine::Llamacpp, "llamacpp:n_decode_total 0\n"),
            None
        );
        assert_eq!(engine_load(Engine::Generic, llama), None);
    }

    #[test]
    fn vllm_counters_sum_over_labels() {
        let text = "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 100.0\n\
            vllm:spec_decode_num_draft_tokens_total{engine=\"1\",model_name=\"m\"} 60.0\n\
            vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 70.0\n\
            vllm:spec_decode_num_accepted_tokens_total{engine=\"1\",model_name=\"m\"} 30.0\n\
            vllm:spec_decode_num_accepted_tokens_total_extra 9\n";
        assert_eq!(
            draft_figures(Engine::Vllm, text),
            Some(DraftFigures::Counters {
                drafted: 160.0,
                accepted: 100.0
            })
        );
    }

    #[test]
    fn sglang_rate() {
        let text = "sglang:spec_accept_rate{model_name=\"m\"} 0.62\nsglang:spec_accept_length{model_name=\"m\"} 2.9\n";
        assert_eq!(
            draft_figures(Engine::Sglang, text),
            Some(DraftFigures::Rate(0.62))
        );
    }
}
