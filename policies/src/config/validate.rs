//! Raw configuration -> validated configuration. Every check names the field
//! path it is about, and the line where the text has one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::raw::{RawBackend, RawConfig, RawSim};
use super::validate_adapter::Adapters;
use super::{
    Backend, BackendAdapter, Config, ConfigError, Limits, ServerSettings, SimFaults, SimParams,
    SimPreset, SimSpeculation, Timeouts,
};

/// Carries the text so errors can be placed on a line.
pub(super) struct Checker<'a> {
    text: &'a str,
    source: &'a str,
}

/// A field path as the parser writes one: names joined by `.`, a list's
/// index in brackets (`auth.keys[0].budget`).
fn field_path(segments: &[&str]) -> String {
    let mut out = String::new();
    for segment in segments {
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(segment);
        }
    }
    out
}

impl<'a> Checker<'a> {
    /// Errors about `text` (YAML), named `source`; with no text, errors
    /// carry no line.
    pub(super) fn new(text: &'a str, source: &'a str) -> Checker<'a> {
        Checker { text, source }
    }

    pub(super) fn error(&self, path: &[&str], message: impl Into<String>) -> ConfigError {
        ConfigError {
            source_name: self.source.to_owned(),
            path: field_path(path),
            line: super::locate::line_of(self.text, path),
            message: message.into(),
        }
    }
}

pub(super) fn validate(raw: RawConfig, text: &str, source: &str) -> Result<Config, ConfigError> {
    let ck = Checker { text, source };
    let server = validate_server(&ck, raw.server)?;
    if raw.backends.is_empty() {
        return Err(ck.error(&["backends"], "at least one backend is required"));
    }
    let mut backends = BTreeMap::new();
    for (name, backend) in raw.backends {
        let backend = validate_backend(&ck, &name, backend)?;
        backends.insert(name, backend);
    }
    let mut routes = BTreeMap::new();
    for (name, route) in raw.routes {
        let route = super::validate_route::validate_route(&ck, &name, route, &backends)?;
        routes.insert(name, route);
    }
    super::validate_route::check_model_names(&ck, &backends, &routes)?;
    let predictors = super::predictors::validate(&ck, raw.predictors, &backends)?;
    super::predictors::check_uses(&ck, &predictors, &mut routes)?;
    let guardrails = super::guardrails::validate(&ck, raw.guardrails)?;
    super::guardrails::check_routes(&ck, &routes, &guardrails)?;
    let default_max_tokens = raw.accounting.default_max_tokens.unwrap_or(4096);
    if default_max_tokens == 0 {
        return Err(ck.error(&["accounting", "default_max_tokens"], "must be at least 1"));
    }
    Ok(Config {
        default_max_tokens,
        server,
        backends,
        routes,
        reference: super::validate_accounting::reference(&ck, raw.accounting)?,
        ledger: super::validate_accounting::ledger(&ck, raw.ledger)?,
        auth: super::validate_accounting::auth(&ck, raw.auth)?,
        limits: validate_limits(&ck, raw.limits)?,
        latency_hints: raw.latency_hints,
        telemetry: raw
            .telemetry
            .map(|t| super::telemetry::validate(&ck, t))
            .transpose()?,
        state: super::state::validate(&ck, raw.state)?,
        predictors,
        guardrails,
        mcp: super::mcp::validate_mcp(&ck, raw.mcp)?,
        batches: super::batches::validate_batches(&ck, raw.batches)?,
    })
}

fn validate_server(
    ck: &Checker<'_>,
    raw: super::raw::RawServer,
) -> Result<ServerSettings, ConfigError> {
    let listen: SocketAddr = raw.listen.parse().map_err(|_| {
        ck.error(
            &["server", "listen"],
            format!("`{}` is not an address such as 127.0.0.1:8080", raw.listen),
        )
    })?;
    if raw.max_body_bytes == 0 {
        return Err(ck.error(&["server", "max_body_bytes"], "must be positive"));
    }
    for (field, n) in [
        ("header_read_timeout_ms", raw.header_read_timeout_ms),
        ("body_read_timeout_ms", raw.body_read_timeout_ms),
        ("body_idle_timeout_ms", raw.body_idle_timeout_ms),
        ("max_header_bytes", raw.max_header_bytes as u64),
        ("max_connections", raw.max_connections as u64),
        (
            "http2_max_concurrent_streams",
            u64::from(raw.http2_max_concurrent_streams),
        ),
        ("http2_idle_timeout_ms", raw.http2_idle_timeout_ms),
        (
            "http2_keepalive_interval_ms",
            raw.http2_keepalive_interval_ms,
        ),
        ("http2_keepalive_timeout_ms", raw.http2_keepalive_timeout_ms),
        (
            "max_connection_age_ms",
            raw.max_connection_age_ms.unwrap_or(1),
        ),
    ] {
        if n == 0 {
            return Err(ck.error(&["server", field], "must be positive"));
        }
    }
    if raw.max_concurrent_requests == 0 {
        return Err(ck.error(&["server", "max_concurrent_requests"], "must be positive"));
    }
    if let Some(tls) = &raw.tls
        && !tls.crl_files.is_empty()
        && tls.client_ca_file.is_none()
    {
        return Err(ck.error(
            &["server", "tls", "crl_files"],
            "needs client_ca_file (revocation lists apply to client certificates)",
        ));
    }
    Ok(server_settings(raw, listen))
}

