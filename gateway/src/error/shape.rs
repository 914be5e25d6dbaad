//! From an error to its HTTP answer: status, type, code, param and
//! `retry-after`, in the caller's dialect.

use std::time::Duration;

use http::header::{ALLOW, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use switchyard_adapters::AdapterError;

use crate::error::dialect::Dialect;
use crate::error::kinds::{ErrorNote, GatewayError};
use crate::error::upstream::{
    credentials_refused, identifier, known_code, log_upstream_detail, upstream_detail,
    upstream_message, upstream_shape, window_refusal,
};
use crate::http::{Body, json_response};

/// How an error is shown to the caller.
pub(crate) struct Shape {
    pub(super) status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) error_type: &'static str,
    pub(super) code: Option<&'static str>,
    pub(super) param: Option<String>,
    pub(super) retry_after: Option<Duration>,
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
            GatewayError::NoSuchObject { .. } => Shape {
                param: Some("id".into()),
                ..shape(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    "invalid_request_error",
                    None,
                )
            },
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
            GatewayError::GuardrailBlocked { .. } => shape(
                StatusCode::BAD_REQUEST,
                "guardrail_blocked",
                "invalid_request_error",
                Some("guardrail_blocked"),
            ),
            GatewayError::GuardrailUnavailable { .. } => Shape {
                retry_after: Some(Duration::from_secs(1)),
                ..shape(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "guardrail_unavailable",
                    "overloaded_error",
                    Some("guardrail_unavailable"),
                )
            },
            GatewayError::SensitiveData { .. } => shape(
                StatusCode::BAD_REQUEST,
                "sensitive_data",
                "invalid_request_error",
                Some("sensitive_data"),
            ),
            GatewayError::Conflict { .. } => shape(
                StatusCode::CONFLICT,
                "conflict",
                "invalid_request_error",
                None,
            ),
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
            GatewayError::ModelNotAllowed { .. } => Shape {
                param: Some("model".into()),
                ..shape(
                    StatusCode::FORBIDDEN,
                    "model_not_allowed",
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

    /// A backend's own words for its failure, secrets taken out, for the
    /// failing call's log line (the caller is never given them).
    pub fn upstream_detail(&self) -> Option<String> {
        match self {
            GatewayError::Upstream(err) => Some(upstream_detail(err)),
            _ => None,
        }
    }

    /// For a backend's refusal of the request for its context window:
    /// the window it named, if it named one.
    pub fn window_refusal(&self) -> Option<Option<u32>> {
        match self {
            GatewayError::Upstream(err) => window_refusal(err),
            _ => None,
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

    /// Google's error object: `{"code": 429, "message": ..., "status":
    /// "RESOURCE_EXHAUSTED"}`, the status named as google.rpc.Code names it.
    pub fn gemini_error_object(&self) -> Value {
        let status = self.shape().status.as_u16();
        let name = match status {
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            409 => "ABORTED",
            429 => "RESOURCE_EXHAUSTED",
            499 => "CANCELLED",
            501 => "UNIMPLEMENTED",
            502 | 503 | 529 => "UNAVAILABLE",
            504 => "DEADLINE_EXCEEDED",
            400..=499 => "INVALID_ARGUMENT",
            _ => "INTERNAL",
        };
        json!({"code": status, "message": self.caller_message(), "status": name})
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
            Dialect::Gemini => {
                let body = json!({ "error": self.gemini_error_object() });
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
        let sensitive = match &self {
            GatewayError::SensitiveData { kinds, action, .. } => Some((kinds.clone(), *action)),
            _ => None,
        };
        response.extensions_mut().insert(ErrorNote {
            kind: shape.kind,
            message: self.caller_message(),
            sensitive,
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
pub(crate) fn shape(
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
