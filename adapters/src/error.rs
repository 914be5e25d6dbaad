//! Adapter errors say whose fault a failure is and whether retrying may help,
//! so the gateway can map them to HTTP and decide on retries and fallbacks.

use std::time::Duration;

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The backend or the network to it.
    Upstream,
    /// The request as the caller sent it.
    Downstream,
    /// This process.
    Internal,
}

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    Connect,
    FirstByte,
    Idle,
}

impl TimeoutPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::FirstByte => "first byte",
            TimeoutPhase::Idle => "next stream chunk",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum AdapterError {
    #[error("could not connect to the backend: {message}")]
    Connect { message: String },
    /// The backend's TLS certificate failed verification (or it refused
    /// the gateway's): a configuration problem, not an outage. `reason` is
    /// a fixed phrase (expired, not valid for the host, ...).
    #[error("the backend's TLS certificate was refused ({reason}): {message}")]
    Certificate {
        reason: &'static str,
        message: String,
    },
    #[error("the backend did not answer in time (waiting for {})", phase.as_str())]
    Timeout {
        phase: TimeoutPhase,
        after: Duration,
    },
    #[error("the backend closed the connection: {message}")]
    Reset { message: String },
    #[error("the backend is overloaded")]
    Overloaded { retry_after: Option<Duration> },
    /// The backend answered with an error status. `body` is its error object
    /// when it sent one in the OpenAI shape; `retry_after` is when a
    /// rate-limited (429) backend said to come back.
    #[error("the backend answered {status}: {message}")]
    Status {
        status: u16,
        message: String,
        body: Option<serde_json::Value>,
        retry_after: Option<Duration>,
    },
    /// The gateway could not get its own credentials for the backend (an
    /// access token, a role's keys). `message` is in fixed words.
    #[error("no credentials for the backend: {message}")]
    Credentials { message: String },
    #[error("the backend sent something that could not be read: {message}")]
    Protocol { message: String },
    #[error("{message}")]
    InvalidRequest {
        message: String,
        param: Option<String>,
    },
    #[error("internal error: {message}")]
    Internal { message: String },
}

impl AdapterError {
    pub fn fault(&self) -> Fault {
        match self {
            AdapterError::Connect { .. }
            | AdapterError::Certificate { .. }
            | AdapterError::Timeout { .. }
            | AdapterError::Reset { .. }
            | AdapterError::Overloaded { .. }
            | AdapterError::Credentials { .. }
            | AdapterError::Protocol { .. } => Fault::Upstream,
            AdapterError::Status { status, .. } if *status < 500 && *status != 429 => {
                Fault::Downstream
            }
            AdapterError::Status { .. } => Fault::Upstream,
            AdapterError::InvalidRequest { .. } => Fault::Downstream,
            AdapterError::Internal { .. } => Fault::Internal,
        }
    }

    /// Whether the same request may succeed if sent again (here or to
    /// another backend).
    pub fn retryable(&self) -> bool {
        match self {
            AdapterError::Connect { .. }
            | AdapterError::Timeout { .. }
            | AdapterError::Reset { .. }
            | AdapterError::Overloaded { .. }
            // Another backend has its own credentials.
            | AdapterError::Credentials { .. } => true,
            AdapterError::Status { status, .. } => *status == 429 || *status >= 500,
            // Sent again, the same certificate is refused again.
            AdapterError::Certificate { .. }
            | AdapterError::Protocol { .. }
            | AdapterError::InvalidRequest { .. }
            | AdapterError::Internal { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_are_not_retried() {
        let bad = AdapterError::Status {
            status: 400,
            message: "context too long".into(),
            body: None,
            retry_after: None,
        };
        assert_eq!(bad.fault(), Fault::Downstream);
        assert!(!bad.retryable());
        let limited = AdapterError::Status {
            status: 429,
            message: "slow down".into(),
            body: None,
            retry_after: None,
        };
        assert_eq!(limited.fault(), Fault::Upstream);
        assert!(limited.retryable());
    }
}
