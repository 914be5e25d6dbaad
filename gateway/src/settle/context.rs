//! Who asked and how a request was routed: what every backend call it
//! makes shares (`RequestContext`).

use std::sync::{Arc, Mutex, OnceLock};
use switchyard_router::sensitive::Handling;

use tokio::sync::oneshot;

use http::HeaderValue;
use http::request::Parts;
use switchyard_policies::{Profile, PromptClass};
use switchyard_router::Decision;
use switchyard_router::latency::Shape;
use switchyard_router::prefix::{PrefixChain, Tenant};

use crate::admit::access::Caller;
use crate::admit::admission::Size;
use crate::error::Dialect;
use crate::http::request_id::request_ids;
use crate::ledger::BatchId;
use crate::settle::refusal::Accounted;
use crate::state::app::App;
use crate::telemetry::RequestTrace;

/// Where a request's prompt text comes from when its tokens must be
/// counted (the backend reported no usage): the request itself, so the
/// text is built only then, not for every request.
pub trait PromptSource: Send + Sync {
    /// The prompt as text, and the tokens the chat template adds.
    fn prompt_for_count(&self) -> (String, usize);
    /// The request's `temperature` and `top_p`, for its attempts' spans.
    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// The prompt's texts in the order a model reads them (for a
    /// guardrail hook after the call): by default the prompt as one text.
    fn texts(&self) -> Vec<String> {
        vec![self.prompt_for_count().0]
    }
}

/// A prompt already in hand as text (embeddings' inputs; none at all for
/// pass-through endpoints).
impl PromptSource for (String, usize) {
    fn prompt_for_count(&self) -> (String, usize) {
        self.clone()
    }
}

/// Who asked and how the request was routed: the same for every backend a
/// request tries, so shared among their records.
pub struct RequestContext {
    pub endpoint: &'static str,
    pub dialect: Dialect,
    /// The model name the caller asked for.
    pub model: String,
    /// The request's `x-request-id` (a shared copy of the header's bytes).
    pub request_id: Option<HeaderValue>,
    /// The caller's own id, when it was kept.
    pub client_request_id: Option<HeaderValue>,
    pub caller: Option<Caller>,
    pub route: Option<Arc<str>>,
    pub profile: Option<&'static str>,
    /// The prompt, for counting when the backend reports no usage.
    pub prompt: Arc<dyn PromptSource>,
    /// Tokens estimated at admission (for the tokens-per-minute limit).
    pub estimated_tokens: u32,
    /// Code or prose, for speculative-decoding figures.
    pub class: PromptClass,
    /// The prompt's prefix chain, for the prefix index.
    pub prefix: Option<Arc<PrefixChain>>,
    /// The caller's salts for prefixes shared per key or team.
    pub tenant: Tenant,
    /// Prompt tokens as estimated at routing.
    pub prompt_tokens: u32,
    /// The part of `prompt_tokens` that is image, audio and file parts
    /// (estimated once, when the request was viewed for routing).
    pub media_tokens: u32,
    /// The route's number in the config the request was routed under, and
    /// the use case: what the answer's length teaches.
    pub route_number: Option<usize>,
    pub use_case: Option<Profile>,
    /// The first target, and the prompt tokens routing expected it to hold
    /// cached (not looked up again when the call goes there).
    pub(crate) first_target: Option<(usize, u32)>,
    /// The list price of the model a wildcard route named, for backends
    /// priced by the list (see `Size::listed_price`).
    pub listed_price: Option<Option<switchyard_policies::TokenPrice>>,
    /// The caller's session, and whether the request carried tool results.
    pub session: Option<Arc<str>>,
    /// The batch whose line this is, if any.
    pub batch: Option<Arc<str>>,
    pub tool_results: bool,
    /// The request's refusal guard, told when a record takes over its row.
    pub(crate) accounted: Option<Arc<Accounted>>,
    /// The request's SERVER span, when traces are on.
    pub trace: Option<RequestTrace>,
    /// The output tokens asked for, and whether the answer streams: for
    /// the attempts' spans.
    pub max_tokens: Option<u32>,
    pub streaming: bool,
    /// Where the served answer's text goes when a shadow copy of the
    /// request waits to compare with it (set once, when a copy is sent).
    pub(crate) shadow_tap: OnceLock<ServedTap>,
    /// What the request's sensitive-data policies found and did: the
    /// kinds for its rows, the masker for its calls.
    pub sensitive: Option<Arc<Handling>>,
}

/// The served answer's text, handed to the shadow copy that compares with
/// it; dropped unsent (and the copy told so) when no call answered.
/// Shared by the request's records: the one that answers sends.
pub struct ServedTap(Mutex<Option<oneshot::Sender<Option<String>>>>);

impl ServedTap {
    pub fn new(sender: oneshot::Sender<Option<String>>) -> Self {
        ServedTap(Mutex::new(Some(sender)))
    }

    /// Hands over the answer's text (`None`: too long to have been kept),
    /// once.
    pub fn send(&self, text: Option<String>) {
        let sender = self.0.lock().ok().and_then(|mut s| s.take());
        if let Some(sender) = sender {
            let _ = sender.send(text);
        }
    }
}

