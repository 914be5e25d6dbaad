//! The `telemetry:` section: where OpenTelemetry traces go. Off unless the
//! section names an OTLP endpoint or the environment does
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` and friends, read by the gateway at
//! start, which fill what the file leaves unset).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

/// Validated `telemetry:` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Telemetry {
    /// The OTLP/HTTP collector base URL (`/v1/traces` is appended unless
    /// the URL already ends in it); `None` leaves it to the environment.
    pub endpoint: Option<String>,
    /// Headers sent with every export (a collector's auth, a tenant).
    pub headers: BTreeMap<String, String>,
    /// How long one export may take before it counts as failed.
    pub timeout: Option<Duration>,
    /// Share of new traces sampled (a caller's sampled flag is followed).
    pub sample_ratio: f64,
    /// `service.name` of the spans; `OTEL_SERVICE_NAME` when unset, else
    /// `switchyard`.
    pub service_name: Option<String>,
    /// Record prompt and completion text on spans. Off: text never leaves.
    pub capture_content: bool,
    /// Finished spans waiting for export; past it new spans are dropped
    /// (and counted), never waited for.
    pub queue: usize,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry {
            endpoint: None,
            headers: BTreeMap::new(),
            timeout: None,
            sample_ratio: 1.0,
            service_name: None,
            capture_content: false,
            queue: 2048,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    #[serde(default)]
    otlp: RawOtlp,
    sample_ratio: Option<f64>,
    service_name: Option<String>,
    #[serde(default)]
    capture_content: bool,
    queue: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOtlp {
    endpoint: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout_ms: Option<u64>,
}

pub(super) fn validate(ck: &Checker<'_>, raw: RawTelemetry) -> Result<Telemetry, ConfigError> {
    let defaults = Telemetry::default();
    let sample_ratio = raw.sample_ratio.unwrap_or(defaults.sample_ratio);
    if !(0.0..=1.0).contains(&sample_ratio) {
        return Err(ck.error(&["telemetry", "sample_ratio"], "between 0 and 1"));
    }
    if let Some(endpoint) = &raw.otlp.endpoint
        && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
    {
        return Err(ck.error(
            &["telemetry", "otlp", "endpoint"],
            format!("`{endpoint}` is not an http:// or https:// URL (OTLP over HTTP)"),
        ));
    }
    for name in raw.otlp.headers.keys() {
        if !is_header_name(name) {
            return Err(ck.error(
                &["telemetry", "otlp", "headers"],
                format!("`{name}` is not a header name"),
            ));
        }
    }
    if raw.otlp.timeout_ms == Some(0) {
        return Err(ck.error(&["telemetry", "otlp", "timeout_ms"], "must be positive"));
    }
    let queue = raw.queue.unwrap_or(defaults.queue);
    if queue == 0 {
        return Err(ck.error(&["telemetry", "queue"], "must be positive"));
    }
    Ok(Telemetry {
        endpoint: raw.otlp.endpoint,
        headers: raw.otlp.headers,
        timeout: raw.otlp.timeout_ms.map(Duration::from_millis),
        sample_ratio,
        service_name: raw.service_name,
        capture_content: raw.capture_content,
        queue,
    })
}

/// An HTTP header name: one or more token characters (RFC 9110).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
