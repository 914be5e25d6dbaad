//! OpenTelemetry traces through the running gateway, received by a real
//! OTLP/HTTP endpoint in the test (protobuf decoded with the
//! opentelemetry-proto types): span names, kinds, parents, attributes, the
//! caller's trace continued and the attempt's `traceparent` sent upstream.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::json;
use support::{GatewayBuilder, chat, post_json, post_with};

/// Spans received, with their resource's `service.name`.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    fn services(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// Waits (up to 15 s) until `done` holds of the spans received.
    async fn until(&self, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        for _ in 0..150 {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("spans never arrived; have {:#?}", summary(&self.spans()));
    }
}

/// An OTLP/HTTP trace receiver on loopback: `POST /v1/traces` with an
/// `ExportTraceServiceRequest` body.
async fn collector() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let store = received.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let store = store.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let store = store.clone();
                    async move {
                        assert_eq!(req.uri().path(), "/v1/traces");
                        assert_eq!(req.headers()["content-type"], "application/x-protobuf");
                        assert_eq!(req.headers()["x-collector-tenant"], "ops");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let export = ExportTraceServiceRequest::decode(body).unwrap();
                        for resource in export.resource_spans {
                            let service = resource
                                .resource
                                .iter()
                                .flat_map(|r| &r.attributes)
                                .find(|kv| kv.key == "service.name")
                                .and_then(|kv| kv.value.as_ref()?.value.clone())
                                .map(|v| match v {
                                    Any::StringValue(s) => s,
                                    other => format!("{other:?}"),
                                })
                                .unwrap_or_default();
                            for scope in resource.scope_spans {
                                for span in scope.spans {
                                    store.0.lock().unwrap().push((service.clone(), span));
                                }
                            }
                        }
                        let reply = ExportTraceServiceResponse::default().encode_to_vec();
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::from(reply)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), received)
}

