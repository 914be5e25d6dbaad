//! What each fuzz target does with its input: every parser that reads
//! outside input, and what the gateway does next with what it parsed.
//! None may panic or hang, whatever it is given; an error is a fine answer.
//!
//! Shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and by the
//! workspace test that replays the committed corpus on every CI run
//! (`gateway/tests/fuzz_corpus.rs`), so it uses only the workspace's crates
//! (the gateway's own, `switchyard`, among them) and what they depend on.
//! The gateway's targets call the functions its handlers call, never a
//! copy of them.

use std::convert::Infallible;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::Value;
use switchyard::admin::api;
use switchyard::admin::explain::explain_chat;
use switchyard::admit::access::{KeyStore, hash_key};
use switchyard::dispatch::endpoint::{Call, Endpoint};
use switchyard::http::request_id::{ClientRequestId, REQUEST_ID, RequestIdLayer};
use switchyard::ingress::chat::Chat;
use switchyard::ingress::completions::Completions;
use switchyard::ingress::embeddings::Embeddings;
use switchyard::ingress::messages::Messages;
use switchyard::ingress::responses::Responses;
use switchyard::ingress::responses_native::NativeResponses;
use switchyard::ledger::Window;
use switchyard::route::view::complete_view;
use switchyard_adapters::anthropic::{
    CountTokensRequest, EventsToChunks, MessageStream, MessagesRequest, chat_from_messages,
    messages_from_chat,
};
use switchyard_adapters::json::from_bytes;
use switchyard_adapters::responses::chat_from_responses;
use switchyard_adapters::sse::SseParser;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{
    ChatChunk, ChatRequest, CompletionRequest, EmbeddingRequest, Timings,
};
use switchyard_policies::Config;
use switchyard_router::Router;
use tower::{Layer, Service};

/// A target: takes any bytes, and must not panic.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory.
pub const TARGETS: [(&str, Target); 13] = [
    ("chat_body", chat_body),
    ("completion_body", completion_body),
    ("embedding_body", embedding_body),
    ("anthropic_messages", anthropic_messages),
    ("responses_body", responses_body),
    ("upstream_sse", upstream_sse),
    ("llama_timings", llama_timings),
    ("config_yaml", config_yaml),
    ("admin_query", admin_query),
    ("request_headers", request_headers),
    ("route_explain", route_explain),
    ("routed_body", routed_body),
    ("count_tokens_body", count_tokens_body),
];

/// An OpenAI chat body: parsed as the gateway parses it, its prompt sized
/// (estimated and counted) and translated to Anthropic Messages.
pub fn chat_body(data: &[u8]) {
    let read = from_bytes::<ChatRequest>(data);
    // The gateway's own reader declines a body or reads what serde reads.
    if let Some(fast) = switchyard_adapters::json::chat_request(data) {
        assert_eq!(
            Some(&fast),
            read.as_ref().ok(),
            "the reader and serde disagree"
        );
    }
    if let Ok(chat) = read {
        let _ = tokens::estimate_chat_prompt(&chat);
        let _ = tokens::count_chat_prompt(&chat);
        let _ = messages_from_chat(chat);
    }
}

/// A legacy completions body.
pub fn completion_body(data: &[u8]) {
    let _ = from_bytes::<CompletionRequest>(data);
}

/// An embeddings body and the texts it asks for.
pub fn embedding_body(data: &[u8]) {
    if let Ok(request) = from_bytes::<EmbeddingRequest>(data) {
        let _ = request.texts();
    }
}

/// An Anthropic Messages body: translated to chat, sized, and back.
pub fn anthropic_messages(data: &[u8]) {
    if let Ok(messages) = from_bytes::<MessagesRequest>(data)
        && let Ok(chat) = chat_from_messages(messages)
    {
        let _ = tokens::estimate_chat_prompt(&chat);
        let _ = messages_from_chat(chat);
    }
}

/// A Responses body, translated to chat.
pub fn responses_body(data: &[u8]) {
    if let Ok(value) = from_bytes::<Value>(data)
        && let Ok(chat) = chat_from_responses(&value)
    {
        let _ = tokens::estimate_chat_prompt(&chat);
    }
}

