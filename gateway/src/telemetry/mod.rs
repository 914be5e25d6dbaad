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
mod otlp;
mod peer;
mod spans;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _};
use switchyard_policies::Telemetry as Settings;

pub use crate::telemetry::export::ExportStats;
use crate::telemetry::export::{OtlpExporter, QueueProcessor};
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
    let url = traces_endpoint(&settings);
    let uri: http::Uri = url
        .parse()
        .map_err(|_| anyhow::anyhow!("telemetry: the collector's URL `{url}` is not valid"))?;
    let shown_url = shown(&uri);
    let timeout = export_timeout(&settings);
    let mut exporter = OtlpExporter {
        http: switchyard_adapters::upstream::http_client(timeout)
            .map_err(|err| anyhow::anyhow!("telemetry: {err}"))?,
        timeout,
        url: uri,
        headers: export_headers(&settings),
        resource: Resource::builder_empty().build(),
    };
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
    Ok(Some(shown_url))
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

/// Where traces go: the config's endpoint, else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else
/// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`, as the OTLP
/// specification reads them.
fn traces_endpoint(settings: &Settings) -> String {
    if let Some(endpoint) = &settings.endpoint {
        return traces_url(endpoint);
    }
    if let Some(endpoint) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return endpoint;
    }
    match env("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Some(base) => traces_url(&base),
        None => "http://localhost:4318/v1/traces".into(),
    }
}

/// The headers every export carries: the config's, then the environment's
/// (`OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`:
/// `name=value` pairs split by commas, values percent-decoded, empty ones
/// left out), which win for a name both give. A pair that is not a valid
/// header is left out.
fn export_headers(settings: &Settings) -> HeaderMap {
    let from_env = env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        .or_else(|| env("OTEL_EXPORTER_OTLP_HEADERS"))
        .unwrap_or_default();
    headers_of(&settings.headers, &from_env)
}

/// The config's `headers`, then the pairs of `from_env`, which win.
fn headers_of<'a>(
    config: impl IntoIterator<Item = (&'a String, &'a String)>,
    from_env: &str,
) -> HeaderMap {
    let pairs = from_env
        .split(',')
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            Some((name.trim().to_owned(), percent_decoded(value.trim())))
        })
        .filter(|(name, value)| !name.is_empty() && !value.is_empty());
    let mut headers = HeaderMap::new();
    let config = config.into_iter().map(|(k, v)| (k.clone(), v.clone()));
    for (name, value) in config.chain(pairs) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            headers.insert(name, value);
        }
    }
    headers
}

/// `%XX` escapes decoded; the text as it is when one is not a valid escape
/// or they do not decode to UTF-8 (as opentelemetry-otlp reads them).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            out.push(bytes[at]);
            at += 1;
            continue;
        }
        let escaped = bytes
            .get(at + 1..at + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        let Some(byte) = escaped else {
            return text.to_owned();
        };
        out.push(byte);
        at += 3;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// A URL as logs may show it: without its userinfo and query, which can
/// hold credentials.
fn shown(url: &http::Uri) -> String {
    match (url.scheme_str(), url.authority()) {
        (Some(scheme), Some(authority)) => {
            let host = authority.as_str().rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}{}", url.path())
        }
        _ => url.path().to_owned(),
    }
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
    fn the_environments_headers_win_over_the_configs() {
        let config: std::collections::BTreeMap<String, String> = [
            ("x-tenant".to_owned(), "config".to_owned()),
            ("x-kept".to_owned(), "yes".to_owned()),
        ]
        .into();
        let headers = headers_of(
            &config,
            "x-tenant=env, authorization=Basic%20YWI%3D,bad name=1,empty=",
        );
        assert_eq!(headers["x-tenant"], "env");
        assert_eq!(headers["x-kept"], "yes");
        assert_eq!(headers["authorization"], "Basic YWI=");
        assert_eq!(headers.len(), 3, "{headers:?}");
    }

    #[test]
    fn header_values_are_percent_decoded() {
        assert_eq!(percent_decoded("Basic%20abc%3D%3D"), "Basic abc==");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("%zz%41"), "%zz%41", "kept as it is");
        let url: http::Uri = "https://user:secret@collector:4318/v1/traces?token=x"
            .parse()
            .unwrap();
        assert_eq!(shown(&url), "https://collector:4318/v1/traces");
    }

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
