//! Admission, faults and timing shared by every simulated operation.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use switchyard_policies::SimParams;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::prefix::PrefixCache;
use super::timing;
use crate::error::AdapterError;
use crate::provider::{ChatStream, CompletionStream, Provider};
use crate::types::{
    ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingRequest,
    EmbeddingResponse, Timings,
};

/// One simulated model server.
pub struct SimBackend {
    pub(super) params: SimParams,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    pub(super) prefix: PrefixCache,
    /// Drives jitter and faults; output text has its own per-request seeds.
    rng: Mutex<StdRng>,
    /// Response ids.
    ids: AtomicU64,
    /// Requests admitted (served or serving).
    admitted: AtomicU64,
}

/// What chance decided for one request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Luck {
    /// Multiplies every duration.
    pub scale: f64,
    pub stall: Duration,
    pub reset: bool,
}

impl SimBackend {
    pub fn new(params: SimParams) -> Self {
        SimBackend {
            slots: Arc::new(Semaphore::new(params.max_concurrency)),
            waiting: AtomicUsize::new(0),
            prefix: PrefixCache::new(params.prefix_cache_blocks),
            rng: Mutex::new(StdRng::seed_from_u64(params.seed)),
            ids: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            params,
        }
    }

    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// Requests decoding now and waiting for a slot, for `GET /sim/stats`:
    /// load tests read it, and tests use it to see that a cancelled call
    /// really stopped.
    pub fn stats(&self) -> Value {
        let active = self.params.max_concurrency - self.slots.available_permits();
        json!({
            "active": active,
            "waiting": self.waiting.load(Ordering::Acquire),
            "requests": self.admitted.load(Ordering::Relaxed),
        })
    }

    /// Waits for a decode slot, or refuses when the queue is full.
    pub(super) async fn admit(&self) -> Result<OwnedSemaphorePermit, AdapterError> {
        let permit = self.wait_for_slot().await?;
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(permit)
    }

    async fn wait_for_slot(&self) -> Result<OwnedSemaphorePermit, AdapterError> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.params.max_queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(AdapterError::Overloaded {
                retry_after: Some(Duration::from_secs(1)),
            });
        }
        let permit = self.slots.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        // The semaphore is never closed, so acquiring cannot fail.
        permit.map_err(|_| AdapterError::Internal {
            message: "simulator slots closed".into(),
        })
    }

    /// Rolls the dice for one request: jitter, then each fault in turn.
    pub(super) fn luck(&self) -> Result<Luck, AdapterError> {
        let p = &self.params;
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let scale = 1.0 + p.jitter * rng.random_range(-1.0..=1.0);
        if rng.random_bool(p.faults.error_rate) {
            return Err(AdapterError::Status {
                status: 500,
                message: "simulated upstream error".into(),
                body: Some(
                    json!({"message": "simulated upstream error", "type": "server_error", "code": null}),
                ),
                retry_after: None,
            });
        }
        let stall = if rng.random_bool(p.faults.stall_rate) {
            p.faults.stall
        } else {
            Duration::ZERO
        };
        Ok(Luck {
            scale,
            stall,
            reset: rng.random_bool(p.faults.reset_rate),
        })
    }

    /// A response id unique within this process.
    pub(super) fn next_id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}-sim{:x}{n:06x}", self.params.seed)
    }

    /// Refuses prompts that do not fit, as real servers do (HTTP 400).
    pub(super) fn check_context(
        &self,
        prompt_tokens: usize,
        limit: Option<u32>,
    ) -> Result<(), AdapterError> {
        let needed = prompt_tokens + limit.unwrap_or(0) as usize;
        let window = self.params.context_window as usize;
        if needed <= window {
            return Ok(());
        }
        let message = format!(
            "this model's context window is {window} tokens; the request needs {needed} ({prompt_tokens} in the prompt)"
        );
        Err(AdapterError::Status {
            status: 400,
            body: Some(
                json!({"message": message, "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}),
            ),
            message,
            retry_after: None,
        })
    }

    /// Waits as long as a whole (not streamed) answer takes, then fails the
    /// way a dropped connection would if this request drew a reset.
    pub(super) async fn take_whole_time(
        first: Duration,
        gaps: &[Duration],
        luck: Luck,
    ) -> Result<(), AdapterError> {
        tokio::time::sleep(first + gaps.iter().sum::<Duration>()).await;
        if luck.reset {
            return Err(AdapterError::Reset {
                message: "simulated connection reset".into(),
            });
        }
        Ok(())
    }

    pub(super) fn scaled(d: Duration, luck: Luck) -> Duration {
        d.mul_f64(luck.scale)
    }

    /// Time to the first token and the gaps between the following ones.
    pub(super) fn schedule(
        &self,
        prompt_tokens: usize,
        cached: usize,
        outputs: usize,
        luck: Luck,
    ) -> (Duration, Vec<Duration>) {
        let first = Self::scaled(
            timing::ttft(&self.params, prompt_tokens - cached.min(prompt_tokens)),
            luck,
        ) + luck.stall;
        let gaps = (1..outputs.max(1))
            .map(|i| Self::scaled(timing::token_gap(&self.params, prompt_tokens, i), luck))
            .collect();
        (first, gaps)
    }

    /// llama.cpp-style `timings`, so tools built for llama-server read the
    /// simulator the same way.
    pub(super) fn timings(
        &self,
        prompt_tokens: usize,
        cached: usize,
        outputs: usize,
        first: Duration,
        gaps: &[Duration],
    ) -> Timings {
        let drafts = timing::draft_counts(&self.params, outputs);
        Timings {
            prompt_n: Some(json!(prompt_tokens - cached.min(prompt_tokens))),
            prompt_ms: Some(json!(first.as_secs_f64() * 1000.0)),
            cache_n: Some(json!(cached)),
            predicted_n: Some(json!(outputs)),
            predicted_ms: Some(json!(gaps.iter().sum::<Duration>().as_secs_f64() * 1000.0)),
            draft_n: drafts.map(|(drafted, _)| json!(drafted)),
            draft_n_accepted: drafts.map(|(_, accepted)| json!(accepted)),
            ..Timings::default()
        }
    }
}

impl Provider for SimBackend {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        self.chat_response(req).boxed()
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        self.chat_chunks(req).boxed()
    }

    fn completion(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        self.completion_response(req).boxed()
    }

    fn completion_stream(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionStream, AdapterError>> {
        self.completion_chunks(req).boxed()
    }

    fn embeddings(
        &self,
        req: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, AdapterError>> {
        self.embedding_response(req).boxed()
    }
}