/// The settings of a `server:` section already checked.
pub(super) fn server_settings(raw: super::raw::RawServer, listen: SocketAddr) -> ServerSettings {
    ServerSettings {
        listen,
        max_body_bytes: raw.max_body_bytes,
        max_concurrent_requests: raw.max_concurrent_requests,
        shutdown_grace: Duration::from_millis(raw.shutdown_grace_ms),
        header_read_timeout: Duration::from_millis(raw.header_read_timeout_ms),
        body_read_timeout: Duration::from_millis(raw.body_read_timeout_ms),
        body_idle_timeout: Duration::from_millis(raw.body_idle_timeout_ms),
        max_header_bytes: raw.max_header_bytes,
        max_connections: raw.max_connections,
        http2_max_concurrent_streams: raw.http2_max_concurrent_streams,
        http2_idle_timeout: Duration::from_millis(raw.http2_idle_timeout_ms),
        http2_keepalive_interval: Duration::from_millis(raw.http2_keepalive_interval_ms),
        http2_keepalive_timeout: Duration::from_millis(raw.http2_keepalive_timeout_ms),
        max_connection_age: raw.max_connection_age_ms.map(Duration::from_millis),
        tls: raw.tls.map(|tls| super::TlsFiles {
            cert_file: tls.cert_file,
            key_file: tls.key_file,
            client_ca_file: tls.client_ca_file,
            crl_files: tls.crl_files,
        }),
        watch_config: raw.watch_config,
    }
}

fn validate_limits(ck: &Checker<'_>, raw: super::raw::RawLimits) -> Result<Limits, ConfigError> {
    if raw.max_n == 0 {
        return Err(ck.error(&["limits", "max_n"], "must be at least 1"));
    }
    Ok(Limits { max_n: raw.max_n })
}

/// Names appear in URLs, headers and metrics: keep them to a safe alphabet.
pub(super) fn check_name(ck: &Checker<'_>, section: &str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'));
    if ok {
        Ok(())
    } else {
        Err(ck.error(
            &[section, name],
            "names use letters, digits and - _ . : / only",
        ))
    }
}