impl RequestContext {
    /// The context of a request routed by `decision`, with the caller, the
    /// request id and the route taken from the request and the decision.
    pub fn new(
        app: &App,
        parts: &Parts,
        (endpoint, dialect): (&'static str, Dialect),
        model: String,
        decision: &Decision,
        prompt: Arc<dyn PromptSource>,
    ) -> Arc<Self> {
        let accounted = parts.extensions.get::<Arc<Accounted>>().cloned();
        if let Some(accounted) = &accounted {
            accounted.decided(app, decision);
        }
        // Read from the request once, as it came in, for a model request.
        let (request_id, client_request_id) = match &accounted {
            Some(accounted) => accounted.request_ids(),
            None => request_ids(&parts.headers, &parts.extensions),
        };
        Arc::new(RequestContext {
            endpoint,
            dialect,
            model,
            request_id,
            client_request_id,
            caller: parts.extensions.get::<Caller>().cloned(),
            route: decision.route.map(|r| app.router.shared_route_name(r)),
            profile: decision.features.profile.map(|p| p.name()),
            prompt,
            estimated_tokens: Size::of(&decision.features).estimated_tokens(),
            class: decision.features.prompt_class(),
            prefix: decision.features.prefix.clone(),
            tenant: decision.features.tenant,
            prompt_tokens: decision.features.prompt_tokens,
            media_tokens: decision.features.media_tokens,
            route_number: decision.route,
            use_case: decision.features.profile,
            first_target: Some((decision.primary(), decision.expected_cached_tokens)),
            listed_price: Size::of_decision(decision).listed_price,
            session: decision.features.session.clone(),
            batch: parts.extensions.get::<BatchId>().map(|b| b.0.clone()),
            tool_results: decision.features.tool_results,
            accounted,
            trace: parts.extensions.get::<RequestTrace>().cloned(),
            max_tokens: decision.features.max_tokens,
            streaming: decision.features.streaming,
            shadow_tap: OnceLock::new(),
            sensitive: decision.sensitive.clone(),
        })
    }

    /// The request as `backend`'s latency model sees it: the work it adds
    /// there while it waits and runs.
    pub fn shape(&self, app: &App, backend: usize) -> Shape {
        Shape {
            prompt_tokens: self.prompt_tokens,
            cached_tokens: match (self.first_target, &self.prefix) {
                (Some((first, cached)), _) if first == backend => cached,
                (_, Some(chain)) => {
                    app.router
                        .cached_tokens(backend, chain, self.tenant, self.prompt_tokens)
                }
                (_, None) => 0,
            },
            output_tokens: app.router.output_lengths().expect(
                self.route_number,
                Some(backend),
                self.use_case,
                self.max_tokens,
            ),
            class: self.class,
        }
    }
}

impl RequestContext {
    /// The context of a call the gateway makes to route a request (an
    /// encoder's embeddings): the request's caller and ids, no route. It
    /// does not stand in for the request's own row: a refusal of the
    /// request itself still leaves one. `sensitive`: what the request's
    /// policies found, when the call reads the request's text.
    pub fn for_routing_call(
        parts: &Parts,
        endpoint: &'static str,
        model: String,
        (prompt, prompt_tokens): (Arc<dyn PromptSource>, u32),
        sensitive: Option<Arc<Handling>>,
    ) -> Arc<Self> {
        let (request_id, client_request_id) = request_ids(&parts.headers, &parts.extensions);
        Arc::new(RequestContext {
            endpoint,
            dialect: Dialect::OpenAi,
            model,
            request_id,
            client_request_id,
            caller: parts.extensions.get::<Caller>().cloned(),
            route: None,
            profile: None,
            prompt,
            estimated_tokens: prompt_tokens,
            class: PromptClass::Prose,
            prefix: None,
            tenant: Tenant::default(),
            prompt_tokens,
            media_tokens: 0,
            route_number: None,
            use_case: None,
            first_target: None,
            listed_price: None,
            session: None,
            batch: parts.extensions.get::<BatchId>().map(|b| b.0.clone()),
            tool_results: false,
            accounted: None,
            trace: parts.extensions.get::<RequestTrace>().cloned(),
            max_tokens: None,
            streaming: false,
            shadow_tap: OnceLock::new(),
            sensitive,
        })
    }
}

impl RequestContext {
    /// The context of a shadow copy of this request: the same request,
    /// route and ids (so the copy's row pairs with the served one), but no
    /// caller, so nothing of it reaches the caller's budgets, rate limits
    /// or refusal guard, and no span of the caller's trace.
    pub fn for_shadow(&self) -> Arc<Self> {
        Arc::new(RequestContext {
            endpoint: self.endpoint,
            dialect: self.dialect,
            model: self.model.clone(),
            request_id: self.request_id.clone(),
            client_request_id: self.client_request_id.clone(),
            caller: None,
            route: self.route.clone(),
            profile: self.profile,
            prompt: self.prompt.clone(),
            estimated_tokens: self.estimated_tokens,
            class: self.class,
            prefix: self.prefix.clone(),
            tenant: self.tenant,
            prompt_tokens: self.prompt_tokens,
            media_tokens: self.media_tokens,
            route_number: self.route_number,
            use_case: self.use_case,
            first_target: None,
            listed_price: self.listed_price,
            session: self.session.clone(),
            batch: self.batch.clone(),
            tool_results: self.tool_results,
            accounted: None,
            trace: None,
            max_tokens: self.max_tokens,
            streaming: self.streaming,
            shadow_tap: OnceLock::new(),
            sensitive: self.sensitive.clone(),
        })
    }
}
