//! One streamed chat request, measured as the client sees it: time to the
//! first content (or tool-call) token, decode rate after it, the text and
//! tool calls, usage, and the gateway's receipts.

use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// What one request showed.
#[derive(Debug, Default)]
pub struct Measured {
    pub status: u16,
    pub ttft_ms: Option<f64>,
    pub total_ms: f64,
    pub output_tokens: u64,
    pub prompt_tokens: u64,
    pub text: String,
    /// Tool calls, assembled from their deltas.
    pub tool_calls: Vec<Value>,
    pub backend: String,
    pub reason: String,
    pub predicted_ttft_ms: Option<f64>,
    pub request_id: String,
    pub error: Option<String>,
}

impl Measured {
    /// Output tokens after the first over the time they took.
    pub fn decode_tokens_per_s(&self) -> Option<f64> {
        let ttft = self.ttft_ms?;
        let decoding_s = (self.total_ms - ttft) / 1000.0;
        (self.output_tokens > 1 && decoding_s > 0.0)
            .then(|| (self.output_tokens - 1) as f64 / decoding_s)
    }
}

pub async fn send(
    client: &HttpClient,
    url: &str,
    body: &Value,
    headers: &[(&str, String)],
) -> Measured {
    let started = Instant::now();
    let mut measured = Measured::default();
    let mut request = http::Request::post(url).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let Ok(request) = request.body(Full::new(Bytes::from(body.to_string()))) else {
        measured.error = Some("bad request".into());
        return measured;
    };
    let response = match client.request(request).await {
        Ok(response) => response,
        Err(err) => {
            measured.error = Some(err.to_string());
            return measured;
        }
    };
    measured.status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    measured.backend = header("x-switchyard-backend");
    measured.reason = header("x-switchyard-reason");
    measured.request_id = header("x-request-id");
    measured.predicted_ttft_ms = header("x-switchyard-predicted-ttft-ms").parse().ok();
    let mut body = response.into_body();
    let mut pending = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            measured.error = Some("stream cut".into());
            break;
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        pending.extend_from_slice(data);
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            for line in String::from_utf8_lossy(&event).lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    on_event(&mut measured, data, started);
                }
            }
        }
    }
    if measured.status != 200 && measured.error.is_none() {
        measured.error = Some(
            String::from_utf8_lossy(&pending)
                .chars()
                .take(200)
                .collect(),
        );
    }
    measured.total_ms = started.elapsed().as_secs_f64() * 1000.0;
    measured
}

fn on_event(measured: &mut Measured, data: &str, started: Instant) {
    if data == "[DONE]" {
        return;
    }
    let Ok(chunk) = serde_json::from_str::<Value>(data) else {
        return;
    };
    if let Some(error) = chunk.get("error") {
        measured.error = Some(error["code"].as_str().unwrap_or("error").to_owned());
        return;
    }
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        measured.output_tokens = usage["completion_tokens"].as_u64().unwrap_or(0);
        measured.prompt_tokens = usage["prompt_tokens"].as_u64().unwrap_or(0);
    }
    let Some(delta) = chunk["choices"].get(0).map(|c| &c["delta"]) else {
        return;
    };
    let text = delta["content"].as_str().unwrap_or("");
    let calls = delta["tool_calls"].as_array();
    if (!text.is_empty() || calls.is_some()) && measured.ttft_ms.is_none() {
        measured.ttft_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
    }
    measured.text.push_str(text);
    for call in calls.into_iter().flatten() {
        let index = call["index"].as_u64().unwrap_or(0) as usize;
        while measured.tool_calls.len() <= index {
            measured
                .tool_calls
                .push(json!({"id": "", "type": "function",
                "function": {"name": "", "arguments": ""}}));
        }
        let assembled = &mut measured.tool_calls[index];
        if let Some(id) = call["id"].as_str() {
            assembled["id"] = json!(id);
        }
        for field in ["name", "arguments"] {
            if let Some(part) = call["function"][field].as_str() {
                let so_far = assembled["function"][field]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                assembled["function"][field] = json!(so_far + part);
            }
        }
    }
}
