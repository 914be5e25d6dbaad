//! The one edge where every failure becomes an HTTP answer: status, an
//! OpenAI-shaped body `{"error":{"message","type","param","code"}}`, and a
//! low-cardinality kind for logs and metrics.

use std::time::Duration;

use http::header::{ALLOW, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use switchyard_adapters::AdapterError;
use switchyard_adapters::anthropic::TranslateError;

use crate::admit::access::Exhausted;
use crate::http::{Body, json_response};

/// The API dialect a caller speaks, which decides the shape of its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
        }
    }

    /// The dialect of an endpoint, by path (Anthropic's live under /v1/messages).
    pub fn of_path(path: &str) -> Self {
        let path = path.strip_prefix("/v1").unwrap_or(path);
        if path.starts_with("/messages") {
            Dialect::Anthropic
        } else {
            Dialect::OpenAi
        }
    }

    /// The dialect of a request: its endpoint's, except on `/v1/models`,
    /// which both dialects share and which answers in Anthropic's shapes
    /// when the caller sends `anthropic-version` (every Anthropic SDK does).
    pub fn of_request(path: &str, headers: &http::HeaderMap) -> Self {
        let shared = path
            .strip_prefix("/v1")
            .unwrap_or(path)
            .starts_with("/models");
        if shared && headers.contains_key("anthropic-version") {
            Dialect::Anthropic
        } else {
            Dialect::of_path(path)
        }
    }
}

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
    #[error("unsupported content type `{got}`; send application/json")]
    UnsupportedMediaType { got: String },
    #[error("the request body could not be read: {message}")]
    BodyRead { message: String },
    #[error("the request body did not arrive within {}s", after.as_secs_f64())]
    BodyTimeout { after: Duration },
    #[error("no endpoint at {path}")]
    NotFound { path: String },
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
}

/// How an error is shown to the caller.
struct Shape {
    status: StatusCode,
    kind: &'static str,
    error_type: &'static str,
    code: Option<&'static str>,
    param: Option<String>,
    retry_after: Option<Duration>,
}