/// An upstream event stream, cut into pieces where the input says (its
/// first byte sets the piece size): the SSE parser, then each event as an
/// Anthropic event turned into chat chunks, and as a chat chunk turned into
/// Anthropic events.
pub fn upstream_sse(data: &[u8]) {
    let Some((&size, stream)) = data.split_first() else {
        return;
    };
    let mut parser = SseParser::new();
    let mut anthropic = EventsToChunks::default();
    let mut messages = MessageStream::new("fuzz", 0);
    for piece in stream.chunks(usize::from(size).max(1)) {
        for event in parser.feed(piece) {
            if let Ok(value) = serde_json::from_str::<Value>(&event.data) {
                let _ = anthropic.on_event(event.event.as_deref(), &value);
            }
            if let Ok(chunk) = serde_json::from_str::<ChatChunk>(&event.data) {
                let _ = messages.on_chunk(&chunk);
            }
        }
    }
    let _ = messages.finish();
}

/// llama.cpp's `timings` object and the rates read from it.
pub fn llama_timings(data: &[u8]) {
    if let Ok(timings) = from_bytes::<Timings>(data) {
        let _ = (
            timings.prompt_rate(),
            timings.predicted_rate(),
            timings.drafts(),
        );
    }
}

/// A config file: parsed and validated whole.
pub fn config_yaml(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_yaml(text, "fuzz");
    }
}

/// An admin API query string (`GET /admin/spend?since=7d&by=key` and the
/// rest), read by the functions the admin handlers read it with; and the
/// whole input as the CLI's `--since`.
pub fn admin_query(data: &[u8]) {
    // A request's query is text: the URI parser refuses bytes that are not.
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    let _ = switchyard::ledger::parse_since(query);
    let _ = api::since_param(query, "7d");
    let _ = api::by_param(query, "key", api::parse_dimension);
    let _ = api::by_param(query, "profile", api::parse_attainment_dimension);
    let _ = api::target_param(query);
    for name in ["route", "name", "widen"] {
        let _ = api::query_value(query, name);
    }
    if let Some(window) = api::query_value(query, "window") {
        let _ = Window::named(&window);
    }
}

/// The request headers the gateway reads from clients, one value per line
/// of the input, given in turn to the names below (a line that is no valid
/// header value is left out, as the HTTP parser would refuse it): the
/// key (Bearer, Basic or `x-api-key`), the session and request ids, the
/// profile, a routing rule's header, the caller's trace context and the
/// Anthropic protocol headers, then the routing decision they feed.
pub fn request_headers(data: &[u8]) {
    const NAMES: [&str; 14] = [
        "authorization",
        "x-api-key",
        "x-session-id",
        "x-claude-code-session-id",
        "session-id",
        "session_id",
        "x-switchyard-profile",
        "x-team",
        "x-request-id",
        "traceparent",
        "tracestate",
        "anthropic-version",
        "anthropic-beta",
        "cache-control",
    ];
    let mut headers = HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate() {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(HeaderName::from_static(NAMES[i % NAMES.len()]), value);
        }
    }
    let fixture = fixture();
    let _ = fixture.keys.authenticate(&headers);
    let _ = fixture.keys.is_admin(&headers);
    let _ = fixture.keys.is_admin_reader(&headers);
    for request in &fixture.requests {
        if let Ok(view) = complete_view(request.view(), &headers, request.hints(), &fixture.router)
        {
            let _ = fixture.router.decide(&view, 0.5);
        }
    }
    let mut forwarded = fixture.requests[0].clone();
    Messages::forward_headers(&mut forwarded, &headers);
    let _ = TraceContextPropagator::new().extract(&HeaderExtractor(&headers));
    request_id(&headers);
}

/// A caller's `x-request-id` through the gateway's request-id layer: kept
/// beside ours when plain, and on the answer either way.
fn request_id(headers: &HeaderMap) {
    struct Echo;
    impl Service<Request<()>> for Echo {
        type Response = Response<()>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<()>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: Request<()>) -> Self::Future {
            let mut response = Response::new(());
            if let Some(ClientRequestId(id)) = req.extensions().get::<ClientRequestId>() {
                response.headers_mut().insert("x-client-id", id.clone());
            }
            std::future::ready(Ok(response))
        }
    }
    let mut req = Request::new(());
    *req.headers_mut() = headers.clone();
    let mut future = std::pin::pin!(RequestIdLayer.layer(Echo).call(req));
    let Poll::Ready(Ok(response)) = future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    else {
        panic!("the request-id layer did not answer at once");
    };
    assert!(response.headers().contains_key(REQUEST_ID));
}

