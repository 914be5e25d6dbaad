//! Admission: the checks every model request passes once routed, and the
//! one step every backend call goes through before it is sent (the
//! backend's breaker, the caller's budgets, the backend's capacity). The
//! endpoints, fallbacks, hedges and the Responses pass-through all call
//! these, so none can skip a policy.

use std::sync::Arc;

use switchyard_policies::{Pricing, PromptClass, TokenCounts, TokenPrice};
use switchyard_router::latency::LatencyStore;
use switchyard_router::latency::Shape;
use switchyard_router::prefix::{PrefixChain, Tenant};
use switchyard_router::{Decision, Features, Reason, Target};

use crate::admit::access::{Caller, Exhausted, Refused, Reservation};
use crate::admit::capacity::Admission;
use crate::admit::priority::Class;
use crate::error::GatewayError;
use crate::settle::billed_fields;
use crate::state::app::App;
use crate::state::backends::BackendHandle;

/// Refuses a model (route, alias or backend name) the caller's key or team
/// may not ask for (`models:`), naming it and what the key may use. A name
/// that is no model at all is left to routing's 404. Checked before any
/// routing work (an encoder's call costs money).
/// For a request that names a model without calling it (token counting):
/// the model must be one this gateway serves and the caller may name,
/// refused as a call to it would be.
pub fn check_known_model(
    app: &App,
    caller: Option<&Caller>,
    model: &str,
) -> Result<(), GatewayError> {
    check_model(app, caller, model)?;
    match app.router.target(model) {
        None => {
            let unknown = GatewayError::UnknownModel {
                model: model.to_owned(),
                available: app.router.model_names().to_vec(),
            };
            // A key that may only use routes is told only of routes.
            Err(for_caller(unknown, app, caller))
        }
        Some(switchyard_router::Target::Backend(i))
            if caller.is_some_and(|c| !c.key.may_name_backends) =>
        {
            Err(backend_not_allowed(app, i))
        }
        Some(_) => Ok(()),
    }
}

pub fn check_model(app: &App, caller: Option<&Caller>, model: &str) -> Result<(), GatewayError> {
    let Some(caller) = caller else {
        return Ok(());
    };
    if app.keys.may_use(caller, model) || app.router.target(model).is_none() {
        return Ok(());
    }
    Err(GatewayError::ModelNotAllowed {
        model: model.to_owned(),
        allowed: usable_names(app, caller),
    })
}

/// The model names `caller` may ask for: those its key's and team's
/// `models` let through, and only routes for a key that may not name
/// backends.
pub fn usable_names(app: &App, caller: &Caller) -> Vec<String> {
    app.router
        .model_names()
        .iter()
        .filter(|m| app.keys.may_use(caller, m))
        .filter(|m| {
            caller.key.may_name_backends
                || app
                    .router
                    .target(m)
                    .is_some_and(|t| matches!(t, Target::Route(_)))
        })
        .cloned()
        .collect()
}

/// Refuses a backend named directly by a key that may only use routes.
pub fn check_direct(
    app: &App,
    caller: Option<&Caller>,
    decision: &Decision,
) -> Result<(), GatewayError> {
    let Some(caller) = caller else {
        return Ok(());
    };
    if decision.reason != Reason::Direct || caller.key.may_name_backends {
        return Ok(());
    }
    Err(backend_not_allowed(app, decision.primary()))
}

/// The refusal of backend `i` to a key that may only use routes: it names
/// the backend the key asked for and the routes it may use, nothing else.
pub fn backend_not_allowed(app: &App, i: usize) -> GatewayError {
    GatewayError::BackendNotAllowed {
        backend: app.router.backends()[i].clone(),
        routes: route_names(app),
    }
}

/// A routing error as the caller may see it: a key is told only of the
/// models it may use when its model does not exist (as `/v1/models` lists
/// only those to it).
pub fn for_caller(err: GatewayError, app: &App, caller: Option<&Caller>) -> GatewayError {
    match (err, caller) {
        (GatewayError::UnknownModel { model, .. }, Some(caller)) => GatewayError::UnknownModel {
            model,
            available: usable_names(app, caller),
        },
        (other, _) => other,
    }
}

/// Every route name and alias.
fn route_names(app: &App) -> Vec<String> {
    app.router
        .model_names()
        .iter()
        .filter(|m| {
            app.router
                .target(m)
                .is_some_and(|t| matches!(t, Target::Route(_)))
        })
        .cloned()
        .collect()
}