fn telemetry_section(endpoint: &str) -> String {
    format!(
        "telemetry:\n  otlp: {{endpoint: \"{endpoint}\", headers: {{x-collector-tenant: ops}}, timeout_ms: 2000}}\n  service_name: gateway-under-test\n"
    )
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Any> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(Any::StringValue(s)) => s.clone(),
        other => panic!("{key} of {}: {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(Any::IntValue(n)) => *n,
        other => panic!("{key} of {}: {other:?}", span.name),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn summary(spans: &[Span]) -> Vec<String> {
    spans
        .iter()
        .map(|s| {
            format!(
                "{} kind={} parent={}",
                s.name,
                s.kind,
                hex(&s.parent_span_id)
            )
        })
        .collect()
}

fn of_kind(spans: &[Span], kind: SpanKind) -> Vec<Span> {
    spans
        .iter()
        .filter(|s| s.kind == kind as i32)
        .cloned()
        .collect()
}

const CALLER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "b7ad6b7169203331";

#[tokio::test]
async fn a_request_continues_the_callers_trace_and_sends_its_attempt_upstream() {
    let (endpoint, received) = collector().await;
    let reply = r#"{"id":"cmpl-1","object":"chat.completion","created":1,"model":"upstream-local","choices":[{"index":0,"message":{"role":"assistant","content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":4}}}"#;
    let (upstream, seen) = support::recording_server(1, reply).await;
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &format!("http://{upstream}/v1"), &[])
        .split("auto", &[("local", 1)])
        .section(&telemetry_section(&endpoint))
        .start();
    let mut body = chat("auto", "say hi");
    body["max_tokens"] = json!(20);
    body["temperature"] = json!(0.25);
    body["top_p"] = json!(0.5);
    let answer = post_with(
        &gateway.url("/v1/chat/completions"),
        &body,
        &[
            (
                "traceparent",
                &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
            ),
            ("tracestate", "vendor=abc"),
        ],
    )
    .await;
    assert_eq!(answer.status, 200);
    let request_id = answer.header("x-request-id").unwrap().to_owned();
    let spans = received
        .until(|s| s.iter().any(|s| s.kind == SpanKind::Server as i32))
        .await;
    assert!(
        received
            .services()
            .iter()
            .all(|s| s == "gateway-under-test")
    );
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) == CALLER_TRACE),
        "{:?}",
        summary(&spans)
    );

    let server = &of_kind(&spans, SpanKind::Server)[0];
    assert_eq!(server.name, "POST /v1/chat/completions");
    assert_eq!(hex(&server.parent_span_id), CALLER_SPAN);
    assert_eq!(int(server, "http.response.status_code"), 200);
    assert_eq!(text(server, "switchyard.request_id"), request_id);

    let routing = &of_kind(&spans, SpanKind::Internal)[0];
    assert_eq!(routing.name, "route");
    assert_eq!(routing.parent_span_id, server.span_id);
    assert_eq!(text(routing, "switchyard.route"), "auto");
    assert_eq!(text(routing, "switchyard.strategy"), "split");
    assert_eq!(text(routing, "switchyard.reason"), "split");
    assert!(
        matches!(attr(routing, "switchyard.candidates"), Some(Any::ArrayValue(a)) if a.values.len() == 1)
    );

    let client = &of_kind(&spans, SpanKind::Client)[0];
    assert_eq!(client.name, "chat upstream-local");
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(text(client, "gen_ai.operation.name"), "chat");
    assert_eq!(text(client, "gen_ai.provider.name"), "openai_compatible");
    assert_eq!(text(client, "gen_ai.request.model"), "upstream-local");
    assert_eq!(int(client, "gen_ai.request.max_tokens"), 20);
    assert_eq!(
        attr(client, "gen_ai.request.temperature"),
        Some(&Any::DoubleValue(0.25))
    );
    assert_eq!(
        attr(client, "gen_ai.request.top_p"),
        Some(&Any::DoubleValue(0.5))
    );
    assert_eq!(text(client, "gen_ai.response.id"), "cmpl-1");
    assert_eq!(text(client, "gen_ai.response.model"), "upstream-local");
    match attr(client, "gen_ai.response.finish_reasons") {
        Some(Any::ArrayValue(reasons)) => assert_eq!(
            reasons
                .values
                .iter()
                .map(|v| v.value.clone())
                .collect::<Vec<_>>(),
            vec![Some(Any::StringValue("stop".into()))]
        ),
        other => panic!("finish reasons: {other:?}"),
    }
    assert_eq!(text(client, "server.address"), "127.0.0.1");
    assert_eq!(int(client, "server.port"), i64::from(upstream.port()));
    assert_eq!(int(client, "gen_ai.usage.input_tokens"), 11);
    assert_eq!(int(client, "gen_ai.usage.cache_read.input_tokens"), 4);
    assert_eq!(int(client, "gen_ai.usage.output_tokens"), 3);
    assert_eq!(text(client, "switchyard.backend"), "local");
    assert_eq!(text(client, "switchyard.role"), "primary");
    assert_eq!(text(client, "switchyard.request_id"), request_id);
    assert!(
        attr(client, "gen_ai.input.messages").is_none(),
        "content is off by default"
    );
    assert!(client.end_time_unix_nano >= client.start_time_unix_nano);

    // The upstream request carried the attempt span's context.
    let sent = seen.await.unwrap().remove(0).to_lowercase();
    let traceparent = sent
        .lines()
        .find_map(|l| l.strip_prefix("traceparent:"))
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(
        traceparent,
        format!("00-{CALLER_TRACE}-{}-01", hex(&client.span_id))
    );
    assert!(sent.contains("tracestate: vendor=abc"), "{sent}");
}