/// A `POST /v1/route/explain` body, explained as the endpoint (and
/// `switchyard explain`) explains it.
pub fn route_explain(data: &[u8]) {
    let fixture = fixture();
    if let Ok(explanation) = explain_chat(&fixture.router, data, &HeaderMap::new()) {
        let _ = serde_json::to_value(&explanation);
    }
}

/// A model call's body in every dialect, as its endpoint takes it: decoded
/// (and translated), checked, seen by the router and routed.
pub fn routed_body(data: &[u8]) {
    routed::<Chat>(data);
    routed::<Messages>(data);
    routed::<Responses>(data);
    routed::<NativeResponses>(data);
    routed::<Completions>(data);
    routed::<Embeddings>(data);
}

fn routed<E: Endpoint>(data: &[u8]) {
    let fixture = fixture();
    let headers = HeaderMap::new();
    let Ok(request) = E::decode(data) else {
        return;
    };
    if request.validate().is_err() {
        return;
    }
    let _ = request.prefix_chain();
    if let Ok(view) = complete_view(request.view(), &headers, request.hints(), &fixture.router) {
        let _ = fixture.router.decide(&view, 0.5);
    }
}

/// A `POST /v1/messages/count_tokens` body, counted as the endpoint counts
/// it.
pub fn count_tokens_body(data: &[u8]) {
    if let Ok(request) = from_bytes::<CountTokensRequest>(data)
        && let Ok(chat) = chat_from_messages(request.into_messages())
    {
        let _ = tokens::count_chat_prompt(&chat);
    }
}

/// What the gateway's targets route with: a router of every kind of route,
/// one rule reading a header, and a key store with a key and an admin key.
struct Fixture {
    router: Router,
    keys: KeyStore,
    /// A request to each route.
    requests: Vec<ChatRequest>,
}

const FIXTURE_CONFIG: &str = "
backends:
  small: {tier: small, sim: {preset: small}}
  mid: {tier: mid, sim: {preset: mid}}
  large: {tier: cloud, sim: {preset: large}, price: {input_per_mtok: 2.5, output_per_mtok: 10}}
routes:
  auto:
    strategy:
      split:
        weights: {small: 40, mid: 40, large: 20}
  share:
    strategy:
      target_share: {hard: large, easy: small, share: 0.2}
  ruled:
    strategy:
      rules:
        - when: {header: {name: x-team, value: research}}
          to: large
        - when: {tools: true, min_prompt_tokens: 4000}
          to: large
        - when: {regex: '(?i)\\bprove\\b|theorem'}
          to: large
        - when: {similar_to: {examples: [write a python function, fix this bug]}}
          to: mid
        - to: small
  learned:
    strategy:
      learned: {predictor: p, easy: small, hard: large, escalate_on: [length, empty]}
predictors:
  p: {backend: small}
";

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let hash = |key: &str| -> String {
            let hex: String = hash_key(key).iter().map(|b| format!("{b:02x}")).collect();
            format!("'sha256:{hex}'")
        };
        let yaml = format!(
            "{FIXTURE_CONFIG}auth:\n  admin_key_hash: {}\n  keys:\n    - {{name: alice, hash: {}}}\n",
            hash("sk-admin"),
            hash("sk-alice"),
        );
        let config = match Config::from_yaml(&yaml, "fuzz") {
            Ok(config) => config,
            Err(err) => panic!("the fuzz fixture's config: {err}"),
        };
        let requests = ["auto", "share", "ruled", "learned"]
            .into_iter()
            .filter_map(|model| {
                let body = serde_json::json!({
                    "model": model,
                    "messages": [{"role": "user", "content": "prove this theorem"}],
                });
                from_bytes::<ChatRequest>(body.to_string().as_bytes()).ok()
            })
            .collect();
        Fixture {
            router: Router::new(&config),
            keys: KeyStore::new(&config.auth),
            requests,
        }
    })
}