/// The checks of a routed request as a whole, before any backend call:
/// how many answers it asks for, and the key's tokens per minute (and,
/// when limits are shared, its requests per minute, in the same call).
pub fn admit_request(app: &App, caller: Option<&Caller>, size: Size) -> Result<(), GatewayError> {
    app.check_choices(size.choices)?;
    if app.ledger.refusing() {
        // `ledger.postgres.on_full: refuse`: nothing is served unrecorded.
        return Err(GatewayError::Overloaded {
            what: "the ledger's database is unreachable and its spool is full".into(),
        });
    }
    if let Some(caller) = caller {
        app.rates.admit(caller, size.estimated_tokens())?;
    }
    Ok(())
}

/// Why a backend call could not start.
pub enum NotAdmitted {
    /// A budget cannot hold the call's worst case.
    Budget(Exhausted),
    /// The backend's circuit is open, or it is at its concurrency limit and
    /// queue: another backend may take the request.
    Unavailable(GatewayError),
    /// Refused whichever backend it goes to: a shared rate limit, or the
    /// shared store away under `fail_closed`.
    Refused(GatewayError),
}

/// Everything a backend call needs before it is sent: the caller's budgets
/// hold its worst case, the backend's breaker allows it, and the gateway
/// and the backend have room (waiting in the backend's queue). `prefix`
/// and `tenant` choose the replica that holds the prompt.
///
/// The breaker is asked after the budgets, and told when the call does not
/// start after all: in half-open it lets one probe through, and a call
/// refused after taking that place would hold the circuit for every caller
/// until the next cooldown.
/// `shape`: the request as the backend's latency model sees it; `class`:
/// its place in the backend's queue.
pub async fn admit_call(
    app: &App,
    caller: Option<&Caller>,
    backend_index: usize,
    (size, shape, class): (Size, &Shape, Class),
    prefix: Option<&Arc<PrefixChain>>,
    tenant: Tenant,
) -> Result<(Option<Reservation>, Admission), NotAdmitted> {
    let backend = &app.backends[backend_index];
    if backend.pricing_for(size.listed_price) == Pricing::Unpriced
        && let Some(caller) = caller
        && app.budgets.applies(&caller.key, backend.is_cloud())
    {
        return Err(NotAdmitted::Unavailable(GatewayError::UnpricedForBudget {
            backend: backend.name.clone(),
        }));
    }
    let reservation = match caller {
        None => None,
        Some(caller) => Some(
            app.budgets
                .hold(
                    &app.rates,
                    caller,
                    backend.is_cloud(),
                    worst_cost(app, backend_index, size),
                )
                .await
                .map_err(|refused| match refused {
                    Refused::Exhausted(exhausted) => NotAdmitted::Budget(exhausted),
                    Refused::Limited(limited) => NotAdmitted::Refused(limited),
                    Refused::Unavailable => {
                        NotAdmitted::Refused(GatewayError::SharedStateUnavailable {
                            what: "budget and rate limit",
                        })
                    }
                })?,
        ),
    };
    if !backend.breaker.allow() {
        return Err(NotAdmitted::Unavailable(GatewayError::Overloaded {
            what: format!("backend `{}` is failing; its circuit is open", backend.name),
        }));
    }
    match app
        .admit(backend_index, (shape, class), prefix, tenant)
        .await
    {
        Ok(admission) => Ok((reservation, admission)),
        Err(full) => {
            backend.breaker.inconclusive();
            Err(NotAdmitted::Unavailable(full))
        }
    }
}

impl From<NotAdmitted> for GatewayError {
    fn from(refused: NotAdmitted) -> Self {
        match refused {
            NotAdmitted::Budget(exhausted) => exhausted.into(),
            NotAdmitted::Unavailable(err) | NotAdmitted::Refused(err) => err,
        }
    }
}

/// A request's size as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub prompt_tokens: u32,
    /// The limit on each answer's output.
    pub max_tokens: Option<u32>,
    /// Answers generated (`n`, `best_of`), each up to `max_tokens`.
    pub choices: u32,
    /// Image, audio and file parts: their tokens (in `prompt_tokens`), and
    /// whether some could not be sized.
    pub media_tokens: u32,
    pub media_unknown_size: bool,
    /// The built-in list's price of the model a wildcard route named
    /// (`Some(None)`: not on the list), for backends priced by the list.
    pub listed_price: Option<Option<TokenPrice>>,
}