fn validate_backend(ck: &Checker<'_>, name: &str, raw: RawBackend) -> Result<Backend, ConfigError> {
    let interactive_reserve = interactive_reserve(ck, name, &raw)?;
    check_name(ck, "backends", name)?;
    if raw.max_response_bytes == Some(0) {
        return Err(ck.error(
            &["backends", name, "max_response_bytes"],
            "must be positive",
        ));
    }
    let adapter = super::validate_adapter::validate_adapter(
        ck,
        name,
        Adapters {
            openai: raw.openai,
            anthropic: raw.anthropic,
            sim: raw.sim,
            gemini: raw.gemini,
            azure: raw.azure,
            vertex: raw.vertex,
            bedrock: raw.bedrock,
        },
    )?;
    let defaults = Timeouts::default();
    let ms = |v: Option<u64>, d: Duration| v.map(Duration::from_millis).unwrap_or(d);
    let timeouts = Timeouts {
        connect: ms(raw.timeouts.connect_ms, defaults.connect),
        first_byte: ms(raw.timeouts.first_byte_ms, defaults.first_byte),
        idle: ms(raw.timeouts.idle_ms, defaults.idle),
    };
    for (field, value) in [
        ("connect_ms", timeouts.connect),
        ("first_byte_ms", timeouts.first_byte),
        ("idle_ms", timeouts.idle),
    ] {
        if value.is_zero() {
            return Err(ck.error(&["backends", name, "timeouts", field], "must be positive"));
        }
    }
    if raw.max_concurrency == Some(0) {
        return Err(ck.error(&["backends", name, "max_concurrency"], "must be positive"));
    }
    let upstream_model = raw.model.unwrap_or_else(|| name.to_owned());
    let service_tiers = match &raw.price {
        Some(price) => super::validate_accounting::service_tiers(ck, name, price)?,
        None => Vec::new(),
    };
    let price_from_list = raw.price.is_none() && !raw.tier.is_local();
    let pricing =
        super::validate_accounting::pricing(ck, name, raw.tier, &upstream_model, raw.price)?;
    let hints = raw.latency.unwrap_or_default();
    let latency = super::LatencyHintsConfig {
        ttft: hints.ttft_ms.map(Duration::from_millis),
        prefill_tokens_per_s: hints.prefill_tokens_per_s,
        decode_tokens_per_s: hints.decode_tokens_per_s,
        concurrency: hints.concurrency,
    };
    for (field, value) in [
        ("prefill_tokens_per_s", latency.prefill_tokens_per_s),
        ("decode_tokens_per_s", latency.decode_tokens_per_s),
    ] {
        if value.is_some_and(|v| !v.is_finite() || v <= 0.0) {
            return Err(ck.error(
                &["backends", name, "latency", field],
                "must be a positive number",
            ));
        }
    }
    let defaults = super::BreakerSettings::default();
    let breaker = raw.breaker.map_or(defaults, |b| super::BreakerSettings {
        failures: b.failures.unwrap_or(defaults.failures).max(1),
        cooldown: b
            .cooldown_ms
            .map(Duration::from_millis)
            .unwrap_or(defaults.cooldown),
    });
    let health_check = raw
        .health_check
        .map(|h| super::health::health_check(ck, name, h))
        .transpose()?;
    let defaults = super::PrefixCacheSettings::default();
    let prefix_cache = raw
        .prefix_cache
        .map_or(defaults, |p| super::PrefixCacheSettings {
            kv_tokens: p.kv_tokens.unwrap_or(defaults.kv_tokens),
            ttl: p.ttl_s.map_or(defaults.ttl, Duration::from_secs),
            balance: p.balance.unwrap_or(defaults.balance),
            max_imbalance: p.max_imbalance.unwrap_or(defaults.max_imbalance),
            share: p.share.unwrap_or(defaults.share),
        });
    Ok(Backend {
        name: name.to_owned(),
        tier: raw.tier,
        local: raw.local.unwrap_or(raw.tier.is_local()),
        upstream_model,
        pricing,
        max_queue: raw.max_queue.unwrap_or(0),
        interactive_reserve,
        latency,
        breaker,
        price_from_list,
        health_check,
        prefix_cache,
        context_window: raw.context_window.or(match &adapter {
            BackendAdapter::Sim(params) => Some(params.context_window),
            _ => None,
        }),
        adapter,
        timeouts,
        max_concurrency: raw.max_concurrency,
        hardware: raw.hardware,
        max_response_bytes: raw
            .max_response_bytes
            .unwrap_or(super::DEFAULT_MAX_RESPONSE_BYTES),
        service_tiers,
        deny_fields: raw.passthrough.deny,
        tls: backend_tls(ck, name, raw.tls)?,
    })
}

/// A backend's `tls:` section; a client certificate needs both its files.
/// The share of a local backend's default for `interactive_reserve`: a
/// quarter of its slots stay free of batch lines.
const DEFAULT_INTERACTIVE_RESERVE: f64 = 0.25;

/// The slots batch lines leave free on a backend: `interactive_reserve` of
/// `max_concurrency`, rounded down, but never the last slot (a one-slot
/// server still drains batches between interactive requests); none on a
/// cloud backend, or one with no limit.
fn interactive_reserve(
    ck: &Checker<'_>,
    name: &str,
    raw: &RawBackend,
) -> Result<usize, ConfigError> {
    let share = raw
        .interactive_reserve
        .unwrap_or(DEFAULT_INTERACTIVE_RESERVE);
    if !(0.0..=1.0).contains(&share) {
        return Err(ck.error(
            &["backends", name, "interactive_reserve"],
            "must be a share from 0 to 1",
        ));
    }
    let local = raw.local.unwrap_or(raw.tier.is_local());
    Ok(match raw.max_concurrency {
        Some(slots) if local => {
            ((slots as f64 * share).floor() as usize).min(slots.saturating_sub(1))
        }
        _ => 0,
    })
}

fn backend_tls(
    ck: &Checker<'_>,
    name: &str,
    raw: Option<super::raw::RawBackendTls>,
) -> Result<super::BackendTls, ConfigError> {
    let Some(raw) = raw else {
        return Ok(super::BackendTls::default());
    };
    let client_cert = match (raw.cert_file, raw.key_file) {
        (None, None) => None,
        (Some(cert_file), Some(key_file)) => Some(super::ClientCert {
            cert_file,
            key_file,
        }),
        _ => {
            return Err(ck.error(
                &["backends", name, "tls"],
                "cert_file and key_file come together (the gateway's client certificate and its key)",
            ));
        }
    };
    Ok(super::BackendTls {
        roots: raw.roots,
        ca_file: raw.ca_file,
        client_cert,
    })
}

