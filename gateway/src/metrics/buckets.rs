//! Histogram bucket boundaries. The GenAI ones are the semantic
//! conventions' (v1.41) explicit boundaries, so dashboards written for
//! other GenAI gateways read ours alike.

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// `gen_ai.client.operation.duration`: 0.01 s doubling to 81.92 s.
pub fn operation_duration() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

/// `gen_ai.client.token.usage`: 1 token, times four, to 67,108,864.
pub fn token_usage() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 14))
}

/// `gen_ai.server.time_to_first_token`.
pub fn time_to_first_token() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    ])
}

/// `gen_ai.server.time_per_output_token`.
pub fn time_per_output_token() -> Histogram {
    Histogram::new([
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
    ])
}

/// Measured minus predicted first-token time: under-predictions (the
/// person waited longer than predicted) are positive.
pub fn prediction_error() -> Histogram {
    Histogram::new([-2.0, -1.0, -0.5, -0.25, -0.1, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0])
}

/// The gateway's own time before a call: 50 us to about 1.6 s.
pub fn overhead() -> Histogram {
    Histogram::new(exponential_buckets(0.00005, 2.0, 16))
}
