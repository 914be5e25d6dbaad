//! The exact response cache (opt-in per route): answers keyed by the
//! canonical request (model, messages, tools, sampling parameters) and by who
//! may share them (the key, its team, or everyone), kept for deterministic
//! requests only (temperature 0 or a seed) unless the route says otherwise.
//! Streamed and whole answers are kept apart: a cached stream is replayed
//! chunk by chunk through the caller's dialect encoder.
//!
//! The endpoint plumbing is generic; only chat-shaped endpoints (chat,
//! Messages, Responses through chat) cache, found by downcasting.

use std::any::Any;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::Response;
use http::request::Parts;
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse};
use switchyard_policies::CacheShare;
use switchyard_router::Decision;
use xxhash_rust::xxh3::xxh3_128;

use crate::admit::access::Caller;
use crate::dispatch::endpoint::Endpoint;
use crate::dispatch::response_store::{Cached, CachedAnswer, ResponseCache};
use crate::dispatch::stream;
use crate::http::{Body, sse_response};
use crate::settle::context::RequestContext;
use crate::settle::record::RequestRecord;
use crate::state::app::App;
use switchyard_adapters::types::{CanonicalRequest, CanonicalResponse};

/// One request's place in its route's cache.
pub struct Slot {
    cache: Arc<ResponseCache>,
    key: u128,
    /// `cache-control: no-cache`: answer fresh (and keep the answer).
    lookup: bool,
}

impl Slot {
    /// For a request on a caching route, unless it is not cacheable: not
    /// chat-shaped, sampled (without `any_temperature`), several choices, or
    /// `cache-control: no-store`.
    pub fn of(app: &App, parts: &Parts, request: &dyn Any, decision: &Decision) -> Option<Slot> {
        let cache = app.response_caches.get(decision.route?)?.clone()?;
        let request = request.downcast_ref::<ChatRequest>()?;
        let deterministic = request.temperature == Some(0.0) || request.seed.is_some();
        if !(deterministic || cache.settings.any_temperature) || request.n.is_some_and(|n| n > 1) {
            return None;
        }
        let directives = parts
            .headers
            .get_all(http::header::CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|d| d.trim().to_ascii_lowercase())
            .collect::<Vec<_>>();
        if directives.iter().any(|d| d == "no-store") {
            return None;
        }
        let scope = scope(parts.extensions.get::<Caller>(), cache.settings.share);
        let key = key(&scope, request);
        Some(Slot {
            cache,
            key,
            lookup: !directives.iter().any(|d| d == "no-cache"),
        })
    }

    /// Whether the cache is read for this request (not under `no-cache`).
    pub fn looks_up(&self) -> bool {
        self.lookup
    }

    pub fn get(&self) -> Option<Arc<Cached>> {
        self.lookup
            .then(|| self.cache.entries.get(&self.key))
            .flatten()
    }

    /// Keeps a whole answer (chat-shaped ones only).
    pub fn put_whole(&self, answer: &dyn Any, backend: Arc<str>) {
        if let Some(resp) = answer.downcast_ref::<ChatResponse>() {
            let mut resp = resp.clone();
            // The backend's bytes may be a slice of a larger read buffer;
            // a cached copy holds only the answer.
            resp.verbatim = resp.verbatim.map(|b| Bytes::copy_from_slice(&b));
            self.put(CachedAnswer::Whole(Box::new(resp)), backend);
        }
    }

    pub fn put_stream(&self, chunks: Vec<ChatChunk>, backend: Arc<str>) {
        self.put(CachedAnswer::Stream(chunks), backend);
    }

    fn put(&self, answer: CachedAnswer, backend: Arc<str>) {
        self.cache
            .entries
            .insert(self.key, Arc::new(Cached { answer, backend }));
    }
}

/// Who may share an answer: the key, the key's team, or everyone. Without
/// auth every caller is the same anonymous caller.
fn scope(caller: Option<&Caller>, share: CacheShare) -> String {
    let Some(caller) = caller else {
        return "anonymous".to_owned();
    };
    match (share, &caller.key.team) {
        (CacheShare::Everyone, _) => "*".to_owned(),
        (CacheShare::Team, Some(team)) => format!("team:{team}"),
        _ => format!("key:{}", caller.key.name),
    }
}

/// The canonical request: the typed request re-serialised (so key order and
/// spacing do not matter), with whether it streams but not how.
fn key(scope: &str, request: &ChatRequest) -> u128 {
    let mut canonical = request.clone();
    let stream = canonical.is_stream();
    canonical.stream = None;
    canonical.stream_options = None;
    let mut bytes = Vec::with_capacity(4096);
    bytes.extend_from_slice(scope.as_bytes());
    bytes.push(0);
    bytes.push(u8::from(stream));
    // Our canonical types always serialise (string keys only).
    let _ = serde_json::to_writer(&mut bytes, &canonical);
    xxh3_128(&bytes)
}

/// The cached answer as this endpoint sends it (whole, or as a stream
/// through the caller's dialect encoder), with its ledger row under
/// `backend` (the number of the backend that gave it): free, marked a
/// cache hit. `None` when the endpoint is not chat-shaped.
pub async fn replay<E: Endpoint>(
    app: &App,
    mut request: E::Request,
    context: Arc<RequestContext>,
    (cached, backend): (&Cached, usize),
    decision: &Decision,
) -> Option<Response<Body>> {
    let mut record = RequestRecord::cache_hit(app, context, backend, decision.reason);
    match &cached.answer {
        CachedAnswer::Whole(resp) => {
            let resp: E::Response = downcast(ChatResponse::clone(resp))?;
            record.whole_answer();
            record.usage(resp.usage());
            record.finish("ok");
            Some(match record.write_after_reply().await {
                Ok(()) => E::respond(&request, &resp),
                Err(err) => err.into_response_for(E::DIALECT),
            })
        }
        CachedAnswer::Stream(chunks) => {
            let chunks: Vec<E::Chunk> = chunks
                .iter()
                .map(|c| downcast(c.clone()))
                .collect::<Option<_>>()?;
            let client_wants_usage = request.request_stream_usage();
            let encoder = E::encoder(
                &request,
                client_wants_usage,
                request.model(),
                decision.features.prompt_tokens,
            );
            let chunks = futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed();
            Some(sse_response(stream::encode::<E>(
                chunks, encoder, record, None, None,
            )))
        }
    }
}

/// `value` as type `U`, when `T` is `U`.
fn downcast<T: 'static, U: 'static>(value: T) -> Option<U> {
    (Box::new(value) as Box<dyn Any>)
        .downcast::<U>()
        .ok()
        .map(|b| *b)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_ignore_spacing_and_key_order_but_not_content_or_scope() {
        let a: ChatRequest = serde_json::from_value(
            json!({"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .unwrap();
        let b: ChatRequest = serde_json::from_str(
            r#"{ "messages" : [ {"content":"hi","role":"user"} ], "temperature":0, "model":"m" }"#,
        )
        .unwrap();
        assert_eq!(key("k", &a), key("k", &b));
        assert_ne!(key("k", &a), key("other", &a));
        let mut streamed = a.clone();
        streamed.stream = Some(true);
        assert_ne!(key("k", &a), key("k", &streamed));
        let mut other = a.clone();
        other.temperature = Some(0.5);
        assert_ne!(key("k", &a), key("k", &other));
    }
}