/// Simulator parameters from their raw form: the preset (small by default)
/// with the given fields overriding it.
pub(super) fn sim_params(
    ck: &Checker<'_>,
    path: &[&str],
    raw: RawSim,
) -> Result<SimParams, ConfigError> {
    let base = raw.preset.unwrap_or(SimPreset::Small).params();
    let at = |field: &'static str| {
        let mut p = path.to_vec();
        p.push(field);
        p
    };
    let positive = |field: &'static str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(ck.error(&at(field), "must be a positive number"))
        }
    };
    let probability = |field: &'static str, v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(ck.error(&at(field), "must be between 0 and 1"))
        }
    };
    let speculative = match raw.speculative {
        None => base.speculative,
        Some(s) => {
            probability("speculative.acceptance_rate", s.acceptance_rate)?;
            if s.draft_tokens == 0 {
                return Err(ck.error(&at("speculative.draft_tokens"), "must be positive"));
            }
            Some(SimSpeculation {
                acceptance_rate: s.acceptance_rate,
                draft_tokens: s.draft_tokens,
            })
        }
    };
    let params = SimParams {
        seed: raw.seed.unwrap_or(base.seed),
        base_ttft: raw
            .base_ttft_ms
            .map(Duration::from_millis)
            .unwrap_or(base.base_ttft),
        prefill_tokens_per_s: positive(
            "prefill_tokens_per_s",
            raw.prefill_tokens_per_s
                .unwrap_or(base.prefill_tokens_per_s),
        )?,
        decode_tokens_per_s: positive(
            "decode_tokens_per_s",
            raw.decode_tokens_per_s.unwrap_or(base.decode_tokens_per_s),
        )?,
        decode_halving_context: positive(
            "decode_halving_context",
            raw.decode_halving_context
                .unwrap_or(base.decode_halving_context),
        )?,
        jitter: probability("jitter", raw.jitter.unwrap_or(base.jitter))?,
        max_concurrency: raw.max_concurrency.unwrap_or(base.max_concurrency),
        max_queue: raw.max_queue.unwrap_or(base.max_queue),
        prefix_cache_blocks: raw.prefix_cache_blocks.unwrap_or(base.prefix_cache_blocks),
        context_window: raw.context_window.unwrap_or(base.context_window),
        default_max_tokens: raw.default_max_tokens.unwrap_or(base.default_max_tokens),
        embedding_dimensions: raw
            .embedding_dimensions
            .unwrap_or(base.embedding_dimensions),
        speculative,
        faults: SimFaults {
            error_rate: probability("faults.error_rate", raw.faults.error_rate)?,
            stall_rate: probability("faults.stall_rate", raw.faults.stall_rate)?,
            stall: Duration::from_millis(raw.faults.stall_ms),
            reset_rate: probability("faults.reset_rate", raw.faults.reset_rate)?,
        },
    };
    for (field, value) in [
        ("max_concurrency", params.max_concurrency),
        ("default_max_tokens", params.default_max_tokens as usize),
        ("embedding_dimensions", params.embedding_dimensions),
        ("context_window", params.context_window as usize),
    ] {
        if value == 0 {
            return Err(ck.error(&at(field), "must be positive"));
        }
    }
    Ok(params)
}

/// Simulator parameters from a YAML mapping of the `sim:` section's fields.
pub(super) fn sim_params_from_yaml(text: &str, source: &str) -> Result<SimParams, ConfigError> {
    let ck = Checker { text, source };
    let raw: RawSim = super::raw::parse_any(text, source)?;
    sim_params(&ck, &[], raw)
}

pub(super) fn apply_latency_hints(
    config: &mut Config,
    text: &str,
    source: &str,
) -> Result<(), ConfigError> {
    let hints: BTreeMap<String, super::raw::RawLatencyHints> = super::raw::parse_any(text, source)?;
    let ck = Checker { text, source };
    for (name, hint) in hints {
        let Some(backend) = config.backends.get_mut(&name) else {
            let known: Vec<&str> = config.backends.keys().map(String::as_str).collect();
            return Err(ck.error(
                &[&name],
                format!(
                    "no such backend in the config (it has {})",
                    known.join(", ")
                ),
            ));
        };
        for (field, value) in [
            ("prefill_tokens_per_s", hint.prefill_tokens_per_s),
            ("decode_tokens_per_s", hint.decode_tokens_per_s),
        ] {
            if value.is_some_and(|v| !v.is_finite() || v <= 0.0) {
                return Err(ck.error(&[&name, field], "must be a positive number"));
            }
        }
        let own = &mut backend.latency;
        own.ttft = own.ttft.or(hint.ttft_ms.map(Duration::from_millis));
        own.prefill_tokens_per_s = own.prefill_tokens_per_s.or(hint.prefill_tokens_per_s);
        own.decode_tokens_per_s = own.decode_tokens_per_s.or(hint.decode_tokens_per_s);
        own.concurrency = own.concurrency.or(hint.concurrency);
    }
    Ok(())
}