impl GatewayError {
    fn shape(&self) -> Shape {
        match self {
            GatewayError::MalformedJson { .. } => shape(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                "invalid_request_error",
                Some("invalid_json"),
            ),
            GatewayError::InvalidField { param, .. } => Shape {
                param: Some(param.clone()),
                ..shape(
                    StatusCode::BAD_REQUEST,
                    "invalid_field",
                    "invalid_request_error",
                    Some("invalid_value"),
                )
            },
            GatewayError::UnknownModel { .. } => Shape {
                param: Some("model".into()),
                ..shape(
                    StatusCode::NOT_FOUND,
                    "unknown_model",
                    "invalid_request_error",
                    Some("model_not_found"),
                )
            },
            GatewayError::ContextTooLong { .. } => Shape {
                param: Some("messages".into()),
                ..shape(
                    StatusCode::BAD_REQUEST,
                    "context_length_exceeded",
                    "invalid_request_error",
                    Some("context_length_exceeded"),
                )
            },
            GatewayError::BodyTooLarge { .. } => shape(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "invalid_request_error",
                Some("request_too_large"),
            ),
            GatewayError::UnsupportedMediaType { .. } => shape(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "invalid_request_error",
                Some("unsupported_media_type"),
            ),
            GatewayError::BodyTimeout { .. } => shape(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "invalid_request_error",
                Some("request_timeout"),
            ),
            GatewayError::BodyRead { .. } => shape(
                StatusCode::BAD_REQUEST,
                "body_read",
                "invalid_request_error",
                None,
            ),
            GatewayError::NotFound { .. } => shape(
                StatusCode::NOT_FOUND,
                "not_found",
                "invalid_request_error",
                Some("unknown_url"),
            ),
            GatewayError::ConfigRejected { .. } => shape(
                StatusCode::UNPROCESSABLE_ENTITY,
                "config_rejected",
                "invalid_request_error",
                Some("invalid_config"),
            ),
            GatewayError::ResponsesNotStored => shape(
                StatusCode::NOT_FOUND,
                "responses_not_stored",
                "invalid_request_error",
                Some("responses_not_stored"),
            ),
            GatewayError::MethodNotAllowed { .. } => shape(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "invalid_request_error",
                Some("method_not_allowed"),
            ),
            GatewayError::Overloaded { .. } => Shape {
                retry_after: Some(Duration::from_secs(1)),
                ..shape(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    "overloaded_error",
                    Some("overloaded"),
                )
            },
            GatewayError::ShuttingDown => Shape {
                retry_after: Some(Duration::from_secs(1)),
                ..shape(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "shutting_down",
                    "overloaded_error",
                    Some("shutting_down"),
                )
            },
            GatewayError::SharedStateUnavailable { .. } => Shape {
                retry_after: Some(Duration::from_secs(1)),
                ..shape(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "shared_state_unavailable",
                    "overloaded_error",
                    Some("shared_state_unavailable"),
                )
            },
            GatewayError::Unauthorized { .. } => shape(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "invalid_request_error",
                Some("invalid_api_key"),
            ),
            GatewayError::Forbidden { .. } => {
                shape(StatusCode::FORBIDDEN, "forbidden", "permission_error", None)
            }
            GatewayError::RateLimited { retry_after, .. } => Shape {
                retry_after: Some(*retry_after),
                ..shape(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    "rate_limit_error",
                    Some("rate_limit_exceeded"),
                )
            },
            GatewayError::BudgetExhausted(_) => shape(
                StatusCode::TOO_MANY_REQUESTS,
                "budget_exhausted",
                "insufficient_quota",
                Some("insufficient_quota"),
            ),
            GatewayError::UnpricedForBudget { .. } => shape(
                StatusCode::FORBIDDEN,
                "unpriced_backend",
                "permission_error",
                Some("unpriced_backend"),
            ),
            GatewayError::BackendNotAllowed { .. } => Shape {
                param: Some("model".into()),
                ..shape(
                    StatusCode::FORBIDDEN,
                    "backend_not_allowed",
                    "permission_error",
                    Some("model_not_allowed"),
                )
            },
            GatewayError::Upstream(err) => upstream_shape(err),
            GatewayError::Internal { .. } => shape(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "server_error",
                None,
            ),
            GatewayError::LedgerNotCommitted => shape(
                StatusCode::INTERNAL_SERVER_ERROR,
                "ledger_not_committed",
                "server_error",
                Some("ledger_not_committed"),
            ),
        }
    }

    /// The metrics label for this error.
    pub fn kind(&self) -> &'static str {
        self.shape().kind
    }

    /// The message the caller is given. A backend's own words never reach
    /// the caller (they can hold internal URLs and key fragments): its
    /// failures are told in fixed words, and their detail goes to the log.
    pub fn caller_message(&self) -> String {
        match self {
            GatewayError::Upstream(err) => upstream_message(err),
            other => other.to_string(),
        }
    }

    /// Logs what the caller is not told: a backend's own words (at debug,
    /// redacted).
    pub fn log_detail(&self) {
        if let GatewayError::Upstream(err) = self {
            log_upstream_detail(err);
        }
    }

    /// The OpenAI error object (the value of `"error"`).
    pub fn error_object(&self) -> Value {
        let shape = self.shape();
        let message = self.caller_message();
        // An upstream 4xx is the caller's to fix: give the backend's error
        // type, code and param when they are plain identifiers.
        if let GatewayError::Upstream(AdapterError::Status {
            status,
            body: Some(body),
            ..
        }) = self
            && *status < 500
            && !credentials_refused(*status)
        {
            let field = |name: &str| body.get(name).and_then(identifier);
            return json!({
                "message": message,
                "type": field("type").unwrap_or(shape.error_type),
                "param": field("param"),
                "code": known_code(body).or_else(|| field("code")),
            });
        }
        json!({"message": message, "type": shape.error_type, "param": shape.param, "code": shape.code})
    }

    /// Anthropic's error object: `{"type": ..., "message": ...}`, typed by status.
    pub fn anthropic_error_object(&self) -> Value {
        let kind = match self.shape().status.as_u16() {
            400 | 405 | 415 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            _ => "api_error",
        };
        json!({"type": kind, "message": self.caller_message()})
    }

    /// The error as the caller's dialect writes it.
    pub fn into_response_for(self, dialect: Dialect) -> Response<Body> {
        self.log_detail();
        match dialect {
            Dialect::OpenAi => self.into_response(),
            Dialect::Anthropic => {
                let body = json!({"type": "error", "error": self.anthropic_error_object()});
                self.respond_with(&body)
            }
        }
    }

    pub fn into_response(self) -> Response<Body> {
        let body = json!({ "error": self.error_object() });
        self.respond_with(&body)
    }

    fn respond_with(self, body: &Value) -> Response<Body> {
        let shape = self.shape();
        let mut response = json_response(shape.status, body);
        response.extensions_mut().insert(ErrorNote {
            kind: shape.kind,
            message: self.caller_message(),
        });
        if let Some(after) = shape.retry_after {
            // Whole seconds, rounded up: retrying early only fails again.
            let seconds = after.as_secs() + u64::from(after.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        if let GatewayError::MethodNotAllowed { allowed, .. } = self {
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static(allowed));
        }
        response
    }
}