impl Size {
    pub fn of(features: &Features) -> Self {
        Size {
            prompt_tokens: features.prompt_tokens,
            max_tokens: features.max_tokens,
            choices: features.choices,
            media_tokens: features.media_tokens,
            media_unknown_size: features.media_unknown_size,
            listed_price: None,
        }
    }

    /// The size of a decided request, with the list price of the model a
    /// wildcard route named.
    pub fn of_decision(decision: &Decision) -> Self {
        Size {
            listed_price: decision
                .upstream_model
                .as_deref()
                .map(switchyard_policies::builtin_price),
            ..Size::of(&decision.features)
        }
    }

    /// The prompt a budget reserves for on `backend`: the estimate, or the
    /// most its context window allows when a media part could not be
    /// sized, or when the backend has media and no published rule for it.
    fn reserved_prompt(self, app: &App, backend_index: usize) -> u32 {
        let unsized_here = self.media_unknown_size
            || (self.media_tokens > 0 && !publishes_media_rule(&app.backends[backend_index]));
        if !unsized_here {
            return self.prompt_tokens;
        }
        app.router
            .context_window(backend_index)
            .unwrap_or(UNKNOWN_WINDOW_PROMPT)
            .max(self.prompt_tokens)
    }

    /// Tokens counted against tokens-per-minute before the call: the
    /// prompt, and every answer's output limit.
    pub fn estimated_tokens(self) -> u32 {
        let output = self.max_tokens.unwrap_or(0).saturating_mul(self.choices);
        self.prompt_tokens.saturating_add(output)
    }
}

/// The prompt reserved for a media part that cannot be sized, on a backend
/// whose context window is not known: the largest common window.
const UNKNOWN_WINDOW_PROMPT: u32 = 128_000;

/// Whether the backend's provider publishes how it counts image, audio and
/// file tokens (OpenAI's and Anthropic's APIs; the built-in simulator
/// counts as they do); any other server's count depends on its model.
fn publishes_media_rule(backend: &BackendHandle) -> bool {
    matches!(
        backend.peer.provider,
        "openai" | "anthropic" | "switchyard.sim"
    )
}

/// The most a request could cost on a backend: what budgets reserve.
pub fn worst_cost(app: &App, backend_index: usize, size: Size) -> f64 {
    let backend = &app.backends[backend_index];
    let size = Size {
        prompt_tokens: size.reserved_prompt(app, backend_index),
        ..size
    };
    let output = worst_output(app, backend_index, size);
    match backend.pricing_for(size.listed_price) {
        // The prompt estimate gets a margin; output is the request's limit,
        // for each answer it asks for.
        // A priced service tier the request may carry can raise it.
        Pricing::Tokens(price) => {
            price.cost(&TokenCounts {
                input: u64::from(size.prompt_tokens) * 5 / 4 + 64,
                output: u64::from(output) * u64::from(size.choices.max(1)),
                ..TokenCounts::default()
            }) * billed_fields::worst_multiplier(backend)
        }
        // The hardware for as long as the latency model expects such a
        // request to take at worst (its p90).
        Pricing::Hourly { usd_per_hour } => {
            let shape = Shape {
                prompt_tokens: size.prompt_tokens,
                cached_tokens: 0,
                output_tokens: output,
                class: PromptClass::Prose,
            };
            let predicted = app.router.latency().predict(backend_index, &shape);
            // Paid while the request is served, not while it waits.
            let serving_ms = predicted.total_p90_ms - predicted.queue_ms;
            usd_per_hour * (serving_ms.max(0.0) / 1000.0) / 3600.0
        }
        // Budgeted keys never reach an unpriced backend (`admit_call`).
        Pricing::Free | Pricing::Unpriced => 0.0,
    }
}

/// The output one answer may run to: its `max_tokens`, else what the
/// backend's context window leaves after the prompt, else the configured
/// `accounting.default_max_tokens`.
fn worst_output(app: &App, backend_index: usize, size: Size) -> u32 {
    size.max_tokens.unwrap_or_else(|| {
        app.router
            .context_window(backend_index)
            .map_or(app.default_max_tokens, |window| {
                window.saturating_sub(size.prompt_tokens).max(1)
            })
    })
}
