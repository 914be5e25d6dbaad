//! The spans of one request: the SERVER span, the routing span and one
//! CLIENT span per upstream attempt or tool call.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, Method, StatusCode};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::trace::Span;
use switchyard_adapters::upstream::TraceContext;

use crate::telemetry::Telemetry;
use crate::telemetry::names::*;

/// A request's SERVER span, as the context its other spans hang below.
/// The span ends when the last copy is dropped: the request's answer has
/// been sent and every attempt's record is written.
#[derive(Clone)]
pub struct RequestTrace {
    cx: Context,
    request_id: Option<Arc<str>>,
}

impl Telemetry {
    /// The SERVER span of a request to `route` (one of the gateway's
    /// paths, or empty for any other: never the request's own path, so
    /// span names stay few), continuing the caller's trace when its
    /// headers carry one.
    pub fn server_span(
        &'static self,
        method: &Method,
        route: &'static str,
        headers: &HeaderMap,
        request_id: Option<&str>,
    ) -> RequestTrace {
        let parent = self.propagator.extract(&HeaderExtractor(headers));
        // A method outside HTTP's own is `_OTHER` (the conventions'), so a
        // client's invented methods make no new span names.
        let method = match *method {
            Method::GET
            | Method::POST
            | Method::PUT
            | Method::DELETE
            | Method::HEAD
            | Method::OPTIONS
            | Method::PATCH
            | Method::CONNECT
            | Method::TRACE => method.as_str(),
            _ => "_OTHER",
        };
        let name = match (route.is_empty(), method) {
            (true, "_OTHER") => Cow::Borrowed("HTTP"),
            (true, method) => Cow::Owned(method.to_owned()),
            (false, method) => Cow::Owned(format!("{method} {route}")),
        };
        let mut attributes = vec![KeyValue::new(HTTP_REQUEST_METHOD, method.to_owned())];
        if !route.is_empty() {
            attributes.push(KeyValue::new(HTTP_ROUTE, route));
        }
        if let Some(id) = request_id {
            attributes.push(KeyValue::new(REQUEST_ID, id.to_owned()));
        }
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        RequestTrace {
            cx: parent.with_span(span),
            request_id: request_id.map(Arc::from),
        }
    }
}

impl Telemetry {
    /// The trace context a span's outgoing request carries.
    fn context_of(&self, span: &Span) -> Option<TraceContext> {
        let cx = Context::new().with_remote_span_context(span.span_context().clone());
        let mut headers = HeaderMap::new();
        self.propagator
            .inject_context(&cx, &mut HeaderInjector(&mut headers));
        headers
            .remove("traceparent")
            .map(|traceparent| TraceContext {
                traceparent,
                tracestate: headers.remove("tracestate"),
            })
    }
}

impl RequestTrace {
    fn telemetry() -> Option<&'static Telemetry> {
        crate::telemetry::get()
    }

    /// The answer's status; a 5xx marks the span failed.
    pub fn answered(&self, status: StatusCode) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            HTTP_RESPONSE_STATUS_CODE,
            i64::from(status.as_u16()),
        ));
        if status.is_server_error() {
            span.set_attribute(KeyValue::new(ERROR_TYPE, status.as_str().to_owned()));
            span.set_status(Status::error(""));
        }
    }

    /// Records the routing decision as a span from `started` to now.
    pub fn routed(&self, started: SystemTime, attributes: Vec<KeyValue>) {
        let Some(telemetry) = Self::telemetry() else {
            return;
        };
        let mut span = telemetry
            .tracer
            .span_builder("route")
            .with_kind(SpanKind::Internal)
            .with_start_time(started)
            .with_attributes(self.with_request_id(attributes))
            .start_with_context(&telemetry.tracer, &self.cx);
        span.end();
    }

    /// A CLIENT span for one guardrail hook call, `guardrail NAME`, from
    /// `started` to now.
    pub fn guardrail(
        &self,
        name: &str,
        stage: &'static str,
        started: SystemTime,
        outcome: &'static str,
    ) {
        let Some(telemetry) = Self::telemetry() else {
            return;
        };
        let attributes = vec![
            KeyValue::new("switchyard.guardrail.name", name.to_owned()),
            KeyValue::new("switchyard.guardrail.stage", stage),
            KeyValue::new("switchyard.guardrail.outcome", outcome),
        ];
        let mut span = telemetry
            .tracer
            .span_builder(format!("guardrail {name}"))
            .with_kind(SpanKind::Client)
            .with_start_time(started)
            .with_attributes(self.with_request_id(attributes))
            .start_with_context(&telemetry.tracer, &self.cx);
        span.end();
    }

    /// A CLIENT span for one upstream attempt, named
    /// `{gen_ai.operation.name} {gen_ai.request.model}`, started at
    /// `started` (when the attempt began waiting for its backend).
    pub fn attempt(
        &self,
        operation: &'static str,
        model: &str,
        started: SystemTime,
        attributes: Vec<KeyValue>,
    ) -> Option<AttemptSpan> {
        let telemetry = Self::telemetry()?;
        let span = telemetry
            .tracer
            .span_builder(format!("{operation} {model}"))
            .with_kind(SpanKind::Client)
            .with_start_time(started)
            .with_attributes(self.with_request_id(attributes))
            .start_with_context(&telemetry.tracer, &self.cx);
        Some(AttemptSpan {
            context: telemetry.context_of(&span),
            span,
            capture_content: telemetry.capture_content,
            answer: AnswerMeta::default(),
        })
    }

    /// A CLIENT span for one tool call through `/mcp`, `execute_tool
    /// {tool}` (the GenAI conventions' `execute_tool`, with MCP's client
    /// attributes), from `started` until it is ended.
    pub fn tool_call(
        &self,
        tool: &str,
        started: SystemTime,
        attributes: Vec<KeyValue>,
    ) -> Option<ToolSpan> {
        let telemetry = Self::telemetry()?;
        let mut attributes = self.with_request_id(attributes);
        attributes.push(KeyValue::new(OPERATION_NAME, "execute_tool"));
        attributes.push(KeyValue::new(TOOL_NAME, tool.to_owned()));
        attributes.push(KeyValue::new(TOOL_TYPE, "extension"));
        attributes.push(KeyValue::new(MCP_METHOD_NAME, "tools/call"));
        let span = telemetry
            .tracer
            .span_builder(format!("execute_tool {tool}"))
            .with_kind(SpanKind::Client)
            .with_start_time(started)
            .with_attributes(attributes)
            .start_with_context(&telemetry.tracer, &self.cx);
        Some(ToolSpan {
            context: telemetry.context_of(&span),
            span,
        })
    }

    fn with_request_id(&self, mut attributes: Vec<KeyValue>) -> Vec<KeyValue> {
        if let Some(id) = &self.request_id {
            attributes.push(KeyValue::new(REQUEST_ID, id.to_string()));
        }
        attributes
    }
}

