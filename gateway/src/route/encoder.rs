//! Embeddings that semantic rules with an `encoder` need: the request's last
//! user message by each encoder backend, and (once per rule) the rule's
//! example prompts. These are calls the gateway makes on the request's
//! behalf, so they go through the same admission as any backend call (the
//! encoder's breaker and capacity, the caller's budgets) and each is a
//! ledger row billed to the caller's key, with `endpoint` `encoder` and
//! `reason` `routing-encoder`. An encoder that fails or is refused is
//! logged and its rules simply do not match: routing never fails because
//! an encoder did.

use std::sync::Arc;
use switchyard_adapters::upstream::with_trace_context;
use switchyard_router::latency::Shape;

use http::request::Parts;
use serde_json::Value;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{EmbeddingRequest, EmbeddingResponse, Usage};
use switchyard_router::prefix::Tenant;
use switchyard_router::sensitive::Handling;
use switchyard_router::{Reason, RequestView};

use crate::admit::access::Caller;
use crate::admit::admission::{Size, admit_call};
use crate::admit::priority::Class;
use crate::error::GatewayError;
use crate::settle::context::RequestContext;
use crate::settle::record::RequestRecord;
use crate::state::app::App;

/// The ledger's `endpoint` for calls made to route a request.
pub const ENCODER_ENDPOINT: &str = "encoder";

/// The vectors semantic rules read, by encoder backend, and the encoders
/// called (for `/v1/route/explain` to say so).
pub async fn encode_for_routing(
    app: &App,
    parts: &Parts,
    view: &RequestView<'_>,
    sensitive: Option<&Arc<Handling>>,
) -> (Vec<(usize, Vec<f32>)>, Vec<usize>) {
    let encoders = app.router.encoders_for(view.model);
    if encoders.is_empty() {
        return (Vec::new(), Vec::new());
    }
    // Boxed: the encoders' calls are kilobytes of state, which would
    // otherwise be part of every request's future (copied whole into its
    // box as each request starts), encoders or not.
    Box::pin(encode(app, parts, view, sensitive, encoders)).await
}

async fn encode(
    app: &App,
    parts: &Parts,
    view: &RequestView<'_>,
    sensitive: Option<&Arc<Handling>>,
    encoders: Vec<usize>,
) -> (Vec<(usize, Vec<f32>)>, Vec<usize>) {
    let mut called = Vec::new();
    for (rule, encoder, examples) in app.router.missing_examples(view.model) {
        // A rule's examples are the config's text, not the request's.
        if let Some(vectors) = embed_texts(app, parts, (encoder, None), examples, &mut called).await
        {
            app.router.provide_examples(view.model, rule, vectors);
        }
    }
    let mut encoded = Vec::with_capacity(encoders.len());
    for encoder in encoders {
        let Some(text) = crate::route::sensitive::for_encoder(
            app,
            sensitive.map(|h| &**h),
            encoder,
            view.last_user_text,
        ) else {
            continue;
        };
        let text = [text];
        if let Some(mut vectors) = embed_texts(
            app,
            parts,
            (encoder, sensitive.cloned()),
            &text,
            &mut called,
        )
        .await
            && let Some(vector) = vectors.pop()
        {
            encoded.push((encoder, vector));
        }
    }
    (encoded, called)
}

/// The vectors of `texts` by `encoder`; `called` gains the encoder when it
/// was called (once), whatever it answered.
/// `sensitive`: what the request's sensitive-data policies found, for the
/// call's row, when `texts` are the request's own.
async fn embed_texts(
    app: &App,
    parts: &Parts,
    (encoder, sensitive): (usize, Option<Arc<Handling>>),
    texts: &[String],
    called: &mut Vec<usize>,
) -> Option<Vec<Vec<f32>>> {
    let backend = &app.backends[encoder];
    let prompt_tokens: usize = texts.iter().map(|t| tokens::estimate(t)).sum();
    let prompt_tokens = u32::try_from(prompt_tokens).unwrap_or(u32::MAX);
    let size = Size {
        prompt_tokens,
        max_tokens: Some(0),
        choices: 1,
        media_tokens: 0,
        media_unknown_size: false,
        listed_price: None,
    };
    let caller = parts.extensions.get::<Caller>();
    // Embeddings: a prompt to read, no output.
    let shape = Shape {
        prompt_tokens,
        ..Shape::default()
    };
    let (reservation, admission) = match admit_call(
        app,
        caller,
        encoder,
        // Short, and on the path of the request it routes: served as
        // interactive whatever that request's class.
        (size, &shape, Class::Interactive),
        None,
        Tenant::default(),
    )
    .await
    {
        Ok(admitted) => admitted,
        Err(refused) => {
            let refused = GatewayError::from(refused);
            tracing::warn!(encoder = %backend.name, error = %refused.caller_message(), "routing encoder not called; its rules will not match");
            return None;
        }
    };
    let context = RequestContext::for_routing_call(
        parts,
        ENCODER_ENDPOINT,
        backend.name.clone(),
        (Arc::new((texts.join("\n"), 0)), prompt_tokens),
        sensitive,
    );
    let record = RequestRecord::new(
        app,
        context,
        encoder,
        Reason::RoutingEncoder,
        reservation,
        &admission,
        None,
    );
    let request = EmbeddingRequest {
        model: backend.upstream_model.clone(),
        input: Value::Array(texts.iter().map(|t| Value::String(t.clone())).collect()),
        encoding_format: Some("float".into()),
        dimensions: None,
        user: None,
        extra: Default::default(),
    };
    if !called.contains(&encoder) {
        called.push(encoder);
    }
    let embedded = with_trace_context(
        record.trace_context(),
        admission.provider.embeddings(request),
    )
    .await;
    let usage = |r: &EmbeddingResponse| r.usage.as_ref().map(|u| Usage::new(u.prompt_tokens, 0));
    let response = match record.settle_whole(embedded, usage).await {
        Ok(response) => response,
        Err(err) => {
            // The backend's own words only at debug, redacted.
            err.log_detail();
            tracing::warn!(encoder = %backend.name, error = %err.caller_message(), "routing encoder failed; its rules will not match");
            return None;
        }
    };
    let mut data = response.data;
    data.sort_by_key(|e| e.index);
    let vectors: Vec<Vec<f32>> = data
        .iter()
        .map(|e| {
            e.embedding.as_array().map(|xs| {
                xs.iter()
                    .filter_map(Value::as_f64)
                    .map(|x| x as f32)
                    .collect()
            })
        })
        .collect::<Option<_>>()?;
    (vectors.len() == texts.len()).then_some(vectors)
}
