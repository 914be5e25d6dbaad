//! OpenTelemetry traces, exported over OTLP/HTTP: one SERVER span per
//! request (continuing the caller's `traceparent`), a routing span with the
//! decision, and one CLIENT span per upstream attempt with the GenAI
//! semantic-convention attributes. Hedge legs, fallbacks and cascade steps
//! are sibling CLIENT spans, as is each tool call through `/mcp`
//! (`execute_tool`). Each upstream request carries its span's
//! `traceparent` (a tool call, in its `params._meta`), so a model or tool
//! server's own traces join.
//!
//! Off unless the config or the environment names a collector; then
//! nothing here runs and requests pay for none of it.

mod export;
pub mod names;
mod peer;
mod spans;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _};
use switchyard_policies::Telemetry as Settings;

pub use crate::telemetry::export::ExportStats;
use crate::telemetry::export::{OtlpClient, QueueProcessor};
pub use crate::telemetry::peer::Peer;
pub use crate::telemetry::spans::{AnswerMeta, AttemptSpan, RequestTrace, ToolSpan, strings};

/// The process's trace pipeline.
pub struct Telemetry {
    tracer: SdkTracer,
    /// Kept so the provider lives as long as the process.
    _provider: SdkTracerProvider,
    processor: QueueProcessor,
    propagator: TraceContextPropagator,
    /// Prompts and completions go on spans only when this is set.
    capture_content: bool,
    pub stats: Arc<ExportStats>,
}

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

/// The trace pipeline, when traces are on.
pub fn get() -> Option<&'static Telemetry> {
    TELEMETRY.get()
}

/// Starts exporting traces when the config's `telemetry:` section or the
/// environment names a collector; returns where they go. Runs inside the
/// runtime (the exporting task is spawned on it). Traces are the
/// process's: a config reload does not change them.
pub fn start(settings: Option<&Settings>) -> anyhow::Result<Option<String>> {
    let settings = settings.cloned().unwrap_or_default();
    if !enabled(&settings) {
        return Ok(None);
    }
    let timeout = export_timeout(&settings);
    let client = OtlpClient {
        http: switchyard_adapters::upstream::http_client(timeout)
            .map_err(|err| anyhow::anyhow!("telemetry: {err}"))?,
        timeout,
    };
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(client)
        .with_timeout(timeout)
        .with_headers(
            settings
                .headers
                .clone()
                .into_iter()
                .collect::<HashMap<_, _>>(),
        );
    let endpoint = settings.endpoint.as_deref().map(traces_url);
    if let Some(endpoint) = &endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    let mut exporter = builder
        .build()
        .map_err(|err| anyhow::anyhow!("telemetry: the OTLP exporter: {err}"))?;
    let resource = resource(&settings);
    exporter.set_resource(&resource);
    let stats = Arc::new(ExportStats::default());
    let processor = QueueProcessor::start(exporter, settings.queue, stats.clone());
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor.clone())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            settings.sample_ratio,
        ))))
        .with_resource(resource)
        .build();
    let scope = InstrumentationScope::builder("switchyard")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let telemetry = Telemetry {
        tracer: provider.tracer_with_scope(scope),
        _provider: provider,
        processor,
        propagator: TraceContextPropagator::new(),
        capture_content: settings.capture_content,
        stats,
    };
    let _ = TELEMETRY.set(telemetry);
    Ok(Some(endpoint.unwrap_or_else(|| {
        "the OTEL_EXPORTER_OTLP_* endpoint".into()
    })))
}

impl Telemetry {
    /// Exports what is queued; for shutdown.
    pub async fn flush(&self) {
        self.processor.flush(Duration::from_secs(5)).await;
    }
}

/// Traces are on when a collector is named, and the standard switch does
/// not turn the SDK off.
fn enabled(settings: &Settings) -> bool {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return false;
    }
    settings.endpoint.is_some()
        || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A collector's base URL as the traces URL (`/v1/traces` appended unless
/// it is there), as the OTLP specification treats `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// The export deadline: the config's, else the standard variables'
/// (milliseconds), else the specification's 10 seconds.
fn export_timeout(settings: &Settings) -> Duration {
    settings
        .timeout
        .or_else(|| {
            env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
                .or_else(|| env("OTEL_EXPORTER_OTLP_TIMEOUT"))
                .and_then(|ms| ms.trim().parse().ok())
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis)
        })
        .unwrap_or(Duration::from_secs(10))
}

/// `service.name` from the config, else as the environment sets it
/// (`OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES`, read by the SDK's
/// detectors), else `switchyard`.
fn resource(settings: &Settings) -> Resource {
    let builder = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    let from_environment = env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attrs| {
            attrs
                .split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    match &settings.service_name {
        Some(name) => builder.with_service_name(name.clone()),
        None if from_environment => builder,
        None => builder.with_service_name("switchyard"),
    }
    .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path_once() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