#[tokio::test]
async fn hedge_legs_and_fallbacks_are_sibling_client_spans() {
    let (endpoint, received) = collector().await;
    let stally = support::fast_sim(&["faults.stall_rate=1", "faults.stall_ms=1500"]);
    let steady = support::fast_sim(&[]);
    let (refusing, _) = support::canned_server(
        8,
        "503 Service Unavailable",
        r#"{"error":{"message":"busy","type":"overloaded"}}"#,
    )
    .await;
    let gateway = GatewayBuilder::new()
        .openai("stally", "small", &stally.base_url(), &["latency: {ttft_ms: 20, decode_tokens_per_s: 5000}"])
        .openai("steady", "small", &steady.base_url(), &["latency: {ttft_ms: 20, decode_tokens_per_s: 5000}"])
        .openai("refusing", "small", &format!("http://{refusing}/v1"), &[])
        .route("hedged", "hedge: {enabled: true}\nstrategy:\n  split:\n    weights: {stally: 1}\nfallbacks: [steady]")
        .route("falling", "strategy:\n  split:\n    weights: {refusing: 1}\nfallbacks: [steady]")
        .section(&telemetry_section(&endpoint))
        .start();
    let url = gateway.url("/v1/chat/completions");

    let mut body = chat("hedged", "hi");
    body["max_tokens"] = json!(16);
    let reply = post_json(&url, &body).await;
    assert_eq!(reply.header("x-switchyard-reason"), Some("hedge"));
    let spans = received
        .until(|s| {
            of_kind(s, SpanKind::Client).len() >= 2 && !of_kind(s, SpanKind::Server).is_empty()
        })
        .await;
    let server = &of_kind(&spans, SpanKind::Server)[0];
    let legs = of_kind(&spans, SpanKind::Client);
    assert!(
        legs.iter().all(|l| l.parent_span_id == server.span_id),
        "{:?}",
        summary(&spans)
    );
    let leg = |backend: &str| {
        legs.iter()
            .find(|l| text(l, "switchyard.backend") == backend)
            .unwrap()
    };
    assert_eq!(text(leg("stally"), "switchyard.role"), "primary");
    assert_eq!(text(leg("stally"), "switchyard.status"), "hedge-lost");
    assert_eq!(text(leg("steady"), "switchyard.role"), "hedge");
    assert_eq!(text(leg("steady"), "switchyard.status"), "ok");
    received.0.lock().unwrap().clear();

    let reply = post_json(&url, &chat("falling", "hi")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-reason"), Some("fallback"));
    let spans = received
        .until(|s| {
            !of_kind(s, SpanKind::Server).is_empty()
                && of_kind(s, SpanKind::Client)
                    .iter()
                    .any(|c| text(c, "switchyard.backend") == "steady")
        })
        .await;
    let server = &of_kind(&spans, SpanKind::Server)[0];
    let attempts = of_kind(&spans, SpanKind::Client);
    assert!(attempts.iter().all(|a| a.parent_span_id == server.span_id));
    let failed: Vec<_> = attempts
        .iter()
        .filter(|a| text(a, "switchyard.backend") == "refusing")
        .collect();
    assert!(!failed.is_empty());
    for attempt in &failed {
        assert_eq!(text(attempt, "error.type"), "upstream_overloaded");
        assert_eq!(attempt.status.as_ref().unwrap().code, 2, "an error status");
    }
    let served = attempts
        .iter()
        .find(|a| text(a, "switchyard.backend") == "steady")
        .unwrap();
    assert_eq!(text(served, "switchyard.role"), "fallback");
    // A fresh trace: no caller context was sent.
    assert!(server.parent_span_id.is_empty());
}

#[tokio::test]
async fn content_is_recorded_only_when_asked() {
    let (endpoint, received) = collector().await;
    let gateway = GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {}", support::FAST_SIM_FIELDS),
        )
        .section(&format!(
            "{}  capture_content: true\n",
            telemetry_section(&endpoint)
        ))
        .start();
    let mut body = chat("local", "the secret word is teal");
    body["stream"] = json!(true);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(reply.status, 200);
    let spans = received
        .until(|s| !of_kind(s, SpanKind::Client).is_empty())
        .await;
    let client = &of_kind(&spans, SpanKind::Client)[0];
    assert_eq!(text(client, "gen_ai.provider.name"), "switchyard.sim");
    // Streamed: the answer's id and finish reason come from its chunks.
    assert!(text(client, "gen_ai.response.id").starts_with("chatcmpl-"));
    assert!(
        matches!(attr(client, "gen_ai.response.finish_reasons"), Some(Any::ArrayValue(a)) if !a.values.is_empty())
    );
    assert_eq!(
        attr(client, "gen_ai.request.stream"),
        Some(&Any::BoolValue(true))
    );
    assert!(
        matches!(attr(client, "gen_ai.response.time_to_first_chunk"), Some(Any::DoubleValue(s)) if *s >= 0.0)
    );
    let input = text(client, "gen_ai.input.messages");
    assert!(input.contains("the secret word is teal"), "{input}");
    let output: serde_json::Value =
        serde_json::from_str(&text(client, "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    let streamed = output[0]["parts"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(streamed.starts_with("[sim]"), "{streamed}");

    // A whole answer's text too, though its usage came with it.
    received.0.lock().unwrap().clear();
    body["stream"] = json!(false);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    let spans = received
        .until(|s| !of_kind(s, SpanKind::Client).is_empty())
        .await;
    let client = &of_kind(&spans, SpanKind::Client)[0];
    let output: serde_json::Value =
        serde_json::from_str(&text(client, "gen_ai.output.messages")).unwrap();
    assert_eq!(
        output[0]["parts"][0]["content"],
        reply.json()["choices"][0]["message"]["content"]
    );
}