/// One tool call's CLIENT span, ended with its outcome.
pub struct ToolSpan {
    span: Span,
    context: Option<TraceContext>,
}

impl ToolSpan {
    /// The trace context the call carries to its server (in its
    /// `params._meta`, as the MCP conventions propagate it).
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.context.as_ref()
    }

    /// Ends the span at `ended`; an outcome other than `ok` (or a call
    /// its caller cancelled) is its error, `tool_error` when the tool said
    /// it failed.
    pub fn end(mut self, ended: SystemTime, outcome: &str, attributes: Vec<KeyValue>) {
        self.span.set_attributes(attributes);
        if !matches!(outcome, "ok" | "cancelled") {
            self.span
                .set_attribute(KeyValue::new(ERROR_TYPE, outcome.to_owned()));
            self.span.set_status(Status::error(outcome.to_owned()));
        }
        self.span.end_with_timestamp(ended);
    }
}

/// What an answer says of itself, gathered for its attempt's span.
#[derive(Debug, Default)]
pub struct AnswerMeta {
    pub id: Option<String>,
    /// The model that answered, as the backend named it.
    pub model: Option<String>,
    pub finish_reasons: Vec<String>,
}

impl AnswerMeta {
    /// Notes a chunk's or answer's id and model (the first seen stays) and
    /// its finish reasons.
    pub fn note<'a>(
        &mut self,
        id: &str,
        model: &str,
        finish_reasons: impl IntoIterator<Item = Option<&'a String>>,
    ) {
        if self.id.is_none() && !id.is_empty() {
            self.id = Some(id.to_owned());
        }
        if self.model.is_none() && !model.is_empty() {
            self.model = Some(model.to_owned());
        }
        self.finish_reasons
            .extend(finish_reasons.into_iter().flatten().cloned());
    }
}

/// One upstream attempt's CLIENT span, ended with its outcome.
pub struct AttemptSpan {
    span: Span,
    context: Option<TraceContext>,
    capture_content: bool,
    /// What the answer said of itself, as it came.
    pub answer: AnswerMeta,
}

impl AttemptSpan {
    /// The trace context the upstream request carries.
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.context.as_ref()
    }

    /// Whether prompt and completion text may be recorded.
    pub fn captures_content(&self) -> bool {
        self.capture_content
    }

    /// Ends the span at `ended` with these attributes and the answer's
    /// own; an outcome that is not an answer (nor a call stopped on
    /// purpose) is the span's error.
    pub fn end(mut self, ended: SystemTime, outcome: &str, attributes: Vec<KeyValue>) {
        self.span.set_attributes(attributes);
        let answer = std::mem::take(&mut self.answer);
        if let Some(id) = answer.id {
            self.span.set_attribute(KeyValue::new(RESPONSE_ID, id));
        }
        if let Some(model) = answer.model {
            self.span
                .set_attribute(KeyValue::new(RESPONSE_MODEL, model));
        }
        if !answer.finish_reasons.is_empty() {
            self.span.set_attribute(KeyValue::new(
                RESPONSE_FINISH_REASONS,
                strings(answer.finish_reasons),
            ));
        }
        if !matches!(outcome, "ok" | "escalated" | "cancelled" | "hedge-lost") {
            self.span
                .set_attribute(KeyValue::new(ERROR_TYPE, outcome.to_owned()));
            self.span.set_status(Status::error(outcome.to_owned()));
        }
        self.span.end_with_timestamp(ended);
    }
}

/// A list of strings as one attribute value.
pub fn strings<I: IntoIterator<Item = S>, S: Into<StringValue>>(items: I) -> Value {
    Value::Array(Array::String(items.into_iter().map(Into::into).collect()))
}
