//! `GET /metrics`, one scrape: the recorded series, then what is true now (breakers,
//! queues, speculation, budgets, the ledger's backlog, span export), read
//! from the running config into a registry made for this scrape.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use switchyard_policies::PromptClass;

use crate::metrics::families::{BackendLabel, Class};
use crate::state::app::App;

type FloatGauge = Gauge<f64, AtomicU64>;

/// OpenMetrics for a scraper that asks for it, else the Prometheus text
/// format (what `curl` and older scrapers read).
pub fn content_type(openmetrics: bool) -> &'static str {
    if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        prometheus_text::CONTENT_TYPE
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Budget {
    holder: String,
    period: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpanOutcome {
    outcome: &'static str,
}

/// The exposition of `app`'s metrics.
pub struct Scrape;

impl Scrape {
    pub fn render(app: &App, openmetrics: bool) -> String {
        let mut out = String::with_capacity(16 * 1024);
        let now = Self::now(app);
        let recorded = &app.metrics.families.registry;
        let written = if openmetrics {
            text::encode_registry(&mut out, recorded)
                .and_then(|()| text::encode_registry(&mut out, &now))
                .and_then(|()| text::encode_eof(&mut out))
        } else {
            prometheus_text::encode(&mut out, recorded)
                .and_then(|()| prometheus_text::encode(&mut out, &now))
        };
        if let Err(err) = written {
            tracing::error!(%err, "metrics exposition failed");
        }
        out
    }

    /// What is true now, as a registry of its own.
    fn now(app: &App) -> Registry {
        let mut r = Registry::default();
        let backend = |name: &str| BackendLabel {
            backend: name.into(),
        };
        let breaker_open = Family::<BackendLabel, Gauge>::default();
        let opened = Family::<BackendLabel, Counter>::default();
        let closed = Family::<BackendLabel, Counter>::default();
        let in_flight = Family::<BackendLabel, Gauge>::default();
        let queued = Family::<BackendLabel, Gauge>::default();
        for b in app.backends.iter() {
            let label = backend(&b.name);
            breaker_open
                .get_or_create(&label)
                .set(i64::from(b.breaker.state() != "closed"));
            let (open, close) = b.breaker.transitions();
            opened.get_or_create(&label).inc_by(open);
            closed.get_or_create(&label).inc_by(close);
            let (running, waiting) = b.load();
            in_flight.get_or_create(&label).set(i64::from(running));
            queued
                .get_or_create(&label)
                .set(i64::try_from(waiting).unwrap_or(i64::MAX));
        }
        r.register(
            "switchyard_breaker_open",
            "Whether the backend's circuit breaker is open or half-open (1) or closed (0)",
            breaker_open,
        );
        r.register(
            "switchyard_breaker_opened",
            "Times the backend's circuit breaker opened (a failed probe reopening it included)",
            opened,
        );
        r.register(
            "switchyard_breaker_closed",
            "Times the backend's circuit breaker closed again after a successful probe",
            closed,
        );
        r.register(
            "switchyard_backend_in_flight",
            "Requests this gateway has running on the backend",
            in_flight,
        );
        r.register(
            "switchyard_backend_queued",
            "Requests waiting for one of the backend's concurrency slots",
            queued,
        );
        Self::speculation(app, &mut r);
        let remaining = Family::<Budget, FloatGauge>::default();
        // Budgets are keys' and teams': their names are labels only where
        // `auth.metrics_key_labels` allows.
        let holders = app
            .config
            .auth
            .metrics_key_labels
            .then(|| app.budgets.remaining());
        for (holder, period, left) in holders.into_iter().flatten() {
            remaining
                .get_or_create(&Budget {
                    holder: holder.to_owned(),
                    period,
                })
                .set(left);
        }
        r.register("switchyard_budget_remaining_usd", "What each configured budget (key or team, by name) has left in its period: its limit less what is spent and held by requests in flight", remaining);
        if let Some(store) = &app.shared_state {
            let up = Gauge::<i64>::default();
            up.set(i64::from(store.is_up()));
            r.register(
                "switchyard_shared_state_up",
                "1 while Redis (state.redis) answers, 0 while shared budgets and rate limits fall back to on_unavailable",
                up,
            );
            let fallbacks = Counter::<u64>::default();
            fallbacks.inc_by(store.fallbacks());
            r.register(
                "switchyard_shared_state_fallbacks",
                "Budget and rate checks Redis could not serve since start: refused under fail_closed, enforced in this process under local",
                fallbacks,
            );
            let dropped = Counter::<u64>::default();
            dropped.inc_by(store.dropped_settlements());
            r.register(
                "switchyard_shared_state_dropped_settlements",
                "Settlements dropped because 100,000 were already waiting for Redis (their rows are in the ledger)",
                dropped,
            );
        }
        let pending = Gauge::<i64>::default();
        pending.set(i64::try_from(app.ledger.pending()).unwrap_or(i64::MAX));
        r.register(
            "switchyard_ledger_pending_rows",
            "Ledger rows in the writer's queue, plus rows waiting in background tasks to join it (in strict mode a row waiting for its commit is in both)",
            pending,
        );
        let ledger = app.ledger.health();
        r.register_with_unit(
            "switchyard_ledger_commit_lag",
            "From a row's handing to the ledger's writer to its commit",
            prometheus_client::registry::Unit::Seconds,
            ledger.commit_lag.clone(),
        );
        r.register(
            "switchyard_ledger_lost_rows",
            "Rows whose commit failed twice (each is logged whole at error)",
            ledger.lost.clone(),
        );
        if let Some(telemetry) = crate::telemetry::get() {
            let spans = Family::<SpanOutcome, Counter>::default();
            let stats = &telemetry.stats;
            for (outcome, n) in [
                ("exported", &stats.exported),
                ("dropped", &stats.dropped),
                ("failed", &stats.failed),
            ] {
                spans
                    .get_or_create(&SpanOutcome { outcome })
                    .inc_by(n.load(std::sync::atomic::Ordering::Relaxed));
            }
            r.register("switchyard_otlp_spans", "Finished spans by what became of them: exported, dropped (the export queue was full) or failed (the collector refused them or was away past the exporter's retries)", spans);
        }
        r
    }

    /// Speculative decoding per backend and prompt class, and the decode
    /// speed it gave.
    fn speculation(app: &App, r: &mut Registry) {
        let drafted = Family::<Class, Counter>::default();
        let accepted = Family::<Class, Counter>::default();
        let ratio = Family::<Class, FloatGauge>::default();
        let speed = Family::<Class, FloatGauge>::default();
        let stats = app.router.speculation();
        for (index, b) in app.backends.iter().enumerate() {
            for class in PromptClass::ALL {
                let label = Class {
                    backend: b.name.as_str().into(),
                    class: class.as_str(),
                };
                if let Some(rate) = app.metrics.decode_speed(index, class) {
                    speed.get_or_create(&label).set(rate);
                }
                let s = stats.get(index, class);
                if s.requests == 0 {
                    continue;
                }
                drafted.get_or_create(&label).inc_by(s.drafted);
                accepted.get_or_create(&label).inc_by(s.accepted);
                if let Some(recent) = s.recent {
                    ratio.get_or_create(&label).set(recent);
                }
            }
        }
        r.register(
            "switchyard_decode_tokens_per_second",
            "Effective decode speed (drafting included) by prompt class",
            speed,
        );
        r.register(
            "switchyard_draft_tokens",
            "Tokens drafted by speculative decoding",
            drafted,
        );
        r.register(
            "switchyard_draft_accepted_tokens",
            "Drafted tokens the target model kept",
            accepted,
        );
        r.register(
            "switchyard_draft_acceptance_ratio",
            "Recent accepted / drafted, weighted to the newest requests",
            ratio,
        );
    }
}
