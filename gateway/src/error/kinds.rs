//! Every way a request can fail, as one enum with structured fields, and
//! the note an error answer leaves for the request's ledger row.

use std::time::Duration;

use switchyard_adapters::AdapterError;
use switchyard_adapters::anthropic::TranslateError;

use crate::error::exhausted::Exhausted;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("the request body is not valid JSON: {message}")]
    MalformedJson { message: String },
    #[error("invalid `{param}`: {message}")]
    InvalidField { param: String, message: String },
    #[error("the model `{model}` does not exist; available models: {}", available.join(", "))]
    UnknownModel {
        model: String,
        available: Vec<String>,
    },
    #[error(
        "the prompt and the output asked for need about {needed} tokens; the largest context window this model name reaches holds {largest_window}"
    )]
    ContextTooLong { needed: u32, largest_window: u32 },
    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("unsupported content type `{got}`; send {want}")]
    UnsupportedMediaType { got: String, want: &'static str },
    #[error("the request body could not be read: {message}")]
    BodyRead { message: String },
    #[error("the request body did not arrive within {}s", after.as_secs_f64())]
    BodyTimeout { after: Duration },
    #[error("no endpoint at {path}")]
    NotFound { path: String },
    /// A file or batch that is not there, or not the caller's (each key
    /// sees only its own): OpenAI's words for it.
    #[error("No such {object} object: {id}")]
    NoSuchObject { object: &'static str, id: String },
    #[error(
        "Switchyard does not store responses, so it cannot retrieve, list or delete one; responses passed through to OpenAI itself are stored there"
    )]
    ResponsesNotStored,
    #[error("{path} does not accept {method}; use {allowed}")]
    MethodNotAllowed {
        path: String,
        method: String,
        allowed: &'static str,
    },
    #[error("overloaded: {what}; retry shortly")]
    Overloaded { what: String },
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// Redis holds the shared budgets and rate limits, cannot be reached,
    /// and `state.redis.on_unavailable` is `fail_closed`.
    #[error(
        "the shared {what} store (Redis) cannot be reached, and this gateway refuses rather than enforce limits alone; retry shortly"
    )]
    SharedStateUnavailable { what: &'static str },
    #[error("{message}")]
    Unauthorized { message: String },
    /// Nothing the caller could send would be accepted (the config lacks
    /// what would let it in).
    #[error("{message}")]
    Forbidden { message: String },
    /// The request holds sensitive data (`kinds`, never the values) that
    /// its policy refuses, or keeps local where no local backend can serve.
    #[error("{message}")]
    SensitiveData {
        kinds: String,
        /// The policy's action: `refuse`, or `local_only` with no local
        /// backend able.
        action: switchyard_policies::SensitiveAction,
        message: String,
    },
    /// A route's guardrail hook blocked the request (or its answer).
    #[error("{message}")]
    GuardrailBlocked { message: String },
    /// A guardrail hook that fails closed failed or was late.
    #[error("{message}")]
    GuardrailUnavailable { message: String },
    /// The thing asked for clashes with what is there (a key's name in use).
    #[error("{message}")]
    Conflict { message: String },
    #[error("{message}; retry after {}s", retry_after.as_secs().max(1))]
    RateLimited {
        message: String,
        retry_after: Duration,
    },
    #[error("{0}")]
    BudgetExhausted(Box<Exhausted>),
    #[error(
        "backend `{backend}` has no price, so no budget can hold its cost; this key has a budget and may not use it"
    )]
    UnpricedForBudget { backend: String },
    #[error("this key may not name backend `{backend}` directly; use a route: {}", routes.join(", "))]
    BackendNotAllowed {
        backend: String,
        routes: Vec<String>,
    },
    #[error("this key may not use model `{model}`; it may use: {}", allowed.join(", "))]
    ModelNotAllowed { model: String, allowed: Vec<String> },
    #[error(transparent)]
    Upstream(#[from] AdapterError),
    #[error("internal error: {message}")]
    Internal { message: String },
    /// A reload found the config file invalid (or unusable); the running
    /// config stays.
    #[error("the config was not reloaded, the running one stays: {message}")]
    ConfigRejected { message: String },
    /// Strict durability: the answer's ledger row could not be committed,
    /// so the answer is withheld.
    #[error(
        "the request's ledger row could not be committed (strict durability); its answer is withheld, retry later"
    )]
    LedgerNotCommitted,
}

impl From<Exhausted> for GatewayError {
    fn from(exhausted: Exhausted) -> Self {
        GatewayError::BudgetExhausted(Box::new(exhausted))
    }
}

/// A field of the caller's dialect that has no canonical equivalent.
impl From<TranslateError> for GatewayError {
    fn from(err: TranslateError) -> Self {
        GatewayError::InvalidField {
            param: err.param,
            message: err.message,
        }
    }
}

/// What an error answer said, kept on the response for whoever records the
/// request after it was answered (a refusal's ledger row).
#[derive(Debug, Clone)]
pub struct ErrorNote {
    pub kind: &'static str,
    pub message: String,
    /// For a request refused for sensitive data: the kinds found and the
    /// policy's action, for the refusal's row.
    pub sensitive: Option<(String, switchyard_policies::SensitiveAction)>,
}