/// A shape with no `param` and no `retry-after`.
fn shape(
    status: StatusCode,
    kind: &'static str,
    error_type: &'static str,
    code: Option<&'static str>,
) -> Shape {
    Shape {
        status,
        kind,
        error_type,
        code,
        param: None,
        retry_after: None,
    }
}

fn upstream_shape(err: &AdapterError) -> Shape {
    match err {
        AdapterError::Connect { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_connect",
            "upstream_error",
            Some("upstream_unreachable"),
        ),
        AdapterError::Certificate { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_certificate",
            "upstream_error",
            Some("upstream_certificate_refused"),
        ),
        AdapterError::Reset { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_reset",
            "upstream_error",
            Some("upstream_reset"),
        ),
        AdapterError::Protocol { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_protocol",
            "upstream_error",
            Some("upstream_bad_response"),
        ),
        AdapterError::Timeout { .. } => shape(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            "upstream_error",
            Some("upstream_timeout"),
        ),
        AdapterError::Overloaded { retry_after } => Shape {
            retry_after: Some(retry_after.unwrap_or(Duration::from_secs(1))),
            ..shape(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_overloaded",
                "overloaded_error",
                Some("upstream_overloaded"),
            )
        },
        // The backend refused the gateway's own credentials: the operator's
        // fault, not the caller's, and another backend may still answer.
        AdapterError::Status { status, .. } if credentials_refused(*status) => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_auth",
            "upstream_error",
            Some("upstream_credentials_refused"),
        ),
        AdapterError::Status { status, .. } if *status < 500 => {
            // Pass the backend's verdict on the request through as it was.
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
            let kind = if status == StatusCode::TOO_MANY_REQUESTS {
                "upstream_rate_limited"
            } else {
                "upstream_rejected"
            };
            shape(status, kind, "invalid_request_error", None)
        }
        AdapterError::Status { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_error",
            Some("upstream_error"),
        ),
        AdapterError::InvalidRequest { param, .. } => Shape {
            param: param.clone(),
            ..shape(
                StatusCode::BAD_REQUEST,
                "invalid_for_backend",
                "invalid_request_error",
                None,
            )
        },
        AdapterError::Internal { .. } => shape(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "server_error",
            None,
        ),
    }
}

/// 401 and 403 from a backend answer the gateway's credentials (callers'
/// keys never reach a backend).
pub fn credentials_refused(status: u16) -> bool {
    matches!(status, 401 | 403)
}

/// An upstream failure in fixed words: what happened, never what the
/// backend said.
fn upstream_message(err: &AdapterError) -> String {
    match err {
        AdapterError::Connect { .. } => "could not connect to the backend".into(),
        AdapterError::Certificate { reason, .. } => {
            format!("the backend's TLS certificate was refused: {reason}")
        }
        AdapterError::Timeout { .. } | AdapterError::Overloaded { .. } => err.to_string(),
        AdapterError::Reset { .. } => "the backend closed the connection".into(),
        AdapterError::Status { status, .. } if credentials_refused(*status) => format!(
            "the backend refused the gateway's credentials (HTTP {status}); the gateway's operator must fix the backend's api_key"
        ),
        AdapterError::Status { status: 429, .. } => {
            "the backend is rate limiting requests (HTTP 429)".into()
        }
        AdapterError::Status { status, body, .. } if *status < 500 => {
            match body.as_ref().and_then(known_code) {
                Some(code) => format!(
                    "the prompt and output do not fit the backend's context window (HTTP {status}, {code})"
                ),
                None => format!("the backend rejected the request (HTTP {status})"),
            }
        }
        AdapterError::Status { status, .. } => format!("the backend failed (HTTP {status})"),
        AdapterError::Protocol { .. } => "the backend sent an answer that could not be read".into(),
        // Made here, not by the backend: the caller's to read.
        AdapterError::InvalidRequest { .. } | AdapterError::Internal { .. } => err.to_string(),
    }
}

