//! What one request did: backend, time to first token, usage, outcome.
//! Written when the request ends however it ends, including a client that
//! went away mid-stream (the record is dropped with the stream).

use std::time::Instant;

use switchyard_adapters::types::Usage;

use switchyard_router::Reason;

use crate::app::BackendHandle;

pub struct RequestRecord {
    endpoint: &'static str,
    route: Option<String>,
    backend: String,
    reason: Reason,
    started: Instant,
    first_output: Option<Instant>,
    usage: Option<Usage>,
    /// `cancelled` until the request finishes or fails.
    outcome: &'static str,
}

impl RequestRecord {
    pub fn new(
        endpoint: &'static str,
        route: Option<&str>,
        reason: Reason,
        backend: &BackendHandle,
    ) -> Self {
        RequestRecord {
            endpoint,
            route: route.map(str::to_owned),
            backend: backend.name.clone(),
            reason,
            started: Instant::now(),
            first_output: None,
            usage: None,
            outcome: "cancelled",
        }
    }

    pub fn first_output(&mut self) {
        self.first_output.get_or_insert_with(Instant::now);
    }

    pub fn usage(&mut self, usage: Option<&Usage>) {
        if let Some(usage) = usage {
            self.usage = Some(usage.clone());
        }
    }

    pub fn finish(&mut self, outcome: &'static str) {
        self.outcome = outcome;
    }
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        let ms = |t: Instant| t.duration_since(self.started).as_secs_f64() * 1000.0;
        let usage = self.usage.clone().unwrap_or_default();
        tracing::info!(
            target: "switchyard::request",
            endpoint = self.endpoint,
            route = self.route.as_deref().unwrap_or("-"),
            backend = %self.backend,
            reason = self.reason.as_str(),
            outcome = self.outcome,
            ttft_ms = self.first_output.map(ms),
            duration_ms = ms(Instant::now()),
            prompt_tokens = usage.prompt_tokens,
            cached_tokens = usage.cached_tokens(),
            completion_tokens = usage.completion_tokens,
            usage_reported = self.usage.is_some(),
        );
    }
}