/// The whole story of an upstream failure, for the operator: at debug, with
/// secrets taken out; a refused certificate at warn, since only the
/// operator can fix it.
fn log_upstream_detail(err: &AdapterError) {
    if let AdapterError::Certificate { .. } = err {
        tracing::warn!(detail = %crate::http::redact::redact(&err.to_string()), "backend TLS certificate refused");
        return;
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        let body = match err {
            AdapterError::Status {
                body: Some(body), ..
            } => body.to_string(),
            _ => String::new(),
        };
        tracing::debug!(
            detail = %crate::http::redact::redact(&err.to_string()),
            body = %crate::http::redact::redact(&body),
            "upstream error"
        );
    }
}

/// A backend error field that is a plain identifier (`invalid_request_error`,
/// `context_length_exceeded`), safe to show; free text is not.
fn identifier(value: &Value) -> Option<&str> {
    value.as_str().filter(|s| {
        !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    })
}

/// The one code clients act on, whatever the engine calls it: a prompt
/// longer than the backend's context is `context_length_exceeded`.
fn known_code(body: &Value) -> Option<&'static str> {
    let named = |field: &str| body.get(field).and_then(Value::as_str);
    let context = ["context_length_exceeded", "exceed_context_size_error"];
    [named("code"), named("type")]
        .into_iter()
        .flatten()
        .any(|name| context.contains(&name))
        .then_some("context_length_exceeded")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_client_errors_keep_the_backends_code() {
        let err = GatewayError::Upstream(AdapterError::Status {
            status: 400,
            message: "too long".into(),
            body: Some(
                json!({"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"}),
            ),
        });
        let object = err.error_object();
        assert_eq!(object["code"], "context_length_exceeded");
        assert_eq!(err.into_response().status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn a_backends_words_never_reach_the_caller() {
        let leaky = "invalid key sk-proj-1234567890 at http://10.1.2.3:8000/internal";
        let errors = [
            AdapterError::Status {
                status: 400,
                message: leaky.into(),
                body: Some(json!({"message": leaky, "type": leaky, "code": "bad_thing"})),
            },
            AdapterError::Status {
                status: 500,
                message: leaky.into(),
                body: None,
            },
            AdapterError::Status {
                status: 401,
                message: leaky.into(),
                body: Some(json!({"message": leaky, "type": "authentication_error"})),
            },
            AdapterError::Connect {
                message: leaky.into(),
            },
            AdapterError::Reset {
                message: leaky.into(),
            },
            AdapterError::Protocol {
                message: leaky.into(),
            },
        ];
        for err in errors {
            let err = GatewayError::Upstream(err);
            for body in [
                err.error_object().to_string(),
                err.anthropic_error_object().to_string(),
            ] {
                assert!(
                    !body.contains("sk-proj") && !body.contains("10.1.2.3"),
                    "{body}"
                );
            }
        }
    }

    #[test]
    fn refused_gateway_credentials_are_a_502() {
        for status in [401, 403] {
            let err = GatewayError::Upstream(AdapterError::Status {
                status,
                message: "Incorrect API key provided: sk-abc***xyz".into(),
                body: None,
            });
            assert_eq!(err.kind(), "upstream_auth");
            assert_eq!(err.error_object()["code"], "upstream_credentials_refused");
            assert_eq!(err.into_response().status(), StatusCode::BAD_GATEWAY);
        }
    }

    #[test]
    fn overload_says_when_to_retry() {
        let response = GatewayError::Overloaded {
            what: "full".into(),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
    }
}
